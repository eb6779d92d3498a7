//! `POST /api/counsel`: anima as a daimon. Another soul (Claudicle, or another anima) sends
//! the whisper protocol's request and gets `{"whisper": "…"}` in this soul's voice, from one
//! model call (`Engine::counsel`).
//!
//! 404 unless `ANIMA_COUNSEL_TOKEN` is set, 401 without it or with a wrong one (checked
//! before the body is read); the body is read up to `MAX_BODY_BYTES` and its text is
//! untrusted (bounded by `daimon::protocol`, fenced by the call). At most `AT_ONCE` counsels
//! run at a time: more are answered 503, as Claudicle's daimons say they are busy.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;
use tracing::{info, warn};

use super::http::{authorised, HttpState};
use crate::config::secret::Secret;
use crate::daimon::protocol;
use crate::engine::Engine;

/// The largest counsel request read.
const MAX_BODY_BYTES: usize = 16 * 1024;
/// Counsels answered at once.
const AT_ONCE: usize = 2;

/// What `/api/counsel` needs: its token and the engine whose soul speaks.
pub struct Counsel {
    token: Secret,
    engine: Arc<Engine>,
    permits: Arc<Semaphore>,
}

impl Counsel {
    /// The endpoint, when `ANIMA_COUNSEL_TOKEN` is set.
    pub fn from_env(engine: &Arc<Engine>) -> Option<Counsel> {
        Some(Counsel {
            token: Secret::from_env("ANIMA_COUNSEL_TOKEN")?,
            engine: engine.clone(),
            permits: Arc::new(Semaphore::new(AT_ONCE)),
        })
    }
}

pub(super) async fn counsel(State(s): State<Arc<HttpState>>, request: Request) -> Response {
    let Some(c) = &s.counsel else {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    };
    if let Err(r) = authorised(&s, "/api/counsel", &request, &c.token) {
        return r.into_response();
    }
    let Ok(body) = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is over {MAX_BODY_BYTES} bytes"),
        )
            .into_response();
    };
    let asked = match protocol::read_asked(&body) {
        Ok(a) => a,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let Ok(_permit) = c.permits.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "busy counselling; ask again",
        )
            .into_response();
    };
    let started = std::time::Instant::now();
    match c.engine.counsel(&asked).await {
        Ok(whisper) => {
            info!(ms = started.elapsed().as_millis() as u64, "counsel given");
            axum::Json(serde_json::json!({ "whisper": whisper })).into_response()
        }
        Err(e) => {
            warn!(error = %e, "counsel not given");
            (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response()
        }
    }
}
