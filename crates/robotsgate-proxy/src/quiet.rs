//! How long a connection hyper serves may stay quiet. hyper bounds the wait for an
//! HTTP/1.1 request head, but not the read that tells HTTP/1.1 from HTTP/2 before it, nor
//! an HTTP/2 connection without a stream (whose client answers the keep-alive pings): a
//! client could hold a connection (a socket, a TLS session) for good.
//!
//! Quiet means: no request waiting for its answer (or WebSocket open over the
//! connection), no answer waiting for its origin's next bytes (a server-sent event stream
//! between events), and either no answer being sent or no byte moved either way: so an
//! answer whose client stopped reading it is cut, one whose origin is slow is not (the
//! upstream's own bounds hold it).
//!
//! Stuck ([`Activity::stuck_for`]) means: an answer handed to hyper has not been asked for
//! its next part for the bound, while no write to the client waited. Over HTTP/1.1 hyper
//! asks as soon as it has written the last part, so only a client that stops reading
//! leaves one there, and then a write waits (`crate::send_bound` bounds that). Over
//! HTTP/2 hyper asks only once the client grants flow-control window: a client that
//! grants none and answers the pings moves bytes and has no write waiting, yet holds the
//! answer, its origin's request and its upstream connection for good. Time in which a
//! write waited is not counted (the send bound spares a slow reader); but an answer left
//! there for [`LONG`] times the bound is stuck whatever the writes did, so that a client
//! cannot hide answers it grants no window behind another one it reads slowly.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a connection did: how often bytes moved, how many requests wait for their answer,
/// how many answers are being sent.
#[derive(Clone, Debug, Default)]
pub(crate) struct Activity(Arc<Counts>);

#[derive(Debug, Default)]
struct Counts {
    moved: AtomicU64,
    /// Requests (and WebSockets) ever started: one answered between two looks counts.
    started: AtomicU64,
    busy: AtomicUsize,
    sending: AtomicUsize,
    /// Answers whose body waits for the origin (its last poll was pending).
    on_origin: AtomicUsize,
    /// The stuck watcher's count of ticks in which no write waited ([`Activity::stuck_for`]).
    epoch: AtomicU64,
    /// Answers handed to hyper and not asked for their next part since, by the epoch in
    /// which they were handed (modulo [`HELD_SLOTS`]).
    held: [AtomicUsize; HELD_SLOTS],
    /// Writes to the client that had to wait, ever.
    write_waits: AtomicU64,
    /// Whether a write to the client waits now.
    write_waiting: AtomicBool,
    /// Answers asked for their next part (or done), ever.
    taken: AtomicU64,
    /// The stuck watcher's count of every [`LONG`] ticks, waits or not.
    long_epoch: AtomicU64,
    /// Answers handed to hyper and not asked for their next part since, by the long epoch
    /// in which they were handed (modulo [`HELD_SLOTS`]).
    held_long: [AtomicUsize; HELD_SLOTS],
}

/// Epochs an answer may stay handed over before it is stuck: one more than the ticks of
/// the bound ([`Activity::stuck_for`]), so a slot is free again when it is looked at.
const HELD_SLOTS: usize = 5;

/// How many times the bound an answer may wait for hyper to ask for its next part, time in
/// which writes waited included ([`Activity::stuck_for`]): 10 minutes at the default 60 s.
const LONG: u64 = 10;

impl Activity {
    /// `io`, counting each read and write that moves bytes.
    pub(crate) fn watch<IO>(&self, io: IO) -> Watched<IO> {
        Watched { io, activity: self.clone() }
    }

    /// Marks a request waiting for its answer (or a WebSocket open) until the guard is
    /// dropped.
    pub(crate) fn busy(&self) -> Busy {
        self.0.started.fetch_add(1, Ordering::Relaxed);
        self.0.busy.fetch_add(1, Ordering::Relaxed);
        Busy(self.clone())
    }

    /// `body`, an answer being sent until it is dropped: handed to hyper, which asks for
    /// its first part.
    pub(crate) fn sending<B>(&self, body: B) -> Sending<B> {
        self.0.sending.fetch_add(1, Ordering::Relaxed);
        let mut sent = Sent { activity: self.clone(), on_origin: false, held: None };
        sent.hold();
        Sending { body, sent, rest: Bytes::new() }
    }

    /// Returns once an answer has waited about `limit` (between `limit` and a quarter
    /// more, not counting the time in which a write to the client waited), or [`LONG`]
    /// times as long counting every wait, for hyper to ask for its next part: the client
    /// takes none of it (see the module).
    pub(crate) async fn stuck_for(&self, limit: Duration) {
        let tick = limit / (HELD_SLOTS as u32 - 1) + Duration::from_millis(1);
        let mut waits = self.0.write_waits.load(Ordering::Relaxed);
        let mut ticks: u64 = 0;
        loop {
            tokio::time::sleep(tick).await;
            ticks = ticks.wrapping_add(1);
            if ticks.is_multiple_of(LONG) {
                // As below, every LONG ticks whatever the writes did.
                let next = self.0.long_epoch.load(Ordering::Relaxed).wrapping_add(1);
                if self.0.held_long[slot(next)].load(Ordering::Relaxed) > 0 {
                    return;
                }
                self.0.long_epoch.store(next, Ordering::Relaxed);
            }
            let now = self.0.write_waits.load(Ordering::Relaxed);
            if now != waits || self.0.write_waiting.load(Ordering::Relaxed) {
                // A write waited: the client's reading is `send_bound`'s to judge.
                waits = now;
                continue;
            }
            // The next epoch's slot holds the answers handed `HELD_SLOTS` epochs ago,
            // `HELD_SLOTS - 1` whole ticks at least (looked at before the epoch moves, so
            // that no answer handed from now on is counted in it).
            let next = self.0.epoch.load(Ordering::Relaxed).wrapping_add(1);
            if self.0.held[slot(next)].load(Ordering::Relaxed) > 0 {
                return;
            }
            self.0.epoch.store(next, Ordering::Relaxed);
        }
    }

    /// After [`Activity::stuck_for`]: returns once nothing is left on the connection but
    /// answers the client takes nothing of (no request waiting for its answer, no
    /// WebSocket, no answer waiting for its origin, and no answer's part taken for
    /// `limit`), or after [`LONG`] times `limit` in any case. Until then the connection's
    /// other streams may go on (HTTP/2: they were told to finish, with a GOAWAY).
    pub(crate) async fn only_stuck_left(&self, limit: Duration) {
        let tick = limit / 4 + Duration::from_millis(1);
        let left = async {
            let mut taken = self.0.taken.load(Ordering::Relaxed);
            let mut still = Duration::ZERO;
            loop {
                tokio::time::sleep(tick).await;
                let now = self.0.taken.load(Ordering::Relaxed);
                let waiting =
                    self.0.busy.load(Ordering::Relaxed) > 0 || self.0.on_origin.load(Ordering::Relaxed) > 0;
                if waiting || now != taken {
                    (taken, still) = (now, Duration::ZERO);
                    continue;
                }
                still += tick;
                if still >= limit {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(limit.saturating_mul(LONG as u32), left).await;
    }

    /// Whether an answer is being sent: when the connection was found quiet, its client
    /// took nothing of it (a cut, counted as such), not an idle keep-alive connection.
    pub(crate) fn answer_unsent(&self) -> bool {
        self.0.sending.load(Ordering::Relaxed) > 0
    }

    /// Returns once the connection was quiet (see the module) for `idle`: between
    /// `idle` and half as long again after it became so.
    pub(crate) async fn quiet_for(&self, idle: Duration) {
        let tick = idle / 4 + Duration::from_millis(1);
        let mut last = self.0.moved.load(Ordering::Relaxed);
        let mut last_started = self.0.started.load(Ordering::Relaxed);
        // Quiet since at least the last tick (`Some`): how long since then.
        let mut quiet: Option<Duration> = None;
        loop {
            tokio::time::sleep(tick).await;
            let moved = self.0.moved.load(Ordering::Relaxed);
            let started = self.0.started.load(Ordering::Relaxed);
            let waiting =
                self.0.busy.load(Ordering::Relaxed) > 0 || self.0.on_origin.load(Ordering::Relaxed) > 0;
            let sending = self.0.sending.load(Ordering::Relaxed) > 0;
            if waiting || started != last_started || (sending && moved != last) {
                (last, last_started) = (moved, started);
                quiet = None;
                continue;
            }
            // The first quiet tick: quiet since some time in the tick before it.
            let q = quiet.map_or(Duration::ZERO, |q| q + tick);
            if q >= idle {
                return;
            }
            quiet = Some(q);
        }
    }
}

/// A request being answered, or a WebSocket open over the connection ([`Activity::busy`]).
#[derive(Debug)]
pub(crate) struct Busy(Activity);

impl Clone for Busy {
    fn clone(&self) -> Busy {
        self.0.busy()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

pin_project_lite::pin_project! {
    /// An answer's body being sent ([`Activity::sending`]).
    #[derive(Debug)]
    pub(crate) struct Sending<B> {
        #[pin]
        body: B,
        sent: Sent,
        // What is left of a part longer than `PART`, handed on next.
        rest: Bytes,
    }
}

/// The longest part an answer hands hyper at a time (an HTTP/2 DATA frame's default
/// size). Over HTTP/2 hyper asks for the next part once the client granted window for the
/// whole last one: a part of 64 KiB would be held for 64 KiB of window, so that a client
/// that takes less than 64 KiB per `send_timeout` (1 KiB/s at 60 s) would count as stuck;
/// with 16 KiB, less than 16 KiB per `send_timeout` (about 270 B/s at 60 s).
const PART: usize = 16 * 1024;

/// The slot of `epoch` in [`Counts::held`].
fn slot(epoch: u64) -> usize {
    (epoch % HELD_SLOTS as u64) as usize
}

/// Counts an answer being sent until dropped with it, whether its body waits for the
/// origin, and whether (since which epoch) it waits for hyper to ask for its next part.
#[derive(Debug)]
struct Sent {
    activity: Activity,
    on_origin: bool,
    /// The epoch and the long epoch it was handed in.
    held: Option<(u64, u64)>,
}

impl Sent {
    /// Handed to hyper: waits for it to ask for the next part.
    fn hold(&mut self) {
        let counts = &self.activity.0;
        let (epoch, long) = (counts.epoch.load(Ordering::Relaxed), counts.long_epoch.load(Ordering::Relaxed));
        counts.held[slot(epoch)].fetch_add(1, Ordering::Relaxed);
        counts.held_long[slot(long)].fetch_add(1, Ordering::Relaxed);
        self.held = Some((epoch, long));
    }

    /// Asked for its next part (or gone).
    fn release(&mut self) {
        if let Some((epoch, long)) = self.held.take() {
            let counts = &self.activity.0;
            counts.held[slot(epoch)].fetch_sub(1, Ordering::Relaxed);
            counts.held_long[slot(long)].fetch_sub(1, Ordering::Relaxed);
            counts.taken.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn on_origin(&mut self, waits: bool) {
        if waits != self.on_origin {
            self.on_origin = waits;
            let count = &self.activity.0.on_origin;
            if waits {
                count.fetch_add(1, Ordering::Relaxed);
            } else {
                count.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for Sent {
    fn drop(&mut self) {
        self.release();
        self.on_origin(false);
        self.activity.0.sending.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<B: hyper::body::Body<Data = Bytes>> hyper::body::Body for Sending<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, B::Error>>> {
        let this = self.project();
        this.sent.release();
        let frame = if this.rest.is_empty() {
            this.body.poll_frame(cx)
        } else {
            Poll::Ready(Some(Ok(hyper::body::Frame::data(std::mem::take(this.rest)))))
        };
        this.sent.on_origin(frame.is_pending());
        let Poll::Ready(Some(Ok(frame))) = frame else { return frame };
        this.sent.hold();
        // A long part goes in parts of PART (the bytes are shared, not copied).
        match frame.into_data() {
            Ok(mut data) => {
                if data.len() > PART {
                    *this.rest = data.split_off(PART);
                }
                Poll::Ready(Some(Ok(hyper::body::Frame::data(data))))
            }
            Err(frame) => Poll::Ready(Some(Ok(frame))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        let (body, rest) = (self.body.size_hint(), self.rest.len() as u64);
        // The upper bound first: `set_lower` checks the new lower against it.
        let mut hint = hyper::body::SizeHint::new();
        if let Some(upper) = body.upper() {
            hint.set_upper(upper.saturating_add(rest));
        }
        hint.set_lower(body.lower().saturating_add(rest));
        hint
    }
}

/// An I/O object whose reads and writes count as activity.
#[derive(Debug)]
pub(crate) struct Watched<IO> {
    io: IO,
    activity: Activity,
}

impl<IO> Watched<IO> {
    fn moved(&self, n: usize) {
        if n > 0 {
            self.activity.0.moved.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Notes whether a write (or flush) to the client had to wait.
    fn wrote<T>(&self, r: &Poll<io::Result<T>>) {
        let counts = &self.activity.0;
        if r.is_pending() {
            counts.write_waits.fetch_add(1, Ordering::Relaxed);
            counts.write_waiting.store(true, Ordering::Relaxed);
        } else if counts.write_waiting.load(Ordering::Relaxed) {
            counts.write_waiting.store(false, Ordering::Relaxed);
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        this.moved(buf.filled().len() - before);
        r
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.wrote(&r);
        if let Poll::Ready(Ok(n)) = r {
            this.moved(n);
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.wrote(&r);
        if let Poll::Ready(Ok(n)) = r {
            this.moved(n);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.wrote(&r);
        r
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Runs `talk` beside [`Activity::quiet_for`] (8 s); how long until quiet.
    async fn quiet_after(activity: &Activity, talk: impl std::future::Future<Output = ()>) -> Duration {
        let started = tokio::time::Instant::now();
        tokio::select! {
            () = async { talk.await; std::future::pending::<()>().await } => unreachable!(),
            () = activity.quiet_for(Duration::from_secs(8)) => {}
        }
        started.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_moving_or_a_request_waiting_is_not_quiet() {
        let activity = Activity::default();
        let (a, mut b) = tokio::io::duplex(64);
        let mut a = activity.watch(a);
        // An answer whose bytes move every 5 s, then a request waiting 20 s, then the
        // answer stalls (its client stopped reading): quiet from there.
        let answer = activity.sending(());
        let took = quiet_after(&activity, async {
            for _ in 0..4 {
                tokio::time::sleep(Duration::from_secs(5)).await;
                b.write_all(b"x").await.unwrap();
                a.read_exact(&mut [0u8; 1]).await.unwrap();
            }
            let waiting = activity.busy();
            tokio::time::sleep(Duration::from_secs(20)).await;
            drop(waiting);
        })
        .await;
        drop(answer);
        assert!(took >= Duration::from_secs(40 + 8), "quiet after {took:?}");
        assert!(took <= Duration::from_secs(40 + 12), "quiet after {took:?}");
    }

    /// A body whose origin sends nothing yet.
    struct Waits;

    impl hyper::body::Body for Waits {
        type Data = bytes::Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
            Poll::Pending
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_waiting_for_its_origin_is_not_quiet() {
        use http_body_util::BodyExt as _;
        // A server-sent event stream between events: its body pending on the origin for a
        // minute, then the answer ends.
        let activity = Activity::default();
        let took = quiet_after(&activity, async {
            let mut answer = activity.sending(Waits);
            let frame = tokio::time::timeout(Duration::from_secs(60), answer.frame()).await;
            assert!(frame.is_err(), "no event");
        })
        .await;
        assert!(took >= Duration::from_secs(60 + 8), "quiet after {took:?}");
        assert!(took <= Duration::from_secs(60 + 12), "quiet after {took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn requests_answered_between_two_looks_are_not_quiet() {
        // A keep-alive client asking every 1.5 s, each answered at once: the watcher
        // (looking every 2 s) never sees one waiting, but they came.
        let activity = Activity::default();
        let took = quiet_after(&activity, async {
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                drop(activity.busy());
            }
        })
        .await;
        assert!(took >= Duration::from_secs(30 + 8), "quiet after {took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_without_a_request_or_an_answer_are_quiet() {
        // HTTP/2 keep-alive pings, answered: bytes, but nothing asked or answered.
        let activity = Activity::default();
        let (a, mut b) = tokio::io::duplex(64);
        let mut a = activity.watch(a);
        let took = quiet_after(&activity, async {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                b.write_all(b"ping").await.unwrap();
                a.read_exact(&mut [0u8; 4]).await.unwrap();
            }
        })
        .await;
        assert!((Duration::from_secs(8)..=Duration::from_secs(12)).contains(&took), "quiet after {took:?}");
    }

    /// Runs `talk` beside [`Activity::stuck_for`] (8 s); how long until stuck (`None`: not
    /// within `within`).
    async fn stuck_after(
        activity: &Activity,
        within: Duration,
        talk: impl std::future::Future<Output = ()>,
    ) -> Option<Duration> {
        let started = tokio::time::Instant::now();
        tokio::select! {
            () = async { talk.await; std::future::pending::<()>().await } => unreachable!(),
            () = activity.stuck_for(Duration::from_secs(8)) => Some(started.elapsed()),
            () = tokio::time::sleep(within) => None,
        }
    }

    /// A body with a part ready whenever asked.
    struct Endless;

    impl hyper::body::Body for Endless {
        type Data = bytes::Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
            Poll::Ready(Some(Ok(hyper::body::Frame::data(bytes::Bytes::from_static(b"part")))))
        }
    }

    /// Pings answered every second: bytes move both ways, no write waits.
    async fn pings(a: &mut Watched<tokio::io::DuplexStream>, b: &mut tokio::io::DuplexStream) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        b.write_all(b"ping").await.unwrap();
        a.read_exact(&mut [0u8; 4]).await.unwrap();
        a.write_all(b"pong").await.unwrap();
        b.read_exact(&mut [0u8; 4]).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_never_asked_for_is_stuck_though_pings_move() {
        // An HTTP/2 client that grants no window: hyper never asks for the body.
        let activity = Activity::default();
        let (a, mut b) = tokio::io::duplex(64);
        let mut a = activity.watch(a);
        let _answer = activity.sending(Endless);
        let took = stuck_after(&activity, Duration::from_secs(100), async {
            loop {
                pings(&mut a, &mut b).await;
            }
        })
        .await;
        let took = took.expect("stuck");
        assert!((Duration::from_secs(8)..=Duration::from_secs(11)).contains(&took), "stuck after {took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_taken_part_by_part_is_not_stuck_until_the_client_stops() {
        use http_body_util::BodyExt as _;
        let activity = Activity::default();
        let took = stuck_after(&activity, Duration::from_secs(200), async {
            let mut answer = activity.sending(Endless);
            // A part taken every 6 s for a minute (each within the 8 s bound), then none.
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_secs(6)).await;
                answer.frame().await.unwrap().unwrap();
            }
            std::future::pending::<()>().await;
        })
        .await;
        let took = took.expect("stuck once the client stops");
        assert!(
            (Duration::from_secs(60 + 8)..=Duration::from_secs(60 + 11)).contains(&took),
            "stuck after {took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_behind_a_waiting_write_or_its_origin_is_not_stuck() {
        use http_body_util::BodyExt as _;
        let activity = Activity::default();
        let (a, mut b) = tokio::io::duplex(64);
        let mut a = activity.watch(a);
        // A client that stopped reading: the write waits (the send bound's to judge), the
        // answer is never asked for again.
        let answer = activity.sending(Endless);
        // (Not for LONG bounds: see the next test.)
        let took = stuck_after(&activity, Duration::from_secs(60), async {
            a.write_all(&[0u8; 1024]).await.unwrap();
        })
        .await;
        assert_eq!(took, None);
        // It reads again (the write ends), then takes nothing: stuck.
        let mut drain = [0u8; 1024];
        let took = stuck_after(&activity, Duration::from_secs(100), async {
            let (r, w) = tokio::join!(b.read_exact(&mut drain), a.write_all(b"rest"));
            r.unwrap();
            w.unwrap();
        })
        .await;
        let took = took.expect("stuck");
        assert!((Duration::from_secs(8)..=Duration::from_secs(11)).contains(&took), "stuck after {took:?}");
        drop(answer);
        // An answer waiting for its origin (a server-sent event stream between events).
        let took = stuck_after(&activity, Duration::from_secs(100), async {
            let mut answer = activity.sending(Waits);
            let _ = answer.frame().await;
        })
        .await;
        assert_eq!(took, None);
    }

    #[tokio::test]
    async fn a_long_part_is_handed_on_in_parts_of_16_kib() {
        use http_body_util::BodyExt as _;
        let activity = Activity::default();
        let body = http_body_util::Full::new(Bytes::from(vec![7u8; 40 * 1024]));
        let mut answer = activity.sending(body);
        assert_eq!(hyper::body::Body::size_hint(&answer).exact(), Some(40 * 1024));
        let mut parts = Vec::new();
        while let Some(frame) = answer.frame().await {
            parts.push(frame.unwrap().into_data().unwrap().len());
            assert_eq!(
                hyper::body::Body::size_hint(&answer).exact(),
                Some((40 * 1024 - parts.iter().sum::<usize>()) as u64)
            );
        }
        assert_eq!(parts, [16 * 1024, 16 * 1024, 8 * 1024]);
        assert!(hyper::body::Body::is_end_stream(&answer));
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_behind_a_write_that_waits_for_good_is_stuck_after_the_long_bound() {
        // A client that reads one answer slowly enough that a write always waits, and
        // grants another no window: that one is stuck after LONG bounds (80 s to 100 s with
        // an 8 s bound), not never.
        let activity = Activity::default();
        let (a, _b) = tokio::io::duplex(64);
        let mut a = activity.watch(a);
        let _never = activity.sending(Endless);
        let took = stuck_after(&activity, Duration::from_secs(200), async {
            a.write_all(&[0u8; 1024]).await.unwrap();
        })
        .await;
        let took = took.expect("stuck");
        let long = Duration::from_secs(8 * LONG);
        assert!((long..=long + Duration::from_secs(21)).contains(&took), "stuck after {took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_stuck_answer_the_others_may_finish() {
        use http_body_util::BodyExt as _;
        let activity = Activity::default();
        let _stuck = activity.sending(Endless);
        // Another answer, a part taken every 6 s for a minute, then done: the wait ends
        // 8 s to 10 s after it (8 s bound).
        let started = tokio::time::Instant::now();
        tokio::select! {
            () = async {
                let mut other = activity.sending(Endless);
                for _ in 0..10 {
                    tokio::time::sleep(Duration::from_secs(6)).await;
                    other.frame().await.unwrap().unwrap();
                }
                drop(other);
                std::future::pending::<()>().await;
            } => unreachable!(),
            () = activity.only_stuck_left(Duration::from_secs(8)) => {}
        }
        let took = started.elapsed();
        assert!((Duration::from_secs(68)..=Duration::from_secs(71)).contains(&took), "after {took:?}");
        // An answer waiting for its origin (server-sent events) keeps it, up to LONG bounds.
        let started = tokio::time::Instant::now();
        tokio::select! {
            () = async {
                let mut events = activity.sending(Waits);
                let _ = events.frame().await;
            } => unreachable!(),
            () = activity.only_stuck_left(Duration::from_secs(8)) => {}
        }
        assert_eq!(started.elapsed(), Duration::from_secs(8 * LONG));
    }
}
