//! A test CA made with rcgen (not robotsgate's own), a leaf it signed, and rustls
//! configurations for origins and clients.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A CA and one leaf it signed (serverAuth and clientAuth).
pub struct TestCa {
    /// The CA certificate (PEM).
    pub pem: String,
    /// The CA certificate (DER).
    pub der: CertificateDer<'static>,
    leaf: CertificateDer<'static>,
    leaf_key: Vec<u8>,
    leaf_pem: String,
    leaf_key_pem: String,
}

impl TestCa {
    /// A fresh CA named `robotsgate test CA {label}` and a leaf for `names` (DNS names or IP
    /// addresses; the first is also the common name).
    pub fn new(label: &str, names: &[&str]) -> TestCa {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, format!("robotsgate test CA {label}"));
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);

        let mut leaf_params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        leaf_params
            .distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or("localhost"));
        leaf_params.use_authority_key_identifier_extension = true;
        leaf_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        // clientAuth too: the nodes of a Redis Cluster over TLS are each other's clients.
        leaf_params.extended_key_usages =
            vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth, rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
        TestCa {
            pem: ca_cert.pem(),
            der: ca_cert.der().clone(),
            leaf: leaf.der().clone(),
            leaf_key: leaf_key.serialize_der(),
            leaf_pem: leaf.pem(),
            leaf_key_pem: leaf_key.serialize_pem(),
        }
    }

    /// A CA with a leaf for `localhost` and `127.0.0.1`.
    pub fn localhost() -> TestCa {
        TestCa::new("localhost", &["localhost", "127.0.0.1"])
    }

    /// Writes the CA certificate as PEM to `path`, returning it.
    pub fn write_pem(&self, path: &Path) -> PathBuf {
        std::fs::write(path, &self.pem).unwrap();
        path.to_path_buf()
    }

    /// Writes the leaf certificate and its key as PEM into `dir` (`leaf.pem`,
    /// `leaf-key.pem`), for a server that is not in process; their paths.
    pub fn write_leaf(&self, dir: &Path) -> (PathBuf, PathBuf) {
        let (cert, key) = (dir.join("leaf.pem"), dir.join("leaf-key.pem"));
        std::fs::write(&cert, &self.leaf_pem).unwrap();
        std::fs::write(&key, &self.leaf_key_pem).unwrap();
        (cert, key)
    }

    /// The leaf certificate.
    pub fn leaf(&self) -> &CertificateDer<'static> {
        &self.leaf
    }

    /// A root store with only this CA.
    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.der.clone()).unwrap();
        roots
    }

    /// An origin's configuration presenting the leaf, offering `alpn`.
    pub fn server_config(&self, alpn: &[&[u8]]) -> Arc<ServerConfig> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.clone()));
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![self.leaf.clone()], key)
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }
}

/// A client configuration trusting exactly `roots`, offering `alpn`.
pub fn client_config(roots: RootCertStore, alpn: &[&[u8]]) -> Arc<ClientConfig> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// Whether `leaf` verifies for `name` against `roots` (and why not).
pub fn verify(leaf: &CertificateDer<'static>, roots: RootCertStore, name: &str) -> Result<(), rustls::Error> {
    use rustls::client::danger::ServerCertVerifier;
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .unwrap();
    let name = ServerName::try_from(name.to_owned()).unwrap();
    verifier.verify_server_cert(leaf, &[], &name, &[], UnixTime::now()).map(|_| ())
}
