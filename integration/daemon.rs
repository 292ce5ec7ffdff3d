//! The daemon (`serve`) from the built binary: its API over the unix socket, its queue,
//! its journal across `kill -9`, its answers to garbage, its stop on SIGTERM.
//!
//! Each test runs its own daemon with `--socket`, `--state-dir` and a configuration in a
//! temporary directory, and talks to it with hyper's HTTP/1.1 client (raw bytes where the
//! point is a malformed request).

use crate::common::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use openvibe_skill_runner::daemon::journal::{Entry, Journal};
use openvibe_skill_runner::skill::{job_from_skill, RunRequest};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A job running `code` as `tool.js`.
fn job(id: &str, code: &str, wall_ms: u64) -> Value {
    let mut j = code_job(id, code, json!({"n": 1}));
    j["limits"]["wall_ms"] = json!(wall_ms);
    j
}

/// The word-count test skill's job, as `run` would build it.
fn word_count(id: &str, text: &str) -> Value {
    let req = RunRequest {
        tool: "count_words".into(),
        input: json!({ "text": text }),
        net: None,
        wall_ms: None,
        mem_bytes: None,
    };
    let mut j = job_from_skill(&repo().join("test-skills/word-count"), &req).expect("word-count");
    j.job_id = id.to_string();
    serde_json::to_value(j).expect("job json")
}

const IDLE: &str = "setInterval(()=>{},1000)";
const ONE: &str = "process.stdout.write('1')";
const THROWS: &str = "throw new Error('boom')";

struct Daemon {
    dir: tempfile::TempDir,
    child: Option<Child>,
    rt: tokio::runtime::Runtime,
}

impl Daemon {
    /// A daemon with skills on and `extra` appended to its configuration.
    fn start(extra: &str) -> Daemon {
        let dir = tempfile::Builder::new()
            .prefix("ovsr-daemon-")
            .tempdir()
            .expect("temp dir");
        let config = format!("[worker]\nfunctions = [\"openvibe-skill-runner@1.0.0\"]\n{extra}\n");
        std::fs::write(dir.path().join("config.toml"), config).expect("config");
        let mut d = Daemon {
            dir,
            child: None,
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
        };
        d.spawn();
        d
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("run/skill-runner.sock")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("daemon.log"))
            .expect("log file");
        let child = Command::new(BIN)
            .arg("--config")
            .arg(self.config())
            .arg("--state-dir")
            .arg(self.state())
            .arg("serve")
            .arg("--socket")
            .arg(self.socket())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the daemon");
        self.child = Some(child);
        let started = Instant::now();
        loop {
            if StdUnixStream::connect(self.socket()).is_ok() {
                let (code, _) = self.call("GET", "/v1/info", None);
                if code == 200 {
                    return;
                }
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("the daemon exited at start ({status}): {}", self.log());
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the daemon did not answer within 30 s: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig).expect("signal");
    }

    /// Waits for the daemon to exit; its exit code.
    fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let mut child = self.child.take().expect("running");
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status.code();
            }
            if started.elapsed() > within {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the daemon did not exit within {within:?}: {}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill9(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("kill -9");
        child.wait().expect("reap");
    }

    /// One request; the status and the body (JSON when it parses, else a string).
    fn call(&self, method: &str, path: &str, body: Option<&[u8]>) -> (u16, Value) {
        self.rt.block_on(request(
            self.socket(),
            method,
            path,
            body.map(<[u8]>::to_vec),
        ))
    }

    fn post_wait(&self, job: &Value) -> Value {
        let (code, v) = self.call(
            "POST",
            "/v1/jobs?wait=1",
            Some(&serde_json::to_vec(job).expect("json")),
        );
        assert_eq!(code, 200, "{v}");
        v
    }

    fn post(&self, job: &Value) -> (u16, Value) {
        self.call(
            "POST",
            "/v1/jobs",
            Some(&serde_json::to_vec(job).expect("json")),
        )
    }

    fn get_job(&self, id: &str) -> Value {
        let (code, v) = self.call("GET", &format!("/v1/jobs/{id}"), None);
        assert_eq!(code, 200, "{v}");
        v
    }

    /// Polls until the job is in `state`.
    fn wait_state(&self, id: &str, state: &str) -> Value {
        let started = Instant::now();
        loop {
            let v = self.get_job(id);
            if v["state"] == state {
                return v;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{id} never reached {state}: {v}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn info(&self) -> Value {
        let (code, v) = self.call("GET", "/v1/info", None);
        assert_eq!(code, 200, "{v}");
        v
    }

    fn assert_no_job_dirs(&self) {
        let jobs = self.state().join("jobs");
        if let Ok(entries) = std::fs::read_dir(&jobs) {
            let left: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
            assert!(left.is_empty(), "job directories left: {left:?}");
        }
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        assert!(
            !mounts.contains(&self.state().display().to_string()),
            "a mount under the state directory is left"
        );
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = c.wait();
        }
    }
}

async fn request(socket: PathBuf, method: &str, path: &str, body: Option<Vec<u8>>) -> (u16, Value) {
    let stream = tokio::net::UnixStream::connect(&socket)
        .await
        .unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("handshake");
    tokio::spawn(conn);
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .expect("request");
    let resp = sender.send_request(req).await.expect("send the request");
    let code = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .expect("read the body")
        .to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (code, v)
}

/// Sends raw bytes on a fresh connection; what comes back before the daemon closes it or
/// `wait` passes.
fn raw(socket: &Path, bytes: &[u8], wait: Duration) -> String {
    let mut s = StdUnixStream::connect(socket).expect("connect");
    s.set_read_timeout(Some(wait)).expect("timeout");
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn assert_error(code: u16, v: &Value, want_code: u16, want: &str) {
    assert_eq!(code, want_code, "{v}");
    assert_eq!(v["error"]["code"], want, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{v}"
    );
}

fn journal_of(d: &Daemon) -> Journal {
    Journal::open(&d.state().join("journal.sqlite3")).expect("journal")
}

#[test]
fn the_daemon_runs_jobs_over_its_socket() {
    require_host();
    let _h = exclusive();
    let mut d =
        Daemon::start("[runner]\nmax_jobs = 1\nqueue_len = 1\n[daemon]\nshutdown_grace_ms = 500\n");
    let mode = std::fs::metadata(d.socket())
        .expect("socket")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o660);

    let info = d.info();
    assert_eq!(info["artifact"], "openvibe-skill-runner@1.0.0");
    assert_eq!(info["skills"], "on");
    assert_eq!(info["ready"], true, "{info}");
    assert_eq!(info["node"], "v24.22.3");
    assert_eq!(info["capacity"], json!({"max_jobs": 1, "queue_len": 1}));
    assert_eq!(
        info["caps"]["nets"],
        json!(["deny", "openvibe-only", "public"]),
        "{info}"
    );
    assert_eq!(
        info["egress"],
        json!({"openvibe_only_allow": ["openvibe.services"], "problem": null}),
        "{info}"
    );
    assert!(
        info["kernel"]["landlock_abi"].as_i64().unwrap_or(0) >= 1,
        "{info}"
    );

    // A job with egress, through the daemon: its own namespace and DNS responder, which
    // refuses a name outside the allow list without asking anyone (no network needed here).
    let mut j = job(
        "dtest-run-egress",
        "require('dns').lookup('www.example.org',(e,a)=>process.stdout.write(JSON.stringify(e?e.code:a)))",
        10_000,
    );
    j["net"] = json!("openvibe-only");
    let r = d.post_wait(&j);
    assert_status(&r, "ok", None);
    assert_eq!(r["output"], "ENOTFOUND", "{r}");
    assert_eq!(r["net"], "openvibe-only");
    assert_eq!(
        r["egress"],
        json!([{"host": "www.example.org", "port": 53, "allowed": false,
                "bytes_out": 0, "bytes_in": 0, "dns": "refused"}]),
        "{r}"
    );

    // A real skill, waited for.
    let r = d.post_wait(&word_count("dtest-run-wc", "one two three"));
    assert_status(&r, "ok", None);
    assert_eq!(r["output"]["words"], 3, "{r}");
    // The same id again: the first job's result, not a second run.
    let again = d.post_wait(&word_count("dtest-run-wc", "four"));
    assert_eq!(again, r);
    let (code, env) = d.post(&word_count("dtest-run-wc", "four"));
    assert_eq!(code, 200);
    assert_eq!(env["state"], "done");
    assert_eq!(env["result"], r);

    // Submitted without waiting, then polled.
    let (code, env) = d.post(&job("dtest-run-one", ONE, 5000));
    assert_eq!(code, 202, "{env}");
    assert_eq!(env, json!({"job_id": "dtest-run-one", "state": "queued"}));
    let done = d.wait_state("dtest-run-one", "done");
    assert_status(&done["result"], "ok", None);
    assert_eq!(done["result"]["output"], 1);

    // The slot is taken, the one queue place too: the next is busy at once; the queued
    // one's ttl passes; cancel ends the running one.
    let (code, _) = d.post(&job("dtest-run-idle", IDLE, 20000));
    assert_eq!(code, 202);
    d.wait_state("dtest-run-idle", "running");
    let mut queued = job("dtest-run-ttl", ONE, 5000);
    queued["ttl_ms"] = json!(300);
    let (code, env) = d.post(&queued);
    assert_eq!(code, 202, "{env}");
    let busy = d.post_wait(&job("dtest-run-busy", ONE, 5000));
    assert_status(&busy, "rejected", Some("busy"));
    let expired = d.post_wait(&queued);
    assert_status(&expired, "expired", Some("ttl"));
    let (code, cancelled) = d.call("DELETE", "/v1/jobs/dtest-run-idle", None);
    assert_eq!(code, 200, "{cancelled}");
    assert_status(&cancelled["result"], "cancelled", Some("cancelled"));
    // A busy job may come again once there is room.
    let r = d.post_wait(&job("dtest-run-busy", ONE, 5000));
    assert_status(&r, "ok", None);
    let (code, v) = d.call("DELETE", "/v1/jobs/dtest-run-nothing", None);
    assert_error(code, &v, 404, "not_found");

    // A failing tool and a rejected job are results too.
    assert_status(
        &d.post_wait(&job("dtest-run-throws", THROWS, 5000)),
        "error",
        Some("exit"),
    );
    let mut bad = job("dtest-run-bad", ONE, 5000);
    bad["limits"]["wall_ms"] = json!(30001);
    assert_status(&d.post_wait(&bad), "rejected", Some("limits_above_cap"));

    // Off: `skills off` edits the file, the daemon notices within a second or so.
    let out = Command::new(BIN)
        .args(["skills", "off", "--config"])
        .arg(d.config())
        .output()
        .expect("skills off");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "off");
    let started = Instant::now();
    loop {
        if d.info()["skills"] == "off" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "still on");
        std::thread::sleep(Duration::from_millis(50));
    }
    let off = d.post_wait(&job("dtest-run-off", ONE, 5000));
    assert_status(&off, "rejected", Some("runner_off"));
    // On again, the file edited by hand, and a SIGHUP for good measure.
    let text = std::fs::read_to_string(d.config()).expect("config");
    std::fs::write(
        d.config(),
        text.replace(
            "functions = []",
            "functions = [\"openvibe-skill-runner@1.0.0\"]",
        ),
    )
    .expect("config");
    d.signal(nix::sys::signal::Signal::SIGHUP);
    let started = Instant::now();
    while d.info()["skills"] != "on" {
        assert!(started.elapsed() < Duration::from_secs(5), "still off");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_status(&d.post_wait(&job("dtest-run-off", ONE, 5000)), "ok", None);

    let (code, metrics) = d.call("GET", "/metrics", None);
    assert_eq!(code, 200);
    let m = metrics.as_str().expect("text");
    for line in [
        "openvibe_skill_runner_jobs_total{status=\"ok\",reason=\"\"}",
        "openvibe_skill_runner_jobs_rejected_total{reason=\"busy\"} 1",
        "openvibe_skill_runner_jobs_total{status=\"expired\",reason=\"ttl\"} 1",
        "openvibe_skill_runner_jobs_total{status=\"cancelled\",reason=\"cancelled\"} 1",
        "openvibe_skill_runner_job_wall_seconds_count",
        "openvibe_skill_runner_job_cpu_seconds_bucket{le=\"+Inf\"}",
        "openvibe_skill_runner_jobs_running 0",
    ] {
        assert!(m.contains(line), "{line} missing from\n{m}");
    }

    // SIGTERM: the running job is given the grace period, then killed and recorded.
    let (code, _) = d.post(&job("dtest-run-term", IDLE, 20000));
    assert_eq!(code, 202);
    d.wait_state("dtest-run-term", "running");
    let t = Instant::now();
    d.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(10)), Some(0), "{}", d.log());
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "the grace period was given"
    );
    assert!(!d.socket().exists(), "the socket is removed at exit");
    let j = journal_of(&d);
    match j.get("dtest-run-term").expect("journal") {
        Some(Entry::Done(r)) => {
            assert_eq!(r.status.as_str(), "internal");
            assert_eq!(r.reason.as_deref(), Some("shutdown"));
        }
        other => panic!("{other:?}"),
    }
    assert!(d.log().contains("job ended"), "one log line per job end");
    d.assert_no_job_dirs();
    assert_host_clean("dtest-run");
}

#[test]
fn kill_9_mid_job_then_restart_leaves_nothing_and_ends_the_job_internal() {
    require_host();
    let _h = exclusive();
    let mut d = Daemon::start("[runner]\nmax_jobs = 2\n");
    let done = d.post_wait(&job("dtest-k9-done", ONE, 5000));
    assert_status(&done, "ok", None);
    for id in ["dtest-k9-a", "dtest-k9-b"] {
        let (code, _) = d.post(&job(id, IDLE, 20000));
        assert_eq!(code, 202);
    }
    let (code, _) = d.post(&job("dtest-k9-queued", IDLE, 20000));
    assert_eq!(code, 202);
    d.wait_state("dtest-k9-a", "running");
    d.wait_state("dtest-k9-b", "running");
    // Both sandboxes are up before the kill.
    let started = Instant::now();
    while sandbox_processes("dtest-k9").len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no sandbox started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    d.kill9();
    d.spawn();
    for id in ["dtest-k9-a", "dtest-k9-b", "dtest-k9-queued"] {
        let v = d.get_job(id);
        assert_eq!(v["state"], "done", "{v}");
        assert_status(&v["result"], "internal", Some("runner_restarted"));
        assert!(
            v["result"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("restarted")),
            "{v}"
        );
    }
    // The result from before the kill is still served.
    assert_eq!(d.get_job("dtest-k9-done")["result"], done);
    d.assert_no_job_dirs();
    assert_host_clean("dtest-k9");
    // And the restarted daemon runs jobs.
    assert_status(&d.post_wait(&job("dtest-k9-after", ONE, 5000)), "ok", None);
    d.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(10)), Some(0));
    assert_host_clean("dtest-k9");
}

#[test]
fn garbage_gets_a_4xx_and_the_daemon_keeps_answering() {
    require_host();
    let _h = exclusive();
    let d = Daemon::start("[daemon]\nheader_timeout_ms = 500\nbody_timeout_ms = 500\n");
    let sock = d.socket();

    let (code, v) = d.call("POST", "/v1/jobs", Some(b"{not json"));
    assert_error(code, &v, 400, "bad_json");
    let (code, v) = d.call("POST", "/v1/jobs", Some(b"[1,2]"));
    assert_error(code, &v, 400, "bad_json");
    let (code, v) = d.call("POST", "/v1/jobs", Some(b"\xff\xfe\x00"));
    assert_error(code, &v, 400, "bad_json");
    let (code, v) = d.call("POST", "/v1/jobs?wait=maybe", Some(b"{}"));
    assert_error(code, &v, 400, "bad_request");
    let (code, v) = d.call("PUT", "/v1/jobs", Some(b"{}"));
    assert_error(code, &v, 405, "method_not_allowed");
    let (code, v) = d.call("GET", "/v1/jobs", None);
    assert_error(code, &v, 405, "method_not_allowed");
    let (code, v) = d.call("POST", "/v1/info", Some(b"{}"));
    assert_error(code, &v, 405, "method_not_allowed");
    let (code, v) = d.call("PATCH", "/v1/jobs/x", None);
    assert_error(code, &v, 405, "method_not_allowed");
    let (code, v) = d.call("GET", "/v2/anything", None);
    assert_error(code, &v, 404, "not_found");
    let (code, v) = d.call("GET", "/v1/jobs/..%2f..%2fetc", None);
    assert_error(code, &v, 404, "not_found");
    let (code, v) = d.call("GET", "/v1/jobs/dtest-garbage-none", None);
    assert_error(code, &v, 404, "not_found");

    // Wrong types inside a job: a rejected result, not a crash.
    let mut j = job("dtest-garbage-types", ONE, 5000);
    j["limits"]["wall_ms"] = json!("ten");
    let r = d.post_wait(&j);
    assert_status(&r, "rejected", Some("invalid_job"));
    let r = d.post_wait(&json!({"job_id": 5}));
    assert_status(&r, "rejected", Some("invalid_job"));
    assert_eq!(r["job_id"], "");

    // Too big, announced or streamed.
    let mut big = b"POST /v1/jobs HTTP/1.1\r\nhost: x\r\ncontent-length: 9437184\r\n\r\n".to_vec();
    big.extend_from_slice(&vec![b' '; 9 * 1024 * 1024]);
    let out = raw(&sock, &big, Duration::from_secs(5));
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    let out = raw(
        &sock,
        b"POST /v1/jobs HTTP/1.1\r\nhost: x\r\ncontent-length: 999999999999\r\n\r\n",
        Duration::from_secs(5),
    );
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    assert!(out.contains("payload_too_large"), "{out}");
    let mut chunked =
        b"POST /v1/jobs HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..9 {
        chunked.extend_from_slice(b"100000\r\n");
        chunked.extend_from_slice(&vec![b' '; 0x100000]);
        chunked.extend_from_slice(b"\r\n");
    }
    let out = raw(&sock, &chunked, Duration::from_secs(5));
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");

    // Not HTTP at all, and a header that never ends: answered or closed, quickly.
    let out = raw(
        &sock,
        b"\x16\x03\x01garbage\r\n\r\n",
        Duration::from_secs(5),
    );
    assert!(out.is_empty() || out.starts_with("HTTP/1.1 4"), "{out}");
    let t = Instant::now();
    let _ = raw(
        &sock,
        b"GET /v1/info HTTP/1.1\r\nhost: x\r\n",
        Duration::from_secs(5),
    );
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "a slow header is cut off"
    );
    let t = Instant::now();
    let _ = raw(&sock, b"", Duration::from_secs(5));
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "an idle connection is cut off"
    );
    // A body that never comes: 408.
    let t = Instant::now();
    let out = raw(
        &sock,
        b"POST /v1/jobs HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"job",
        Duration::from_secs(5),
    );
    assert!(out.starts_with("HTTP/1.1 408"), "{out}");
    assert!(out.contains("request_timeout"), "{out}");
    assert!(t.elapsed() < Duration::from_secs(4));

    // Slow clients hold no worker: many idle connections, and the daemon still answers.
    let idle: Vec<_> = (0..64)
        .map(|_| {
            let mut s = StdUnixStream::connect(&sock).expect("connect");
            let _ = s.write_all(b"POST /v1/jobs HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\n");
            s
        })
        .collect();
    let t = Instant::now();
    assert_status(
        &d.post_wait(&job("dtest-garbage-ok", ONE, 5000)),
        "ok",
        None,
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    drop(idle);

    // A caller that is neither root nor allowed: 403. The socket's group lets it connect.
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(
        sock.parent().expect("dir"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    nix::unistd::chown(&sock, None, Some(nix::unistd::Gid::from_raw(65534))).expect("chown");
    use std::os::unix::process::CommandExt;
    let curl = |path: &str| {
        Command::new("curl")
            .args(["-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket"])
            .arg(&sock)
            .arg(format!("http://localhost{path}"))
            .uid(65533)
            .gid(65534)
            .output()
            .expect("curl")
    };
    let out = curl("/v1/info");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.ends_with("403"), "{text}");
    assert!(text.contains("\"forbidden\""), "{text}");
    assert!(
        d.log().contains("connection refused"),
        "a log line for the refusal"
    );
    // Allowed by configuration (re-read when the file changes): admitted.
    let mut text = std::fs::read_to_string(d.config()).expect("config");
    text.push_str("allow_uids = [65533]\n");
    std::fs::write(d.config(), text).expect("config");
    let started = Instant::now();
    loop {
        let out = curl("/v1/info");
        if String::from_utf8_lossy(&out.stdout).ends_with("200") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "never admitted");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Still alive and well.
    assert_eq!(d.info()["ready"], true);
    let (code, m) = d.call("GET", "/metrics", None);
    assert_eq!(code, 200);
    let forbidden: u64 = m
        .as_str()
        .unwrap_or("")
        .lines()
        .find_map(|l| l.strip_prefix("openvibe_skill_runner_connections_forbidden_total "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(forbidden >= 1, "{m}");
    assert_host_clean("dtest-garbage");
}

#[test]
fn fifty_mixed_jobs_at_four_in_flight_each_end_exactly_once() {
    require_host();
    let _h = exclusive();
    // The load, 1,000 jobs at 8 in flight (about two minutes here):
    // OVSR_LOAD_JOBS=1000 OVSR_LOAD_IN_FLIGHT=8 cargo test --release --test integration fifty
    let env_num = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(default)
    };
    let total = env_num("OVSR_LOAD_JOBS", 50);
    let in_flight = env_num("OVSR_LOAD_IN_FLIGHT", 4).max(1);
    let mut d = Daemon::start(&format!(
        "[runner]\nmax_jobs = 2\nqueue_len = {}\n",
        in_flight.max(4)
    ));
    let kinds: [(&str, &str, u64, &str, Option<&str>); 5] = [
        ("ok", ONE, 5000, "ok", None),
        ("throws", THROWS, 5000, "error", Some("exit")),
        ("idle", IDLE, 300, "limit", Some("wall")),
        (
            "flood",
            "process.stdout.write('x'.repeat(70000))",
            5000,
            "limit",
            Some("output"),
        ),
        ("bad", ONE, 40000, "rejected", Some("limits_above_cap")),
    ];
    let mut jobs = Vec::new();
    for i in 0..total {
        let (name, code, wall, status, reason) = kinds[i % kinds.len()];
        let id = format!("dtest-load-{i}-{name}");
        let mut j = job(&id, code, wall);
        if name == "bad" {
            j["limits"]["wall_ms"] = json!(wall);
        }
        if i % 7 == 3 {
            // Some come without their bytes: the cache has them from an earlier job, or not.
            j["inputs"][0]
                .as_object_mut()
                .expect("input")
                .remove("content_base64");
        }
        jobs.push((id, j, status, reason));
    }
    let sock = d.socket();
    let results: Vec<(String, Value)> = d.rt.block_on(async {
        let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(in_flight));
        let mut set = tokio::task::JoinSet::new();
        for (id, j, _, _) in &jobs {
            let permit = sem.clone().acquire_owned().await.expect("permit");
            let (sock, id, body) = (
                sock.clone(),
                id.clone(),
                serde_json::to_vec(j).expect("json"),
            );
            set.spawn(async move {
                let (code, v) = request(sock, "POST", "/v1/jobs?wait=1", Some(body)).await;
                drop(permit);
                assert_eq!(code, 200, "{v}");
                (id, v)
            });
        }
        let mut out = Vec::new();
        while let Some(r) = set.join_next().await {
            out.push(r.expect("task"));
        }
        out
    });
    assert_eq!(results.len(), total);
    let by_id: std::collections::HashMap<_, _> = results.into_iter().collect();
    for (id, j, status, reason) in &jobs {
        let r = &by_id[id];
        assert_eq!(r["job_id"], *id, "{r}");
        let without_bytes = j["inputs"][0].get("content_base64").is_none();
        if without_bytes && r["status"] == "integrity" {
            assert_status(r, "integrity", Some("input_missing"));
        } else {
            assert_status(r, status, *reason);
        }
    }
    d.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(10)), Some(0));
    let journal = journal_of(&d);
    for (id, _, _, _) in &jobs {
        match journal.get(id).expect("journal") {
            Some(Entry::Done(r)) => {
                assert_eq!(
                    serde_json::to_value(&*r).expect("json"),
                    by_id[id],
                    "the journal holds the result that was answered"
                );
            }
            other => panic!("{id}: {other:?}"),
        }
    }
    let census = journal.census().expect("census");
    assert!(
        census.iter().all(|(state, _, _)| state == "done"),
        "{census:?}"
    );
    assert_eq!(
        census.iter().map(|(_, _, n)| n).sum::<u64>(),
        total as u64,
        "{census:?}"
    );
    d.assert_no_job_dirs();
    assert_host_clean("dtest-load");
}

/// A local Media service on the loopback: `/media/<id>` from `files`; `silent` never
/// answers; every request is counted.
fn media_server(
    files: std::collections::HashMap<String, Vec<u8>>,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let hits = std::sync::Arc::new(AtomicUsize::new(0));
    let files = std::sync::Arc::new(files);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr");
    let counter = hits.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (files, counter) = (files.clone(), counter.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let (files, counter) = (files.clone(), counter.clone());
                            async move {
                                counter.fetch_add(1, Ordering::SeqCst);
                                let id = req.uri().path().trim_start_matches("/media/").to_string();
                                if id == "silent" {
                                    tokio::time::sleep(Duration::from_secs(20)).await;
                                }
                                let mut resp = hyper::Response::new(Full::new(Bytes::from(
                                    files.get(&id).cloned().unwrap_or_default(),
                                )));
                                if !files.contains_key(&id) {
                                    *resp.status_mut() = hyper::StatusCode::NOT_FOUND;
                                }
                                Ok::<_, std::convert::Infallible>(resp)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
    });
    (addr, hits)
}

#[test]
fn inputs_without_bytes_come_from_media_verified() {
    require_host();
    let _h = exclusive();
    let code = "process.stdout.write(JSON.stringify({from:'media'}))";
    let files: std::collections::HashMap<String, Vec<u8>> = [
        ("med_good".to_string(), code.as_bytes().to_vec()),
        (
            "med_other".to_string(),
            b"process.stdout.write('evil')".to_vec(),
        ),
        ("med_big".to_string(), vec![b'x'; 2 << 20]),
    ]
    .into_iter()
    .collect();
    let (addr, hits) = media_server(files);
    let d = Daemon::start(&format!(
        "[runner]\nmedia_url = \"http://{addr}/media\"\nmedia_timeout_ms = 700\n"
    ));
    // The job names the bytes it expects by their sha256: the good bytes for med_good,
    // bytes nobody has for the others (so the cache cannot answer for them).
    let from_media = |id: &str, media_id: &str| {
        let expected = if media_id == "med_good" {
            code.to_string()
        } else {
            format!("{code}//{id}")
        };
        let mut j = job(id, &expected, 5000);
        let input = j["inputs"][0].as_object_mut().expect("input");
        input.remove("content_base64");
        input.insert("media_id".into(), json!(media_id));
        j
    };
    let r = d.post_wait(&from_media("dtest-media-good", "med_good"));
    assert_status(&r, "ok", None);
    assert_eq!(r["output"], json!({"from": "media"}));
    let r = d.post_wait(&from_media("dtest-media-other", "med_other"));
    assert_status(&r, "integrity", Some("sha256_mismatch"));
    let r = d.post_wait(&from_media("dtest-media-big", "med_big"));
    assert_status(&r, "integrity", Some("input_missing"));
    let r = d.post_wait(&from_media("dtest-media-gone", "med_gone"));
    assert_status(&r, "integrity", Some("input_missing"));
    assert!(r["message"].as_str().unwrap_or("").contains("404"), "{r}");
    let t = Instant::now();
    let r = d.post_wait(&from_media("dtest-media-silent", "silent"));
    assert_status(&r, "integrity", Some("input_missing"));
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "bounded by media_timeout_ms"
    );
    // The good bytes are cached now: no second fetch.
    let before = hits.load(std::sync::atomic::Ordering::SeqCst);
    let r = d.post_wait(&from_media("dtest-media-again", "med_good"));
    assert_status(&r, "ok", None);
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), before);
    d.assert_no_job_dirs();
    assert_host_clean("dtest-media");
}

#[test]
fn a_host_that_cannot_run_jobs_still_answers_and_says_why() {
    require_host();
    let _h = exclusive();
    let d = Daemon::start("[runner]\nnode = \"/nonexistent/bin/node\"\n");
    let info = d.info();
    assert_eq!(info["ready"], false, "{info}");
    assert!(
        info["problem"]
            .as_str()
            .is_some_and(|p| p.contains("/nonexistent/bin/node")),
        "{info}"
    );
    let r = d.post_wait(&job("dtest-unready-1", ONE, 5000));
    assert_status(&r, "internal", Some("runner_unavailable"));
    assert!(
        r["message"].as_str().unwrap_or("").contains("doctor"),
        "{r}"
    );
    assert_eq!(d.get_job("dtest-unready-1")["result"], r);
    assert_host_clean("dtest-unready");
}
