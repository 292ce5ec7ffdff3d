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

use super::admit::{self, Load, NotStarted, Prior};
use super::journal::{self, Entry, Journal, JournalError, Trouble};
use super::metrics::{Gauges, Metrics};
use super::pool::{Pool, PoolSettings};
use super::runner::{JobRunner, PooledEngine};
use crate::cancel::{Cancel, Cause};
use crate::config::Config;
use crate::engine::{Engine, Removal};
use crate::job::{self, Bounds, JobHead, JobResult, Reason, ValidJob};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use handle::{Envelope, JobHandle, JobState, Settings, Submitted};

/// Why [`Jobs::lookup`] has no state to give for an id.
#[derive(Debug)]
pub enum LookupError {
    /// The journal could not be read now (a write-back under way, the disk): this message.
    Journal(String),
    /// What the journal holds for the id is damaged: this message.
    Damaged(String),
    /// The id ran here and its result was pruned after the retention: this message.
    Pruned(String),
}

impl LookupError {
    fn of(e: JournalError) -> LookupError {
        if e.kind == Trouble::Damaged {
            LookupError::Damaged(e.to_string())
        } else {
            LookupError::Journal(e.to_string())
        }
    }
}
use health::Health;

pub(super) struct LiveJob {
    state: watch::Sender<JobState>,
    /// The dispatcher's cancel, or the runner's once its grace period is over.
    cancel: Cancel,
}

/// How many submissions may be checked at once (their ids reserved, the journal asked):
/// past it a new one is turned away, `503` `busy`. Twice the connections the daemon serves
/// at once: a burst of callers, one submission a connection, never meets it; only
/// submissions whose callers hung up and sent more could.
pub const CHECKING_MAX: usize = 1024;

/// Why [`Jobs::reserve`] reserved no id.
#[derive(Debug)]
pub(super) enum NotReserved {
    /// A job holds it: its state, to wait on.
    Held(watch::Receiver<JobState>),
    /// [`CHECKING_MAX`] submissions are being checked.
    Full,
}

/// A submission's reservation until it is handed to its run: its drop ends it when the
/// submission ended without ending it itself (a panic in its checks, which the task's join
/// answers `internal`, or its task dropped as the runtime ends), so the id is free for the
/// next submission of it, its place among
/// those checked or queued is given back, and a submission waiting on it goes the whole
/// way itself. Every other end (`forget`, `unqueue`, `release`) takes the reservation off
/// the jobs first, and then the drop finds nothing of its own to end.
struct Held<'a> {
    jobs: &'a Jobs,
    id: &'a str,
    job: Arc<LiveJob>,
    /// Past the verdict: counted among the queued, no longer among those checked.
    queued: bool,
    /// Until the run has it.
    armed: bool,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut l = self.jobs.live();
        if !l
            .jobs
            .get(self.id)
            .is_some_and(|x| Arc::ptr_eq(x, &self.job))
        {
            return;
        }
        if self.queued {
            l.queued -= 1;
        } else {
            l.checking -= 1;
        }
        l.jobs.remove(self.id);
        drop(l);
        if std::thread::panicking() {
            tracing::error!(job_id = %self.id, "a submission ended without an answer (a bug: the lines before say where); its id is free to be sent again");
        } else {
            // Its task was dropped (the daemon's runtime ending): nothing was answered.
            tracing::warn!(job_id = %self.id, "a submission was dropped before its answer; its id is free to be sent again");
        }
        // Wakes a submission waiting on this one: the id is no longer held.
        self.job.state.send_replace(JobState::Pending);
    }
}

/// How long a result that could not be journaled waits before the next try, at most.
const JOURNAL_RETRY_MAX: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Live {
    jobs: HashMap<String, Arc<LiveJob>>,
    /// Submissions whose id is reserved while they are checked (the journal's answer for
    /// the id, the verdict, a rejection's write): not yet in the queue, and never counted
    /// as load, or a burst of bad or repeated jobs would make a free runner answer `busy`.
    /// Bounded by [`CHECKING_MAX`] alone.
    checking: usize,
    /// Accepted jobs waiting for a slot.
    queued: usize,
    running: usize,
}

pub struct Jobs {
    /// What runs the jobs; none when the engine did not start.
    runner: Option<Arc<dyn JobRunner>>,
    /// The engine itself, for what `/v1/info` tells about the host; never used to run.
    engine: Option<Arc<Engine>>,
    /// The sandboxes kept warm for the engine's jobs (none in the unit tests' stand-in).
    pool: Option<Arc<Pool<Engine>>>,
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
    /// What the bodies being read may hold together (`body::BODY_BUDGET_BYTES`).
    pub body_budget: super::body::BodyBudget,
    pub settings: RwLock<Settings>,
    pub metrics: Metrics,
    /// Cancelled on SIGTERM: no new job is accepted, queued ones end.
    pub stopping: CancellationToken,
    /// Cancelled when the grace period is over: running jobs are killed, and a result the
    /// journal will not take is given up.
    kill_all: CancellationToken,
    tasks: TaskTracker,
    /// A test's bug: the stage of a submission that panics, once ([`Jobs::bug_at`]).
    #[cfg(test)]
    bug_at: Mutex<Option<&'static str>>,
}

impl Jobs {
    pub fn new(
        engine: Option<Arc<Engine>>,
        problem: Option<String>,
        config: &Config,
        journal: Arc<Journal>,
        run_id: i64,
    ) -> Jobs {
        let slots = Arc::new(Semaphore::new(config.max_jobs().max(1)));
        let pool = engine
            .as_ref()
            .map(|e| Pool::new(e.clone(), PoolSettings::from_config(config), slots.clone()));
        let runner = engine
            .clone()
            .zip(pool.clone())
            .map(|(engine, pool)| Arc::new(PooledEngine { engine, pool }) as Arc<dyn JobRunner>);
        let mut jobs = Jobs::with_runner(runner, problem, config, journal, run_id);
        jobs.slots = slots;
        jobs.engine = engine;
        jobs.pool = pool;
        jobs
    }

    /// The warm pool, when the engine runs.
    pub fn pool(&self) -> Option<&Arc<Pool<Engine>>> {
        self.pool.as_ref()
    }

    /// Jobs run by `runner` (none: every job ends `runner_unavailable` with `problem`).
    pub fn with_runner(
        runner: Option<Arc<dyn JobRunner>>,
        problem: Option<String>,
        config: &Config,
        journal: Arc<Journal>,
        run_id: i64,
    ) -> Jobs {
        let max_jobs = config.max_jobs().max(1);
        let queue_len = config.queue_len();
        let node = runner.as_ref().map(|r| r.node().to_string());
        let bounds = runner
            .as_ref()
            .map(|r| r.bounds().clone())
            .unwrap_or(Bounds {
                max_input_json_bytes: config.runner.max_input_json_bytes,
            });
        Jobs {
            runner,
            engine: None,
            pool: None,
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
            body_budget: super::body::BodyBudget::new(super::body::BODY_BUDGET_BYTES),
            settings: RwLock::new(Settings::from_config(config)),
            metrics: Metrics::default(),
            stopping: CancellationToken::new(),
            kill_all: CancellationToken::new(),
            tasks: TaskTracker::new(),
            #[cfg(test)]
            bug_at: Mutex::new(None),
        }
    }

    /// Panics here when a test set `stage` as the stage of its bug (once).
    #[cfg(test)]
    fn bug_at(&self, stage: &'static str) {
        let mut at = self.bug_at.lock().unwrap_or_else(|p| p.into_inner());
        if *at == Some(stage) {
            *at = None;
            drop(at);
            panic!("a test's bug in a submission, at its {stage} stage");
        }
    }

    #[cfg(not(test))]
    fn bug_at(&self, _: &'static str) {}

    /// The engine, for `/v1/info`.
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

    /// The bounds every submitted job is checked against (`runner.max_input_json_bytes`).
    pub fn bounds(&self) -> &Bounds {
        &self.bounds
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
            cache: self.runner.as_ref().and_then(|r| r.cache_stats()),
            unjournaled: self.unjournaled(),
            body_bytes: self.body_budget.held(),
            body_budget_bytes: super::body::BODY_BUDGET_BYTES,
            warm: self.pool.as_ref().map(|p| p.info()),
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
    pub async fn journaled(&self, job_id: &str) -> Result<Option<Entry>, JournalError> {
        let id = job_id.to_string();
        match self.blocking(move |j| j.get(&id)).await {
            Some(read) => read,
            None => Err(JournalError::task_failed()),
        }
    }

    /// A job's state: in memory, else in the journal. An id reserved by a submission
    /// that is still asking the journal about it is answered from the journal: a finished
    /// id sent again stays `done` with its answer; an id seen for the first time is
    /// `queued` while its submission is checked.
    pub async fn lookup(&self, job_id: &str) -> Result<Option<Envelope>, LookupError> {
        let reserved = match self.handle(job_id) {
            Some(h) => match h.state() {
                JobState::Pending => true,
                state => return Ok(Some(Envelope::of(job_id, &state))),
            },
            None => false,
        };
        Ok(
            match self.journaled(job_id).await.map_err(LookupError::of)? {
                Some(Entry::Done(r)) => Some(Envelope::done(Arc::new(*r))),
                Some(Entry::Pruned(p)) => {
                    return Err(LookupError::Pruned(self.pruned_message(job_id, &p)));
                }
                // Accepted in this run, ended and removed from memory between the two looks.
                Some(Entry::Accepted) => Some(Envelope::of(job_id, &JobState::Queued)),
                None if reserved => Some(Envelope::of(job_id, &JobState::Pending)),
                None => None,
            },
        )
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
        j.cancel.cancel(Cause::Requested);
        Some(Arc::new(JobHandle {
            job_id: job_id.to_string(),
            rx: j.state.subscribe(),
        }))
    }

    /// Takes one submitted job (the request body).
    /// [`Jobs::submit`] in a task of its own, which runs to its end even when the caller
    /// stops waiting: a client that hangs up drops its request's handler and every future
    /// it awaits, and a submission cut between its steps (the id reserved, the journal's
    /// lookup or acceptance, the job's start) would leave the id reserved for good, its
    /// place in the queue taken, or an accepted job that never runs. The body is released
    /// once the submission is decided.
    pub async fn submit_whole(self: &Arc<Self>, body: super::body::HeldBody) -> Submitted {
        let jobs = self.clone();
        let submitting = self.tasks.spawn(async move {
            let submitted = jobs.submit(&body.bytes).await;
            drop(body);
            submitted
        });
        match submitting.await {
            Ok(submitted) => submitted,
            Err(e) => {
                tracing::error!(error = %e, "a submission failed");
                Submitted::Internal(
                    "the runner failed while taking the job (a bug: its log says where); send it again"
                        .into(),
                )
            }
        }
    }

    pub async fn submit(self: &Arc<Self>, body: &[u8]) -> Submitted {
        // The one door, once: `args.input` is never parsed into a value on the way. Its
        // verdict waits for the id's own checks below.
        let door = job::admit(body, &self.bounds);
        let head = match &door {
            Ok(valid) => JobHead::of(valid),
            Err(refusal) => match &refusal.head {
                Ok(h) => h.clone(),
                Err(e) => return Submitted::BadRequest("bad_json", e.to_string()),
            },
        };
        let id = head.job_id;
        let net = head.net;
        if id.is_empty() {
            // Nothing can be recorded under no id, so there is no result to give: a 400.
            // Only here is the id read on its own, to say what is wrong with it.
            return Submitted::BadRequest("bad_job_id", admit::bad_job_id(job::job_id_text(body)));
        }

        // Reserve the id, or find the job that holds it. A submission that held it and was
        // dropped unanswered (its journal failed) leaves the id to this one, which goes the
        // whole way itself: the answer it gets is the one any later submission would.
        let reservation = loop {
            match self.reserve(&id) {
                Ok(j) => break j,
                Err(NotReserved::Held(rx)) => {
                    if let Some(answer) = Self::duplicate(&id, rx).await {
                        return answer;
                    }
                }
                Err(NotReserved::Full) => {
                    return Submitted::Busy(format!(
                        "the runner is checking {CHECKING_MAX} submissions already, the most \
                         it checks at once"
                    ));
                }
            }
        };
        let mut held = Held {
            jobs: self,
            id: &id,
            job: reservation.clone(),
            queued: false,
            armed: true,
        };
        self.bug_at("checking");
        let accepted_at = Instant::now();
        match self.journaled(&id).await.map(admit::prior) {
            Ok(prior) => {
                // Stopping, the runner takes nothing new; an id it has answered still
                // gets its answer, as a look at it would.
                let answered = matches!(prior, Prior::Answered(_) | Prior::Pruned(_));
                if self.stopping.is_cancelled() && !answered {
                    self.forget(&id, &reservation, JobState::Pending);
                    return Submitted::Stopping;
                }
                if let Some(answer) = self.answer_of_prior(&id, &reservation, net, prior).await {
                    return answer;
                }
            }
            Err(e) => {
                self.forget(&id, &reservation, JobState::Pending);
                let told = format!("cannot read the journal: {e}");
                return if e.kind == Trouble::Damaged {
                    Submitted::Internal(told)
                } else {
                    Submitted::JournalUnavailable(told)
                };
            }
        }
        // A new job: it needs the journal, now and when it ends.
        if let Some(p) = self.journal_problem() {
            self.forget(&id, &reservation, JobState::Pending);
            return Submitted::JournalUnavailable(p);
        }

        let tool = head.tool;
        let door = door.map_err(|refusal| refusal.rejection);
        let skills_on = self.settings().skills_on;
        let verdict = {
            // The load and the place in the queue under one lock: two jobs judged at once
            // cannot both take the last place.
            let mut l = self.live();
            let load = Load {
                running: l.running,
                queued: l.queued + 1,
                max_jobs: self.max_jobs,
                queue_len: self.queue_len,
            };
            let verdict = admit::verdict(door, skills_on, load);
            if verdict.is_ok() {
                l.checking -= 1;
                l.queued += 1;
            }
            verdict
        };
        held.queued = verdict.is_ok();
        self.bug_at("verdict");
        let verdict = verdict.map_err(|rej| JobResult::rejected(&id, &rej, net, self.node()));
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
                    Some(Ok((true, None))) => self.journal_outcome(&Ok(())),
                    Some(Ok((true, Some(trouble)))) => {
                        // Committed: the rejection is the id's answer, in the journal the
                        // daemon holds and writes back; the trouble is for the jobs after.
                        tracing::error!(job_id = %id, error = %trouble, "the journal's file went astray while a rejection was recorded; it is in the journal the daemon holds and writes back");
                        self.journal_outcome(&Err(trouble.to_string()));
                    }
                    Some(Ok((false, _))) => {
                        // The id got a row since it was looked up (only another process on
                        // the same journal could write it): that row is the id's answer.
                        tracing::warn!(job_id = %id, "a rejection was not journaled: the id holds another answer, which is given");
                        let prior = self.journaled(&id).await.map(admit::prior);
                        if let Ok(prior) = prior {
                            if let Some(answer) =
                                self.answer_of_prior(&id, &reservation, net, prior).await
                            {
                                return answer;
                            }
                        }
                        let msg = "the journal took no rejection for the id and holds no answer for it either".to_string();
                        self.journal_outcome(&Err(msg.clone()));
                        self.forget(&id, &reservation, JobState::Pending);
                        return Submitted::JournalUnavailable(msg);
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
        let node = self.node().map(str::to_string);
        let accepted_ms = journal::now_ms();
        match self
            .blocking(move |j| j.accept(&jid, run_id, &t, jnet, node.as_deref(), accepted_ms))
            .await
        {
            Some(Ok(None)) => self.journal_outcome(&Ok(())),
            Some(Ok(Some(trouble))) => {
                // Committed: accepted, its row kept with every other one (see `accept`).
                tracing::error!(job_id = %id, error = %trouble, "the journal's file went astray while a job was accepted; the job is in the journal the daemon holds and writes back");
                self.journal_outcome(&Err(trouble.to_string()));
            }
            other => {
                let msg = journal_failure(other);
                tracing::error!(job_id = %id, error = %msg, "cannot journal an accepted job; not accepted");
                self.journal_outcome(&Err(msg.clone()));
                self.unqueue(&id, &reservation, JobState::Pending);
                return Submitted::JournalUnavailable(msg);
            }
        }
        self.metrics.accepted();
        reservation.state.send_replace(JobState::Queued);
        held.armed = false;
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

    /// A second submission of an id in memory: the answer of the job that holds it, once
    /// that one is past its checks; none when it was dropped unanswered.
    async fn duplicate(id: &str, mut rx: watch::Receiver<JobState>) -> Option<Submitted> {
        loop {
            let state = rx.borrow_and_update().clone();
            match state {
                JobState::Pending => rx.changed().await.ok()?,
                JobState::Done(r) => return Some(Submitted::Done(r)),
                _ => {
                    return Some(Submitted::State(Arc::new(JobHandle {
                        job_id: id.to_string(),
                        rx,
                    })))
                }
            }
        }
    }

    /// Ends a reservation with a result that was not a run of it.
    /// The answer to a submission of an id the journal holds (`prior`): its result, a
    /// pruned id's refusal, or (memory and journal disagree) `duplicate`; `None` for an id
    /// the journal does not know.
    async fn answer_of_prior(
        &self,
        id: &str,
        reservation: &Arc<LiveJob>,
        net: crate::job::Net,
        prior: Prior,
    ) -> Option<Submitted> {
        let r = match prior {
            Prior::New => return None,
            Prior::Answered(r) => *r,
            // Only possible if memory and journal disagree (an acceptance reported failed
            // after its row went in); never run it twice. The answer is written to the row
            // before it is given: a later look, a restart's recovery or another submission
            // then find the same one. Not written, none is given.
            Prior::Conflict => {
                let r = Arc::new(JobResult::not_run(
                    id,
                    Reason::Duplicate,
                    admit::CONFLICT,
                    net,
                    self.node(),
                ));
                let rr = r.clone();
                let written = self.blocking(move |j| j.finish(&rr)).await;
                if let Some(Ok(())) = written {
                    self.journal_outcome(&Ok(()));
                    return Some(self.release(id, reservation, r));
                }
                let msg = journal_failure(written);
                tracing::error!(job_id = %id, error = %msg, "cannot journal the answer to an id the journal holds unanswered");
                self.journal_outcome(&Err(msg.clone()));
                self.forget(id, reservation, JobState::Pending);
                return Some(Submitted::JournalUnavailable(msg));
            }
            Prior::Pruned(p) => {
                let msg = self.pruned_message(id, &p);
                JobResult::not_run(id, Reason::ResultPruned, msg, net, self.node())
            }
        };
        Some(self.release(id, reservation, Arc::new(r)))
    }

    fn pruned_message(&self, job_id: &str, p: &journal::Pruned) -> String {
        admit::pruned_message(job_id, p, journal::now_ms(), self.settings().retention_days)
    }

    fn release(&self, id: &str, j: &Arc<LiveJob>, r: Arc<JobResult>) -> Submitted {
        self.forget(id, j, JobState::Done(r.clone()));
        Submitted::Done(r)
    }

    /// Reserves an id for a submission being checked; or, when a job holds the id
    /// already, that job's state to wait on; or none, [`CHECKING_MAX`] being checked.
    pub(super) fn reserve(&self, id: &str) -> Result<Arc<LiveJob>, NotReserved> {
        let mut l = self.live();
        if let Some(j) = l.jobs.get(id) {
            return Err(NotReserved::Held(j.state.subscribe()));
        }
        // A caller that hangs up leaves its submission running (`submit_whole`): without a
        // bound, one that sends and hangs up in a loop would pile submissions up behind the
        // journal's writes, each holding its task and its body.
        if l.checking >= CHECKING_MAX {
            return Err(NotReserved::Full);
        }
        let (tx, _) = watch::channel(JobState::Pending);
        let j = Arc::new(LiveJob {
            state: tx,
            cancel: Cancel::new(),
        });
        l.jobs.insert(id.to_string(), j.clone());
        l.checking += 1;
        Ok(j)
    }

    /// Ends a reservation that was still being checked.
    pub(super) fn forget(&self, id: &str, j: &Arc<LiveJob>, last: JobState) {
        self.live().checking -= 1;
        self.drop_reservation(id, j, last);
    }

    /// Ends a reservation that took its place in the queue and never reached it (its
    /// acceptance could not be journaled).
    fn unqueue(&self, id: &str, j: &Arc<LiveJob>, last: JobState) {
        self.live().queued -= 1;
        self.drop_reservation(id, j, last);
    }

    fn drop_reservation(&self, id: &str, j: &Arc<LiveJob>, last: JobState) {
        j.state.send_replace(last);
        let mut l = self.live();
        if l.jobs.get(id).is_some_and(|x| Arc::ptr_eq(x, j)) {
            l.jobs.remove(id);
        }
    }

    /// SIGTERM: take nothing new, end the queue, let running jobs finish for the grace
    /// period, then kill them; returns when every job has its journaled result.
    pub async fn shutdown(&self) {
        // No job can take a warm sandbox from here on; they go, with the refill task,
        // during the grace period.
        match self.pool.as_ref().map(|pool| pool.shutdown()) {
            Some(pool_down) => self.shutdown_beside(pool_down).await,
            None => self.shutdown_beside(async {}).await,
        }
    }

    /// [`Self::shutdown`], with `beside` (the warm pool's drain) run during the grace
    /// period rather than before it: a warm-up under way may take up to its own timeout to
    /// end, and the running jobs' grace must not wait for it. Returns once both are done.
    pub(super) async fn shutdown_beside(&self, beside: impl std::future::Future<Output = ()>) {
        self.stopping.cancel();
        self.tasks.close();
        tokio::join!(beside, self.stop_jobs());
    }

    /// The running jobs' part of a shutdown: the grace period, then the kill.
    async fn stop_jobs(&self) {
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
            let cause = Cause::Shutdown {
                grace_ms: grace.as_millis() as u64,
            };
            for j in self.live().jobs.values() {
                j.cancel.cancel(cause);
            }
            self.kill_all.cancel();
            self.tasks.wait().await;
        }
        // A warm job is answered once its tool has ended; its sandbox is removed after
        // that, and the daemon exits only once every one is.
        if let Some(engine) = &self.engine {
            engine.settled().await;
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

fn log_end(r: &JobResult, tool: &str) {
    tracing::info!(
        job_id = %r.job_id,
        tool,
        status = r.status.as_str(),
        reason = r.reason_str().unwrap_or(""),
        wall_ms = r.wall_ms,
        cpu_ms = r.cpu_ms,
        "job ended"
    );
}

mod handle;
mod health;
mod run;
#[cfg(test)]
pub(crate) mod tests;
