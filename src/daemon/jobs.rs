//! The daemon's jobs: admission, the bounded queue, the slots, TTL, cancel, and the
//! journal writes that make every accepted job end exactly once.
//!
//! A job is in memory (`Live`) from acceptance until its terminal result is journaled;
//! after that `GET` finds it in the journal. A job id is reserved in memory before the
//! journal is asked about it, so two submissions of one id never both run.
//!
//! One id, one answer: a result is shown to nobody (the waiting client, `GET`, a second
//! submission) before it is in the journal, so a restart can never contradict it. A
//! result the journal cannot take (a full disk) stays in memory, the job still `running`
//! to the API, and is written again until it goes in; meanwhile the runner takes no new
//! job (503 `journal_unavailable`) and `/v1/info` says why it is not ready.

use super::journal::{self, Entry, Journal, JournalError, Trouble};
use super::metrics::{Gauges, Metrics};
use crate::config::Config;
use crate::engine::Engine;
use crate::job::{self, Bounds, JobResult, Net, Status, ValidJob};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Where a job is.
#[derive(Debug, Clone)]
pub enum JobState {
    /// The id is reserved while the journal is asked about it.
    Pending,
    Queued,
    Running,
    Done(Arc<JobResult>),
}

impl JobState {
    pub fn name(&self) -> &'static str {
        match self {
            JobState::Pending | JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Done(_) => "done",
        }
    }
}

/// What `POST` and `GET` answer without `wait`.
#[derive(Debug, Clone, Serialize)]
pub struct Envelope {
    pub job_id: String,
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Arc<JobResult>>,
}

impl Envelope {
    pub fn of(job_id: &str, state: &JobState) -> Envelope {
        Envelope {
            job_id: job_id.to_string(),
            state: state.name(),
            result: match state {
                JobState::Done(r) => Some(r.clone()),
                _ => None,
            },
        }
    }

    pub fn done(result: Arc<JobResult>) -> Envelope {
        Envelope {
            job_id: result.job_id.clone(),
            state: "done",
            result: Some(result),
        }
    }
}

struct LiveJob {
    state: watch::Sender<JobState>,
    cancel: CancellationToken,
    /// The dispatcher asked for the cancel (not the shutdown).
    cancel_requested: AtomicBool,
}

/// What keeps the runner from taking jobs besides the engine: the journal and the state
/// directory.
#[derive(Default)]
struct Health {
    /// Results that ended and are not in the journal yet.
    unjournaled: usize,
    /// The last journal failure, cleared by the next write that succeeds.
    journal: Option<String>,
    /// The jobs folder cannot be made.
    jobs_dir: Option<String>,
}

/// How long a result that could not be journaled waits before the next try, at most.
const JOURNAL_RETRY_MAX: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Live {
    jobs: HashMap<String, Arc<LiveJob>>,
    queued: usize,
    running: usize,
}

/// What a reload may change while the daemon runs.
#[derive(Debug, Clone)]
pub struct Settings {
    pub skills_on: bool,
    pub allow_uids: Vec<u32>,
    pub allow_gids: Vec<u32>,
    pub retention_days: u64,
    pub shutdown_grace_ms: u64,
}

impl Settings {
    pub fn from_config(c: &Config) -> Settings {
        Settings {
            skills_on: c.skills_on(),
            allow_uids: c.daemon.allow_uids.clone(),
            allow_gids: c.daemon.allow_gids.clone(),
            retention_days: c.daemon.retention_days,
            shutdown_grace_ms: c.daemon.shutdown_grace_ms,
        }
    }
}

pub struct Jobs {
    engine: Option<Arc<Engine>>,
    /// Why jobs cannot run here, when the engine did not start.
    pub problem: Option<String>,
    node: Option<String>,
    bounds: Bounds,
    journal: Arc<Journal>,
    run_id: i64,
    live: Mutex<Live>,
    health: Mutex<Health>,
    slots: Arc<Semaphore>,
    pub max_jobs: usize,
    pub queue_len: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub settings: RwLock<Settings>,
    pub metrics: Metrics,
    /// Cancelled on SIGTERM: no new job is accepted, queued ones end.
    pub stopping: CancellationToken,
    /// Cancelled when the grace period is over: running jobs are killed.
    kill_all: CancellationToken,
    tasks: TaskTracker,
}

/// What a submission gets.
pub enum Submitted {
    /// A new job, or a duplicate of one, in this state now.
    State(Arc<JobHandle>),
    /// Ended the moment it came (rejected), or a duplicate of a journaled job.
    Done(Arc<JobResult>),
    /// Not a job at all (not JSON, not an object, no valid `job_id`): a 400 with this code.
    BadRequest(&'static str, String),
    /// The daemon is stopping: a 503.
    Stopping,
    /// The journal cannot be written: the job was not accepted (503).
    JournalUnavailable(String),
    /// The daemon's own failure: the job was not accepted (500).
    Internal(String),
}

/// A handle on a job in memory: its id and its state channel.
pub struct JobHandle {
    pub job_id: String,
    rx: watch::Receiver<JobState>,
}

impl JobHandle {
    pub fn state(&self) -> JobState {
        self.rx.borrow().clone()
    }

    /// Waits for the terminal result. None only if the daemon dropped the job without one,
    /// which the code below never does.
    pub async fn done(&self) -> Option<Arc<JobResult>> {
        let mut rx = self.rx.clone();
        loop {
            if let JobState::Done(r) = &*rx.borrow_and_update() {
                return Some(r.clone());
            }
            if rx.changed().await.is_err() {
                return match &*rx.borrow() {
                    JobState::Done(r) => Some(r.clone()),
                    _ => None,
                };
            }
        }
    }
}

/// Reasons of results that never touched the host: with these the job did not run.
fn ran(r: &JobResult) -> bool {
    !matches!(
        r.status,
        Status::Rejected | Status::Expired | Status::Integrity
    ) && r.wall_ms > 0
}

impl Jobs {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        engine: Option<Arc<Engine>>,
        problem: Option<String>,
        config: &Config,
        journal: Arc<Journal>,
        run_id: i64,
    ) -> Jobs {
        let max_jobs = config.max_jobs().max(1);
        let queue_len = config.queue_len();
        let node = engine.as_ref().map(|e| e.runtime.version.clone());
        let bounds = engine
            .as_ref()
            .map(|e| e.bounds().clone())
            .unwrap_or(Bounds {
                max_input_json_bytes: config.runner.max_input_json_bytes,
            });
        Jobs {
            engine,
            problem,
            node,
            bounds,
            journal,
            run_id,
            live: Mutex::new(Live::default()),
            health: Mutex::new(Health::default()),
            slots: Arc::new(Semaphore::new(max_jobs)),
            max_jobs,
            queue_len,
            header_timeout: Duration::from_millis(config.daemon.header_timeout_ms.max(1)),
            body_timeout: Duration::from_millis(config.daemon.body_timeout_ms.max(1)),
            settings: RwLock::new(Settings::from_config(config)),
            metrics: Metrics::default(),
            stopping: CancellationToken::new(),
            kill_all: CancellationToken::new(),
            tasks: TaskTracker::new(),
        }
    }

    pub fn engine(&self) -> Option<&Arc<Engine>> {
        self.engine.as_ref()
    }

    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }

    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    pub fn settings(&self) -> Settings {
        self.settings
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Why the runner takes no new job now because of its journal, if it does not.
    pub fn journal_problem(&self) -> Option<String> {
        let h = self.health();
        let failure = h.journal.as_deref().unwrap_or("waiting for the next try");
        if h.unjournaled > 0 {
            Some(format!(
                "{} finished job result(s) cannot be journaled yet ({failure}); they are kept \
                 in memory and written as soon as the journal takes them, and the runner takes \
                 no new job until then",
                h.unjournaled
            ))
        } else {
            h.journal.as_ref().map(|f| {
                format!(
                    "the journal cannot be written ({f}); the runner takes no new job until it can"
                )
            })
        }
    }

    /// Results kept in memory because the journal would not take them.
    pub fn unjournaled(&self) -> usize {
        self.health().unjournaled
    }

    /// Whether jobs can run and be journaled here now.
    pub fn ready(&self) -> bool {
        let h = self.health();
        self.engine.is_some() && h.unjournaled == 0 && h.journal.is_none() && h.jobs_dir.is_none()
    }

    /// Why jobs cannot run here now (the engine, the journal, the state directory).
    pub fn problem(&self) -> Option<String> {
        if let Some(p) = &self.problem {
            return Some(p.clone());
        }
        if let Some(p) = self.journal_problem() {
            return Some(p);
        }
        self.health().jobs_dir.clone()
    }

    /// Notes the outcome of a journal write: a failure is kept (and logged once) until a
    /// write succeeds.
    fn journal_outcome(&self, r: &Result<(), String>) {
        let mut h = self.health();
        match r {
            Ok(()) => {
                if h.journal.take().is_some() {
                    tracing::warn!("the journal takes writes again");
                }
            }
            Err(e) => {
                if h.journal.as_deref() != Some(e) {
                    tracing::error!(error = %e, "the journal cannot be written; the runner takes no new job until it can");
                }
                h.journal = Some(e.clone());
            }
        }
    }

    /// Every second: the journal file is still in place (written back if it was removed),
    /// a failed journal takes writes again, the jobs folder is there (made again if it was
    /// removed). What cannot be fixed makes the runner not ready, with the reason.
    pub async fn check_state(&self) {
        let failed = self.health().journal.is_some();
        let jobs_dir = self.engine.as_ref().map(|e| e.jobs_dir().to_path_buf());
        let checked = self
            .blocking(move |j| {
                let journal = if failed { j.probe() } else { j.check_file() };
                let dir = jobs_dir.map(|d| crate::engine::make_jobs_dir(&d).map(|made| (d, made)));
                (journal.map_err(|e| e.to_string()), dir)
            })
            .await;
        let Some((journal, dir)) = checked else {
            return;
        };
        if failed || journal.is_err() {
            self.journal_outcome(&journal);
        }
        let mut h = self.health();
        match dir {
            Some(Ok((d, true))) => {
                tracing::warn!(dir = %d.display(), "the jobs folder was removed while the daemon ran; made again");
                h.jobs_dir = None;
            }
            Some(Err(e)) => {
                let p = format!("the jobs folder cannot be made: {e}; the state directory must be writable by the runner");
                if h.jobs_dir.as_deref() != Some(&p) {
                    tracing::error!(problem = %p, "jobs cannot run");
                }
                h.jobs_dir = Some(p);
            }
            _ => {
                if h.jobs_dir.take().is_some() {
                    tracing::warn!("the jobs folder is back");
                }
            }
        }
    }

    /// (running, queued)
    pub fn load(&self) -> (usize, usize) {
        let l = self.live();
        (l.running, l.queued)
    }

    pub fn gauges(&self) -> Gauges {
        let (running, queued) = self.load();
        Gauges {
            running,
            queued,
            max_jobs: self.max_jobs,
            queue_len: self.queue_len,
            skills_on: self.settings().skills_on,
            ready: self.ready(),
            cache: self.engine.as_ref().map(|e| e.cache_stats()),
            unjournaled: self.unjournaled(),
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Journal) -> T + Send + 'static,
    ) -> Option<T> {
        let j = self.journal.clone();
        tokio::task::spawn_blocking(move || f(&j)).await.ok()
    }

    /// The journal's answer for an id, off the async threads.
    pub async fn journaled(&self, job_id: &str) -> Result<Option<Entry>, String> {
        let id = job_id.to_string();
        match self.blocking(move |j| j.get(&id)).await {
            Some(Ok(e)) => Ok(e),
            Some(Err(e)) => Err(e.to_string()),
            None => Err("the journal task failed".into()),
        }
    }

    /// A job's state: in memory, else in the journal.
    pub async fn lookup(&self, job_id: &str) -> Result<Option<Envelope>, String> {
        if let Some(h) = self.handle(job_id) {
            return Ok(Some(Envelope::of(job_id, &h.state())));
        }
        Ok(match self.journaled(job_id).await? {
            Some(Entry::Done(r)) => Some(Envelope::done(Arc::new(*r))),
            // Accepted in this run, ended and removed from memory between the two looks.
            Some(Entry::Accepted) => Some(Envelope::of(job_id, &JobState::Queued)),
            None => None,
        })
    }

    pub fn handle(&self, job_id: &str) -> Option<Arc<JobHandle>> {
        let l = self.live();
        l.jobs.get(job_id).map(|j| {
            Arc::new(JobHandle {
                job_id: job_id.to_string(),
                rx: j.state.subscribe(),
            })
        })
    }

    /// Cancels a queued or running job; its handle, to wait for the result.
    pub fn cancel(&self, job_id: &str) -> Option<Arc<JobHandle>> {
        let l = self.live();
        let j = l.jobs.get(job_id)?;
        j.cancel_requested.store(true, Ordering::SeqCst);
        j.cancel.cancel();
        Some(Arc::new(JobHandle {
            job_id: job_id.to_string(),
            rx: j.state.subscribe(),
        }))
    }

    fn rejected_now(&self, id: &str, reason: &'static str, message: String, net: Net) -> JobResult {
        JobResult::not_run(id, Status::Rejected, reason, message, net, self.node())
    }

    /// Takes one submitted job (the request body).
    pub async fn submit(self: &Arc<Self>, body: &[u8]) -> Submitted {
        if self.stopping.is_cancelled() {
            return Submitted::Stopping;
        }
        // Read from the text: `args.input` is never parsed into a value on the way.
        let head = match job::read_head(body) {
            Ok(h) => h,
            Err(e) => return Submitted::BadRequest("bad_json", e.to_string()),
        };
        let id = head.job_id;
        let net = head.net;
        if id.is_empty() {
            // Nothing can be recorded under no id, so there is no result to give: a 400.
            // Only here is the body read as a value, to say what is wrong with the id.
            let raw: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
            return Submitted::BadRequest("bad_job_id", bad_job_id(raw.get("job_id")));
        }

        // Reserve the id, or find the job that holds it.
        let reserved = {
            let mut l = self.live();
            match l.jobs.get(&id) {
                Some(j) => Err(j.state.subscribe()),
                None => {
                    let (tx, _) = watch::channel(JobState::Pending);
                    let j = Arc::new(LiveJob {
                        state: tx,
                        cancel: self.kill_all.child_token(),
                        cancel_requested: AtomicBool::new(false),
                    });
                    l.jobs.insert(id.clone(), j.clone());
                    l.queued += 1;
                    Ok(j)
                }
            }
        };
        let reservation = match reserved {
            Ok(j) => j,
            Err(rx) => return self.duplicate(id, rx).await,
        };
        let accepted_at = Instant::now();
        match self.journaled(&id).await {
            Ok(Some(Entry::Done(r))) if r.status != Status::Rejected => {
                return self.release(&id, &reservation, Arc::new(*r));
            }
            Ok(Some(Entry::Accepted)) => {
                // Only possible if memory and journal disagree; never run it twice.
                let r = Arc::new(JobResult::not_run(
                    &id,
                    Status::Internal,
                    "duplicate",
                    "a job with this id is already journaled as accepted",
                    net,
                    self.node(),
                ));
                return self.release(&id, &reservation, r);
            }
            Ok(_) => {}
            Err(e) => {
                self.forget(&id, &reservation, JobState::Pending);
                return Submitted::Internal(e);
            }
        }
        // A new job (or a rejected id again): it needs the journal, now and when it ends.
        if let Some(p) = self.journal_problem() {
            self.forget(&id, &reservation, JobState::Pending);
            return Submitted::JournalUnavailable(p);
        }

        let settings = self.settings();
        let tool = head.tool;
        let verdict: Result<ValidJob, JobResult> = if !settings.skills_on {
            Err(self.rejected_now(
                &id,
                "runner_off",
                format!(
                    "this runner is off: {} is not in worker.functions (`openvibe-skill-runner skills on`)",
                    job::ARTIFACT
                ),
                net,
            ))
        } else {
            match job::parse_job(body, &self.bounds) {
                Err(rej) => Err(JobResult::rejected(&id, &rej, net, self.node())),
                Ok(v) => {
                    let l = self.live();
                    // This job is counted in `queued` already.
                    if l.running + l.queued > self.max_jobs + self.queue_len {
                        Err(self.rejected_now(
                            &id,
                            "busy",
                            format!(
                                "the runner is full: {} running and {} waiting (runner.max_jobs {}, runner.queue_len {})",
                                l.running,
                                l.queued - 1,
                                self.max_jobs,
                                self.queue_len
                            ),
                            net,
                        ))
                    } else {
                        Ok(v)
                    }
                }
            }
        };
        let job = match verdict {
            Ok(j) => j,
            Err(r) => {
                let r = Arc::new(r);
                let (rr, t) = (r.clone(), tool.clone());
                let run_id = self.run_id;
                let stored = self
                    .blocking(move |j| j.record_rejected(&rr, run_id, &t))
                    .await;
                match stored {
                    Some(Ok(true)) => self.journal_outcome(&Ok(())),
                    Some(Ok(false)) => {
                        tracing::warn!(job_id = %id, "a rejection was not journaled: the id holds another result");
                    }
                    other => {
                        // Not answered: a restart would not know this answer.
                        let msg = journal_failure(other.map(|r| r.map(|_| ())));
                        self.journal_outcome(&Err(msg.clone()));
                        self.forget(&id, &reservation, JobState::Pending);
                        return Submitted::JournalUnavailable(msg);
                    }
                }
                self.metrics.ended(&r, false, None);
                log_end(&r, &tool);
                return self.release(&id, &reservation, r);
            }
        };

        let (jid, t, run_id, jnet) = (id.clone(), job.tool.clone(), self.run_id, job.net);
        let accepted_ms = journal::now_ms();
        match self
            .blocking(move |j| j.accept(&jid, run_id, &t, jnet, accepted_ms))
            .await
        {
            Some(Ok(())) => self.journal_outcome(&Ok(())),
            other => {
                let msg = journal_failure(other);
                tracing::error!(job_id = %id, error = %msg, "cannot journal an accepted job; not accepted");
                self.journal_outcome(&Err(msg.clone()));
                self.forget(&id, &reservation, JobState::Pending);
                return Submitted::JournalUnavailable(msg);
            }
        }
        self.metrics.accepted();
        reservation.state.send_replace(JobState::Queued);
        let handle = Arc::new(JobHandle {
            job_id: id.clone(),
            rx: reservation.state.subscribe(),
        });
        let me = self.clone();
        self.tasks.spawn(async move {
            me.run_job(job, reservation, accepted_at).await;
        });
        Submitted::State(handle)
    }

    /// A second submission of an id in memory: wait out a reservation, then answer.
    async fn duplicate(&self, id: String, mut rx: watch::Receiver<JobState>) -> Submitted {
        loop {
            let state = rx.borrow_and_update().clone();
            match state {
                JobState::Pending => {
                    if rx.changed().await.is_err() {
                        // The reservation was dropped (journal failure): look again.
                        return match self.lookup(&id).await {
                            Ok(Some(e)) => match e.result {
                                Some(r) => Submitted::Done(r),
                                None => Submitted::Internal("the job vanished".into()),
                            },
                            Ok(None) => {
                                Submitted::Internal("the first submission of this id failed".into())
                            }
                            Err(e) => Submitted::Internal(e),
                        };
                    }
                }
                JobState::Done(r) => return Submitted::Done(r),
                _ => return Submitted::State(Arc::new(JobHandle { job_id: id, rx })),
            }
        }
    }

    /// Ends a reservation with a result that was not a run of it.
    fn release(&self, id: &str, j: &Arc<LiveJob>, r: Arc<JobResult>) -> Submitted {
        self.forget(id, j, JobState::Done(r.clone()));
        Submitted::Done(r)
    }

    fn forget(&self, id: &str, j: &Arc<LiveJob>, last: JobState) {
        j.state.send_replace(last);
        let mut l = self.live();
        if l.jobs.get(id).is_some_and(|x| Arc::ptr_eq(x, j)) {
            l.jobs.remove(id);
        }
        l.queued -= 1;
    }

    async fn run_job(self: Arc<Self>, job: ValidJob, live: Arc<LiveJob>, accepted_at: Instant) {
        let deadline =
            tokio::time::Instant::from_std(accepted_at) + Duration::from_millis(job.ttl_ms);
        let id = job.job_id.clone();
        let tool = job.tool.clone();
        let net = job.net;
        let permit = tokio::select! {
            biased;
            _ = live.cancel.cancelled() => Err(self.cancelled_in_queue(&live, &id, net)),
            _ = self.stopping.cancelled() => Err(JobResult::not_run(
                &id, Status::Internal, "shutdown",
                "the runner was stopped (SIGTERM) before the job started", net, self.node())),
            p = self.slots.clone().acquire_owned() => p.map_err(|_| JobResult::not_run(
                &id, Status::Internal, "shutdown", "the runner is stopping", net, self.node())),
            _ = tokio::time::sleep_until(deadline) => Err(JobResult::not_run(
                &id, Status::Expired, "ttl",
                format!("ttl_ms {} passed before a slot was free", job.ttl_ms), net, self.node())),
        };
        let permit = match permit {
            Ok(p) => p,
            Err(r) => {
                self.live().queued -= 1;
                self.finish(&id, &tool, &live, r, None).await;
                return;
            }
        };
        {
            let mut l = self.live();
            l.queued -= 1;
            l.running += 1;
        }
        live.state.send_replace(JobState::Running);
        let started = Instant::now();
        let result = match &self.engine {
            // Its own task: a panic in the engine ends this job `internal`, not the daemon's
            // bookkeeping of it.
            Some(engine) => {
                let (engine, cancel) = (engine.clone(), live.cancel.clone());
                match tokio::spawn(async move { engine.run(job, &cancel).await }).await {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::error!(job_id = %id, error = %e, "the engine failed");
                        JobResult::not_run(
                            &id,
                            Status::Internal,
                            "internal",
                            "the runner failed while running the job; whatever it started was removed",
                            net,
                            self.node(),
                        )
                    }
                }
            }
            None => JobResult::not_run(
                &id,
                Status::Internal,
                "runner_unavailable",
                format!(
                    "{} (run `openvibe-skill-runner doctor` for every layer)",
                    self.problem
                        .as_deref()
                        .unwrap_or("the engine did not start")
                ),
                net,
                None,
            ),
        };
        let total = started.elapsed().as_secs_f64();
        drop(permit);
        self.live().running -= 1;
        let mut result = result;
        if result.status == Status::Cancelled && !live.cancel_requested.load(Ordering::SeqCst) {
            result.status = Status::Internal;
            result.reason = Some("shutdown".into());
            result.message = Some(format!(
                "the runner was stopped (SIGTERM) and killed the job after the grace period of {} ms",
                self.settings().shutdown_grace_ms
            ));
        }
        let overhead = ran(&result).then(|| (total - result.wall_ms as f64 / 1000.0).max(0.0));
        self.finish(&id, &tool, &live, result, overhead).await;
    }

    fn cancelled_in_queue(&self, live: &LiveJob, id: &str, net: Net) -> JobResult {
        if live.cancel_requested.load(Ordering::SeqCst) {
            JobResult::not_run(
                id,
                Status::Cancelled,
                "cancelled",
                "the job was cancelled before it started",
                net,
                self.node(),
            )
        } else {
            JobResult::not_run(
                id,
                Status::Internal,
                "shutdown",
                "the runner was stopped before the job started",
                net,
                self.node(),
            )
        }
    }

    /// Journals the terminal result, then lets everyone waiting see it. A result the
    /// journal will not take is kept and tried again until it goes in; nobody sees it
    /// before. Only when the daemon stops (past the grace period) with it still unwritten
    /// is it given up: then nobody ever saw it, and the restart's answer for the job
    /// (`runner_restarted`) contradicts nothing.
    async fn finish(
        &self,
        id: &str,
        tool: &str,
        live: &Arc<LiveJob>,
        result: JobResult,
        overhead: Option<f64>,
    ) {
        let result = Arc::new(result);
        self.metrics.ended(&result, ran(&result), overhead);
        log_end(&result, tool);
        let mut wait = Duration::from_millis(100);
        let mut tries = 0u32;
        let durable = loop {
            let r = result.clone();
            let written = self.blocking(move |j| j.finish(&r)).await;
            tries += 1;
            let e = match written {
                Some(Ok(())) => break true,
                Some(Err(e)) if e.kind == Trouble::Conflict => {
                    // Not the disk: the row is not waiting for this result. Retrying
                    // cannot help; the journal keeps whatever it holds for the id.
                    tracing::error!(job_id = %id, error = %e, "a job's result does not fit its journal row");
                    break true;
                }
                other => journal_failure(other),
            };
            if tries == 1 {
                self.health().unjournaled += 1;
                tracing::error!(job_id = %id, error = %e, "cannot journal a job's result; kept in memory and tried again; the runner takes no new job until it is written");
            }
            self.journal_outcome(&Err(e));
            if self.kill_all.is_cancelled() {
                tracing::error!(job_id = %id, status = result.status.as_str(), "the runner stops with this job's result unwritten: it was shown to nobody, and after a restart the job ends internal runner_restarted");
                break false;
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.kill_all.cancelled() => {}
            }
            wait = (wait * 2).min(JOURNAL_RETRY_MAX);
        };
        if tries > 1 {
            self.health().unjournaled -= 1;
            if durable {
                tracing::warn!(job_id = %id, tries, "a job's result is journaled after all");
            }
        }
        if durable {
            self.journal_outcome(&Ok(()));
            live.state.send_replace(JobState::Done(result));
        }
        let idle = {
            let mut l = self.live();
            if l.jobs.get(id).is_some_and(|x| Arc::ptr_eq(x, live)) {
                l.jobs.remove(id);
            }
            if l.jobs.is_empty() {
                l.jobs.shrink_to(64);
            }
            l.running == 0 && l.queued == 0
        };
        if idle {
            // Hand the memory of the last burst back to the system.
            tokio::task::spawn_blocking(|| {
                // SAFETY: malloc_trim only releases free heap pages.
                unsafe { libc::malloc_trim(0) };
            });
        }
    }

    /// SIGTERM: take nothing new, end the queue, let running jobs finish for the grace
    /// period, then kill them; returns when every job has its journaled result.
    pub async fn shutdown(&self) {
        self.stopping.cancel();
        self.tasks.close();
        let grace = Duration::from_millis(self.settings().shutdown_grace_ms);
        let (running, queued) = self.load();
        tracing::info!(
            running,
            queued,
            grace_ms = grace.as_millis() as u64,
            "stopping"
        );
        if tokio::time::timeout(grace, self.tasks.wait())
            .await
            .is_err()
        {
            let (running, _) = self.load();
            tracing::warn!(running, "grace period over: killing the running jobs");
            self.kill_all.cancel();
            self.tasks.wait().await;
        }
    }

    /// Prunes finished jobs older than the retention.
    pub async fn prune(&self) {
        let days = self.settings().retention_days;
        let before = journal::now_ms() - (days as i64).saturating_mul(86_400_000);
        match self.blocking(move |j| j.prune(before)).await {
            Some(Ok(n)) if n > 0 => tracing::info!(removed = n, days, "journal pruned"),
            Some(Ok(_)) => {}
            other => tracing::warn!(?other, "cannot prune the journal"),
        }
    }
}

/// The message of a journal call that failed (or whose task did).
fn journal_failure<T>(r: Option<Result<T, JournalError>>) -> String {
    match r {
        Some(Err(e)) => e.to_string(),
        Some(Ok(_)) => "the journal did not record the job".into(),
        None => "the journal task failed".into(),
    }
}

/// What is wrong with a body's `job_id`, without echoing it.
fn bad_job_id(v: Option<&serde_json::Value>) -> String {
    let what = match v {
        None => "there is no job_id".to_string(),
        Some(serde_json::Value::String(s)) => format!(
            "job_id is a string of {} characters that is not 1-64 of [A-Za-z0-9_.-]",
            s.chars().count()
        ),
        Some(serde_json::Value::Null) => "job_id is null".to_string(),
        Some(serde_json::Value::Bool(_)) => "job_id is a boolean".to_string(),
        Some(serde_json::Value::Number(_)) => "job_id is a number".to_string(),
        Some(serde_json::Value::Array(_)) => "job_id is an array".to_string(),
        Some(serde_json::Value::Object(_)) => "job_id is an object".to_string(),
    };
    format!(
        "{what}: a job is answered and recorded under its id, which is a string of 1-64 \
         characters of [A-Za-z0-9_.-]; send the job again with one"
    )
}

fn log_end(r: &JobResult, tool: &str) {
    tracing::info!(
        job_id = %r.job_id,
        tool,
        status = r.status.as_str(),
        reason = r.reason.as_deref().unwrap_or(""),
        wall_ms = r.wall_ms,
        cpu_ms = r.cpu_ms,
        "job ended"
    );
}
