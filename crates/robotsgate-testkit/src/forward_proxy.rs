//! [`TestForwardProxy`]: a small HTTP forward proxy on loopback, as an egress proxy of a
//! company network would be: `CONNECT host:port` tunnels and absolute-form plain-http
//! requests, names resolved through its own table (so `robots.example` can be an origin
//! on 127.0.0.1), optionally requiring `Proxy-Authorization`. It records the head of the
//! first request of every connection (later requests on a plain-http connection are piped
//! to the same origin as they come).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::wait::BOUND;

/// What the proxy was asked for on one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyRequest {
    /// `CONNECT`, `GET`, ...
    pub method: String,
    /// The request target: `host:port` for `CONNECT`, the absolute URL otherwise.
    pub target: String,
    /// The `Proxy-Authorization` sent, if any.
    pub authorization: Option<String>,
    /// The status the proxy answered itself (`200` for a tunnel, `407`, `502`), or `None`
    /// when it forwarded the request.
    pub answered: Option<u16>,
}

#[derive(Default)]
struct Shared {
    hosts: Mutex<HashMap<String, IpAddr>>,
    seen: Mutex<Vec<ProxyRequest>>,
    required_auth: Mutex<Option<String>>,
}

/// A forward proxy on 127.0.0.1 (see the [module docs](self)); stops when dropped.
pub struct TestForwardProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for TestForwardProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestForwardProxy {
    /// Starts one on an ephemeral loopback port.
    pub async fn start() -> TestForwardProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the forward proxy");
        let addr = listener.local_addr().expect("its address");
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let s = s.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(BOUND * 3, serve(tcp, s)).await;
                });
            }
        });
        TestForwardProxy { addr, shared, task }
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its URL, `http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Its URL with credentials, `http://user:pass@127.0.0.1:port`.
    pub fn url_with(&self, user: &str, pass: &str) -> String {
        format!("http://{user}:{pass}@{}", self.addr)
    }

    /// `host` is `ip` for this proxy (any port: the one asked for).
    pub fn resolve(&self, host: &str, ip: IpAddr) {
        self.shared.hosts.lock().unwrap().insert(host.to_ascii_lowercase(), ip);
    }

    /// Answers `407` unless `Proxy-Authorization` is exactly `value`.
    pub fn require_authorization(&self, value: &str) {
        *self.shared.required_auth.lock().unwrap() = Some(value.to_owned());
    }

    /// Every connection's first request, in order.
    pub fn seen(&self) -> Vec<ProxyRequest> {
        self.shared.seen.lock().unwrap().clone()
    }
}

/// Serves one client connection.
async fn serve(mut client: TcpStream, shared: Arc<Shared>) -> Option<()> {
    let mut rest = Vec::with_capacity(1024);
    let head = crate::read_head(&mut client, &mut rest).await?;
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target, version) = (first.next()?.to_owned(), first.next()?.to_owned(), first.next()?);
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned())))
        .collect();
    let authorization = headers.iter().find(|(k, _)| k == "proxy-authorization").map(|(_, v)| v.clone());
    let mut record =
        ProxyRequest { method: method.clone(), target: target.clone(), authorization, answered: None };
    let required = shared.required_auth.lock().unwrap().clone();
    if required.is_some() && record.authorization != required {
        record.answered = Some(407);
        shared.seen.lock().unwrap().push(record);
        let _ = client
            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await;
        return None;
    }
    let (authority, origin_form) = if method == "CONNECT" {
        (target.clone(), None)
    } else {
        let uri: http::Uri = target.parse().ok()?;
        let authority = uri.authority()?.as_str().to_owned();
        let port = uri.port_u16().unwrap_or(80);
        let authority = if uri.port_u16().is_some() { authority } else { format!("{authority}:{port}") };
        (authority, Some(uri.path_and_query().map_or("/".to_owned(), |p| p.as_str().to_owned())))
    };
    let upstream = connect(&shared, &authority).await;
    let Some(mut upstream) = upstream else {
        record.answered = Some(502);
        shared.seen.lock().unwrap().push(record);
        let _ = client
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await;
        return None;
    };
    match origin_form {
        None => {
            record.answered = Some(200);
            shared.seen.lock().unwrap().push(record);
            client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.ok()?;
            if !rest.is_empty() {
                upstream.write_all(&rest).await.ok()?;
            }
        }
        Some(path) => {
            shared.seen.lock().unwrap().push(record);
            let mut out = format!("{method} {path} {version}\r\n");
            for (k, v) in &headers {
                if k != "proxy-authorization" && k != "proxy-connection" {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
            }
            out.push_str("\r\n");
            upstream.write_all(out.as_bytes()).await.ok()?;
            upstream.write_all(&rest).await.ok()?;
        }
    }
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await.ok()?;
    Some(())
}

/// A connection to `authority` (`host:port`), the host looked up in the proxy's table.
async fn connect(shared: &Shared, authority: &str) -> Option<TcpStream> {
    let (host, port) = authority.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    let mapped = shared.hosts.lock().unwrap().get(&host).copied();
    let addr = match mapped {
        Some(ip) => SocketAddr::new(ip, port),
        None => SocketAddr::new(host.parse().ok()?, port),
    };
    tokio::time::timeout(BOUND, TcpStream::connect(addr)).await.ok()?.ok()
}
