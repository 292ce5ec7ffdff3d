//! What the daemon's API sees of a job: where it is, the envelope it answers with, a handle
//! to wait on it, what a submission gets, and the settings a reload may change.

use crate::config::Config;
use crate::job::JobResult;
use serde::Serialize;
use std::sync::Arc;
use tokio::sync::watch;

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
    /// `null` until the job is done: SPEC's envelope has the key in every state.
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
    /// Too many submissions are being checked at once: a 503 `busy`, with why.
    Busy(String),
    /// The journal cannot be written: the job was not accepted (503).
    JournalUnavailable(String),
    /// The daemon's own failure: the job was not accepted (500).
    Internal(String),
}

/// A handle on a job in memory: its id and its state channel.
pub struct JobHandle {
    pub job_id: String,
    pub(super) rx: watch::Receiver<JobState>,
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
