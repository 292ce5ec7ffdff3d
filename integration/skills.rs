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
    let r = state.run_skill(dir, &case.tool, &case.input, &extra);
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
