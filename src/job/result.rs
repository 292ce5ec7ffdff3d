//! The result (SPEC.md, Result): its statuses, the reasons this runner gives, and the
//! record of a job's network attempts.
//!
//! A reason knows its status: a result is built from its reason, so the two never
//! disagree.

use super::{Net, RUNNER};
use crate::json_text::JsonText;
use serde::{Deserialize, Serialize};

/// Terminal statuses (SPEC.md, Result).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Error,
    Limit,
    Integrity,
    Rejected,
    Expired,
    Cancelled,
    Internal,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Limit => "limit",
            Status::Integrity => "integrity",
            Status::Rejected => "rejected",
            Status::Expired => "expired",
            Status::Cancelled => "cancelled",
            Status::Internal => "internal",
        }
    }
}

/// Why a job ended other than `ok`: every reason this runner gives, each with its one
/// status and its wire name (README, the status table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The tool exited with a code other than 0.
    Exit,
    /// The tool was killed by a signal (not the runner's).
    Signal,
    /// Stdout is not exactly one JSON value.
    BadOutput,
    /// The tool exited 0 and wrote nothing.
    NoOutput,
    /// The wall-clock limit.
    Wall,
    /// The memory limit (the cgroup's, or V8's heap ceiling).
    Memory,
    /// Stdout over its cap.
    Output,
    /// The limit of processes and threads.
    Pids,
    /// An input's bytes do not have the digest the job names.
    #[serde(rename = "sha256_mismatch")]
    Sha256Mismatch,
    /// An input's bytes are neither in the job, the cache nor Media.
    InputMissing,
    /// The job breaks a rule of SPEC.md.
    InvalidJob,
    /// The job asks for more than the runner's caps.
    LimitsAboveCap,
    /// The runner is off (`skills off`).
    RunnerOff,
    /// The queue is full.
    Busy,
    /// The id ran here before and its result was pruned after the retention: a job id
    /// runs once.
    ResultPruned,
    /// The queue held the job past its `ttl_ms`.
    Ttl,
    /// The dispatcher cancelled the job.
    Cancelled,
    /// A layer of the sandbox failed to apply; the tool did not run.
    SandboxSetup,
    /// A layer of the sandbox is missing on this host.
    RunnerUnavailable,
    /// The runner restarted while the job was accepted and unfinished.
    RunnerRestarted,
    /// The runner was stopped before or while the job ran.
    Shutdown,
    /// The kernel's out-of-memory killer ended the tool while the job was under its own
    /// memory limit: the host (or the runner's cgroup) ran out, not the job.
    HostOutOfMemory,
    /// The sandbox ended without saying how the tool ended.
    NoReport,
    /// A job with this id is journaled as accepted although memory does not hold it.
    Duplicate,
    /// The runner's own failure.
    Internal,
}

impl Reason {
    /// Every reason, for tests and for whoever lists them.
    pub const ALL: [Reason; 25] = [
        Reason::Exit,
        Reason::Signal,
        Reason::BadOutput,
        Reason::NoOutput,
        Reason::Wall,
        Reason::Memory,
        Reason::Output,
        Reason::Pids,
        Reason::Sha256Mismatch,
        Reason::InputMissing,
        Reason::InvalidJob,
        Reason::LimitsAboveCap,
        Reason::RunnerOff,
        Reason::Busy,
        Reason::ResultPruned,
        Reason::Ttl,
        Reason::Cancelled,
        Reason::SandboxSetup,
        Reason::RunnerUnavailable,
        Reason::RunnerRestarted,
        Reason::Shutdown,
        Reason::HostOutOfMemory,
        Reason::NoReport,
        Reason::Duplicate,
        Reason::Internal,
    ];

    /// The status a result with this reason has.
    pub fn status(self) -> Status {
        match self {
            Reason::Exit | Reason::Signal | Reason::BadOutput | Reason::NoOutput => Status::Error,
            Reason::Wall | Reason::Memory | Reason::Output | Reason::Pids => Status::Limit,
            Reason::Sha256Mismatch | Reason::InputMissing => Status::Integrity,
            Reason::InvalidJob
            | Reason::LimitsAboveCap
            | Reason::RunnerOff
            | Reason::Busy
            | Reason::ResultPruned => Status::Rejected,
            Reason::Ttl => Status::Expired,
            Reason::Cancelled => Status::Cancelled,
            Reason::SandboxSetup
            | Reason::RunnerUnavailable
            | Reason::RunnerRestarted
            | Reason::Shutdown
            | Reason::HostOutOfMemory
            | Reason::NoReport
            | Reason::Duplicate
            | Reason::Internal => Status::Internal,
        }
    }

    /// The name a result carries in `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Exit => "exit",
            Reason::Signal => "signal",
            Reason::BadOutput => "bad_output",
            Reason::NoOutput => "no_output",
            Reason::Wall => "wall",
            Reason::Memory => "memory",
            Reason::Output => "output",
            Reason::Pids => "pids",
            Reason::Sha256Mismatch => "sha256_mismatch",
            Reason::InputMissing => "input_missing",
            Reason::InvalidJob => "invalid_job",
            Reason::LimitsAboveCap => "limits_above_cap",
            Reason::RunnerOff => "runner_off",
            Reason::Busy => "busy",
            Reason::ResultPruned => "result_pruned",
            Reason::Ttl => "ttl",
            Reason::Cancelled => "cancelled",
            Reason::SandboxSetup => "sandbox_setup",
            Reason::RunnerUnavailable => "runner_unavailable",
            Reason::RunnerRestarted => "runner_restarted",
            Reason::Shutdown => "shutdown",
            Reason::HostOutOfMemory => "host_out_of_memory",
            Reason::NoReport => "no_report",
            Reason::Duplicate => "duplicate",
            Reason::Internal => "internal",
        }
    }

    /// The status of a result with this reason, or `ok` without one.
    pub fn status_of(reason: Option<Reason>) -> Status {
        reason.map_or(Status::Ok, Reason::status)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One attempt to reach the network (filled in once egress exists).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressRecord {
    pub host: String,
    pub port: u16,
    pub allowed: bool,
    pub bytes_out: u64,
    pub bytes_in: u64,
    /// Only on a name lookup (port 53), recorded once per name: what the tool was told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<LookupOutcome>,
}

/// What the job's DNS told the tool about a name (the `dns` field of a port-53 record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LookupOutcome {
    /// The name has addresses: the tool got a synthetic one.
    Answered,
    /// The name exists upstream but has no address (NOERROR, no data).
    NoData,
    /// The upstream says the name does not exist (NXDOMAIN).
    Nxdomain,
    /// The upstream failed or did not answer in time (SERVFAIL).
    Servfail,
    /// The job may not look the name up (NXDOMAIN; never asked upstream).
    Refused,
    /// The job has looked up as many names as it may (REFUSED).
    Limit,
}

/// The result, field for field as SPEC.md shows it. `status` is always
/// `Reason::status_of(reason)`: build one with [`JobResult::not_run`] or from a
/// `supervise::Verdict`, which derive it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    pub job_id: String,
    pub status: Status,
    pub reason: Option<Reason>,
    pub message: Option<String>,
    /// The exact JSON text the tool wrote (src/json_text.rs). Absent unless `ok`; a tool
    /// that wrote `null` has `"output":null`, which reads back as that answer, not as none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_output"
    )]
    pub output: Option<JsonText>,
    pub stderr: String,
    pub stderr_truncated: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub wall_ms: u64,
    pub cpu_ms: u64,
    pub mem_peak_bytes: u64,
    pub net: Net,
    pub egress: Vec<EgressRecord>,
    pub runner: String,
    pub node: Option<String>,
}

/// A present `output` is the tool's answer, `null` included.
fn present_output<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<JsonText>, D::Error> {
    JsonText::deserialize(d).map(Some)
}

impl JobResult {
    /// A result for a job that did not run: every measurement zero, the status the
    /// reason's.
    pub fn not_run(
        job_id: &str,
        reason: Reason,
        message: impl Into<String>,
        net: Net,
        node: Option<&str>,
    ) -> JobResult {
        JobResult {
            job_id: job_id.to_string(),
            status: reason.status(),
            reason: Some(reason),
            message: Some(message.into()),
            output: None,
            stderr: String::new(),
            stderr_truncated: false,
            exit_code: None,
            signal: None,
            wall_ms: 0,
            cpu_ms: 0,
            mem_peak_bytes: 0,
            net,
            egress: Vec::new(),
            runner: RUNNER.to_string(),
            node: node.map(str::to_string),
        }
    }

    pub fn rejected(
        job_id: &str,
        rejection: &super::Rejection,
        net: Net,
        node: Option<&str>,
    ) -> Self {
        JobResult::not_run(
            job_id,
            rejection.reason,
            rejection.message.clone(),
            net,
            node,
        )
    }

    /// The reason's wire name, or none for `ok`.
    pub fn reason_str(&self) -> Option<&'static str> {
        self.reason.map(Reason::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_serializes_as_its_wire_name_and_reads_back() {
        for r in Reason::ALL {
            let text = serde_json::to_string(&r).expect("a reason serializes");
            assert_eq!(text, format!("\"{}\"", r.as_str()));
            let back: Reason = serde_json::from_str(&text).expect("and reads back");
            assert_eq!(back, r);
        }
    }

    #[test]
    fn every_wire_name_is_distinct() {
        let names: std::collections::HashSet<_> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), Reason::ALL.len());
    }

    #[test]
    fn each_reason_has_the_status_the_readme_table_gives_it() {
        // README.md's table, written out: status, then its reasons.
        let table: [(Status, &[&str]); 7] = [
            (
                Status::Error,
                &["exit", "signal", "bad_output", "no_output"],
            ),
            (Status::Limit, &["wall", "memory", "output", "pids"]),
            (Status::Integrity, &["sha256_mismatch", "input_missing"]),
            (
                Status::Rejected,
                &[
                    "invalid_job",
                    "limits_above_cap",
                    "runner_off",
                    "busy",
                    "result_pruned",
                ],
            ),
            (Status::Expired, &["ttl"]),
            (Status::Cancelled, &["cancelled"]),
            (
                Status::Internal,
                &[
                    "sandbox_setup",
                    "runner_unavailable",
                    "runner_restarted",
                    "shutdown",
                    "host_out_of_memory",
                    "no_report",
                    "duplicate",
                    "internal",
                ],
            ),
        ];
        let mut seen = 0;
        for (status, names) in table {
            for name in names {
                let r: Reason = serde_json::from_str(&format!("\"{name}\"")).expect(name);
                assert_eq!(r.status(), status, "{name}");
                seen += 1;
            }
        }
        assert_eq!(
            seen,
            Reason::ALL.len(),
            "a reason is missing from the table"
        );
        assert_eq!(Reason::status_of(None), Status::Ok);
    }

    #[test]
    fn an_unknown_reason_is_refused_when_read() {
        assert!(serde_json::from_str::<Reason>("\"busyy\"").is_err());
    }

    #[test]
    fn not_run_takes_its_status_from_the_reason_and_net_is_the_mode_name() {
        let r = JobResult::not_run("j", Reason::Ttl, "m", Net::OpenvibeOnly, None);
        assert_eq!(r.status, Status::Expired);
        let v = serde_json::to_value(&r).expect("serializes");
        assert_eq!(v["status"], "expired");
        assert_eq!(v["reason"], "ttl");
        assert_eq!(v["net"], "openvibe-only");
    }
}
