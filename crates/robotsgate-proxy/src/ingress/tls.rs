//! HTTPS termination for `robotsgate ingress`: the site's certificate chain and key (PEM
//! files of `[ingress] tls_cert` and `tls_key`), served with rustls, offering `h2` and
//! `http/1.1` in ALPN.

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::IngressError;

/// The ALPN protocols offered, in order of preference.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// The server configuration for the certificate chain in `cert` and its key in `key`
/// (PEM). A file that cannot be read, holds no certificate or key, or a key that is not
/// the certificate's, is an error naming the file.
pub(super) fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, IngressError> {
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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(cert, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| bad(key, format!("not the key of {}: {e}", cert.display())))?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}
