//! The layer matrix (issue 15): every attack class run with layers of the sandbox left out
//! (`runner.omit_layers`, a test hook only a `test-hooks` build honours), in three parts:
//!
//! - **defence in depth**: Node's hardening on, one layer left out. Every attack must still
//!   fail, except in the cells the README's table names.
//! - **the OS layers**: Node's permission model and preload left out (a compromised Node),
//!   and one OS layer more. A cell where the attack gets through shows the layer left out
//!   is the only OS layer between that attack and the host; a cell where it still fails
//!   shows the others hold it.
//! - **alone** (`every_layer_alone`): each layer with every other left out (but what it
//!   needs to exist: the root lives in the mount namespace, the preload in the root), run
//!   against the attacks the README says it stops ([`meant_to_stop`]); each must hold. The
//!   README's claims that do not hold alone are cells that must get through
//!   ([`alone_gaps`]), with why.
//!
//! Every attack (`test-skills/layer-matrix/attack.js`) aims only at what this test made and
//! owns: a canary file (0644) and folder (0777) in its own temporary folder, a canary
//! `sleep` it started, a TCP listener on the host's loopback, an abstract and a path unix
//! socket it bound, bounded bombs (512 MiB of memory, 200 processes or threads, each
//! process a `sleep` of under a minute; the cgroup's limit left out is raised to a safety
//! net, not removed). Whether an attack got through is judged
//! from the host where it can be (the folder not empty, the process gone, a connection
//! accepted) and from the tool's own report. A cell whose job did not run proves nothing
//! and fails the test. `scripts/test-layers` runs this test and prints the matrix.

use crate::common::*;
use openvibe_skill_runner::config::Config;
use openvibe_skill_runner::engine::Engine;
use openvibe_skill_runner::fault::Layer;
use serde_json::{json, Value};
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const MIB: u64 = 1024 * 1024;
/// The memory bombs stop here: four times the job's limit, far below the host's memory.
const BOUND_BYTES: u64 = 512 * MIB;
/// The process and thread bomb stops here: three times the pids limit (64).
const BOUND_PIDS: u64 = 200;
// A cgroup limit the matrix leaves out is raised to a safety net, not removed: far above
// the bombs' own bounds, so a bomb stops at its bound and the host never meets it.
const _: () = assert!(
    BOUND_BYTES * 4 <= openvibe_skill_runner::plan::OMITTED_MEM_BYTES
        && BOUND_PIDS * 16 <= openvibe_skill_runner::plan::OMITTED_PIDS_MAX
);
/// The canary process's command line marks it.
const CANARY_SECONDS: &str = "86399";
const JOB_PREFIX: &str = "itest-layers";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attack {
    ReadHostFile,
    WriteAnywhere,
    Spawn,
    SignalHostProcess,
    SeeHostProcesses,
    ReachNetwork,
    ReachAbstractSocket,
    ReachUnixSocket,
    MemoryOffHeap,
    MemoryOnHeap,
    ExhaustPids,
    OutliveWallClock,
    ReadHostIdentity,
}

const ATTACKS: [Attack; 13] = [
    Attack::ReadHostFile,
    Attack::WriteAnywhere,
    Attack::Spawn,
    Attack::SignalHostProcess,
    Attack::SeeHostProcesses,
    Attack::ReachNetwork,
    Attack::ReachAbstractSocket,
    Attack::ReachUnixSocket,
    Attack::MemoryOffHeap,
    Attack::MemoryOnHeap,
    Attack::ExhaustPids,
    Attack::OutliveWallClock,
    Attack::ReadHostIdentity,
];

impl Attack {
    fn name(self) -> &'static str {
        match self {
            Attack::ReadHostFile => "read_host_file",
            Attack::WriteAnywhere => "write_anywhere",
            Attack::Spawn => "spawn",
            Attack::SignalHostProcess => "signal_host_process",
            Attack::SeeHostProcesses => "see_host_processes",
            Attack::ReachNetwork => "reach_network",
            Attack::ReachAbstractSocket => "reach_abstract_socket",
            Attack::ReachUnixSocket => "reach_unix_socket",
            Attack::MemoryOffHeap => "memory_off_heap",
            Attack::MemoryOnHeap => "memory_on_heap",
            Attack::ExhaustPids => "exhaust_pids",
            Attack::OutliveWallClock => "outlive_wall_clock",
            Attack::ReadHostIdentity => "read_host_identity",
        }
    }

    /// Attacks whose job may end killed (a limit) rather than with a report.
    fn may_be_killed(self) -> bool {
        matches!(
            self,
            Attack::MemoryOffHeap
                | Attack::MemoryOnHeap
                | Attack::ExhaustPids
                | Attack::OutliveWallClock
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Node's hardening on, one layer left out.
    Depth,
    /// Node's permission model and preload left out, and one OS layer more.
    NodeOff,
    /// One layer alone: every other left out, but what it needs.
    Alone,
}

impl Part {
    fn label(self) -> &'static str {
        match self {
            Part::Depth => "left out",
            Part::NodeOff => "node off, left out",
            Part::Alone => "alone",
        }
    }

    /// The letter in the cell's job id.
    fn letter(self) -> &'static str {
        match self {
            Part::Depth => "a",
            Part::NodeOff => "b",
            Part::Alone => "c",
        }
    }

    /// The layers the first two parts leave out one at a time (`None`: only the part's
    /// own).
    fn layers(self) -> Vec<Option<Layer>> {
        let node = [Layer::NodePermission, Layer::Preload];
        std::iter::once(None)
            .chain(
                Layer::ALL
                    .into_iter()
                    .filter(|l| self == Part::Depth || !node.contains(l))
                    .map(Some),
            )
            .collect()
    }

    /// The layers a cell of this part leaves out, given its `layer`: the part's own and
    /// that one (the first two parts), or every layer but that one and what it [`needs`]
    /// (alone).
    fn omit(self, layer: Option<Layer>) -> Vec<Layer> {
        let mut omit = match self {
            Part::Depth => vec![],
            Part::NodeOff => vec![Layer::NodePermission, Layer::Preload],
            Part::Alone => {
                return Layer::ALL
                    .into_iter()
                    .filter(|l| Some(*l) != layer && !layer.is_some_and(|k| needs(k).contains(l)))
                    .collect()
            }
        };
        omit.extend(layer);
        omit
    }
}

/// What a layer cannot be without (the plan's implications, `plan::with_implied`, read
/// backwards): the job's root is mounted in the mount namespace, and the preload confines
/// loading to `/skill`, which only the root has. A layer alone keeps these.
fn needs(layer: Layer) -> &'static [Layer] {
    match layer {
        Layer::Root => &[Layer::MountNamespace],
        Layer::Preload => &[Layer::Root, Layer::MountNamespace],
        _ => &[],
    }
}

/// The attacks each layer is meant to stop on its own: the README's claims (the layer
/// matrix's table, whose "none: …" lists name the layers that stop each attack; Runtime
/// hardening for Node's permission model), as corrected by the alone cells. Each runs with
/// that layer alone (and what it [`needs`]) and must hold.
fn meant_to_stop(layer: Layer) -> &'static [Attack] {
    use Attack::*;
    match layer {
        // Host files (every read outside /skill: /proc and /etc too), writes, workers and
        // child processes.
        Layer::NodePermission => &[
            ReadHostFile,
            WriteAnywhere,
            Spawn,
            SeeHostProcesses,
            ExhaustPids,
            ReadHostIdentity,
        ],
        // Code that is not in the scanned files (`vm`, `data:` imports, `_compile`): no
        // attack class here; `codegen-routes` and `esm-url-tricks` prove it, since no other
        // layer stops JavaScript that compiles code.
        Layer::Preload => &[],
        Layer::Root => &[
            ReadHostFile,
            WriteAnywhere,
            ReachUnixSocket,
            ReadHostIdentity,
        ],
        // Only the space the root is mounted in: alone it holds nothing (alone_gaps).
        Layer::MountNamespace => &[],
        Layer::PidNamespace => &[SignalHostProcess],
        Layer::NetNamespace => &[ReachNetwork, ReachAbstractSocket],
        Layer::Privileges => &[SignalHostProcess],
        Layer::Landlock => &[
            ReadHostFile,
            WriteAnywhere,
            SignalHostProcess,
            ReachNetwork,
            ReachAbstractSocket,
        ],
        Layer::ExecGate => &[Spawn],
        Layer::Seccomp => &[WriteAnywhere, Spawn, ReachNetwork],
        Layer::MemoryLimit => &[MemoryOffHeap],
        Layer::PidsLimit => &[ExhaustPids],
    }
}

/// The alone cells that must get through, each with why: what a layer does not do on its
/// own although the README's table lists it among those that stop the attack (the other
/// layers of the full sandbox are what make it hold there), and the mount namespace, which
/// without the root has nothing mounted in it.
fn alone_gaps(layer: Layer) -> &'static [(Attack, &'static str)] {
    use Attack::*;
    const NO_ROOT: &str = "the mount namespace alone mounts nothing: the job sees the host's tree";
    match layer {
        Layer::MountNamespace => &[
            (ReadHostFile, NO_ROOT),
            (WriteAnywhere, NO_ROOT),
            (ReachUnixSocket, NO_ROOT),
            (ReadHostIdentity, NO_ROOT),
        ],
        Layer::Root => &[(
            SeeHostProcesses,
            "the job's /proc is its pid namespace's: without that namespace (and as root, whom hidepid does not hide from) it shows the host's processes",
        )],
        Layer::Landlock => &[(
            Spawn,
            "landlock lets Node and its loader execute (the first exec needs them), so a child Node starts; seccomp and the exec gate are what stop it",
        )],
        _ => &[],
    }
}

/// Why running `attack` with every other layer off is safe on a test host (`None`: not
/// vetted, never run alone). Each is aimed only at what the test made, and bounded.
fn safe_alone(attack: Attack) -> Option<&'static str> {
    use Attack::*;
    Some(match attack {
        ReadHostFile => "reads the test's own canary file",
        WriteAnywhere => "makes a folder in the test's own canary folder, which the test empties",
        Spawn => "starts Node printing a mark, bounded at 5 s, in the job's cgroup",
        SignalHostProcess => "SIGTERM to the test's own canary `sleep`, by its pid",
        SeeHostProcesses => "reads the test's canary process's command line",
        ReachNetwork | ReachAbstractSocket | ReachUnixSocket => {
            "connects to the test's own listeners, within 2 s"
        }
        MemoryOffHeap => "512 MiB at most, under the 4 GiB safety net of a left-out memory limit",
        ExhaustPids => "200 processes (a `sleep` of under a minute) or threads at most, within 12 s, under the 16384 safety net of a left-out pids limit, all in the job's cgroup, which is killed at its end",
        ReadHostIdentity => "reads the host's boot id and machine id (read-only), which go no further than the test",
        MemoryOnHeap | OutliveWallClock => return None,
    })
}

/// The cells where the attack gets through, each with why; the README's table says the
/// same. Every other cell must hold, and each of these must get through (so a layer that
/// stopped doing its work, or a cell that stopped testing it, fails the test).
fn expected_through(part: Part, layer: Option<Layer>, attack: Attack) -> Option<&'static str> {
    use Attack::*;
    use Layer::*;
    match (part, layer?, attack) {
        (_, MemoryLimit, MemoryOffHeap) => {
            Some("the memory cgroup is the only bound on memory off the V8 heap")
        }
        (_, Root | MountNamespace, ReachUnixSocket) => Some(
            "without the job's root a host socket file (mode 0777) is reachable: Node 24's permission model does not cover connect, seccomp allows unix sockets, landlock has no right for connecting to one",
        ),
        (Part::NodeOff, Root | MountNamespace, SeeHostProcesses | ReadHostIdentity) => {
            Some("without the job's root the host's /proc shows; landlock allows /proc")
        }
        _ => None,
    }
}

/// What the test owns and the attacks aim at.
struct Targets {
    _dir: tempfile::TempDir,
    canary_file: PathBuf,
    secret: String,
    canary_dir: PathBuf,
    canary: Child,
    unix_path: PathBuf,
    abstract_name: String,
    tcp_port: u16,
    token: String,
    /// The host's `sleep`, which the process bomb starts where it can.
    sleep_path: PathBuf,
    /// The process bomb's `sleep` duration: under a minute, and unique to this test (its
    /// processes are known by it).
    sleep_seconds: String,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

fn spawn_canary() -> Child {
    Command::new("sleep")
        .arg(CANARY_SECONDS)
        .spawn()
        .expect("start the canary process")
}

impl Targets {
    fn new() -> Targets {
        let dir = tempfile::Builder::new()
            .prefix("ovsr-layers-")
            .tempdir()
            .expect("temp dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let secret = format!("layer-matrix-secret-{}", std::process::id());
        let canary_file = dir.path().join("secret.txt");
        std::fs::write(&canary_file, &secret).expect("write the canary file");
        std::fs::set_permissions(&canary_file, std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        let canary_dir = dir.path().join("writable");
        std::fs::create_dir(&canary_dir).expect("canary folder");
        std::fs::set_permissions(&canary_dir, std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let token = format!("layer-matrix-token-{}", std::process::id());
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();

        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("tcp listener");
        let tcp_port = tcp.local_addr().expect("tcp address").port();
        tcp.set_nonblocking(true).expect("nonblocking");
        threads.push(serve(
            move || {
                tcp.accept()
                    .map(|(s, _)| Box::new(s) as Box<dyn std::io::Write + Send>)
            },
            &token,
            &accepted,
            &stop,
        ));
        let abstract_name = format!("ovsr-layers-{}", std::process::id());
        let addr = {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
                .expect("abstract address")
        };
        let abs = std::os::unix::net::UnixListener::bind_addr(&addr).expect("abstract socket");
        abs.set_nonblocking(true).expect("nonblocking");
        threads.push(serve(
            move || {
                abs.accept()
                    .map(|(s, _)| Box::new(s) as Box<dyn std::io::Write + Send>)
            },
            &token,
            &accepted,
            &stop,
        ));
        let unix_path = dir.path().join("socket");
        let path_listener =
            std::os::unix::net::UnixListener::bind(&unix_path).expect("unix socket");
        std::fs::set_permissions(&unix_path, std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        path_listener.set_nonblocking(true).expect("nonblocking");
        threads.push(serve(
            move || {
                path_listener
                    .accept()
                    .map(|(s, _)| Box::new(s) as Box<dyn std::io::Write + Send>)
            },
            &token,
            &accepted,
            &stop,
        ));
        let sleep_path = ["/usr/bin/sleep", "/bin/sleep"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .expect("the host has sleep (coreutils)");
        Targets {
            _dir: dir,
            canary_file,
            secret,
            canary_dir,
            canary: spawn_canary(),
            unix_path,
            abstract_name,
            tcp_port,
            token,
            sleep_path,
            sleep_seconds: format!("59.{}", std::process::id()),
            accepted,
            stop,
            threads,
        }
    }

    fn input(&self, attack: Attack) -> Value {
        json!({
            "attack": attack.name(),
            "canary_file": self.canary_file,
            "canary_dir": self.canary_dir,
            "canary_pid": self.canary.id(),
            "tcp_port": self.tcp_port,
            "abstract_name": self.abstract_name,
            "unix_path": self.unix_path,
            "token": self.token,
            "bound_bytes": BOUND_BYTES,
            "bound_pids": BOUND_PIDS,
            "sleep_path": self.sleep_path,
            "sleep_seconds": self.sleep_seconds,
        })
    }

    /// The process bomb's `sleep`s still on the host, known by their unique duration.
    fn sleeps_left(&self) -> usize {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return 0;
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .bytes()
                    .all(|b| b.is_ascii_digit())
            })
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .filter(|c| {
                c.split(|b| *b == 0)
                    .nth(1)
                    .is_some_and(|a| a == self.sleep_seconds.as_bytes())
            })
            .count()
    }

    /// Whether the canary process is gone (and a new one in its place if so).
    fn canary_killed(&mut self) -> bool {
        std::thread::sleep(Duration::from_millis(20));
        match self.canary.try_wait() {
            Ok(None) => false,
            _ => {
                self.canary = spawn_canary();
                true
            }
        }
    }

    /// What the job wrote into the canary folder, removed.
    fn written(&self) -> bool {
        let entries: Vec<PathBuf> = std::fs::read_dir(&self.canary_dir)
            .expect("read the canary folder")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        for e in &entries {
            std::fs::remove_dir_all(e)
                .or_else(|_| std::fs::remove_file(e))
                .expect("clean the canary folder");
        }
        !entries.is_empty()
    }
}

impl Drop for Targets {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // Our own child, by its pid.
        let _ = self.canary.kill();
        let _ = self.canary.wait();
    }
}

/// Accepts connections until stopped: each is counted and sent the token.
fn serve(
    accept: impl Fn() -> std::io::Result<Box<dyn std::io::Write + Send>> + Send + 'static,
    token: &str,
    accepted: &Arc<AtomicUsize>,
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let (token, accepted, stop) = (token.to_string(), accepted.clone(), stop.clone());
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            match accept() {
                Ok(mut s) => {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let _ = s.write_all(token.as_bytes());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    })
}

/// One cell's outcome.
struct Cell {
    through: bool,
    /// The error the attack met, or how its job ended.
    met: String,
    /// The process bomb started processes (or met the pids limit), not threads.
    processes: bool,
}

fn host_identity() -> Vec<String> {
    ["/proc/sys/kernel/random/boot_id", "/etc/machine-id"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn run_cell(engine: &Engine, t: &mut Targets, id: &str, attack: Attack) -> Cell {
    let code = std::fs::read(repo().join("test-skills/layer-matrix/attack.js")).expect("attack.js");
    let code = String::from_utf8(code).expect("utf-8");
    let mut job = code_job(id, &code, t.input(attack));
    let (wall_ms, mem) = match attack {
        Attack::OutliveWallClock => (1500u64, 128 * MIB),
        Attack::ExhaustPids => (20000, 256 * MIB),
        _ => (10000, 128 * MIB),
    };
    job["limits"] = json!({"wall_ms": wall_ms, "mem_bytes": mem});
    let accepted_before = t.accepted.load(Ordering::SeqCst);
    let r = run_engine_job(engine, job);
    let out = &r["output"];
    let status = format!(
        "{}/{}",
        r["status"].as_str().unwrap_or("?"),
        r["reason"].as_str().unwrap_or("-")
    );
    let reported = out["attack"] == attack.name();
    assert!(
        reported || (attack.may_be_killed() && r["status"] != "internal"),
        "{id}: the cell proves nothing, its job did not run the attack: {r:#}"
    );
    let met = match (attack, out["error"].as_str()) {
        (Attack::ExhaustPids, e) if reported => format!(
            "{} after {} {}",
            e.unwrap_or("no error"),
            out["started"],
            out["mode"].as_str().unwrap_or("?")
        ),
        (_, Some(e)) if reported => e.to_string(),
        _ => status.clone(),
    };
    if attack == Attack::ExhaustPids {
        // Every process the bomb started died with its job's cgroup.
        let mut left = t.sleeps_left();
        for _ in 0..50 {
            if left == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            left = t.sleeps_left();
        }
        assert_eq!(
            left, 0,
            "{id}: the process bomb's sleeps outlived the job: {r:#}"
        );
    }
    let accepted = t.accepted.load(Ordering::SeqCst) > accepted_before;
    let carries = |key: &str, mark: &str| {
        out[key]
            .as_str()
            .is_some_and(|s| !mark.is_empty() && s.contains(mark))
    };
    let through = match attack {
        Attack::ReadHostFile => carries("content", &t.secret),
        Attack::WriteAnywhere => t.written() | (out["written"] == true),
        Attack::Spawn => carries("stdout", "spawn-landed"),
        Attack::SignalHostProcess => t.canary_killed() | (out["sent"] == true),
        Attack::SeeHostProcesses => carries("cmdline", CANARY_SECONDS),
        Attack::ReachNetwork | Attack::ReachAbstractSocket | Attack::ReachUnixSocket => {
            accepted || carries("data", &t.token)
        }
        Attack::MemoryOffHeap | Attack::MemoryOnHeap => {
            out["bytes"].as_u64().is_some_and(|b| b >= BOUND_BYTES)
        }
        Attack::ExhaustPids => out["started"].as_u64().is_some_and(|n| n >= BOUND_PIDS),
        Attack::OutliveWallClock => {
            status != "limit/wall" || r["wall_ms"].as_u64().is_none_or(|w| w > wall_ms + 3000)
        }
        Attack::ReadHostIdentity => {
            let host = host_identity();
            out["read"].as_object().is_some_and(|m| {
                m.values()
                    .any(|v| v.as_str().is_some_and(|s| host.iter().any(|h| h == s)))
            })
        }
    };
    Cell {
        through,
        met,
        processes: reported && out["mode"] == "processes" || status == "limit/pids",
    }
}

fn engine_without(state: &State, omit: Vec<Layer>) -> Engine {
    let mut config = Config::default();
    config.runner.state_dir = state.path().to_path_buf();
    config.runner.policies_dir = Some(repo().join("policies"));
    config.runner.omit_layers = omit;
    Engine::start(config)
        .unwrap_or_else(|e| panic!("the engine must start on the test host: {e}"))
        .with_runner_executable(PathBuf::from(BIN))
}

/// The host, the state folder and the targets one part of the matrix runs against.
struct Bench {
    state: State,
    targets: Targets,
}

impl Bench {
    fn new() -> Bench {
        require_host();
        let state = State::new();
        // The job's uid reaches its files under the state folder when the matrix leaves its
        // root out (they are then on the host's tree).
        std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o711))
            .expect("chmod the state folder");
        Bench {
            state,
            targets: Targets::new(),
        }
    }

    fn run(&mut self, part: Part, layer: Option<Layer>, attacks: &[Attack]) -> Vec<Cell> {
        let engine = engine_without(&self.state, part.omit(layer));
        attacks
            .iter()
            .map(|attack| {
                let id = format!(
                    "{JOB_PREFIX}-{}-{}-{}",
                    part.letter(),
                    layer.map_or("none", Layer::as_str),
                    attack.name()
                );
                run_cell(&engine, &mut self.targets, &id, *attack)
            })
            .collect()
    }

    /// Prints the part's lines (and writes them where `scripts/test-layers` reads them),
    /// checks the host is as it was, and fails on any cell that differs from the README.
    fn finish(self, file: &str, lines: &[String], wrong: &[String]) {
        let table = lines.join("\n");
        println!("layer matrix (part, layer, attack, outcome, stopped by):\n{table}");
        if let Ok(dir) = std::env::var("LAYER_MATRIX_DIR") {
            std::fs::write(PathBuf::from(dir).join(file), format!("{table}\n"))
                .expect("write the matrix");
        }
        let Bench { state, targets } = self;
        drop(targets);
        state.assert_clean();
        assert_host_clean(JOB_PREFIX);
        assert!(
            wrong.is_empty(),
            "cells that differ from the README's table:\n{}",
            wrong.join("\n")
        );
    }
}

/// One printed cell: the part, the layer (left out, or alone), the attack, the outcome and
/// the layer that stopped it.
fn line(part: Part, layer: Option<Layer>, attack: &str, outcome: &str, stopped_by: &str) -> String {
    format!(
        "{:<20} {:<16} {attack:<22} {outcome:<60} stopped by: {stopped_by}",
        part.label(),
        layer.map_or("nothing", Layer::as_str),
    )
}

/// A cell's outcome against what was expected (`Some(why)`: through, for that reason), and
/// whether it differs.
fn judge(cell: &Cell, expected: Option<&str>) -> (String, bool) {
    let outcome = match (cell.through, expected) {
        (false, None) => format!("held ({})", cell.met),
        (true, Some(why)) => format!("through, as documented: {why}"),
        (true, None) => format!("GOT THROUGH ({})", cell.met),
        (false, Some(why)) => format!("held, but expected through ({why}) ({})", cell.met),
    };
    (outcome, cell.through != expected.is_some())
}

#[test]
fn every_layer_left_out_in_turn() {
    let _h = exclusive();
    let mut bench = Bench::new();
    let mut lines = Vec::new();
    let mut wrong = Vec::new();
    let mut cells: Vec<(Part, Option<Layer>, Attack, Cell)> = Vec::new();
    for part in [Part::Depth, Part::NodeOff] {
        for layer in part.layers() {
            let run = bench.run(part, layer, &ATTACKS);
            cells.extend(
                ATTACKS
                    .into_iter()
                    .zip(run)
                    .map(|(attack, cell)| (part, layer, attack, cell)),
            );
        }
    }
    let through = |part: Part, layer: Option<Layer>, attack: Attack| {
        cells
            .iter()
            .any(|(p, l, a, c)| *p == part && *l == layer && *a == attack && c.through)
    };
    for (part, layer, attack, cell) in &cells {
        let (part, layer, attack) = (*part, *layer, *attack);
        // Which layer stopped it, from the cells: the OS layers whose absence alone lets
        // the attack through with Node off, and Node's hardening where leaving it off too
        // makes the difference.
        let sole: Vec<&str> = Layer::ALL
            .into_iter()
            .filter(|l| Some(*l) != layer && through(Part::NodeOff, Some(*l), attack))
            .map(Layer::as_str)
            .collect();
        let os = if sole.is_empty() {
            "more than one OS layer".to_string()
        } else {
            sole.join("+")
        };
        let stopped_by = match part {
            _ if cell.through => "-".to_string(),
            Part::Depth if through(Part::NodeOff, layer, attack) => {
                "node hardening (permission model, preload)".to_string()
            }
            Part::Depth => format!("node hardening and {os}"),
            _ => os,
        };
        let (outcome, differs) = judge(cell, expected_through(part, layer, attack));
        if differs {
            wrong.push(format!(
                "{} {} / {}: {outcome}",
                part.label(),
                layer.map_or("nothing", Layer::as_str),
                attack.name()
            ));
        }
        lines.push(line(part, layer, attack.name(), &outcome, &stopped_by));
    }
    bench.finish("left-out", &lines, &wrong);
}

#[test]
fn every_layer_alone() {
    let _h = exclusive();
    // Every attack run alone was checked to be safe with the rest of the sandbox off.
    for layer in Layer::ALL {
        let gaps = alone_gaps(layer).iter().map(|(a, _)| *a);
        for attack in meant_to_stop(layer).iter().copied().chain(gaps) {
            assert!(
                safe_alone(attack).is_some(),
                "{} alone / {}: not vetted as safe to run with the other layers off",
                layer.as_str(),
                attack.name()
            );
        }
    }
    let mut bench = Bench::new();
    let mut lines = Vec::new();
    let mut wrong = Vec::new();
    for layer in Layer::ALL {
        let gaps = alone_gaps(layer);
        let attacks: Vec<Attack> = meant_to_stop(layer)
            .iter()
            .copied()
            .chain(gaps.iter().map(|(a, _)| *a))
            .collect();
        if attacks.is_empty() {
            lines.push(line(
                Part::Alone,
                Some(layer),
                "-",
                "no cell: none of the matrix's attacks is this layer's (see the README)",
                "-",
            ));
            continue;
        }
        let run = bench.run(Part::Alone, Some(layer), &attacks);
        for (attack, cell) in attacks.into_iter().zip(run) {
            let expected = gaps.iter().find(|(a, _)| *a == attack).map(|(_, why)| *why);
            let (mut outcome, mut differs) = judge(&cell, expected);
            if layer == Layer::PidsLimit && attack == Attack::ExhaustPids && !cell.processes {
                // Threads meet the memory and descriptor limits first: only processes
                // show the pids limit holding.
                differs = true;
                outcome = format!("{outcome}, but with threads: the pids limit not shown");
            }
            if differs {
                wrong.push(format!(
                    "alone {} / {}: {outcome}",
                    layer.as_str(),
                    attack.name()
                ));
            }
            let stopped_by = match needs(layer) {
                _ if cell.through => "-".to_string(),
                [] => layer.as_str().to_string(),
                needed => format!(
                    "{} (in the {} it needs)",
                    layer.as_str(),
                    needed
                        .iter()
                        .map(|l| l.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            lines.push(line(
                Part::Alone,
                Some(layer),
                attack.name(),
                &outcome,
                &stopped_by,
            ));
        }
    }
    bench.finish("alone", &lines, &wrong);
}
