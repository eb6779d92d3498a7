//! Says when this process waits on a lock another session holds: a statement of a daemon or
//! of `anima store copy` queued behind a transaction that does not end (a copy whose machine
//! was lost, a session an operator left open) would otherwise wait in silence.
//!
//! Each opening of the store names its connections (`application_name`, "anima " and its
//! instance) and keeps a watch: every few seconds, while some of its connections are in use and
//! one is free to ask with, it looks in `pg_stat_activity` for its own sessions waiting on a
//! lock and logs, once per holder, who holds it. Owns nothing else; never waits for a
//! connection itself and never touches the locks.

use std::collections::HashSet;
use std::time::Duration;

use deadpool_postgres::{Pool, Timeouts};

/// How often the watch looks (the first time this long after the store opens).
const EVERY: Duration = Duration::from_secs(3);

/// The `application_name` of a store opening's connections.
pub(super) fn name(instance: &str) -> String {
    format!("anima {instance}")
}

/// Starts the watch over `pool`'s connections, named `name`; it ends with the pool.
pub(super) fn watch(pool: &Pool, name: String, place: String) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let pool = pool.weak();
    runtime.spawn(async move {
        let mut said = HashSet::new();
        loop {
            tokio::time::sleep(EVERY).await;
            let Some(pool) = pool.upgrade() else { return };
            let status = pool.status();
            if status.available == status.size && status.waiting == 0 {
                said.clear();
                continue;
            }
            // Never waits for a connection: with none free, it looks next time.
            let asked = Timeouts {
                wait: Some(Duration::ZERO),
                create: Some(EVERY),
                recycle: Some(EVERY),
            };
            let Ok(client) = pool.timeout_get(&asked).await else {
                continue;
            };
            drop(pool);
            let Ok(rows) = client.query(WAITING, &[&name]).await else {
                continue;
            };
            let now: HashSet<(i32, i32)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            for row in &rows {
                let pair: (i32, i32) = (row.get(0), row.get(1));
                if said.contains(&pair) {
                    continue;
                }
                let holder: String = row.get(2);
                let state: String = row.get(4);
                let for_secs: i64 = row.get(5);
                tracing::warn!(
                    db = %place,
                    waiting_pid = pair.0,
                    holder_pid = pair.1,
                    holder = %holder,
                    from = %row.get::<_, String>(3),
                    holder_state = %state,
                    holder_query = %row.get::<_, String>(6),
                    "waiting for a lock held by pid {} ({holder}, {state} for {for_secs} s): the \
                     server ends a lost anima's transaction within seconds, another session's \
                     lock lasts until it ends (or SELECT pg_terminate_backend({}))",
                    pair.1,
                    pair.1
                );
            }
            said = now;
        }
    });
}

/// This opening's sessions waiting on a lock in a statement begun seconds ago (a row another
/// daemon holds for a moment is not worth a word), and each session holding one they wait for:
/// (waiting pid, holding pid, holder's name, its client address, its state, seconds in its
/// transaction, its statement). Another role's sessions show as much as the role may see.
const WAITING: &str = "
    SELECT w.pid, h.pid,
           coalesce(nullif(h.application_name, ''), h.usename::text, '?'),
           coalesce(host(h.client_addr), 'a local socket'),
           coalesce(h.state, '?'),
           coalesce(extract(epoch FROM now() - coalesce(h.xact_start, h.backend_start)), 0)::bigint,
           coalesce(left(h.query, 120), '?')
    FROM pg_stat_activity w
    CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS b(pid)
    JOIN pg_stat_activity h ON h.pid = b.pid
    WHERE w.application_name = $1 AND w.wait_event_type = 'Lock'
      AND w.query_start < now() - interval '2 seconds'";
