//! Every case of every skill under test-skills/: benign tools give their exact output,
//! hostile ones end with the exact status and reason SPEC.md gives them.

use crate::common::*;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    tool: String,
    #[serde(default)]
    input: Value,
    expect: Expect,
    #[serde(default)]
    why: String,
    /// Paths on the host that must not exist after the case (what a write attack targets).
    #[serde(default)]
    host_must_not_exist: Vec<PathBuf>,
    /// The harness listens on the host for the case (see [`Listeners`]) and fills the
    /// input's `"$tcp_port"`, `"$udp_port"`, `"$host_ip"` and `"$abstract_name"` with
    /// where; after the case, nothing may have arrived.
    #[serde(default)]
    listeners: bool,
}

/// Real listeners on the host for a network attack to aim at: TCP and UDP on every address
/// (loopback and the host's own, v4 and v6, one port each) and an abstract unix socket.
/// A control connection first shows each one would see an attempt; after the case each
/// must have seen nothing.
struct Listeners {
    tcp: std::net::TcpListener,
    udp: std::net::UdpSocket,
    abstract_: std::os::unix::net::UnixListener,
    abstract_name: String,
    host_ip: String,
}

impl Listeners {
    fn open(case: &str) -> Listeners {
        use socket2::{Domain, Protocol, SockAddr, Socket, Type};
        use std::os::linux::net::SocketAddrExt as _;
        let any: std::net::SocketAddr = "[::]:0".parse().expect("address");
        let dual = |ty: Type, proto: Protocol| {
            let s = Socket::new(Domain::IPV6, ty, Some(proto)).expect("socket");
            s.set_only_v6(false).expect("dual stack");
            s.bind(&SockAddr::from(any)).expect("bind [::]:0");
            s
        };
        let tcp = dual(Type::STREAM, Protocol::TCP);
        tcp.listen(16).expect("listen");
        let tcp: std::net::TcpListener = tcp.into();
        let udp: std::net::UdpSocket = dual(Type::DGRAM, Protocol::UDP).into();
        let abstract_name = format!("ovsr-skills-{}-{case}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
            .expect("abstract address");
        let abstract_ =
            std::os::unix::net::UnixListener::bind_addr(&addr).expect("abstract listener");
        let host_ip = host_address().unwrap_or_else(|| {
            println!("note: {case}: the host has no address but loopback; host_ip is 127.0.0.1");
            "127.0.0.1".to_string()
        });
        let l = Listeners {
            tcp,
            udp,
            abstract_,
            abstract_name,
            host_ip,
        };
        for s in [&l.tcp as &dyn std::os::fd::AsRawFd, &l.udp, &l.abstract_] {
            set_nonblocking(s.as_raw_fd());
        }
        l.control();
        l
    }

    fn tcp_port(&self) -> u16 {
        self.tcp.local_addr().expect("tcp address").port()
    }

    fn udp_port(&self) -> u16 {
        self.udp.local_addr().expect("udp address").port()
    }

    /// From the host, each listener sees an attempt (then it is drained): a listener that
    /// could not see one would prove nothing by seeing nothing.
    fn control(&self) {
        use std::os::linux::net::SocketAddrExt as _;
        for ip in ["127.0.0.1", "::1", self.host_ip.as_str()] {
            let at = std::net::SocketAddr::new(ip.parse().expect("ip"), self.tcp_port());
            let _c = std::net::TcpStream::connect_timeout(&at, std::time::Duration::from_secs(2))
                .unwrap_or_else(|e| panic!("control: connect to {at}: {e}"));
            assert!(self.tcp_arrival().is_some(), "control: {at} was not seen");
            let sender = std::net::UdpSocket::bind(if ip.contains(':') {
                "[::1]:0"
            } else {
                "0.0.0.0:0"
            })
            .expect("udp sender");
            let to = std::net::SocketAddr::new(ip.parse().expect("ip"), self.udp_port());
            sender.send_to(b"control", to).expect("control datagram");
            assert!(
                self.udp_arrival().is_some(),
                "control: a datagram to {to} was not seen"
            );
        }
        let addr =
            std::os::unix::net::SocketAddr::from_abstract_name(self.abstract_name.as_bytes())
                .expect("abstract address");
        let _c = std::os::unix::net::UnixStream::connect_addr(&addr).expect("control: abstract");
        assert!(
            self.abstract_arrival(),
            "control: the abstract socket was not seen"
        );
    }

    fn tcp_arrival(&self) -> Option<std::net::SocketAddr> {
        // A connection the kernel completed may take a moment to be queued.
        for _ in 0..50 {
            if let Ok((_, from)) = self.tcp.accept() {
                return Some(from);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        None
    }

    fn udp_arrival(&self) -> Option<std::net::SocketAddr> {
        let mut buf = [0u8; 64];
        for _ in 0..50 {
            if let Ok((_, from)) = self.udp.recv_from(&mut buf) {
                return Some(from);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        None
    }

    fn abstract_arrival(&self) -> bool {
        for _ in 0..50 {
            if self.abstract_.accept().is_ok() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    }

    /// The case's input with the placeholders filled in.
    fn fill(&self, input: &Value) -> Value {
        match input {
            Value::String(s) => match s.as_str() {
                "$tcp_port" => Value::from(self.tcp_port()),
                "$udp_port" => Value::from(self.udp_port()),
                "$host_ip" => Value::from(self.host_ip.clone()),
                "$abstract_name" => Value::from(self.abstract_name.clone()),
                _ => input.clone(),
            },
            Value::Array(a) => Value::Array(a.iter().map(|v| self.fill(v)).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, v)| (k.clone(), self.fill(v))).collect())
            }
            _ => input.clone(),
        }
    }

    /// What reached the host during the case: nothing, or what.
    fn arrivals(&self) -> Vec<String> {
        let mut seen = Vec::new();
        if let Ok((_, from)) = self.tcp.accept() {
            seen.push(format!("a TCP connection from {from}"));
        }
        let mut buf = [0u8; 64];
        if let Ok((_, from)) = self.udp.recv_from(&mut buf) {
            seen.push(format!("a UDP datagram from {from}"));
        }
        if self.abstract_.accept().is_ok() {
            seen.push(format!("a connection to @{}", self.abstract_name));
        }
        seen
    }
}

fn set_nonblocking(fd: std::os::fd::RawFd) {
    // SAFETY: the descriptor is one of this test's own open sockets, borrowed for the call.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL).expect("F_GETFL");
    let flags = nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(flags)).expect("F_SETFL");
}

/// One of the host's own IPv4 addresses that is not loopback, if it has one.
fn host_address() -> Option<String> {
    nix::ifaddrs::getifaddrs()
        .ok()?
        .filter_map(|i| i.address?.as_sockaddr_in().map(|a| a.ip()))
        .find(|ip| !ip.is_loopback())
        .map(|ip| ip.to_string())
}

#[derive(Debug, Deserialize)]
struct Expect {
    status: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    output: Option<Value>,
    #[serde(default)]
    stderr_contains: Option<String>,
    #[serde(default)]
    stderr_truncated: Option<bool>,
    #[serde(default)]
    stderr_not_contains: Option<String>,
    /// The job must end well before its wall clock (a cap that kills at once).
    #[serde(default)]
    max_wall_ms: Option<u64>,
    #[serde(default)]
    limits: Option<Limits>,
}

#[derive(Debug, Deserialize)]
struct Limits {
    wall_ms: Option<u64>,
    mem_bytes: Option<u64>,
}

/// What the runner's own start and cleanup around a job may take on this kind of machine
/// (it hashes the 120 MB Node once per fresh state directory): the allowance between a
/// case's `max_wall_ms` and the time the test measures itself.
const RUNNER_OWN_MS: u64 = 3000;

fn cases() -> Vec<(PathBuf, Case)> {
    let mut all = Vec::new();
    let root = repo().join("test-skills");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("test-skills")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("cases.json").is_file())
        .collect();
    dirs.sort();
    for dir in dirs {
        let text = std::fs::read(dir.join("cases.json")).expect("read cases.json");
        let list: Vec<Case> = serde_json::from_slice(&text)
            .unwrap_or_else(|e| panic!("{}/cases.json: {e}", dir.display()));
        for c in list {
            all.push((dir.clone(), c));
        }
    }
    all
}

/// How much slower than this kind of machine the host runs jobs: 1 here; the VM matrix sets
/// `OPENVIBE_TEST_TIME_SCALE` under software emulation, where Node runs tens of times slower.
/// It stretches the time checks (`max_wall_ms`) and gives a tool whose case is not about the
/// wall clock a longer one (its declared wall clock times the scale, at most the contract's
/// 30 s cap), so an emulated heap bomb still meets its memory limit before the clock. A case
/// that expects `limit`/`wall` keeps its wall clock: that is what it tests.
fn time_scale() -> u64 {
    match std::env::var("OPENVIBE_TEST_TIME_SCALE") {
        Err(_) => 1,
        Ok(text) => match text.parse::<u64>() {
            Ok(n @ 1..=20) => n,
            _ => panic!("OPENVIBE_TEST_TIME_SCALE={text:?}: expected a whole number 1..=20"),
        },
    }
}

const DEFAULT_WALL_MS: u64 = 10_000;
const MAX_WALL_MS: u64 = 30_000;

/// A copy of the skill folder `dir` whose tool `tool` declares `scale` times its wall clock
/// (a `run` may only narrow what the tool declares, never widen it).
fn with_scaled_wall(dir: &Path, tool: &str, scale: u64) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for entry in std::fs::read_dir(from)
            .expect("read the skill folder")
            .flatten()
        {
            let target = to.join(entry.file_name());
            if entry.file_type().expect("file type").is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).expect("copy");
            }
        }
    }
    let copy_dir = tempfile::Builder::new()
        .prefix("ovsr-scaled-skill-")
        .tempdir()
        .expect("temp dir");
    copy(dir, copy_dir.path());
    let manifest = copy_dir.path().join("skill.json");
    let mut m: Value =
        serde_json::from_slice(&std::fs::read(&manifest).expect("read skill.json")).expect("json");
    let tools = m["tools"].as_array_mut().expect("tools");
    let t = tools
        .iter_mut()
        .find(|t| t["name"] == tool)
        .unwrap_or_else(|| panic!("{}: no tool {tool}", dir.display()));
    let declared = t["limits"]["wall_ms"].as_u64().unwrap_or(DEFAULT_WALL_MS);
    if !t["limits"].is_object() {
        t["limits"] = serde_json::json!({});
    }
    t["limits"]["wall_ms"] = (declared * scale).min(MAX_WALL_MS).into();
    std::fs::write(&manifest, m.to_string()).expect("write skill.json");
    copy_dir
}

/// The `net` skill.json gives the tool (`deny` when it names none).
fn tool_net(dir: &Path, tool: &str) -> String {
    let text = std::fs::read(dir.join("skill.json")).expect("read skill.json");
    let skill: Value = serde_json::from_slice(&text)
        .unwrap_or_else(|e| panic!("{}/skill.json: {e}", dir.display()));
    skill["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == tool))
        .and_then(|t| t["net"].as_str())
        .unwrap_or("deny")
        .to_string()
}

fn check(dir: &Path, case: &Case) -> Result<(), String> {
    let state = State::new();
    let mut extra = Vec::new();
    let scale = time_scale();
    let about_wall = case.expect.status == "limit" && case.expect.reason.as_deref() == Some("wall");
    let scaled = (scale > 1 && !about_wall).then(|| with_scaled_wall(dir, &case.tool, scale));
    let dir = scaled.as_ref().map_or(dir, |d| d.path());
    if let Some(w) = case.expect.limits.as_ref().and_then(|l| l.wall_ms) {
        extra.extend(["--wall-ms".to_string(), w.to_string()]);
    }
    if let Some(l) = &case.expect.limits {
        if let Some(m) = l.mem_bytes {
            extra.push("--mem-bytes".to_string());
            extra.push(m.to_string());
        }
    }
    let listeners = case.listeners.then(|| Listeners::open(&case.name));
    let input = listeners
        .as_ref()
        .map_or_else(|| case.input.clone(), |l| l.fill(&case.input));
    let started = std::time::Instant::now();
    let r = state.run_skill(dir, &case.tool, &input, &extra);
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let e = &case.expect;
    let mut problems = Vec::new();
    if r["status"] != e.status.as_str() || r["reason"].as_str() != e.reason.as_deref() {
        problems.push(format!(
            "status/reason {}/{} (expected {}/{:?})",
            r["status"], r["reason"], e.status, e.reason
        ));
    }
    if let Some(out) = &e.output {
        if &r["output"] != out {
            problems.push(format!("output {} (expected {out})", r["output"]));
        }
    }
    if let Some(s) = &e.stderr_contains {
        if !r["stderr"].as_str().unwrap_or("").contains(s.as_str()) {
            problems.push(format!("stderr lacks {s:?}"));
        }
    }
    if let Some(s) = &e.stderr_not_contains {
        if r["stderr"].as_str().unwrap_or("").contains(s.as_str()) {
            problems.push(format!("stderr contains {s:?}"));
        }
    }
    if let Some(max) = e.max_wall_ms.map(|m| m * scale) {
        if r["wall_ms"].as_u64().unwrap_or(u64::MAX) > max {
            problems.push(format!("wall_ms {} above {max}", r["wall_ms"]));
        }
        // The test's own clock, not only the runner's word: the whole `run`, with the
        // runner's start (it verifies the pinned Node in a fresh state directory) and its
        // cleanup, stays within the bound plus what those take.
        let bound = max + RUNNER_OWN_MS * scale;
        if elapsed_ms > bound {
            problems.push(format!(
                "the run took {elapsed_ms} ms by the test's clock, above {bound} ms \
                 (max_wall_ms {max} plus {} ms for the runner's own start and cleanup)",
                RUNNER_OWN_MS * scale
            ));
        }
    }
    if let Some(t) = e.stderr_truncated {
        if r["stderr_truncated"] != t {
            problems.push(format!(
                "stderr_truncated {} (expected {t})",
                r["stderr_truncated"]
            ));
        }
    }
    let net = tool_net(dir, &case.tool);
    if r["runner"] != "openvibe-skill-runner@1.0.0" || r["net"] != net.as_str() {
        problems.push(format!("runner/net fields wrong (net expected {net})"));
    }
    if r["status"] == "ok"
        && r["output"].is_null()
        && e.output.is_some()
        && e.output != Some(Value::Null)
    {
        problems.push("ok without output".into());
    }
    if r["status"] != "ok" && r.get("output").is_some() {
        problems.push("output present on a non-ok result".into());
    }
    if let Some(l) = &listeners {
        for arrival in l.arrivals() {
            problems.push(format!("the host's listener saw {arrival}"));
        }
    }
    for p in &case.host_must_not_exist {
        if p.exists() {
            problems.push(format!("{} exists on the host", p.display()));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}/{} ({}): {}\n  result: {}",
            dir.file_name().unwrap_or_default().to_string_lossy(),
            case.name,
            case.why,
            problems.join("; "),
            r
        ))
    }
}

#[test]
fn every_case_of_every_test_skill() {
    require_host();
    let _host = exclusive();
    let all = cases();
    assert!(
        all.len() >= 20,
        "expected the full set of test-skill cases, found {}",
        all.len()
    );
    let queue = Arc::new(Mutex::new(all));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let ran = Arc::new(Mutex::new(0usize));
    // Two at a time: the machine has two cores, and jobs must not disturb each other.
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let queue = queue.clone();
            let failures = failures.clone();
            let ran = ran.clone();
            std::thread::spawn(move || loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop();
                let Some((dir, case)) = next else { break };
                let outcome = std::panic::catch_unwind(|| check(&dir, &case))
                    .unwrap_or_else(|_| Err(format!("{}: the check panicked", case.name)));
                *ran.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                if let Err(e) = outcome {
                    failures.lock().unwrap_or_else(|p| p.into_inner()).push(e);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let failures = failures.lock().unwrap_or_else(|p| p.into_inner());
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_host_clean("run-");
    println!(
        "{} cases passed",
        ran.lock().unwrap_or_else(|p| p.into_inner())
    );
}
