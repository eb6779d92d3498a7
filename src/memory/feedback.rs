//! What people say of the soul's replies: one row per (reply, person), the latest value
//! they gave it. A reply is named by the surface's reference of the message it went into
//! (the first part delivered, or the message it was streamed into); the surface decides
//! which clicks are worth recording. Knows nothing of buttons or Slack. The SQLite side is
//! `sqlite::feedback`.

pub use super::records::feedback::{Judged, Verdict};
