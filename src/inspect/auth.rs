//! Who may look: the token (`ANIMA_INSPECT_TOKEN`, or the one `anima inspect` makes), given
//! once in the login link, kept in an HttpOnly, SameSite=Strict cookie, or sent as a bearer
//! header; the chat's CSRF token. Every comparison is in constant time.
//!
//! `gate` is the one check: a route layer over every route of the inspector, so a route added
//! later cannot forget it. It answers the login link itself (`/inspect/?token=T`) and lets
//! through only a request that carries the token; no handler checks again.

use std::io::Read;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::Inspector;

/// The session cookie's name.
pub const COOKIE: &str = "anima_inspect";

/// 32 random bytes from the operating system, as 64 hex digits.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        // No /dev/urandom: two version-4 UUIDs, from the same source of randomness uuid uses.
        bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `given` is `expected`, in constant time (an empty `given` never is).
pub fn same(given: &str, expected: &str) -> bool {
    !given.is_empty() && given.as_bytes().ct_eq(expected.as_bytes()).unwrap_u8() == 1
}

/// The token the request carries: its bearer header, else its session cookie.
fn presented(headers: &HeaderMap) -> &str {
    if let Some(bearer) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return bearer.trim();
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())
        .unwrap_or("")
}

/// Whether the request may see the inspector.
pub fn allowed(s: &Inspector, headers: &HeaderMap) -> bool {
    same(presented(headers), s.token.expose())
}

/// The path the login link opens.
pub const LOGIN_PATH: &str = "/inspect/";

/// The login link's query: its token.
#[derive(serde::Deserialize)]
struct LoginQuery {
    token: Option<String>,
}

/// The login link's token in a query (`token=T`), percent-decoded; `None` without one (or in
/// a query that cannot be read, which then is no login).
fn login_token(uri: &axum::http::Uri) -> Option<String> {
    axum::extract::Query::<LoginQuery>::try_from_uri(uri)
        .ok()
        .and_then(|q| q.0.token)
}

/// The route layer every inspector route sits behind: the login link answered here (a cookie
/// and a redirect, or 401), any other request passed on only with the token (cookie or
/// bearer), else 401.
pub async fn gate(State(s): State<Arc<Inspector>>, request: Request, next: Next) -> Response {
    if request.uri().path() == LOGIN_PATH {
        if let Some(token) = login_token(request.uri()) {
            return login(&s, &token);
        }
    }
    if !allowed(&s, request.headers()) {
        return refused();
    }
    next.run(request).await
}

/// A request without the token: 401.
pub fn refused() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "401: open the inspector through its login link (it carries the token)\n",
    )
        .into_response()
}

/// The login link's answer: the cookie set, and a 303 to the page without the token in its
/// address; 401 for a wrong token.
pub fn login(s: &Inspector, token: &str) -> Response {
    if !same(token, s.token.expose()) {
        return refused();
    }
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
        s.token.expose()
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, cookie),
            (header::LOCATION, "/inspect/".to_string()),
        ],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_64_hex_digits_and_differ() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn the_cookie_or_the_bearer_is_read() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            "a=b; anima_inspect=tok ; c=d".parse().unwrap(),
        );
        assert_eq!(presented(&h), "tok");
        h.insert(header::AUTHORIZATION, "Bearer other".parse().unwrap());
        assert_eq!(presented(&h), "other");
        assert_eq!(presented(&HeaderMap::new()), "");
    }

    #[test]
    fn the_login_token_is_read_from_the_query_decoded() {
        let at = |u: &str| login_token(&u.parse().unwrap());
        assert_eq!(at("/inspect/?a=1&token=ab%2Bc").as_deref(), Some("ab+c"));
        assert_eq!(at("/inspect/?thread=x"), None);
        assert_eq!(at("/inspect/"), None);
    }

    #[test]
    fn nothing_matches_an_empty_or_different_token() {
        assert!(same("abc", "abc"));
        assert!(!same("", ""));
        assert!(!same("abd", "abc"));
        assert!(!same("ab", "abc"));
    }
}
