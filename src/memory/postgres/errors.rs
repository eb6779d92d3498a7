//! What a PostgreSQL error says, in the server's words: its message, SQLSTATE, detail and
//! hint, and for the refusals an operator fixes (a role without rights) what to do. tokio-
//! postgres's own text is only the kind ("db error", "error performing TLS handshake"); the
//! cause is in its source chain, which nothing prints unless asked.
//!
//! Owns the words of `StoreError::Postgres` and of a failed connection (`connect_error`).
//! Never shows the password: the server's messages do not carry it, and connection strings
//! are not part of any error here.

use tokio_postgres::error::{DbError, SqlState};

use super::tls;
use crate::memory::StoreError;

/// `e` as a person reads it: the server's message, SQLSTATE, detail, hint and advice for a
/// database error; otherwise the kind and every cause under it ("error communicating with the
/// server: Connection reset by peer").
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => described(db),
        None => with_causes(e),
    }
}

/// A server's error: "permission denied for schema public (SQLSTATE 42501); …".
fn described(db: &DbError) -> String {
    let mut text = format!("{} (SQLSTATE {})", db.message(), db.code().code());
    if let Some(detail) = db.detail() {
        text.push_str(&format!("; detail: {detail}"));
    }
    if let Some(hint) = db.hint() {
        text.push_str(&format!("; hint: {hint}"));
    }
    if let Some(advice) = advice(db) {
        text.push_str(&format!("; {advice}"));
    }
    text
}

/// What an operator does about a refusal the configuration causes.
fn advice(db: &DbError) -> Option<String> {
    let code = db.code();
    if *code == SqlState::INSUFFICIENT_PRIVILEGE {
        let message = db.message();
        if let Some(schema) = message.strip_prefix("permission denied for schema ") {
            return Some(format!(
                "anima creates and migrates its tables in the schema: grant the role CREATE on it \
                 (GRANT CREATE ON SCHEMA {schema} TO <role>, as its owner) or connect as the \
                 schema's owner"
            ));
        }
        return Some(
            "the role lacks a right anima needs on its tables: connect as the role that created \
             them (the schema's owner), or grant this one theirs"
                .into(),
        );
    }
    if *code == SqlState::QUERY_CANCELED && db.message().contains("statement timeout") {
        return Some(
            "a statement_timeout (the role's, the database's or the connection string's) ended \
             it; anima's statements need none (ALTER ROLE <role> RESET statement_timeout)"
                .into(),
        );
    }
    if *code == SqlState::READ_ONLY_SQL_TRANSACTION {
        return Some(
            "the server takes no writes (a standby, or default_transaction_read_only): point \
             ANIMA_DATABASE_URL at the primary"
                .into(),
        );
    }
    None
}

/// `e`'s text and each cause's, joined by ": ", a cause that repeats the text above it left out.
fn with_causes(e: &tokio_postgres::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let said = s.to_string();
        if !said.is_empty() && !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = s.source();
    }
    text
}

/// Why a connection failed, in words that name the part of the string to fix: refused
/// credentials and a missing database are the configuration's; anything else is a server
/// that cannot be reached (yet).
pub(super) fn connect_error(place: &str, e: &tokio_postgres::Error) -> StoreError {
    let place = place.to_string();
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        let why = if *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            format!(
                "the server refused the user's credentials ({})",
                described(db)
            )
        } else if *code == SqlState::INVALID_CATALOG_NAME {
            format!("the database does not exist ({})", described(db))
        } else if code.code().starts_with("57") || code.code().starts_with("53") {
            // Starting up, shutting down, too many connections: it may come back.
            return StoreError::Unreachable {
                place,
                why: described(db),
            };
        } else {
            described(db)
        };
        return StoreError::Connect { place, why };
    }
    if let Some(why) = tls::failure(e) {
        // A certificate anima cannot trust, or a server without TLS: the configuration's to
        // fix, not a server to wait for.
        return StoreError::Connect {
            place,
            why: format!("TLS: {why}"),
        };
    }
    StoreError::Unreachable {
        place,
        why: with_causes(e),
    }
}
