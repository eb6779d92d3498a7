//! Whether and how a connection to PostgreSQL is encrypted, as its connection string says.
//!
//! `sslmode=require`: TLS (rustls), with the server's certificate checked against the system's
//! trusted roots, or those of the PEM file `SSL_CERT_FILE` names (a managed database's own CA),
//! and its name against the host (libpq's `verify-full`). Otherwise (`disable`, or `prefer`,
//! the default) the connection is not encrypted: anima does not try TLS it was not asked for,
//! since a server whose certificate it cannot check would then refuse it.

use tokio_postgres::config::SslMode;
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::memory::StoreError;

/// The TLS connector for `config`, or `None` for a plain connection.
pub(super) fn connector(
    config: &Config,
    place: &str,
) -> Result<Option<MakeRustlsConnect>, StoreError> {
    if config.get_ssl_mode() != SslMode::Require {
        return Ok(None);
    }
    crate::tls::install();
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map_or_else(|| "none found".to_string(), |e| e.to_string());
        return Err(StoreError::Connect {
            place: place.to_string(),
            why: format!(
                "sslmode=require, but there are no trusted root certificates to check the server's \
                 against ({why}); SSL_CERT_FILE may name a PEM file of them"
            ),
        });
    }
    let tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(MakeRustlsConnect::new(tls)))
}

/// What went wrong with TLS in `e`, if that is why it failed: a certificate that is not trusted
/// or not the host's, or a server that does not offer TLS.
pub(super) fn failure(e: &tokio_postgres::Error) -> Option<String> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let inner = s
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map_or(s, |inner| inner as &(dyn std::error::Error + 'static));
        if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        source = s.source();
    }
    // tokio-postgres's own TLS failures ("server does not support TLS") carry no rustls error.
    let text = e.to_string();
    text.starts_with("error performing TLS handshake").then(|| {
        text.trim_start_matches("error performing TLS handshake")
            .trim_start_matches(": ")
            .to_string()
    })
}
