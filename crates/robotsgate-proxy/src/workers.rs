//! Worker threads: each runs its own single-threaded tokio runtime, and the forward proxy
//! and the ingress hand accepted client connections to them in turn. A connection, and every task it spawns
//! (its kept upstream connection, pooled connections it opens, intercepted tunnels), then
//! lives on one thread: no work stealing, no wake-ups across threads on the request path.
//! This is how nginx and HAProxy run their event loops; on the load benchmark it served
//! the same requests with about half the context switches of tokio's multi-threaded
//! scheduler (benches/README.md).

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Running worker threads. Dropping this stops them (without waiting); [`Workers::stop`]
/// also waits until each has dropped its runtime, and with it every task still on it.
pub(crate) struct Workers {
    handles: Vec<Handle>,
    next: AtomicUsize,
    stop: CancellationToken,
    done: Vec<oneshot::Receiver<()>>,
}

impl Workers {
    /// Starts `n` (at least one) worker threads.
    pub(crate) fn start(n: usize) -> io::Result<Workers> {
        let stop = CancellationToken::new();
        let mut workers = Workers { handles: Vec::new(), next: AtomicUsize::new(0), stop, done: Vec::new() };
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

    /// The next worker, in turn: its index (below [`Workers::len`]) and its runtime.
    pub(crate) fn next(&self) -> (usize, &Handle) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        (i, &self.handles[i])
    }

    /// Spawns `task` on the next worker.
    #[cfg(test)]
    fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.next().1.spawn(task)
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
    async fn tasks_go_to_each_worker_in_turn_and_stop_ends_them() {
        let workers = Workers::start(2).unwrap();
        assert_eq!(workers.len(), 2);
        let mut names = Vec::new();
        for _ in 0..4 {
            let name = workers.spawn(async { std::thread::current().name().map(str::to_owned) });
            names.push(name.await.unwrap().unwrap());
        }
        assert_eq!(
            names,
            ["robotsgate-worker-0", "robotsgate-worker-1", "robotsgate-worker-0", "robotsgate-worker-1"]
        );
        // A task that never ends is dropped with its worker's runtime.
        let (tx, rx) = oneshot::channel::<()>();
        workers.spawn(async move {
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
        workers.spawn(async move {
            let _tx = tx;
            std::future::pending::<()>().await;
        });
        drop(workers);
        assert!(rx.await.is_err(), "the worker's runtime went away with its tasks");
    }
}
