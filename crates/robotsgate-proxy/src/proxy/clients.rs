//! The client networks allowed to use the proxy, and the answer to the others.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use robotsgate::{Refusal, RefusalKind};

/// The client networks allowed to use the proxy (empty: any); shared, so it can be
/// replaced while running.
#[derive(Debug, Clone, Default)]
pub struct ClientNetworks(Arc<arc_swap::ArcSwap<Vec<ipnet::IpNet>>>);

impl ClientNetworks {
    /// Replaces the allowed networks.
    pub fn set(&self, nets: Vec<ipnet::IpNet>) {
        self.0.store(Arc::new(nets));
    }

    /// Whether `addr` may connect.
    pub fn allows(&self, addr: std::net::IpAddr) -> bool {
        let nets = self.0.load();
        let addr = match addr {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, std::net::IpAddr::V4),
            v4 => v4,
        };
        nets.is_empty() || nets.iter().any(|n| n.contains(&addr))
    }
}

/// Tells a client from a network that is not allowed so, and closes. The request head is
/// read first (up to 16 KiB, within 5 s): an answer sent before the request is an
/// unsolicited response, which clients such as hyper's discard as an error.
pub(super) async fn refuse_client(
    mut stream: tokio::net::TcpStream,
    client: std::net::SocketAddr,
    shared: std::sync::Arc<super::shared::Shared>,
) {
    let mut head = Vec::with_capacity(1024);
    let read_head = async {
        let mut chunk = [0u8; 1024];
        while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), read_head).await;
    let refusal = Refusal::new(RefusalKind::ClientDenied, "your network may not use this proxy");
    let answer = refusal.to_http1_bytes_with(head.starts_with(b"HEAD "), &[("via", &shared.via)]);
    // The record says what could be read of the request line.
    let line = head.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(&line[..line.len().min(2048)]);
    let mut words = line.split(' ');
    let (method, target) = (words.next().filter(|m| !m.is_empty()), words.next());
    let facts =
        robotsgate::audit::RefusalFacts { client: Some(client), method, target, ..Default::default() };
    shared.layer.log_refusal(&refusal, facts);
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.write_all(&answer)).await;
    let _ = stream.shutdown().await;
}
