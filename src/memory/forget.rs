//! What forgetting removed, counted: the face's result types, where `crate::memory` names
//! them. Each backend forgets in its own file (`sqlite::forget`, `postgres::forget`), to the
//! promise written on `faces::Forgetting`.

pub use super::records::forget::{Forgotten, Pruned};
