//! Whether and how a connection to PostgreSQL is encrypted and whom it trusts, with libpq's
//! meanings of `sslmode` (rustls underneath):
//!
//! - `disable`: plain.
//! - `prefer` (the default): TLS when the server offers it, plain when it does not; the
//!   certificate is not checked.
//! - `require`: TLS or nothing; the certificate is not checked, unless `sslrootcert` names a
//!   file: then its chain is, as under `verify-ca`.
//! - `verify-ca`: the certificate must chain to a trusted root; its name is not checked.
//! - `verify-full`: the chain, and that the certificate is the host's (its name or IP).
//!
//! The trusted roots are those of the PEM file `sslrootcert` names, or, without one (or with
//! `system`), the system's (`SSL_CERT_FILE` may name a PEM file of them). `sslcert` and
//! `sslkey` give a client certificate for servers that ask for one. Owns the TLS
//! configuration and the words of a TLS failure; reads no file the string does not name.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::memory::StoreError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// Where the trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Roots {
    /// A PEM file of CA certificates.
    File(PathBuf),
    /// The system's (`sslrootcert=system`).
    System,
}

/// The TLS a connection string asks for (`conninfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Settings {
    pub mode: Mode,
    pub roots: Option<Roots>,
    /// A client certificate's PEM file and its key's.
    pub client: Option<(PathBuf, PathBuf)>,
}

impl Settings {
    /// The settings of tokio-postgres's own modes (a configuration built in code): `require`
    /// and `prefer` without a check of the certificate, as libpq means them.
    pub fn of(mode: tokio_postgres::config::SslMode) -> Settings {
        use tokio_postgres::config::SslMode;
        Settings {
            mode: match mode {
                SslMode::Disable => Mode::Disable,
                SslMode::Require => Mode::Require,
                _ => Mode::Prefer,
            },
            roots: None,
            client: None,
        }
    }
}

/// The TLS connector `settings` ask for, or `None` for a plain connection. A file that cannot
/// be read or holds no certificate (or key) is an error naming it.
pub(super) fn connector(
    settings: &Settings,
    place: &str,
) -> Result<Option<MakeRustlsConnect>, StoreError> {
    let wrong = |why: String| StoreError::Connect {
        place: place.to_string(),
        why,
    };
    crate::tls::install();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let Some(verifier) = verifier(settings, &provider).map_err(wrong)? else {
        return Ok(None);
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| wrong(format!("TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match &settings.client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = certificates(cert, "sslcert").map_err(wrong)?;
            let key = private_key(key).map_err(wrong)?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                wrong(format!(
                    "sslcert and sslkey do not make a client certificate ({e})"
                ))
            })?
        }
    };
    Ok(Some(MakeRustlsConnect::new(config)))
}

/// What checks the server's certificate under `settings`: nothing, its chain, or its chain
/// and name; `None` for no TLS at all.
fn verifier(
    settings: &Settings,
    provider: &Arc<CryptoProvider>,
) -> Result<Option<Arc<dyn ServerCertVerifier>>, String> {
    let roots = || {
        let roots = trusted(
            settings.roots.as_ref().unwrap_or(&Roots::System),
            settings.mode,
        )?;
        webpki(roots, provider)
    };
    Ok(Some(match (settings.mode, &settings.roots) {
        (Mode::Disable, _) => return Ok(None),
        (Mode::Prefer, _) | (Mode::Require, None) => Arc::new(Unchecked(provider.clone())),
        (Mode::Require | Mode::VerifyCa, _) => Arc::new(ChainOnly(roots()?)),
        (Mode::VerifyFull, _) => roots()?,
    }))
}

/// The trusted roots: the file's certificates, or the system's.
fn trusted(roots: &Roots, mode: Mode) -> Result<RootCertStore, String> {
    let found = match roots {
        Roots::File(path) => certificates(path, "sslrootcert")?,
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            if found.certs.is_empty() {
                let why = found
                    .errors
                    .first()
                    .map_or_else(|| "none found".to_string(), |e| e.to_string());
                return Err(format!(
                    "sslmode={} checks the server's certificate, but there are no trusted root \
                     certificates on this system ({why}): name a PEM file of them in \
                     sslrootcert (or SSL_CERT_FILE)",
                    mode.name()
                ));
            }
            found.certs
        }
    };
    let mut store = RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(found);
    if added == 0 {
        return Err(format!(
            "{}: no certificate in it can be a trusted root",
            roots.name()
        ));
    }
    Ok(store)
}

fn webpki(
    roots: RootCertStore,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, String> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| format!("TLS: the trusted roots cannot be used ({e})"))
}

/// The certificates of a PEM file, or why there are none.
fn certificates(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(path, key)?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            format!(
                "{key} {}: not a PEM file of certificates ({e})",
                path.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!("{key} {}: no certificate in it", path.display()));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1), or why there is none.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(path, "sslkey")?;
    PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| format!("sslkey {}: no private key in it ({e})", path.display()))
}

fn read(path: &Path, key: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path)
        .map_err(|e| format!("cannot read the file {key} names, {}: {e}", path.display()))
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        }
    }
}

impl Roots {
    fn name(&self) -> String {
        match self {
            Roots::File(path) => format!("sslrootcert {}", path.display()),
            Roots::System => "the system's root certificates".into(),
        }
    }
}

/// `prefer`, and `require` without roots: any certificate (libpq checks none), though the
/// handshake's signatures are still the certificate's key's.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: webpki's check of the chain, with a certificate for another name taken (the
/// name is checked last, so a certificate refused only for its name has a trusted chain).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                NotValidForName | NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
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
            return Some(tls_words(tls));
        }
        source = s.source();
    }
    // tokio-postgres's own TLS failures ("server does not support TLS") are its error's
    // cause, which its text leaves out.
    let text = e.to_string();
    text.starts_with("error performing TLS handshake").then(|| {
        std::error::Error::source(e)
            .map_or_else(|| "the handshake failed".into(), |s| s.to_string())
    })
}

/// A rustls error, with what to do about a certificate refused.
fn tls_words(e: &rustls::Error) -> String {
    use rustls::CertificateError::*;
    let advice = match e {
        rustls::Error::InvalidCertificate(UnknownIssuer | BadSignature) => {
            "; it must be signed by a trusted root: the PEM file sslrootcert names, or the \
             system's"
        }
        rustls::Error::InvalidCertificate(NotValidForName | NotValidForNameContext { .. }) => {
            "; the host in the connection string must be one the certificate names \
             (sslmode=verify-ca checks the chain alone)"
        }
        _ => "",
    };
    format!("{e}{advice}")
}
