//! A real name server on loopback for the reverse DNS tests and benchmark: hickory-server
//! answering from in-memory zones (PTR, A, AAAA records given by the test), on one
//! ephemeral port over UDP and TCP, counting every query it receives; and a "silent"
//! server, a bound UDP socket that never answers.
//!
//! Included with `#[path = "support/dns.rs"] mod dns;` by the crates that use it (not from
//! `support/mod.rs`: the other test crates do not need hickory-server).
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_server::Server;
use hickory_server::net::runtime::{Time, TokioRuntimeProvider};
use hickory_server::proto::rr::rdata::{A, AAAA, PTR, SOA};
use hickory_server::proto::rr::{LowerName, Name, RData, Record, RecordType};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::store::in_memory::InMemoryZoneHandler;
use hickory_server::zone_handler::{AxfrPolicy, Catalog, ZoneType};

/// One record served.
#[derive(Debug, Clone)]
pub enum Rec {
    /// `ip`'s PTR record names `name`.
    Ptr(IpAddr, &'static str),
    /// `name` has address `ip` (A or AAAA by family).
    Addr(&'static str, IpAddr),
}

/// The TTL of every record served.
pub const TTL: u32 = 600;

/// Every query received: name (lower case, with the trailing dot) and type.
type Seen = Arc<Mutex<Vec<(String, RecordType)>>>;

struct Counting {
    catalog: Catalog,
    seen: Seen,
}

#[async_trait::async_trait]
impl RequestHandler for Counting {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        response: R,
    ) -> ResponseInfo {
        if let Ok(info) = request.request_info() {
            self.seen.lock().unwrap().push((info.query.name().to_string(), info.query.query_type()));
        }
        self.catalog.handle_request::<R, T>(request, response).await
    }
}

/// A name server answering for the zones of its records.
pub struct TestDns {
    addr: SocketAddr,
    seen: Seen,
    _server: Server<Counting>,
}

impl TestDns {
    /// Serves `records` on 127.0.0.1 (UDP and TCP, one port). Each forward name's zone is
    /// its last two labels (`googlebot.com.evil.net` is in `evil.net`); PTR records are in
    /// `in-addr.arpa` and `ip6.arpa`, so an address without one has no PTR (NXDOMAIN).
    pub async fn start(records: &[Rec]) -> TestDns {
        let mut zones: BTreeSet<String> = ["in-addr.arpa.".to_owned(), "ip6.arpa.".to_owned()].into();
        for r in records {
            {
                let (Rec::Addr(name, _) | Rec::Ptr(_, name)) = r;
                let labels: Vec<&str> = name.trim_end_matches('.').rsplit('.').take(2).collect();
                zones.insert(format!("{}.{}.", labels[1], labels[0]));
            }
        }
        let mut catalog = Catalog::new();
        for zone in &zones {
            let origin = Name::from_ascii(zone).unwrap();
            let mut handler = InMemoryZoneHandler::<TokioRuntimeProvider>::empty(
                origin.clone(),
                ZoneType::Primary,
                AxfrPolicy::Deny,
            );
            let soa = SOA::new(
                Name::from_ascii(format!("ns.{zone}")).unwrap(),
                Name::from_ascii(format!("hostmaster.{zone}")).unwrap(),
                1,
                3600,
                600,
                86400,
                60,
            );
            assert!(handler.upsert_mut(Record::from_rdata(origin.clone(), TTL, RData::SOA(soa)), 1));
            for r in records {
                let record = match *r {
                    Rec::Ptr(ip, name) => {
                        let owner = Name::from(ip);
                        let target = Name::from_ascii(format!("{}.", name.trim_end_matches('.'))).unwrap();
                        Record::from_rdata(owner, TTL, RData::PTR(PTR(target)))
                    }
                    Rec::Addr(name, ip) => {
                        let owner = Name::from_ascii(format!("{}.", name.trim_end_matches('.'))).unwrap();
                        let data = match ip {
                            IpAddr::V4(v4) => RData::A(A(v4)),
                            IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
                        };
                        Record::from_rdata(owner, TTL, data)
                    }
                };
                if origin.zone_of(&record.name) && zone_of(&zones, &record.name) == *zone {
                    assert!(handler.upsert_mut(record, 1));
                }
            }
            catalog.upsert(LowerName::new(&origin), vec![Arc::new(handler)]);
        }
        let seen: Seen = Arc::default();
        let mut server = Server::new(Counting { catalog, seen: seen.clone() });
        let (udp, tcp) = bind_pair().await;
        let addr = udp.local_addr().unwrap();
        server.register_socket(udp);
        server.register_listener(tcp, Duration::from_secs(10), 4096);
        TestDns { addr, seen, _server: server }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queries received for `name` (without the trailing dot) of type `rtype`.
    pub fn count(&self, name: &str, rtype: RecordType) -> usize {
        let name = format!("{}.", name.trim_end_matches('.')).to_ascii_lowercase();
        self.seen.lock().unwrap().iter().filter(|(n, t)| *n == name && *t == rtype).count()
    }

    /// PTR queries received for `ip`.
    pub fn ptr_queries(&self, ip: IpAddr) -> usize {
        self.count(&Name::from(ip).to_ascii(), RecordType::PTR)
    }

    /// Every query received.
    pub fn total(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

/// The zone (of `zones`) a name belongs to: the longest that contains it.
fn zone_of(zones: &BTreeSet<String>, name: &Name) -> String {
    zones
        .iter()
        .filter(|z| Name::from_ascii(z).unwrap().zone_of(name))
        .max_by_key(|z| z.len())
        .cloned()
        .unwrap_or_default()
}

/// A UDP socket and a TCP listener on the same loopback port.
async fn bind_pair() -> (tokio::net::UdpSocket, tokio::net::TcpListener) {
    for _ in 0..50 {
        let udp = tokio::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let port = udp.local_addr().unwrap().port();
        if let Ok(tcp) = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await {
            return (udp, tcp);
        }
    }
    panic!("no loopback port free for both UDP and TCP");
}

/// A name server that never answers: a bound UDP socket nobody reads (and no TCP).
pub struct SilentDns {
    socket: std::net::UdpSocket,
}

impl SilentDns {
    /// Binds it.
    pub fn start() -> SilentDns {
        SilentDns { socket: std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap() }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.socket.local_addr().unwrap()
    }
}
