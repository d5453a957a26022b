//! HTTPS termination for `robotsgate ingress`: the site's certificate chain and key (PEM
//! files of `[ingress] tls_cert` and `tls_key`), served with rustls, offering `h2` and
//! `http/1.1` in ALPN. The pair is held by a [`SiteCert`], which SIGHUP re-reads: new
//! handshakes get the new pair; a pair that does not load leaves the one in force.

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::IngressError;

/// The ALPN protocols offered, in order of preference.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// The site's certificate and key in force, replaced whole by [`SiteCert::reload`].
#[derive(Debug)]
pub(super) struct SiteCert {
    current: ArcSwap<CertifiedKey>,
    provider: Arc<CryptoProvider>,
}

impl SiteCert {
    /// Reads `cert` and `key` again; the new pair serves the handshakes from now on. A pair
    /// that does not load changes nothing (the error names the file).
    pub(super) fn reload(&self, cert: &Path, key: &Path) -> Result<(), IngressError> {
        let pair = load(cert, key, &self.provider)?;
        self.current.store(Arc::new(pair));
        Ok(())
    }
}

impl ResolvesServerCert for SiteCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// The chain in `cert` and its key in `key` (PEM). A file that cannot be read, holds no
/// certificate or key, or a key that is not the certificate's, is an error naming the file.
fn load(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, IngressError> {
    let bad = |path: &Path, why: String| IngressError::Tls { path: path.display().to_string(), why };
    let pem = std::fs::read(cert).map_err(|e| bad(cert, format!("cannot read: {e}")))?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(cert, format!("not PEM certificates: {e}")))?;
    if chain.is_empty() {
        return Err(bad(cert, "no CERTIFICATE in it".into()));
    }
    let pem = std::fs::read(key).map_err(|e| bad(key, format!("cannot read: {e}")))?;
    let private = PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| bad(key, format!("no usable private key (PKCS#8, PKCS#1 or SEC1 PEM): {e}")))?;
    CertifiedKey::from_der(chain, private, provider)
        .map_err(|e| bad(key, format!("not the key of {}: {e}", cert.display())))
}

/// The server configuration for the certificate chain in `cert` and its key in `key`
/// (PEM), and the holder of the pair (for reloading it). See [`load`] for the errors.
pub(super) fn server_config(
    cert: &Path,
    key: &Path,
) -> Result<(Arc<ServerConfig>, Arc<SiteCert>), IngressError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let pair = load(cert, key, &provider)?;
    let site = Arc::new(SiteCert { current: ArcSwap::from_pointee(pair), provider: provider.clone() });
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| IngressError::Tls { path: cert.display().to_string(), why: e.to_string() })?
        .with_no_client_auth()
        .with_cert_resolver(site.clone());
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok((Arc::new(config), site))
}
