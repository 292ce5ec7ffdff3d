//! The tool's input and its answer pass through exactly as written (issue 13): key order,
//! big integers, `-0`, `1.0000000000000002`, escapes such as `"\u00e9"` and `"\/"`, on
//! `run-job` and `run --input` (the daemon's paths are in `daemon.rs`). Results are read
//! as text here: a JSON value type would itself reorder and round what it reads.

use crate::common::*;
use serde::Deserialize;
use serde_json::value::RawValue;

/// An input no JSON value type keeps as written.
pub const INPUT: &str = r#"{"zeta":2,"id":1234567890123456789012,"alpha":[3,1],"neg":-0,"f":1.0000000000000002,"e1":"\u00e9","e2":"é","slash":"\/","huge":1E400,"tiny":-1e-400,"lone":"\ud800","nested":{"b":[{"y":1,"x":2}],"a":null}}"#;

/// The output from the issue, as a tool writes it (whitespace around it is not part of it).
pub const OUTPUT: &str = r#"{"zeta":1,"id":1234567890123456789012,"alpha":1.0000000000000002,"neg":-0,"esc":"\u00e9\/é"}"#;

/// Writes stdin back, byte for byte.
pub const ECHO: &str = "const c=[];process.stdin.on('data',d=>c.push(d));\
process.stdin.on('end',()=>process.stdout.write(Buffer.concat(c)));\n";

/// A result with its `output` kept as text.
#[derive(Debug, Deserialize)]
pub struct RawResult {
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub output: Option<Box<RawValue>>,
    #[serde(default)]
    pub stderr: String,
}

impl RawResult {
    pub fn parse(text: &[u8]) -> RawResult {
        let text = String::from_utf8_lossy(text);
        let line = text.lines().last().unwrap_or("");
        serde_json::from_str(line).unwrap_or_else(|e| panic!("result is not JSON ({e}): {text}"))
    }

    #[track_caller]
    pub fn assert_output(&self, want: &str) {
        assert_eq!(
            (self.status.as_str(), self.reason.as_deref()),
            ("ok", None),
            "{:?}",
            self.message
        );
        assert_eq!(self.output.as_ref().map(|o| o.get()), Some(want));
    }
}

/// A job's text whose `args.input` is `input`, written as is (not through a value).
pub fn job_text(id: &str, code: &str, input: &str) -> String {
    let job = code_job(id, code, serde_json::Value::Null).to_string();
    assert_eq!(job.matches("\"input\":null").count(), 1, "{job}");
    job.replacen("\"input\":null", &format!("\"input\":{input}"), 1)
}

fn run_job_raw(state: &State, text: &str) -> RawResult {
    let out = feed(
        runner_in(state.path()).arg("run-job").arg("-"),
        text.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    state.assert_clean();
    RawResult::parse(&out.stdout)
}

#[test]
fn run_job_passes_the_input_to_stdin_as_written() {
    require_host();
    let _h = shared();
    let state = State::new();
    let r = run_job_raw(&state, &job_text("exact-rj-echo", ECHO, INPUT));
    r.assert_output(INPUT);
    // Its own jobs' prefix: the tests beside it run jobs of their own.
    assert_host_clean("exact-rj-echo");
}

#[test]
fn run_job_returns_the_output_as_written() {
    require_host();
    let _h = shared();
    let state = State::new();
    let code = format!("process.stdout.write({:?})", format!("\n  {OUTPUT} \r\n"));
    let r = run_job_raw(&state, &job_text("exact-rj-out", &code, "null"));
    r.assert_output(OUTPUT);
    // Scalars RFC 8259 allows, which a float would respell.
    for (i, text) in [
        "-0",
        "1E400",
        "123456789012345678901234567890",
        "\"\\ud83d\"",
    ]
    .iter()
    .enumerate()
    {
        let code = format!("process.stdout.write({text:?})");
        let id = format!("exact-rj-out-s{i}");
        let r = run_job_raw(&state, &job_text(&id, &code, "null"));
        r.assert_output(text);
    }
    assert_host_clean("exact-rj-out");
}

#[test]
fn run_job_refuses_a_key_twice_in_args_input_and_runs_nothing() {
    require_host();
    let _h = shared();
    let state = State::new();
    let r = run_job_raw(
        &state,
        &job_text("exact-rj-dup", ECHO, r#"{"net":"deny","net":"public"}"#),
    );
    assert_eq!(
        (r.status.as_str(), r.reason.as_deref()),
        ("rejected", Some("invalid_job"))
    );
    let message = r.message.unwrap_or_default();
    assert!(message.contains("args.input"), "{message}");
    assert!(message.contains("\"net\" more than once"), "{message}");
}

/// A skill folder with one tool, `echo`, that writes its stdin back.
fn echo_skill() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("ovsr-exact-")
        .tempdir()
        .expect("temp dir");
    let manifest = serde_json::json!({
        "slug": "exact-echo",
        "version": "1.0.0",
        "runs": "sandbox",
        "tools": [{
            "name": "echo",
            "description": "Writes its input back.",
            "language": "javascript",
            "entry": "echo.js",
            "args": {"type": "object"},
            "net": "deny"
        }]
    });
    std::fs::write(dir.path().join("skill.json"), manifest.to_string()).expect("manifest");
    std::fs::write(dir.path().join("echo.js"), ECHO).expect("code");
    dir
}

#[test]
fn run_input_reaches_the_tool_as_written() {
    require_host();
    let _h = shared();
    let state = State::new();
    let skill = echo_skill();
    let run = |input: &str| {
        runner_in(state.path())
            .args(["run", &skill.path().display().to_string(), "--tool", "echo"])
            .args(["--input", input, "--json"])
            .output()
            .expect("run")
    };
    let out = run(INPUT);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    RawResult::parse(&out.stdout).assert_output(INPUT);

    // From a file, with whitespace around it: the value itself as written.
    let file = state.path().join("input.json");
    std::fs::write(&file, format!("\n\t{INPUT}\n\n")).expect("input file");
    let out = run(&format!("@{}", file.display()));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    RawResult::parse(&out.stdout).assert_output(INPUT);

    // The human summary prints the output as written too.
    let out = runner_in(state.path())
        .args(["run", &skill.path().display().to_string(), "--tool", "echo"])
        .args(["--input", INPUT])
        .output()
        .expect("run");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("output:\n{INPUT}\n")),
        "{out:?}"
    );

    // An input over the runner's bound (`runner.max_input_json_bytes`) is the same
    // `rejected`/`invalid_job` a dispatched job gets: `run` shares the rule; nothing runs.
    let cap = openvibe_skill_runner::job::INPUT_JSON_DEFAULT_CAP;
    let big = state.path().join("big-input.json");
    std::fs::write(&big, format!("{{\"s\":\"{}\"}}", "x".repeat(cap))).expect("input file");
    let out = run(&format!("@{}", big.display()));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a result");
    assert_eq!(
        (r["status"].as_str(), r["reason"].as_str()),
        (Some("rejected"), Some("invalid_job")),
        "{r}"
    );
    assert!(
        r["message"]
            .as_str()
            .is_some_and(|m| m.contains("args.input is")),
        "{r}"
    );
    assert_eq!(r["wall_ms"], 0, "nothing ran: {r}");
    std::fs::remove_file(&big).expect("remove the input file");

    // A key twice is a usage error that says which key and where; nothing runs.
    let out = run(r#"{"a":{"k":1,"k":2}}"#);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"/a\"") && err.contains("\"k\""), "{err}");
    state.assert_clean();
    assert_host_clean("run-exact-echo");
}
