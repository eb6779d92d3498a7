//! The daemon's background tasks, supervised: each is started by name in a `Stage`, with a
//! `Policy` for when it fails. A task fails when it panics, or when it ends before its stage
//! is cancelled (every task here runs until the daemon stops, or, for `spawn_once`, until it
//! has done its one job). A failure is an ERROR line naming the task; then, by the task's
//! policy, the task starts again after a back-off (doubling from `Backoff::first` up to
//! `Backoff::max`, so a task that fails at once does not spin), or the daemon stops as on
//! SIGTERM and `anima run` exits non-zero naming the task (`Tasks::failed`).
//!
//! Stopping: a stage's token is cancelled, the tasks in it end on their own (each watches its
//! token) and `Tasks::finish` waits for them, within a bound that is logged when it runs out.
//! `Stage::AtStop` is cancelled the moment the daemon stops (a signal or a failed task);
//! `Stage::AfterTurns` when the shutdown says so (after the turns in flight are let go).
//!
//! In debug builds, `ANIMA_FAILPOINTS=task:<name>` makes the task of that name panic each time
//! it starts (`crate::failpoint`), to prove the supervision from outside.
//!
//! Owns no task's work: only starting, watching and stopping them.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};

/// When a task is told to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// As soon as the daemon stops: the scans, the heartbeat, the door's watch, the servers.
    AtStop,
    /// Once the turns in flight are over and let go: what they still need (their claims).
    AfterTurns,
}

/// What a task's failure does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Logged, and the task starts again after a back-off.
    Restart,
    /// Logged, and the daemon stops (exit non-zero): one it cannot run without. A task of
    /// this kind is started once.
    StopDaemon,
}

/// The wait before a failed task starts again: `first`, doubled at each failure up to `max`,
/// back to `first` once the task ran `max` before failing.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Backoff {
    /// The daemon's: a second, up to a minute.
    pub const DAEMON: Backoff = Backoff {
        first: Duration::from_secs(1),
        max: Duration::from_secs(60),
    };
}

/// The supervisor; clones share it.
#[derive(Clone)]
pub struct Tasks {
    inner: Arc<Inner>,
}

struct Inner {
    /// Cancelled when the daemon stops; `Stage::AtStop`'s token is its child.
    stop: CancellationToken,
    at_stop: (CancellationToken, TaskTracker),
    after_turns: (CancellationToken, TaskTracker),
    /// The task whose failure stopped the daemon (the first, if several).
    failed: Mutex<Option<&'static str>>,
    /// The tasks running now, by stage (a name once per running copy).
    running: Mutex<Vec<(Stage, &'static str)>>,
    backoff: Backoff,
}

impl Tasks {
    pub fn new(backoff: Backoff) -> Tasks {
        let stop = CancellationToken::new();
        Tasks {
            inner: Arc::new(Inner {
                at_stop: (stop.child_token(), TaskTracker::new()),
                after_turns: (CancellationToken::new(), TaskTracker::new()),
                stop,
                failed: Mutex::new(None),
                running: Mutex::new(Vec::new()),
                backoff,
            }),
        }
    }

    /// Cancelled when the daemon stops: a signal, or a task of `Policy::StopDaemon` failed.
    pub fn stopping(&self) -> CancellationToken {
        self.inner.stop.clone()
    }

    /// The task whose failure stopped the daemon, if one did.
    pub fn failed(&self) -> Option<&'static str> {
        *lock(&self.inner.failed)
    }

    /// Starts `task` (given its stage's token, which it must watch) under `name`; started
    /// again from `task` after a back-off when it fails, or stopping the daemon, by `policy`.
    pub fn spawn<F, Fut>(&self, name: &'static str, stage: Stage, policy: Policy, task: F)
    where
        F: FnMut(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let inner = self.inner.clone();
        self.inner
            .stage(stage)
            .1
            .spawn(supervise(inner, name, stage, policy, task));
    }

    /// Starts `task`, whose end is its job done: only a panic is a failure, and it stops the
    /// daemon.
    pub fn spawn_once<F, Fut>(&self, name: &'static str, stage: Stage, task: F)
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (token, tracker) = self.inner.stage(stage);
        let token = token.clone();
        let inner = self.inner.clone();
        tracker.spawn(async move {
            let _running = Running::new(&inner, stage, name);
            if let Err(panic) = start(name, task(token)).await {
                error!(task = name, panic = %panic, "task {name} panicked");
                inner.fail(name);
            }
        });
    }

    /// Cancels `stage` and waits for its tasks, at most `within`: true if they all ended;
    /// otherwise those still running are named in a warning.
    pub async fn finish(&self, stage: Stage, within: Duration) -> bool {
        let (token, tracker) = self.inner.stage(stage);
        token.cancel();
        tracker.close();
        if tokio::time::timeout(within, tracker.wait()).await.is_ok() {
            return true;
        }
        let left: Vec<&str> = lock(&self.inner.running)
            .iter()
            .filter(|(s, _)| *s == stage)
            .map(|(_, n)| *n)
            .collect();
        warn!(tasks = %left.join(","), "tasks still running after the wait; leaving them");
        false
    }
}

impl Inner {
    fn stage(&self, stage: Stage) -> &(CancellationToken, TaskTracker) {
        match stage {
            Stage::AtStop => &self.at_stop,
            Stage::AfterTurns => &self.after_turns,
        }
    }

    /// `name` failed and the daemon cannot run without it: it stops.
    fn fail(&self, name: &'static str) {
        lock(&self.failed).get_or_insert(name);
        error!(task = name, "stopping the daemon: its task {name} failed");
        self.stop.cancel();
    }
}

/// Runs `task`, which stops when a channel of its own says so, until it ends or `stop` is
/// cancelled: then the channel says stop and `task` ends its own way.
pub async fn watching<F, Fut>(stop: CancellationToken, task: F)
where
    F: FnOnce(watch::Receiver<bool>) -> Fut,
    Fut: Future<Output = ()>,
{
    let (tell, told) = watch::channel(false);
    let task = task(told);
    tokio::pin!(task);
    tokio::select! {
        () = &mut task => return,
        _ = stop.cancelled() => {}
    }
    let _ = tell.send(true);
    task.await
}

/// Runs `task` under `policy` until its stage is cancelled.
async fn supervise<F, Fut>(
    inner: Arc<Inner>,
    name: &'static str,
    stage: Stage,
    policy: Policy,
    mut task: F,
) where
    F: FnMut(CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let token = inner.stage(stage).0.clone();
    let backoff = inner.backoff;
    let mut wait = backoff.first;
    loop {
        let began = Instant::now();
        let ended = {
            let _running = Running::new(&inner, stage, name);
            start(name, task(token.clone())).await
        };
        match ended {
            Ok(()) if token.is_cancelled() => return,
            Ok(()) => error!(task = name, "task {name} ended before the daemon stopped"),
            Err(panic) => error!(task = name, panic = %panic, "task {name} panicked"),
        }
        if token.is_cancelled() {
            return;
        }
        if policy == Policy::StopDaemon {
            inner.fail(name);
            return;
        }
        if began.elapsed() >= backoff.max {
            wait = backoff.first;
        }
        info!(
            task = name,
            in_ms = wait.as_millis() as u64,
            "restarting task {name}"
        );
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = token.cancelled() => return,
        }
        wait = (wait * 2).min(backoff.max);
    }
}

/// Runs `task` on its own (a panic stays in it): `Err` with the panic's message if it
/// panicked.
async fn start<Fut>(name: &'static str, task: Fut) -> Result<(), String>
where
    Fut: Future<Output = ()> + Send + 'static,
{
    let run = tokio::spawn(async move {
        crate::failpoint::panic_if(&format!("task:{name}"), true);
        task.await
    });
    match run.await {
        Ok(()) => Ok(()),
        Err(e) if e.is_panic() => {
            let panic = e.into_panic();
            Err(panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_string()))
        }
        // Cancelled from outside (the runtime is going away): as if it had ended.
        Err(_) => Ok(()),
    }
}

/// A task's place in `Inner::running` while it runs.
struct Running<'a> {
    inner: &'a Inner,
    entry: (Stage, &'static str),
}

impl<'a> Running<'a> {
    fn new(inner: &'a Inner, stage: Stage, name: &'static str) -> Running<'a> {
        lock(&inner.running).push((stage, name));
        Running {
            inner,
            entry: (stage, name),
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut running = lock(&self.inner.running);
        if let Some(i) = running.iter().position(|e| *e == self.entry) {
            running.swap_remove(i);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// The log lines written while the test runs (a current-thread runtime: every task logs
    /// on the test's thread).
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Log {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Log {
        fn capture() -> (Log, tracing::subscriber::DefaultGuard) {
            let log = Log::default();
            let writer = log.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish();
            (log, tracing::subscriber::set_default(subscriber))
        }

        fn text(&self) -> String {
            String::from_utf8_lossy(&lock(&self.0)).into_owned()
        }
    }

    const QUICK: Backoff = Backoff {
        first: Duration::from_millis(10),
        max: Duration::from_millis(100),
    };

    /// A task that counts its starts and then does `then` with its start's number.
    fn counted<Fut>(
        starts: &Arc<AtomicUsize>,
        then: impl Fn(usize, CancellationToken) -> Fut + Send + 'static,
    ) -> impl FnMut(CancellationToken) -> Fut + Send + 'static {
        let starts = starts.clone();
        move |token| then(starts.fetch_add(1, Ordering::SeqCst) + 1, token)
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_panics_is_logged_by_name_and_started_again() {
        let (log, _guard) = Log::capture();
        let tasks = Tasks::new(QUICK);
        let starts = Arc::new(AtomicUsize::new(0));
        tasks.spawn(
            "flaky",
            Stage::AtStop,
            Policy::Restart,
            counted(&starts, |n, token| async move {
                assert!(n > 1, "boom on the first start");
                token.cancelled().await;
            }),
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 2);
        let text = log.text();
        assert!(text.contains("ERROR"), "{text}");
        assert!(text.contains("task flaky panicked"), "{text}");
        assert!(text.contains("boom on the first start"), "{text}");
        assert!(text.contains("restarting task flaky"), "{text}");
        assert_eq!(tasks.failed(), None);
        assert!(!tasks.stopping().is_cancelled());
        assert!(tasks.finish(Stage::AtStop, Duration::from_secs(1)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_the_daemon_needs_stops_it_when_it_ends_and_is_named() {
        let (log, _guard) = Log::capture();
        let tasks = Tasks::new(QUICK);
        let starts = Arc::new(AtomicUsize::new(0));
        let others = Arc::new(AtomicUsize::new(0));
        tasks.spawn(
            "door",
            Stage::AtStop,
            Policy::StopDaemon,
            counted(&starts, |_, _| async {}),
        );
        tasks.spawn(
            "scan",
            Stage::AtStop,
            Policy::Restart,
            counted(&others, |_, token| async move { token.cancelled().await }),
        );
        let stopped =
            tokio::time::timeout(Duration::from_secs(5), tasks.stopping().cancelled_owned());
        assert!(stopped.await.is_ok(), "the daemon did not stop");
        assert_eq!(tasks.failed(), Some("door"));
        // The others of `AtStop` are told to stop with the daemon, and end.
        assert!(tasks.finish(Stage::AtStop, Duration::from_secs(1)).await);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 1, "not started again");
        assert_eq!(others.load(Ordering::SeqCst), 1);
        let text = log.text();
        assert!(
            text.contains("task door ended before the daemon stopped"),
            "{text}"
        );
        assert!(
            text.contains("stopping the daemon: its task door failed"),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_one_job_task_that_panics_stops_the_daemon_but_its_end_does_not() {
        let (_log, _guard) = Log::capture();
        let tasks = Tasks::new(QUICK);
        tasks.spawn_once("note", Stage::AtStop, |_| async {});
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!tasks.stopping().is_cancelled());
        tasks.spawn_once("wakeup", Stage::AtStop, |_| async { panic!("no soul") });
        let stopped =
            tokio::time::timeout(Duration::from_secs(5), tasks.stopping().cancelled_owned());
        assert!(stopped.await.is_ok(), "the daemon did not stop");
        assert_eq!(tasks.failed(), Some("wakeup"));
    }

    #[tokio::test(start_paused = true)]
    async fn finishing_a_stage_stops_its_tasks_and_waits_for_them_only() {
        let (log, _guard) = Log::capture();
        let tasks = Tasks::new(QUICK);
        let done = Arc::new(AtomicUsize::new(0));
        for name in ["a", "b"] {
            let done = done.clone();
            tasks.spawn(name, Stage::AtStop, Policy::Restart, move |token| {
                let done = done.clone();
                async move {
                    token.cancelled().await;
                    // Some last work after being told: `finish` waits for it.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    done.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        let later = Arc::new(AtomicUsize::new(0));
        let l = later.clone();
        tasks.spawn("claims", Stage::AfterTurns, Policy::Restart, move |token| {
            let l = l.clone();
            async move {
                token.cancelled().await;
                l.fetch_add(1, Ordering::SeqCst);
            }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(tasks.finish(Stage::AtStop, Duration::from_secs(1)).await);
        assert_eq!(done.load(Ordering::SeqCst), 2);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(later.load(Ordering::SeqCst), 0, "another stage goes on");
        assert!(
            tasks
                .finish(Stage::AfterTurns, Duration::from_secs(1))
                .await
        );
        assert_eq!(later.load(Ordering::SeqCst), 1);
        // Nothing of this was a failure.
        assert!(!log.text().contains("ERROR"), "{}", log.text());
        assert_eq!(tasks.failed(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_for_a_task_that_does_not_stop_is_bounded_and_names_it() {
        let (log, _guard) = Log::capture();
        let tasks = Tasks::new(QUICK);
        tasks.spawn("deaf", Stage::AtStop, Policy::Restart, |_| {
            std::future::pending::<()>()
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!tasks.finish(Stage::AtStop, Duration::from_secs(2)).await);
        let text = log.text();
        assert!(
            text.contains("tasks still running") && text.contains("deaf"),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_watches_a_channel_is_told_through_it_and_ends_its_own_way() {
        let stop = CancellationToken::new();
        let ended = Arc::new(AtomicUsize::new(0));
        let e = ended.clone();
        let task = tokio::spawn(watching(stop.clone(), move |mut told| async move {
            let _ = told.wait_for(|s| *s).await;
            e.fetch_add(1, Ordering::SeqCst);
        }));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!task.is_finished());
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("ended")
            .expect("no panic");
        assert_eq!(ended.load(Ordering::SeqCst), 1, "its own way: not dropped");
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_fails_at_once_is_started_again_ever_later() {
        let (_log, _guard) = Log::capture();
        let tasks = Tasks::new(Backoff {
            first: Duration::from_secs(1),
            max: Duration::from_secs(60),
        });
        let starts = Arc::new(AtomicUsize::new(0));
        tasks.spawn(
            "spinner",
            Stage::AtStop,
            Policy::Restart,
            counted(&starts, |_, _| async {}),
        );
        // Starts at 0 s, then after 1, 2 and 4 s of waiting: 0, 1, 3, 7; the next at 15.
        tokio::time::sleep(Duration::from_millis(7_500)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 4);
        tokio::time::sleep(Duration::from_secs(7)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 4);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 5);
        // Cancelled while it waits to start again: it ends at once.
        assert!(tasks.finish(Stage::AtStop, Duration::from_millis(1)).await);
    }
}
