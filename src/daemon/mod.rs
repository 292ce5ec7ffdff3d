//! The daemon (`serve`) and the `skills` switch it obeys.
//!
//! One process: an HTTP/1.1 API on a unix socket (see [`http`]), the jobs it admits (see
//! [`jobs`]), their journal (see [`journal`]), and the life cycle around them: recovery of
//! an earlier run's leftovers at start, configuration reloads (SIGHUP, or the file's
//! change, polled every second), a check every second that the journal file and the jobs
//! folder are still there (see [`jobs::Jobs::check_state`]), retention pruning, and a
//! graceful stop on SIGTERM.

pub mod admit;
pub mod body;
pub mod http;
pub mod jobs;
pub mod journal;
pub mod metrics;
pub mod pool;
pub mod recovery;
pub mod runner;
pub mod skills;
pub mod socket;

use crate::config::{Config, DEFAULT_CONFIG_PATH};
use crate::engine::Engine;
use crate::job;
use jobs::{Jobs, Settings};
use journal::Journal;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The flags of `serve`; each overrides the configuration.
#[derive(Debug, Clone, Default)]
pub struct ServeArgs {
    pub config: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub socket: Option<PathBuf>,
    pub log_json: bool,
}

/// How many connections of admitted callers are served at once; more are answered 503.
const MAX_CONNECTIONS: usize = 512;
/// How often the journal is pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// How often the journal file and the jobs folder are checked (like the configuration).
const CHECK_STATE_EVERY: Duration = Duration::from_secs(1);

/// Reads the configuration for the daemon: a missing file is the default (off), so the
/// daemon can start before `skills on` writes it.
fn load_config(path: &Path) -> Result<Config, String> {
    match crate::config::read_text(path) {
        // The same test as the CLI's (the uid range, the test hooks, the pool, the input
        // bound): a bad file stops the start, and on reload keeps the previous
        // configuration, instead of a daemon whose engine then refuses every job.
        Ok(text) => {
            Config::usable(&text).map_err(|e| format!("configuration {}: {e}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
        Err(e) => Err(format!(
            "cannot read the configuration {}: {e}",
            path.display()
        )),
    }
}

/// The command line's settings over the file's; the state directory made absolute, in the
/// same way at the start and at each reload, which compares the two.
fn apply_overrides(config: &mut Config, args: &ServeArgs) {
    if let Some(d) = &args.state_dir {
        config.runner.state_dir = d.clone();
    }
    config.runner.state_dir = crate::state_dir::settled(&config.runner.state_dir);
    if let Some(s) = &args.socket {
        config.daemon.socket = s.clone();
    }
}

fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("OPENVIBE_SKILL_RUNNER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal as _;
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter);
    if json {
        builder.json().flatten_event(true).init();
    } else {
        builder.init();
    }
}

/// `serve`: runs until SIGTERM or SIGINT; exit 0 after a graceful stop.
pub fn serve_cli(args: ServeArgs) -> ExitCode {
    let config_path = args
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_PATH));
    // Taken before the file is read: a change made between the two (a `skills on` right
    // after a restart) then differs from it and is picked up by the reload loop.
    let loaded = file_stamp(&config_path);
    let mut config = match load_config(&config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("openvibe-skill-runner: {e}");
            return ExitCode::from(2);
        }
    };
    apply_overrides(&mut config, &args);
    init_logging(args.log_json || config.daemon.log_json);
    raise_open_files();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ovsr-daemon")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return ExitCode::from(70);
        }
    };
    let r = rt.block_on(serve(config_path, loaded, args, config));
    rt.shutdown_timeout(Duration::from_millis(500));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("openvibe-skill-runner: {e}");
            ExitCode::from(1)
        }
    }
}

/// Raises the soft limit on open files to the hard one. A job with egress holds a few
/// hundred descriptors in the daemon (its proxied connections both ways, its DNS queries,
/// its listeners); started from a shell or `sudo` the soft limit is often 1024, which a few
/// such jobs would spend, starving the others and the API socket. (The unit sets 65536.)
fn raise_open_files() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => tracing::debug!(from = soft, to = hard, "open files limit raised"),
            Err(e) => {
                tracing::warn!(soft, hard, error = %e, "cannot raise the open files limit")
            }
        },
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot read the open files limit"),
    }
}

/// The signals the daemon handles, registered first thing (a SIGHUP during start-up must
/// not end the process as its default action would).
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

fn signals() -> Result<Signals, String> {
    use tokio::signal::unix::{signal, SignalKind};
    let s = |k: SignalKind| signal(k).map_err(|e| format!("cannot handle signals: {e}"));
    Ok(Signals {
        term: s(SignalKind::terminate())?,
        int: s(SignalKind::interrupt())?,
        hup: s(SignalKind::hangup())?,
    })
}

async fn serve(
    config_path: PathBuf,
    loaded: Option<Stamp>,
    args: ServeArgs,
    config: Config,
) -> Result<(), String> {
    let Signals {
        mut term,
        mut int,
        hup,
    } = signals()?;
    let state = config.runner.state_dir.clone();
    crate::state_dir::create(&state)
        .map_err(|e| format!("cannot create the state directory {}: {e}", state.display()))?;
    // Before the lock, the journal or anything else is opened in it.
    if let Some(problem) = crate::state_dir::problem(&state) {
        return Err(problem);
    }
    let _lock = recovery::lock_state_dir(&state)?;
    let journal_path = state.join(journal::FILE_NAME);
    let journal = Arc::new(Journal::open(&journal_path).map_err(|e| e.at_start(&journal_path))?);
    let (run_id, earlier_pids) = journal
        .begin_run(std::process::id())
        .map_err(|e| e.at_start(&journal_path))?;

    let (engine, problem) = match Engine::start(config.clone()) {
        Ok(e) => (Some(Arc::new(e)), None),
        Err(e) => {
            tracing::error!(problem = %e, "jobs cannot run on this host; serving, and every job ends internal runner_unavailable");
            (None, Some(e.to_string()))
        }
    };

    // What an earlier run left: its jobs' processes, cgroups, directories; then its journal.
    // Tried again in the background while it fails (`Cleaning::retry`, started below),
    // where jobs can run: without an engine there is nothing to protect, and the next start
    // tries again.
    let cleaning = Cleaning {
        host: engine.as_ref().map(|e| e.cgroups().clone()),
        config: config.clone(),
        jobs_dir: state.join("jobs"),
        journal: journal.clone(),
        run_id,
        busy: Default::default(),
    };
    let mut earlier = recovery::Earlier::at_start(earlier_pids);
    let left = match cleaning.sweep(&mut earlier).await {
        Ok(()) => None,
        Err(e) if cleaning.host.is_some() => {
            tracing::error!(error = %e, "leftovers of an earlier run remain; trying again while serving");
            Some(earlier)
        }
        Err(e) => {
            tracing::error!(error = %e, "leftovers of an earlier run remain");
            None
        }
    };
    let recovered = journal
        .recover(journal::restarted)
        .map_err(|e| e.at_start(&journal_path))?;
    for r in &recovered {
        tracing::warn!(job_id = %r.job_id, status = "internal", reason = "runner_restarted", "job ended");
    }

    let (listener, socket_file) =
        socket::bind(&config.daemon.socket, config.daemon.socket_group.as_deref())?;
    if let Some(warning) = config.unreachable_callers(config.daemon.socket_group.is_some()) {
        tracing::warn!("{warning}");
    }
    let jobs = Arc::new(Jobs::new(engine, problem, &config, journal.clone(), run_id));
    for r in &recovered {
        jobs.metrics.ended(r, false, None);
    }
    jobs.prune().await;
    if let Some(pool) = jobs.pool() {
        pool.start();
    }
    let sweeping = cleaning.busy.clone();
    let retry = left.map(|earlier| tokio::spawn(cleaning.retry(earlier)));
    tracing::info!(
        socket = %config.daemon.socket.display(),
        state = %state.display(),
        config = %config_path.display(),
        skills = if config.skills_on() { "on" } else { "off" },
        max_jobs = jobs.max_jobs,
        queue_len = jobs.queue_len,
        "serving"
    );

    let stop_accepting = CancellationToken::new();
    let connections_done = CancellationToken::new();
    let conns = TaskTracker::new();
    let accept = tokio::spawn(socket::accept_loop(
        listener,
        jobs.clone(),
        stop_accepting.clone(),
        connections_done.clone(),
        conns.clone(),
        MAX_CONNECTIONS,
    ));
    let reload = tokio::spawn(reload_loop(
        hup,
        loaded,
        config_path.clone(),
        args.clone(),
        config.clone(),
        jobs.clone(),
    ));
    let check_state = {
        let jobs = jobs.clone();
        tokio::spawn(async move {
            let mut t = tokio::time::interval(CHECK_STATE_EVERY);
            loop {
                t.tick().await;
                jobs.check_state().await;
            }
        })
    };
    let prune = {
        let jobs = jobs.clone();
        tokio::spawn(async move {
            let mut t = tokio::time::interval(PRUNE_EVERY);
            t.tick().await;
            loop {
                t.tick().await;
                jobs.prune().await;
            }
        })
    };

    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = int.recv() => tracing::info!("SIGINT"),
    }
    // Stop taking connections and jobs; let running jobs finish (or kill them at the end
    // of the grace period); every waiting client gets its result; then close.
    stop_accepting.cancel();
    let _ = accept.await;
    socket_file.remove();
    jobs.shutdown().await;
    reload.abort();
    prune.abort();
    if let Some(retry) = retry {
        // No new sweep starts; one at work on its thread ends first.
        retry.abort();
        if tokio::time::timeout(SWEEP_AT_EXIT, sweeping.lock())
            .await
            .is_err()
        {
            tracing::warn!("a removal of an earlier run's leftovers was still at work at exit");
        }
    }
    check_state.abort();
    connections_done.cancel();
    conns.close();
    if tokio::time::timeout(Duration::from_secs(2), conns.wait())
        .await
        .is_err()
    {
        tracing::warn!("connections still open at exit are closed");
    }
    if let Err(e) = journal.end_run(run_id) {
        if journal.removed_unwritten() {
            tracing::error!(error = %e, journal = %journal.path().display(), "the journal was removed while the daemon ran and could not be written back before this stop: the answers it held are lost, and the next start refuses to begin an empty journal until it is told to (its message says how)");
        } else {
            tracing::warn!(error = %e, "cannot record the end of this run");
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// The first try again at a failed removal of an earlier run's leftovers; each later one
/// waits twice as long, up to [`CLEAN_AGAIN_AT_MOST`].
const CLEAN_AGAIN_FIRST: Duration = Duration::from_secs(5);
const CLEAN_AGAIN_AT_MOST: Duration = Duration::from_secs(600);
/// How long the daemon's exit waits for a sweep at work to end.
const SWEEP_AT_EXIT: Duration = Duration::from_secs(30);

/// Removing what an earlier run left (`recovery::clean_leftovers`): once at start, and
/// again while serving as long as it fails.
struct Cleaning {
    host: Option<crate::sandbox::cgroup::CgroupHost>,
    config: Config,
    jobs_dir: PathBuf,
    journal: Arc<Journal>,
    run_id: i64,
    /// Held by a sweep's thread while it works: the daemon's exit waits for it
    /// ([`SWEEP_AT_EXIT`]), so that no exit cuts a kill short (a cgroup v1 freezer left
    /// frozen between its freeze and its thaw).
    busy: Arc<tokio::sync::Mutex<()>>,
}

impl Cleaning {
    /// One sweep, on a blocking thread (removing a cgroup kills and waits). When nothing is
    /// left, and the first sweep saw everything, the earlier runs are forgotten.
    async fn sweep(&self, earlier: &mut recovery::Earlier) -> Result<(), String> {
        let (host, config, dir) = (
            self.host.clone(),
            self.config.clone(),
            self.jobs_dir.clone(),
        );
        let mut rules = earlier.clone();
        let busy = self.busy.clone().lock_owned().await;
        let (swept, rules) = tokio::task::spawn_blocking(move || {
            let swept = recovery::clean_leftovers(host, &config, &dir, &mut rules);
            drop(busy);
            (swept, rules)
        })
        .await
        .map_err(|e| {
            // Whatever that sweep saw is lost: no name with this daemon's pid is taken later.
            earlier.seen_none_of_own_pid();
            format!("the cleaning thread failed: {e}")
        })?;
        *earlier = rules;
        let removed = swept?;
        if removed > 0 {
            tracing::warn!(removed, "leftovers of an earlier run removed");
        }
        if !earlier.first_sweep_complete() {
            return Ok(());
        }
        if let Err(e) = self.journal.forget_runs_before(self.run_id) {
            tracing::warn!(error = %e, "cannot forget earlier runs");
        }
        Ok(())
    }

    /// Sweeps again, [`CLEAN_AGAIN_FIRST`] apart and then twice as long each time, until a
    /// sweep leaves nothing. This daemon's own jobs are not taken: `earlier` holds the rules
    /// of its start.
    async fn retry(self, mut earlier: recovery::Earlier) {
        let mut wait = CLEAN_AGAIN_FIRST;
        loop {
            tokio::time::sleep(wait).await;
            match self.sweep(&mut earlier).await {
                Ok(()) => {
                    tracing::info!("no leftovers of an earlier run remain");
                    return;
                }
                Err(e) => {
                    wait = (wait * 2).min(CLEAN_AGAIN_AT_MOST);
                    tracing::error!(error = %e, again_in_s = wait.as_secs(), "leftovers of an earlier run remain");
                }
            }
        }
    }
}

/// What identifies one version of the configuration file.
/// When a file changed, its length and inode: what tells a rewrite of the configuration.
type Stamp = (std::time::SystemTime, u64, u64);

fn file_stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len(), m.ino()))
}

/// When the configuration file is read again: once a change has held for a whole poll (a
/// file rewritten in place, by an editor say, may be caught half-written, and an empty
/// one reads as skills off), or at once on SIGHUP.
struct Watch {
    /// What the running configuration was read from.
    applied: Option<Stamp>,
    /// What the last poll saw.
    seen: Option<Stamp>,
}

impl Watch {
    fn new(loaded: Option<Stamp>) -> Watch {
        Watch {
            applied: loaded,
            seen: loaded,
        }
    }

    /// Whether to read the file now, seeing `now`; if so, `now` counts as applied.
    fn read_now(&mut self, now: Option<Stamp>, forced: bool) -> bool {
        let held = now == self.seen;
        self.seen = now;
        if forced || (held && now != self.applied) {
            self.applied = now;
            true
        } else {
            false
        }
    }
}

/// The running configuration `current` turned off, when the file at `path` (which is not a
/// usable configuration) is TOML that does not list the runner's artifact.
fn turned_off(path: &Path, current: &Config) -> Option<Config> {
    let text = crate::config::read_text(path).ok()?;
    if Config::lists_artifact(&text)? {
        return None;
    }
    let mut off = current.clone();
    off.worker.functions.retain(|f| f != crate::job::ARTIFACT);
    Some(off)
}

/// Re-reads the configuration on SIGHUP and when the file changes (polled every second).
async fn reload_loop(
    mut hup: tokio::signal::unix::Signal,
    loaded: Option<Stamp>,
    path: PathBuf,
    args: ServeArgs,
    started: Config,
    jobs: Arc<Jobs>,
) {
    let mut watch = Watch::new(loaded);
    let mut current = started.clone();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let forced = tokio::select! {
            _ = tick.tick() => false,
            Some(_) = hup.recv() => true,
        };
        if !watch.read_now(file_stamp(&path), forced) {
            continue;
        }
        let config = match load_config(&path) {
            Ok(mut c) => {
                apply_overrides(&mut c, &args);
                c
            }
            Err(e) => match turned_off(&path, &current) {
                // When in doubt, off: a file that no longer lists the artifact turns the
                // runner off whatever else is wrong with it, never leaves it on.
                Some(off) => {
                    tracing::error!(error = %e, "configuration not reloaded, but it lists no {} in worker.functions: skills off; the rest of the previous configuration stays", crate::job::ARTIFACT);
                    off
                }
                None => {
                    tracing::error!(error = %e, "configuration not reloaded; the previous one stays");
                    continue;
                }
            },
        };
        current = config.clone();
        let new = Settings::from_config(&config);
        let old = jobs.settings();
        *jobs.settings.write().unwrap_or_else(|p| p.into_inner()) = new.clone();
        if let Some(pool) = jobs.pool() {
            // The slots are the started configuration's (max_jobs takes a restart).
            let mut settings = pool::PoolSettings::from_config(&config);
            settings.max_jobs = jobs.max_jobs;
            pool.configure(settings).await;
        }
        // The socket's group is the started configuration's (it takes a restart).
        if let Some(warning) = config.unreachable_callers(started.daemon.socket_group.is_some()) {
            tracing::warn!("{warning}");
        }
        if old.skills_on != new.skills_on {
            tracing::info!(
                skills = if new.skills_on { "on" } else { "off" },
                "configuration reloaded"
            );
        } else {
            tracing::info!("configuration reloaded");
        }
        let restart_needed = config.runner.state_dir != started.runner.state_dir
            || config.daemon.socket != started.daemon.socket
            || config.daemon.socket_group != started.daemon.socket_group
            || config.max_jobs() != started.max_jobs()
            || config.queue_len() != started.queue_len()
            || config.daemon.header_timeout_ms != started.daemon.header_timeout_ms
            || config.daemon.body_timeout_ms != started.daemon.body_timeout_ms
            || config.daemon.log_json != started.daemon.log_json
            || format!("{:?}", config.runner) != format!("{:?}", started.runner);
        if restart_needed {
            tracing::warn!(
                "runner and socket settings changed: they take effect at the next start"
            );
        }
    }
}

#[derive(Serialize)]
struct Caps {
    wall_ms_default: u64,
    wall_ms_max: u64,
    mem_bytes_min: u64,
    mem_bytes_default: u64,
    mem_bytes_max: u64,
    ttl_ms_default: u64,
    ttl_ms_max: u64,
    input_json_max_bytes: usize,
    inputs_max: usize,
    inputs_max_total_bytes: usize,
    js_input_max_bytes: usize,
    stdout_max_bytes: usize,
    stderr_kept_bytes: usize,
    request_max_bytes: usize,
    nets: Vec<&'static str>,
}

#[derive(Serialize)]
struct Kernel {
    #[serde(flatten)]
    layers: crate::sandbox::Layers,
    landlock_features: Vec<&'static str>,
    cgroup: Option<String>,
}

#[derive(Serialize)]
struct Capacity {
    max_jobs: usize,
    queue_len: usize,
}

/// What `openvibe-only` and `public` jobs may reach here.
#[derive(Serialize)]
struct EgressInfo {
    /// The `openvibe-only` allow list (each entry and its subdomains).
    openvibe_only_allow: Vec<String>,
    /// Why jobs with egress cannot run (for example no upstream DNS); none when they can.
    problem: Option<String>,
}

#[derive(Serialize)]
pub struct Info {
    artifact: &'static str,
    version: &'static str,
    node: Option<String>,
    skills: &'static str,
    on: bool,
    ready: bool,
    problem: Option<String>,
    capacity: Capacity,
    running: usize,
    queued: usize,
    caps: Caps,
    egress: Option<EgressInfo>,
    /// The warm pool (`[daemon.warm]`), when the engine runs.
    warm: Option<pool::PoolInfo>,
    kernel: Kernel,
}

/// `GET /v1/info`.
pub fn info(jobs: &Jobs) -> Info {
    let (running, queued) = jobs.load();
    let on = jobs.settings().skills_on;
    let layers = crate::sandbox::Layers::probe();
    let (_, features) = crate::engine::landlock_summary();
    Info {
        artifact: job::ARTIFACT,
        version: env!("CARGO_PKG_VERSION"),
        node: jobs.node().map(str::to_string),
        skills: if on { "on" } else { "off" },
        on,
        ready: jobs.ready(),
        problem: jobs.problem(),
        capacity: Capacity {
            max_jobs: jobs.max_jobs,
            queue_len: jobs.queue_len,
        },
        running,
        queued,
        caps: Caps {
            wall_ms_default: job::WALL_MS_DEFAULT,
            wall_ms_max: job::WALL_MS_CAP,
            mem_bytes_min: job::MEM_BYTES_MIN,
            mem_bytes_default: job::MEM_BYTES_DEFAULT,
            mem_bytes_max: job::MEM_BYTES_CAP,
            ttl_ms_default: job::TTL_MS_DEFAULT,
            ttl_ms_max: job::TTL_MS_CAP,
            // The bound the daemon's own checks apply, engine or not.
            input_json_max_bytes: jobs.bounds().max_input_json_bytes,
            inputs_max: job::MAX_INPUTS,
            inputs_max_total_bytes: job::MAX_INPUTS_TOTAL_BYTES,
            js_input_max_bytes: job::MAX_JS_BYTES,
            stdout_max_bytes: job::STDOUT_CAP,
            stderr_kept_bytes: job::STDERR_KEEP,
            request_max_bytes: http::MAX_BODY_BYTES,
            nets: match jobs.engine() {
                Some(e) if e.egress().problem().is_none() => {
                    vec!["deny", "openvibe-only", "public"]
                }
                _ => vec!["deny"],
            },
        },
        egress: jobs.engine().map(|e| EgressInfo {
            openvibe_only_allow: e.egress().policy().allow.clone(),
            problem: e.egress().problem(),
        }),
        warm: jobs.pool().map(|p| p.info()),
        kernel: Kernel {
            layers,
            landlock_features: features,
            cgroup: jobs.engine().map(|e| e.cgroups().version().to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    /// A change is read once it has held for a whole poll; SIGHUP reads at once.
    #[test]
    fn a_change_is_read_once_it_held_for_a_poll() {
        let t = |n: u64| {
            Some((
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(n),
                n,
                7,
            ))
        };
        let mut w = super::Watch::new(t(1));
        assert!(!w.read_now(t(1), false), "unchanged");
        assert!(!w.read_now(t(2), false), "changed: maybe half-written");
        assert!(!w.read_now(t(3), false), "changed again");
        assert!(w.read_now(t(3), false), "held for a poll");
        assert!(!w.read_now(t(3), false), "read already");
        assert!(w.read_now(t(3), true), "SIGHUP");
        assert!(!w.read_now(None, false), "gone: maybe being replaced");
        assert!(
            w.read_now(None, false),
            "gone for good: read (the defaults)"
        );
    }

    /// A relative state directory, from the command line or the file, is made absolute
    /// against the daemon's working directory, the same at the start and at each reload
    /// (which compares them); an absolute one is kept as it is.
    #[test]
    fn the_state_directory_is_made_absolute_once() {
        let args = |state_dir: Option<&str>| super::ServeArgs {
            config: None,
            state_dir: state_dir.map(std::path::PathBuf::from),
            socket: None,
            log_json: false,
        };
        let cwd = std::env::current_dir().expect("working directory");
        let mut from_cli = crate::config::Config::default();
        super::apply_overrides(&mut from_cli, &args(Some("var/state")));
        assert_eq!(from_cli.runner.state_dir, cwd.join("var/state"));
        let mut again = crate::config::Config::default();
        super::apply_overrides(&mut again, &args(Some("var/state")));
        assert_eq!(again.runner.state_dir, from_cli.runner.state_dir);
        let mut from_file = crate::config::Config::default();
        from_file.runner.state_dir = "relative/dir".into();
        super::apply_overrides(&mut from_file, &args(None));
        assert_eq!(from_file.runner.state_dir, cwd.join("relative/dir"));
        let mut kept = crate::config::Config::default();
        let default = kept.runner.state_dir.clone();
        assert!(default.is_absolute(), "{}", default.display());
        super::apply_overrides(&mut kept, &args(None));
        assert_eq!(kept.runner.state_dir, default);
    }

    /// The daemon's loader on a file of `text`.
    fn loaded(text: &str) -> Result<crate::config::Config, String> {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).expect("write the configuration");
        super::load_config(&path).map_err(|e| {
            assert!(e.contains("config.toml"), "the file is named: {e}");
            e
        })
    }

    #[test]
    fn the_daemon_refuses_what_the_cli_refuses_before_its_engine_starts() {
        let bound = crate::job::INPUT_JSON_MAX_CAP + 1;
        for (text, says) in [
            (
                "[runner]\nsandbox_uid_count = 0\n".to_string(),
                "sandbox_uid_count is 0",
            ),
            (
                "[runner]\nsandbox_uid_base = 2147483000\nsandbox_uid_count = 1000\n".into(),
                "above 2147483646",
            ),
            (
                format!("[runner]\nmax_input_json_bytes = {bound}\n"),
                "runner.max_input_json_bytes",
            ),
        ] {
            let e = loaded(&text).expect_err("refused");
            assert!(e.contains(says), "{text}: {e}");
        }
        let c = loaded("[runner]\nsandbox_uid_count = 1000\nmax_input_json_bytes = 1000\n")
            .expect("usable values load");
        assert_eq!(c.runner.sandbox_uid_count, 1000);
        assert_eq!(c.runner.max_input_json_bytes, 1000);
    }
}
