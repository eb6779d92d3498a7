//! `[memory] keep_days`, carried out: the daemon leading the soul's scheduled work drops the
//! working memory of conversations quiet that long, and their finished inbox rows
//! (`faces::Forgetting::forget_quiet`), at most once an hour, the first soon after it leads.
//!
//! Owns when the pass runs; what it drops is the store's.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{info, warn};

use super::scans::Scan;
use crate::memory::Store;

/// How often the pass runs at most: it reads every conversation's last moment.
const EVERY: Duration = Duration::from_secs(3600);

/// Runs the pass while the daemon leads, for conversations quiet `keep`.
pub(crate) async fn quiet_conversations(store: Arc<dyn Store>, keep: Duration, mut scan: Scan) {
    let mut last: Option<Instant> = None;
    while scan.next().await {
        if last.is_some_and(|t| t.elapsed() < EVERY) {
            continue;
        }
        last = Some(Instant::now());
        let keep_ms = i64::try_from(keep.as_millis()).unwrap_or(i64::MAX);
        let quiet_since = crate::memory::now_ms().saturating_sub(keep_ms);
        match store.forget_quiet(quiet_since).await {
            Ok(p) if p.conversations > 0 => info!(
                conversations = p.conversations,
                entries = p.entries,
                inbox_rows = p.inbox_rows,
                "working memory of quiet conversations dropped ([memory] keep_days)"
            ),
            Ok(_) => {}
            Err(e) => warn!(error = %e, "cannot drop the working memory of quiet conversations"),
        }
    }
}
