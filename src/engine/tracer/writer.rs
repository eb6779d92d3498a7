//! The trace writer: a finished turn's trace is queued here and written by a task of its own,
//! in batches (one write transaction for a batch, `Traces::record_traces`), so keeping a trace
//! costs a turn a push onto a queue, never a write of its own.
//!
//! The queue is bounded (`QUEUE` traces): when it is full the trace is dropped and counted
//! (`TraceWriter::dropped`; the engine counts it into `anima_traces_dropped_total`), with a
//! warning at most once every `WARN_EVERY`. A turn never waits for it.
//!
//! Who writes: a runner (`TraceWriter::run`), which the daemon supervises among its tasks;
//! while none is on duty (`anima chat`, `anima inspect`, `anima dream`, an eval's run, the
//! tests), a push starts a drain task that writes what is queued and ends. The runner writes a
//! trace that comes after a quiet spell at once, and lets those that follow a write gather
//! for `GATHER` (or until a batch's worth is queued), so that under load traces share their
//! transactions instead of each taking one. `flush` writes
//! everything queued now before it returns; whatever ends (the daemon's stop, the commands)
//! flushes. A process killed outright loses at most what was queued.
//!
//! Owns the queue and when it is written, not what a trace holds (the tracer) nor how it is
//! kept (the store).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tracing::warn;

use crate::memory::{Store, TraceRow};

/// Traces the queue holds at most; one more is dropped.
pub const QUEUE: usize = 512;
/// Traces written in one transaction at most.
pub const BATCH: usize = 128;
/// The span after a write in which the runner lets traces gather before the next: a busy
/// daemon writes its traces at most this often, a quiet one each at once.
pub const GATHER: Duration = Duration::from_millis(50);
/// The least time between two warnings about dropped traces.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// What became of a trace handed to the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queued {
    Queued,
    /// The queue was full: the trace is gone (counted).
    Dropped,
}

pub struct TraceWriter {
    store: Arc<dyn Store>,
    queue: Mutex<VecDeque<TraceRow>>,
    capacity: usize,
    /// Told when a trace is queued (a permit waits when the runner is busy).
    queued: Notify,
    /// Told when a batch's worth is queued: the runner gathers no longer.
    filled: Notify,
    /// Held while a batch is taken and written: the runner, a drain and a flush write one
    /// at a time, so a flush that finds the queue empty knows every batch taken is written.
    writing: tokio::sync::Mutex<()>,
    /// Runners on duty (`run`); while none is, a push starts a drain.
    runners: AtomicUsize,
    /// Whether a drain task is running.
    draining: AtomicBool,
    dropped: AtomicU64,
    last_warned: Mutex<Option<Instant>>,
}

impl TraceWriter {
    /// Traces the queue holds at most (`QUEUE`).
    pub const QUEUE: usize = QUEUE;
    /// Traces written in one transaction at most (`BATCH`).
    pub const BATCH: usize = BATCH;

    pub fn new(store: Arc<dyn Store>) -> Arc<TraceWriter> {
        TraceWriter::with_capacity(store, QUEUE)
    }

    pub fn with_capacity(store: Arc<dyn Store>, capacity: usize) -> Arc<TraceWriter> {
        Arc::new(TraceWriter {
            store,
            queue: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            queued: Notify::new(),
            filled: Notify::new(),
            writing: tokio::sync::Mutex::new(()),
            runners: AtomicUsize::new(0),
            draining: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            last_warned: Mutex::new(None),
        })
    }

    /// Queues `row` to be written, or drops it when the queue is full. Never waits.
    pub fn push(self: &Arc<Self>, row: TraceRow) -> Queued {
        {
            let mut queue = lock(&self.queue);
            if queue.len() >= self.capacity {
                drop(queue);
                self.note_dropped(&row.trace);
                return Queued::Dropped;
            }
            queue.push_back(row);
            if queue.len() == BATCH {
                self.filled.notify_one();
            }
        }
        if self.runners.load(Ordering::SeqCst) > 0 {
            self.queued.notify_one();
        } else {
            self.start_drain();
        }
        Queued::Queued
    }

    /// Traces dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Traces queued and not yet taken to be written.
    pub fn queued(&self) -> usize {
        lock(&self.queue).len()
    }

    /// Writes every trace queued now (and waits for a batch being written) before it returns.
    pub async fn flush(&self) {
        while self.write_batch().await > 0 {}
    }

    /// The writer on duty until `stop` completes: writes what is queued as it comes, in
    /// batches; at `stop`, flushes and returns. Ends only then (a panic is the supervisor's).
    pub async fn run(self: Arc<Self>, stop: impl Future<Output = ()>) {
        let _on_duty = OnDuty::new(&self.runners);
        tokio::pin!(stop);
        let mut wrote: Option<Instant> = None;
        loop {
            while self.queued() == 0 {
                tokio::select! {
                    () = self.queued.notified() => {}
                    () = &mut stop => return self.flush().await,
                }
            }
            // Soon after a write, the traces that follow gather for the rest of the span
            // (or until a batch's worth is queued), to share one transaction.
            let gather = wrote
                .map(|w| w + GATHER)
                .filter(|&end| Instant::now() < end);
            if let Some(end) = gather.filter(|_| self.queued() < BATCH) {
                tokio::select! {
                    () = tokio::time::sleep_until(end.into()) => {}
                    () = self.filled.notified() => {}
                    () = &mut stop => return self.flush().await,
                }
            }
            self.write_batch().await;
            wrote = Some(Instant::now());
        }
    }

    /// Takes a batch off the queue and writes it: how many it took (0: the queue was empty).
    async fn write_batch(&self) -> usize {
        let _writing = self.writing.lock().await;
        let batch: Arc<[TraceRow]> = {
            let mut queue = lock(&self.queue);
            let n = queue.len().min(BATCH);
            queue.drain(..n).collect()
        };
        let n = batch.len();
        if n == 1 {
            if let Err(e) = self.store.record_traces(batch.clone()).await {
                warn!(error = %e, trace = %batch[0].trace, "a turn's trace was not kept");
            }
        } else if n > 1 {
            if let Err(e) = self.store.record_traces(batch.clone()).await {
                self.one_by_one(&batch, &e).await;
            }
        }
        n
    }

    /// A batch the store refused, tried again a trace at a time, so that one trace the store
    /// cannot keep (a value its index cannot hold) costs only itself; what still fails is
    /// warned about once, with the first trace's id.
    async fn one_by_one(&self, batch: &[TraceRow], first: &crate::memory::StoreError) {
        let mut lost = Vec::new();
        let mut last = None;
        for row in batch {
            if let Err(e) = self.store.record_traces(Arc::from([row.clone()])).await {
                lost.push(row.trace.as_str());
                last = Some(e);
            }
        }
        if let Some(e) = last {
            warn!(
                error = %e, batch_error = %first, traces = lost.len(), of = batch.len(),
                first = %lost[0], "turns' traces were not kept"
            );
        }
    }

    /// With no runner on duty: a task that writes what is queued, unless one already does.
    fn start_drain(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // No runtime to write on: the next flush writes it.
        };
        if self.draining.swap(true, Ordering::SeqCst) {
            return;
        }
        let writer = self.clone();
        runtime.spawn(async move {
            loop {
                {
                    let _draining = Draining(&writer.draining);
                    while writer.write_batch().await > 0 {}
                }
                // A trace pushed between the last batch and the flag's reset found a drain
                // still running and started none: look again.
                if writer.queued() == 0 || writer.draining.swap(true, Ordering::SeqCst) {
                    return;
                }
            }
        });
    }

    fn note_dropped(&self, trace: &str) {
        let total = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = lock(&self.last_warned);
        if last.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            warn!(
                trace = %trace,
                dropped = total,
                queue = self.capacity,
                "the trace writer's queue is full: a turn's trace was dropped (and any more for a minute without this warning)"
            );
        }
    }
}

/// A runner counted on duty while it lives (a panic included).
struct OnDuty<'a>(&'a AtomicUsize);

impl<'a> OnDuty<'a> {
    fn new(runners: &'a AtomicUsize) -> OnDuty<'a> {
        runners.fetch_add(1, Ordering::SeqCst);
        OnDuty(runners)
    }
}

impl Drop for OnDuty<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The drain's flag, put down when the drain ends (a panic included).
struct Draining<'a>(&'a AtomicBool);

impl Drop for Draining<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::sqlite::Sqlite;

    fn row(n: usize) -> TraceRow {
        TraceRow {
            trace: format!("{n:032x}"),
            kind: "message".into(),
            thread: "C1:1.0".into(),
            person: Some("U1".into()),
            inbox: None,
            process: "main".into(),
            at: n as i64,
            reply: Some(format!("reply {n}")),
            body: "{}".into(),
            pieces: Vec::new(),
        }
    }

    fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Sqlite::open(&dir.path().join("anima.db")).unwrap().shared();
        (dir, store)
    }

    async fn kept(store: &Arc<dyn Store>) -> usize {
        store.traces(None, None, 10_000).await.unwrap().len()
    }

    #[tokio::test]
    async fn with_no_runner_a_push_starts_a_drain_and_a_flush_waits_for_it() {
        let (_dir, store) = store();
        let writer = TraceWriter::new(store.clone());
        for n in 0..300 {
            assert_eq!(writer.push(row(n)), Queued::Queued);
        }
        writer.flush().await;
        assert_eq!(kept(&store).await, 300);
        assert_eq!(writer.queued(), 0);
        assert_eq!(writer.dropped(), 0);
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_waiting_then_a_flush_writes_the_rest() {
        let (_dir, store) = store();
        // No runtime here: nothing drains, so the queue fills.
        let writer = TraceWriter::with_capacity(store.clone(), 3);
        let pushed: Vec<Queued> = (0..5).map(|n| writer.push(row(n))).collect();
        assert_eq!(
            pushed,
            [
                Queued::Queued,
                Queued::Queued,
                Queued::Queued,
                Queued::Dropped,
                Queued::Dropped
            ]
        );
        assert_eq!(writer.dropped(), 2);
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            writer.flush().await;
            let ids: Vec<String> = store
                .traces(None, None, 10)
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.trace)
                .collect();
            assert_eq!(ids, [row(2).trace, row(1).trace, row(0).trace]);
        });
    }

    #[test]
    fn a_batch_is_one_write_transaction() {
        let (_dir, store) = store();
        let writer = TraceWriter::new(store.clone());
        for n in 0..BATCH + 1 {
            writer.push(row(n));
        }
        let rt = tokio::runtime::Runtime::new().unwrap();
        let before = store.write_transactions();
        rt.block_on(writer.flush());
        assert_eq!(
            store.write_transactions() - before,
            2,
            "a full batch, then one"
        );
        assert_eq!(rt.block_on(kept(&store)), BATCH + 1);
    }

    #[tokio::test]
    async fn a_trace_the_store_refuses_costs_only_itself_not_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = Sqlite::open(&dir.path().join("anima.db")).unwrap();
        // As PostgreSQL refuses a value too long for its index: this one person's trace.
        sqlite
            .blocking()
            .write_traces(|c| {
                c.execute_batch(
                    "CREATE TRIGGER refuse BEFORE INSERT ON traces WHEN NEW.person = 'bad'
                     BEGIN SELECT RAISE(ABORT, 'too long for the index'); END;",
                )?;
                Ok(())
            })
            .unwrap();
        let store = sqlite.shared();
        let writer = TraceWriter::new(store.clone());
        for n in 0..10 {
            let mut r = row(n);
            if n == 4 {
                r.person = Some("bad".into());
            }
            writer.push(r);
        }
        writer.flush().await;
        let ids: Vec<String> = store
            .traces(None, None, 100)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.trace)
            .collect();
        assert_eq!(ids.len(), 9, "every trace but the refused one: {ids:?}");
        assert!(!ids.contains(&row(4).trace));
    }

    #[tokio::test]
    async fn a_runner_writes_as_traces_come_and_flushes_when_stopped() {
        let (_dir, store) = store();
        let writer = TraceWriter::new(store.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runner = tokio::spawn(writer.clone().run(async {
            let _ = stopped.await;
        }));
        // On duty: a push only wakes it (no drain of its own).
        while writer.runners.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        writer.push(row(1));
        assert!(!writer.draining.load(Ordering::SeqCst));
        let deadline = Instant::now() + Duration::from_secs(10);
        while kept(&store).await < 1 {
            assert!(
                Instant::now() < deadline,
                "the runner never wrote the trace"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for n in 2..50 {
            writer.push(row(n));
        }
        stop.send(()).unwrap();
        runner.await.unwrap();
        assert_eq!(kept(&store).await, 49);
        assert_eq!(writer.runners.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn traces_that_follow_a_write_gather_to_share_a_transaction() {
        let (_dir, store) = store();
        let writer = TraceWriter::new(store.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runner = tokio::spawn(writer.clone().run(async {
            let _ = stopped.await;
        }));
        while writer.runners.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        writer.push(row(0));
        while kept(&store).await < 1 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Twenty more, one every 2 ms, as a busy daemon's turns end: written each alone,
        // they would take twenty transactions.
        let before = store.write_transactions();
        for n in 1..=20 {
            writer.push(row(n));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        stop.send(()).unwrap();
        runner.await.unwrap();
        assert_eq!(kept(&store).await, 21);
        let took = store.write_transactions() - before;
        // One at once, the rest in a transaction every 50 ms: a few, even on a slow machine.
        assert!(took <= 10, "twenty traces took {took} transactions");
    }
}
