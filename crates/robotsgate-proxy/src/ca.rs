//! The local certificate authority for TLS interception: creating it, loading it, and
//! minting short-lived leaf certificates per host, each minted once however many
//! handshakes for that host arrive together.
//!
//! A CONNECT tunnel hides the path, so path-level enforcement of HTTPS needs the proxy to
//! terminate TLS as the origin. The operator creates a CA (`robotsgate ca init`) and trusts
//! it in the scrapers; robotsgate then answers each intercepted handshake with a leaf for
//! the CONNECT host signed by that CA, and opens its own, fully verified TLS connection to
//! the real origin.
//!
//! ```no_run
//! use robotsgate_proxy::ca::{Ca, init_ca};
//! let files = init_ca(std::path::Path::new("ca"), false).unwrap();
//! let ca = Ca::load(std::path::Path::new("ca")).unwrap();
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use time::OffsetDateTime;

use robotsgate::origin::Host;

/// The CA certificate file name in a CA folder.
pub const CA_CERT: &str = "ca.pem";
/// The CA private key file name in a CA folder (mode 0600).
pub const CA_KEY: &str = "ca-key.pem";

/// A problem with the local CA.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// `ca init` would overwrite an existing CA.
    #[error(
        "a CA already exists in {0} (use --force to replace it; scrapers trusting the old one will stop working)"
    )]
    Exists(PathBuf),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The certificate or key is not usable.
    #[error("{what}: {reason}")]
    Invalid {
        /// Which file or step.
        what: String,
        /// Why.
        reason: String,
    },
}

/// Where `init_ca` wrote the CA.
#[derive(Debug, Clone)]
pub struct CaFiles {
    /// The certificate (to trust in clients).
    pub cert: PathBuf,
    /// The private key (keep it secret).
    pub key: PathBuf,
}

fn invalid(what: impl Into<String>, reason: impl ToString) -> CaError {
    CaError::Invalid { what: what.into(), reason: reason.to_string() }
}

/// Creates a new CA in `dir`: `ca.pem` and `ca-key.pem` (readable by the owner only).
/// Refuses to replace an existing CA unless `force`.
pub fn init_ca(dir: &Path, force: bool) -> Result<CaFiles, CaError> {
    let cert_path = dir.join(CA_CERT);
    let key_path = dir.join(CA_KEY);
    if !force && (cert_path.exists() || key_path.exists()) {
        return Err(CaError::Exists(dir.to_path_buf()));
    }
    std::fs::create_dir_all(dir).map_err(|source| CaError::Io { path: dir.to_path_buf(), source })?;
    let key = KeyPair::generate().map_err(|e| invalid("generating the CA key", e))?;
    let mut params = CertificateParams::default();
    let now = OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(3650);
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "robotsgate local CA");
    dn.push(DnType::OrganizationName, "robotsgate");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params.serial_number = Some(random_serial());
    let cert = params.self_signed(&key).map_err(|e| invalid("signing the CA", e))?;
    write_file(&key_path, key.serialize_pem().as_bytes(), 0o600)?;
    write_file(&cert_path, cert.pem().as_bytes(), 0o644)?;
    Ok(CaFiles { cert: cert_path, key: key_path })
}

fn write_file(path: &Path, data: &[u8], mode: u32) -> Result<(), CaError> {
    let io = |source| CaError::Io { path: path.to_path_buf(), source };
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut f = opts.open(path).map_err(io)?;
    #[cfg(unix)]
    {
        // `mode` only applies to new files: make sure an existing one is tightened too.
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(mode)).map_err(io)?;
    }
    f.write_all(data).map_err(io)?;
    f.sync_all().map_err(io)
}

fn random_serial() -> SerialNumber {
    // Serials must be unique per CA, not secret: std's randomly seeded hasher over a counter
    // and the time gives 16 bytes that do not repeat.
    use std::hash::{BuildHasher, Hasher};
    let mut bytes = Vec::with_capacity(16);
    for i in 0..2u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        h.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()),
        );
        bytes.extend_from_slice(&h.finish().to_be_bytes());
    }
    bytes[0] &= 0x7f; // positive
    SerialNumber::from_slice(&bytes)
}

/// How long minted leaves are valid; they are replaced well before.
const LEAF_VALIDITY: Duration = Duration::from_secs(2 * 24 * 3600);
/// How long a minted leaf is reused.
const LEAF_REUSE: Duration = Duration::from_secs(24 * 3600);

/// A loaded CA that mints leaf certificates.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    cert_der: CertificateDer<'static>,
    /// One key for all leaves (minting is then one signature).
    leaf_key: KeyPair,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// Loads `ca.pem` and `ca-key.pem` from `dir`.
    pub fn load(dir: &Path) -> Result<Ca, CaError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).map_err(|source| CaError::Io { path, source })
        };
        let cert_pem = read(CA_CERT)?;
        let key_pem = read(CA_KEY)?;
        let key =
            KeyPair::from_pem(&key_pem).map_err(|e| invalid(dir.join(CA_KEY).display().to_string(), e))?;
        let cert_der = {
            use rustls::pki_types::pem::PemObject;
            CertificateDer::from_pem_slice(cert_pem.as_bytes())
                .map_err(|e| invalid(dir.join(CA_CERT).display().to_string(), e))?
        };
        let issuer = Issuer::from_ca_cert_der(&cert_der, key)
            .map_err(|e| invalid(dir.join(CA_CERT).display().to_string(), e))?;
        let leaf_key = KeyPair::generate().map_err(|e| invalid("generating the leaf key", e))?;
        Ok(Ca { issuer, cert_der, leaf_key })
    }

    /// The CA certificate.
    pub fn certificate(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// A leaf certificate for `host` (SAN = the name or the IP), valid for two days.
    pub fn mint(&self, host: &Host) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), CaError> {
        let name = host.name();
        let mut params = CertificateParams::default();
        let now = OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + time::Duration::seconds(LEAF_VALIDITY.as_secs() as i64);
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name.as_ref());
        params.distinguished_name = dn;
        params.subject_alt_names = vec![match host.ip() {
            Some(ip) => SanType::IpAddress(ip),
            None => {
                SanType::DnsName(name.as_ref().try_into().map_err(|e| invalid(format!("host {name}"), e))?)
            }
        }];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(random_serial());
        let cert = params
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(|e| invalid(format!("minting for {name}"), e))?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.serialize_der()));
        Ok((cert.der().clone(), key))
    }
}

/// Answers intercepted handshakes: a rustls server configuration per host, with a leaf
/// from the CA, cached (bounded) and minted once per host. The handshake presents the
/// chain as intercepting proxies do, the leaf then the CA certificate (Chromium's
/// `--ignore-certificate-errors-spki-list` matches the keys of the chain presented).
#[derive(Clone)]
pub struct Interceptor {
    ca: Arc<Ca>,
    configs: moka::future::Cache<Host, Arc<ServerConfig>>,
    /// The sessions clients may resume, one bounded store for every leaf: rustls gives
    /// each configuration a store of 256 of its own, some 105 KB a busy host, which at
    /// the default `tls.leaf_cache` of 10,000 hosts was about 1 GB. A session resumes
    /// only with the name (SNI) it began with (RFC 6066 §3, which rustls checks).
    sessions: Arc<rustls::server::ServerSessionMemoryCache>,
    minted: Arc<std::sync::atomic::AtomicU64>,
}

/// Sessions kept for resumption across all intercepted hosts (a few hundred bytes each).
const SESSIONS: usize = 4096;

impl std::fmt::Debug for Interceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interceptor").field("cached", &self.configs.entry_count()).finish_non_exhaustive()
    }
}

impl Interceptor {
    /// An interceptor minting from `ca`, keeping at most `max_hosts` leaves.
    pub fn new(ca: Ca, max_hosts: u64) -> Interceptor {
        let configs = moka::future::Cache::builder().max_capacity(max_hosts).time_to_live(LEAF_REUSE).build();
        Interceptor {
            ca: Arc::new(ca),
            configs,
            sessions: rustls::server::ServerSessionMemoryCache::new(SESSIONS),
            minted: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    /// Leaves minted so far (cache misses).
    pub fn minted(&self) -> u64 {
        self.minted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The server configuration for a handshake as `host` (ALPN h2 and http/1.1).
    pub async fn server_config(&self, host: &Host) -> Result<Arc<ServerConfig>, Arc<CaError>> {
        self.configs
            .try_get_with_by_ref(host, async {
                let (cert, key) = self.ca.mint(host)?;
                self.minted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let mut config = ServerConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| invalid("TLS versions", e))?
                    .with_no_client_auth()
                    .with_single_cert(vec![cert, self.ca.certificate().clone()], key)
                    .map_err(|e| invalid(format!("leaf for {host}"), e))?;
                config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
                config.session_storage = self.sessions.clone();
                Ok::<_, CaError>(Arc::new(config))
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("robotsgate-ca-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn init_refuses_to_overwrite_and_key_is_private() {
        let dir = temp_dir("init");
        let files = init_ca(&dir, false).unwrap();
        assert!(matches!(init_ca(&dir, false), Err(CaError::Exists(_))));
        init_ca(&dir, true).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&files.key).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn every_leaf_shares_one_bounded_session_store() {
        let dir = temp_dir("sessions");
        init_ca(&dir, false).unwrap();
        let interceptor = Interceptor::new(Ca::load(&dir).unwrap(), 10);
        let a = interceptor.server_config(&Host::parse("a.example").unwrap()).await.unwrap();
        let b = interceptor.server_config(&Host::parse("b.example").unwrap()).await.unwrap();
        assert!(!Arc::ptr_eq(&a, &b), "a leaf per host");
        let store = |c: &ServerConfig| Arc::as_ptr(&c.session_storage).cast::<()>();
        assert_eq!(store(&a), store(&b), "one session store for both");
        assert_eq!(store(&a), Arc::as_ptr(&interceptor.sessions).cast::<()>());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn minted_leaf_verifies_against_the_ca() {
        let dir = temp_dir("mint");
        init_ca(&dir, false).unwrap();
        let ca = Ca::load(&dir).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.certificate().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        for host in ["example.com", "127.0.0.1", "[::1]"] {
            let h = Host::parse(host).unwrap();
            let (cert, _) = ca.mint(&h).unwrap();
            let name = rustls::pki_types::ServerName::try_from(h.name().into_owned()).unwrap();
            let now = rustls::pki_types::UnixTime::now();
            use rustls::client::danger::ServerCertVerifier;
            verifier
                .verify_server_cert(&cert, &[], &name, &[], now)
                .unwrap_or_else(|e| panic!("{host}: {e}"));
            let other = rustls::pki_types::ServerName::try_from("other.example").unwrap();
            assert!(verifier.verify_server_cert(&cert, &[], &other, &[], now).is_err());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
