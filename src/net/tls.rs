//! TLS for outbound connections: the trusted roots (webpki roots plus configured extra
//! roots) and the rustls client configuration.

use std::sync::Arc;

use rustls::pki_types::CertificateDer;

/// TLS trust for outbound connections.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// Trust the Mozilla root store shipped in `webpki-roots`.
    pub webpki_roots: bool,
    /// Additional trusted roots (e.g. a company CA, or a test CA).
    pub extra_roots: Vec<CertificateDer<'static>>,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig { webpki_roots: true, extra_roots: Vec::new() }
    }
}

/// A TLS configuration problem.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// A root certificate was rejected by rustls.
    #[error("root certificate {index} is not usable: {reason}")]
    BadRoot {
        /// Position in `extra_roots`.
        index: usize,
        /// rustls' reason.
        reason: String,
    },
    /// rustls refused the protocol setup.
    #[error("TLS setup failed: {0}")]
    Rustls(#[from] rustls::Error),
    /// A PEM file could not be read.
    #[error("cannot read certificates from {path}: {reason}")]
    Pem {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

/// Reads all certificates from a PEM file.
pub fn load_pem_certs(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    use rustls::pki_types::pem::PemObject;
    let err = |reason: String| TlsSetupError::Pem { path: path.display().to_string(), reason };
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| err(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no certificates found".into()));
    }
    Ok(certs)
}

/// The rustls client configuration for `tls`, offering the ALPN protocols given.
pub fn client_config(tls: &TlsConfig, alpn: &[&[u8]]) -> Result<Arc<rustls::ClientConfig>, TlsSetupError> {
    let mut roots = rustls::RootCertStore::empty();
    if tls.webpki_roots {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    for (index, cert) in tls.extra_roots.iter().enumerate() {
        roots.add(cert.clone()).map_err(|e| TlsSetupError::BadRoot { index, reason: e.to_string() })?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}
