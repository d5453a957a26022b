//! A child process (the real `robotsgate` binary) whose stderr is read line by line, so a
//! test waits (bounded) for what it says instead of guessing with sleeps.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{ExitStatus, Stdio};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::wait::{BOUND, bounded, within};

/// A running child and the stderr lines it wrote so far.
pub struct Spawned {
    /// The child (killed when dropped).
    pub child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    /// Every stderr line read so far (ANSI colours removed), for failure messages.
    pub seen: Vec<String>,
    /// The working directory made for it by [`Spawned::start`] (removed when dropped).
    _cwd: Option<tempfile::TempDir>,
}

impl Spawned {
    /// Starts `bin` with `args`: no colours, no `RUST_LOG`, stdin and stdout closed, stderr
    /// read line by line. It runs in a new temporary directory, so that what it writes to
    /// relative paths (the default `robotsgate-snapshots` folder, say) never lands in the
    /// source tree; pass absolute paths.
    pub fn start(bin: &str, args: &[&str]) -> Spawned {
        let cwd = tempfile::tempdir().unwrap_or_else(|e| panic!("a working directory for {bin}: {e}"));
        let mut spawned = Spawned::start_in(bin, args, cwd.path());
        spawned._cwd = Some(cwd);
        spawned
    }

    /// [`Spawned::start`] with `dir` as the working directory, which the caller keeps.
    pub fn start_in(bin: &str, args: &[&str], dir: &Path) -> Spawned {
        let mut child = Command::new(bin)
            .current_dir(dir)
            .args(args)
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {bin}: {e}"));
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(strip_ansi(&line)).is_err() {
                    break;
                }
            }
        });
        Spawned { child, lines, seen: Vec::new(), _cwd: None }
    }

    /// Waits (bounded) for a stderr line that satisfies `pred`; panics with what the
    /// process said when its stderr ends or the bound passes first.
    pub async fn wait_line(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let (seen, lines) = (&mut self.seen, &mut self.lines);
        let found = within(async {
            while let Some(line) = lines.recv().await {
                seen.push(line.clone());
                if pred(&line) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Some(Some(line)) => line,
            Some(None) => panic!("{what}: robotsgate's stderr ended; it said:\n{}", self.seen.join("\n")),
            None => panic!("{what}: not within {BOUND:?}; robotsgate said:\n{}", self.seen.join("\n")),
        }
    }

    /// Waits for the line containing `running` ("robotsgate is running ... at
    /// http://ADDR") and returns its address.
    pub async fn running_at(&mut self, running: &str) -> SocketAddr {
        self.address(running, "at http://").await
    }

    /// The address after `marker` in the line containing `contains`, whether that line was
    /// said already (lines come in any order) or is still to come (waited for, bounded).
    pub async fn address(&mut self, contains: &str, marker: &str) -> SocketAddr {
        let said = self.seen.iter().find(|l| l.contains(contains)).cloned();
        let line = match said {
            Some(line) => line,
            None => self.wait_line(contains, |l| l.contains(contains)).await,
        };
        let at = line.split(marker).nth(1).unwrap_or_else(|| panic!("no {marker:?} in {line:?}"));
        let addr: String = at.chars().take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':').collect();
        addr.parse().unwrap_or_else(|_| panic!("no address after {marker:?} in {line:?}"))
    }

    /// Everything it wrote to stderr, once stderr ends (waited for, bounded): for a
    /// process that exited, what it said.
    pub async fn said(&mut self) -> String {
        let (seen, lines) = (&mut self.seen, &mut self.lines);
        let ended = within(async {
            while let Some(line) = lines.recv().await {
                seen.push(line);
            }
        })
        .await;
        assert!(ended.is_some(), "stderr still open after {BOUND:?}: {}", self.seen.join("\n"));
        self.seen.join("\n")
    }

    /// Sends a signal with kill(1) (`name`: e.g. `-TERM`).
    pub fn signal(&self, name: &str) {
        let pid = self.child.id().expect("child still running").to_string();
        let status = std::process::Command::new("kill").args([name, &pid]).status().expect("run kill");
        assert!(status.success(), "kill {name} {pid} failed");
    }

    /// Waits (bounded) for the process to exit.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        bounded("robotsgate exits", self.child.wait()).await.expect("wait for robotsgate")
    }
}

/// Removes ANSI colour sequences (`ESC [ ... letter`).
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
