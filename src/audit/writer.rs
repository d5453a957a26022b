//! The audit thread: what the log does off the requests' path. It writes records that no
//! request is waiting for (fetch records, the log's own) within [`LINGER`], and with
//! `Durability::Buffered` every record, in batches; with `Durability::Synced` it syncs
//! what requests wrote (one `fdatasync` for all written meanwhile) and releases them; it
//! answers flushes, and on shutdown writes everything, closes the log with a `close`
//! record and syncs it.
//!
//! It is a thread of its own rather than a task: it blocks on the disk (syncs), and it
//! sleeps while records gather instead of being woken for each (requests wake it only
//! when it waits with nothing to do, or when the buffered queue fills up).

use std::fs::File;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::commit::Core;
use super::config::Durability;
use super::record::{LogEvent, LogRecord};

/// How long a record may wait before the audit thread writes it (a record a request
/// waits for is written by that request's write turn, at once).
pub(super) const LINGER: Duration = Duration::from_millis(10);

/// Starts the audit thread for `core`; `sync` is a handle on the log file for syncing.
pub(super) fn spawn(core: Arc<Core>, sync: Option<File>) -> std::io::Result<()> {
    std::thread::Builder::new().name("robotsgate-audit".into()).spawn(move || run(&core, sync)).map(|_| ())
}

fn run(core: &Core, sync: Option<File>) {
    let buffered_threshold = core.buffered_threshold();
    let mut st = core.lock();
    loop {
        let now = Instant::now();
        let shutdown = st.shutdown.take();
        let flushes = std::mem::take(&mut st.flushes);
        let pending_due = st.pending_due(now, LINGER, buffered_threshold, core.durability);
        if shutdown.is_some() || !flushes.is_empty() || pending_due {
            st = core.acquire(st);
            drop(st);
            if shutdown.is_some() {
                core.close_with(&LogRecord::now(LogEvent::Close {}).line());
            }
            let mut wake = core.write_pending();
            core.release_thread_turn();
            if shutdown.is_some() || !flushes.is_empty() {
                // A flush and the close are durable whatever the setting.
                let upto = core.lock().written;
                let result = sync.as_ref().map_or(Ok(()), File::sync_data);
                wake.extend(core.synced(upto, result));
            }
            wake.into_iter().for_each(std::task::Waker::wake);
            for done in flushes {
                let _ = done.send(());
            }
            if let Some(done) = shutdown {
                let _ = done.send(());
                return;
            }
            st = core.lock();
            continue;
        }
        if core.durability == Durability::Synced && st.written > st.synced {
            let upto = st.written;
            drop(st);
            let result = sync.as_ref().map_or(Ok(()), File::sync_data);
            core.synced(upto, result).into_iter().for_each(std::task::Waker::wake);
            st = core.lock();
            continue;
        }
        // Nothing to do now: sleep until a pending record is due, or until woken.
        st = match st.pending_since {
            Some(since) => {
                let left = (since + LINGER).saturating_duration_since(now);
                core.thread
                    .wait_timeout(st, left.max(Duration::from_micros(100)))
                    .map_or_else(|p| p.into_inner().0, |r| r.0)
            }
            None => {
                st.thread_idle = true;
                let mut st = core.thread.wait(st).unwrap_or_else(|p| p.into_inner());
                st.thread_idle = false;
                st
            }
        };
    }
}
