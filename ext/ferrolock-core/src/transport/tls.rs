//! TLS settings for rediss:// URLs: the system's roots plus an optional extra CA file.

use crate::error::{Error, Result};
use std::path::Path;
use std::sync::Arc;

pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        // A broken system certificate should not prevent using the others.
        let _ = roots.add(cert);
    }
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|e| {
            Error::argument(format!("tls_ca_file: cannot read {}: {e}", path.display()))
        })?;
        for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
            let cert = cert.map_err(|e| Error::argument(format!("tls_ca_file: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| Error::argument(format!("tls_ca_file: {e}")))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::argument(format!("tls: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
