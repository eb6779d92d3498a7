//! Claims on conversations and the daemons that hold them, on PostgreSQL (see
//! `faces::Claims` for what each promises; the table and functions are
//! migrations/postgres/0004's).
//!
//! A daemon is this store's instance (one per process). Leases are on the server's clock, never
//! a daemon's: a daemon whose clock is off claims, renews and lapses like any other. Joining and
//! leaving take one advisory lock, so two daemons starting (or stopping) together see each
//! other: exactly one of them is the first (or the last).

use std::time::Duration;

use async_trait::async_trait;

use super::{Postgres, Prepared};
use crate::memory::faces::Claims;
use crate::memory::{DaemonRow, StoreError};

type Result<T> = std::result::Result<T, StoreError>;

/// The claim that is the lead of the soul's scheduled work: a key no conversation has.
const LEAD: &str = "";
/// The claim the first daemon holds while it wakes the soul: a key no conversation has.
const WAKING: &str = "\u{1}waking";

/// The advisory lock joining and leaving take ("daem" in ASCII).
const DAEMONS_LOCK: i64 = 0x6461_656d;

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

#[async_trait]
impl Claims for Postgres {
    async fn claim(&self, conversation: &str, lease: Duration) -> Result<Option<i64>> {
        let result = async {
            let client = self.client().await?;
            Ok(client
                .row(
                    "SELECT anima_claim($1, $2, $3)",
                    &[&conversation, &self.instance(), &ms(lease)],
                )
                .await?
                .get(0))
        }
        .await;
        self.noted(result)
    }

    async fn holds(&self, conversation: &str, epoch: i64, margin: Duration) -> Result<bool> {
        let client = self.client().await?;
        Ok(client
            .maybe_row(
                "SELECT 1 FROM conversation_claims
                 WHERE conversation = $1 AND daemon = $2 AND epoch = $3
                   AND lease_until > clock_timestamp() + $4::bigint * interval '1 millisecond'",
                &[&conversation, &self.instance(), &epoch, &ms(margin)],
            )
            .await?
            .is_some())
    }

    async fn release(&self, conversation: &str, epoch: i64) -> Result<bool> {
        let result = async {
            let client = self.client().await?;
            // Let go first, then look: a row accepted after the look finds the claim free,
            // and the daemon that accepted it takes it.
            client
                .run(
                    "UPDATE conversation_claims SET lease_until = clock_timestamp()
                     WHERE conversation = $1 AND daemon = $2 AND epoch = $3",
                    &[&conversation, &self.instance(), &epoch],
                )
                .await?;
            Ok(client
                .row(
                    "SELECT EXISTS (SELECT 1 FROM inbox WHERE conversation = $1
                                       AND status IN ('pending', 'replying'))",
                    &[&conversation],
                )
                .await?
                .get(0))
        }
        .await;
        self.noted(result)
    }

    async fn heartbeat(&self, conversations: &[String], lease: Duration) -> Result<()> {
        let result = async {
            let mut client = self.client().await?;
            super::keep_servers_time(&client).await?;
            let tx = client.transaction().await?;
            tx.run(
                "UPDATE daemons SET heartbeat_at = clock_timestamp(),
                                    lease_until = clock_timestamp() + $2::bigint * interval '1 millisecond'
                 WHERE daemon = $1",
                &[&self.instance(), &ms(lease)],
            )
            .await?;
            // Only claims still running: one let go (or lapsed) since the list was read is not
            // taken back behind its worker's back.
            tx.run(
                "UPDATE conversation_claims
                    SET lease_until = clock_timestamp() + $3::bigint * interval '1 millisecond'
                  WHERE daemon = $1 AND (conversation = ANY($2) OR conversation = $4)
                    AND lease_until > clock_timestamp()",
                &[&self.instance(), &conversations, &ms(lease), &WAKING],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn lead(&self, lease: Duration) -> Result<bool> {
        let result = async {
            let client = self.client().await?;
            let epoch: Option<i64> = client
                .row(
                    "SELECT anima_claim($1, $2, $3)",
                    &[&LEAD, &self.instance(), &ms(lease)],
                )
                .await?
                .get(0);
            Ok(epoch.is_some())
        }
        .await;
        self.noted(result)
    }

    async fn unheld_conversations(&self) -> Result<Vec<String>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "SELECT DISTINCT i.conversation FROM inbox i
                   LEFT JOIN conversation_claims c ON c.conversation = i.conversation
                  WHERE i.status IN ('pending', 'replying')
                    AND (c.conversation IS NULL OR c.lease_until <= clock_timestamp())",
                &[],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    async fn bury(&self, daemon: &str) -> Result<()> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            tx.run("DELETE FROM daemons WHERE daemon = $1", &[&daemon])
                .await?;
            tx.run(
                "UPDATE conversation_claims SET lease_until = clock_timestamp()
                 WHERE daemon = $1 AND lease_until > clock_timestamp()",
                &[&daemon],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn join(&self, host: &str, pid: u32, listen: &str, lease: Duration) -> Result<u64> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            tx.run("SELECT pg_advisory_xact_lock($1)", &[&DAEMONS_LOCK])
                .await?;
            tx.run(
                "INSERT INTO daemons (daemon, host, pid, started_at, heartbeat_at, lease_until, listen)
                 VALUES ($1, $2, $3, clock_timestamp(), clock_timestamp(),
                         clock_timestamp() + $4::bigint * interval '1 millisecond', $5)
                 ON CONFLICT (daemon) DO UPDATE SET heartbeat_at = excluded.heartbeat_at,
                     lease_until = excluded.lease_until, listen = excluded.listen",
                &[&self.instance(), &host, &i64::from(pid), &ms(lease), &listen],
            )
            .await?;
            let others: i64 = tx
                .row(
                    "SELECT count(*) FROM daemons
                     WHERE daemon <> $1 AND lease_until > clock_timestamp()",
                    &[&self.instance()],
                )
                .await?
                .get(0);
            // The first is the soul's waker (in the join's transaction: a daemon joining next
            // sees it waking).
            if others == 0 {
                tx.row(
                    "SELECT anima_claim($1, $2, $3)",
                    &[&WAKING, &self.instance(), &ms(lease)],
                )
                .await?;
            }
            // Daemons that died long ago are history, not company.
            tx.run(
                "DELETE FROM daemons WHERE lease_until < clock_timestamp() - interval '1 day'",
                &[],
            )
            .await?;
            tx.commit().await?;
            Ok(others.max(0) as u64)
        }
        .await;
        self.noted(result)
    }

    async fn woke(&self) -> Result<()> {
        let result = async {
            let client = self.client().await?;
            client
                .run(
                    "UPDATE conversation_claims SET lease_until = clock_timestamp()
                     WHERE conversation = $1 AND daemon = $2",
                    &[&WAKING, &self.instance()],
                )
                .await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn waking(&self) -> Result<bool> {
        let client = self.client().await?;
        Ok(client
            .maybe_row(
                "SELECT 1 FROM conversation_claims
                 WHERE conversation = $1 AND daemon <> $2 AND lease_until > clock_timestamp()",
                &[&WAKING, &self.instance()],
            )
            .await?
            .is_some())
    }

    async fn leave(&self) -> Result<u64> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            tx.run("SELECT pg_advisory_xact_lock($1)", &[&DAEMONS_LOCK])
                .await?;
            tx.run("DELETE FROM daemons WHERE daemon = $1", &[&self.instance()])
                .await?;
            // The lead goes at once to a daemon that stays (its scheduled work stops now).
            tx.run(
                "UPDATE conversation_claims SET lease_until = clock_timestamp()
                 WHERE conversation = $1 AND daemon = $2",
                &[&LEAD, &self.instance()],
            )
            .await?;
            let others: i64 = tx
                .row(
                    "SELECT count(*) FROM daemons WHERE lease_until > clock_timestamp()",
                    &[],
                )
                .await?
                .get(0);
            tx.commit().await?;
            Ok(others.max(0) as u64)
        }
        .await;
        self.noted(result)
    }

    async fn daemons(&self) -> Result<Vec<DaemonRow>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "SELECT d.daemon, d.host, d.pid, anima_ms(d.started_at), anima_ms(d.heartbeat_at),
                        (SELECT count(*) FROM conversation_claims c
                          WHERE c.daemon = d.daemon AND c.conversation NOT IN ($1, $2)
                            AND c.lease_until > clock_timestamp()),
                        EXISTS (SELECT 1 FROM conversation_claims c
                                 WHERE c.daemon = d.daemon AND c.conversation = $1
                                   AND c.lease_until > clock_timestamp()),
                        d.listen
                   FROM daemons d WHERE d.lease_until > clock_timestamp()
                  ORDER BY d.started_at, d.daemon",
                &[&LEAD, &WAKING],
            )
            .await?
            .iter()
            .map(|r| DaemonRow {
                daemon: r.get(0),
                host: r.get(1),
                pid: r.get(2),
                started_ms: r.get(3),
                heartbeat_ms: r.get(4),
                conversations: r.get::<_, i64>(5).max(0) as u64,
                leads: r.get(6),
                listen: r.get(7),
            })
            .collect())
    }
}
