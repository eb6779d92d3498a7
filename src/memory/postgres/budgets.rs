//! Budgets of outside services' calls and their refusals on PostgreSQL, shared by every daemon
//! of the soul (see `faces::Budgets`; the tables and `anima_take_budget` are
//! migrations/postgres/0006's). On the server's clock, like the claims.

use std::time::Duration;

use async_trait::async_trait;

use super::{Postgres, Prepared};
use crate::memory::faces::Budgets;
use crate::memory::StoreError;

type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl Budgets for Postgres {
    async fn take_budget(&self, buckets: &[(&str, u32)]) -> Result<bool> {
        let names: Vec<&str> = buckets.iter().map(|(n, _)| *n).collect();
        let limits: Vec<i32> = buckets
            .iter()
            .map(|(_, l)| (*l).min(i32::MAX as u32) as i32)
            .collect();
        let result = async {
            let client = self.client().await?;
            Ok(client
                .row("SELECT anima_take_budget($1, $2)", &[&names, &limits])
                .await?
                .get(0))
        }
        .await;
        self.noted(result)
    }

    async fn drain_budget(&self, bucket: &str) -> Result<()> {
        let result = async {
            let client = self.client().await?;
            client
                .run(
                    "UPDATE budgets SET tokens = least(tokens, 0),
                         at = greatest(at, clock_timestamp())
                     WHERE name = $1",
                    &[&bucket],
                )
                .await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn note_refusal(&self, kind: &str, code: &str) -> Result<()> {
        let result = async {
            let client = self.client().await?;
            client
                .run(
                    "INSERT INTO refusals (kind, code, at) VALUES ($1, $2, clock_timestamp())
                     ON CONFLICT (kind) DO UPDATE SET code = excluded.code, at = excluded.at",
                    &[&kind, &code],
                )
                .await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn refusal(&self, kinds: &[&str], within: Duration) -> Result<Option<String>> {
        let within = within.as_millis().min(i64::MAX as u128) as i64;
        let client = self.client().await?;
        Ok(client
            .maybe_row(
                "SELECT code FROM refusals
                 WHERE kind = ANY ($1)
                   AND at > clock_timestamp() - $2::bigint * interval '1 millisecond'
                 ORDER BY array_position($1, kind) LIMIT 1",
                &[&kinds, &within],
            )
            .await?
            .map(|r| r.get(0)))
    }
}
