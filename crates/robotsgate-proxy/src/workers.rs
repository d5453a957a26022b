//! Worker threads: each runs its own single-threaded tokio runtime, on which the forward
//! proxy and the ingress run an accept loop of their listening socket (one socket, an
//! accept loop on every worker). A connection, and every task it spawns (its kept upstream
//! connection, pooled connections it opens, intercepted tunnels), lives on the thread that
//! accepted it: no hand-over, no work stealing, no wake-ups across threads on the request
//! path. This is how nginx and HAProxy run their event loops; on the load benchmark it
//! served the same requests with about half the context switches of tokio's multi-threaded
//! scheduler, and accepting on the workers instead of handing connections over took
//! another 0.4 context switches off each new client connection (benches/README.md).

use std::future::Future;
use std::io;

use tokio::net::TcpListener;
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
            // Unused for a whole tick, a worker's spare buffers are dropped: well before the
            // process, quiet for QUIET_TICKS, gives its free pages back.
            runtime.spawn(crate::memory::shed_spares_when_quiet(crate::memory::QUIET_TICK));
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

    /// Each worker's runtime.
    #[cfg(test)]
    fn handles(&self) -> &[Handle] {
        &self.handles
    }

    /// Runs an accept loop of `listener` on every worker until `shutdown`, then stops them
    /// and waits until each has left its loop (and dropped its copy of the listening
    /// socket, which is closed with the last). `make(i)` gives worker `i`'s loop, which is
    /// handed a copy of `listener` in that worker's event loop and a token cancelled at
    /// shutdown; what it accepts it serves on its worker.
    pub(crate) async fn accept_on_each<M, A, Fut>(
        &self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
        mut make: M,
    ) -> io::Result<()>
    where
        M: FnMut(usize) -> A,
        A: FnOnce(TcpListener, CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = listener.into_std()?;
        // Every worker's copy of the socket before the first accepts: accepting takes
        // descriptors, and a copy made after could fail for want of one (under a low
        // `ulimit -n` and a burst of clients at the start, the process stopped).
        let copies = self.handles.iter().map(|_| listener.try_clone()).collect::<io::Result<Vec<_>>>()?;
        drop(listener);
        let accepting = CancellationToken::new();
        let mut loops = Vec::with_capacity(self.handles.len());
        for (i, (worker, copy)) in self.handles.iter().zip(copies).enumerate() {
            let (stop, accept) = (accepting.clone(), make(i));
            loops.push(worker.spawn(async move {
                match TcpListener::from_std(copy) {
                    Ok(copy) => accept(copy, stop).await,
                    Err(e) => tracing::error!(error = %e, "a worker cannot accept connections"),
                }
            }));
        }
        shutdown.await;
        accepting.cancel();
        for accept_loop in loops {
            let _ = accept_loop.await;
        }
        Ok(())
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
    async fn accepted_connections_are_served_where_accepted_and_shutdown_closes_the_socket() {
        let workers = Workers::start(2).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (served_tx, mut served) = tokio::sync::mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let serving = workers.accept_on_each(
            listener,
            async {
                let _ = stop_rx.await;
            },
            |i| {
                let served = served_tx.clone();
                move |listener: TcpListener, stop: CancellationToken| async move {
                    loop {
                        tokio::select! {
                            accepted = listener.accept() => {
                                let thread = std::thread::current().name().map(str::to_owned);
                                let _ = served.send((i, thread, accepted.is_ok()));
                            }
                            () = stop.cancelled() => return,
                        }
                    }
                }
            },
        );
        let client = async {
            for _ in 0..4 {
                let _conn = tokio::net::TcpStream::connect(addr).await.unwrap();
                let (i, thread, ok) = served.recv().await.unwrap();
                assert!(ok);
                assert_eq!(
                    thread,
                    Some(format!("robotsgate-worker-{i}")),
                    "served on the worker that accepted"
                );
            }
            stop_tx.send(()).unwrap();
        };
        let (served, ()) = tokio::join!(serving, client);
        served.unwrap();
        // Every loop has ended: the listening socket is closed.
        let refused = tokio::net::TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        workers.stop().await;
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
