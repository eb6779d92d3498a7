//! The records both backends read and write: what a caller hands the store, what it hands
//! back, the stored enums' text, and the small rules over records that every backend applies
//! alike. Backend-free: no database crate is named here; SQLite and PostgreSQL (`postgres`)
//! both use these types, and `crate::memory` re-exports them.
//!
//! A stored enum is written as its `as_str` and read back with `FromStr`: a value this anima
//! does not know (a row a newer anima wrote, or a damaged one) is `StoreError::Unknown`,
//! naming the table and column, never a default.

pub mod claims;
pub mod dream;
pub mod feedback;
pub mod forget;
pub mod inbox;
pub mod process;
pub mod snapshot;
pub mod soul;
pub mod states;
pub mod trace;
pub mod turn;
pub mod users;
pub mod working;

pub use claims::DaemonRow;
pub use feedback::{Judged, Verdict};
pub use forget::{Forgotten, Pruned};
pub use inbox::{Inbound, InboxItem, InboxStatus, Intake, Overheard};
pub use snapshot::{ConversationState, Snapshot};
pub use soul::SoulState;
pub use states::{CognitiveRow, JournalEntry, NewMove, StateMove};
pub use trace::{PsycheSample, TraceRow, TraceSummary, TracedBody, TracedConversation};
pub use turn::{TurnContext, TurnRecord, TurnStart, UsageRecord, Whisper};
pub use users::{slug, UserRecord};
pub use working::{Entry, EntryType, NewEntry};

/// A stored enum: `as_str` writes it, `FromStr` reads it back (an unknown value is
/// `StoreError::Unknown` naming `$table.$column`), `ALL` lists every variant.
macro_rules! stored {
    ($ty:ident in $table:literal . $column:literal { $($variant:ident = $text:literal),+ $(,)? }) => {
        impl $ty {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The text stored for this value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $text),+
                }
            }
        }

        impl std::str::FromStr for $ty {
            type Err = crate::memory::StoreError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($ty::$variant),)+
                    other => Err(crate::memory::StoreError::Unknown {
                        table: $table,
                        column: $column,
                        value: other.to_owned(),
                    }),
                }
            }
        }
    };
}
pub(crate) use stored;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::StoreError;

    /// Every variant reads back as itself, and no two share a text.
    fn round_trips<T>(all: &[T], as_str: impl Fn(&T) -> &'static str)
    where
        T: std::str::FromStr<Err = StoreError> + PartialEq + std::fmt::Debug,
    {
        let mut texts: Vec<_> = all.iter().map(&as_str).collect();
        for v in all {
            assert_eq!(&as_str(v).parse::<T>().unwrap(), v);
        }
        texts.sort();
        texts.dedup();
        assert_eq!(texts.len(), all.len(), "two variants share a text");
    }

    #[test]
    fn every_stored_enum_reads_back_what_it_writes() {
        round_trips(InboxStatus::ALL, |v| v.as_str());
        round_trips(EntryType::ALL, |v| v.as_str());
        round_trips(Verdict::ALL, |v| v.as_str());
        assert_eq!(InboxStatus::ALL.len(), 6);
        assert_eq!(EntryType::ALL.len(), 7);
        assert_eq!(Verdict::ALL.len(), 2);
    }

    #[test]
    fn an_unknown_stored_value_is_an_error_naming_its_table_and_column() {
        let unknown = |e: StoreError| match e {
            StoreError::Unknown {
                table,
                column,
                value,
            } => (table, column, value),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            unknown("archived".parse::<InboxStatus>().unwrap_err()),
            ("inbox", "status", "archived".to_string())
        );
        assert_eq!(
            unknown("Pending".parse::<InboxStatus>().unwrap_err()),
            ("inbox", "status", "Pending".to_string()),
            "no case folding"
        );
        assert_eq!(
            unknown("".parse::<EntryType>().unwrap_err()),
            ("working_memory", "entry_type", String::new())
        );
        assert_eq!(
            unknown("meh".parse::<Verdict>().unwrap_err()),
            ("feedback", "value", "meh".to_string())
        );
        let said = StoreError::Unknown {
            table: "inbox",
            column: "status",
            value: "archived".into(),
        }
        .to_string();
        assert!(
            said.contains("inbox.status") && said.contains("\"archived\""),
            "{said}"
        );
        assert_eq!(Verdict::parse("good"), Some(Verdict::Good));
        assert_eq!(Verdict::parse("meh"), None);
    }
}
