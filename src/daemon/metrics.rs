//! `GET /metrics`: counters and histograms in the Prometheus text format (0.0.4).

use crate::job::{JobResult, Status};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

const PREFIX: &str = "openvibe_skill_runner";
/// Seconds; wall and cpu of one job are at most 30 s.
const JOB_BUCKETS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0];
/// Seconds; what the runner spends around a job (inputs, sandbox setup and teardown).
const OVERHEAD_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];
/// Distinct (status, reason) pairs kept; reasons are codes, this only bounds a surprise.
const MAX_SERIES: usize = 256;

#[derive(Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, buckets: &[f64], v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; buckets.len()];
        }
        for (i, b) in buckets.iter().enumerate() {
            if v <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str, buckets: &[f64]) {
        let _ = writeln!(out, "# HELP {PREFIX}_{name} {help}");
        let _ = writeln!(out, "# TYPE {PREFIX}_{name} histogram");
        for (i, b) in buckets.iter().enumerate() {
            let c = self.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{PREFIX}_{name}_bucket{{le=\"{b}\"}} {c}");
        }
        let _ = writeln!(out, "{PREFIX}_{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{PREFIX}_{name}_sum {}", self.sum);
        let _ = writeln!(out, "{PREFIX}_{name}_count {}", self.count);
    }
}

#[derive(Default)]
struct Inner {
    jobs: BTreeMap<(String, String), u64>,
    rejected: BTreeMap<String, u64>,
    accepted: u64,
    wall: Histogram,
    cpu: Histogram,
    overhead: Histogram,
    http: BTreeMap<u16, u64>,
    forbidden: u64,
    turned_away: u64,
}

#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

/// Gauges read at scrape time.
pub struct Gauges {
    pub running: usize,
    pub queued: usize,
    pub max_jobs: usize,
    pub queue_len: usize,
    pub skills_on: bool,
    pub ready: bool,
    /// The input cache, when the engine runs.
    pub cache: Option<crate::inputs::CacheStats>,
    /// Finished jobs' results kept in memory because the journal would not take them.
    pub unjournaled: usize,
    /// The bytes of request bodies being read and parsed now, and their budget.
    pub body_bytes: usize,
    pub body_budget_bytes: usize,
    /// The warm pool, when the engine runs.
    pub warm: Option<super::pool::PoolInfo>,
}

fn label(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

impl Metrics {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn accepted(&self) {
        self.inner().accepted += 1;
    }

    /// One terminal result; `overhead_s` is the runner's time around a job that ran.
    pub fn ended(&self, r: &JobResult, ran: bool, overhead_s: Option<f64>) {
        let mut m = self.inner();
        let reason = label(r.reason_str().unwrap_or(""));
        let key = (r.status.as_str().to_string(), reason.clone());
        if m.jobs.len() < MAX_SERIES || m.jobs.contains_key(&key) {
            *m.jobs.entry(key).or_insert(0) += 1;
        }
        if r.status == Status::Rejected
            && (m.rejected.len() < MAX_SERIES || m.rejected.contains_key(&reason))
        {
            *m.rejected.entry(reason).or_insert(0) += 1;
        }
        if ran {
            m.wall.observe(JOB_BUCKETS, r.wall_ms as f64 / 1000.0);
            m.cpu.observe(JOB_BUCKETS, r.cpu_ms as f64 / 1000.0);
        }
        if let Some(o) = overhead_s {
            m.overhead.observe(OVERHEAD_BUCKETS, o);
        }
    }

    pub fn http(&self, code: u16) {
        *self.inner().http.entry(code).or_insert(0) += 1;
    }

    pub fn forbidden(&self) {
        self.inner().forbidden += 1;
    }

    /// An admitted caller's connection turned away because every connection slot was held.
    pub fn turned_away(&self) {
        self.inner().turned_away += 1;
    }

    pub fn render(&self, g: &Gauges) -> String {
        let m = self.inner();
        let mut out = String::with_capacity(4096);
        let gauge = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {PREFIX}_{name} {help}");
            let _ = writeln!(out, "# TYPE {PREFIX}_{name} gauge");
            let _ = writeln!(out, "{PREFIX}_{name} {v}");
        };
        gauge(
            &mut out,
            "jobs_running",
            "Jobs holding a slot now: running, or answered with their sandbox still being removed.",
            g.running as u64,
        );
        gauge(
            &mut out,
            "jobs_queued",
            "Jobs waiting for a slot.",
            g.queued as u64,
        );
        gauge(
            &mut out,
            "max_jobs",
            "Jobs run at once at most.",
            g.max_jobs as u64,
        );
        gauge(
            &mut out,
            "queue_len",
            "Jobs waiting at most.",
            g.queue_len as u64,
        );
        gauge(
            &mut out,
            "skills_on",
            "1 while the runner's artifact is in worker.functions.",
            g.skills_on as u64,
        );
        gauge(
            &mut out,
            "ready",
            "1 when every sandbox layer is there, the journal takes writes and jobs can run.",
            g.ready as u64,
        );
        if let Some(c) = g.cache {
            gauge(
                &mut out,
                "input_cache_bytes",
                "Bytes the input cache holds (in 4 KiB blocks, as its bound counts them).",
                c.bytes,
            );
            gauge(
                &mut out,
                "input_cache_max_bytes",
                "The input cache's bound (runner.cache_max_bytes).",
                c.max_bytes,
            );
            let _ = writeln!(
                out,
                "# HELP {PREFIX}_input_cache_evictions_total Inputs removed from the cache to keep its bound, least recently used first."
            );
            let _ = writeln!(out, "# TYPE {PREFIX}_input_cache_evictions_total counter");
            let _ = writeln!(out, "{PREFIX}_input_cache_evictions_total {}", c.evictions);
        }
        if let Some(w) = &g.warm {
            gauge(
                &mut out,
                "warm_sandboxes_ready",
                "Warm sandboxes waiting for a job (never counted in max_jobs or the queue).",
                w.ready as u64,
            );
            gauge(
                &mut out,
                "warm_sandboxes_starting",
                "Warm sandboxes being made now.",
                w.starting as u64,
            );
            gauge(
                &mut out,
                "warm_sandboxes_stopping",
                "Warm sandboxes out of the pool and being torn down.",
                w.stopping as u64,
            );
            gauge(
                &mut out,
                "warm_memory_bytes",
                "Memory the waiting warm sandboxes hold (their cgroups' usage).",
                w.memory_bytes,
            );
            let counter = |out: &mut String, name: &str, help: &str, v: u64| {
                let _ = writeln!(out, "# HELP {PREFIX}_{name} {help}");
                let _ = writeln!(out, "# TYPE {PREFIX}_{name} counter");
                let _ = writeln!(out, "{PREFIX}_{name} {v}");
            };
            counter(
                &mut out,
                "warm_hits_total",
                "Jobs handed to a warm sandbox of their shape.",
                w.hits,
            );
            counter(
                &mut out,
                "warm_misses_total",
                "Jobs of net deny that found no warm sandbox of their shape and ran cold.",
                w.misses,
            );
            counter(&mut out, "warm_made_total", "Warm sandboxes made.", w.made);
            counter(
                &mut out,
                "warm_failed_total",
                "Warm sandboxes that could not be made.",
                w.failed,
            );
            counter(
                &mut out,
                "warm_discarded_total",
                "Warm sandboxes torn down unused: too old, died waiting, skills off, a configuration change, shutdown.",
                w.discarded,
            );
            counter(
                &mut out,
                "warm_hand_overs_failed_total",
                "Warm sandboxes a job took that failed at the hand-over; the job ran cold.",
                w.hand_overs_failed,
            );
        }
        gauge(
            &mut out,
            "results_unjournaled",
            "Finished jobs whose result the journal has not taken yet (kept in memory, shown to nobody, tried again).",
            g.unjournaled as u64,
        );
        gauge(
            &mut out,
            "request_body_bytes",
            "Bytes of request bodies being read and parsed now (past the budget a job is answered 503 busy).",
            g.body_bytes as u64,
        );
        gauge(
            &mut out,
            "request_body_max_bytes",
            "The bytes request bodies may hold at once, over every connection.",
            g.body_budget_bytes as u64,
        );
        let _ = writeln!(
            out,
            "# HELP {PREFIX}_jobs_accepted_total Jobs accepted into the queue."
        );
        let _ = writeln!(out, "# TYPE {PREFIX}_jobs_accepted_total counter");
        let _ = writeln!(out, "{PREFIX}_jobs_accepted_total {}", m.accepted);
        let _ = writeln!(
            out,
            "# HELP {PREFIX}_jobs_total Jobs ended, by status and reason."
        );
        let _ = writeln!(out, "# TYPE {PREFIX}_jobs_total counter");
        for ((status, reason), n) in &m.jobs {
            let _ = writeln!(
                out,
                "{PREFIX}_jobs_total{{status=\"{status}\",reason=\"{reason}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP {PREFIX}_jobs_rejected_total Jobs rejected, by reason."
        );
        let _ = writeln!(out, "# TYPE {PREFIX}_jobs_rejected_total counter");
        for (reason, n) in &m.rejected {
            let _ = writeln!(
                out,
                "{PREFIX}_jobs_rejected_total{{reason=\"{reason}\"}} {n}"
            );
        }
        m.wall.render(
            &mut out,
            "job_wall_seconds",
            "Wall-clock time of jobs that ran.",
            JOB_BUCKETS,
        );
        m.cpu.render(
            &mut out,
            "job_cpu_seconds",
            "CPU time of jobs that ran (from their cgroup).",
            JOB_BUCKETS,
        );
        m.overhead.render(
            &mut out,
            "sandbox_overhead_seconds",
            "Time the runner spends around a job besides its run: inputs, sandbox setup and teardown.",
            OVERHEAD_BUCKETS,
        );
        let _ = writeln!(
            out,
            "# HELP {PREFIX}_http_responses_total HTTP responses, by status code."
        );
        let _ = writeln!(out, "# TYPE {PREFIX}_http_responses_total counter");
        for (code, n) in &m.http {
            let _ = writeln!(out, "{PREFIX}_http_responses_total{{code=\"{code}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP {PREFIX}_connections_forbidden_total Connections refused by peer credentials."
        );
        let _ = writeln!(out, "# TYPE {PREFIX}_connections_forbidden_total counter");
        let _ = writeln!(out, "{PREFIX}_connections_forbidden_total {}", m.forbidden);
        let _ = writeln!(
            out,
            "# HELP {PREFIX}_connections_turned_away_total Connections of admitted callers turned away (503 busy, or closed) while every connection slot was held."
        );
        let _ = writeln!(out, "# TYPE {PREFIX}_connections_turned_away_total counter");
        let _ = writeln!(
            out,
            "{PREFIX}_connections_turned_away_total {}",
            m.turned_away
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{Net, Reason};

    #[test]
    fn renders_counters_and_histograms() {
        let m = Metrics::default();
        let mut ok = JobResult::not_run("a", Reason::Exit, "m", Net::Deny, None);
        ok.status = Status::Ok;
        ok.reason = None;
        ok.wall_ms = 61;
        ok.cpu_ms = 48;
        m.ended(&ok, true, Some(0.02));
        let busy = JobResult::not_run("b", Reason::Busy, "m", Net::Deny, None);
        m.ended(&busy, false, None);
        m.http(200);
        let text = m.render(&Gauges {
            running: 1,
            queued: 2,
            max_jobs: 2,
            queue_len: 4,
            skills_on: true,
            ready: true,
            cache: Some(crate::inputs::CacheStats {
                bytes: 8192,
                evictions: 3,
                max_bytes: 1 << 20,
            }),
            unjournaled: 1,
            body_bytes: 4096,
            body_budget_bytes: 1 << 26,
            warm: Some(super::super::pool::PoolInfo {
                enabled: true,
                ready: 2,
                starting: 1,
                stopping: 3,
                max_age_ms: 600_000,
                shapes: Vec::new(),
                memory_bytes: 83_886_080,
                hits: 5,
                misses: 7,
                made: 8,
                failed: 0,
                discarded: 1,
                hand_overs_failed: 4,
            }),
        });
        assert!(text.contains("openvibe_skill_runner_jobs_total{status=\"ok\",reason=\"\"} 1"));
        assert!(text.contains("openvibe_skill_runner_warm_sandboxes_ready 2"));
        assert!(text.contains("openvibe_skill_runner_warm_sandboxes_stopping 3"));
        assert!(text.contains("openvibe_skill_runner_warm_memory_bytes 83886080"));
        assert!(text.contains("# TYPE openvibe_skill_runner_warm_hits_total counter"));
        assert!(text.contains("openvibe_skill_runner_warm_hits_total 5"));
        assert!(text.contains("openvibe_skill_runner_warm_misses_total 7"));
        assert!(text.contains("openvibe_skill_runner_warm_discarded_total 1"));
        assert!(text.contains("openvibe_skill_runner_warm_hand_overs_failed_total 4"));
        assert!(text.contains("openvibe_skill_runner_jobs_rejected_total{reason=\"busy\"} 1"));
        assert!(text.contains("openvibe_skill_runner_job_wall_seconds_bucket{le=\"0.1\"} 1"));
        assert!(text.contains("openvibe_skill_runner_job_wall_seconds_bucket{le=\"0.05\"} 0"));
        assert!(text.contains("openvibe_skill_runner_job_cpu_seconds_count 1"));
        assert!(text.contains("openvibe_skill_runner_jobs_queued 2"));
        assert!(text.contains("openvibe_skill_runner_results_unjournaled 1"));
        assert!(text.contains("openvibe_skill_runner_request_body_bytes 4096"));
        assert!(text.contains("openvibe_skill_runner_request_body_max_bytes 67108864"));
        assert!(text.contains("openvibe_skill_runner_http_responses_total{code=\"200\"} 1"));
        assert!(text.contains("openvibe_skill_runner_input_cache_bytes 8192"));
        assert!(text.contains("openvibe_skill_runner_input_cache_max_bytes 1048576"));
        assert!(text.contains("openvibe_skill_runner_input_cache_evictions_total 3"));
        for line in text.lines() {
            assert!(
                line.starts_with('#') || line.split(' ').count() == 2,
                "{line}"
            );
        }
    }
}
