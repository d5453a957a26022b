//! [`Pool`]: keep-alive connections to origins, one pool for the robots.txt fetcher and the
//! requests that follow, with a bound on the idle connections across **all** origins.
//!
//! See [`Pool`].

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response};
use http_body_util::{Either, Empty};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::time::Instant;

use super::connector::Connector;
use super::error::ConnectError;
use super::stall::Stall;
use super::stream::Stream;
use crate::origin::{Origin, OriginError};

/// The request bodies a [`Pool`] sends: a streamed one (a forwarded request's) or none (a
/// robots.txt fetch).
pub type PoolRequestBody = Either<Incoming, Empty<Bytes>>;

/// How many idle connections a [`Pool`] keeps, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Idle connections kept across all origins; past it the least recently used is
    /// closed. `0` keeps none.
    pub max_idle: usize,
    /// Idle connections kept per origin: a burst of concurrent requests opens as many
    /// connections as it needs, and once it is over all but these are closed (after
    /// [`PoolConfig::burst_grace`]).
    pub max_idle_per_origin: usize,
    /// How long an idle connection is kept (closed between one and one and a half of
    /// these after its last use).
    pub idle_timeout: Duration,
    /// How long the idle connections of an origin beyond
    /// [`PoolConfig::max_idle_per_origin`] are kept (closed between one and one and a half
    /// of these after their last use): the connections of a burst whose clients have left
    /// wait that long for the next burst (scrapers reconnecting, a crawl run starting
    /// again), which then opens none. `max_idle` bounds them at every moment. Zero closes
    /// them as they come back.
    pub burst_grace: Duration,
    /// The longest a response body may be silent between two reads (from its head on):
    /// past it the body ends with [`PoolBodyError::Stalled`].
    pub read_timeout: Duration,
}

impl Default for PoolConfig {
    /// 256 idle connections in all (about 8 MB of buffers and TLS state at most), 32 per
    /// origin, for 15 s; more of one origin for 2 s. A body may be silent for 60 s.
    fn default() -> Self {
        PoolConfig {
            max_idle: 256,
            max_idle_per_origin: 32,
            idle_timeout: Duration::from_secs(15),
            burst_grace: Duration::from_secs(2),
            read_timeout: Duration::from_secs(60),
        }
    }
}

/// Why a request sent through a [`Pool`] got no response.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PoolError {
    /// The request's URI names no origin robotsgate can connect to.
    #[error("cannot send to {uri}: {source}")]
    BadTarget {
        /// The URI.
        uri: String,
        /// Why.
        #[source]
        source: OriginError,
    },
    /// No connection could be made.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The connection failed: the HTTP handshake, or the exchange once the request was
    /// sent (reset, protocol error, closed early).
    #[error("the origin failed: {0}")]
    Http(#[source] hyper::Error),
}

/// Keep-alive connections to origins, shared by whoever sends through it. Cheap to clone.
///
/// A broad crawl touches thousands of origins a minute, most of them once. A pool that keeps
/// idle connections per origin only (as hyper-util's does) then holds a socket and its
/// buffers for every origin touched in its idle timeout: 20,000 requests to 12,600 origins
/// left 19,913 upstream connections and 401 MB. Here the idle connections of every origin
/// share one budget ([`PoolConfig::max_idle`]), the least recently used going first, and
/// each origin keeps at most [`PoolConfig::max_idle_per_origin`] (more only for the short
/// [`PoolConfig::burst_grace`] after a burst). A connection that carried
/// a robots.txt fetch goes back to the same pool, so the request that the fetch was made for
/// reuses it instead of opening another. A connection opened elsewhere can be given to it
/// ([`Pool::adopt`]) and taken back out as it is ([`Pool::take_idle_stream`]): a sender of
/// its own (robotsgate's HTTP/1.1 fast path) and the pool share one set of idle
/// connections, within one bound.
///
/// HTTP/1.1 connections carry one request at a time and are checked out for it; they come
/// back when the response body is dropped (read to its end: an unread body closes the
/// connection). An HTTP/2 connection (negotiated with ALPN) is shared by every request to its
/// origin and counts as idle while no response of it is open. Idle connections close after
/// [`PoolConfig::idle_timeout`]. A request sent on an idle connection that the origin closed
/// meanwhile is sent again on a new one (it had not been sent); so is a GET or HEAD without
/// a body that an idle HTTP/1.1 connection took and then ended without answering (an origin
/// closes idle connections when it likes; those requests are idempotent, RFC 9110 §9.2.2),
/// once.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use robotsgate::net::{Connector, DnsConfig, Guard, Pool, PoolConfig, Resolver, TlsConfig};
///
/// let tls = robotsgate::net::client_config(&TlsConfig::default(), &[b"h2", b"http/1.1"])?;
/// let connector = Connector::new(
///     Resolver::new(&DnsConfig::default()),
///     Arc::new(Guard::default()),
///     tls,
///     Duration::from_secs(10),
/// );
/// let pool = Pool::new(connector, PoolConfig { max_idle: 256, ..PoolConfig::default() });
/// assert_eq!(pool.idle(), 0);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    connector: Connector,
    config: PoolConfig,
    state: Mutex<State>,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool").field("config", &self.inner.config).field("idle", &self.idle()).finish()
    }
}

/// The pool's book, behind one lock (held for a few map operations, never across an await).
#[derive(Default)]
struct State {
    origins: HashMap<Arc<Origin>, Conns, foldhash::fast::RandomState>,
    /// Every idle connection by when it became idle (its `seq`), oldest first.
    lru: BTreeMap<u64, (Arc<Origin>, Version)>,
    next_seq: u64,
    /// Whether the task that closes expired connections runs.
    reaping: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Version {
    H1,
    H2,
}

/// One origin's connections.
#[derive(Default)]
struct Conns {
    /// Idle HTTP/1.1 connections, oldest first (their `seq` increasing).
    h1: VecDeque<Idle1>,
    /// The shared HTTP/2 connection.
    h2: Option<Shared2>,
}

impl Conns {
    /// Takes out the most recently used idle HTTP/1.1 connection (the likeliest to be open
    /// still) of those `wanted` accepts that can carry a request, one at home `here` first
    /// (see [`Home`]). The closed or expired ones found on the way go to `dead`; each one
    /// taken out leaves `lru`.
    fn take_h1(
        &mut self,
        lru: &mut BTreeMap<u64, (Arc<Origin>, Version)>,
        timeout: Duration,
        here: Home,
        dead: &mut Vec<Idle1Conn>,
        wanted: impl Fn(&Idle1Conn) -> bool,
    ) -> Option<(Idle1Conn, Home)> {
        loop {
            let at = self.h1.iter().rposition(|i| i.home == here && wanted(&i.conn));
            let at = at.or_else(|| self.h1.iter().rposition(|i| wanted(&i.conn)))?;
            let mut idle = self.h1.remove(at)?;
            lru.remove(&idle.seq);
            if idle.since.elapsed() < timeout && idle.conn.usable() {
                return Some((idle.conn, idle.home));
            }
            dead.push(idle.conn);
        }
    }

    /// Closes the oldest idle HTTP/1.1 connections beyond the per-origin bound that have
    /// been idle for the burst grace (all of them beyond it when that is zero).
    fn trim(
        &mut self,
        lru: &mut BTreeMap<u64, (Arc<Origin>, Version)>,
        config: PoolConfig,
        now: Instant,
        closed: &mut Vec<Closed>,
    ) {
        while self.h1.len() > config.max_idle_per_origin
            && self.h1.front().is_some_and(|i| now.duration_since(i.since) >= config.burst_grace)
            && let Some(oldest) = self.h1.pop_front()
        {
            lru.remove(&oldest.seq);
            closed.push(Closed::H1(oldest.conn));
        }
    }
}

struct Idle1 {
    conn: Idle1Conn,
    home: Home,
    seq: u64,
    since: Instant,
}

/// The runtime whose event loop a connection's socket is registered with, and on which its
/// connection task (hyper's) runs: the one it was opened (or last moved) on. `None` outside
/// a runtime.
///
/// One pool serves every runtime of a process; robotsgate's proxy runs a single-threaded
/// runtime on each worker thread. A connection used from another runtime than its home
/// still works, but each of its readiness events is seen by its home's event loop and
/// passed on across threads, and nothing is seen while that loop is not running (its
/// runtime blocked, or stopped). So a request takes a connection at home first; a plain
/// stream taken from another home is moved to this one ([`Stream::rehome`]); a connection
/// hyper runs (its task at home) is used from where it is.
type Home = Option<tokio::runtime::Id>;

/// The current runtime, as a [`Home`].
fn here() -> Home {
    tokio::runtime::Handle::try_current().ok().map(|runtime| runtime.id())
}

/// An idle HTTP/1.1 connection: hyper's (it carried a request through the pool), or a
/// plain stream that was opened elsewhere and given to the pool ([`Pool::adopt`]), on
/// which hyper starts only if the pool sends on it: a fast path of its own
/// ([`Pool::take_idle_stream`]) can take it back as it is.
enum Idle1Conn {
    Hyper(http1::SendRequest<PoolRequestBody>),
    Stream(Stream),
}

impl Idle1Conn {
    /// Whether it can carry a request: not closed by the origin, nothing unread on it.
    fn usable(&mut self) -> bool {
        match self {
            Idle1Conn::Hyper(sender) => sender.is_ready(),
            Idle1Conn::Stream(stream) => stream_usable(stream),
        }
    }
}

/// Whether an idle `stream` is still open with nothing to read: the origin has neither
/// closed it nor sent anything. Costs no system call unless the event loop has seen the
/// stream readable since it was last read.
fn stream_usable(stream: &mut Stream) -> bool {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut byte = [0u8; 1];
    let mut buf = tokio::io::ReadBuf::new(&mut byte);
    tokio::io::AsyncRead::poll_read(Pin::new(stream), &mut cx, &mut buf).is_pending()
}

struct Shared2 {
    sender: http2::SendRequest<PoolRequestBody>,
    /// Responses of it still open (from sending to the body's drop).
    open: usize,
    /// When idle (`open == 0`): its place in the LRU.
    idle: Option<(u64, Instant)>,
}

/// A connection checked out for one request.
enum Checked {
    H1(http1::SendRequest<PoolRequestBody>, Home),
    /// An adopted stream (at home here), on which hyper is yet to start.
    Stream(Stream),
    H2(http2::SendRequest<PoolRequestBody>, H2Open),
}

impl Pool {
    /// A pool connecting through `connector`.
    pub fn new(connector: Connector, config: PoolConfig) -> Pool {
        Pool { inner: Arc::new(Inner { connector, config, state: Mutex::new(State::default()) }) }
    }

    /// The connector it opens connections with.
    pub fn connector(&self) -> &Connector {
        &self.inner.connector
    }

    /// How it is bounded.
    pub fn config(&self) -> PoolConfig {
        self.inner.config
    }

    /// The bound on a response body's silence ([`PoolConfig::read_timeout`]), for one body.
    fn stall(&self) -> Stall {
        Stall::new(self.inner.config.read_timeout)
    }

    /// Idle connections it holds now, across all origins.
    pub fn idle(&self) -> usize {
        self.inner.state.lock().map_or(0, |s| s.lru.len())
    }

    /// Whether a request to `origin` sent now would find a connection: an idle HTTP/1.1
    /// one, or the shared HTTP/2 one. When it would not, [`Pool::send`] opens a new one.
    pub fn has_connection(&self, origin: &Origin) -> bool {
        self.inner.state.lock().is_ok_and(|state| state.origins.contains_key(origin))
    }

    /// Takes `stream`, an HTTP/1.1 connection to `origin` opened elsewhere and idle (every
    /// request sent on it answered to the end, nothing unread), to serve the next requests
    /// to `origin` as if the pool had opened it, within the pool's bounds. It is kept as
    /// it is: hyper starts on it only when the pool sends a request on it, and
    /// [`Pool::take_idle_stream`] can take it back before. One that the origin has closed
    /// meanwhile is dropped when found. Called within the runtime that `stream` is
    /// registered with (the one it was opened on, or taken out on): a request on that
    /// runtime takes it before one on another does.
    pub fn adopt(&self, origin: &Origin, stream: Stream) {
        self.inner.put_h1(Arc::new(origin.clone()), Idle1Conn::Stream(stream), here());
    }

    /// An idle stream to `origin` that the pool adopted ([`Pool::adopt`]), the most
    /// recently used first, taken out of the pool as it is, for a sender of its own (one
    /// that writes HTTP/1.1 itself): no new connection, and no hyper on it. `None` when
    /// there is none (connections the pool opened or sent on are hyper's and stay).
    ///
    /// Within a runtime, one adopted on it comes first; one adopted on another is moved to
    /// this runtime's event loop as it is taken out. Must be called within a runtime with
    /// I/O enabled when streams were adopted on another.
    pub fn take_idle_stream(&self, origin: &Origin) -> Option<Stream> {
        let (timeout, here) = (self.inner.config.idle_timeout, here());
        // Declared before the lock's guard: closed after it is released.
        let mut dead = Vec::new();
        let found = {
            let mut state = self.inner.state.lock().ok()?;
            let state = &mut *state;
            let conns = state.origins.get_mut(origin)?;
            let wanted = |c: &Idle1Conn| matches!(c, Idle1Conn::Stream(_));
            let found = match conns.take_h1(&mut state.lru, timeout, here, &mut dead, wanted) {
                Some((Idle1Conn::Stream(stream), home)) => Some((stream, home)),
                _ => None,
            };
            if conns.h1.is_empty() && conns.h2.is_none() {
                state.origins.remove(origin);
            }
            found
        };
        let (mut stream, home) = found?;
        moved_here(&mut stream, home, here).then_some(stream)
    }

    /// Sends `req` (absolute URI: `http://host/path`) to its origin on an idle connection,
    /// or a new one, and returns the response; its body gives the connection back when it
    /// is dropped. HTTP/1.1 requests are sent in origin form with a `Host` header (added
    /// when missing); HTTP/2 ones with the authority of the URI.
    pub async fn send(&self, req: Request<PoolRequestBody>) -> Result<Response<PoolBody>, PoolError> {
        let origin = Origin::from_uri(req.uri())
            .map_err(|source| PoolError::BadTarget { uri: req.uri().to_string(), source })?;
        let origin = Arc::new(origin);
        let req = match self.checkout(&origin) {
            Some(conn) => {
                // An idle connection may be closed by the origin as the request arrives.
                let again =
                    matches!(conn, Checked::H1(..) | Checked::Stream(_)).then(|| resendable(&req)).flatten();
                match self.send_on(conn, &origin, req).await {
                    Ok(res) => return Ok(res),
                    Err(Unsent::Back(req)) => req,
                    Err(Unsent::Failed(e)) => match again {
                        Some(req) if unanswered(&e) => {
                            tracing::debug!(error = %e, %origin, "an idle connection closed on the request: sent again");
                            req
                        }
                        _ => return Err(PoolError::Http(e)),
                    },
                }
            }
            None => req,
        };
        let conn = self.open(&origin).await?;
        match self.send_on(conn, &origin, req).await {
            Ok(res) => Ok(res),
            Err(Unsent::Failed(e)) => Err(PoolError::Http(e)),
            // A new connection that closed before taking the request.
            Err(Unsent::Back(_)) => Err(PoolError::Connect(ConnectError::BadDestination(format!(
                "{origin}: the connection closed before the request was sent"
            )))),
        }
    }

    /// An idle (HTTP/1.1) or shared (HTTP/2) connection to `origin`, if one is open.
    fn checkout(&self, origin: &Arc<Origin>) -> Option<Checked> {
        let (timeout, here) = (self.inner.config.idle_timeout, here());
        // Declared before the lock's guard: closed after it is released.
        let mut dead = Vec::new();
        let mut guard = self.inner.state.lock().ok()?;
        let state = &mut *guard;
        let conns = state.origins.get_mut(Borrow::<Origin>::borrow(origin))?;
        let mut found = None;
        if let Some(shared) = &mut conns.h2 {
            if shared.sender.is_closed() {
                if let Some((seq, _)) = shared.idle {
                    state.lru.remove(&seq);
                }
                conns.h2 = None;
            } else {
                if let Some((seq, _)) = shared.idle.take() {
                    state.lru.remove(&seq);
                }
                shared.open += 1;
                found = Some(Checked::H2(
                    shared.sender.clone(),
                    H2Open { pool: Arc::downgrade(&self.inner), origin: origin.clone() },
                ));
            }
        }
        let taken = match found {
            None => conns.take_h1(&mut state.lru, timeout, here, &mut dead, |_| true),
            Some(_) => None,
        };
        if conns.h1.is_empty() && conns.h2.is_none() {
            state.origins.remove(Borrow::<Origin>::borrow(origin));
        }
        drop(guard);
        if found.is_some() {
            return found;
        }
        match taken? {
            (Idle1Conn::Hyper(sender), home) => Some(Checked::H1(sender, home)),
            // Moved out of the lock (a few system calls).
            (Idle1Conn::Stream(mut stream), home) => {
                moved_here(&mut stream, home, here).then_some(Checked::Stream(stream))
            }
        }
    }

    /// A new connection to `origin`: HTTP/2 when the origin chose it in ALPN (then shared
    /// with the requests that follow), else HTTP/1.1.
    async fn open(&self, origin: &Arc<Origin>) -> Result<Checked, PoolError> {
        let stream = self.inner.connector.connect(origin).await?;
        let h2 = matches!(&stream, Stream::Tls(s) if s.get_ref().1.alpn_protocol() == Some(b"h2"));
        let io = TokioIo::new(stream);
        if h2 {
            let (sender, conn) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .handshake(io)
                .await
                .map_err(PoolError::Http)?;
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "upstream HTTP/2 connection ended with an error");
                }
            });
            let open = H2Open { pool: Arc::downgrade(&self.inner), origin: origin.clone() };
            if let Ok(mut guard) = self.inner.state.lock() {
                let state = &mut *guard;
                let conns = state.origins.entry(origin.clone()).or_default();
                if conns.h2.as_ref().is_some_and(|shared| !shared.sender.is_closed()) {
                    // Another request opened one at the same time: this one serves this
                    // request only (and closes after it); the first stays shared.
                    return Ok(Checked::H2(sender, H2Open { pool: Weak::new(), origin: origin.clone() }));
                }
                if let Some(Shared2 { idle: Some((seq, _)), .. }) = conns.h2.take() {
                    state.lru.remove(&seq);
                }
                conns.h2 = Some(Shared2 { sender: sender.clone(), open: 1, idle: None });
            }
            Ok(Checked::H2(sender, open))
        } else {
            Ok(Checked::H1(start_h1(io).await.map_err(PoolError::Http)?, here()))
        }
    }

    /// Sends `req` on `conn`; the request comes back when the connection closed before
    /// taking it.
    async fn send_on(
        &self,
        conn: Checked,
        origin: &Arc<Origin>,
        mut req: Request<PoolRequestBody>,
    ) -> Result<Response<PoolBody>, Unsent> {
        let (mut sender, home) = match conn {
            Checked::H1(sender, home) => (sender, home),
            Checked::Stream(stream) => match start_h1(TokioIo::new(stream)).await {
                Ok(sender) => (sender, here()),
                Err(_) => return Err(Unsent::Back(req)),
            },
            Checked::H2(mut sender, open) => {
                return match sender.try_send_request(req).await {
                    Ok(res) => Ok(res.map(|body| PoolBody {
                        body,
                        stall: self.stall(),
                        _back: Some(Back::H2(open)),
                    })),
                    Err(mut e) => match e.take_message() {
                        Some(req) => Err(Unsent::Back(req)),
                        None => Err(Unsent::Failed(e.into_error())),
                    },
                };
            }
        };
        // RFC 9112 §3.2.1: to an origin, the request target is in origin form; the
        // absolute form comes back with the request if it must go elsewhere. To a
        // forward proxy it stays in absolute form (§3.2.2), with the proxy's
        // credentials.
        let absolute = match self.inner.connector.forward_proxy(origin) {
            Some(proxy) => {
                if let Some(auth) = proxy.authorization() {
                    req.headers_mut().insert(header::PROXY_AUTHORIZATION, auth.clone());
                }
                req.uri().clone()
            }
            None => {
                let target = origin_form(req.uri());
                std::mem::replace(req.uri_mut(), target)
            }
        };
        if !req.headers().contains_key(header::HOST)
            && let Ok(host) = HeaderValue::from_str(&origin.authority())
        {
            req.headers_mut().insert(header::HOST, host);
        }
        match sender.try_send_request(req).await {
            Ok(res) => {
                let back = Back::H1(Some(Back1 {
                    pool: Arc::downgrade(&self.inner),
                    origin: origin.clone(),
                    sender,
                    home,
                }));
                Ok(res.map(|body| PoolBody { body, stall: self.stall(), _back: Some(back) }))
            }
            Err(mut e) => match e.take_message() {
                Some(mut req) => {
                    *req.uri_mut() = absolute;
                    Err(Unsent::Back(req))
                }
                None => Err(Unsent::Failed(e.into_error())),
            },
        }
    }
}

/// Whether `stream`, at home `home`, can be used `here`: moved to this runtime's event loop
/// when its home is another ([`Stream::rehome`]). One that cannot be moved is closed.
fn moved_here(stream: &mut Stream, home: Home, here: Home) -> bool {
    if home == here || here.is_none() {
        return true;
    }
    match stream.rehome() {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(error = %e, "an idle connection could not be moved to this runtime: closed");
            false
        }
    }
}

/// Starts hyper's HTTP/1.1 client on `io`: its connection runs in a task of its own.
async fn start_h1(io: TokioIo<Stream>) -> Result<http1::SendRequest<PoolRequestBody>, hyper::Error> {
    let (sender, conn) = http1::Builder::new().handshake(io).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "upstream connection ended with an error");
        }
    });
    Ok(sender)
}

/// A copy of `req` to send again if the idle HTTP/1.1 connection it goes out on fails
/// before answering ([`unanswered`]): for a GET or HEAD without a body only. Those are
/// idempotent (RFC 9110 §9.2.2): sending one again is allowed even if the origin had read
/// it before it closed, which the client cannot tell. (The request does not come back
/// from hyper once written, so the copy is taken before.)
fn resendable(req: &Request<PoolRequestBody>) -> Option<Request<PoolRequestBody>> {
    if !(req.method() == http::Method::GET || req.method() == http::Method::HEAD)
        || !req.body().is_end_stream()
    {
        return None;
    }
    let mut again = Request::new(Either::Right(Empty::new()));
    *again.method_mut() = req.method().clone();
    *again.uri_mut() = req.uri().clone();
    *again.version_mut() = req.version();
    *again.headers_mut() = req.headers().clone();
    *again.extensions_mut() = req.extensions().clone();
    Some(again)
}

/// Whether `e` says the connection ended before the origin answered: closed before the end
/// of the response head, or reset.
fn unanswered(e: &hyper::Error) -> bool {
    use std::error::Error as _;
    if e.is_incomplete_message() {
        return true;
    }
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
            return matches!(io.kind(), ConnectionReset | ConnectionAborted | BrokenPipe);
        }
        source = s.source();
    }
    false
}

/// A request that did not get a response (boxing the request would cost an allocation on
/// the rare path only, but the result is moved once and never stored).
#[allow(clippy::large_enum_variant)]
enum Unsent {
    /// Not sent: the connection was closed before it could take it.
    Back(Request<PoolRequestBody>),
    /// Sent, and the exchange failed.
    Failed(hyper::Error),
}

impl Inner {
    /// Takes back an HTTP/1.1 connection that is ready for its next request.
    fn put_h1(self: &Arc<Self>, origin: Arc<Origin>, conn: Idle1Conn, home: Home) {
        let config = self.config;
        if config.max_idle == 0 || config.max_idle_per_origin == 0 {
            return;
        }
        let mut closed = Vec::new();
        let Ok(mut guard) = self.state.lock() else { return };
        let state = &mut *guard;
        let seq = state.next_seq;
        state.next_seq += 1;
        let conns = state.origins.entry(origin.clone()).or_default();
        let now = Instant::now();
        conns.h1.push_back(Idle1 { conn, home, seq, since: now });
        conns.trim(&mut state.lru, config, now, &mut closed);
        state.lru.insert(seq, (origin, Version::H1));
        evict(state, config.max_idle, &mut closed);
        let start_reaper = !state.reaping;
        state.reaping = true;
        drop(guard);
        drop(closed);
        if start_reaper {
            self.start_reaper();
        }
    }

    /// One response of `origin`'s shared HTTP/2 connection is over.
    fn done_h2(self: &Arc<Self>, origin: Arc<Origin>) {
        let config = self.config;
        let mut closed = Vec::new();
        let Ok(mut guard) = self.state.lock() else { return };
        let state = &mut *guard;
        let key: &Origin = origin.borrow();
        let Some(conns) = state.origins.get_mut(key) else { return };
        let Some(shared) = conns.h2.as_mut() else { return };
        shared.open = shared.open.saturating_sub(1);
        if shared.open > 0 || shared.idle.is_some() {
            return;
        }
        if shared.sender.is_closed() || config.max_idle == 0 {
            if let Some(shared) = conns.h2.take() {
                closed.push(Closed::H2(shared.sender));
            }
            if conns.h1.is_empty() {
                state.origins.remove(key);
            }
        } else {
            let seq = state.next_seq;
            state.next_seq += 1;
            shared.idle = Some((seq, Instant::now()));
            state.lru.insert(seq, (origin.clone(), Version::H2));
            evict(state, config.max_idle, &mut closed);
        }
        let start_reaper = !state.reaping && !state.lru.is_empty();
        state.reaping |= start_reaper;
        drop(guard);
        drop(closed);
        if start_reaper {
            self.start_reaper();
        }
    }

    /// Starts the task that closes connections idle for longer than the idle timeout; it
    /// ends when the pool is dropped (or when there is no runtime to run it on).
    fn start_reaper(self: &Arc<Self>) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            if let Ok(mut state) = self.state.lock() {
                state.reaping = false;
            }
            return;
        };
        let pool = Arc::downgrade(self);
        // Half the shortest time a connection may stay idle: the idle timeout, or the burst
        // grace when there is one.
        let config = self.config;
        let shortest = if config.burst_grace.is_zero() {
            config.idle_timeout
        } else {
            config.idle_timeout.min(config.burst_grace)
        };
        let every = (shortest / 2).max(Duration::from_millis(100));
        handle.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(pool) = pool.upgrade() else { return };
                let mut closed = Vec::new();
                {
                    let Ok(mut guard) = pool.state.lock() else { return };
                    expire(&mut guard, pool.config, &mut closed);
                    if guard.lru.is_empty() {
                        // Started again by the next connection that comes back.
                        guard.reaping = false;
                        return;
                    }
                }
                drop(closed);
            }
        });
    }
}

/// A connection taken out of the pool, closed when dropped (outside the lock).
enum Closed {
    H1(#[allow(dead_code)] Idle1Conn),
    H2(#[allow(dead_code)] http2::SendRequest<PoolRequestBody>),
}

/// Closes the least recently used idle connections until at most `max` are left.
fn evict(state: &mut State, max: usize, closed: &mut Vec<Closed>) {
    while state.lru.len() > max {
        let Some((seq, (origin, version))) = state.lru.pop_first() else { break };
        remove_idle(state, &origin, seq, version, closed);
    }
}

/// Closes the connections idle for the idle timeout or more, and the connections of an
/// origin beyond its bound idle for the burst grace or more.
fn expire(state: &mut State, config: PoolConfig, closed: &mut Vec<Closed>) {
    let (timeout, now) = (config.idle_timeout, Instant::now());
    let lru = &mut state.lru;
    state.origins.retain(|_, conns| {
        conns.trim(lru, config, now, closed);
        !(conns.h1.is_empty() && conns.h2.is_none())
    });
    while let Some((&seq, (origin, version))) = state.lru.first_key_value() {
        let (origin, version) = (origin.clone(), *version);
        let since = state.origins.get(Borrow::<Origin>::borrow(&origin)).and_then(|c| match version {
            Version::H1 => c.h1.iter().find(|i| i.seq == seq).map(|i| i.since),
            Version::H2 => c.h2.as_ref().and_then(|s| s.idle).map(|(_, since)| since),
        });
        match since {
            // The LRU is in the order connections became idle: the rest are younger.
            Some(since) if now.duration_since(since) < timeout => break,
            _ => {
                state.lru.pop_first();
                remove_idle(state, &origin, seq, version, closed);
            }
        }
    }
}

/// Takes the idle connection `seq` of `origin` out of the book (the LRU entry is gone).
fn remove_idle(
    state: &mut State,
    origin: &Arc<Origin>,
    seq: u64,
    version: Version,
    closed: &mut Vec<Closed>,
) {
    let key: &Origin = origin.borrow();
    let Some(conns) = state.origins.get_mut(key) else { return };
    match version {
        Version::H1 => {
            // Oldest first: the one sought is at (or near) the front.
            if let Some(at) = conns.h1.iter().position(|i| i.seq == seq)
                && let Some(idle) = conns.h1.remove(at)
            {
                closed.push(Closed::H1(idle.conn));
            }
        }
        Version::H2 => {
            if conns.h2.as_ref().is_some_and(|s| s.idle.is_some_and(|(s, _)| s == seq))
                && let Some(shared) = conns.h2.take()
            {
                closed.push(Closed::H2(shared.sender));
            }
        }
    }
    if conns.h1.is_empty() && conns.h2.is_none() {
        state.origins.remove(key);
    }
}

/// One open response of a shared HTTP/2 connection; the connection counts as idle once
/// none is left.
struct H2Open {
    pool: Weak<Inner>,
    origin: Arc<Origin>,
}

impl Drop for H2Open {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.done_h2(self.origin.clone());
        }
    }
}

/// What gives a connection back when a response body is dropped.
enum Back {
    /// An HTTP/1.1 connection, back to the idle ones once ready (`None` once handled).
    H1(Option<Back1>),
    /// One open response of a shared HTTP/2 connection.
    H2(#[allow(dead_code)] H2Open),
}

struct Back1 {
    pool: Weak<Inner>,
    origin: Arc<Origin>,
    sender: http1::SendRequest<PoolRequestBody>,
    home: Home,
}

impl Drop for Back {
    fn drop(&mut self) {
        let Back::H1(slot) = self else { return };
        let Some(Back1 { pool, origin, mut sender, home }) = slot.take() else { return };
        let Some(pool) = pool.upgrade() else { return };
        if sender.is_ready() {
            pool.put_h1(origin, Idle1Conn::Hyper(sender), home);
        } else if !sender.is_closed()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            // The connection is still finishing the response (its end was read, its
            // bookkeeping not yet done): it comes back once ready, or closes.
            handle.spawn(async move {
                if sender.ready().await.is_ok() {
                    pool.put_h1(origin, Idle1Conn::Hyper(sender), home);
                }
            });
        }
    }
}

/// The body of a response received through a [`Pool`]: the origin's body, as it comes; the
/// connection goes back to the pool when it is dropped. A body silent for longer than
/// [`PoolConfig::read_timeout`] ends with [`PoolBodyError::Stalled`].
pub struct PoolBody {
    body: Incoming,
    stall: Stall,
    _back: Option<Back>,
}

/// Why a [`PoolBody`] ended before its end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PoolBodyError {
    /// The connection failed, or what the origin sent is not a body.
    #[error(transparent)]
    Origin(#[from] hyper::Error),
    /// The origin sent nothing more for [`PoolConfig::read_timeout`].
    #[error("the origin sent nothing more of its response body for {0:?}")]
    Stalled(Duration),
}

impl fmt::Debug for PoolBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolBody").field("body", &self.body).finish_non_exhaustive()
    }
}

impl Body for PoolBody {
    type Data = Bytes;
    type Error = PoolBodyError;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, PoolBodyError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Pending => this.stall.wait(cx).map(|s| Some(Err(PoolBodyError::Stalled(s.0)))),
            polled => {
                this.stall.moved();
                polled.map_err(PoolBodyError::Origin)
            }
        }
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The origin-form request target (RFC 9112 §3.2.1) of an absolute URI: its path and
/// query, `/` when the path is empty.
pub fn origin_form(uri: &http::Uri) -> http::Uri {
    match uri.path_and_query() {
        Some(pq) if pq.as_str().starts_with('/') => http::Uri::from(pq.clone()),
        // `http://host?q`: the path is empty, the query stays.
        Some(pq) if !pq.as_str().is_empty() => {
            format!("/{}", pq.as_str()).parse().unwrap_or_else(|_| http::Uri::from_static("/"))
        }
        _ => http::Uri::from_static("/"),
    }
}
