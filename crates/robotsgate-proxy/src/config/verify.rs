//! `[verify]`: its checks, and the [`Operator`]s it describes.

use std::collections::HashSet;
use std::time::Duration;

use robotsgate::identity::Operator;
use robotsgate::identity::httpsig::DirectoryUrl;

use super::sections::{VerifyOperator, VerifySection};

/// The longest `verify.max_wait` (a reverse DNS query's own bound).
const MAX_WAIT: Duration = Duration::from_secs(2);
/// The longest product token an operator can claim (longer ones are never looked up).
const MAX_TOKEN: usize = 64;
/// The shortest `verify.refresh_interval`.
const MIN_REFRESH: Duration = Duration::from_secs(60);
/// The longest `verify.clock_skew`.
const MAX_SKEW: Duration = Duration::from_secs(300);

/// Why `[verify]` is wrong: the key, or the `[[verify.operators]]` entry (from 0), and
/// why.
pub(super) enum VerifyProblem {
    Key(&'static str, String),
    Operator(usize, String),
}

/// Checks `[verify]`.
pub(super) fn check_verify(v: &VerifySection) -> Result<(), VerifyProblem> {
    if v.max_wait.0.is_zero() || v.max_wait.0 > MAX_WAIT {
        return Err(VerifyProblem::Key(
            "verify.max_wait",
            format!("{:?} is not more than 0 and at most 2s (a reverse DNS query's own bound)", v.max_wait.0),
        ));
    }
    if v.refresh_interval.0 < MIN_REFRESH {
        return Err(VerifyProblem::Key(
            "verify.refresh_interval",
            format!("{:?} is less than 1m (the operators publish daily)", v.refresh_interval.0),
        ));
    }
    if v.clock_skew.0 > MAX_SKEW {
        return Err(VerifyProblem::Key(
            "verify.clock_skew",
            format!("{:?} is more than 5m (a signature lives minutes)", v.clock_skew.0),
        ));
    }
    let mut names = HashSet::new();
    let mut tokens = HashSet::new();
    let mut agents = HashSet::new();
    for (i, op) in v.operators.iter().enumerate() {
        let bad = |message: String| VerifyProblem::Operator(i, message);
        check_operator(op).map_err(bad)?;
        // What it publishes, against what is checked: an operator none of whose ways is
        // in force has every bot unverified; with `require`, every one refused, which no
        // one means. (Without it, as for the default operators with `rdns = false`, its
        // bots are only not verified.)
        let in_force = (v.ip_ranges && !op.ip_lists.is_empty())
            || (v.rdns && !op.rdns_suffixes.is_empty())
            || (v.signatures && !op.signature_agents.is_empty());
        if v.enabled && op.require && !in_force {
            let off: Vec<&str> = [
                (!op.ip_lists.is_empty(), "ip_lists with verify.ip_ranges = false"),
                (!op.rdns_suffixes.is_empty(), "rdns_suffixes with verify.rdns = false"),
                (!op.signature_agents.is_empty(), "signature_agents with verify.signatures = false"),
            ]
            .into_iter()
            .filter_map(|(has, what)| has.then_some(what))
            .collect();
            return Err(bad(format!(
                "nothing would verify its bots ({}): with require, every one of them would be refused",
                off.join(", ")
            )));
        }
        if !names.insert(op.name.to_ascii_lowercase()) {
            return Err(bad(format!("the operator {:?} is given twice", op.name)));
        }
        for t in &op.tokens {
            if !tokens.insert(t.to_ascii_lowercase()) {
                return Err(bad(format!("the token {t:?} is already another operator's")));
            }
        }
        for a in &op.signature_agents {
            if let Ok(url) = DirectoryUrl::from_member(a.trim(), None)
                && !agents.insert(url.identifier().clone())
            {
                return Err(bad(format!("the signature agent {a:?} is already another operator's")));
            }
        }
    }
    Ok(())
}

fn check_operator(op: &VerifyOperator) -> Result<(), String> {
    if op.name.trim().is_empty() || op.name.chars().any(char::is_control) {
        return Err("name must be non-empty, without control characters".into());
    }
    if op.tokens.is_empty() {
        return Err("tokens must list at least one product token".into());
    }
    for t in &op.tokens {
        if t.is_empty()
            || t.len() > MAX_TOKEN
            || !t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "{t:?} is not a product token (letters, digits, '-' and '_', at most {MAX_TOKEN})"
            ));
        }
    }
    if op.ip_lists.is_empty() && op.rdns_suffixes.is_empty() && op.signature_agents.is_empty() {
        return Err(
            "needs ip_lists, rdns_suffixes or signature_agents (nothing would verify its bots)".into()
        );
    }
    for a in &op.signature_agents {
        DirectoryUrl::from_member(a.trim(), None)
            .map_err(|e| format!("signature_agents: {a:?} is not a key directory URL or origin ({e})"))?;
    }
    if op.ip_lists.iter().any(|l| l.trim().is_empty()) {
        return Err("an empty ip_lists entry".into());
    }
    for s in &op.rdns_suffixes {
        let d = s.trim_matches('.');
        let labels_ok = d.split('.').all(|l| {
            !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
        if !labels_ok || !d.contains('.') {
            return Err(format!(
                "{s:?} is not a domain of at least two labels (a suffix like \"com\" would let \
                 anyone in)"
            ));
        }
        // A public suffix (co.uk, github.io): anyone can register a name under it, and
        // point a PTR and an A record at a crawler of their own.
        if psl::domain(d.to_ascii_lowercase().as_bytes()).is_none() {
            return Err(format!(
                "{s:?} is a public suffix (anyone can register a name under it, and so pass \
                 as this operator): name the operator's own domain"
            ));
        }
    }
    Ok(())
}

impl VerifySection {
    /// The operators, as the verifier takes them.
    pub fn operators(&self) -> Vec<Operator> {
        self.operators
            .iter()
            .map(|o| {
                Operator::new(o.name.clone())
                    .tokens(o.tokens.iter().cloned())
                    .ip_lists(o.ip_lists.iter().cloned())
                    .rdns_suffixes(o.rdns_suffixes.iter().cloned())
                    .signature_agents(o.signature_agents.iter().map(|a| a.trim().to_owned()))
                    .require(o.require)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn error(toml: &str) -> String {
        Config::parse("v.toml", toml).unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_the_librarys_operators() {
        let c = Config::default();
        assert!(c.verify.enabled && c.verify.ip_ranges && c.verify.rdns);
        assert_eq!(c.verify.operators(), robotsgate::identity::Operator::defaults());
    }

    #[test]
    fn operators_given_replace_the_defaults() {
        let c = Config::parse(
            "v.toml",
            "[[verify.operators]]\nname = \"Example\"\ntokens = [\"ExampleBot\"]\n\
             ip_lists = [\"/etc/example.json\"]\nrdns_suffixes = [\"crawl.example.com\"]\n",
        )
        .unwrap();
        let ops = c.verify.operators();
        assert_eq!(ops.len(), 1);
        assert_eq!(
            (ops[0].name.as_str(), ops[0].tokens.as_slice(), ops[0].rdns_suffixes.as_slice()),
            ("Example", &["ExampleBot".to_owned()][..], &["crawl.example.com".to_owned()][..])
        );
        let c = Config::parse("v.toml", "[verify]\nrdns = false\n").unwrap();
        assert_eq!(c.verify.operators(), robotsgate::identity::Operator::defaults());
        // Signature agents alone verify; require is taken.
        let c = Config::parse(
            "v.toml",
            "[[verify.operators]]\nname = \"Example\"\ntokens = [\"ExampleBot\"]\n\
             signature_agents = [\" https://bot.example \"]\nrequire = true\n",
        )
        .unwrap();
        let ops = c.verify.operators();
        assert_eq!(ops[0].signature_agents, ["https://bot.example"]);
        assert!(ops[0].require);
    }

    #[test]
    fn bad_values_are_errors_naming_the_key_or_entry() {
        let e = error("[verify]\nmax_wait = \"0s\"\n");
        assert!(e.starts_with("v.toml:2:") && e.contains("verify.max_wait"), "{e}");
        assert!(error("[verify]\nmax_wait = \"10s\"\n").contains("at most 2s"));
        assert!(error("[verify]\nenabled = \"yes\"\n").contains("enabled"));
        assert!(error("[ingress]\nimpersonators = \"block\"\n").contains("impersonators"));
        let op = |body: &str| error(&format!("[verify]\n\n[[verify.operators]]\n{body}"));
        let e = op("name = \"X\"\ntokens = [\"X Bot\"]\nrdns_suffixes = [\"x.example\"]\n");
        assert!(e.starts_with("v.toml:3:") && e.contains("entry 1") && e.contains("product token"), "{e}");
        assert!(
            op("name = \"X\"\ntokens = [\"XBot\"]\n")
                .contains("needs ip_lists, rdns_suffixes or signature_agents")
        );
        assert!(op("name = \"X\"\ntokens = [\"XBot\"]\nrdns_suffixes = [\"com\"]\n").contains("two labels"));
        // Two labels, but anyone can register under them (before, accepted: any crawler
        // whose PTR and A records named a domain of its own under co.uk passed).
        for public in ["co.uk", "CO.UK.", "github.io", "com.au"] {
            let e = op(&format!("name = \"X\"\ntokens = [\"XBot\"]\nrdns_suffixes = [{public:?}]\n"));
            assert!(e.contains("public suffix"), "{public}: {e}");
        }
        let c = Config::parse(
            "v.toml",
            "[[verify.operators]]\nname = \"X\"\ntokens = [\"XBot\"]\n\
             rdns_suffixes = [\"crawl.example.co.uk\", \"example.co.uk\", \"x.example\"]\n",
        );
        assert!(c.is_ok(), "{:?}", c.err());
        // The operators robotsgate knows: none of their domains is a public suffix.
        for o in robotsgate::identity::Operator::defaults() {
            for s in &o.rdns_suffixes {
                assert!(psl::domain(s.as_bytes()).is_some(), "{}: {s}", o.name);
            }
        }
        // What it publishes is not checked: its bots could never be verified.
        let e = error(
            "[verify]\nsignatures = false\n\n[[verify.operators]]\nname = \"X\"\ntokens = [\"XBot\"]\n\
             signature_agents = [\"https://x.example\"]\nrequire = true\n",
        );
        assert!(
            e.contains("entry 1") && e.contains("signature_agents with verify.signatures = false"),
            "{e}"
        );
        assert!(e.contains("every one of them would be refused"), "{e}");
        let e = error(
            "[verify]\nrdns = false\n\n[[verify.operators]]\nname = \"X\"\ntokens = [\"XBot\"]\nrdns_suffixes = [\"x.example\"]\nrequire = true\n",
        );
        assert!(e.contains("rdns_suffixes with verify.rdns = false"), "{e}");
        // One way still in force is enough; with verification off, nothing is checked.
        let both = "\n[[verify.operators]]\nname = \"X\"\ntokens = [\"XBot\"]\nrdns_suffixes = [\"x.example\"]\n\
                    signature_agents = [\"https://x.example\"]\nrequire = true\n";
        assert!(Config::parse("v.toml", &format!("[verify]\nrdns = false\n{both}")).is_ok());
        assert!(
            Config::parse(
                "v.toml",
                &format!("[verify]\nenabled = false\nrdns = false\nsignatures = false\n{both}")
            )
            .is_ok()
        );
        assert!(op("name = \"X\"\ntokens = [\"XBot\"]\nip_lists = [\"\"]\n").contains("empty ip_lists"));
        assert!(
            op("name = \"X\"\ntokens = [\"XBot\"]\nsignature_agents = [\"http://x.example\"]\n")
                .contains("not a key directory URL")
        );
        assert!(op("name = \"X\"\ntokens = []\nrdns_suffixes = [\"x.example\"]\n").contains("at least one"));
        assert!(error("[verify]\nrefresh_interval = \"10s\"\n").contains("verify.refresh_interval"));
        assert!(error("[verify]\nclock_skew = \"1h\"\n").contains("verify.clock_skew"));
        assert!(error("[verify]\nreplay = \"ignore\"\n").contains("replay"));
        let twice = "[[verify.operators]]\nname = \"X\"\ntokens = [\"XBot\"]\nrdns_suffixes = [\"x.example\"]\n\n\
                     [[verify.operators]]\nname = \"Y\"\ntokens = [\"xbot\"]\nrdns_suffixes = [\"y.example\"]\n";
        let e = error(twice);
        assert!(e.contains("entry 2") && e.contains("already another operator's"), "{e}");
        let twice = "[[verify.operators]]\nname = \"X\"\ntokens = [\"XBot\"]\nsignature_agents = [\"https://x.example\"]\n\n\
                     [[verify.operators]]\nname = \"Y\"\ntokens = [\"YBot\"]\n\
                     signature_agents = [\"https://x.example/.well-known/http-message-signatures-directory\"]\n";
        let e = error(twice);
        assert!(e.contains("entry 2") && e.contains("signature agent"), "{e}");
    }

    #[test]
    fn name_servers_take_a_port() {
        let c = Config::parse("v.toml", "[dns]\nservers = [\"192.0.2.53\", \"127.0.0.1:5353\"]\n").unwrap();
        let ports: Vec<u16> = c.dns.servers.iter().map(|s| s.addr().port()).collect();
        assert_eq!(ports, [53, 5353]);
        assert!(error("[dns]\nservers = [\"ns.example:53\"]\n").contains("servers"));
    }
}
