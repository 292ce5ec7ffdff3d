//! Warm sandboxes (issue 12): a job handed to a sandbox started before it came sees what a
//! cold job sees, gets a result of the same form with its own figures, and the pool's
//! sandboxes hold against a tool aimed at them. In-process engines, as the daemon uses
//! them; the daemon's pool has its own tests (daemon.rs).

use crate::common::*;
use openvibe_skill_runner::cancel::Cancel;
use openvibe_skill_runner::engine::warm::{Shape, WarmSandbox, WarmSource};
use openvibe_skill_runner::engine::Engine;
use openvibe_skill_runner::job::{parse_job_value, Bounds};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Mutex;

/// Each test's setup: the host checked and held for the test alone, a state folder of
/// its own, an engine on it and a runtime to drive its warm-ups and jobs. Dropped in this
/// order: the engine, the runtime, the folder, then the hold.
struct Setup {
    engine: Engine,
    rt: tokio::runtime::Runtime,
    state: State,
    _host: std::sync::RwLockWriteGuard<'static, ()>,
}

impl Setup {
    fn new() -> Setup {
        Setup::with(|_| {})
    }

    /// The setup with the engine's configuration changed by `tweak`.
    fn with(tweak: impl FnOnce(&mut openvibe_skill_runner::config::Config)) -> Setup {
        require_host();
        let host = exclusive();
        let state = State::new();
        let mut config = hermetic_engine_config(state.path());
        tweak(&mut config);
        let engine = Engine::start(config)
            .unwrap_or_else(|e| panic!("the engine must start on the test host: {e}"))
            .with_runner_executable(PathBuf::from(INIT));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        Setup {
            engine,
            rt,
            state,
            _host: host,
        }
    }

    /// A warm sandbox of `shape`, started (not necessarily ready yet).
    fn warm(&self, shape: Shape) -> WarmSandbox {
        self.rt
            .block_on(self.engine.warm_up(shape))
            .unwrap_or_else(|e| panic!("a warm sandbox must start here: {e}"))
    }

    /// Runs `job` cold, as the CLI does.
    fn cold(&self, job: Value) -> Value {
        run_engine_job(&self.engine, job)
    }

    /// Runs `job` as the daemon does, taking a warm sandbox from `source` if it has one of
    /// the job's shape, and waits for what is left of it to be removed, as the daemon
    /// does before it frees the job's slot.
    fn run_with(&self, job: Value, source: &dyn WarmSource) -> Value {
        self.run_cancellable(job, source, &Cancel::new())
    }

    /// [`Setup::run_with`] with the job's cancel given.
    fn run_cancellable(&self, job: Value, source: &dyn WarmSource, cancel: &Cancel) -> Value {
        let valid =
            parse_job_value(job, &Bounds::default()).unwrap_or_else(|r| panic!("valid job: {r:?}"));
        let result = self.rt.block_on(async {
            let (result, removal) = self.engine.run_with(valid, cancel, source).await;
            removal.done().await;
            result
        });
        serde_json::to_value(&result).expect("result json")
    }

    /// Nothing left once the runs' removals are done (a warm job's is awaited by
    /// `run_with`, after its result): the state folder clean, and no process, cgroup or
    /// folder of the jobs named `prefix` or of any warm sandbox.
    fn assert_clean(&self, prefixes: &[&str]) {
        self.state.assert_clean();
        for prefix in prefixes {
            assert_host_clean(prefix);
        }
        assert_host_clean(&warm_prefix());
    }
}

/// Hands out the sandboxes it was given, each once, and counts those that failed at
/// their hand-over.
struct Given(Mutex<Vec<WarmSandbox>>, std::sync::atomic::AtomicUsize);

impl WarmSource for Given {
    fn take(&self, shape: Shape) -> Option<WarmSandbox> {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let at = all.iter().position(|s| s.shape() == shape)?;
        Some(all.remove(at))
    }

    fn hand_over_failed(&self) {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Given {
    fn of(all: Vec<WarmSandbox>) -> Given {
        Given(Mutex::new(all), Default::default())
    }

    fn failed(&self) -> usize {
        self.1.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn left(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// Waits (bounded) until the sandbox's Node has started with every layer applied.
fn until_ready(sandbox: &mut WarmSandbox) {
    for _ in 0..600 {
        if sandbox.is_ready() {
            return;
        }
        assert!(sandbox.is_alive(), "the warm sandbox ended while starting");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the warm sandbox was not ready within 30 s");
}

fn warm_prefix() -> String {
    format!(
        "{}.{}.",
        openvibe_skill_runner::engine::warm::warm_name(),
        std::process::id()
    )
}

/// The tool's own view (what Node's permission model lets it ask), then a pause, in
/// which the test looks at its process from the host (`snapshot`): the pause starts once
/// it has read its whole input, so after the hand-over.
const VIEW: &str = r#"
const fs = require('fs');
const os = require('os');
const code = (f) => { try { f(); return 'ok'; } catch (e) { return e.code || e.message; } };
const val = (f) => { try { return f(); } catch (e) { return e.code || e.message; } };
const fds = [];
for (let fd = 0; fd < 64; fd++) {
  try { const s = fs.fstatSync(fd); fds.push([fd, s.isFIFO(), s.isSocket(), s.isFile(), s.isCharacterDevice(), s.mode]); } catch (e) { fds.push([fd, e.code]); }
}
let input = '';
process.stdin.on('data', (c) => { input += c; });
process.stdin.on('end', () => {
  const view = {
    input: JSON.parse(input), argv: process.argv, execArgv: process.execArgv,
    main: require.main && require.main.filename, filename: __filename,
    env: Object.keys(process.env), pid: process.pid, ppid: process.ppid, cwd: process.cwd(),
    hostname: val(() => os.hostname()), gid: val(() => process.getgid()),
    groups: val(() => process.getgroups()), fds, skill: val(() => fs.readdirSync('/skill')),
    priority: val(() => os.getPriority()),
    write_skill: code(() => fs.writeFileSync('/skill/new.js', 'x')),
    write_root: code(() => fs.writeFileSync('/new', 'x')),
  };
  setTimeout(() => process.stdout.write(JSON.stringify(view)), 1500);
});
"#;

/// The host's look at a job's Node process (`pid`, the job's pid 2), as far as a warm
/// sandbox could differ from a cold one: its descriptors, environment, command line,
/// mountinfo (the root's size and flags among the options), identity, capabilities,
/// seccomp, limits, the priority of every thread, and its whole root (every path but
/// `/proc`: type, mode, size, owner, links, a link's target). What differs between any two
/// jobs is left out: mount ids and device numbers, inode numbers, times, the host's pid,
/// and the job's uid (named `UID`).
fn snapshot(pid: i32, uid: u64) -> Value {
    use std::os::unix::fs::MetadataExt;
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let read = |name: &str| {
        std::fs::read(proc_dir.join(name))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_else(|e| format!("error {e}"))
    };
    let uid_s = uid.to_string();
    let named = |s: &str| s.replace(&uid_s, "UID");
    let mut fds = Vec::new();
    if let Ok(entries) = std::fs::read_dir(proc_dir.join("fd")) {
        for e in entries.flatten() {
            let link = std::fs::read_link(e.path())
                .map(|l| l.display().to_string())
                .unwrap_or_default();
            let kind = link.split(':').next().unwrap_or("").to_string();
            fds.push(format!("{} {kind}", e.file_name().to_string_lossy()));
        }
    }
    fds.sort();
    let mountinfo: Vec<String> = read("mountinfo")
        .lines()
        .map(|l| l.splitn(4, ' ').nth(3).unwrap_or("").to_string())
        .collect();
    let status: Vec<String> = status_lines(
        &read("status"),
        &["Uid:", "Gid:", "Groups:", "Seccomp:", "Seccomp_filters:"],
    )
    .map(named)
    .collect();
    let mut nice = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(proc_dir.join("task")) {
        for t in tasks.flatten() {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            let after = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
            nice.push(after.split(' ').nth(16).unwrap_or("?").to_string());
        }
    }
    nice.sort();
    nice.dedup();
    let mut tree = Vec::new();
    let root = proc_dir.join("root");
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let rel = path
                .strip_prefix(&root)
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            if rel == "proc" || tree.len() > 2000 {
                continue;
            }
            let Ok(m) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let target = std::fs::read_link(&path)
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            tree.push(named(&format!(
                "{rel} {:o} {} {} {} {} {target}",
                m.mode(),
                m.size(),
                m.uid(),
                m.gid(),
                m.nlink()
            )));
            if m.is_dir() {
                stack.push(path);
            }
        }
    }
    tree.sort();
    json!({
        "fds": fds, "environ": read("environ"), "cmdline": read("cmdline"),
        "mountinfo": mountinfo, "status": status, "limits": read("limits"),
        "nice": nice, "tree": tree,
    })
}

/// The lines of a `/proc/<pid>/status` text that start with one of `keys` or tell the
/// process's privileges (its capability sets and no_new_privs), in the file's order.
fn status_lines<'a>(text: &'a str, keys: &'a [&str]) -> impl Iterator<Item = &'a str> {
    const PRIVILEGES: [&str; 6] = [
        "CapInh:",
        "CapPrm:",
        "CapEff:",
        "CapBnd:",
        "CapAmb:",
        "NoNewPrivs:",
    ];
    text.lines()
        .filter(move |l| keys.iter().chain(&PRIVILEGES).any(|k| l.starts_with(k)))
}

/// The host pid and uid of the job's Node (its pid 2) in the job cgroup named `cgroup`,
/// once its files are laid (its `/runtime/main` exists) and it had a moment to read its
/// input; waits at most 20 s, or until `ended` (the job's run) says the job is over.
fn node_of(cgroup: &str, ended: &dyn Fn() -> bool) -> Option<(i32, u64)> {
    for _ in 0..400 {
        if ended() {
            return None;
        }
        for p in sandbox_processes(cgroup) {
            let status =
                std::fs::read_to_string(format!("/proc/{}/status", p.pid)).unwrap_or_default();
            let pid2 = status
                .lines()
                .any(|l| l.starts_with("NSpid:") && l.trim_end().ends_with("\t2"));
            let laid =
                std::fs::symlink_metadata(format!("/proc/{}/root/runtime/main", p.pid)).is_ok();
            // Node's process, not the init stage's before its exec.
            let node = std::fs::read_link(format!("/proc/{}/exe", p.pid))
                .is_ok_and(|exe| exe.file_name().is_some_and(|n| n == "node"));
            if pid2 && laid && node {
                std::thread::sleep(std::time::Duration::from_millis(500));
                return Some((p.pid, p.uid));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no Node of the job in cgroup {cgroup} within 20 s");
}

/// `setpriv` that runs the command it is given as the host's uid 0 without any capability.
fn without_capabilities() -> std::process::Command {
    let mut c = std::process::Command::new("setpriv");
    c.args(["--bounding-set", "-all", "--inh-caps", "-all"])
        .args(["--ambient-caps", "-all"]);
    c
}

/// Whether a process of the host's uid 0 holding no capability reads `/proc/<pid>/environ`.
/// For a target of the same uids with no capability either (pid 1 once it dropped them),
/// the kernel then refuses only a target that is not dumpable.
fn environ_read_without_capabilities(pid: i32) -> String {
    let out = without_capabilities()
        .args(["head", "-c", "1"])
        .arg(format!("/proc/{pid}/environ"))
        .output()
        .expect("setpriv (util-linux) runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        "environ read by uid 0 without capabilities: yes".into()
    } else if stderr.contains("Permission denied") {
        "environ read by uid 0 without capabilities: no".into()
    } else {
        // Gone, or any other failure: it would tell nothing of dumpability.
        panic!("pid {pid}'s environ could not be tried: {}", stderr.trim())
    }
}

/// The reader of [`environ_read_without_capabilities`] reads a dumpable process of the
/// host's uid 0 without capabilities: its "no" for pid 1 is pid 1's being not dumpable.
fn environ_reader_reads_a_dumpable_process() {
    let mut control = without_capabilities()
        .args(["sleep", "30"])
        .spawn()
        .expect("setpriv (util-linux) runs");
    let pid = i32::try_from(control.id()).expect("a pid");
    // Until setpriv has dropped its capabilities and become `sleep`.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default() != "sleep\n"
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let read = environ_read_without_capabilities(pid);
    let _ = control.kill();
    let _ = control.wait();
    assert_eq!(
        read, "environ read by uid 0 without capabilities: yes",
        "the control: a dumpable process without capabilities"
    );
}

/// What the job's pid 1 (Node's parent) holds while the tool runs: its capabilities and
/// no_new_privs, as the host sees them, whether it is dumpable, and where its working
/// directory is.
fn pid_one_privileges(node: i32) -> Value {
    let status =
        |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let Some(pid_one) = status(node)
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse::<i32>().ok())
    else {
        return json!("no parent");
    };
    let mut lines: Vec<String> = status_lines(&status(pid_one), &["NSpid:"])
        .map(|l| {
            // The host's pid differs from job to job: the job's own (1) tells enough.
            match l.strip_prefix("NSpid:") {
                Some(v) => format!("NSpid: {}", v.split_whitespace().last().unwrap_or("?")),
                None => l.split_whitespace().collect::<Vec<_>>().join(" "),
            }
        })
        .collect();
    lines.push(environ_read_without_capabilities(pid_one));
    lines.push(working_directory_is_root(pid_one));
    json!(lines)
}

/// Whether the working directory of `pid` is its root (the same directory, as the host
/// sees both), or somewhere else: for the job's pid 1, a way into the host's tree.
fn working_directory_is_root(pid: i32) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let id = |link: &str| {
        let m = std::fs::metadata(format!("/proc/{pid}/{link}"))
            .unwrap_or_else(|e| panic!("pid {pid}'s {link}: {e}"));
        (m.dev(), m.ino())
    };
    if id("cwd") == id("root") {
        "working directory: its root".into()
    } else {
        format!(
            "working directory: {} outside its root",
            std::fs::read_link(format!("/proc/{pid}/cwd"))
                .map_or("(unreadable)".into(), |p| p.display().to_string())
        )
    }
}

/// The parent of `pid` (0 once it is gone).
fn ppid(pid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The nice values of the job's pid 1 (Node's parent) and of the init stage (pid 1's).
fn pid_one_and_init_nice(node: i32) -> Vec<String> {
    let nice = |pid: i32| -> String {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let after = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
        after.split(' ').nth(16).unwrap_or("?").to_string()
    };
    let pid_one = ppid(node);
    vec![nice(pid_one), nice(ppid(pid_one))]
}

/// How many descriptors the init stage (the parent of Node's parent, pid 1) holds open.
fn init_descriptors(node: i32) -> usize {
    let init = ppid(ppid(node));
    std::fs::read_dir(format!("/proc/{init}/fd"))
        .unwrap_or_else(|e| panic!("the init stage's descriptors (pid {init}): {e}"))
        .count()
}

/// Runs `job` on a thread while the host looks at its Node (`node_of`): its result and
/// the host's snapshot, or a failure naming the result of a job that ended first.
fn run_watched(cgroup: &str, job: impl FnOnce() -> Value + Send) -> (Value, Value) {
    std::thread::scope(|s| {
        let run = s.spawn(job);
        let found = node_of(cgroup, &|| run.is_finished());
        let host = found.map(|(pid, uid)| {
            let mut host = snapshot(pid, uid);
            host["pid1_and_init_nice"] = json!(pid_one_and_init_nice(pid));
            host["pid1_privileges"] = pid_one_privileges(pid);
            // A warm sandbox's init stage holds no more than a cold job's: before, it kept
            // its copy of the hand-over's pipe, which only pid 1 is to hold.
            host["init_descriptors"] = json!(init_descriptors(pid));
            host
        });
        let result = run.join().expect("the job's thread");
        match host {
            Some(host) => (result, host),
            None => {
                panic!("the job in cgroup {cgroup} ended before the host saw its Node: {result}")
            }
        }
    })
}

/// The name of a warm sandbox's cgroup, which `run_watched` looks for.
fn cgroup_name(sandbox: &WarmSandbox) -> String {
    sandbox.cgroup_paths()[0]
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .expect("a cgroup name")
}

/// What pid 1 holds once it has shed its privileges: no capability, no_new_privs, not
/// dumpable, and no working directory outside the job's root (as `pid_one_privileges`
/// reads it).
fn pid_one_shed() -> Value {
    let none = "0000000000000000";
    json!([
        "NSpid: 1",
        format!("CapInh: {none}"),
        format!("CapPrm: {none}"),
        format!("CapEff: {none}"),
        format!("CapBnd: {none}"),
        format!("CapAmb: {none}"),
        "NoNewPrivs: 1",
        "environ read by uid 0 without capabilities: no",
        "working directory: its root",
    ])
}

/// A warm sandbox's pid 1 sheds its privileges before it reports the hand-over, the
/// report after which the runner lets the tool run. The test hook
/// `runner.hand_over_pause_ms` holds pid 1 right after that report, for the whole of
/// the tool's run, and the host finds it holding nothing. Before, the report came
/// first: the tool's code could run beside a pid 1 still holding every capability, not
/// yet no_new_privs and still dumpable (and a shed that failed then was reported as a
/// sandbox that never ran the tool).
#[test]
fn a_warm_sandboxs_pid_one_holds_nothing_once_the_tool_may_run() {
    let setup = Setup::with(|c| c.runner.hand_over_pause_ms = 4000);
    let sandbox = setup.warm(Shape::default_job());
    let name = cgroup_name(&sandbox);
    let source = Given::of(vec![sandbox]);
    let (hot, host) = run_watched(&name, || {
        setup.run_with(code_job("warm-shed", VIEW, json!({"x": 1})), &source)
    });
    assert_eq!(source.left(), 0, "the job took the warm sandbox");
    assert_status(&hot, "ok", None);
    assert_eq!(host["pid1_privileges"], pid_one_shed(), "{host}");
    environ_reader_reads_a_dumpable_process();
    setup.assert_clean(&["warm-shed"]);
}

/// A cold job's tool waits before its exec until pid 1 has shed its privileges: the test
/// hook `runner.hand_over_pause_ms` holds a cold job's pid 1 between forking the tool and
/// its shed, and by the time the host sees Node, pid 1 holds nothing. Before, the tool's
/// process went on to exec Node at once (the go byte follows the plan), and a pid 1 slow
/// to be scheduled held every capability beside the running tool.
#[test]
fn a_cold_jobs_pid_one_holds_nothing_once_the_tool_may_run() {
    let setup = Setup::with(|c| c.runner.hand_over_pause_ms = 1500);
    let (cold, host) = run_watched("cold-shed.", || {
        setup.cold(code_job("cold-shed", VIEW, json!({"x": 1})))
    });
    assert_status(&cold, "ok", None);
    assert_eq!(host["pid1_privileges"], pid_one_shed(), "{host}");
    assert!(
        cold["wall_ms"].as_u64().is_some_and(|w| w >= 1500),
        "the tool waited for pid 1's shed: {cold}"
    );
    setup.assert_clean(&["cold-shed"]);
}

#[test]
fn a_warm_job_sees_what_a_cold_job_sees_and_gets_the_same_result() {
    let setup = Setup::new();
    let input = json!({"text": "hello warm world"});
    let (cold, cold_host) = run_watched("warm-view-cold.", || {
        setup.cold(code_job("warm-view-cold", VIEW, input.clone()))
    });
    assert_status(&cold, "ok", None);
    let sandbox = setup.warm(Shape::default_job());
    let name = cgroup_name(&sandbox);
    let source = Given::of(vec![sandbox]);
    let (hot, hot_host) = run_watched(&name, || {
        setup.run_with(code_job("warm-view-warm", VIEW, input.clone()), &source)
    });
    assert_eq!(source.left(), 0, "the job took the warm sandbox");
    assert_status(&hot, "ok", None);
    // The result's form: every field a cold result has, no other.
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&hot), keys(&cold));
    let (c, w) = (&cold["output"], &hot["output"]);
    assert_eq!(w["input"], input, "the tool read exactly its input");
    assert_eq!(w["argv"][1], "/skill/tool.js");
    assert_eq!(w["main"], "/skill/tool.js");
    assert_ne!(w["write_skill"], "ok");
    assert_ne!(w["write_root"], "ok");
    // The gid is the job's own uid, taken from a random place of the range: each job's
    // differs, warm or cold.
    for v in [w, c] {
        assert!(
            v["gid"].as_u64().is_some_and(|g| g >= SANDBOX_UID_BASE),
            "{v}"
        );
    }
    for field in c.as_object().expect("object").keys() {
        if field == "gid" {
            continue;
        }
        assert_eq!(
            w[field], c[field],
            "a warm tool sees {field} differently from a cold one"
        );
    }
    // The runner here is this process: a cold job inherits its nice value (0 unless the
    // suite runs under `nice`), and a warm one is set back to it at the hand-over.
    let own = openvibe_skill_runner::supervise::runner_nice().to_string();
    assert_eq!(
        hot_host["nice"],
        json!([own]),
        "every thread of the tool back at the runner's nice value"
    );
    assert_eq!(
        (&hot_host["pid1_and_init_nice"], &cold_host["pid1_and_init_nice"]),
        (&json!([own, own]), &json!([own, own])),
        "pid 1 and the init stage, which reap the tool and relay its end, at the runner's nice value as a cold job's"
    );
    // Pid 1 reaps the tool and relays its end, and holds nothing more for it, warm or
    // cold (compared below).
    assert_eq!(cold_host["pid1_privileges"], pid_one_shed(), "{cold_host}");
    environ_reader_reads_a_dumpable_process();
    assert!(
        hot_host["tree"]
            .as_array()
            .map(|t| t
                .iter()
                .any(|l| l.as_str().unwrap_or("").starts_with("skill/tool.js ")))
            .unwrap_or(false),
        "the host sees the tool's file in its root: {}",
        hot_host["tree"]
    );
    for field in cold_host.as_object().expect("object").keys() {
        assert_eq!(
            hot_host[field], cold_host[field],
            "the host sees the warm job's {field} differently from a cold one's"
        );
    }
    setup.assert_clean(&["warm-view"]);
}

#[test]
fn a_warm_jobs_figures_are_its_own() {
    let setup = Setup::new();
    let tool = "let d='';process.stdin.on('data',c=>d+=c);process.stdin.on('end',()=>process.stdout.write(d));";
    let cold = setup.cold(code_job("warm-fig-cold", tool, json!({"n": 1})));
    let mut sandbox = setup.warm(Shape::default_job());
    until_ready(&mut sandbox);
    // The warm-up's CPU is in the cgroup now; the job's figures must not carry it.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let source = Given::of(vec![sandbox]);
    let hot = setup.run_with(code_job("warm-fig-warm", tool, json!({"n": 1})), &source);
    assert_status(&cold, "ok", None);
    assert_status(&hot, "ok", None);
    assert_eq!(hot["output"], json!({"n": 1}));
    let (cc, wc) = (
        cold["cpu_ms"].as_u64().unwrap_or(0),
        hot["cpu_ms"].as_u64().unwrap_or(u64::MAX),
    );
    assert!(
        wc < cc,
        "the warm job's cpu_ms {wc} must leave out Node's start, which the cold job's {cc} holds"
    );
    let (cw, ww) = (
        cold["wall_ms"].as_u64().unwrap_or(0),
        hot["wall_ms"].as_u64().unwrap_or(u64::MAX),
    );
    assert!(
        ww < cw,
        "the warm job's wall_ms {ww} counts from the hand-over (cold {cw})"
    );
    let peak = hot["mem_peak_bytes"].as_u64().unwrap_or(0);
    assert!(peak > 0 && peak <= 134_217_728, "mem_peak_bytes {peak}");
    setup.assert_clean(&["warm-fig"]);
}

/// The memory limit is the job's: a bounded memory bomb in a warm sandbox of its shape
/// ends `limit`/`memory` (the limit is applied when the sandbox is made, before any job).
#[test]
fn a_warm_job_is_held_to_its_memory_limit() {
    let setup = Setup::new();
    let mem = 64 * 1024 * 1024;
    let shape = Shape {
        net: openvibe_skill_runner::job::Net::Deny,
        mem_bytes: mem,
    };
    let sandbox = setup.warm(shape);
    let limit = std::fs::read_to_string(
        sandbox
            .cgroup_paths()
            .iter()
            .map(|d| d.join("memory.limit_in_bytes"))
            .chain(sandbox.cgroup_paths().iter().map(|d| d.join("memory.max")))
            .find(|f| f.exists())
            .expect("the warm sandbox has a memory limit file"),
    )
    .expect("read the limit");
    assert_eq!(
        limit.trim(),
        mem.to_string(),
        "the limit is applied before any job runs"
    );
    // Bounded: at most 512 MiB of buffers, far below the machine's memory.
    let bomb = "const k=[];for(let i=0;i<512;i++){k.push(Buffer.alloc(1<<20,1));}process.stdout.write('{}');";
    let mut job = code_job("warm-bomb", bomb, json!({}));
    job["limits"]["mem_bytes"] = json!(mem);
    let source = Given::of(vec![sandbox]);
    let result = setup.run_with(job, &source);
    assert_eq!(
        source.left(),
        0,
        "the job took the warm sandbox of its shape"
    );
    assert_status(&result, "limit", Some("memory"));
    setup.assert_clean(&["warm-bomb"]);
}

/// A folder already there under a warm sandbox's name is another's (a runner of the same
/// pid in another pid namespace): the warm-up fails and leaves it as it was.
#[test]
fn a_warm_up_whose_folder_is_taken_fails_and_leaves_the_folder_alone() {
    let setup = Setup::new();
    let name = format!("{}0", warm_prefix());
    let theirs = setup.engine.jobs_dir().join(&name);
    std::fs::create_dir_all(theirs.join("root")).expect("another's folder");
    std::fs::write(theirs.join("root/marker"), "theirs").expect("its file");
    let made = setup
        .rt
        .block_on(setup.engine.warm_up_named(Shape::default_job(), &name));
    let e = made.err().expect("the name is taken");
    assert!(
        e.contains("cannot create the warm sandbox's directory") && e.contains("exists"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(theirs.join("root/marker"))
            .ok()
            .as_deref(),
        Some("theirs"),
        "the other folder was touched"
    );
    std::fs::remove_dir_all(&theirs).expect("the test's folder removed");
    setup.assert_clean(&[]);
}

/// A warm sandbox dropped without its discard, as a panic in the engine drops it, leaves
/// no process, cgroup or folder behind (only its uid stays taken).
#[test]
fn a_warm_sandbox_dropped_by_a_panic_leaves_nothing_behind() {
    let setup = Setup::new();
    let mut sandbox = setup.warm(Shape::default_job());
    until_ready(&mut sandbox);
    let cgroups = sandbox.cgroup_paths().to_vec();
    let unwound = setup.rt.block_on(setup.rt.spawn(async move {
        let _held = sandbox;
        panic!("a bug in the engine while it holds a warm sandbox");
    }));
    assert!(unwound.is_err_and(|e| e.is_panic()));
    // The cgroup is removed on the runtime's blocking threads, after its processes.
    for _ in 0..250 {
        if cgroups.iter().all(|c| !c.exists()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    setup.assert_clean(&[]);
}

/// A job whose shape has no warm sandbox runs cold, and the sandbox stays for its own.
#[test]
fn a_job_of_another_shape_runs_cold() {
    let setup = Setup::new();
    let sandbox = setup.warm(Shape::default_job());
    let source = Given::of(vec![sandbox]);
    let mut job = code_job(
        "warm-shape",
        "process.stdout.write('{\"ok\":1}')",
        json!({}),
    );
    job["limits"]["mem_bytes"] = json!(96 * 1024 * 1024);
    let result = setup.run_with(job, &source);
    assert_status(&result, "ok", None);
    assert_eq!(
        source.left(),
        1,
        "the warm sandbox of another shape was not used"
    );
    let left = source
        .0
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .pop()
        .expect("one left");
    setup.rt.block_on(left.discard());
    setup.assert_clean(&["warm-shape"]);
}

/// A warm sandbox whose cgroup reached a limit before its job (here its pids limit, met by
/// a fork of a process this test started and put there) is not used: the job runs cold
/// and is judged by its own run. Before, the sandbox's lifetime flag judged it: a tool
/// that exits 1 ended `limit`/`pids` instead of `error`/`exit`.
#[test]
fn a_sandbox_that_reached_a_limit_before_its_job_is_not_used() {
    use std::io::Write as _;
    let setup = Setup::new();
    let mut sandbox = setup.warm(Shape::default_job());
    until_ready(&mut sandbox);
    let pids = sandbox
        .cgroup_paths()
        .iter()
        .find(|d| d.join("pids.max").exists())
        .cloned()
        .expect("the warm sandbox's pids cgroup");
    let mut child = std::process::Command::new("sh")
        .args(["-c", "read x; /bin/true; /bin/true"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn sh");
    std::fs::write(pids.join("cgroup.procs"), child.id().to_string()).expect("put sh there");
    let current = std::fs::read_to_string(pids.join("pids.current")).expect("pids.current");
    std::fs::write(pids.join("pids.max"), current.trim()).expect("lower pids.max");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("release sh");
    let _ = child.wait();
    let events = std::fs::read_to_string(pids.join("pids.events")).expect("pids.events");
    assert!(!events.contains("max 0"), "the fork was refused: {events}");
    let source = Given::of(vec![sandbox]);
    let result = setup.run_with(
        code_job("warm-limited", "process.exit(1)", json!({})),
        &source,
    );
    assert_eq!(source.left(), 0, "the sandbox was taken, and discarded");
    assert_status(&result, "error", Some("exit"));
    setup.assert_clean(&["warm-limited"]);
}

/// Kills every process of a warm sandbox while it waits, and waits until it shows dead.
/// Only processes this test started: those in the warm sandbox's own cgroup.
fn kill_while_waiting(dead: &mut WarmSandbox) {
    let procs: Vec<i32> = dead
        .cgroup_paths()
        .iter()
        .filter_map(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
        .flat_map(|t| {
            t.lines()
                .filter_map(|l| l.trim().parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!procs.is_empty(), "the warm sandbox has processes");
    for pid in procs {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    for _ in 0..100 {
        if !dead.is_alive() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A warm sandbox whose processes died while it waited is discarded at the hand-over and
/// the job runs cold, nothing of it lost.
#[test]
fn a_sandbox_that_died_waiting_gives_way_to_a_cold_run() {
    let setup = Setup::new();
    let tool = "let d='';process.stdin.on('data',c=>d+=c);process.stdin.on('end',()=>process.stdout.write(d));";
    let mut dead = setup.warm(Shape::default_job());
    until_ready(&mut dead);
    kill_while_waiting(&mut dead);
    let source = Given::of(vec![dead]);
    let result = setup.run_with(code_job("warm-dead", tool, json!({"dead": true})), &source);
    assert_eq!(source.left(), 0);
    assert_eq!(source.failed(), 1, "the source is told: no hit");
    assert_status(&result, "ok", None);
    assert_eq!(result["output"], json!({"dead": true}));
    setup.assert_clean(&["warm-dead"]);
}

/// When a [`Cancels`] cancels its job.
#[derive(Debug, Clone, Copy, PartialEq)]
enum At {
    /// As it hands a sandbox out: after the take, before the hand-over.
    Take,
    /// When a sandbox fails at its hand-over: between the failure and the cold run that
    /// would follow.
    Failure,
}

/// Hands out the sandboxes of a [`Given`], and cancels the job at the moment named.
struct Cancels(Given, Cancel, At);

impl Cancels {
    fn at(at: At, sandbox: WarmSandbox, cancel: &Cancel) -> Cancels {
        Cancels(Given::of(vec![sandbox]), cancel.clone(), at)
    }

    fn cancel_at(&self, now: At) {
        if self.2 == now {
            self.1
                .cancel(openvibe_skill_runner::cancel::Cause::Requested);
        }
    }
}

impl WarmSource for Cancels {
    fn take(&self, shape: Shape) -> Option<WarmSandbox> {
        let taken = self.0.take(shape);
        self.cancel_at(At::Take);
        taken
    }

    fn hand_over_failed(&self) {
        self.0.hand_over_failed();
        self.cancel_at(At::Failure);
    }
}

/// A job cancelled before its tool starts never starts it, warm as cold, and its result
/// says so. Cancelled before a warm sandbox is taken, it takes none (the sandbox waits on
/// for another job); cancelled once it has one, the hand-over's go is never given and the
/// sandbox is discarded. Before, the go byte was written beside the cancel, and the tool
/// could run until the kill reached it (a race the kill mostly won, so the result's
/// "cancelled" without "before it started" is what showed it).
#[test]
fn a_job_cancelled_before_its_warm_tool_starts_never_starts_it() {
    use openvibe_skill_runner::cancel::Cause;
    let setup = Setup::new();
    let tool = "require('fs').writeSync(2, 'ran\\n'); setTimeout(() => {}, 5000);";
    let never_ran = |r: &Value, what: &str| {
        assert_eq!(r["status"], "cancelled", "{what}: {r}");
        assert_eq!(
            r["message"], "the job was cancelled before it started",
            "{what}: {r}"
        );
        assert!(
            !r["stderr"].as_str().unwrap_or("").contains("ran"),
            "{what}: the tool ran: {r}"
        );
    };
    for round in 0..3 {
        // Cancelled before it reaches the pool: no sandbox taken.
        let mut spare = setup.warm(Shape::default_job());
        until_ready(&mut spare);
        let source = Given::of(vec![spare]);
        let cancel = Cancel::new();
        cancel.cancel(Cause::Requested);
        let id = format!("warm-cancel-before-{round}");
        let r = setup.run_cancellable(code_job(&id, tool, json!({})), &source, &cancel);
        never_ran(&r, "cancelled before the take");
        assert_eq!(source.left(), 1, "a cancelled job takes no warm sandbox");
        for s in std::mem::take(&mut *source.0.lock().unwrap_or_else(|p| p.into_inner())) {
            setup.rt.block_on(s.discard());
        }
        // Cancelled once it holds one.
        let mut held = setup.warm(Shape::default_job());
        until_ready(&mut held);
        let cancel = Cancel::new();
        let source = Cancels::at(At::Take, held, &cancel);
        let id = format!("warm-cancel-at-{round}");
        let r = setup.run_cancellable(code_job(&id, tool, json!({})), &source, &cancel);
        assert_eq!(source.0.left(), 0, "the job took the warm sandbox");
        never_ran(&r, "cancelled after the take");
    }
    // Cancelled once it holds one that died waiting, at the take (the cancel then ends
    // the hand-over's wait at once) or as its hand-over fails: no cold sandbox is made for
    // it either. Before, the failed hand-over went on to a cold run whose tool the
    // withheld go never started, and the result said it had started.
    for (at, id) in [
        (At::Take, "warm-cancel-dead"),
        (At::Failure, "warm-cancel-fails"),
    ] {
        let mut dead = setup.warm(Shape::default_job());
        until_ready(&mut dead);
        kill_while_waiting(&mut dead);
        let cancel = Cancel::new();
        let source = Cancels::at(at, dead, &cancel);
        let r = setup.run_cancellable(code_job(id, tool, json!({})), &source, &cancel);
        assert_eq!(source.0.left(), 0, "{at:?}: the job took the dead sandbox");
        if at == At::Failure {
            assert_eq!(source.0.failed(), 1, "the hand-over failed");
        }
        never_ran(&r, &format!("cancelled at {at:?}, over a dead sandbox"));
        assert_eq!(r["wall_ms"], 0, "{at:?}: no cold sandbox ran: {r}");
    }
    setup.assert_clean(&["warm-cancel"]);
}

/// A tool aimed at the pool: from a warm sandbox it looks for the hand-over's pipe (its
/// descriptors, pid 1's), and for the other warm sandbox waiting beside it: it signals
/// every process it may (`kill(-1)`) and probes every pid it can guess. It does so only
/// once it has checked the pid namespace holds (it is pid 2, its parent pid 1), so that
/// nothing outside is ever at risk. The other sandbox must still wait, untouched, and
/// serve the next job.
const AIMED: &str = r#"
const fs = require('fs');
const code = (f) => { try { f(); return 'ok'; } catch (e) { return e.code || e.message; } };
// The pid namespace holds: this is pid 2 of its own, its parent the job's pid 1.
const held = process.pid === 2 && process.ppid === 1;
const out = { held, pid: process.pid, ppid: process.ppid };
// No descriptor but Node's own: the pipes beside stdin, stdout and stderr are the ones
// a cold job's Node has (libuv's own), the hand-over's is not among them.
out.pipes = [];
for (let fd = 3; fd < 64; fd++) {
  try { if (fs.fstatSync(fd).isFIFO()) out.pipes.push(fd); } catch (e) { /* not open */ }
}
out.pid1_fd = code(() => fs.readdirSync('/proc/1/fd'));
out.pid1_warm = code(() => fs.openSync('/proc/1/fd/6', 'r'));
if (held) {
  out.kill_all = code(() => process.kill(-1, 'SIGKILL'));
  // Every pid that answers: a cold job's Node answers for its own threads' ids alone.
  out.guessed = [];
  for (let pid = 1; pid < 4096; pid++) {
    if (pid !== 2 && code(() => process.kill(pid, 0)) === 'ok') out.guessed.push(pid);
  }
}
process.stdout.write(JSON.stringify(out));
"#;

#[test]
fn a_tool_aimed_at_the_pool_reaches_nothing_of_it() {
    let setup = Setup::new();
    // The same tool cold: what Node itself holds.
    let cold = setup.cold(code_job("warm-aimed-cold", AIMED, json!({})));
    assert_status(&cold, "ok", None);
    assert_eq!(cold["output"]["held"], true, "{cold}");
    let mut first = setup.warm(Shape::default_job());
    let mut second = setup.warm(Shape::default_job());
    until_ready(&mut first);
    until_ready(&mut second);
    let source = Given::of(vec![first]);
    let result = setup.run_with(code_job("warm-aimed", AIMED, json!({})), &source);
    assert_status(&result, "ok", None);
    let out = &result["output"];
    assert_eq!(
        out["held"], true,
        "the pid namespace must hold before the attack: {out}"
    );
    assert_eq!(
        out["pipes"], cold["output"]["pipes"],
        "a pipe in the warm tool that a cold one does not have: {out}"
    );
    // Node's permission model answers these first (it proves only that); the host-side
    // look in the view test shows the descriptors themselves.
    assert_ne!(out["pid1_fd"], "ok", "{out}");
    assert_ne!(out["pid1_warm"], "ok", "{out}");
    assert_eq!(
        out["guessed"], cold["output"]["guessed"],
        "no pid but its own threads' answers a signal: {out}"
    );
    // The sandbox beside it waited through all of it and serves the next job.
    assert!(
        second.is_alive() && second.is_ready(),
        "the other warm sandbox was reached"
    );
    let source = Given::of(vec![second]);
    let next = setup.run_with(
        code_job(
            "warm-next",
            "process.stdout.write('{\"next\":1}')",
            json!({}),
        ),
        &source,
    );
    assert_status(&next, "ok", None);
    assert_eq!(next["output"], json!({"next": 1}));
    setup.assert_clean(&["warm-aimed", "warm-next"]);
}

/// A tool that tries to stay alive to be reused (a timer that never ends, SIGTERM
/// ignored) is killed at its wall clock like any job, and its sandbox is torn down: no
/// process, cgroup or folder of it is left for another job to land in.
#[test]
fn a_tool_staying_alive_is_torn_down_with_its_sandbox() {
    let setup = Setup::new();
    let sandbox = setup.warm(Shape::default_job());
    let source = Given::of(vec![sandbox]);
    let stay = "process.on('SIGTERM',()=>{});process.stdout.write('{}');setInterval(()=>{},1000);";
    let mut job = code_job("warm-stay", stay, json!({}));
    job["limits"]["wall_ms"] = json!(1500);
    let result = setup.run_with(job, &source);
    assert_status(&result, "limit", Some("wall"));
    setup.assert_clean(&["warm-stay"]);
}

/// How a tool ends, as the preload reports it to the runner (`supervise::END_RECORD`):
/// the same code, stdout and stderr whether the job ran warm or cold, and whether Node
/// ended by itself, through `process.exit()`, with an exit listener that writes and sets
/// the code, or on an uncaught exception, which Node prints after its exit listeners (the
/// preload then reports nothing, and the runner waits for Node's end).
#[test]
fn a_tool_ends_the_same_warm_and_cold_however_it_ends() {
    let setup = Setup::new();
    let ends = [
        ("natural", "process.stdout.write('{\"n\":1}')", 0),
        ("exit-3", "process.stdout.write('{\"n\":3}');process.exit(3)", 3),
        (
            "listener",
            "process.on('exit',()=>{process.stdout.write('{\"late\":1}');process.stderr.write('said');process.exitCode=5})",
            5,
        ),
        ("code-256", "process.exitCode=256", 0),
        ("code-neg", "process.exitCode=-1", 255),
        ("throw", "process.stdout.write('{}');throw new Error('boom')", 1),
        ("reject", "Promise.reject(new Error('rejected'))", 1),
    ];
    let mut sandboxes = Vec::new();
    for _ in ends {
        sandboxes.push(setup.warm(Shape::default_job()));
    }
    let source = Given::of(sandboxes);
    for (name, code, exit) in ends {
        let cold = setup.cold(code_job(&format!("warm-end-{name}-c"), code, json!({})));
        let warm = setup.run_with(
            code_job(&format!("warm-end-{name}-w"), code, json!({})),
            &source,
        );
        assert_eq!(cold["exit_code"], json!(exit), "{name}, cold: {cold}");
        for field in [
            "status",
            "reason",
            "output",
            "exit_code",
            "signal",
            "stderr",
            "stderr_truncated",
        ] {
            assert_eq!(
                warm[field], cold[field],
                "{name}: {field}, warm {warm} cold {cold}"
            );
        }
        let stderr = warm["stderr"].as_str().unwrap_or_default();
        assert!(
            !stderr.contains("openvibe-skill-runner:end:"),
            "{name}: the record left in stderr: {warm}"
        );
        if name == "throw" || name == "reject" {
            assert!(
                stderr.contains("Error: "),
                "{name}: the uncaught error is printed whole: {warm}"
            );
        }
    }
    assert_eq!(source.left(), 0, "every job ran warm");
    setup.assert_clean(&["warm-end"]);
}

/// A tool ends its job at the preload's end record, wherever it comes from: one that
/// writes the record itself and stays alive, or that has Node emit its exit event as at
/// its end and stays alive, gets the code it named at once (not its wall clock), and the
/// sandbox, its Node still running at the answer, is removed after it.
#[test]
fn the_end_record_ends_the_job_and_what_still_runs_is_removed() {
    let setup = Setup::new();
    let stay = "setInterval(()=>{},1000);process.on('SIGTERM',()=>{});";
    let tools = [
        (
            "record",
            format!("process.stdout.write('{{\"early\":1}}');process.stderr.write('before');require('fs').writeSync(2,'\\u0000openvibe-skill-runner:end:7\\n');{stay}"),
            7,
            "before",
        ),
        (
            "emitted",
            format!("process.stdout.write('{{\"early\":1}}');process._exiting=true;process.emit('exit',9);{stay}"),
            9,
            "",
        ),
    ];
    for (name, code, exit, stderr) in &tools {
        let mut cold_job = code_job(&format!("warm-rec-{name}-c"), code, json!({}));
        cold_job["limits"]["wall_ms"] = json!(20000);
        let mut warm_job = code_job(&format!("warm-rec-{name}-w"), code, json!({}));
        warm_job["limits"]["wall_ms"] = json!(20000);
        let cold = setup.cold(cold_job);
        let source = Given::of(vec![setup.warm(Shape::default_job())]);
        let warm = setup.run_with(warm_job, &source);
        for result in [&cold, &warm] {
            assert_status(result, "error", Some("exit"));
            assert_eq!(result["exit_code"], json!(exit), "{name}: {result}");
            assert_eq!(result["stderr"], json!(stderr), "{name}: {result}");
        }
        assert_eq!(source.left(), 0, "{name} ran warm");
    }
    setup.assert_clean(&["warm-rec"]);
}

/// The CPU time (ns) every thread of the sandbox's processes has run, from each task's
/// `schedstat`.
fn sandbox_cpu_ns(cgroup: &str) -> u64 {
    sandbox_processes(cgroup)
        .iter()
        .flat_map(|p| {
            std::fs::read_dir(format!("/proc/{}/task", p.pid))
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// A warm sandbox is ready only once its Node waits at the preload's gate, its start
/// done: what is left of that start would count in the first job's `cpu_ms` and
/// `wall_ms`, under its limits. From the moment the warm-up returns, its processes run
/// next to nothing (Node's start takes some 30 ms of CPU), and Node's main thread waits
/// reading its stdin. Before, the sandbox was ready when pid 1 was about to execute Node.
#[test]
fn a_ready_warm_sandbox_has_its_nodes_start_behind_it() {
    let setup = Setup::new();
    let mut grown = Vec::new();
    for _ in 0..3 {
        let sandbox = setup.warm(Shape::default_job());
        let cgroup = cgroup_name(&sandbox);
        let at_ready = sandbox_cpu_ns(&cgroup);
        std::thread::sleep(std::time::Duration::from_millis(300));
        grown.push((sandbox_cpu_ns(&cgroup) - at_ready) / 1_000_000);
        let node = sandbox_processes(&cgroup)
            .into_iter()
            .find(|p| {
                std::fs::read_to_string(format!("/proc/{}/status", p.pid))
                    .unwrap_or_default()
                    .lines()
                    .any(|l| l.starts_with("NSpid:") && l.trim_end().ends_with("\t2"))
            })
            .expect("the sandbox's Node");
        let syscall =
            std::fs::read_to_string(format!("/proc/{}/syscall", node.pid)).unwrap_or_default();
        assert!(
            syscall.starts_with("0 0x0 "),
            "Node waits in read(0, …) at its gate: {syscall}"
        );
        setup.rt.block_on(sandbox.discard());
    }
    assert!(
        grown.iter().all(|&ms| ms < 8),
        "CPU ms the sandbox ran in the 300 ms after it was ready: {grown:?}"
    );
    setup.assert_clean(&[]);
}
