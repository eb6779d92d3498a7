//! The connection string in `ANIMA_DATABASE_URL`, read as libpq reads it: a URL
//! (`postgres://user:password@host:port/db?sslmode=verify-full&sslrootcert=/etc/ca.pem`) or
//! `key=value` pairs (`host=db user=anima sslmode=require`).
//!
//! Owns the TLS settings the string carries (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`):
//! they are taken out before the rest goes to tokio-postgres, whose parser knows three of
//! libpq's modes and none of its files, and `tls` gives them libpq's meanings. Every error
//! names the part of the string that is wrong and never shows the password.

use std::path::PathBuf;
use std::str::FromStr;

use tokio_postgres::config::SslMode;

use super::tls::{Mode, Roots, Settings};
use crate::memory::StoreError;

/// A connection string read: tokio-postgres's configuration and the TLS it asks for.
pub(super) struct Conninfo {
    pub config: tokio_postgres::Config,
    pub tls: Settings,
}

/// The TLS keys anima reads itself; tokio-postgres gets the rest of the string.
const TLS_KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

pub(super) fn parse(url: &str) -> Result<Conninfo, StoreError> {
    let bad = |why: String| StoreError::Connect {
        place: "ANIMA_DATABASE_URL".into(),
        why,
    };
    let (rest, pairs) = if url.contains("://") {
        take_from_query(url)
    } else {
        take_from_pairs(url).map_err(&bad)?
    };
    let mut config = tokio_postgres::Config::from_str(&rest).map_err(|e| {
        bad(format!(
            "not a PostgreSQL connection string ({})",
            redact(&e.to_string(), url)
        ))
    })?;
    let tls = settings(&pairs).map_err(&bad)?;
    // tokio-postgres asks the server for TLS unless the mode is `disable`, and goes on
    // without it only under `prefer`; `tls` checks what the mode promises.
    config.ssl_mode(match tls.mode {
        Mode::Disable => SslMode::Disable,
        Mode::Prefer => SslMode::Prefer,
        Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
    });
    Ok(Conninfo { config, tls })
}

/// The TLS settings of the pairs taken out, with libpq's defaults and rules.
fn settings(pairs: &[(String, String)]) -> Result<Settings, String> {
    let get = |key: &str| {
        pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let roots = get("sslrootcert").map(|v| match v {
        "system" => Roots::System,
        file => Roots::File(PathBuf::from(file)),
    });
    let mode = match get("sslmode") {
        None if roots == Some(Roots::System) => Mode::VerifyFull,
        None | Some("prefer") => Mode::Prefer,
        Some("disable") => Mode::Disable,
        Some("require") => Mode::Require,
        Some("verify-ca") => Mode::VerifyCa,
        Some("verify-full") => Mode::VerifyFull,
        Some("allow") => {
            return Err(
                "sslmode=allow is not supported: use prefer (TLS when the server \
                        offers it) or disable"
                    .into(),
            )
        }
        Some(other) => {
            return Err(format!(
                "sslmode={other}: not one of disable, prefer, require, verify-ca, verify-full"
            ))
        }
    };
    if roots == Some(Roots::System) && mode != Mode::VerifyFull && mode != Mode::Disable {
        // libpq's rule: the system's roots vouch for host names, so only a check of the name
        // makes them mean anything.
        return Err("sslrootcert=system needs sslmode=verify-full (or no sslmode)".into());
    }
    let file = |key: &str| get(key).filter(|v| !v.is_empty()).map(PathBuf::from);
    let (cert, key) = (file("sslcert"), file("sslkey"));
    if cert.is_some() != key.is_some() {
        return Err("sslcert and sslkey go together: a client certificate and its key".into());
    }
    Ok(Settings {
        mode,
        roots,
        client: cert.zip(key),
    })
}

/// A URL without its TLS parameters, and those parameters (values percent-decoded).
fn take_from_query(url: &str) -> (String, Vec<(String, String)>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), Vec::new());
    };
    let mut taken = Vec::new();
    let mut kept = Vec::new();
    for part in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once('=').unwrap_or((part, ""));
        if TLS_KEYS.contains(&key) {
            taken.push((key.to_string(), percent_decoded(value)));
        } else {
            kept.push(part);
        }
    }
    let rest = match kept.is_empty() {
        true => base.to_string(),
        false => format!("{base}?{}", kept.join("&")),
    };
    (rest, taken)
}

/// `%2F` → `/`; a `%` not followed by two hex digits is kept as written.
fn percent_decoded(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `key=value` pairs without the TLS ones, and those (values unquoted). Values are bare words
/// or single-quoted, with `\'` and `\\` escapes, as libpq writes them.
fn take_from_pairs(text: &str) -> Result<(String, Vec<(String, String)>), String> {
    let mut taken = Vec::new();
    let mut rest = String::new();
    let mut chars = text.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            return Err(format!(
                "`{key}` has no value (key=value pairs, or a postgres:// URL)"
            ));
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        let quoted = chars.next_if(|(_, c)| *c == '\'').is_some();
        let mut closed = !quoted;
        while let Some((_, c)) = chars.next() {
            match c {
                '\\' => value.extend(chars.next().map(|(_, c)| c)),
                '\'' if quoted => {
                    closed = true;
                    break;
                }
                c if c.is_whitespace() && !quoted => break,
                c => value.push(c),
            }
        }
        if !closed {
            return Err(format!("the value of `{key}` has no closing quote"));
        }
        let end = chars.peek().map_or(text.len(), |(at, _)| *at);
        if TLS_KEYS.contains(&key.as_str()) {
            taken.push((key, value));
        } else {
            rest.push_str(text[start..end].trim_end());
            rest.push(' ');
        }
    }
    Ok((rest.trim_end().to_string(), taken))
}

/// An error text with the connection string's password taken out, if it was echoed.
pub(super) fn redact(text: &str, url: &str) -> String {
    match password_of(url) {
        Some(p) if !p.is_empty() => text.replace(p, "[redacted]"),
        _ => text.to_string(),
    }
}

/// The password of a `postgres://user:password@host/db` or `key=value` string, as written.
fn password_of(url: &str) -> Option<&str> {
    if let Some(rest) = url.split_once("://").map(|(_, r)| r) {
        let userinfo = rest.rsplit_once('@')?.0;
        return userinfo.split_once(':').map(|(_, p)| p);
    }
    url.split_whitespace()
        .find_map(|kv| kv.strip_prefix("password="))
        .map(|p| p.trim_matches('\''))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(url: &str) -> Conninfo {
        parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    fn refused(url: &str) -> String {
        match parse(url) {
            Ok(_) => panic!("{url} was taken"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn without_sslmode_tls_is_preferred_as_libpq_does() {
        let c = read("postgres://anima:pw@db.example:5433/soul");
        assert_eq!(c.tls.mode, Mode::Prefer);
        assert_eq!(c.config.get_ssl_mode(), SslMode::Prefer);
        assert_eq!(c.config.get_ports(), [5433]);
        assert_eq!(c.config.get_dbname(), Some("soul"));
    }

    #[test]
    fn verify_full_and_its_files_are_read_from_a_url() {
        let c = read(
            "postgres://anima:pw@db/soul?sslmode=verify-full&connect_timeout=7\
             &sslrootcert=%2Fetc%2Fca%20root.pem&sslcert=/c.pem&sslkey=/k.pem",
        );
        assert_eq!(c.tls.mode, Mode::VerifyFull);
        assert_eq!(c.config.get_ssl_mode(), SslMode::Require);
        assert_eq!(
            c.tls.roots,
            Some(Roots::File(PathBuf::from("/etc/ca root.pem")))
        );
        assert_eq!(
            c.tls.client,
            Some((PathBuf::from("/c.pem"), PathBuf::from("/k.pem")))
        );
        assert_eq!(
            c.config.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(7)),
            "the other parameters go on to tokio-postgres"
        );
    }

    #[test]
    fn verify_ca_is_read_from_key_value_pairs_with_quotes() {
        let c = read(
            "host=db user=anima password='p w\\'d' sslmode = verify-ca \
             sslrootcert='/etc/my ca.pem' dbname=soul",
        );
        assert_eq!(c.tls.mode, Mode::VerifyCa);
        assert_eq!(c.tls.roots, Some(Roots::File("/etc/my ca.pem".into())));
        assert_eq!(c.config.get_password(), Some(&b"p w'd"[..]));
        assert_eq!(c.config.get_dbname(), Some("soul"));
    }

    #[test]
    fn sslrootcert_system_means_verify_full() {
        assert_eq!(
            read("postgres://a@db/s?sslrootcert=system").tls.mode,
            Mode::VerifyFull
        );
        let e = refused("postgres://a@db/s?sslrootcert=system&sslmode=require");
        assert!(
            e.contains("sslrootcert=system needs sslmode=verify-full"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_mode_is_named() {
        let e = refused("postgres://a:secret-9@db/s?sslmode=verify_full");
        assert!(e.contains("sslmode=verify_full: not one of"), "{e}");
        assert!(refused("host=db sslmode=allow").contains("allow is not supported"));
    }

    #[test]
    fn a_client_certificate_needs_its_key() {
        let e = refused("postgres://a@db/s?sslmode=require&sslcert=/c.pem");
        assert!(e.contains("sslcert and sslkey go together"), "{e}");
    }

    #[test]
    fn an_unclosed_quote_is_named_and_the_password_never_shown() {
        assert!(refused("host=db sslrootcert='/x").contains("no closing quote"));
        let e = refused("postgres://a:secret-9@db:notaport/s");
        assert!(!e.contains("secret-9"), "{e}");
    }
}
