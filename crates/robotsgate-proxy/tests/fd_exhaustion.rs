//! Out of file descriptors: the real binary under a low `ulimit -n`, more clients than it
//! can take held open on its listener and on its admin listener. Every listener waits a
//! moment after a failed accept instead of trying again at once (the ingress's and the
//! admin's did not: one core spent, and the ingress's log filled at some 400,000 lines a
//! second), and serves again once descriptors are free.
//!
//! The process's CPU time is read from `/proc/PID/stat` over one second with the clients
//! held: a measurement window, not a wait for something to happen.

mod support;

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_robotsgate");
/// The descriptors the process may hold: its own (some 25 at rest), then clients.
const NOFILE: u32 = 64;
/// Clients held on the main listener: more than `NOFILE` leaves for them.
const CLIENTS: usize = 100;
const GET_ROBOTS: &[u8] = b"GET /robots.txt HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n";
const GET_HEALTH: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n";
/// CPU time in `/proc/PID/stat` is counted in these (USER_HZ, 100 on Linux).
const TICKS_PER_SECOND: u64 = 100;

/// `robotsgate ARGS...` under `ulimit -n NOFILE`, through `sh` (which `exec`s it: the
/// child's pid is robotsgate's).
fn start_limited(args: &[&str]) -> Spawned {
    let script = format!("ulimit -n {NOFILE} && exec \"$0\" \"$@\"");
    let all = [&["-c", script.as_str(), BIN][..], args].concat();
    Spawned::start("sh", &all)
}

/// User and system CPU time of `pid` so far, in ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the command name (which may hold spaces), from field 3 on: utime is
    // field 14, stime field 15.
    let after = stat.rsplit_once(')').expect("a stat line").1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Holds `CLIENTS` connections to `main` (each completed by the kernel, most never
/// accepted) until `main` says an accept failed, then one to `admin` until it says so too
/// (once descriptors ran out: it could have taken one before), and returns the CPU ticks
/// the process spent in the second after, with the connections.
async fn held_open(
    process: &mut Spawned,
    (main, name): (SocketAddr, &str),
    admin: SocketAddr,
) -> (u64, Vec<TcpStream>) {
    let mut held: Vec<TcpStream> = (0..CLIENTS).map(|_| TcpStream::connect(main).unwrap()).collect();
    let failed = |listener: &str| {
        let field = format!("listener=\"{listener}\"");
        move |l: &str| l.contains("accept failed") && l.contains(&field)
    };
    process.wait_line("a failed accept on the main listener", failed(name)).await;
    held.push(TcpStream::connect(admin).unwrap());
    process.wait_line("a failed accept on the admin listener", failed("admin")).await;
    let pid = process.child.id().expect("running");
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(1));
    (cpu_ticks(pid) - before, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ingress_and_its_admin_listener_back_off_when_out_of_descriptors() {
    let dir = temp_dir();
    let robots = dir.path().join("robots.txt");
    std::fs::write(&robots, "User-agent: *\nDisallow: /private\n").unwrap();
    let site = TestOrigin::start([("/page", Reply::ok("page"))]).await;
    let audit = dir.path().join("audit.jsonl");
    let mut ingress = start_limited(&[
        "ingress",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &site.url(""),
        "--robots",
        robots.to_str().unwrap(),
        "--admin-listen",
        "127.0.0.1:0",
        "--audit-log",
        audit.to_str().unwrap(),
    ]);
    let admin = ingress.address("admin listener", "at http://").await;
    let main = ingress.running_at("robotsgate ingress is running").await;

    let (ticks, held) = held_open(&mut ingress, (main, "ingress"), admin).await;
    assert!(
        ticks < TICKS_PER_SECOND / 4,
        "{ticks} ticks of CPU in one second with its descriptors used up (a listener trying again at once)"
    );
    let failures = ingress.seen.iter().filter(|l| l.contains("accept failed")).count();
    assert!(failures < 200, "{failures} lines of failed accepts");

    // The clients gone, it serves again.
    drop(held);
    let got = parse_response(&raw_exchange(main, GET_ROBOTS).await);
    assert_eq!((got.status, got.text().as_str()), (200, "User-agent: *\nDisallow: /private\n"));
    let got = parse_response(&raw_exchange(admin, GET_HEALTH).await);
    assert_eq!((got.status, got.text().as_str()), (200, "ok\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forward_proxy_and_its_admin_listener_back_off_when_out_of_descriptors() {
    let dir = temp_dir();
    let audit = dir.path().join("audit.jsonl");
    let mut proxy = start_limited(&[
        "run",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--audit-log",
        audit.to_str().unwrap(),
    ]);
    let main = proxy.running_at("robotsgate is running").await;
    let admin = proxy.address("robotsgate is running", "admin=Some(").await;

    let (ticks, held) = held_open(&mut proxy, (main, "proxy"), admin).await;
    assert!(
        ticks < TICKS_PER_SECOND / 4,
        "{ticks} ticks of CPU in one second with its descriptors used up (a listener trying again at once)"
    );
    drop(held);
    let got = parse_response(&raw_exchange(admin, GET_HEALTH).await);
    assert_eq!((got.status, got.text().as_str()), (200, "ok\n"));
}
