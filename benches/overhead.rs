//! The sandbox's cost, measured against bare Node in the same run (the machine is shared
//! and noisy, so only ratios mean anything). Run as root: `cargo bench --bench overhead`
//! (N=200 by default; `OVERHEAD_N=50` for a quick look). It runs the release binary cargo
//! builds for it. `OVERHEAD_BASE_BIN=<another openvibe-skill-runner>` (say, a build
//! of an older commit) adds that binary's `run-job`, interleaved with the others, and the
//! ratio of the two: a before/after comparison the machine's drift between runs cannot skew.
//!
//! Bare: `node tool.js < input.json`. Flagged: the job's own Node command line (the
//! contract's flags, the read grants, the runner's preload) without the sandbox. Sandboxed: `openvibe-skill-runner run-job job.json`
//! (a whole CLI start, job validation, input layout, cgroup, namespaces, landlock, seccomp,
//! Node, cleanup). Daemon: the same job, each time with its own `job_id`, sent to
//! `openvibe-skill-runner serve` as `POST /v1/jobs?wait=1` on its unix socket (connect,
//! handshake, request, the whole answer), to two daemons of the release binary, each in
//! its own temporary state directory: one with its pool of warm sandboxes
//! (`[daemon.warm] enabled = true`), one without. All run the same trivial tool on the
//! same input, interleaved; the pool refills between two of its jobs while the others run,
//! as it would for a scheduler sending jobs one after another.
//!
//! Besides the times, it prints each path's CPU a job over the sequential runs: at
//! concurrency 2 on two cores, jobs/s follows it.

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use sha2::Digest;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const TOOL: &str = "let d='';process.stdin.on('data',c=>d+=c);process.stdin.on('end',()=>{const i=JSON.parse(d);process.stdout.write(JSON.stringify({words:i.text.split(/\\s+/).filter(Boolean).length}))});";
const INPUT: &str = r#"{"text":"the quick brown fox jumps over the lazy dog"}"#;

/// The runner cargo built for this run (with its init stage beside it): with `cargo bench`,
/// the release binary as shipped; under `cargo test --all-targets`, the test build's.
/// Never a `cargo build` of its own: a cargo run inside cargo's runs the build scripts
/// again in another environment, and the next build then rebuilds their crates.
fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_openvibe-skill-runner"))
}

/// The job's Node command line without the sandbox, for the flagged baseline: the same
/// flags the plan gives a job (`plan::node_argv`: the permission model, the read grants of
/// the skill and the preload, no code from strings, the heap ceiling of the default memory
/// limit) and the same preload, required from a file beside the skill.
fn runner_flags(dir: &Path, preload: &Path) -> Vec<String> {
    use openvibe_skill_runner::plan;
    vec![
        "--permission".into(),
        format!("--allow-fs-read={}/", dir.display()),
        format!("--allow-fs-read={}", preload.display()),
        "--disallow-code-generation-from-strings".into(),
        format!("--max-old-space-size={}", plan::heap_mib(MEM_BYTES)),
        format!("--require={}", preload.display()),
    ]
}

/// The job's preload (`plan::job_preload`) for a skill folder outside the sandbox: the
/// same code, its two constants naming `dir` instead of the job's `/skill/`, or it would
/// refuse the tool's own file.
fn preload_for(dir: &Path) -> Vec<u8> {
    let text = String::from_utf8(openvibe_skill_runner::plan::job_preload(
        openvibe_skill_runner::assets::HARDEN_CJS,
        MEM_BYTES,
    ))
    .expect("the preload is UTF-8");
    let (path, url) = (
        "const SKILL = '/skill/';",
        "const SKILL_URL = 'file:///skill/';",
    );
    assert!(
        text.contains(path) && text.contains(url),
        "runtime/harden.cjs no longer names /skill/ as the benchmark expects"
    );
    let dir = dir.display().to_string();
    text.replace(path, &format!("const SKILL = '{dir}/';"))
        .replace(url, &format!("const SKILL_URL = 'file://{dir}/';"))
        .into_bytes()
}

/// The contract's default memory limit (SPEC.md), which the benchmark's job runs with.
const MEM_BYTES: u64 = 134_217_728;

/// Jobs per second of each runner in `fs`, `conc` at once, `n` jobs each, measured in
/// alternating rounds so that drift on the machine hits all of them alike.
fn throughputs(n: usize, conc: usize, fs: &[&(dyn Fn() -> Duration + Sync)]) -> Vec<f64> {
    let (rounds, per) = (4, n.div_ceil(4));
    let mut secs = vec![0.0f64; fs.len()];
    for _ in 0..rounds {
        for (i, f) in fs.iter().enumerate() {
            secs[i] += per as f64 / throughput(per, conc, f);
        }
    }
    let jobs = (rounds * per) as f64;
    secs.iter().map(|s| jobs / s).collect()
}

fn run_bare(node: &Path, dir: &Path) -> Duration {
    run_node(node, dir, &[])
}

fn run_node(node: &Path, dir: &Path, flags: &[String]) -> Duration {
    let t = Instant::now();
    let mut child = Command::new(node)
        .args(flags)
        .arg(dir.join("tool.js"))
        .current_dir(dir)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn node");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(INPUT.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("node");
    let d = t.elapsed();
    assert_eq!(out.stdout, b"{\"words\":9}", "bare node output");
    d
}

fn run_sandboxed(bin: &Path, state: &Path, job: &Path) -> Duration {
    let t = Instant::now();
    let out = Command::new(bin)
        .arg("--state-dir")
        .arg(state)
        .arg("run-job")
        .arg(job)
        .output()
        .expect("run-job");
    let d = t.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"status\":\"ok\"") && text.contains("{\"words\":9}"),
        "sandboxed run failed: {text}"
    );
    d
}

/// One measurement's figures, in milliseconds.
#[derive(Clone, Copy)]
struct Stats {
    min: f64,
    median: f64,
    p95: f64,
    max: f64,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Stats {
        min: ms(v[0]),
        median: ms(v[v.len() / 2]),
        p95: ms(v[((v.len() as f64 * 0.95) as usize).saturating_sub(1)]),
        max: ms(v[v.len() - 1]),
    }
}

/// The CPU (user and system) of this process's waited-for children and their waited-for
/// descendants so far: a bare or flagged Node, or a `run-job` with its init stage, pid 1
/// and Node.
fn children_cpu() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).expect("getrusage");
    let tv =
        |t: nix::sys::time::TimeVal| Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1000);
    tv(usage.user_time()) + tv(usage.system_time())
}

/// CPU per run: `spent` over `runs`, in milliseconds.
fn per_run(spent: Duration, runs: usize) -> f64 {
    spent.as_secs_f64() * 1000.0 / runs as f64
}

/// `a / b`, median and p95, on one line.
fn ratio(label: &str, a: Stats, b: Stats) {
    println!(
        "  {label:<26}median {:7.3}      p95 {:7.3}",
        a.median / b.median,
        a.p95 / b.p95
    );
}

/// A `job_id` no daemon has seen: the daemon answers an id once, forever.
static NEXT_JOB: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The measuring thread's own runtime for its requests to the daemons, built once.
    static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread tokio runtime");
}

/// One request on a fresh connection to `socket` (connect, handshake, send, the whole
/// answer, the connection's end): the status and the body.
async fn request(socket: &Path, method: &str, path: &str, body: Bytes) -> (u16, Bytes) {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap_or_else(|e| panic!("HTTP handshake on {}: {e}", socket.display()));
    let conn = tokio::spawn(conn);
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .body(Full::new(body))
        .expect("a request");
    let resp = sender
        .send_request(req)
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: sending: {e}"));
    let code = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: reading the answer: {e}"))
        .to_bytes();
    // The connection ends with the sender; its task with it.
    drop(sender);
    let _ = conn.await;
    (code, bytes)
}

/// [`request`] on this thread's runtime.
fn call(socket: &Path, method: &str, path: &str, body: Bytes) -> (u16, Bytes) {
    RT.with(|rt| rt.block_on(request(socket, method, path, body)))
}

/// `job` under a fresh `job_id`, submitted to the daemon on `socket` and waited for; the
/// time from connecting to the whole answer.
fn run_daemon(socket: &Path, job: &serde_json::Value) -> Duration {
    let mut job = job.clone();
    job["job_id"] = format!("bench-{}", NEXT_JOB.fetch_add(1, Ordering::Relaxed)).into();
    let body = Bytes::from(serde_json::to_vec(&job).expect("job json"));
    RT.with(|rt| {
        rt.block_on(async {
            let t = Instant::now();
            let (code, bytes) = request(socket, "POST", "/v1/jobs?wait=1", body).await;
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                code == 200 && text.contains("\"status\":\"ok\"") && text.contains("{\"words\":9}"),
                "the daemon's job failed ({code}): {text}"
            );
            t.elapsed()
        })
    })
}

/// A daemon of the release binary in its own temporary folder (configuration, socket,
/// state directory, its stderr); stopped when dropped, also when the benchmark panics.
struct Daemon {
    name: &'static str,
    child: Option<Child>,
    socket: PathBuf,
    dir: tempfile::TempDir,
}

impl Daemon {
    /// Started with skills on, its pool of warm sandboxes on or off, and answering.
    fn start(bin: &Path, name: &'static str, warm: bool) -> Daemon {
        let dir = tempfile::Builder::new()
            .prefix("ovsr-overhead-")
            .tempdir()
            .expect("temp dir");
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[worker]\nfunctions = [\"openvibe-skill-runner@1.0.0\"]\n\
                 [runner]\n# state_dir is set by --state-dir\n\
                 [daemon]\nshutdown_grace_ms = 2000\n\
                 [daemon.warm]\nenabled = {warm}\n"
            ),
        )
        .expect("config");
        let socket = dir.path().join("run/skill-runner.sock");
        let stderr = std::fs::File::create(dir.path().join("stderr.log")).expect("stderr log");
        let child = Command::new(bin)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start the daemon");
        let mut d = Daemon {
            name,
            child: Some(child),
            socket,
            dir,
        };
        d.until(
            Duration::from_secs(20),
            "answer GET /v1/info ready",
            |info| info.and_then(|i| i["ready"].as_bool()) == Some(true),
        );
        d
    }

    /// The CPU (user and system, counted by the kernel in clock ticks) of the daemon so far: its own threads
    /// and its reaped descendants, the sandboxes it has removed (each one's warm-up, when
    /// it was a warm sandbox, included), from `/proc/<pid>/stat` (fields 14 to 17).
    fn cpu(&self) -> Duration {
        let pid = self.child.as_ref().expect("the daemon runs").id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("its stat");
        // The command's name, field 2, may hold spaces: the fields after it follow its `)`.
        let after = stat.rsplit_once(')').expect("stat's (comm)").1;
        let ticks: u64 = after
            .split_whitespace()
            .skip(11) // fields 3 to 13
            .take(4)
            .map(|f| f.parse::<u64>().expect("a tick count"))
            .sum();
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .filter(|&hz| hz > 0)
            .expect("sysconf(_SC_CLK_TCK)");
        Duration::from_secs_f64(ticks as f64 / hz as f64)
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    /// `GET /v1/info`, or nothing while the socket does not answer it.
    fn info(&self) -> Option<serde_json::Value> {
        if std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            return None;
        }
        let (code, bytes) = call(&self.socket, "GET", "/v1/info", Bytes::new());
        if code != 200 {
            return None;
        }
        Some(serde_json::from_slice(&bytes).expect("GET /v1/info answers JSON"))
    }

    /// Polls `GET /v1/info` until `done` holds, for at most `within`; else panics with the
    /// daemon's stderr.
    fn until(
        &mut self,
        within: Duration,
        what: &str,
        done: impl Fn(Option<&serde_json::Value>) -> bool,
    ) {
        let started = Instant::now();
        loop {
            let info = self.info();
            if done(info.as_ref()) {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!(
                    "the {} daemon exited ({status}): {}",
                    self.name,
                    self.stderr()
                );
            }
            if started.elapsed() > within {
                panic!(
                    "the {} daemon did not {what} within {within:?} (last GET /v1/info: {}); its stderr: {}",
                    self.name,
                    info.map_or("none".into(), |i| i.to_string()),
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the pool has a warm sandbox ready (`"warm": {"ready": N}` in
    /// `/v1/info`, N >= 1); at once when the daemon tells nothing of a pool.
    fn until_warm(&mut self) {
        self.until(
            Duration::from_secs(20),
            "have a warm sandbox ready",
            |info| match info.map(|i| &i["warm"]) {
                Some(serde_json::Value::Null) => true,
                Some(w) => w["ready"].as_u64().is_some_and(|n| n >= 1),
                None => false,
            },
        );
    }

    /// The pool's hits and misses so far (`/metrics`), each absent when the daemon has no
    /// such counter.
    fn warm_counts(&self) -> (Option<f64>, Option<f64>) {
        (
            self.metric("openvibe_skill_runner_warm_hits_total"),
            self.metric("openvibe_skill_runner_warm_misses_total"),
        )
    }

    /// The sum of the `/metrics` samples named `name` (with any labels), or nothing when
    /// the daemon has no such metric.
    fn metric(&self, name: &str) -> Option<f64> {
        let (code, bytes) = call(&self.socket, "GET", "/metrics", Bytes::new());
        assert_eq!(
            code,
            200,
            "GET /metrics: {}",
            String::from_utf8_lossy(&bytes)
        );
        let text = String::from_utf8_lossy(&bytes);
        let samples: Vec<f64> = text
            .lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with([' ', '{']))
            })
            .map(|l| {
                l.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("a /metrics sample that is no number: {l}"))
            })
            .collect();
        (!samples.is_empty()).then(|| samples.iter().sum())
    }

    /// SIGTERM, then at most `within` for it to exit, then SIGKILL; its exit status, or
    /// nothing when it had to be killed.
    fn stop(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let started = Instant::now();
        while started.elapsed() < within {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// Stopped on SIGTERM within 10 s with exit code 0, or a panic with its stderr.
    fn shut_down(mut self) {
        match self.stop(Duration::from_secs(10)) {
            Some(status) if status.success() => {}
            Some(status) => panic!(
                "the {} daemon exited {status} on SIGTERM: {}",
                self.name,
                self.stderr()
            ),
            None => panic!(
                "the {} daemon did not exit within 10 s of SIGTERM (killed): {}",
                self.name,
                self.stderr()
            ),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // Before the folder (its socket, its state directory) is removed.
        self.stop(Duration::from_secs(10));
    }
}

/// Jobs per second with `conc` at once, `n` jobs in all.
fn throughput(n: usize, conc: usize, f: impl Fn() -> Duration + Sync) -> f64 {
    let t = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..conc {
            s.spawn(|| {
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < n {
                    f();
                }
            });
        }
    });
    n as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("overhead: run as root (the sandbox needs it)");
        std::process::exit(2);
    }
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this too, without it,
    // and then a few runs only check that the benchmark works.
    let benching = std::env::args().any(|a| a == "--bench");
    let n: usize = std::env::var("OVERHEAD_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if benching { 200 } else { 3 });
    let bin = bin();
    let node = PathBuf::from(openvibe_skill_runner::runtime::PINNED_PATH);
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("skill");
    std::fs::create_dir(&dir).expect("dir");
    std::fs::write(dir.join("tool.js"), TOOL).expect("tool");
    let preload = tmp.path().join("runtime/harden.cjs");
    std::fs::create_dir(tmp.path().join("runtime")).expect("runtime dir");
    std::fs::write(&preload, preload_for(&dir)).expect("preload");
    let job = serde_json::json!({
        "job_id": "bench",
        "class": "function",
        "artifact": "openvibe-skill-runner@1.0.0",
        "args": {"tool": "count_words", "entry": "tool.js", "input": serde_json::from_str::<serde_json::Value>(INPUT).expect("input")},
        "inputs": [{"name": "tool.js", "sha256": hex::encode(sha2::Sha256::digest(TOOL)),
                    "content_base64": base64::engine::general_purpose::STANDARD.encode(TOOL)}],
    });
    let job_path = tmp.path().join("job.json");
    std::fs::write(&job_path, serde_json::to_vec(&job).expect("json")).expect("job");
    let state = tmp.path().join("state");
    let base = std::env::var_os("OVERHEAD_BASE_BIN").map(PathBuf::from);
    let base_state = tmp.path().join("base-state");

    let mut pool = Daemon::start(&bin, "pool", true);
    let cold = Daemon::start(&bin, "no-pool", false);
    pool.until_warm();

    // Warm every path (page cache, runtime record) before measuring.
    for _ in 0..5 {
        run_bare(&node, &dir);
        run_sandboxed(&bin, &state, &job_path);
        if let Some(base) = &base {
            run_sandboxed(base, &base_state, &job_path);
        }
        run_daemon(&pool.socket, &job);
        run_daemon(&cold.socket, &job);
    }
    pool.until_warm();
    // Interleave so that noise on the machine hits all of them alike; between two jobs
    // of the pool's daemon, the other four give the pool time to refill.
    let flags = runner_flags(&dir, &preload);
    let (mut bare, mut flagged, mut boxed) = (Vec::new(), Vec::new(), Vec::new());
    let (mut base_boxed, mut pooled, mut unpooled) = (Vec::new(), Vec::new(), Vec::new());
    // CPU: each direct child's around its own run (they run one at a time); each daemon's
    // over the whole loop, its pool's refills happening while the others run.
    let mut cpu = [Duration::ZERO; 4]; // bare, flagged, run-job, base bin's run-job
    let timed = |slot: &mut Duration, f: &mut dyn FnMut() -> Duration| {
        let before = children_cpu();
        let d = f();
        *slot += children_cpu() - before;
        d
    };
    let (pool_cpu, cold_cpu) = (pool.cpu(), cold.cpu());
    for _ in 0..n {
        bare.push(timed(&mut cpu[0], &mut || run_bare(&node, &dir)));
        flagged.push(timed(&mut cpu[1], &mut || run_node(&node, &dir, &flags)));
        boxed.push(timed(&mut cpu[2], &mut || {
            run_sandboxed(&bin, &state, &job_path)
        }));
        if let Some(base) = &base {
            base_boxed.push(timed(&mut cpu[3], &mut || {
                run_sandboxed(base, &base_state, &job_path)
            }));
        }
        pooled.push(run_daemon(&pool.socket, &job));
        unpooled.push(run_daemon(&cold.socket, &job));
    }
    let (pool_cpu, cold_cpu) = (pool.cpu() - pool_cpu, cold.cpu() - cold_cpu);
    let seq_counts = pool.warm_counts();
    let b = stats(bare);
    let f = stats(flagged);
    let s = stats(boxed);
    let p = stats(pooled);
    let c = stats(unpooled);
    let o = (!base_boxed.is_empty()).then(|| stats(base_boxed));
    let line = |label: &str, x: Stats| {
        println!(
            "  {label:<26}median {:7.2} ms   p95 {:7.2} ms",
            x.median, x.p95
        )
    };
    println!("sequential, {n} runs each (interleaved):");
    line("bare node", b);
    line("node + the runner's flags", f);
    line("run-job (sandboxed)", s);
    line("daemon, pool", p);
    line("daemon, no pool", c);
    ratio("run-job / bare node", s, b);
    ratio("run-job / flagged node", s, f);
    ratio("daemon pool / bare", p, b);
    ratio("daemon pool / flagged", p, f);
    ratio("daemon no pool / bare", c, b);
    ratio("daemon no pool / flagged", c, f);
    ratio("daemon pool / no pool", p, c);
    if let Some(o) = o {
        line("run-job of the base bin", o);
        ratio("run-job / base bin's", s, o);
        ratio("base bin's / bare node", o, b);
    }
    let flagged_cpu = per_run(cpu[1], n);
    println!(
        "CPU a job, user and system, over the {n} sequential runs (ms; ratio to the flagged node):"
    );
    let cpu_line =
        |label: &str, ms: f64| println!("  {label:<26}{ms:7.2} ms   {:7.3}", ms / flagged_cpu);
    cpu_line("bare node", per_run(cpu[0], n));
    cpu_line("node + the runner's flags", flagged_cpu);
    cpu_line("run-job (sandboxed)", per_run(cpu[2], n));
    cpu_line("daemon, pool (warm-ups in)", per_run(pool_cpu, n));
    cpu_line("daemon, no pool", per_run(cold_cpu, n));
    if base.is_some() {
        cpu_line("run-job of the base bin", per_run(cpu[3], n));
    }
    println!("spread, {n} runs each (ms):");
    let spread = |label: &str, x: Stats| {
        println!(
            "  {label:<26}min {:7.2}   median {:7.2}   p95 {:7.2}   max {:7.2}",
            x.min, x.median, x.p95, x.max
        )
    };
    spread("bare node", b);
    spread("node + the runner's flags", f);
    spread("run-job (sandboxed)", s);
    spread("daemon, pool", p);
    spread("daemon, no pool", c);
    if let Some(o) = o {
        spread("run-job of the base bin", o);
    }

    let bare_run = || run_bare(&node, &dir);
    let flagged_run = || run_node(&node, &dir, &flags);
    let boxed_run = || run_sandboxed(&bin, &state, &job_path);
    let pool_run = || run_daemon(&pool.socket, &job);
    let cold_run = || run_daemon(&cold.socket, &job);
    let (base_state, job_path) = (&base_state, &job_path);
    let base_run = base
        .as_ref()
        .map(|base| move || run_sandboxed(base, base_state, job_path));
    let mut runs: Vec<&(dyn Fn() -> Duration + Sync)> =
        vec![&bare_run, &flagged_run, &boxed_run, &pool_run, &cold_run];
    if let Some(base_run) = &base_run {
        runs.push(base_run);
    }
    let t = throughputs(n, 2, &runs);
    let (tb, tf, ts, tp, tc) = (t[0], t[1], t[2], t[3], t[4]);
    println!("concurrency 2, {n} jobs each (in alternating rounds):");
    println!("  bare node                 {tb:7.1} jobs/s");
    println!("  node + the runner's flags {tf:7.1} jobs/s");
    println!("  run-job (sandboxed)       {ts:7.1} jobs/s");
    println!("  daemon, pool              {tp:7.1} jobs/s");
    println!("  daemon, no pool           {tc:7.1} jobs/s");
    println!("  run-job / bare node       {:7.3}", ts / tb);
    println!("  run-job / flagged node    {:7.3}", ts / tf);
    println!("  daemon pool / bare        {:7.3}", tp / tb);
    println!("  daemon pool / flagged     {:7.3}", tp / tf);
    println!("  daemon no pool / bare     {:7.3}", tc / tb);
    println!("  daemon no pool / flagged  {:7.3}", tc / tf);
    println!("  daemon pool / no pool     {:7.3}", tp / tc);
    if let Some(&to) = t.get(5) {
        println!("  run-job of the base bin   {to:7.1} jobs/s");
        println!("  run-job / base bin's      {:7.3}", ts / to);
        println!("  base bin's / bare node    {:7.3}", to / tb);
    }
    let show = |x: Option<f64>| x.map_or("n/a".to_string(), |v| v.to_string());
    let (hits, misses) = pool.warm_counts();
    println!("the pool's daemon, warm sandboxes (its /metrics):");
    println!(
        "  after the sequential runs hits {}   misses {}",
        show(seq_counts.0),
        show(seq_counts.1)
    );
    println!(
        "  at the end                hits {}   misses {}",
        show(hits),
        show(misses)
    );
    let (hits, misses) = cold.warm_counts();
    println!(
        "  (the no-pool daemon's     hits {}   misses {})",
        show(hits),
        show(misses)
    );
    pool.shut_down();
    cold.shut_down();
}
