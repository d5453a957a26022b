//! [`Verifier`]: a request's client address and claimed product token in, a [`Verdict`]
//! out, within [`RdnsConfig::max_wait`](super::rdns::RdnsConfig::max_wait).

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

use super::httpsig::{self, DirectoryUrl};
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
    /// The tokens as the operators write them, each once (the first operator's), with the
    /// index of its operator.
    written: Vec<(Arc<str>, usize)>,
    ranges: Option<Ranges>,
    rdns: Option<ReverseDns>,
    /// Web Bot Auth, when checked.
    signatures: Option<httpsig::Verifier>,
    /// Key directory identifier → index into `operators`.
    agents: HashMap<Arc<str>, usize, foldhash::quality::RandomState>,
}

struct Entry {
    name: Arc<str>,
    suffixes: Vec<String>,
    /// The token a signed request without one in its `User-Agent` is judged as.
    first_token: Option<Arc<str>>,
    require: bool,
}

/// What checking a request's claimed identity found ([`Verifier::verify_request`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The verdict.
    pub verdict: Verdict,
    /// The operator the request claims (by its token or its `Signature-Agent`), if any.
    pub operator: Option<Arc<str>>,
    /// The product token to judge the request as when its `User-Agent` carries none and
    /// its signature names an operator's `Signature-Agent`: the one the agent's Signature
    /// Agent Card names (when verified, and not another operator's), else the operator's
    /// first token.
    pub token: Option<Arc<str>>,
    /// The operator requires verification ([`Operator::require`]).
    pub required: bool,
}

impl Identity {
    /// Whether the request is to be refused for its identity: its check failed and
    /// impersonators are refused (`refuse_failed`), or the operator requires verification
    /// and the request is not verified.
    pub fn refused(&self, refuse_failed: bool) -> bool {
        (self.verdict.is_failed() && refuse_failed) || (self.required && !self.verdict.is_verified())
    }
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
        Verifier::with_signatures(operators, ranges, rdns, None)
    }

    /// [`Verifier::new`], checking Web Bot Auth signatures too with `signatures` (against
    /// the key directories of the operators' [`Operator::signature_agents`] only; an agent
    /// that is not a URL is left out).
    pub fn with_signatures(
        operators: &[Operator],
        ranges: Option<Ranges>,
        rdns: Option<ReverseDns>,
        signatures: Option<httpsig::Verifier>,
    ) -> Verifier {
        let mut agents = HashMap::with_hasher(foldhash::quality::RandomState::default());
        for (i, op) in operators.iter().enumerate() {
            for a in &op.signature_agents {
                if let Ok(url) = DirectoryUrl::from_member(a.trim(), None) {
                    agents.entry(url.identifier().clone()).or_insert(i);
                }
            }
        }
        let mut tokens = HashMap::with_hasher(foldhash::quality::RandomState::default());
        let mut written = Vec::new();
        for (i, op) in operators.iter().enumerate() {
            for t in &op.tokens {
                if t.len() <= MAX_TOKEN
                    && let std::collections::hash_map::Entry::Vacant(e) =
                        tokens.entry(t.to_ascii_lowercase().into_boxed_str())
                {
                    e.insert(i);
                    written.push((Arc::from(t.as_str()), i));
                }
            }
        }
        let operators = operators
            .iter()
            .map(|op| Entry {
                name: Arc::from(op.name.as_str()),
                suffixes: op.rdns_suffixes.clone(),
                first_token: op.tokens.first().map(|t| Arc::from(t.as_str())),
                require: op.require,
            })
            .collect();
        Verifier { inner: Arc::new(Inner { operators, tokens, written, ranges, rdns, signatures, agents }) }
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

    /// The Web Bot Auth verifier, when signatures are checked.
    pub fn signatures(&self) -> Option<&httpsig::Verifier> {
        self.inner.signatures.as_ref()
    }

    /// Every product token the operators' bots use, as written, with its operator's name
    /// (a token two operators claim: the first's). The ingress looks for these in every
    /// `User-Agent` ([`IngressBuilder::build`](crate::ingress::IngressBuilder::build)).
    pub fn tokens(&self) -> impl Iterator<Item = (&str, &str)> {
        let ops = &self.inner.operators;
        self.inner.written.iter().filter_map(|(t, i)| Some((&**t, &*ops.get(*i)?.name)))
    }

    /// The name of the operator whose bots use `token`.
    pub fn operator(&self, token: &str) -> Option<&str> {
        self.entry(token).map(|e| &*e.name)
    }

    fn entry(&self, token: &str) -> Option<&Entry> {
        self.index(token).and_then(|i| self.inner.operators.get(i))
    }

    /// The identity of `request` from `ip` whose `User-Agent` carries `token`, at `now`;
    /// `None` when it claims nothing to check (no token, and no `Signature-Agent` of an
    /// operator).
    ///
    /// The order, stated once:
    /// 1. A request whose `Signature-Agent` names one of an operator's
    ///    [`signature_agents`](Operator::signature_agents) (with signatures checked) claims
    ///    that operator. Its Web Bot Auth signatures are checked (only those of the
    ///    operators' agents: no other directory is fetched):
    ///    - verified, by an agent of the operator whose bots use `token` (or with no token:
    ///      it is judged as the operator's first token): [`Method::Signature`];
    ///    - failed: [`Why::Signature`] (an impersonator, a replay, an altered request),
    ///      whatever else it claims;
    ///    - verified for another operator than the token's, or unverified (the directory
    ///      unavailable): step 2 decides; with no token,
    ///      [`Unverified(SignatureUnchecked)`](Why::SignatureUnchecked).
    /// 2. The token's operator's published ranges and reverse DNS ([`Verifier::verify`]);
    ///    without a client address, [`Unverified(NoMethod)`](Why::NoMethod).
    ///
    /// [`Identity::required`] is the claimed operator's [`Operator::require`].
    pub async fn verify_request(
        &self,
        request: &http::request::Parts,
        ip: Option<IpAddr>,
        token: Option<&str>,
        now: SystemTime,
    ) -> Option<Identity> {
        let by_token = token.and_then(|t| self.index(t));
        let identity = |i: Option<usize>, verdict: Verdict, token: Option<Arc<str>>| {
            let op = i.and_then(|i| self.inner.operators.get(i));
            Identity {
                verdict,
                operator: op.map(|o| o.name.clone()),
                token,
                required: op.is_some_and(|o| o.require),
            }
        };
        let mut unchecked = None;
        if let Some(sig) = &self.inner.signatures {
            let named = httpsig::signature_agents(&request.headers, sig.config());
            let agents = &self.inner.agents;
            if let Some(&claimed) = named.iter().find_map(|d| agents.get(d.identifier())) {
                let wanted = |d: &DirectoryUrl| agents.contains_key(d.identifier());
                match sig.verify_agents(request, now, wanted).await {
                    httpsig::Verdict::Verified(v) => {
                        let signer = agents.get(&v.directory).copied();
                        if let Some(signer) = signer
                            && (token.is_none() || by_token == Some(signer))
                        {
                            let as_token = match token {
                                Some(_) => None,
                                None => self.judged_as(signer, v.product_token.clone()),
                            };
                            let method = Method::Signature { agent: v.directory, keyid: v.keyid };
                            return Some(identity(Some(signer), Verdict::Verified(method), as_token));
                        }
                    }
                    httpsig::Verdict::Failed(failure) => {
                        let agent = named
                            .iter()
                            .find(|d| agents.get(d.identifier()) == Some(&claimed))
                            .map_or_else(|| Arc::from(""), |d| d.identifier().clone());
                        let as_token = if token.is_none() {
                            self.inner.operators.get(claimed).and_then(|o| o.first_token.clone())
                        } else {
                            None
                        };
                        return Some(identity(
                            Some(claimed),
                            Verdict::Failed(Why::Signature { agent, failure }),
                            as_token,
                        ));
                    }
                    httpsig::Verdict::Unverified(why) => unchecked = Some((claimed, why)),
                }
            }
        }
        let Some(token) = token else {
            let (claimed, why) = unchecked?;
            let as_token = self.inner.operators.get(claimed).and_then(|o| o.first_token.clone());
            let verdict = Verdict::Unverified(Why::SignatureUnchecked(why.to_string().into()));
            return Some(identity(Some(claimed), verdict, as_token));
        };
        let verdict = match ip {
            Some(ip) => self.verify(ip, token).await,
            None if by_token.is_some() => Verdict::Unverified(Why::NoMethod),
            None => Verdict::Unverified(Why::UnknownToken),
        };
        Some(identity(by_token, verdict, None))
    }

    /// The token a request verified for operator `signer` without a token of its own is
    /// judged as: the one its directory's card names (`card`), unless that token is
    /// another operator's (a card cannot borrow another operator's allowances); else the
    /// operator's first token.
    fn judged_as(&self, signer: usize, card: Option<Arc<str>>) -> Option<Arc<str>> {
        card.filter(|t| self.index(t).is_none_or(|i| i == signer))
            .or_else(|| self.inner.operators.get(signer).and_then(|o| o.first_token.clone()))
    }

    fn index(&self, token: &str) -> Option<usize> {
        let mut buf = [0u8; MAX_TOKEN];
        let lower = buf.get_mut(..token.len())?;
        lower.copy_from_slice(token.as_bytes());
        lower.make_ascii_lowercase();
        let lower = std::str::from_utf8(lower).ok()?;
        self.inner.tokens.get(lower).copied()
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
