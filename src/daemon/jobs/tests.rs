//! The daemon's scheduling rules against a stand-in runner: queueing, `busy`, duplicates,
//! `ttl`, cancel and shutdown, with a real journal in a temporary folder. No root, no
//! kernel feature, no process.

use super::*;
use crate::daemon::admit::tests::{body, body_with};
use crate::job::{Status, ARTIFACT};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Semaphore;

/// Runs a job by waiting for a go (one permit of `go` per job) or for its cancel.
struct Stand {
    bounds: Bounds,
    runs: AtomicUsize,
    go: Semaphore,
    /// The cause each cancelled run saw.
    causes: Mutex<Vec<Cause>>,
    /// When set, a job that ran leaves a removal that ends with one permit of it (as a
    /// warm sandbox is removed after its job's answer).
    removals: Option<Arc<Semaphore>>,
}

impl Stand {
    fn new() -> Arc<Stand> {
        Arc::new(Stand {
            bounds: Bounds::default(),
            runs: AtomicUsize::new(0),
            go: Semaphore::new(0),
            causes: Mutex::new(Vec::new()),
            removals: None,
        })
    }

    /// A stand-in whose jobs each leave a removal that ends only with a permit of
    /// `removals`.
    fn removing() -> Arc<Stand> {
        Arc::new(Stand {
            removals: Some(Arc::new(Semaphore::new(0))),
            ..Arc::into_inner(Stand::new()).expect("a new stand-in has one owner")
        })
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

impl JobRunner for Stand {
    fn node(&self) -> &str {
        "v-stand"
    }

    fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    fn jobs_dir(&self) -> Option<&std::path::Path> {
        None
    }

    fn cache_stats(&self) -> Option<crate::inputs::CacheStats> {
        None
    }

    fn run(self: Arc<Self>, job: ValidJob, cancel: Cancel) -> super::super::runner::Run {
        Box::pin(async move {
            self.runs.fetch_add(1, Ordering::SeqCst);
            tokio::select! {
                cause = cancel.cancelled() => {
                    self.causes.lock().unwrap_or_else(|p| p.into_inner()).push(cause);
                    let mut r = JobResult::not_run(&job.job_id, cause.reason(), cause.message(true), job.net, Some("v-stand"));
                    r.wall_ms = 3;
                    (r, Removal::none())
                }
                p = self.go.acquire() => {
                    if let Ok(p) = p {
                        p.forget();
                    }
                    let mut r = JobResult::not_run(&job.job_id, Reason::Exit, "", job.net, Some("v-stand"));
                    (r.status, r.reason, r.message, r.wall_ms) = (Status::Ok, None, None, 2);
                    let removal = match &self.removals {
                        Some(removals) => {
                            let removals = removals.clone();
                            Removal::of(tokio::spawn(async move {
                                if let Ok(p) = removals.acquire().await {
                                    p.forget();
                                }
                            }))
                        }
                        None => Removal::none(),
                    };
                    (r, removal)
                }
            }
        })
    }
}

pub(crate) struct Daemon {
    pub(crate) jobs: Arc<Jobs>,
    _dir: tempfile::TempDir,
}

/// The daemon's jobs under `config`, with a real journal in a temporary folder (kept as
/// long as the result) and `runner` (none: the engine did not start).
pub(crate) fn jobs_under(runner: Option<Arc<dyn JobRunner>>, config: &Config) -> Daemon {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let journal = Journal::open(&dir.path().join(journal::FILE_NAME)).expect("a journal");
    let (run_id, _) = journal.begin_run(std::process::id()).expect("a run");
    let jobs = Jobs::with_runner(
        runner,
        Some("no engine here".into()),
        config,
        Arc::new(journal),
        run_id,
    );
    Daemon {
        jobs: Arc::new(jobs),
        _dir: dir,
    }
}

fn daemon(runner: Option<Arc<Stand>>, extra: &str) -> Daemon {
    let config = Config::parse(&format!(
        "[worker]\nfunctions = [\"{ARTIFACT}\"]\n[runner]\nmax_jobs = 1\nqueue_len = 1\n\
         [daemon]\nshutdown_grace_ms = 100\n{extra}"
    ))
    .expect("the test configuration");
    jobs_under(runner.map(|r| r as Arc<dyn JobRunner>), &config)
}

fn handle(s: Submitted) -> Arc<JobHandle> {
    match s {
        Submitted::State(h) => h,
        Submitted::Done(r) => panic!("expected a job in the queue, got its end: {r:?}"),
        _ => panic!("expected a job in the queue, got an error"),
    }
}

fn ended(s: Submitted) -> Arc<JobResult> {
    match s {
        Submitted::Done(r) => r,
        Submitted::State(h) => panic!("expected an end, the job is {}", h.state().name()),
        _ => panic!("expected an end, got an error"),
    }
}

async fn done(h: &JobHandle) -> Arc<JobResult> {
    tokio::time::timeout(Duration::from_secs(5), h.done())
        .await
        .expect("the job ends within 5 s")
        .expect("the job has a result")
}

/// Waits (at most 5 s) until `f` holds.
async fn until(what: &str, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(5), "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Turns skills on or off, as `skills on` and `skills off` would.
fn skills(d: &Daemon, on: bool) {
    d.jobs
        .settings
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .skills_on = on;
}

fn reason(r: &JobResult) -> (Status, Option<&'static str>) {
    (r.status, r.reason_str())
}

#[tokio::test]
async fn one_runs_one_waits_the_next_is_busy_and_the_queue_moves_on() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let a = handle(d.jobs.submit(&body("a")).await);
    until("a starts", || stand.runs() == 1).await;
    assert_eq!(a.state().name(), "running");
    let b = handle(d.jobs.submit(&body("b")).await);
    assert_eq!(b.state().name(), "queued");
    assert_eq!(d.jobs.load(), (1, 1));

    let c = ended(d.jobs.submit(&body("c")).await);
    assert_eq!(reason(&c), (Status::Rejected, Some("busy")));
    assert!(c
        .message
        .as_deref()
        .is_some_and(|m| m.contains("1 running and 1 waiting")));
    assert_eq!(stand.runs(), 1, "a busy job does not run");

    stand.go.add_permits(1);
    assert_eq!(done(&a).await.status, Status::Ok);
    until("b starts", || stand.runs() == 2).await;
    stand.go.add_permits(1);
    assert_eq!(done(&b).await.status, Status::Ok);
    until("nothing left", || d.jobs.load() == (0, 0)).await;
    // Every answer is in the journal, the busy one too.
    for (id, status) in [
        ("a", Status::Ok),
        ("b", Status::Ok),
        ("c", Status::Rejected),
    ] {
        match d.jobs.journaled(id).await.expect("the journal answers") {
            Some(Entry::Done(r)) => assert_eq!(r.status, status, "{id}"),
            other => panic!("{id}: {other:?}"),
        }
    }
    // The busy id sent again, now that there is room, gets its answer again (SPEC.md:
    // the answer given for an id is its answer forever) and nothing runs; the job sent
    // with a new id runs.
    let again = ended(d.jobs.submit(&body("c")).await);
    assert_eq!(again, c, "the same answer");
    assert_eq!(stand.runs(), 2, "the busy id does not run");
    let c2 = handle(d.jobs.submit(&body("c2")).await);
    stand.go.add_permits(1);
    assert_eq!(done(&c2).await.status, Status::Ok);
}

#[tokio::test]
async fn a_job_is_answered_before_its_removal_and_holds_its_slot_until_it_is_done() {
    let stand = Stand::removing();
    let removals = stand.removals.clone().expect("removals held");
    let d = daemon(Some(stand.clone()), "");
    let a = handle(d.jobs.submit(&body("a")).await);
    until("a starts", || stand.runs() == 1).await;
    let b = handle(d.jobs.submit(&body("b")).await);
    stand.go.add_permits(1);
    // Answered, and journaled, while what is left of it is still being removed.
    assert_eq!(done(&a).await.status, Status::Ok);
    assert!(matches!(
        d.jobs.journaled("a").await.expect("the journal answers"),
        Some(Entry::Done(_))
    ));
    // Its slot (max_jobs 1) is not free yet: b waits, and a still counts as running.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(stand.runs(), 1, "b must wait for a's removal");
        assert_eq!(b.state().name(), "queued");
        assert_eq!(d.jobs.load(), (1, 1));
    }
    let c = ended(d.jobs.submit(&body("c")).await);
    assert_eq!(reason(&c), (Status::Rejected, Some("busy")));
    removals.add_permits(1);
    until("b starts once a is removed", || stand.runs() == 2).await;
    stand.go.add_permits(1);
    assert_eq!(done(&b).await.status, Status::Ok);
    assert_eq!(d.jobs.load(), (1, 0), "b's removal holds its slot");
    removals.add_permits(1);
    until("nothing left", || d.jobs.load() == (0, 0)).await;
}

#[tokio::test]
async fn a_duplicate_joins_the_job_and_later_gets_its_journaled_answer() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let first = handle(d.jobs.submit(&body("dup")).await);
    until("it starts", || stand.runs() == 1).await;
    let second = handle(d.jobs.submit(&body("dup")).await);
    stand.go.add_permits(1);
    let (r1, r2) = (done(&first).await, done(&second).await);
    assert_eq!(r1, r2);
    assert_eq!(r1.status, Status::Ok);
    until("forgotten in memory", || d.jobs.handle("dup").is_none()).await;
    // From the journal now; a different body under the same id changes nothing.
    let again = ended(
        d.jobs
            .submit(&body_with("dup", json!({ "ttl_ms": 5 })))
            .await,
    );
    assert_eq!(*again, *r1);
    assert_eq!(stand.runs(), 1, "one id, one run");
}

/// Submits `id`, lets it run and waits until only the journal holds it; its result.
async fn run_to_the_journal(d: &Daemon, stand: &Stand, id: &str) -> Arc<JobResult> {
    let h = handle(d.jobs.submit(&body(id)).await);
    stand.go.add_permits(1);
    let r = done(&h).await;
    until("forgotten in memory", || d.jobs.handle(id).is_none()).await;
    r
}

#[tokio::test]
async fn a_pruned_id_sent_again_is_refused_and_never_runs_twice() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "retention_days = 0\n");
    assert_eq!(
        run_to_the_journal(&d, &stand, "spent").await.status,
        Status::Ok
    );
    tokio::time::sleep(Duration::from_millis(2)).await;
    d.jobs.prune().await;

    match d.jobs.lookup("spent").await {
        Err(LookupError::Pruned(m)) => assert!(m.contains("ended ok"), "{m}"),
        other => panic!("expected the pruned answer, got {other:?}"),
    }
    stand.go.add_permits(1);
    let again = ended(d.jobs.submit(&body("spent")).await);
    assert_eq!(reason(&again), (Status::Rejected, Some("result_pruned")));
    assert!(
        again
            .message
            .as_deref()
            .is_some_and(|m| m.contains("new job_id")),
        "{again:?}"
    );
    assert_eq!(stand.runs(), 1, "one id, one run");
    assert!(d.jobs.handle("spent").is_none(), "nothing kept in memory");
    // A new id runs as ever.
    let other = handle(d.jobs.submit(&body("fresh")).await);
    assert_eq!(done(&other).await.status, Status::Ok);
    assert_eq!(stand.runs(), 2);
}

/// An operator who means "keep every result" writes the largest retention there is. Before,
/// `u64::MAX` days became -1 and the cutoff a day in the future: every result went at the
/// start's first prune.
#[tokio::test]
async fn the_longest_retention_keeps_every_result() {
    for days in [u64::MAX, i64::MAX as u64 + 1, 106_751_991_167_301] {
        let stand = Stand::new();
        let d = daemon(Some(stand.clone()), &format!("retention_days = {days}\n"));
        let r = run_to_the_journal(&d, &stand, "kept").await;
        d.jobs.prune().await;
        match d.jobs.lookup("kept").await {
            Ok(Some(e)) => assert_eq!(e.state, "done", "{days}"),
            other => panic!("retention_days = {days}: the result is gone: {other:?}"),
        }
        assert_eq!(r.status, Status::Ok);
    }
    let now = crate::daemon::journal::now_ms();
    assert_eq!(super::health::prune_before(now, 7), now - 7 * 86_400_000);
    assert_eq!(super::health::prune_before(now, u64::MAX), now - i64::MAX);
    assert_eq!(super::health::prune_before(-1, u64::MAX), i64::MIN);
}

/// Holds an id as a submission does while it asks the journal about the id.
fn reserve(jobs: &Jobs, id: &str) -> Arc<LiveJob> {
    jobs.reserve(id).expect("the id is free")
}

#[tokio::test]
async fn submissions_being_checked_are_not_load_and_a_free_runner_takes_a_valid_job() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    // Many submissions at once, each still asking the journal about its id (a finished id
    // sent again, a bad job whose rejection is being written): the window of each.
    let held: Vec<_> = (0..6)
        .map(|i| reserve(&d.jobs, &format!("checking-{i}")))
        .collect();
    assert_eq!(d.jobs.load(), (0, 0), "nothing runs or waits yet");

    let a = handle(d.jobs.submit(&body("a")).await);
    until("a starts", || stand.runs() == 1).await;
    let b = handle(d.jobs.submit(&body("b")).await);
    assert_eq!(b.state().name(), "queued");
    assert_eq!(d.jobs.load(), (1, 1));
    // The slot and the queue are full now: that, and only that, is busy.
    let c = ended(d.jobs.submit(&body("c")).await);
    assert_eq!(reason(&c), (Status::Rejected, Some("busy")));
    assert!(
        c.message
            .as_deref()
            .is_some_and(|m| m.contains("1 running and 1 waiting")),
        "{c:?}"
    );

    for (i, j) in held.iter().enumerate() {
        d.jobs
            .forget(&format!("checking-{i}"), j, JobState::Pending);
    }
    stand.go.add_permits(2);
    assert_eq!(done(&a).await.status, Status::Ok);
    assert_eq!(done(&b).await.status, Status::Ok);
    until("nothing left", || d.jobs.load() == (0, 0)).await;
    assert_eq!(d.jobs.live().checking, 0);
}

#[tokio::test]
async fn a_finished_id_sent_again_stays_done_while_the_second_submission_is_checked() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let r = run_to_the_journal(&d, &stand, "again").await;

    // The window of a second submission of the id: reserved, not yet answered.
    let held = reserve(&d.jobs, "again");
    let seen = d.jobs.lookup("again").await.expect("a lookup");
    let seen = seen.expect("the id is known");
    assert_eq!(seen.state, "done", "a finished id never looks queued again");
    assert_eq!(seen.result.as_deref(), Some(&*r));
    d.jobs.forget("again", &held, JobState::Done(r.clone()));

    // An id seen for the first time is queued while its submission is checked.
    let fresh = reserve(&d.jobs, "fresh");
    let seen = d.jobs.lookup("fresh").await.expect("a lookup");
    assert_eq!(
        seen.map(|e| (e.state, e.result.is_none())),
        Some(("queued", true))
    );
    d.jobs.forget("fresh", &fresh, JobState::Pending);
    assert_eq!(
        d.jobs
            .lookup("fresh")
            .await
            .expect("a lookup")
            .map(|e| e.state),
        None
    );
    assert_eq!(stand.runs(), 1, "one id, one run");
}

#[tokio::test]
async fn a_job_that_waits_past_its_ttl_expires_without_running() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let a = handle(d.jobs.submit(&body("a")).await);
    until("a starts", || stand.runs() == 1).await;
    let t = Instant::now();
    let late = handle(
        d.jobs
            .submit(&body_with("late", json!({ "ttl_ms": 60 })))
            .await,
    );
    let r = done(&late).await;
    assert_eq!(reason(&r), (Status::Expired, Some("ttl")));
    assert!(
        t.elapsed() >= Duration::from_millis(60),
        "{:?}",
        t.elapsed()
    );
    assert!(r
        .message
        .as_deref()
        .is_some_and(|m| m.contains("ttl_ms 60")));
    assert_eq!(stand.runs(), 1, "the expired job never ran");
    stand.go.add_permits(1);
    assert_eq!(done(&a).await.status, Status::Ok);
}

#[tokio::test]
async fn a_cancel_ends_a_waiting_job_before_it_starts_and_a_running_one_as_cancelled() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let a = handle(d.jobs.submit(&body("a")).await);
    until("a starts", || stand.runs() == 1).await;
    let b = handle(d.jobs.submit(&body("b")).await);

    assert!(d.jobs.cancel("b").is_some());
    let rb = done(&b).await;
    assert_eq!(reason(&rb), (Status::Cancelled, Some("cancelled")));
    assert!(rb
        .message
        .as_deref()
        .is_some_and(|m| m.contains("before it started")));

    assert!(d.jobs.cancel("a").is_some());
    let ra = done(&a).await;
    assert_eq!(reason(&ra), (Status::Cancelled, Some("cancelled")));
    assert_eq!(
        *stand.causes.lock().unwrap_or_else(|p| p.into_inner()),
        vec![Cause::Requested],
        "the running job was told the dispatcher asked"
    );
    assert_eq!(stand.runs(), 1, "the waiting job never ran");
    assert!(d.jobs.cancel("nobody").is_none());
}

#[tokio::test]
async fn a_stop_ends_the_queue_then_kills_the_running_job_after_the_grace_as_shutdown() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let a = handle(d.jobs.submit(&body("a")).await);
    until("a starts", || stand.runs() == 1).await;
    let b = handle(d.jobs.submit(&body("b")).await);

    let t = Instant::now();
    d.jobs.shutdown().await;
    assert!(
        t.elapsed() >= Duration::from_millis(100),
        "the grace was given"
    );
    let rb = done(&b).await;
    assert_eq!(reason(&rb), (Status::Internal, Some("shutdown")));
    assert!(rb
        .message
        .as_deref()
        .is_some_and(|m| m.contains("before the job started")));
    let ra = done(&a).await;
    assert_eq!(reason(&ra), (Status::Internal, Some("shutdown")));
    assert!(
        ra.message
            .as_deref()
            .is_some_and(|m| m.contains("grace period of 100 ms")),
        "{:?}",
        ra.message
    );
    assert_eq!(
        *stand.causes.lock().unwrap_or_else(|p| p.into_inner()),
        vec![Cause::Shutdown { grace_ms: 100 }]
    );
    assert!(matches!(
        d.jobs.submit(&body("c")).await,
        Submitted::Stopping
    ));
    assert!(d.jobs.handle("c").is_none(), "nothing of c is kept");
    // An id the runner answered gets its answer while it stops, as a look at it does.
    // Before, every submission got 503 `shutting_down`.
    let again = ended(d.jobs.submit(&body("a")).await);
    assert_eq!(again.as_ref(), &*ra, "the journal's answer for a");
    assert_eq!(d.jobs.load(), (0, 0));
    assert_eq!(stand.runs(), 1);
}

#[tokio::test]
async fn the_grace_runs_beside_the_pools_drain_not_after_it() {
    // The drain (a warm-up under way may take up to its own timeout) ends only once the
    // running job was killed at the end of its grace: run one after the other, the two
    // would wait for each other for ever.
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let a = handle(d.jobs.submit(&body("a")).await);
    until("a starts", || stand.runs() == 1).await;
    let killed = Arc::new(tokio::sync::Notify::new());
    let drained = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drain = {
        let (killed, drained) = (killed.clone(), drained.clone());
        async move {
            killed.notified().await;
            drained.store(true, Ordering::SeqCst);
        }
    };
    let watch = {
        let stand = stand.clone();
        tokio::spawn(async move {
            until("the grace is over and the job killed", || {
                !stand
                    .causes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_empty()
            })
            .await;
            killed.notify_one();
        })
    };
    tokio::time::timeout(Duration::from_secs(5), d.jobs.shutdown_beside(drain))
        .await
        .expect("the shutdown ends once the job is killed and the drain is done");
    watch.await.expect("the watch");
    assert!(
        drained.load(Ordering::SeqCst),
        "the shutdown waited for the drain"
    );
    assert_eq!(
        reason(&*done(&a).await),
        (Status::Internal, Some("shutdown"))
    );
}

/// A second connection to the daemon's journal, holding its write lock (as another
/// process would): the daemon's next write waits for it.
fn the_journals_write_lock(d: &Daemon) -> rusqlite::Connection {
    let path = d._dir.path().join(journal::FILE_NAME);
    let other = rusqlite::Connection::open(path).expect("a second connection");
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("the write lock");
    other
}

/// Once `what` (a journal write) waits for the write lock `other` holds: a foreign file
/// takes the journal's place, then the lock is let go (the write commits to the database
/// the daemon holds, and finds the file astray after).
async fn a_foreign_file_replaces_the_journal_during_its_write(
    d: &Daemon,
    other: rusqlite::Connection,
    what: &str,
) {
    until(&format!("{what} waits for the lock"), || {
        d.jobs.journal.busy()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(d.jobs.journal.busy(), "{what} waits for the lock");
    let path = d._dir.path().join(journal::FILE_NAME);
    let foreign = d._dir.path().join("foreign");
    std::fs::write(&foreign, "not the journal").expect("a foreign file");
    std::fs::rename(&foreign, &path).expect("the foreign file in the journal's place");
    other.execute_batch("ROLLBACK").expect("the lock let go");
}

#[tokio::test]
async fn a_job_whose_row_is_committed_as_the_journal_file_is_replaced_is_accepted_and_runs() {
    // The row's write waits on another writer's lock; meanwhile a foreign file takes the
    // journal's place. The row is then in the database the daemon holds (and writes
    // back), as every earlier one: the job is accepted and runs. Answered 503 as before,
    // its id would stay queued in that database for ever and be refused as a duplicate
    // when sent again, as the 503 asks.
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let path = d._dir.path().join(journal::FILE_NAME);
    let other = the_journals_write_lock(&d);
    let submitting = {
        let jobs = d.jobs.clone();
        tokio::spawn(async move { jobs.submit(&body("x")).await })
    };
    until("x is checked and placed in the queue", || {
        d.jobs.load().1 == 1
    })
    .await;
    // Into the row's write, which waits for the lock (10 s at most): the journal's
    // connection is held, and the file's check before the write takes a stat.
    a_foreign_file_replaces_the_journal_during_its_write(&d, other, "the row's write").await;
    let h = handle(submitting.await.expect("the submission"));
    until("x runs", || stand.runs() == 1).await;
    assert!(
        d.jobs.journal_problem().is_some(),
        "the next jobs wait for the journal"
    );
    // The foreign file moved away: the journal is written back, with x's result.
    std::fs::remove_file(&path).expect("the foreign file removed");
    stand.go.add_permits(1);
    assert_eq!(reason(&*done(&h).await), (Status::Ok, None));
    let journal = Journal::open(&path).expect("the journal written back");
    assert!(matches!(journal.get("x"), Ok(Some(Entry::Done(_)))));
}

#[tokio::test]
async fn a_cancel_that_came_first_stays_cancelled_through_a_stop() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let a = handle(d.jobs.submit(&body("a")).await);
    until("a starts", || stand.runs() == 1).await;
    assert!(d.jobs.cancel("a").is_some());
    d.jobs.shutdown().await;
    assert_eq!(
        reason(&*done(&a).await),
        (Status::Cancelled, Some("cancelled"))
    );
}

#[tokio::test]
async fn an_off_runner_turns_jobs_away_and_a_bad_one_is_its_rule() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    skills(&d, false);
    let r = ended(d.jobs.submit(&body("a")).await);
    assert_eq!(reason(&r), (Status::Rejected, Some("runner_off")));
    skills(&d, true);
    let r = ended(
        d.jobs
            .submit(&body_with("b", json!({ "class": "x" })))
            .await,
    );
    assert_eq!(reason(&r), (Status::Rejected, Some("invalid_job")));
    assert!(matches!(
        d.jobs.submit(b"{\"job_id\": 5}").await,
        Submitted::BadRequest("bad_job_id", _)
    ));
    // A well-formed id beside another key given twice: the job's rejected result, under
    // its one id, naming the key.
    let r = ended(
        d.jobs
            .submit(b"{\"job_id\": \"dup-key-job\", \"net\": \"deny\", \"net\": \"public\"}")
            .await,
    );
    assert_eq!(reason(&r), (Status::Rejected, Some("invalid_job")));
    assert_eq!(r.job_id, "dup-key-job");
    assert!(
        r.message
            .as_deref()
            .is_some_and(|m| m.contains("duplicate field `net`")),
        "{r:?}"
    );
    // The id itself given twice: no id to answer under, a 400 that says so.
    match d
        .jobs
        .submit(b"{\"job_id\": \"dup-id\", \"job_id\": \"dup-id\"}")
        .await
    {
        Submitted::BadRequest("bad_job_id", why) => {
            assert!(why.contains("more than once"), "{why}");
            assert!(!why.contains("dup-id"), "{why}");
        }
        _ => panic!("expected a 400 bad_job_id"),
    }
    assert!(matches!(
        d.jobs.submit(b"[1]").await,
        Submitted::BadRequest("bad_json", _)
    ));
    assert_eq!(stand.runs(), 0);
}

#[tokio::test]
async fn without_an_engine_a_job_ends_runner_unavailable_and_says_why() {
    let d = daemon(None, "");
    assert!(!d.jobs.ready());
    let h = handle(d.jobs.submit(&body("a")).await);
    let r = done(&h).await;
    assert_eq!(reason(&r), (Status::Internal, Some("runner_unavailable")));
    assert!(r
        .message
        .as_deref()
        .is_some_and(|m| m.contains("no engine here")));
}

#[tokio::test]
async fn info_shows_the_input_bound_the_jobs_are_checked_against_engine_or_not() {
    let config = Config::parse("[runner]\nmax_input_json_bytes = 1000\n").expect("config");
    // No engine (it did not start on this host): the daemon still checks every job.
    let d = jobs_under(None, &config);
    let jobs = &d.jobs;
    let info = serde_json::to_value(crate::daemon::info(jobs)).expect("json");
    assert_eq!(info["caps"]["input_json_max_bytes"], 1000, "{info}");
    assert_eq!(jobs.bounds().max_input_json_bytes, 1000);
}

/// A first submission of `id` holding it (still being checked), and a second one of the
/// same id, submitted and waiting for the first.
async fn a_second_waits_on_a_first(
    d: &Daemon,
    id: &str,
) -> (Arc<LiveJob>, tokio::task::JoinHandle<Submitted>) {
    let first = reserve(&d.jobs, id);
    let second = submitting(d, body(id));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!second.is_finished(), "the second waits for the first");
    (first, second)
}

/// `text` submitted on a task of its own, as a connection's submission runs.
fn submitting(d: &Daemon, text: Vec<u8>) -> tokio::task::JoinHandle<Submitted> {
    let jobs = d.jobs.clone();
    tokio::spawn(async move { jobs.submit(&text).await })
}

/// What a submission task answered, within 5 s.
async fn answered(submission: tokio::task::JoinHandle<Submitted>) -> Submitted {
    tokio::time::timeout(Duration::from_secs(5), submission)
        .await
        .expect("answered within 5 s")
        .expect("the submission")
}

/// A submission that waits on an id held by a first one, which is then dropped unanswered
/// (its journal write failed), takes the id and goes the whole way itself: with the journal
/// working again the job is accepted and runs, once.
#[tokio::test]
async fn a_second_submission_whose_first_was_dropped_goes_the_whole_way() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let (first, second) = a_second_waits_on_a_first(&d, "twice").await;
    d.jobs.forget("twice", &first, JobState::Pending);
    drop(first);
    let h = handle(answered(second).await);
    stand.go.add_permits(1);
    let r = done(&h).await;
    assert_eq!(reason(&r), (Status::Ok, None), "{r:?}");
    assert_eq!(stand.runs(), 1);
}

/// The first submission was dropped after the journal took the id as accepted (its write
/// was reported failed after it went in): a submission waiting on it gets the answer every
/// later submission of the id gets, `duplicate` (never a run), not a 500 of its own.
/// Before, it answered 500 "the job vanished".
#[tokio::test]
async fn a_waiting_submission_answers_as_a_later_one_when_the_first_was_dropped_journaled() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let (first, second) = a_second_waits_on_a_first(&d, "half").await;
    let run_id = d.jobs.run_id;
    d.jobs
        .blocking(move |j| j.accept("half", run_id, "t", crate::job::Net::Deny, None, 0))
        .await
        .expect("the journal task")
        .expect("accepted");
    d.jobs.forget("half", &first, JobState::Pending);
    drop(first);
    let waited = ended(answered(second).await);
    let later = ended(d.jobs.submit(&body("half")).await);
    assert_eq!(reason(&waited), (Status::Internal, Some("duplicate")));
    assert_eq!(reason(&later), reason(&waited), "one answer for one id");
    // The answer is the journal's, for a look and after a restart. Before, it was given and
    // not written: the id was `queued` for good, and `runner_restarted` after a restart.
    match d.jobs.lookup("half").await {
        Ok(Some(e)) => assert_eq!(e.state, "done", "{e:?}"),
        other => panic!("the id's answer is not the journal's: {other:?}"),
    }
    let recovered = d
        .jobs
        .blocking(|j| j.recover(crate::daemon::journal::restarted))
        .await
        .expect("the journal task")
        .expect("recover");
    assert!(recovered.is_empty(), "recovered: {recovered:?}");
    let after = ended(d.jobs.submit(&body("half")).await);
    assert_eq!(
        reason(&after),
        reason(&waited),
        "one answer after a restart too"
    );
    assert_eq!(stand.runs(), 0);
}

/// A submission that panics (a bug) after its id was reserved gives the id back: the
/// next submission of it is taken and runs, one that waited on it goes the whole way
/// itself, and nothing stays counted among the submissions checked or queued. Before,
/// the id stayed reserved for good (every later submission of it waited forever) and its
/// place among the [`CHECKING_MAX`] was never given back.
#[tokio::test]
async fn a_submission_that_panics_gives_its_id_back() {
    for (stage, id, valid) in [
        ("checking", "panics-checked", true),
        ("verdict", "panics-queued", true),
        ("verdict", "panics-rejected", false),
    ] {
        let stand = Stand::new();
        let d = daemon(Some(stand.clone()), "");
        *d.jobs.bug_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(stage);
        let text = if valid {
            body(id)
        } else {
            body_with(id, json!({"limits": {"wall_ms": 0}}))
        };
        let first = submitting(&d, text.clone());
        let failed = tokio::time::timeout(Duration::from_secs(5), first)
            .await
            .expect("the first submission ends within 5 s");
        assert!(
            failed.as_ref().is_err_and(|e| e.is_panic()),
            "{stage}: the test's bug ran"
        );
        {
            let l = d.jobs.live();
            assert_eq!(
                (l.checking, l.queued, l.jobs.len()),
                (0, 0, 0),
                "{stage} {id}: nothing kept"
            );
        }
        let again = answered(submitting(&d, text)).await;
        if valid {
            let h = handle(again);
            stand.go.add_permits(1);
            assert_eq!(reason(&*done(&h).await), (Status::Ok, None), "{stage}");
            assert_eq!(stand.runs(), 1, "{stage}");
        } else {
            let r = ended(again);
            assert_eq!(r.status, Status::Rejected, "{stage}: {r:?}");
            assert_eq!(stand.runs(), 0);
        }
        until("nothing left", || d.jobs.load() == (0, 0)).await;
        assert_eq!(d.jobs.live().checking, 0);
    }
}

/// A submission waiting on one that panics (a bug) goes the whole way itself.
#[tokio::test]
async fn a_submission_waiting_on_one_that_panics_goes_the_whole_way() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let (first, second) = a_second_waits_on_a_first(&d, "waits").await;
    // The first stands for a submission past its reservation; its bug drops a guard
    // like the one a real submission holds.
    let guard = Held {
        jobs: &d.jobs,
        id: "waits",
        job: first,
        queued: false,
        armed: true,
    };
    drop(guard);
    let h = handle(answered(second).await);
    stand.go.add_permits(1);
    assert_eq!(reason(&*done(&h).await), (Status::Ok, None));
    assert_eq!(stand.runs(), 1);
    assert_eq!(d.jobs.live().checking, 0);
}

#[test]
fn the_envelope_has_specs_three_keys_in_every_state() {
    let queued = serde_json::to_value(Envelope::of("a", &JobState::Queued)).expect("json");
    assert_eq!(
        queued,
        json!({"job_id": "a", "state": "queued", "result": null})
    );
    let running = serde_json::to_value(Envelope::of("a", &JobState::Running)).expect("json");
    assert_eq!(running["result"], serde_json::Value::Null);
    assert!(running
        .as_object()
        .is_some_and(|o| o.contains_key("result")));
    let r = Arc::new(JobResult::not_run(
        "a",
        Reason::Cancelled,
        "",
        crate::job::Net::Deny,
        None,
    ));
    let done = serde_json::to_value(Envelope::done(r)).expect("json");
    assert_eq!(done["state"], "done");
    assert_eq!(done["result"]["status"], "cancelled");
}

/// A second process ended a running job's journal row (a second daemon that recovered it):
/// the first one's result no longer fits the row, and what it shows is the journal's answer,
/// the same one a later submission of the id gets. Before, it showed its own result, and the
/// id had two answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_that_does_not_fit_its_row_shows_the_journals_answer() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let h = handle(d.jobs.submit(&body("two")).await);
    until("it starts", || stand.runs() == 1).await;
    let other = Journal::open(d.jobs.journal().path()).expect("the same journal");
    let recovered = other.recover(journal::restarted).expect("recover");
    let seen: Vec<(&str, Option<&str>)> = recovered
        .iter()
        .map(|r| (r.job_id.as_str(), r.node.as_deref()))
        .collect();
    assert_eq!(
        seen,
        vec![("two", Some("v-stand"))],
        "the Node it was taken to run with"
    );
    stand.go.add_permits(1);
    let shown = done(&h).await;
    assert_eq!(shown.reason_str(), Some("runner_restarted"), "{shown:?}");
    let again = ended(d.jobs.submit(&body("two")).await);
    assert_eq!(
        (shown.status, shown.reason_str()),
        (again.status, again.reason_str()),
        "one answer for one id"
    );
}

/// A job whose `ttl_ms` passed while it was being taken (its journal write was slow) is
/// `expired` although a slot is free: SPEC.md counts the ttl from acceptance, and a job not
/// started by then never starts. Before, a free slot won over a deadline already past.
#[tokio::test]
async fn a_job_whose_ttl_passed_while_it_was_taken_expires_though_a_slot_is_free() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let text = body_with("slow", json!({ "ttl_ms": 50 }));
    let job = crate::job::admit(&text, &d.jobs.bounds).expect("a valid job");
    let Ok(live) = d.jobs.reserve("slow") else {
        panic!("a new id")
    };
    {
        let mut l = d.jobs.live();
        l.checking -= 1;
        l.queued += 1;
    }
    let run_id = d.jobs.run_id;
    let accepted = d
        .jobs
        .blocking(move |j| j.accept("slow", run_id, "t", crate::job::Net::Deny, None, 0))
        .await;
    assert!(matches!(accepted, Some(Ok(None))), "{accepted:?}");
    let rx = live.state.subscribe();
    // Taken a second ago, its 50 ms long gone; the slot is free.
    let taken = Instant::now() - Duration::from_secs(1);
    tokio::time::timeout(
        Duration::from_secs(5),
        d.jobs.clone().run_job(job, live, taken),
    )
    .await
    .expect("the job ends at once (before, it ran, and waited for a go that never came)");
    let state = rx.borrow().clone();
    match state {
        JobState::Done(r) => assert_eq!(reason(&r), (Status::Expired, Some("ttl"))),
        other => panic!("the job is {}", other.name()),
    }
    assert_eq!(stand.runs(), 0, "the expired job never ran");
    assert_eq!(d.jobs.load(), (0, 0));
}

/// A rejection the journal does not take because the id got a row after it was looked up
/// (another process on the same journal wrote it in between) answers with that row, the
/// id's one answer, and never with the rejection that lost. The other process's write is
/// held open (an SQLite write lock) across the submission's lookup and released once the
/// submission waits to write its rejection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_that_finds_the_id_taken_answers_with_the_ids_row() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let other = rusqlite::Connection::open(d.jobs.journal().path()).expect("the same journal");
    let theirs = JobResult::not_run(
        "late",
        Reason::Cancelled,
        "ended by another process",
        crate::job::Net::Deny,
        None,
    );
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("the write lock");
    other
        .execute(
            "INSERT INTO jobs(job_id, run_id, accepted_ms, tool, net, state, status, reason, result, finished_ms)
             VALUES ('late', 0, 0, 't', 'deny', 'done', 'cancelled', 'cancelled', ?1, 0)",
            [serde_json::to_string(&theirs).expect("json")],
        )
        .expect("their row");
    let rejected = body_with("late", json!({ "limits": { "wall_ms": 999_999 } }));
    let submission = submitting(&d, rejected);
    // The lookup saw no row (theirs is not committed); the rejection's write now waits
    // for the lock, holding the daemon's connection.
    let journal = d.jobs.journal().clone();
    let held_since = Instant::now();
    until("the rejection waits to be written", || {
        if !journal.busy() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
        journal.busy() && held_since.elapsed() >= Duration::from_millis(200)
    })
    .await;
    assert!(!submission.is_finished());
    other.execute_batch("COMMIT").expect("their row committed");
    let answer = ended(
        tokio::time::timeout(Duration::from_secs(10), submission)
            .await
            .expect("answered within 10 s")
            .expect("the submission"),
    );
    assert_eq!(reason(&answer), (Status::Cancelled, Some("cancelled")));
    assert_eq!(answer.message.as_deref(), Some("ended by another process"));
    let again = ended(d.jobs.submit(&body("late")).await);
    assert_eq!(*again, *answer, "one answer for one id");
    assert_eq!(stand.runs(), 0);
}

/// A result whose first journal write fails once the runner is killing its jobs (the
/// stop's grace is over) is given up at once, and leaves no count behind: neither in
/// `results_unjournaled` (which kept the runner "not ready" with a result nobody would
/// write) nor among the ended jobs of `/metrics` (it was shown to nobody; the next start
/// counts the id's runner_restarted). Before, both counted it.
#[tokio::test]
async fn a_result_given_up_at_the_stop_is_counted_nowhere() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let path = d.jobs.journal().path().to_path_buf();
    let h = handle(d.jobs.submit(&body("x")).await);
    until("x runs", || stand.runs() == 1).await;
    // Every write fails from here: another file is in the journal's place.
    let foreign = d._dir.path().join("foreign");
    std::fs::write(&foreign, "not the journal").expect("a foreign file");
    std::fs::rename(&foreign, &path).expect("the foreign file in the journal's place");
    d.jobs.kill_all.cancel();
    stand.go.add_permits(1);
    let shown = tokio::time::timeout(Duration::from_secs(5), h.done())
        .await
        .expect("the job is over within 5 s");
    assert!(
        shown.is_none(),
        "a result the journal never took is shown to nobody"
    );
    assert_eq!(d.jobs.unjournaled(), 0);
    let text = d.jobs.metrics.render(&d.jobs.gauges());
    assert!(
        text.contains("openvibe_skill_runner_results_unjournaled 0"),
        "{text}"
    );
    assert!(
        !text.contains("openvibe_skill_runner_jobs_total{"),
        "no ended job counted: {text}"
    );
}

/// A rejection whose row is committed as a foreign file takes the journal's place is the
/// id's answer at once: its row is in the database the daemon holds and writes back, as an
/// accepted job's is. Before, the submission got a 503 ("not accepted: send it again
/// later") and the id sent again got the rejection: two answers.
#[tokio::test]
async fn a_rejection_committed_as_the_journal_file_is_replaced_is_the_answer() {
    let stand = Stand::new();
    let d = daemon(Some(stand.clone()), "");
    let path = d._dir.path().join(journal::FILE_NAME);
    let other = the_journals_write_lock(&d);
    let rejected = body_with("r", json!({ "limits": { "wall_ms": 999_999 } }));
    let submitting = {
        let (jobs, text) = (d.jobs.clone(), rejected.clone());
        tokio::spawn(async move { jobs.submit(&text).await })
    };
    // Into the rejection's write, which waits for the lock, holding the connection.
    a_foreign_file_replaces_the_journal_during_its_write(&d, other, "the rejection's write").await;
    let first = ended(submitting.await.expect("the submission"));
    assert_eq!(reason(&first), (Status::Rejected, Some("limits_above_cap")));
    assert!(
        d.jobs.journal_problem().is_some(),
        "the next jobs wait for the journal"
    );
    let again = ended(d.jobs.submit(&rejected).await);
    assert_eq!(*again, *first, "one answer for one id");
    // The foreign file moved away: the journal is written back, with the rejection.
    std::fs::remove_file(&path).expect("the foreign file removed");
    d.jobs.journal().check_file().expect("written back");
    let journal = Journal::open(&path).expect("the journal written back");
    match journal.get("r") {
        Ok(Some(Entry::Done(r))) => assert_eq!(*r, *first),
        other => panic!("{other:?}"),
    }
    assert_eq!(stand.runs(), 0);
}

/// Submissions whose callers hung up run on, each waiting its turn at the journal: past
/// [`CHECKING_MAX`] of them at once, the next is turned away at once (`busy`) rather than
/// pile up. Here the journal's write lock is held elsewhere, so every rejection's write
/// waits; once it is let go, each submission taken gets its one answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submissions_checked_at_once_are_bounded() {
    let d = daemon(None, "");
    // Skills off: every job is rejected, and each rejection is a journal write.
    skills(&d, false);
    let other = the_journals_write_lock(&d);
    let waiting: Vec<_> = (0..CHECKING_MAX)
        .map(|i| {
            let jobs = d.jobs.clone();
            tokio::spawn(async move { jobs.submit(&body(&format!("held-{i}"))).await })
        })
        .collect();
    until("every submission is checked", || {
        d.jobs.live().checking == CHECKING_MAX
    })
    .await;
    for i in 0..20 {
        let over = body(&format!("over-{i}"));
        let over = d.jobs.submit(&over);
        match tokio::time::timeout(Duration::from_secs(2), over)
            .await
            .expect("answered at once")
        {
            Submitted::Busy(m) => {
                assert!(m.contains(&format!("{CHECKING_MAX} submissions")), "{m}")
            }
            _ => panic!("past the bound a submission is busy"),
        }
    }
    assert_eq!(
        d.jobs.live().checking,
        CHECKING_MAX,
        "none of them was kept"
    );
    // An id being checked, sent again, waits for its answer rather than be turned away.
    let again = {
        let jobs = d.jobs.clone();
        tokio::spawn(async move { jobs.submit(&body("held-0")).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!again.is_finished(), "the id sent again waits");
    other.execute_batch("ROLLBACK").expect("the lock let go");
    let r = ended(again.await.expect("the submission"));
    assert_eq!((r.job_id.as_str(), r.status), ("held-0", Status::Rejected));
    for w in waiting {
        let r = ended(w.await.expect("the submission"));
        assert_eq!(r.status, Status::Rejected, "{r:?}");
    }
    assert_eq!(d.jobs.live().checking, 0);
    // Room again: the next is taken.
    let r = ended(d.jobs.submit(&body("after")).await);
    assert_eq!(r.status, Status::Rejected);
    assert_eq!(r.job_id, "after");
}

/// An id whose stored answer is damaged is the runner's failure (`internal`, 500), not
/// a journal to ask again later (503): asking again would find the same damage. Sent
/// again, it is not accepted either.
#[tokio::test]
async fn a_damaged_answer_is_an_internal_failure_not_a_wait() {
    let d = daemon(None, "");
    skills(&d, false);
    let r = ended(d.jobs.submit(&body("x")).await);
    assert_eq!(r.status, Status::Rejected);
    let other = rusqlite::Connection::open(d._dir.path().join(journal::FILE_NAME))
        .expect("a second connection");
    other
        .execute("UPDATE jobs SET result = '{' WHERE job_id = 'x'", [])
        .expect("the answer damaged");
    match d.jobs.lookup("x").await {
        Err(LookupError::Damaged(m)) => assert!(m.contains("not valid"), "{m}"),
        other => panic!("a damaged answer: {other:?}"),
    }
    assert!(matches!(
        d.jobs.submit(&body("x")).await,
        Submitted::Internal(_)
    ));
}
