//! Worker threads: each runs its own single-threaded tokio runtime, on which the forward
//! proxy and the ingress run an accept loop of their listening socket (one socket, an
//! accept loop on every worker). A connection, and every task it spawns (its kept upstream
//! connection, pooled connections it opens, intercepted tunnels), lives on the thread that
//! accepted it: no hand-over, no work stealing, no wake-ups across threads on the request
//! path. This is how nginx and HAProxy run their event loops; on the load benchmark it
//! served the same requests with about half the context switches of tokio's multi-threaded
//! scheduler, and accepting on the workers instead of handing connections over took
//! another 0.4 context switches off each new client connection (benches/README.md).

use std::io;

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Running worker threads. Dropping this stops them (without waiting); [`Workers::stop`]
/// also waits until each has dropped its runtime, and with it every task still on it.
pub(crate) struct Workers {
    handles: Vec<Handle>,
    stop: CancellationToken,
    done: Vec<oneshot::Receiver<()>>,
}

impl Workers {
    /// Starts `n` (at least one) worker threads.
    pub(crate) fn start(n: usize) -> io::Result<Workers> {
        let stop = CancellationToken::new();
        let mut workers = Workers { handles: Vec::new(), stop, done: Vec::new() };
        for i in 0..n.max(1) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            workers.handles.push(runtime.handle().clone());
            let (done_tx, done_rx) = oneshot::channel();
            let stop = workers.stop.clone();
            std::thread::Builder::new().name(format!("robotsgate-worker-{i}")).spawn(move || {
                runtime.block_on(stop.cancelled());
                // Tasks still on this runtime (connections past the grace period, idle
                // upstream connections) are dropped here, on their own thread.
                drop(runtime);
                let _ = done_tx.send(());
            })?;
            workers.done.push(done_rx);
        }
        Ok(workers)
    }

    /// How many there are.
    pub(crate) fn len(&self) -> usize {
        self.handles.len()
    }

    /// Each worker's runtime (a listener starts an accept loop on each).
    pub(crate) fn handles(&self) -> &[Handle] {
        &self.handles
    }

    /// Stops every worker and waits until their runtimes are gone.
    pub(crate) async fn stop(mut self) {
        self.stop.cancel();
        for done in std::mem::take(&mut self.done) {
            let _ = done.await;
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers").field("threads", &self.handles.len()).finish_non_exhaustive()
    }
}

/// The number of workers for a setting of 0: one per CPU this process may run on.
pub(crate) fn default_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_worker_runs_its_own_thread_and_stop_ends_them() {
        let workers = Workers::start(2).unwrap();
        assert_eq!(workers.len(), 2);
        let mut names = Vec::new();
        for handle in workers.handles() {
            let name = handle.spawn(async { std::thread::current().name().map(str::to_owned) });
            names.push(name.await.unwrap().unwrap());
        }
        assert_eq!(names, ["robotsgate-worker-0", "robotsgate-worker-1"]);
        // A task that never ends is dropped with its worker's runtime.
        let (tx, rx) = oneshot::channel::<()>();
        workers.handles()[1].spawn(async move {
            let _tx = tx;
            std::future::pending::<()>().await;
        });
        workers.stop().await;
        assert!(rx.await.is_err(), "the pending task was dropped when its worker stopped");
    }

    #[tokio::test]
    async fn dropping_the_workers_stops_their_threads() {
        let workers = Workers::start(1).unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        workers.handles()[0].spawn(async move {
            let _tx = tx;
            std::future::pending::<()>().await;
        });
        drop(workers);
        assert!(rx.await.is_err(), "the worker's runtime went away with its tasks");
    }
}
