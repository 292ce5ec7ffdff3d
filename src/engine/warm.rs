//! Warm sandboxes: the init stage run ahead of a job, up to Node started with the
//! contract's flags and the preload, waiting at the preload's gate; a job of the same
//! shape takes one, its verified files are laid into `/skill` by the job's pid 1, and the
//! gate opens.
//!
//! The engine makes, hands over and discards warm sandboxes; the daemon's pool decides
//! how many of which shape to keep (`daemon::pool`). A CLI run never warms anything.
//!
//! Used once: a warm sandbox serves at most one job and is then torn down like any job's.
//! Nothing of the job is in it before the hand-over (no file, no input), so nothing of a
//! tool runs while it waits; the only code running is Node's start and the preload.

use super::{Engine, JobDir, Removal};
use crate::cancel::Cancel;
use crate::job::{JobResult, Net, ValidJob};
use crate::plan::{self, HandOver, JobPaths, PlanFile, PlanInputs};
use crate::sandbox::cgroup::JobCgroup;
use crate::sandbox::init::{encode_message, encode_plan};
use crate::sandbox::uids::KeptUid;
use crate::supervise::{self, Started};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a warm sandbox is made for: a job of exactly this shape can use it (the runtime is
/// the engine's own, so it is not part of the shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Shape {
    pub net: Net,
    pub mem_bytes: u64,
}

impl Shape {
    pub fn of(job: &ValidJob) -> Shape {
        Shape {
            net: job.net,
            mem_bytes: job.mem_bytes,
        }
    }

    /// The ADR's defaults: `deny`, 134217728 bytes.
    pub fn default_job() -> Shape {
        Shape {
            net: Net::Deny,
            mem_bytes: crate::job::MEM_BYTES_DEFAULT,
        }
    }
}

/// One sandbox warmed for `shape`, used by at most one job, then torn down like any
/// job's. Dropping it without [`WarmSandbox::discard`] (a panic, a task cancelled) still
/// kills its processes (the init stage is killed on drop, and the job's cgroup kills the
/// rest when dropped) and removes its directory, but keeps its uid taken: discard it.
pub struct WarmSandbox {
    shape: Shape,
    /// When it was made, on [`since_boot`]'s clock.
    born: Option<Duration>,
    started: Started,
    cgroup: JobCgroup,
    /// Removed when dropped (its cgroup's removal, and the kill with it, may still run on a
    /// blocking thread then: the folder holds only the empty mount point of a root that
    /// lives in the sandbox's own mount namespace).
    dir: JobDir,
    /// Released once its processes are shown gone; kept otherwise.
    lease: KeptUid,
    /// Its root's size without the job's files (a cold job's root is this plus them).
    root_bytes: u64,
}

impl WarmSandbox {
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// How long it has waited since it was made, the host's suspends included: a tool's
    /// own clocks (the wall clock, `/proc/uptime`) count them, so `max_age_ms` must too.
    pub fn age(&self) -> Duration {
        match (self.born, since_boot()) {
            (Some(born), Some(now)) => now.saturating_sub(born),
            // Never on Linux: a sandbox whose age cannot be told is as old as can be
            // (discarded, never handed out).
            _ => Duration::MAX,
        }
    }

    /// Whether it can still serve a job: its init stage runs and reported no end.
    pub fn is_alive(&mut self) -> bool {
        self.started.is_alive()
    }

    /// Whether Node has started with every layer applied and waits at its gate.
    pub fn is_ready(&mut self) -> bool {
        self.started.is_ready()
    }

    /// Its cgroup's directories (one per hierarchy): for tests and the operator's eyes.
    pub fn cgroup_paths(&self) -> &[PathBuf] {
        self.cgroup.paths()
    }

    /// What it holds in memory now (its cgroup's current usage).
    pub fn memory_bytes(&self) -> u64 {
        self.cgroup.memory_now()
    }

    /// Kills its processes and removes its cgroup and directory.
    pub async fn discard(self) {
        let WarmSandbox {
            started,
            cgroup,
            dir,
            lease,
            ..
        } = self;
        let stopped = started.stop(&cgroup).await;
        let removed = cgroup.remove_blocking().await;
        match stopped
            .map_err(|e| e.to_string())
            .and(removed.map_err(|e| e.to_string()))
        {
            Ok(()) => lease.release(),
            Err(e) => {
                // Dropped unreleased: its uid stays taken.
                tracing::error!(error = %e, "a warm sandbox's processes may still run; its uid stays taken");
            }
        }
        drop(dir);
    }
}

/// Where the engine takes a warm sandbox for a job whose inputs are verified: the daemon's
/// pool. `None`: the job runs cold.
pub trait WarmSource: Send + Sync {
    fn take(&self, shape: Shape) -> Option<WarmSandbox>;

    /// Whether a job whose warm sandbox failed at the hand-over (none of its code ran)
    /// runs cold: the pool's, yes. The test hook's, no: a run meant to prove the warm path
    /// must not pass cold.
    fn cold_after_a_failed_hand_over(&self) -> bool {
        true
    }

    /// The sandbox [`WarmSource::take`] gave took the job's files; its tool starts now.
    fn handed_over(&self) {}

    /// The sandbox [`WarmSource::take`] gave failed at the hand-over: it served no job.
    fn hand_over_failed(&self) {}
}

/// No warm sandboxes: every job runs cold.
pub struct NoWarm;

impl WarmSource for NoWarm {
    fn take(&self, _shape: Shape) -> Option<WarmSandbox> {
        None
    }
}

/// One sandbox for one job (the test hook `runner.warm_every_job`).
struct OneShot(std::sync::Mutex<Option<WarmSandbox>>);

impl WarmSource for OneShot {
    fn take(&self, shape: Shape) -> Option<WarmSandbox> {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match held.as_ref() {
            Some(s) if s.shape() == shape => held.take(),
            _ => None,
        }
    }

    fn cold_after_a_failed_hand_over(&self) -> bool {
        false
    }
}

/// The name part of this process's warm sandboxes: `warm-<8 hex digits>`, drawn once, so
/// two runners whose pids are alike (each pid 1 of its own namespace) never pick the same
/// cgroup; the runner's pid and a sequence number follow it (`Engine::unique`).
pub fn warm_name() -> String {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| format!("warm-{:08x}", crate::sandbox::random_u32()))
        .clone()
}

/// The job a warm sandbox's plan is made for: its shape, no files, no entry yet.
fn shape_job(shape: Shape, id: &str) -> ValidJob {
    ValidJob {
        job_id: id.to_string(),
        subject: None,
        project: None,
        tool: String::new(),
        entry: String::new(),
        input_json: Vec::new(),
        inputs: Vec::new(),
        net: shape.net,
        wall_ms: 0,
        mem_bytes: shape.mem_bytes,
        ttl_ms: 0,
    }
}

fn cannot_create_dir(e: std::io::Error) -> String {
    format!("cannot create the warm sandbox's directory: {e}")
}

impl Engine {
    /// Makes one warm sandbox of `shape`: cgroup, namespaces, root, every layer, Node
    /// started with the contract's flags and the preload, waiting at its gate. Its
    /// processes start at a low CPU priority (the tool gets the usual one at the
    /// hand-over); it returns once Node is started and about to wait, or with why not.
    pub async fn warm_up(&self, shape: Shape) -> Result<WarmSandbox, String> {
        let unique = self.unique(&warm_name());
        self.warm_up_as(shape, unique).await
    }

    /// [`Self::warm_up`] under a name the caller gives (a test's: the engine draws its
    /// names at random). It weakens nothing: a name already taken fails the warm-up.
    #[doc(hidden)]
    pub async fn warm_up_named(&self, shape: Shape, unique: &str) -> Result<WarmSandbox, String> {
        self.warm_up_as(shape, unique.to_string()).await
    }

    /// [`Engine::warm_up`] under the name `unique` (the job directory's and the cgroup's).
    async fn warm_up_as(&self, shape: Shape, unique: String) -> Result<WarmSandbox, String> {
        if !self.warmable(shape) {
            return Err(format!(
                "no warm sandbox for net {} (only deny), or with a layer left out",
                shape.net.as_str()
            ));
        }
        // The lease names the sandbox before its directory and cgroup exist.
        let lease = self.uids.lease(&unique)?;
        // The jobs folder is not made here: a missing one is for the daemon's check to
        // make again and report, and the pool tries again later. A folder already there
        // under this name is not this sandbox's: an error, left alone.
        let dir = JobDir::create(self.jobs_dir.join(&unique)).map_err(cannot_create_dir)?;
        // Made: the sandbox holds the folder's guard. Not made: the guard removes it.
        self.warm_up_in(shape, &unique, dir, lease).await
    }

    async fn warm_up_in(
        &self,
        shape: Shape,
        unique: &str,
        dir: JobDir,
        lease: crate::sandbox::uids::UidLease,
    ) -> Result<WarmSandbox, String> {
        let paths = JobPaths {
            root: dir.0.join("root"),
        };
        std::fs::create_dir(&paths.root).map_err(cannot_create_dir)?;
        let omit = &self.config.runner.omit_layers;
        let cgroup = self
            .create_cgroup(unique, shape.mem_bytes)
            .await
            .map_err(|e| format!("{e} (a warm sandbox's)"))?;
        let job = shape_job(shape, unique);
        let built = plan::build(PlanInputs {
            job: &job,
            runtime: &self.runtime,
            paths: &paths,
            files: &[],
            preload: &self.preload,
            seccomp: &|net| self.filters.get(net),
            cgroup_join: cgroup.join(),
            uid: lease.uid(),
            egress_ports: &self.egress.policy().ports,
            existing: &|p: &Path| p.exists(),
            landlock_abi: self.landlock_abi,
            time_namespace: self.time_namespace,
            fault: self.config.runner.fault_inject,
            node_hardening: !self.compromised_node,
            omit,
            warm: true,
        })
        .and_then(|mut plan| {
            plan.hand_over_pause_ms = self.config.runner.hand_over_pause_ms;
            let bytes = encode_plan(&plan).map_err(|e| format!("cannot encode the plan: {e}"))?;
            Ok((plan.root_bytes, bytes))
        });
        let (root_bytes, plan_bytes) = match built {
            Ok(b) => b,
            Err(e) => {
                super::remove_unused(cgroup, unique).await;
                return Err(e);
            }
        };
        let started = match supervise::start(self.init.exec_path(), plan_bytes, None, true, true) {
            Ok(started) => started,
            Err(e) => {
                super::remove_unused(cgroup, unique).await;
                return Err(e.to_string());
            }
        };
        let mut sandbox = WarmSandbox {
            shape,
            born: since_boot(),
            started,
            cgroup,
            dir,
            lease: lease.keep_until_released(),
            root_bytes,
        };
        // One start at a time really is one: the pool's next begins once this one waits.
        match sandbox.started.ready().await {
            // Its age counts from its start, as the job's own clocks in it do (its time
            // namespace began then): `max_age_ms` bounds what they can tell.
            Ok(()) => Ok(sandbox),
            Err(e) => {
                let reports = sandbox.started.setup_failure();
                sandbox.discard().await;
                Err(format!("the warm sandbox did not start: {e}{reports}"))
            }
        }
    }

    /// The test hook `runner.warm_every_job`: warms a sandbox of the job's shape, then
    /// runs the job through it as the daemon's pool would. A sandbox that cannot be made
    /// fails the job (the hostile suites run this way must not pass cold).
    pub(super) async fn run_warmed_first(&self, job: ValidJob, cancel: &Cancel) -> JobResult {
        // Named for its job, as a cold job's cgroup is.
        let unique = self.unique(&job.job_id);
        let sandbox = match self.warm_up_as(Shape::of(&job), unique).await {
            Ok(s) => s,
            Err(e) => return self.internal(&job, format!("runner.warm_every_job: {e}")),
        };
        let source = OneShot(std::sync::Mutex::new(Some(sandbox)));
        let (result, removal) = self.run_with(job, cancel, &source).await;
        let left = source.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(unused) = left {
            unused.discard().await;
        }
        // As a cold run does, it returns once nothing of the job is left.
        removal.done().await;
        result
    }

    /// Runs `job` in `sandbox`: the hand-over, then the run as a cold job's. The result
    /// comes at the tool's end, with the sandbox's removal still running. An error means
    /// the hand-over failed before any of the job's code ran (the sandbox is discarded;
    /// the caller runs the job cold).
    pub(super) async fn run_warm(
        &self,
        job: &ValidJob,
        files: &[(String, Vec<u8>)],
        sandbox: WarmSandbox,
        cancel: &Cancel,
        source: &dyn WarmSource,
    ) -> Result<(JobResult, Removal), String> {
        // As a cold job does: a cleaner may have removed the jobs folder since the last job
        // (the sandbox's own folder may be gone with it; its root is in its own namespace).
        match super::make_jobs_dir(&self.jobs_dir) {
            Ok(true) => {
                tracing::warn!(dir = %self.jobs_dir.display(), "the jobs folder was missing; made again")
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "cannot make the jobs folder again"),
        }
        let payload: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
        let hand_over = HandOver {
            skill_files: files
                .iter()
                .map(|(name, bytes)| PlanFile {
                    name: name.clone(),
                    bytes: bytes.clone(),
                })
                .collect(),
            entry: job.entry.clone(),
            root_bytes: sandbox.root_bytes + payload,
            nice: crate::supervise::runner_nice(),
        };
        let message = match encode_message(&hand_over) {
            Ok(m) => m,
            Err(e) => {
                sandbox.discard().await;
                return Err(format!("cannot encode the hand-over: {e}"));
            }
        };
        let mut sandbox = sandbox;
        let began = Instant::now();
        // A cancel ends the wait at once (the tool waits at its gate whatever pid 1 did).
        let handed = tokio::select! {
            biased;
            _ = cancel.cancelled() => Ok(()),
            handed = sandbox.started.hand_over(message) => handed,
        };
        if let Err(e) = handed {
            sandbox.discard().await;
            return Err(e);
        }
        // Cancelled meanwhile: the go is never given, the tool never starts.
        if let Some(cancelled) = self.cancelled_before_start(job, cancel) {
            sandbox.discard().await;
            return Ok((cancelled, Removal::none()));
        }
        // The cgroup's limit flags count over its life: a sandbox whose start or hand-over
        // already reached a limit would have its job judged by that (a tool that exits 1
        // ended `limit` rather than `error`). Its tool has not started (no go byte): the
        // job runs cold instead.
        let before = sandbox.cgroup.stats();
        if before.limit_reached() {
            sandbox.discard().await;
            return Err(format!(
                "the warm sandbox reached a limit of its cgroup before its job started \
                 ({before:?})"
            ));
        }
        // A hit, told now rather than at the job's end: the job runs in it from here.
        source.handed_over();
        let WarmSandbox {
            started,
            cgroup,
            dir,
            lease,
            ..
        } = sandbox;
        tracing::info!(job_id = %job.job_id, sandbox = cgroup.name(), hand_over_us = began.elapsed().as_micros() as u64, "job handed to a warm sandbox");
        let mut mark = cgroup.mark_hand_over();
        let since = Instant::now();
        let finished = started
            .finish(
                job.input_json.clone(),
                true,
                since,
                Duration::from_millis(job.wall_ms),
                &cgroup,
                cancel,
            )
            .await;
        let peak = mark.peak_since();
        let ran = since.elapsed();
        let (result, remains) = match finished {
            Ok((mut outcome, remains)) => {
                if let Some(peak) = peak {
                    outcome.stats.mem_peak_bytes = peak;
                }
                let result = self.result_of(job, &outcome, Vec::new(), Some(mark.cpu_ns));
                (result, Some(remains))
            }
            Err(e) => (self.internal(job, e.to_string()), None),
        };
        // The sandbox is removed after the answer: when the preload reported the tool's
        // end, Node may still be exiting. Its uid stays taken until it is gone, and the
        // job's slot until the removal is done (the caller awaits it). Its own task on the
        // engine's tracker: it runs to its end even if nobody awaits it.
        let job_id = job.job_id.clone();
        let removal = self.removals.spawn(async move {
            // A run that failed could not kill its processes: they may still run.
            let mut gone = remains.is_some();
            if let Some(remains) = remains {
                if let Err(e) = remains.settle(&cgroup).await {
                    tracing::error!(job_id = %job_id, error = %e, "job processes may still run");
                    gone = false;
                }
            }
            let removed = cgroup.remove_blocking().await;
            tracing::debug!(job_id = %job_id, run_us = ran.as_micros() as u64, removal_us = (since.elapsed() - ran).as_micros() as u64, "warm job's run and removal");
            if let Err(e) = &removed {
                tracing::error!(job_id = %job_id, error = %e, "job cgroup left behind");
            }
            if gone && removed.is_ok() {
                lease.release();
            } // else its processes may still run: dropped unreleased, its uid stays taken.
            drop(dir);
        });
        Ok((result, Removal::of(removal)))
    }
}

/// The time since the host booted, suspends included (`CLOCK_BOOTTIME`; `Instant` is
/// `CLOCK_MONOTONIC`, which stops while the host sleeps). Linux has had it since 2.6.39.
fn since_boot() -> Option<Duration> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).ok()?;
    Some(Duration::new(
        u64::try_from(t.tv_sec()).ok()?,
        u32::try_from(t.tv_nsec()).ok()?,
    ))
}
