//! TLS for HTTP/2 runs (`--set tls=true`): rustls with the *ring* provider,
//! ALPN `h2` only, and the system's CA certificates (or a PEM file given as
//! `--set ca=FILE`). The handshake happens before the run, so it costs no
//! request anything; every record's decryption afterwards is the client's
//! own time, inside `recv_lag` like any other delay of its reading thread.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::path::PathBuf;
use std::sync::Arc;

/// TLS settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsSpec {
    /// PEM file of the CA certificates to trust (default: the system's, /etc/ssl/certs).
    pub ca: Option<PathBuf>,
}

/// A connector for `spec`; the error says which file or certificate failed.
pub fn connector(spec: &TlsSpec) -> Result<tokio_rustls::TlsConnector, String> {
    let mut roots = rustls::RootCertStore::empty();
    match &spec.ca {
        Some(p) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(p)
                .and_then(|it| it.collect())
                .map_err(|e| format!("--set ca={}: {e}", p.display()))?;
            if certs.is_empty() {
                return Err(format!("--set ca={}: no PEM certificate in the file", p.display()));
            }
            for c in certs {
                roots.add(c).map_err(|e| format!("--set ca={}: {e}", p.display()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err("no CA certificates found on this system: give one with --set ca=FILE".into());
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(cfg)))
}
