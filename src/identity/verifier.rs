//! [`Verifier`]: a request's client address and claimed product token in, a [`Verdict`]
//! out, within [`RdnsConfig::max_wait`](super::rdns::RdnsConfig::max_wait).

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use super::operator::Operator;
use super::ranges::{ListLimits, ListSource, Ranges};
use super::rdns::{RdnsConfig, ReverseDns};
use super::verdict::{Method, Verdict, Why};

/// Checks that a request claiming an operator's product token comes from that operator.
///
/// The order, stated once: the operator is the one whose [`Operator::tokens`] include the
/// token (none: [`Unverified(UnknownToken)`](Why::UnknownToken)); an address in one of its
/// loaded IP lists is verified; otherwise, if it has reverse DNS suffixes, forward-confirmed
/// reverse DNS decides (verified, failed, or unverified while pending or when DNS fails);
/// otherwise an operator with a loaded list fails ([`Why::NotInRanges`]) and one with
/// nothing loaded is [`Unverified(NoMethod)`](Why::NoMethod).
///
/// Cheap to clone (one reference count).
///
/// ```
/// use robotsgate::identity::{Method, Operator, Verdict, Verifier, Why};
/// use robotsgate::identity::ranges::{ListLimits, Ranges};
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let operators = Operator::defaults();
/// // The bundled lists only; no reverse DNS.
/// let verifier = Verifier::new(&operators, Some(Ranges::for_operators(&operators, ListLimits::default())), None);
/// let gptbot = verifier.verify("20.171.206.10".parse()?, "GPTBot").await;
/// assert_eq!(gptbot, Verdict::Verified(Method::IpRange { list: "https://openai.com/gptbot.json".into() }));
/// assert_eq!(verifier.verify("192.0.2.1".parse()?, "gptbot").await, Verdict::Failed(Why::NotInRanges));
/// assert_eq!(verifier.verify("192.0.2.1".parse()?, "ExampleBot").await, Verdict::Unverified(Why::UnknownToken));
/// assert_eq!(verifier.operator("ChatGPT-User"), Some("OpenAI"));
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct Verifier {
    inner: Arc<Inner>,
}

struct Inner {
    operators: Vec<Entry>,
    /// Lower-case token → index into `operators`.
    tokens: HashMap<Box<str>, usize, foldhash::quality::RandomState>,
    ranges: Option<Ranges>,
    rdns: Option<ReverseDns>,
}

struct Entry {
    name: Arc<str>,
    suffixes: Vec<String>,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier")
            .field("operators", &self.inner.operators.iter().map(|o| &o.name).collect::<Vec<_>>())
            .field("ranges", &self.inner.ranges)
            .field("rdns", &self.inner.rdns)
            .finish()
    }
}

/// The longest product token looked up (longer ones belong to no operator).
const MAX_TOKEN: usize = 64;

impl Verifier {
    /// A verifier of `operators` (a token claimed by two goes to the first), checking
    /// addresses against `ranges` (which should hold their lists, see
    /// [`Ranges::for_operators`]) and by reverse DNS with `rdns` (which should know their
    /// suffixes, see [`Verifier::with_dns`]).
    pub fn new(operators: &[Operator], ranges: Option<Ranges>, rdns: Option<ReverseDns>) -> Verifier {
        let mut tokens = HashMap::with_hasher(foldhash::quality::RandomState::default());
        for (i, op) in operators.iter().enumerate() {
            for t in &op.tokens {
                if t.len() <= MAX_TOKEN {
                    tokens.entry(t.to_ascii_lowercase().into_boxed_str()).or_insert(i);
                }
            }
        }
        let operators = operators
            .iter()
            .map(|op| Entry { name: Arc::from(op.name.as_str()), suffixes: op.rdns_suffixes.clone() })
            .collect();
        Verifier { inner: Arc::new(Inner { operators, tokens, ranges, rdns }) }
    }

    /// A verifier of `operators` with their lists (bundled copies and files, see
    /// [`Ranges::for_operators`]) and reverse DNS through `rdns`' name servers.
    pub fn with_dns(operators: &[Operator], limits: ListLimits, rdns: RdnsConfig) -> Verifier {
        let ranges = Ranges::for_operators(operators, limits);
        let rdns = ReverseDns::new(operators.iter().flat_map(|o| o.rdns_suffixes.iter()), rdns);
        Verifier::new(operators, Some(ranges), Some(rdns))
    }

    /// The lists (give them to [`refresh::spawn`](super::ranges::refresh::spawn) to keep
    /// them fresh).
    pub fn ranges(&self) -> Option<&Ranges> {
        self.inner.ranges.as_ref()
    }

    /// The reverse DNS checker.
    pub fn rdns(&self) -> Option<&ReverseDns> {
        self.inner.rdns.as_ref()
    }

    /// The name of the operator whose bots use `token`.
    pub fn operator(&self, token: &str) -> Option<&str> {
        self.entry(token).map(|e| &*e.name)
    }

    fn entry(&self, token: &str) -> Option<&Entry> {
        let mut buf = [0u8; MAX_TOKEN];
        let lower = buf.get_mut(..token.len())?;
        lower.copy_from_slice(token.as_bytes());
        lower.make_ascii_lowercase();
        let lower = std::str::from_utf8(lower).ok()?;
        self.inner.tokens.get(lower).and_then(|&i| self.inner.operators.get(i))
    }

    /// The verdict for a request from `ip` whose `User-Agent` carries `token`.
    pub async fn verify(&self, ip: IpAddr, token: &str) -> Verdict {
        let Some(op) = self.entry(token) else { return Verdict::Unverified(Why::UnknownToken) };
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let (hit, has_list) = match &self.inner.ranges {
            Some(ranges) => ranges.with_table(|table| {
                let hit = table.lookup(ip).find(|l| **l.operator() == *op.name).map(|l| l.name().clone());
                let has_list = hit.is_some() || table.lists().iter().any(|l| **l.operator() == *op.name);
                (hit, has_list)
            }),
            None => (None, false),
        };
        if let Some(list) = hit {
            return Verdict::Verified(Method::IpRange { list });
        }
        if let (false, Some(rdns)) = (op.suffixes.is_empty(), &self.inner.rdns) {
            return rdns.verify(ip, &op.suffixes).await;
        }
        if has_list { Verdict::Failed(Why::NotInRanges) } else { Verdict::Unverified(Why::NoMethod) }
    }
}

impl Ranges {
    /// The lists of `operators` (each URL or path once per operator).
    pub fn for_operators(operators: &[Operator], limits: ListLimits) -> Ranges {
        let mut sources: Vec<ListSource> = Vec::new();
        for op in operators {
            for list in &op.ip_lists {
                let source = ListSource::new(list, &op.name);
                if !sources.contains(&source) {
                    sources.push(source);
                }
            }
        }
        Ranges::new(sources, limits)
    }
}
