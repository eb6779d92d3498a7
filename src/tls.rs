//! TLS for every client in the process (the model providers' and Slack's), chosen once at
//! start: rustls with the `ring` provider. With two providers compiled in and none chosen,
//! rustls would panic at the first handshake, so `cli::run` (and any test that builds a
//! client in-process) calls `install` before anything connects.

/// Installs rustls's `ring` provider as the process default (again is harmless).
pub fn install() {
    // Err means one is installed already, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
