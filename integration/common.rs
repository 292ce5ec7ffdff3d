//! What every integration test needs: the binary, a state directory of its own, and the
//! checks that nothing was left on the host.

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_openvibe-skill-runner");
/// The init stage's own executable, which the runner finds beside itself
/// (`sandbox::init_exe`).
pub const INIT: &str = env!("CARGO_BIN_EXE_openvibe-skill-runner-init");
/// The default `runner.sandbox_uid_base`: every job's uid is at or above it.
pub const SANDBOX_UID_BASE: u64 = 2_100_000_000;

pub fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A job running `code` as `tool.js` on `input`, with SPEC.md's default limits.
pub fn code_job(id: &str, code: &str, input: Value) -> Value {
    use base64::Engine as _;
    serde_json::json!({
        "job_id": id,
        "class": "function",
        "artifact": "openvibe-skill-runner@1.0.0",
        "args": {"tool": "probe", "entry": "tool.js", "input": input},
        "inputs": [{
            "name": "tool.js",
            "media_id": "med_test",
            "sha256": sha(code.as_bytes()),
            "content_base64": base64::engine::general_purpose::STANDARD.encode(code),
        }],
        "net": "deny",
        "limits": {"wall_ms": 10000, "mem_bytes": 134217728}
    })
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A configuration's text with this tree's policies and preload named in it (unless it
/// names its own): the suite tests this tree's files, never a copy an installed package
/// left under /etc/openvibe-skill-runner on the machine.
pub fn hermetic(config: &str) -> String {
    let mut doc: toml_edit::DocumentMut = config
        .parse()
        .unwrap_or_else(|e| panic!("a test's configuration is not TOML: {e}\n{config}"));
    let runner = doc
        .entry("runner")
        .or_insert_with(toml_edit::table)
        .as_table_mut()
        .expect("[runner] is a table");
    for (key, dir) in [("policies_dir", "policies"), ("runtime_dir", "runtime")] {
        if !runner.contains_key(key) {
            runner[key] = toml_edit::value(repo().join(dir).display().to_string());
        }
    }
    if warm_every_job() && !runner.contains_key("warm_every_job") {
        runner["warm_every_job"] = toml_edit::value(true);
    }
    doc.to_string()
}

/// `OVSR_WARM=1`: every job the runner runs by itself is handed over to a sandbox warmed
/// for it (the test hook `runner.warm_every_job`), as the daemon's pool does; scripts/test
/// runs the hostile suites a second time so.
pub fn warm_every_job() -> bool {
    std::env::var("OVSR_WARM").is_ok_and(|v| v == "1")
}

/// `state`'s `config.toml`, written hermetic and empty otherwise unless a test wrote one.
pub fn hermetic_config_file(state: &Path) -> PathBuf {
    let config = state.join("config.toml");
    if !config.exists() {
        std::fs::write(&config, hermetic("")).expect("write the configuration");
    }
    config
}

/// Starts `cmd`, again while its executable is busy (`ETXTBSY`): a test that has just
/// written a copy of the runner gets that while a process another test thread forked in
/// the meantime still holds the copy's write descriptor, until it execs.
pub fn spawn_when_not_busy(cmd: &mut Command) -> std::io::Result<std::process::Child> {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            spawned => return spawned,
        }
    }
}

/// Starts `cmd` with its stdin, stdout and stderr piped; the caller writes what it reads.
pub fn spawn_piped(cmd: &mut Command) -> std::process::Child {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    spawn_when_not_busy(cmd).unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Runs `cmd` with `text` on its stdin and its stdout and stderr captured, to its end.
pub fn feed(cmd: &mut Command, text: &[u8]) -> std::process::Output {
    let mut child = spawn_piped(cmd);
    // Its own statement: the pipe closes here, so the command reads to its end.
    let written = child.stdin.take().expect("stdin").write_all(text);
    written
        .and_then(|()| child.wait_with_output())
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// The runner with a hermetic configuration (see [`hermetic`]) written into `state` and
/// `state` as its state directory.
pub fn runner_in(state: &Path) -> Command {
    runner_in_at(Path::new(BIN), state)
}

/// [`runner_in`] for another copy of the runner's binary (`bin`).
pub fn runner_in_at(bin: &Path, state: &Path) -> Command {
    with_runner_args(Command::new(bin), state)
}

/// [`runner_in`] started through a wrapper (`wrapper[0]` with the rest as its arguments,
/// then the runner's path and arguments): `nice`, `setpriv`, `unshare`.
pub fn runner_under(wrapper: &[&str], state: &Path) -> Command {
    let (program, args) = wrapper.split_first().expect("a wrapper program");
    let mut cmd = Command::new(program);
    cmd.args(args).arg(BIN);
    with_runner_args(cmd, state)
}

fn with_runner_args(mut cmd: Command, state: &Path) -> Command {
    let config = hermetic_config_file(state);
    cmd.arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(state);
    cmd
}

/// An in-process engine's configuration: `state` and this tree's policies and preload.
pub fn hermetic_engine_config(state: &Path) -> openvibe_skill_runner::config::Config {
    let mut config = openvibe_skill_runner::config::Config::default();
    config.runner.state_dir = state.to_path_buf();
    config.runner.policies_dir = Some(repo().join("policies"));
    config.runner.runtime_dir = Some(repo().join("runtime"));
    config.runner.warm_every_job = warm_every_job();
    config
}

/// An engine on [`hermetic_engine_config`] with `omit` left out (the layer matrix's hook,
/// test builds only), to show one layer holding alone. The caller names the executables.
pub fn engine_omitting(
    state: &Path,
    omit: Vec<openvibe_skill_runner::fault::Layer>,
) -> openvibe_skill_runner::engine::Engine {
    let mut config = hermetic_engine_config(state);
    config.runner.omit_layers = omit;
    openvibe_skill_runner::engine::Engine::start(config)
        .unwrap_or_else(|e| panic!("the engine must start on the test host: {e}"))
}

/// The suite needs root and the pinned Node; without them it fails, loudly, rather than
/// passing without having proved anything.
pub fn require_host() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "the integration suite runs real sandboxes and must run as root (scripts/test)"
    );
    assert!(
        Path::new(openvibe_skill_runner::runtime::PINNED_PATH).is_file(),
        "the pinned Node is not installed: run scripts/install-node"
    );
}

/// A state directory for one test, removed with it.
pub struct State {
    pub dir: tempfile::TempDir,
}

/// The runner's record of the runtime it inspected (`<state>/runtime.json`: Node's version,
/// sha256 and libraries, keyed by the binary's inode, size and times), as the first test of
/// this process that ran a job left it. Every later state directory starts with it, as a
/// Link's state directory does after its first job, so the suite does not hash the 120 MB
/// Node again for each fresh directory (minutes under the VM matrix's emulation). The
/// runner still checks the record's key against the binary, and no test here is about the
/// record itself.
static RUNTIME_RECORD: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
const RUNTIME_RECORD_FILE: &str = "runtime.json";

impl State {
    pub fn new() -> State {
        let dir = tempfile::Builder::new()
            .prefix("ovsr-test-")
            .tempdir()
            .expect("temp dir");
        if let Some(record) = RUNTIME_RECORD.get() {
            std::fs::write(dir.path().join(RUNTIME_RECORD_FILE), record)
                .expect("seed the runtime record");
        }
        State { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Starts `run-job` in this state directory and writes it the job (its stdin then
    /// closed); stdout and stderr are piped.
    pub fn start_run_job(&self, text: &[u8]) -> std::process::Child {
        let mut child = spawn_piped(runner_in(self.path()).args(["run-job", "-"]));
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text)
            .expect("write the job");
        child
    }

    /// Runs `run-job` on a job given as JSON text; returns the result.
    pub fn run_job_text(&self, text: &[u8]) -> Value {
        self.run_job_configured(text, None)
    }

    /// Runs `run-job` with a configuration file of the given text.
    pub fn run_job_configured(&self, text: &[u8], config: Option<&str>) -> Value {
        let path = self.path().join("config.toml");
        std::fs::write(&path, hermetic(config.unwrap_or(""))).expect("write the configuration");
        let result = result_of(self.start_run_job(text), "a job");
        self.assert_clean();
        result
    }

    pub fn run_job(&self, job: &Value) -> Value {
        self.run_job_text(&serde_json::to_vec(job).expect("job json"))
    }

    /// Runs `run SKILL --json` for one tool.
    pub fn run_skill(&self, skill: &Path, tool: &str, input: &Value, extra: &[String]) -> Value {
        // Through a file: a large input does not fit one argument.
        let input_file = self.path().join("input.json");
        std::fs::write(&input_file, input.to_string()).expect("write the input");
        let out = runner_in(self.path())
            .arg("run")
            .arg(skill)
            .arg("--tool")
            .arg(tool)
            .arg("--input")
            .arg(format!("@{}", input_file.display()))
            .arg("--json")
            .args(extra)
            .output()
            .expect("run the runner");
        assert!(
            !out.stdout.is_empty(),
            "`run` printed no result (exit {:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        let result = parse_result(&out.stdout);
        self.assert_clean();
        result
    }

    /// Nothing of a finished job remains: no job directory, no mount under the state dir.
    pub fn assert_clean(&self) {
        self.keep_runtime_record();
        let jobs = self.path().join("jobs");
        if jobs.exists() {
            let left: Vec<_> = std::fs::read_dir(&jobs)
                .expect("read jobs dir")
                .filter_map(Result::ok)
                .map(|e| e.path())
                .collect();
            assert!(left.is_empty(), "job directories left behind: {left:?}");
        }
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let me = self.path().display().to_string();
        assert!(
            !mounts.contains(&me),
            "a mount under the state directory is left on the host"
        );
    }
}

impl State {
    /// Keeps this directory's runtime record for the state directories made after it.
    fn keep_runtime_record(&self) {
        if RUNTIME_RECORD.get().is_none() {
            if let Ok(record) = std::fs::read(self.path().join(RUNTIME_RECORD_FILE)) {
                let _ = RUNTIME_RECORD.set(record);
            }
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        self.keep_runtime_record();
    }
}

/// The result a `run-job` prints, once it ends: it exits 0 whenever it printed one.
/// `what` names the run in a failure.
pub fn result_of(run_job: std::process::Child, what: &str) -> Value {
    let out = run_job.wait_with_output().expect("wait for run-job");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: run-job exits 0 whenever it printed a result; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_result(&out.stdout)
}

pub fn parse_result(stdout: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stdout);
    let line = text.lines().last().unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("result is not JSON ({e}): {text}"))
}

/// A process running as a sandbox uid, and the cgroup paths it is in (one per hierarchy).
pub struct SandboxProcess {
    pub pid: i32,
    pub uid: u64,
    pub cgroups: Vec<String>,
}

impl std::fmt::Display for SandboxProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} uid {} in {}",
            self.pid,
            self.uid,
            self.cgroups.join(", ")
        )
    }
}

impl SandboxProcess {
    /// The name of the job cgroup it is in (`<job_id>.<runner pid>.<seq>`), if any.
    fn job_cgroup_names(&self) -> impl Iterator<Item = &str> {
        self.cgroups
            .iter()
            .filter_map(|path| path.rsplit('/').next())
            .filter(|name| is_job_cgroup_name(name))
    }

    /// In a job cgroup of a job whose id starts with `prefix`.
    pub fn belongs_to(&self, prefix: &str) -> bool {
        self.job_cgroup_names().any(|name| name.starts_with(prefix))
    }

    /// In no job cgroup at all: a process that left its job's cgroup, whoever's job it was.
    pub fn escaped(&self) -> bool {
        self.job_cgroup_names().next().is_none()
    }
}

/// `<job_id>.<pid>.<seq>`, the names the runner gives job cgroups.
fn is_job_cgroup_name(name: &str) -> bool {
    let mut parts = name.rsplitn(3, '.');
    let seq = parts.next().unwrap_or("");
    let pid = parts.next().unwrap_or("");
    let id = parts.next().unwrap_or("");
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    !id.is_empty() && digits(pid) && digits(seq)
}

/// Every process on the host running as a sandbox uid, this suite's or another runner's.
pub fn all_sandbox_processes() -> Vec<SandboxProcess> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.filter_map(Result::ok) {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let uid: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|u| u.parse().ok())
            .unwrap_or(0);
        if uid < SANDBOX_UID_BASE || uid >= u32::MAX as u64 {
            continue;
        }
        let Ok(cgroup) = std::fs::read_to_string(e.path().join("cgroup")) else {
            // Gone between the two reads.
            continue;
        };
        let cgroups = cgroup
            .lines()
            .filter_map(|line| line.splitn(3, ':').nth(2))
            .map(str::to_owned)
            .collect();
        found.push(SandboxProcess { pid, uid, cgroups });
    }
    found
}

/// Processes of this test's jobs (ids starting with `prefix`), and any sandbox process
/// that is in no job cgroup at all (an escape, whichever runner started it). Processes of
/// other runners' jobs on the same host are not this test's business.
pub fn sandbox_processes(prefix: &str) -> Vec<SandboxProcess> {
    all_sandbox_processes()
        .into_iter()
        .filter(|p| p.belongs_to(prefix) || p.escaped())
        .collect()
}

/// The cgroup hierarchies this process sees, read from its mountinfo by the runner's own
/// parser.
pub fn cgroup_mounts() -> Vec<openvibe_skill_runner::sandbox::cgroup::CgroupMount> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    openvibe_skill_runner::sandbox::cgroup::parse_mountinfo(&mountinfo)
}

/// Job cgroups of jobs whose id starts with `prefix` still on the host, in any cgroup
/// hierarchy. Read-only: it walks the cgroup mounts rather than detecting the runner's
/// placement, which may move the calling process.
pub fn leftover_cgroups(prefix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for mount in cgroup_mounts() {
        walk_for_jobs(&mount.mountpoint, prefix, 0, &mut found);
    }
    found.sort();
    found.dedup();
    found
}

fn walk_for_jobs(dir: &Path, prefix: &str, depth: usize, found: &mut Vec<PathBuf>) {
    // Job cgroups sit a few levels down (a slice, a scope, the runner's parent, jobs/).
    if depth > 12 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) && is_job_cgroup_name(&name) {
            found.push(entry.path());
        } else {
            walk_for_jobs(&entry.path(), prefix, depth + 1, found);
        }
    }
}

/// Asserts a result's status and reason, showing the whole result when they differ.
pub fn assert_status(result: &Value, status: &str, reason: Option<&str>) {
    let got_status = result["status"].as_str().unwrap_or("?");
    let got_reason = result["reason"].as_str();
    assert!(
        got_status == status && got_reason == reason,
        "expected {status}/{reason:?}, got {got_status}/{got_reason:?}: {result:#}"
    );
}

static HOST: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Tests of this suite take turns on the host: timing-sensitive cases (bombs, the load
/// test, deadlines) share the machine's two cores with no other test that runs jobs.
pub fn exclusive() -> std::sync::RwLockWriteGuard<'static, ()> {
    HOST.write().unwrap_or_else(|p| p.into_inner())
}

/// For a test that runs jobs but minds no timing: it runs beside others of its kind, never
/// beside an [`exclusive`] one.
pub fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    HOST.read().unwrap_or_else(|p| p.into_inner())
}

/// After a test: no process of its jobs (nor any escaped sandbox process), no cgroup of
/// its jobs.
pub fn assert_host_clean(job_prefix: &str) {
    // The kernel may take a moment to reap the last killed process.
    let mut procs = sandbox_processes(job_prefix);
    for _ in 0..50 {
        if procs.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        procs = sandbox_processes(job_prefix);
    }
    let shown: Vec<String> = procs.iter().map(ToString::to_string).collect();
    assert!(
        procs.is_empty(),
        "sandbox processes left running: {shown:?}"
    );
    let cgroups = leftover_cgroups(job_prefix);
    assert!(cgroups.is_empty(), "job cgroups left behind: {cgroups:?}");
}

/// Runs a job given as a JSON value through an in-process engine (the tests that need an
/// engine configured in code: the native probe, a Node without its own hardening).
pub fn run_engine_job(
    engine: &openvibe_skill_runner::engine::Engine,
    job: serde_json::Value,
) -> serde_json::Value {
    let valid = openvibe_skill_runner::job::parse_job_value(
        job,
        &openvibe_skill_runner::job::Bounds::default(),
    )
    .unwrap_or_else(|r| panic!("the job is valid: {r:?}"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = rt.block_on(engine.run(valid, &openvibe_skill_runner::cancel::Cancel::new()));
    serde_json::to_value(&result).expect("result json")
}

/// Starts `exe` as an init stage for the build `build`, its reports on a pipe at fd 3 and
/// one end of a socket pair at the exec gate's descriptor as the runner gives them, and
/// `plan` waiting on its stdin; its exit status, the reports it wrote and what it left of
/// `plan` unread.
pub fn init_of_build(
    exe: &str,
    build: &str,
    plan: &[u8],
) -> (std::process::ExitStatus, String, Vec<u8>) {
    init_of_build_under(exe, build, plan, None)
}

/// [`init_of_build`] under a seccomp program of the test's, loaded (with no_new_privs)
/// just before the exec: the init stage as a container's seccomp profile would start it.
pub fn init_of_build_under(
    exe: &str,
    build: &str,
    plan: &[u8],
    filter: Option<&seccompiler::BpfProgram>,
) -> (std::process::ExitStatus, String, Vec<u8>) {
    init_of_build_with(exe, build, plan, filter, |_| {})
}

/// [`init_of_build_under`], calling `meanwhile` with the init stage once it is started,
/// before its reports are read.
pub fn init_of_build_with(
    exe: &str,
    build: &str,
    plan: &[u8],
    filter: Option<&seccompiler::BpfProgram>,
    meanwhile: impl FnOnce(&std::process::Child),
) -> (std::process::ExitStatus, String, Vec<u8>) {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    // Close-on-exec, so that no child another test spawns meanwhile keeps a write end
    // (the reads below wait for the last one); dup2 into the init's numbers clears it.
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
    let w_raw = w.as_raw_fd();
    let (gate, _gate_peer) = std::os::unix::net::UnixStream::pair().expect("socket pair");
    let gate_raw = gate.as_raw_fd();
    let (plan_r, plan_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("plan pipe");
    // The plan is whole in the pipe before the init starts (far below a pipe's 64 KiB).
    std::fs::File::from(plan_w)
        .write_all(plan)
        .expect("write the plan");
    // Our own end of it, to read afterwards what the init did not.
    let plan_left = plan_r.try_clone().expect("dup the plan's pipe");
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["sandbox-init", build])
        .env_clear()
        .stdin(std::process::Stdio::from(plan_r))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // The program's place and length, taken before the fork (the closure must be Send
    // and Sync, which a pointer is not): the child only hands the kernel its address.
    let program = filter.map(|prog| {
        (
            prog.as_ptr() as usize,
            u16::try_from(prog.len()).expect("a short program"),
        )
    });
    // SAFETY: fcntl, dup2, prctl and seccomp only, async-signal-safe, between fork and
    // exec; the program `fprog` points into outlives the spawn.
    unsafe {
        cmd.pre_exec(move || {
            // The socket first out of the way of fd 3 (and of itself: dup2 onto the same
            // number would leave it close-on-exec).
            let gate = libc::fcntl(gate_raw, libc::F_DUPFD, 10);
            // The reports' pipe onto 3, open across the exec (dup2 onto itself would
            // leave it close-on-exec).
            let reports = if w_raw == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(w_raw, 3)
            };
            if gate < 0
                || reports < 0
                || libc::dup2(gate, openvibe_skill_runner::sandbox::exec_gate::GATE_FD) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if let Some((at, len)) = program {
                let fprog = libc::sock_fprog {
                    len,
                    filter: at as *mut libc::sock_filter,
                };
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::syscall(
                        libc::SYS_seccomp,
                        libc::SECCOMP_SET_MODE_FILTER,
                        0,
                        &fprog as *const libc::sock_fprog,
                    ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn the init");
    drop(w);
    drop(gate);
    meanwhile(&child);
    let mut reports = String::new();
    std::fs::File::from(r)
        .read_to_string(&mut reports)
        .expect("reports");
    let status = child.wait().expect("wait");
    // Every write end is closed now: this reads what is left, then the end.
    let mut left = Vec::new();
    std::fs::File::from(plan_left)
        .read_to_end(&mut left)
        .expect("read what is left of the plan");
    (status, reports, left)
}

/// Waits up to `timeout` for `f` to hold.
pub fn wait_for(timeout: std::time::Duration, f: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
