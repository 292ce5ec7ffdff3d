//! The engine: one job in, one result out. The CLI and the daemon share it.
//!
//! validate -> inputs (verify, lay out) -> plan -> cgroup -> supervise -> classify ->
//! clean up. Every path out of `run` removes what the job made on the host.

use crate::assets;
use crate::cancel::Cancel;
use crate::config::Config;
use crate::egress::policy::EgressPolicy;
use crate::egress::proxy::{Egress, JobEgress};
use crate::inputs::{self, Cache, InputError};
use crate::job::{self, Bounds, JobResult, Net, Reason, ValidJob};
use crate::plan::{self, JobPaths, PlanInputs};
use crate::runtime::{self, Runtime};
use crate::sandbox::cgroup::{CgroupHost, CgroupLimits, JobCgroup};
use crate::sandbox::init::encode_plan;
use crate::sandbox::init_exe::InitExe;
use crate::sandbox::seccomp::{self, CompiledFilters, ValidPolicy};
use crate::sandbox::uids::{self, UidLease, UidPool};
use crate::sandbox::{landlock, Layers};
use crate::supervise;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub mod warm;
use warm::{Shape, WarmSource};

pub struct Engine {
    pub config: Config,
    pub runtime: Runtime,
    filters: Filters,
    egress: Egress,
    cgroups: CgroupHost,
    uids: UidPool,
    cache: Cache,
    media: Option<crate::media::Media>,
    jobs_dir: PathBuf,
    preload: Vec<u8>,
    /// The executable each job's init stage starts from.
    init: InitExe,
    bounds: Bounds,
    seq: AtomicU64,
    /// The kernel's landlock ABI, detected once at start; each job's plan targets it.
    landlock_abi: i32,
    /// How each job gets a time namespace, if it does ([`Layers::time_namespace`]).
    time_namespace: crate::plan::TimeNamespace,
    /// Test only ([`Engine::without_node_hardening`]): Node's own hardening flags are left out.
    compromised_node: bool,
    /// Warm sandboxes being removed after their job's answer ([`Engine::settled`]).
    removals: tokio_util::task::TaskTracker,
}

/// What is left to do of a job once its result is known: the removal of a warm sandbox,
/// which runs after the answer (Node may still be exiting when the preload reports the
/// tool's end). A cold job's removal is done before its result comes: nothing is left.
/// Whoever holds the job's slot awaits [`Removal::done`] before it frees the slot, so what
/// remains of a job still counts against `max_jobs`.
#[must_use = "a job's slot is free only once its sandbox is removed"]
pub struct Removal(Option<tokio::task::JoinHandle<()>>);

impl Removal {
    /// Nothing left to remove.
    pub fn none() -> Removal {
        Removal(None)
    }

    /// The removal `task` does.
    pub fn of(task: tokio::task::JoinHandle<()>) -> Removal {
        Removal(Some(task))
    }

    /// Waits until the sandbox is removed (or its removal failed, which it logged).
    pub async fn done(self) {
        if let Some(task) = self.0 {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "a warm sandbox's removal failed");
            }
        }
    }
}

/// Why the engine cannot run jobs on this host: each names the layer and what to change.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Layer(String),
}

fn layer(msg: impl std::fmt::Display) -> StartError {
    StartError::Layer(msg.to_string())
}

/// The seccomp policy, checked at start, and its programs, compiled for a net mode the
/// first time a job of that mode runs and kept: a CLI run compiles only its job's mode.
/// A compile error is kept too, and every job of that mode ends `internal` with it.
struct Filters {
    policy: ValidPolicy,
    /// Where the policy came from, for messages.
    source: String,
    by_net: HashMap<Net, OnceLock<Result<CompiledFilters, String>>>,
}

impl Filters {
    fn new(policy: ValidPolicy, source: String) -> Filters {
        let by_net = [Net::Deny, Net::OpenvibeOnly, Net::Public]
            .into_iter()
            .map(|net| (net, OnceLock::new()))
            .collect();
        Filters {
            policy,
            source,
            by_net,
        }
    }

    fn get(&self, net: Net) -> Result<&CompiledFilters, String> {
        let Some(slot) = self.by_net.get(&net) else {
            return Err(format!("no seccomp program for net mode {}", net.as_str()));
        };
        slot.get_or_init(|| {
            seccomp::compile(&self.policy, net)
                .map_err(|e| format!("seccomp policy ({}): {e}", self.source))
        })
        .as_ref()
        .map_err(Clone::clone)
    }
}

/// Makes the folder of job directories if it is missing (its parent, the state
/// directory, must exist); whether it had to. A link there is refused, not followed: job
/// folders would be made, and a dead runner's removed, wherever it leads.
pub fn make_jobs_dir(dir: &Path) -> std::io::Result<bool> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            if std::fs::symlink_metadata(dir)?.is_dir() {
                Ok(false)
            } else {
                Err(std::io::Error::other(format!(
                    "{} exists and is not a folder (a link is not followed): remove it, \
                     and the runner makes its own (to keep jobs on another disk, set \
                     runner.state_dir there)",
                    dir.display()
                )))
            }
        }
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("cannot make {}: {e}", dir.display()),
        )),
    }
}

/// The job in `text` under `bounds`, or its `rejected` result (under its id and `net` when
/// those could be read; `node` as the result shows it). The engine's door, and `run-job`'s
/// when no engine started (its `runner_unavailable` then names the job as the daemon's
/// does).
pub fn admit_text(
    text: &[u8],
    bounds: &Bounds,
    node: Option<&str>,
) -> Result<ValidJob, Box<JobResult>> {
    job::admit(text, bounds).map_err(|refusal| {
        Box::new(match refusal.head {
            Ok(head) => JobResult::rejected(&head.job_id, &refusal.rejection, head.net, node),
            Err(job::NotAJob::NotObject) => {
                JobResult::rejected("", &refusal.rejection, Net::Deny, node)
            }
            Err(job::NotAJob::NotJson(e)) => JobResult::not_run(
                "",
                Reason::InvalidJob,
                format!("the job is not JSON: {e}"),
                Net::Deny,
                node,
            ),
        })
    })
}

impl Engine {
    /// Checks every layer and loads everything a job needs; fails closed.
    pub fn start(config: Config) -> Result<Engine, StartError> {
        // A configuration made in code, not read from a file, is checked here too.
        if let Some(problem) = config.hooks_problem() {
            return Err(layer(problem));
        }
        let mut layers = Layers::probe();
        layers.pretend_missing(&config.runner.pretend_missing);
        if let Some(problem) = layers.first_problem() {
            return Err(layer(problem));
        }
        // Absolute, once: a sandbox's processes work from `/` (pid 1 and the tool set it
        // before the job's root is made), where a relative folder the runner was given
        // (`--state-dir state`) would name another one, or none.
        let state = std::path::absolute(&config.runner.state_dir).map_err(|e| {
            layer(format!(
                "cannot make the state directory {} an absolute path: {e}",
                config.runner.state_dir.display()
            ))
        })?;
        crate::state_dir::create(&state).map_err(|e| {
            layer(format!(
                "cannot create the state directory {}: {e}",
                state.display()
            ))
        })?;
        // Before anything is read from it or written in it.
        if let Some(problem) = crate::state_dir::problem(&state) {
            return Err(layer(problem));
        }
        let jobs_dir = state.join("jobs");
        make_jobs_dir(&jobs_dir).map_err(|e| {
            layer(format!(
                "cannot make the folder of job directories {}: {e}",
                jobs_dir.display()
            ))
        })?;
        let node = runtime::locate(config.runner.node.as_deref());
        let runtime = runtime::inspect(
            &node,
            config.runner.allow_node20,
            Some(&state.join("runtime.json")),
        )
        .map_err(layer)?;
        if let Some(gap) = runtime.hardening_gap() {
            tracing::warn!(node = %runtime.version, "{gap}");
        }
        let policy_file = assets::seccomp_policy(&config).map_err(layer)?;
        // Parsed and checked now, so a broken policy stops the start; compiled per net mode
        // when a job first needs it (Filters).
        let policy = policy_file.text().map_err(layer).and_then(|text| {
            seccomp::parse_policy(text)
                .map_err(|e| layer(format!("seccomp policy ({}): {e}", policy_file.source)))
        })?;
        let filters = Filters::new(policy, policy_file.source.to_string());
        let egress_file = assets::egress_policy(&config).map_err(layer)?;
        let egress_policy = egress_file.text().map_err(layer).and_then(|text| {
            EgressPolicy::from_toml_str(text)
                .map_err(|e| layer(format!("egress policy ({}): {e}", egress_file.source)))
        })?;
        let egress = Egress::new(egress_policy, &config.runner.dns_servers)
            .with_jobs_at_once(config.max_jobs());
        if let Some(problem) = egress.problem() {
            tracing::warn!(%problem, "jobs with net other than deny will fail until this is fixed");
        }
        let cgroups = CgroupHost::detect(crate::sandbox::cgroup_parent(&config).as_deref())
            .map_err(|e| layer(format!("cgroups: {e}")))?;
        if let Some(e) = cgroups.swap_problem() {
            return Err(layer(format!("cgroups: {e}")));
        }
        if cgroups.version() == crate::sandbox::cgroup::CgroupVersion::V2 {
            if let Some(refused) = crate::sandbox::cgroup::clone3_refused() {
                tracing::warn!(%refused, "{}", crate::sandbox::cgroup::v2_join(Some(refused)));
            }
        }
        let uids = UidPool::open(
            Path::new(uids::LOCK_DIR),
            config.runner.sandbox_uid_base,
            config.runner.sandbox_uid_count,
        )
        .map_err(layer)?;
        let preload = assets::preload(&config).map_err(layer)?.bytes.into_owned();
        let media = crate::media::Media::from_config(&config).map_err(layer)?;
        // The init executable beside this binary (or this binary), opened now: an upgrade
        // that replaces the file on disk does not reach this engine.
        let init = InitExe::locate().map_err(layer)?;
        tracing::debug!(init = %init.shown().display(), "the init stage's executable");
        let bounds = Bounds {
            max_input_json_bytes: config.runner.max_input_json_bytes,
        };
        Ok(Engine {
            cache: Cache::new(state.join("cache"), config.runner.cache_max_bytes),
            media,
            config,
            runtime,
            filters,
            egress,
            cgroups,
            uids,
            jobs_dir,
            preload,
            init,
            bounds,
            // From a random start: runners of the same pid (each pid 1 of its own pid
            // namespace, sharing a state directory) then do not name their jobs alike.
            seq: AtomicU64::new(u64::from(crate::sandbox::random_u32())),
            landlock_abi: layers.landlock_abi,
            time_namespace: layers.time_namespace,
            compromised_node: false,
            removals: tokio_util::task::TaskTracker::new(),
        })
    }

    /// Runs a static test program instead of Node under the very same plan (the native
    /// probe of the adversarial suite). No job can reach this: only code linking the crate.
    pub fn with_probe_executable(mut self, exe: PathBuf) -> Engine {
        self.runtime.node = exe;
        self.runtime.libraries.clear();
        self.runtime.loader = None;
        self
    }

    /// Runs Node as a compromised Node would run: without its permission model, without
    /// `--disallow-code-generation-from-strings` and without the preload, under the very
    /// same sandbox otherwise. It shows what the OS layers (the exec gate among them) hold
    /// on their own, with JavaScript. No job can reach this: only code linking the crate.
    pub fn without_node_hardening(mut self) -> Engine {
        self.compromised_node = true;
        self
    }

    /// Starts each init stage from `exe` (the runner binary or its init executable)
    /// instead of what [`InitExe::locate`] found: a test binary linking the crate is
    /// neither.
    pub fn with_runner_executable(mut self, exe: PathBuf) -> Engine {
        self.init = InitExe::at(exe);
        self
    }

    pub fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    pub fn cgroups(&self) -> &CgroupHost {
        &self.cgroups
    }

    pub fn jobs_dir(&self) -> &Path {
        &self.jobs_dir
    }

    pub fn egress(&self) -> &Egress {
        &self.egress
    }

    /// The input cache's size and evictions, for `/metrics`.
    pub fn cache_stats(&self) -> inputs::CacheStats {
        self.cache.stats()
    }

    fn node(&self) -> Option<&str> {
        Some(self.runtime.version.as_str())
    }

    /// Runs one job given as its JSON text, through the one door ([`job::admit`]).
    pub async fn run_raw(&self, text: &[u8], cancel: &Cancel) -> JobResult {
        match admit_text(text, &self.bounds, self.node()) {
            Ok(j) => self.run(j, cancel).await,
            Err(refused) => *refused,
        }
    }

    /// Runs a job built in this process (the `run` command's skill folder) under this
    /// engine's bounds: the builder does not know the configured bound on the input's size,
    /// so that rule is applied here, as the door would have.
    pub async fn run_built(&self, job: ValidJob, cancel: &Cancel) -> JobResult {
        if let Err(r) = job::check_input_size(job.input_json.len(), &self.bounds) {
            return JobResult::rejected(&job.job_id, &r, job.net, self.node());
        }
        self.run(job, cancel).await
    }

    /// Whether a sandbox of `shape` can be kept warm by this engine: net `deny` (a job with
    /// egress gets its namespace when it starts), the whole sandbox (no layer left out, no
    /// fault injected, Node's hardening on: the gate is the preload's).
    pub fn warmable(&self, shape: Shape) -> bool {
        shape.net == Net::Deny
            && !self.compromised_node
            && self.config.runner.omit_layers.is_empty()
            && self.config.runner.fault_inject.is_none()
    }

    /// Runs one valid job, in a warm sandbox from `warm` when one of its shape is there
    /// (taken only once its inputs are verified), cold otherwise. A warm sandbox that
    /// fails at the hand-over (none of the job's code has run) is discarded and the job
    /// runs cold (ends `internal` under the test hook `runner.warm_every_job`). The result comes with what is left to remove of the job: await it
    /// before the job's slot is given to another.
    pub async fn run_with(
        &self,
        job: ValidJob,
        cancel: &Cancel,
        warm: &dyn WarmSource,
    ) -> (JobResult, Removal) {
        let job = Arc::new(job);
        let files = match self.verified_files(&job, cancel).await {
            Ok(f) => f,
            Err(result) => return (*result, Removal::none()),
        };
        if let Some(cancelled) = self.cancelled_before_start(&job, cancel) {
            return (cancelled, Removal::none());
        }
        let shape = Shape::of(&job);
        if self.warmable(shape) {
            if let Some(sandbox) = warm.take(shape) {
                match self.run_warm(&job, &files, sandbox, cancel, warm).await {
                    Ok(ran) => return ran,
                    Err(why) => {
                        warm.hand_over_failed();
                        // Cancelled meanwhile: no cold sandbox for it either.
                        if let Some(cancelled) = self.cancelled_before_start(&job, cancel) {
                            return (cancelled, Removal::none());
                        }
                        if !warm.cold_after_a_failed_hand_over() {
                            let message = format!("the warm sandbox failed at the hand-over (runner.warm_every_job runs no job cold): {why}");
                            return (self.internal(&job, message), Removal::none());
                        }
                        tracing::warn!(job_id = %job.job_id, %why, "warm sandbox failed at the hand-over; the job runs cold");
                    }
                }
            }
        }
        (self.run_cold(&job, &files, cancel).await, Removal::none())
    }

    /// Waits until no warm sandbox is being removed, including any whose [`Removal`] was
    /// dropped unawaited (a job whose task failed): the daemon waits here before it exits.
    pub async fn settled(&self) {
        self.removals.close();
        self.removals.wait().await;
    }

    /// Runs one valid job to its terminal result, cold (or, with the test hook
    /// `runner.warm_every_job`, in a sandbox warmed for it first).
    pub async fn run(&self, job: ValidJob, cancel: &Cancel) -> JobResult {
        if crate::fault::HOOKS
            && self.config.runner.warm_every_job
            && self.warmable(Shape::of(&job))
        {
            return self.run_warmed_first(job, cancel).await;
        }
        let job = Arc::new(job);
        match self.verified_files(&job, cancel).await {
            Ok(files) => match self.cancelled_before_start(&job, cancel) {
                Some(cancelled) => cancelled,
                None => self.run_cold(&job, &files, cancel).await,
            },
            Err(result) => *result,
        }
    }

    /// The result of a job cancelled before its tool was started: it then never is, warm
    /// or cold, and no sandbox is made or taken for it.
    pub(super) fn cancelled_before_start(
        &self,
        job: &ValidJob,
        cancel: &Cancel,
    ) -> Option<JobResult> {
        let cause = cancel.cause()?;
        Some(JobResult::not_run(
            &job.job_id,
            cause.reason(),
            cause.message(false),
            job.net,
            self.node(),
        ))
    }

    /// The job's files, found in the cache or fetched where the media service has them,
    /// and verified; the job's result when they cannot be had (nothing runs). The cache's
    /// reads and writes (a file per input, and a write's `fsync`) run on blocking threads,
    /// not on the daemon's async workers. A cancel (or SIGTERM) while inputs are fetched
    /// ends the job at once, not after Media's timeout for each input.
    async fn verified_files(
        &self,
        job: &Arc<ValidJob>,
        cancel: &Cancel,
    ) -> Result<Vec<(String, Vec<u8>)>, Box<JobResult>> {
        let (j, cache) = (Arc::clone(job), self.cache.clone());
        let found = self
            .blocking(job, move || inputs::cached(&j, &cache))
            .await?;
        let found = match &self.media {
            Some(media) => {
                let fetched = tokio::select! {
                    biased;
                    cause = cancel.cancelled() => {
                        let message = cause.message(false);
                        return Err(Box::new(JobResult::not_run(
                            &job.job_id,
                            cause.reason(),
                            message,
                            job.net,
                            self.node(),
                        )));
                    }
                    fetched = media.fetch_missing(job, found) => fetched,
                };
                match fetched {
                    Ok(f) => f,
                    Err(e) => return Err(Box::new(self.input_failure(job, e))),
                }
            }
            None => found,
        };
        let (j, cache) = (Arc::clone(job), self.cache.clone());
        self.blocking(job, move || inputs::gather(&j, &cache, &found))
            .await?
            .map_err(|e| Box::new(self.input_failure(job, e)))
    }

    /// `work` on one of tokio's blocking threads; `job`'s `internal` result if it panicked.
    async fn blocking<T: Send + 'static>(
        &self,
        job: &ValidJob,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Box<JobResult>> {
        tokio::task::spawn_blocking(work).await.map_err(|e| {
            Box::new(self.internal(job, format!("the job's inputs could not be read: {e}")))
        })
    }

    /// A fresh name for a job's directory and cgroup: `<what>.<pid>.<n>`.
    fn unique(&self, what: &str) -> String {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        unique_name(what, std::process::id(), seq)
    }

    async fn run_cold(
        &self,
        job: &ValidJob,
        files: &[(String, Vec<u8>)],
        cancel: &Cancel,
    ) -> JobResult {
        let unique = self.unique(&job.job_id);
        // Held until the job's processes are gone and its cgroup removed (and kept if that
        // cannot be shown); it names the job before its directory and cgroup exist.
        let lease = match self.uids.lease(&unique) {
            Ok(l) => l,
            Err(e) => return self.internal(job, e),
        };
        let dir = match make_job_dir(&self.jobs_dir, &unique) {
            Ok(dir) => dir,
            Err(e) => return self.internal(job, format!("cannot create the job directory: {e}")),
        };
        self.run_in(job, files, &dir.0, &unique, lease, cancel)
            .await
    }

    async fn run_in(
        &self,
        job: &ValidJob,
        files: &[(String, Vec<u8>)],
        dir: &Path,
        unique: &str,
        lease: UidLease,
        cancel: &Cancel,
    ) -> JobResult {
        let paths = JobPaths {
            root: dir.join("root"),
        };
        if let Err(e) = std::fs::create_dir(&paths.root) {
            return self.internal(job, format!("cannot create the job directory: {e}"));
        }
        let uid = lease.uid();
        let omit = &self.config.runner.omit_layers;
        let cgroup = match self.create_cgroup(unique, job.mem_bytes).await {
            Ok(c) => c,
            Err(e) => return self.internal(job, format!("{e} (the job's)")),
        };
        let built = plan::build(PlanInputs {
            job,
            runtime: &self.runtime,
            paths: &paths,
            files,
            preload: &self.preload,
            seccomp: &|net| self.filters.get(net),
            cgroup_join: cgroup.join(),
            uid,
            egress_ports: &self.egress.policy().ports,
            existing: &|p: &Path| p.exists(),
            landlock_abi: self.landlock_abi,
            time_namespace: self.time_namespace,
            fault: self.config.runner.fault_inject,
            node_hardening: !self.compromised_node,
            omit,
            warm: false,
        });
        let plan = match built {
            Ok(mut p) => {
                p.hand_over_pause_ms = self.config.runner.hand_over_pause_ms;
                p
            }
            Err(e) => {
                remove_unused(cgroup, &job.job_id).await;
                return self.internal(job, e);
            }
        };
        let plan_bytes = match encode_plan(&plan) {
            Ok(b) => b,
            Err(e) => {
                remove_unused(cgroup, &job.job_id).await;
                return self.internal(job, format!("cannot encode the plan: {e}"));
            }
        };
        // A job with egress gets the namespace the runner serves; it is made last, right
        // before the tool starts, so the egress clock starts with the job.
        let egress: Option<JobEgress> = if plan.join_netns.is_none() {
            None
        } else {
            match self.egress.start(&job.job_id, job.net).await {
                Ok(e) => Some(e),
                Err(e) => {
                    remove_unused(cgroup, &job.job_id).await;
                    return self.internal(job, format!("cannot start the job's egress: {e}"));
                }
            }
        };
        // From here processes may run as the uid: it is let go only once they are gone.
        let lease = lease.keep_until_released();
        let outcome = supervise::run(
            self.init.exec_path(),
            plan_bytes,
            job.input_json.clone(),
            &cgroup,
            egress.as_ref().map(|e| &e.netns),
            Duration::from_millis(job.wall_ms),
            plan.start == plan::Start::Gated,
            cancel,
        )
        .await;
        let records = match egress {
            Some(e) => e.finish().await,
            None => Vec::new(),
        };
        let removed = cgroup.remove_blocking().await;
        if let Err(e) = &removed {
            tracing::error!(job_id = %job.job_id, error = %e, "job cgroup left behind");
        }
        // A run that failed, or a cgroup that could not be removed, may leave processes of
        // the job running as this uid: it stays taken (dropped, not released).
        if uid_free_after(&outcome, &removed) {
            lease.release();
        }
        match outcome {
            Ok(o) => self.result_of(job, &o, records, None),
            Err(e) => self.internal(job, e.to_string()),
        }
    }

    /// A job's (or a warm sandbox's) cgroup named `unique`, with the limits the plan gives
    /// `mem_bytes`; off the async workers, since creating writes a handful of cgroup files.
    async fn create_cgroup(&self, unique: &str, mem_bytes: u64) -> Result<JobCgroup, String> {
        let (mem_bytes, pids_max) = plan::cgroup_limits(
            mem_bytes,
            self.config.runner.pids_max,
            &self.config.runner.omit_layers,
        );
        let limits = CgroupLimits {
            mem_bytes,
            pids_max,
        };
        let (host, name) = (self.cgroups.clone(), unique.to_string());
        tokio::task::spawn_blocking(move || host.create_job(&name, &limits))
            .await
            .map_err(|e| format!("the thread creating the cgroup failed: {e}"))?
            .map_err(|e| format!("cannot create the cgroup: {e}"))
    }

    /// The result of a run that reached Node: `since`, for a warm sandbox, is the
    /// cgroup's CPU time at the hand-over, which the job's own does not include.
    fn result_of(
        &self,
        job: &ValidJob,
        outcome: &supervise::Outcome,
        records: Vec<job::EgressRecord>,
        cpu_before_ns: Option<u64>,
    ) -> JobResult {
        if outcome.exec_gate.refused > 0 {
            tracing::warn!(job_id = %job.job_id, refused = outcome.exec_gate.refused, node_started = outcome.exec_gate.continued, "exec attempts refused by the exec gate");
        }
        let v = supervise::classify(outcome, job.wall_ms, job.mem_bytes);
        JobResult {
            job_id: job.job_id.clone(),
            status: v.status,
            reason: v.reason,
            message: v.message,
            output: v.output,
            stderr: String::from_utf8_lossy(&outcome.stderr).into_owned(),
            stderr_truncated: outcome.stderr_truncated,
            exit_code: v.exit_code,
            signal: v.signal,
            wall_ms: outcome.wall.as_millis() as u64,
            cpu_ms: outcome
                .stats
                .cpu_ns
                .saturating_sub(cpu_before_ns.unwrap_or(0))
                / 1_000_000,
            mem_peak_bytes: outcome.stats.mem_peak_bytes,
            net: job.net,
            egress: records,
            runner: job::RUNNER.to_string(),
            node: self.node().map(str::to_string),
        }
    }

    fn internal(&self, job: &ValidJob, message: String) -> JobResult {
        tracing::error!(job_id = %job.job_id, %message, "internal failure");
        JobResult::not_run(&job.job_id, Reason::Internal, message, job.net, self.node())
    }

    fn input_failure(&self, job: &ValidJob, e: InputError) -> JobResult {
        let reason = match &e {
            InputError::Missing { .. } | InputError::Unavailable { .. } => Reason::InputMissing,
            InputError::Mismatch { .. } => Reason::Sha256Mismatch,
            InputError::Content(_) => Reason::InvalidJob,
            InputError::Io { .. } => Reason::Internal,
        };
        JobResult::not_run(&job.job_id, reason, e.to_string(), job.net, self.node())
    }
}

/// `<what>.<pid>.<seq>`: the name of a job's (or a warm sandbox's) directory and cgroup.
/// The longest, a 64-character `job_id` with the largest pid and sequence number, still
/// fits a cgroup's name.
fn unique_name(what: &str, pid: u32, seq: u64) -> String {
    format!("{what}.{pid}.{seq}")
}

/// Makes a cold job's directory `<jobs_dir>/<unique>` (and the jobs folder, which a cleaner
/// may have removed since the last job), and only then its guard: a folder already there
/// under that name (another runner's, of the same pid in another pid namespace) is an
/// error, and is not this job's to remove.
fn make_job_dir(jobs_dir: &Path, unique: &str) -> std::io::Result<JobDir> {
    if make_jobs_dir(jobs_dir)? {
        tracing::warn!(dir = %jobs_dir.display(), "the jobs folder was missing; made again");
    }
    JobDir::create(jobs_dir.join(unique))
}

/// A job's directory (a warm sandbox's too), removed when the job is done with it: also when its run
/// unwinds (a panic in the engine), which would skip a removal written after the run.
struct JobDir(PathBuf);

impl JobDir {
    /// Makes `dir`, which must not exist: one already there is another job's (or another
    /// runner's), left alone, and an error.
    fn create(dir: PathBuf) -> std::io::Result<JobDir> {
        std::fs::create_dir(&dir)?;
        Ok(JobDir(dir))
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        if let Err(e) = remove_job_dir(&self.0) {
            tracing::error!(dir = %self.0.display(), error = %e, "job directory left behind");
        }
    }
}

fn remove_job_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// Landlock's reach on this host, for `doctor` and `/v1/info`.
pub fn landlock_summary() -> (i32, Vec<&'static str>) {
    let abi = landlock::kernel_abi();
    (abi, crate::plan::ruleset::features(abi))
}

/// Whether a cold job's uid may go to the next job: only once its cgroup is removed (every
/// process in it killed, and none of the job's runs outside it), after a run that ended, or
/// one whose init stage never started (nothing ran as the uid). A run that failed after
/// that may have left processes it could not kill.
fn uid_free_after(
    outcome: &Result<supervise::Outcome, supervise::SuperviseError>,
    removed: &Result<(), crate::sandbox::cgroup::CgroupError>,
) -> bool {
    removed.is_ok()
        && match outcome {
            Ok(_) | Err(supervise::SuperviseError::Spawn(_)) => true,
            Err(supervise::SuperviseError::Kill(_)) => false,
        }
}

/// Removes the cgroup of a job (or warm sandbox) that failed before anything ran in it;
/// says so when it cannot.
pub(crate) async fn remove_unused(cgroup: JobCgroup, job_id: &str) {
    if let Err(e) = cgroup.remove_blocking().await {
        tracing::error!(job_id, error = %e, "the cgroup of a job that never started is left behind");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: &str = include_str!("../policies/seccomp.json");

    #[test]
    fn a_cold_jobs_uid_is_free_once_its_cgroup_is_gone_unless_a_kill_failed() {
        use supervise::{Outcome, SuperviseError};
        let gone = Ok(());
        let left = Err(crate::sandbox::cgroup::CgroupError::NoSwapLimit { path: "/x".into() });
        assert!(uid_free_after(&Ok(Outcome::default()), &gone));
        // The init stage never started: nothing ran as the uid.
        let spawn = Err(SuperviseError::Spawn("exec gate: EMFILE".into()));
        assert!(uid_free_after(&spawn, &gone));
        assert!(!uid_free_after(&spawn, &left));
        assert!(!uid_free_after(&Ok(Outcome::default()), &left));
        let kill = Err(SuperviseError::Kill("EBUSY".into()));
        assert!(!uid_free_after(&kill, &gone));
    }

    #[test]
    fn a_link_in_place_of_the_jobs_folder_is_refused_not_followed() {
        let tmp = tempfile::tempdir().expect("a temporary folder");
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).expect("a folder the link leads to");
        let jobs = tmp.path().join("jobs");
        std::os::unix::fs::symlink(&elsewhere, &jobs).expect("the link");
        let e = make_jobs_dir(&jobs).expect_err("a link is refused");
        assert!(e.to_string().contains("is not a folder"), "{e}");
        let e = make_job_dir(&jobs, "j.1.0")
            .err()
            .expect("no job folder through it");
        assert!(e.to_string().contains("is not a folder"), "{e}");
        assert_eq!(
            std::fs::read_dir(&elsewhere).expect("read").count(),
            0,
            "nothing made where the link leads"
        );
        // The state directory's own folder: made, then found.
        std::fs::remove_file(&jobs).expect("the link removed");
        assert!(make_jobs_dir(&jobs).expect("made"));
        assert!(!make_jobs_dir(&jobs).expect("found"));
    }

    #[test]
    fn a_job_directory_already_there_is_not_this_jobs_to_remove() {
        let tmp = tempfile::tempdir().expect("a temporary folder");
        let jobs = tmp.path().join("jobs");
        let theirs = jobs.join("j.1.0");
        std::fs::create_dir_all(&theirs).expect("another runner's job folder");
        std::fs::write(theirs.join("marker"), "").expect("its file");
        let e = make_job_dir(&jobs, "j.1.0")
            .err()
            .expect("the name is taken");
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(
            theirs.join("marker").exists(),
            "the other folder is untouched"
        );
        // One of its own is made (the jobs folder with it) and removed with its guard.
        std::fs::remove_dir_all(&jobs).expect("the jobs folder removed");
        let ours = make_job_dir(&jobs, "j.1.1").expect("made");
        assert!(ours.0.is_dir());
        let path = ours.0.clone();
        drop(ours);
        assert!(!path.exists());
        // A second guard for a name taken is an error, and leaves the folder to its own.
        let first = JobDir::create(jobs.join("w.1.2")).expect("made");
        let e = JobDir::create(first.0.clone())
            .err()
            .expect("the name is taken");
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(
            first.0.is_dir(),
            "a folder already there is not the guard's"
        );
    }

    #[test]
    fn a_job_directory_goes_when_its_run_unwinds() {
        let tmp = tempfile::tempdir().expect("a temporary folder");
        let dir = tmp.path().join("j.1.0");
        std::fs::create_dir_all(dir.join("root/skill")).expect("the job's folders");
        let path = dir.clone();
        let unwound = std::panic::catch_unwind(move || {
            let _dir = JobDir(path);
            panic!("a bug in the engine");
        });
        assert!(unwound.is_err());
        assert!(
            !dir.exists(),
            "the job's directory is removed on the way out"
        );
    }

    #[test]
    fn the_longest_unique_name_fits_a_cgroup_name() {
        let id = "a".repeat(job::MAX_JOB_ID_LEN);
        assert!(job::valid_job_id(&id));
        let name = unique_name(&id, u32::MAX, u64::MAX);
        assert!(
            name.len() <= crate::sandbox::cgroup::MAX_NAME_LEN,
            "{} bytes: {name}",
            name.len()
        );
    }

    fn filters(text: &str) -> Filters {
        let policy = seccomp::parse_policy(text).unwrap_or_else(|e| panic!("policy: {e}"));
        Filters::new(policy, "/p/seccomp.json".to_owned())
    }

    #[test]
    fn filters_compile_per_net_mode_on_first_use_and_are_kept() {
        let f = filters(SHIPPED);
        assert!(f.by_net.values().all(|slot| slot.get().is_none()));
        let first = f.get(Net::Deny).map(|c| c as *const CompiledFilters);
        assert!(first.is_ok(), "{first:?}");
        assert_eq!(f.get(Net::Deny).map(|c| c as *const _), first, "kept");
        assert!(f.by_net[&Net::OpenvibeOnly].get().is_none());
        assert!(f.by_net[&Net::Public].get().is_none());
        assert_eq!(
            f.get(Net::Public).ok(),
            seccomp::compile(&f.policy, Net::Public).ok().as_ref()
        );
    }

    /// A policy that passes every check but is too large for one classic-BPF program: the
    /// engine starts, and each job of the mode fails with the compiler's reason.
    #[test]
    fn a_policy_that_does_not_compile_fails_every_job_of_its_mode() {
        let groups: Vec<String> = (0..1200)
            .map(|i| {
                format!(
                    r#"{{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{{"index":0,"value":{i},"op":"SCMP_CMP_EQ"}}]}}"#
                )
            })
            .collect();
        let text = format!(
            r#"{{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86_64"],"syscalls":[{}]}}"#,
            groups.join(",")
        );
        let f = filters(&text);
        for _ in 0..2 {
            let err = f.get(Net::Deny).err().unwrap_or_default();
            assert!(
                err.contains("/p/seccomp.json") && err.contains("compiling the seccomp"),
                "{err}"
            );
        }
    }
}
