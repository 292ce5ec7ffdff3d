//! The daemon's admission rules as pure code: what a submission with a fresh id gets
//! (`runner_off`, the job's own rules, `busy`), what an id the journal already holds gets,
//! and what a queued job that never started ends with. No clock, no journal, no engine:
//! the callers in `jobs.rs` bring what they observed.

use super::journal::{Entry, Pruned};
use crate::cancel::Cause;
use crate::job::{self, IdText, JobResult, Reason, Rejection, Status, ValidJob};

/// How full the runner is when a job arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    pub running: usize,
    /// Queued jobs, the arriving one included.
    pub queued: usize,
    pub max_jobs: usize,
    pub queue_len: usize,
}

/// A submission with a fresh id, given the one door's verdict on its body
/// ([`job::admit`]): the valid job to queue, or why it is turned away. In this order: a
/// runner that is off turns every job away, whatever the door said; a job that breaks a
/// rule is `invalid_job`/`limits_above_cap` whatever the load; a valid job that finds every
/// slot and the queue taken is `busy`.
pub fn verdict(
    door: Result<ValidJob, Rejection>,
    skills_on: bool,
    load: Load,
) -> Result<ValidJob, Rejection> {
    if !skills_on {
        return Err(Rejection {
            reason: Reason::RunnerOff,
            message: format!(
                "this runner is off: {} is not in worker.functions (`openvibe-skill-runner skills on`); \
                 this job_id keeps this answer: once it is on, send the job with a new job_id",
                job::ARTIFACT
            ),
        });
    }
    let valid = door?;
    if load.running + load.queued > load.max_jobs + load.queue_len {
        return Err(Rejection {
            reason: Reason::Busy,
            message: format!(
                "the runner is full: {} running and {} waiting (runner.max_jobs {}, runner.queue_len {}); \
                 this job_id keeps this answer: send the job again later with a new job_id",
                load.running,
                load.queued.saturating_sub(1),
                load.max_jobs,
                load.queue_len
            ),
        });
    }
    Ok(valid)
}

/// What the journal's entry for a submitted id means.
#[derive(Debug)]
pub enum Prior {
    /// Never seen: the submission is judged as new.
    New,
    /// The id has its answer already, a rejection too (SPEC.md: the answer given for an
    /// id is its answer forever): the submission gets it, nothing runs.
    Answered(Box<JobResult>),
    /// Journaled as accepted but not in memory: never run it twice.
    Conflict,
    /// It ran (or ended) longer ago than the retention and its result is gone: it is not
    /// run again; the submission is `rejected` with [`pruned_message`].
    Pruned(Pruned),
}

pub fn prior(entry: Option<Entry>) -> Prior {
    match entry {
        Some(Entry::Done(r)) => Prior::Answered(r),
        Some(Entry::Accepted) => Prior::Conflict,
        Some(Entry::Pruned(p)) => Prior::Pruned(p),
        None => Prior::New,
    }
}

/// What a pruned id's submission and `GET` say: how the job ended, when, that its result
/// is gone and that it will not run again under this id.
pub fn pruned_message(job_id: &str, p: &Pruned, now_ms: i64, retention_days: u64) -> String {
    let days = (now_ms.saturating_sub(p.finished_ms) / 86_400_000).max(0);
    let ended = match &p.reason {
        Some(reason) => format!("{} ({reason})", p.status),
        None => p.status.clone(),
    };
    format!(
        "job {job_id} ended {ended} here {days} days ago; its result was removed after \
         daemon.retention_days ({retention_days}), and a job id runs once: send the job \
         with a new job_id to run it again"
    )
}

/// The message of a [`Prior::Conflict`] (reason `duplicate`).
pub const CONFLICT: &str = "a job with this id is already journaled as accepted";

/// Why a queued job left the queue without a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStarted {
    /// Its cancel came, with this cause.
    Cancelled(Cause),
    /// The runner began to stop.
    Stopping,
    /// The slots are gone (the runner is stopping).
    NoSlots,
    /// Its `ttl_ms` passed.
    Expired { ttl_ms: u64 },
}

/// The result's reason and message for a job that left the queue without running.
pub fn not_started(why: NotStarted) -> (Reason, String) {
    match why {
        NotStarted::Cancelled(cause) => (cause.reason(), cause.message(false)),
        NotStarted::Stopping => (
            Reason::Shutdown,
            "the runner was stopped (SIGTERM) before the job started".into(),
        ),
        NotStarted::NoSlots => (Reason::Shutdown, "the runner is stopping".into()),
        NotStarted::Expired { ttl_ms } => (
            Reason::Ttl,
            format!("ttl_ms {ttl_ms} passed before a slot was free"),
        ),
    }
}

/// Whether a result's job touched the host (its time counts in the runner's overhead).
pub fn ran(r: &JobResult) -> bool {
    !matches!(
        r.status,
        Status::Rejected | Status::Expired | Status::Integrity
    ) && r.wall_ms > 0
}

/// What is wrong with a body's `job_id` ([`job::job_id_text`]), without echoing it.
pub fn bad_job_id(raw: IdText) -> String {
    let raw = match raw {
        IdText::Twice => {
            return "job_id is given more than once: which id is meant cannot be known, and \
                    nothing is recorded under either; send the job again with one job_id"
                .to_string()
        }
        IdText::Missing => None,
        IdText::Once(text) => Some(text),
    };
    // `raw` is the id as written: only a string is read into a value.
    let string = raw.and_then(|r| serde_json::from_str::<String>(r).ok());
    let what = match (raw.map(str::trim_start), string) {
        (None, _) => "there is no job_id".to_string(),
        (_, Some(s)) => format!(
            "job_id is a string of {} characters that is not 1-64 of [A-Za-z0-9_.-]",
            s.chars().count()
        ),
        (Some(r), None) => match r.as_bytes().first() {
            Some(b'n') => "job_id is null",
            Some(b't' | b'f') => "job_id is a boolean",
            Some(b'[') => "job_id is an array",
            Some(b'{') => "job_id is an object",
            _ => "job_id is a number",
        }
        .to_string(),
    };
    format!(
        "{what}: a job is answered and recorded under its id, which is a string of 1-64 \
         characters of [A-Za-z0-9_.-]; send the job again with one"
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::job::Net;
    use serde_json::json;

    /// A valid job's text, with `extra` fields set on it (e.g. `ttl_ms`).
    pub(crate) fn body_with(id: &str, extra: serde_json::Value) -> Vec<u8> {
        let mut j: serde_json::Value = serde_json::from_slice(&body(id)).expect("json");
        if let (Some(j), Some(extra)) = (j.as_object_mut(), extra.as_object()) {
            j.extend(extra.clone());
        }
        serde_json::to_vec(&j).expect("a job serializes")
    }

    pub(crate) fn body(id: &str) -> Vec<u8> {
        let code = b"process.stdout.write('1')\n";
        let sha = {
            use sha2::Digest as _;
            hex::encode(sha2::Sha256::digest(code))
        };
        use base64::Engine as _;
        serde_json::to_vec(&json!({
            "job_id": id,
            "class": "function",
            "artifact": job::ARTIFACT,
            "args": { "tool": "t", "entry": "t.js", "input": null },
            "inputs": [{
                "name": "t.js",
                "sha256": sha,
                "content_base64": base64::engine::general_purpose::STANDARD.encode(code),
            }],
        }))
        .expect("a job serializes")
    }

    fn load(running: usize, queued: usize) -> Load {
        Load {
            running,
            queued,
            max_jobs: 2,
            queue_len: 1,
        }
    }

    /// The door's verdict on a body, and the daemon's on top of it.
    fn admit(body: &[u8], skills_on: bool, load: Load) -> Result<ValidJob, Rejection> {
        let door = job::admit(body, &job::Bounds::default()).map_err(|r| r.rejection);
        verdict(door, skills_on, load)
    }

    #[test]
    fn a_valid_job_with_room_is_admitted() {
        let v = admit(&body("a"), true, load(0, 1)).expect("admitted");
        assert_eq!(v.job_id, "a");
        // The last place: two running, this one the only one waiting.
        assert!(admit(&body("a"), true, load(2, 1)).is_ok());
    }

    #[test]
    fn one_past_the_slots_and_the_queue_is_busy() {
        let r = admit(&body("a"), true, load(2, 2)).expect_err("busy");
        assert_eq!(r.reason, Reason::Busy);
        assert_eq!(r.reason.status(), Status::Rejected);
        assert!(
            r.message.contains("2 running and 1 waiting")
                && r.message.contains("max_jobs 2")
                && r.message.contains("new job_id"),
            "{}",
            r.message
        );
    }

    #[test]
    fn off_is_decided_before_what_the_job_says() {
        let r = admit(b"not even json", false, load(0, 1)).expect_err("off");
        assert_eq!(r.reason, Reason::RunnerOff);
        let r = admit(&body("a"), false, load(0, 1)).expect_err("off");
        assert_eq!(r.reason, Reason::RunnerOff);
        assert!(r.message.contains("skills on"), "{}", r.message);
    }

    #[test]
    fn a_bad_job_is_its_rule_not_busy() {
        let mut j: serde_json::Value = serde_json::from_slice(&body("a")).expect("json");
        j["limits"] = json!({ "wall_ms": job::WALL_MS_CAP + 1 });
        let text = serde_json::to_vec(&j).expect("json");
        let r = admit(&text, true, load(9, 9)).expect_err("above cap");
        assert_eq!(r.reason, Reason::LimitsAboveCap);
        j["class"] = json!("other");
        let text = serde_json::to_vec(&j).expect("json");
        let r = admit(&text, true, load(0, 1)).expect_err("invalid");
        assert_eq!(r.reason, Reason::InvalidJob);
    }

    #[test]
    fn the_journal_answers_an_id_it_finished_and_refuses_one_it_holds() {
        assert!(matches!(prior(None), Prior::New));
        assert!(matches!(prior(Some(Entry::Accepted)), Prior::Conflict));
        let done = JobResult::not_run("a", Reason::Exit, "m", Net::Deny, None);
        match prior(Some(Entry::Done(Box::new(done.clone())))) {
            Prior::Answered(r) => assert_eq!(*r, done),
            other => panic!("{other:?}"),
        }
        // A rejected id keeps its answer too: never judged anew.
        let busy = JobResult::not_run("a", Reason::Busy, "m", Net::Deny, None);
        match prior(Some(Entry::Done(Box::new(busy.clone())))) {
            Prior::Answered(r) => assert_eq!(*r, busy),
            other => panic!("{other:?}"),
        }
        // A pruned id is never judged anew: it ran once.
        let pruned = Pruned {
            status: "error".into(),
            reason: Some("exit".into()),
            finished_ms: 1_000,
        };
        assert!(matches!(
            prior(Some(Entry::Pruned(pruned))),
            Prior::Pruned(_)
        ));
    }

    #[test]
    fn a_pruned_id_is_told_how_and_when_it_ended_and_what_to_do() {
        let p = Pruned {
            status: "error".into(),
            reason: Some("exit".into()),
            finished_ms: 1_000,
        };
        let m = pruned_message("j1", &p, 1_000 + 9 * 86_400_000 + 5, 7);
        assert!(
            m.contains("job j1 ended error (exit) here 9 days ago"),
            "{m}"
        );
        assert!(m.contains("daemon.retention_days (7)"), "{m}");
        assert!(m.contains("new job_id"), "{m}");
        assert!(!m.contains("  "), "one space between words: {m}");
        let ok = Pruned {
            status: "ok".into(),
            reason: None,
            finished_ms: 1_000,
        };
        assert!(pruned_message("j2", &ok, 0, 7).contains("ended ok here 0 days ago"));
        assert_eq!(Reason::ResultPruned.status(), Status::Rejected);
    }

    #[test]
    fn a_job_that_never_started_says_why() {
        let (r, m) = not_started(NotStarted::Cancelled(Cause::Requested));
        assert_eq!((r.status(), r), (Status::Cancelled, Reason::Cancelled));
        assert!(m.contains("before it started"), "{m}");
        let (r, _) = not_started(NotStarted::Cancelled(Cause::Shutdown { grace_ms: 1 }));
        assert_eq!((r.status(), r), (Status::Internal, Reason::Shutdown));
        let (r, m) = not_started(NotStarted::Stopping);
        assert_eq!(r, Reason::Shutdown);
        assert!(m.contains("SIGTERM"), "{m}");
        assert_eq!(not_started(NotStarted::NoSlots).0, Reason::Shutdown);
        let (r, m) = not_started(NotStarted::Expired { ttl_ms: 77 });
        assert_eq!((r.status(), r), (Status::Expired, Reason::Ttl));
        assert!(m.contains("ttl_ms 77"), "{m}");
    }

    #[test]
    fn only_a_job_that_ran_counts_its_time() {
        let mut r = JobResult::not_run("a", Reason::Exit, "m", Net::Deny, None);
        assert!(!ran(&r), "no time, not run");
        r.wall_ms = 5;
        assert!(ran(&r));
        let mut ttl = JobResult::not_run("a", Reason::Ttl, "m", Net::Deny, None);
        ttl.wall_ms = 5;
        assert!(!ran(&ttl));
    }

    #[test]
    fn a_bad_job_id_is_named_by_its_kind_never_echoed() {
        let say = |raw: Option<&str>| bad_job_id(raw.map_or(IdText::Missing, IdText::Once));
        assert!(say(None).starts_with("there is no job_id"));
        assert!(say(Some("null")).starts_with("job_id is null"));
        assert!(say(Some("true")).starts_with("job_id is a boolean"));
        assert!(say(Some("5")).starts_with("job_id is a number"));
        assert!(say(Some("-1e3")).starts_with("job_id is a number"));
        assert!(say(Some("[1, [2]]")).starts_with("job_id is an array"));
        assert!(say(Some("{\"a\": 1}")).starts_with("job_id is an object"));
        let bad = say(Some("\"../../etc\""));
        assert!(
            bad.starts_with("job_id is a string of 9 characters"),
            "{bad}"
        );
        assert!(!bad.contains("etc"), "{bad}");
        assert!(bad_job_id(IdText::Twice).starts_with("job_id is given more than once"));
    }
}
