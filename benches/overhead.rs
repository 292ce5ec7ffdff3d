//! The sandbox's cost, measured against bare Node in the same run (the machine is shared
//! and noisy, so only ratios mean anything). Run as root: `cargo bench --bench overhead`
//! (N=200 by default; `OVERHEAD_N=50` for a quick look). It builds the release binary
//! first through cargo. `OVERHEAD_BASE_BIN=<another openvibe-skill-runner>` (say, a build
//! of an older commit) adds that binary's `run-job`, interleaved with the others, and the
//! ratio of the two: a before/after comparison the machine's drift between runs cannot skew.
//!
//! Bare: `node tool.js < input.json`. Flagged: the job's own Node command line (the
//! contract's flags, the read grants, the runner's preload) without the sandbox. Sandboxed: `openvibe-skill-runner run-job job.json`
//! (a whole CLI start, job validation, input layout, cgroup, namespaces, landlock, seccomp,
//! Node, cleanup). Both run the same trivial tool on the same input.

use base64::Engine as _;
use sha2::Digest;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOOL: &str = "let d='';process.stdin.on('data',c=>d+=c);process.stdin.on('end',()=>{const i=JSON.parse(d);process.stdout.write(JSON.stringify({words:i.text.split(/\\s+/).filter(Boolean).length}))});";
const INPUT: &str = r#"{"text":"the quick brown fox jumps over the lazy dog"}"#;

fn bin() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("cargo")
        .args(["build", "--release", "--quiet"])
        .current_dir(&root)
        .status()
        .expect("cargo build");
    assert!(status.success(), "cargo build --release failed");
    root.join("target/release/openvibe-skill-runner")
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

fn stats(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = ms(v[v.len() / 2]);
    let p95 = ms(v[((v.len() as f64) * 0.95) as usize - 1]);
    (median, p95)
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

    // Warm every path (page cache, runtime record) before measuring.
    for _ in 0..5 {
        run_bare(&node, &dir);
        run_sandboxed(&bin, &state, &job_path);
        if let Some(base) = &base {
            run_sandboxed(base, &base_state, &job_path);
        }
    }
    // Interleave so that noise on the machine hits all of them alike.
    let flags = runner_flags(&dir, &preload);
    let (mut bare, mut flagged, mut boxed) = (Vec::new(), Vec::new(), Vec::new());
    let mut base_boxed = Vec::new();
    for _ in 0..n {
        bare.push(run_bare(&node, &dir));
        flagged.push(run_node(&node, &dir, &flags));
        boxed.push(run_sandboxed(&bin, &state, &job_path));
        if let Some(base) = &base {
            base_boxed.push(run_sandboxed(base, &base_state, &job_path));
        }
    }
    let (bm, bp) = stats(bare);
    let (fm, fp) = stats(flagged);
    let (sm, sp) = stats(boxed);
    println!("sequential, {n} runs each (interleaved):");
    println!("  bare node                 median {bm:7.2} ms   p95 {bp:7.2} ms");
    println!("  node + the runner's flags median {fm:7.2} ms   p95 {fp:7.2} ms");
    println!("  run-job (sandboxed)       median {sm:7.2} ms   p95 {sp:7.2} ms");
    println!(
        "  run-job / bare node       median {:7.3}      p95 {:7.3}",
        sm / bm,
        sp / bp
    );
    println!(
        "  run-job / flagged node    median {:7.3}      p95 {:7.3}",
        sm / fm,
        sp / fp
    );
    if !base_boxed.is_empty() {
        let (om, op) = stats(base_boxed);
        println!("  run-job of the base bin   median {om:7.2} ms   p95 {op:7.2} ms");
        println!(
            "  run-job / base bin's      median {:7.3}      p95 {:7.3}",
            sm / om,
            sp / op
        );
        println!(
            "  base bin's / bare node    median {:7.3}      p95 {:7.3}",
            om / bm,
            op / bp
        );
    }
    let bare_run = || run_bare(&node, &dir);
    let flagged_run = || run_node(&node, &dir, &flags);
    let boxed_run = || run_sandboxed(&bin, &state, &job_path);
    let (tb, tf, ts, to) = match &base {
        None => {
            let t = throughputs(n, 2, &[&bare_run, &flagged_run, &boxed_run]);
            (t[0], t[1], t[2], None)
        }
        Some(base) => {
            let base_run = || run_sandboxed(base, &base_state, &job_path);
            let t = throughputs(n, 2, &[&bare_run, &flagged_run, &boxed_run, &base_run]);
            (t[0], t[1], t[2], Some(t[3]))
        }
    };
    println!("concurrency 2, {n} jobs each (in alternating rounds):");
    println!("  bare node                 {tb:7.1} jobs/s");
    println!("  node + the runner's flags {tf:7.1} jobs/s");
    println!("  run-job (sandboxed)       {ts:7.1} jobs/s");
    println!("  run-job / bare node       {:7.3}", ts / tb);
    println!("  run-job / flagged node    {:7.3}", ts / tf);
    if let Some(to) = to {
        println!("  run-job of the base bin   {to:7.1} jobs/s");
        println!("  run-job / base bin's      {:7.3}", ts / to);
        println!("  base bin's / bare node    {:7.3}", to / tb);
    }
}
