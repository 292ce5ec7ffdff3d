//! Jobs built by hand and sent to `run-job`: malformed jobs, integrity failures, and
//! tools that need no skill folder.

use crate::common::*;
use base64::Engine as _;
use serde_json::{json, Value};

fn job(id: &str, code: &str, input: Value) -> Value {
    code_job(id, code, input)
}

const ECHO: &str = "let d='';process.stdin.on('data',c=>d+=c);process.stdin.on('end',()=>process.stdout.write(JSON.stringify({got:JSON.parse(d)})));";

#[test]
fn a_benign_job_runs_and_reports_its_measurements() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let r = state.run_job(&job("itest-echo", ECHO, json!({"text": "hi"})));
    assert_status(&r, "ok", None);
    assert_eq!(r["output"], json!({"got": {"text": "hi"}}));
    assert_eq!(r["job_id"], "itest-echo");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["node"], "v24.22.3");
    assert!(r["wall_ms"].as_u64().unwrap_or(0) > 0);
    assert!(
        r["cpu_ms"].as_u64().unwrap_or(0) > 0,
        "cpu from the cgroup: {r}"
    );
    assert!(r["mem_peak_bytes"].as_u64().unwrap_or(0) > 1 << 20, "{r}");
    assert_eq!(r["egress"], json!([]));
    assert_host_clean("itest-echo");
}

/// A state directory given as a relative path (`--state-dir state`, from the folder the
/// command runs in) works: the job's root is made under it, although the sandbox's
/// processes work from `/`. Before, every job ended `internal` at "mount root tmpfs" once
/// the job's pid 1 left the caller's folder.
#[test]
fn a_relative_state_directory_runs_jobs() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let config = hermetic_config_file(state.path());
    // The runtime record the suite keeps (State's), so that Node is not hashed again.
    let relative = state.path().join("relative-state");
    std::fs::create_dir(&relative).expect("the relative state directory");
    std::fs::set_permissions(
        &relative,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    if let Ok(record) = std::fs::read(state.path().join("runtime.json")) {
        std::fs::write(relative.join("runtime.json"), record).expect("seed the record");
    }
    let out = std::process::Command::new(BIN)
        .current_dir(state.path())
        .arg("--config")
        .arg(&config)
        .args(["--state-dir", "relative-state", "run"])
        .arg(repo().join("test-skills/word-count"))
        .args([
            "--tool",
            "count_words",
            "--input",
            r#"{"text":"one two three"}"#,
            "--json",
        ])
        .output()
        .expect("run the runner");
    let result = parse_result(&out.stdout);
    assert_eq!(
        result["status"],
        "ok",
        "{result} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(result["output"]["words"], 3, "{result}");
    let jobs = relative.join("jobs");
    assert!(
        jobs.is_dir(),
        "the jobs folder is under the folder the command ran in"
    );
    assert_eq!(
        std::fs::read_dir(&jobs).expect("jobs").count(),
        0,
        "no job directory left"
    );
    assert_host_clean(result["job_id"].as_str().expect("a job id"));
}

#[test]
fn a_job_id_of_the_longest_allowed_length_runs() {
    // SPEC allows 64 characters; the job's cgroup is named `<id>.<pid>.<seq>`, which once
    // passed the cgroup name's bound and ended such a job `internal` before it started.
    require_host();
    let _h = exclusive();
    let state = State::new();
    let id = format!("itest-long-{}", "x.Y_9-".repeat(9))[..64].to_owned();
    assert_eq!(id.len(), 64);
    let r = state.run_job(&job(&id, ECHO, json!({"text": "long"})));
    assert_status(&r, "ok", None);
    assert_eq!(r["job_id"], id.as_str());
    assert_eq!(r["output"], json!({"got": {"text": "long"}}));
    assert_host_clean(&id);
}

/// The host's monotonic clock, in whole seconds: how long it has been up.
fn host_monotonic_secs() -> i64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("clock_gettime")
        .tv_sec()
}

/// A job that prints its monotonic clock, and the check that it starts near zero, not at
/// the host's uptime. Without a time namespace `process.hrtime` counts from the host's
/// boot. The comparison needs a host up for longer than a job could take, so a freshly
/// booted one waits (at most a minute) until it is.
const CLOCK: &str = "process.stdout.write(JSON.stringify({hrtime_ms: Number(process.hrtime.bigint() / 1000000n)}));";

fn wait_for_a_host_up_a_minute() -> i64 {
    let threshold = 60;
    while host_monotonic_secs() < threshold {
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    threshold
}

fn assert_own_clock(r: &Value, threshold: i64) {
    assert_status(r, "ok", None);
    let job_ms = r["output"]["hrtime_ms"].as_i64().expect("a number");
    let host_ms = host_monotonic_secs() * 1000;
    assert!(
        (0..20_000).contains(&job_ms),
        "the job's monotonic clock reads {job_ms} ms (the host's {host_ms} ms): it must start near zero"
    );
    assert!(
        host_ms >= threshold * 1000 && job_ms < host_ms - 30_000,
        "{job_ms} {host_ms}"
    );
}

#[test]
fn a_job_reads_its_own_clock_not_the_hosts_uptime() {
    require_host();
    let _h = exclusive();
    let threshold = wait_for_a_host_up_a_minute();
    let state = State::new();
    let r = state.run_job(&job("itest-clock", CLOCK, json!(null)));
    assert_own_clock(&r, threshold);
    assert_host_clean("itest-clock");
}

/// A runner without CAP_SYS_TIME (systemd's `ProtectClock=`, here `setpriv` taking it out
/// of the bounding set) cannot set a time namespace's clocks itself: a helper makes the
/// namespace inside a user namespace of its own, and the job still reads its own clock.
/// Before this, such a job read the host's uptime. `doctor` says which way it went.
#[test]
fn without_cap_sys_time_a_job_still_reads_its_own_clock() {
    require_host();
    let _h = exclusive();
    let threshold = wait_for_a_host_up_a_minute();
    let state = State::new();
    let without_sys_time =
        || runner_under(&["setpriv", "--bounding-set", "-sys_time"], state.path());
    let doctor = without_sys_time()
        .arg("doctor")
        .output()
        .expect("run setpriv (util-linux)");
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        said.lines()
            .any(|l| l.contains("time namespace") && l.contains("owned by a user namespace")),
        "doctor without CAP_SYS_TIME: {said}"
    );
    let text = serde_json::to_vec(&job("itest-clock-userns", CLOCK, json!(null))).expect("json");
    let out = feed(without_sys_time().args(["run-job", "-"]), &text);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_own_clock(&parse_result(&out.stdout), threshold);
    state.assert_clean();
    assert_host_clean("itest-clock-userns");
}

/// A state directory whose runner hands each job to a sandbox warmed for it (the test
/// hook `runner.warm_every_job`), or runs it cold.
fn warm_or_cold(warm: bool) -> State {
    let state = State::new();
    std::fs::write(
        state.path().join("config.toml"),
        hermetic(&format!("[runner]\nwarm_every_job = {warm}\n")),
    )
    .expect("the configuration");
    state
}

/// The capabilities the packaged unit leaves the daemon (`CapabilityBoundingSet=` of
/// packaging/openvibe-skill-runner.service), as `setpriv --bounding-set` takes them.
fn the_units_bounding_set() -> String {
    let unit = std::fs::read_to_string(repo().join("packaging/openvibe-skill-runner.service"))
        .expect("the packaged unit");
    let caps: Vec<String> = unit
        .lines()
        .filter_map(|l| l.trim().strip_prefix("CapabilityBoundingSet="))
        .flat_map(str::split_whitespace)
        .map(|c| {
            let name = c.strip_prefix("CAP_").expect("a capability named CAP_*");
            format!("+{}", name.to_ascii_lowercase())
        })
        .collect();
    assert!(caps.len() >= 5, "the unit's bounding set: {caps:?}");
    format!("-all,{}", caps.join(","))
}

/// A runner with only the capabilities the packaged unit leaves it runs jobs, cold and
/// handed to a warm sandbox (the test hook `runner.warm_every_job` ends a job `internal`
/// when the hand-over fails rather than running it cold); so does one with every
/// capability but CAP_SYS_NICE (a container's set, say), whose warm sandboxes wait at its
/// own priority. The unit once lacked CAP_SYS_NICE: every warm hand-over failed setting
/// the job's priority back, and each daemon job quietly ran cold after a wasted warm-up.
#[test]
fn the_packaged_units_capabilities_run_jobs_warm_and_cold() {
    require_host();
    let _h = exclusive();
    let units = the_units_bounding_set();
    for (bounding, warm) in [
        (units.as_str(), false),
        (units.as_str(), true),
        ("-sys_nice", true),
    ] {
        let state = warm_or_cold(warm);
        let under_unit = || runner_under(&["setpriv", "--bounding-set", bounding], state.path());
        let doctor = under_unit()
            .arg("doctor")
            .output()
            .expect("run setpriv (util-linux)");
        assert_eq!(
            doctor.status.code(),
            Some(0),
            "doctor under the unit's capabilities: {}{}",
            String::from_utf8_lossy(&doctor.stdout),
            String::from_utf8_lossy(&doctor.stderr)
        );
        let id = format!(
            "itest-unit-caps-{}{}",
            if warm { "warm" } else { "cold" },
            if bounding == units { "" } else { "-no-nice" }
        );
        let text = serde_json::to_vec(&job(&id, ECHO, json!({"n": 1}))).expect("json");
        let out = feed(under_unit().args(["run-job", "-"]), &text);
        let r = parse_result(&out.stdout);
        assert_status(&r, "ok", None);
        assert_eq!(
            r["output"],
            json!({"got": {"n": 1}}),
            "warm: {warm}, bounding set {bounding}"
        );
        state.assert_clean();
        assert_host_clean(&id);
    }
}

/// The nice value of every thread of every process below `root` (not `root` itself), by
/// pid: the job's init stage, pid 1 and Node's threads under a runner.
fn nice_below(root: u32) -> Vec<(u32, String)> {
    let stat_after_comm = |path: std::path::PathBuf| -> Option<String> {
        let stat = std::fs::read_to_string(path).ok()?;
        Some(stat.rsplit_once(") ")?.1.to_string())
    };
    let parent = |pid: u32| -> Option<u32> {
        stat_after_comm(format!("/proc/{pid}/stat").into())?
            .split(' ')
            .nth(1)?
            .parse()
            .ok()
    };
    let below = |mut pid: u32| -> bool {
        for _ in 0..64 {
            match parent(pid) {
                Some(p) if p == root => return true,
                Some(p) if p > 1 => pid = p,
                _ => return false,
            }
        }
        false
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if !below(pid) {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            // Field 19, nice: the 17th after the comm's closing parenthesis.
            if let Some(nice) = stat_after_comm(task.path().join("stat"))
                .and_then(|f| f.split(' ').nth(16).map(str::to_string))
            {
                found.push((pid, nice));
            }
        }
    }
    found
}

/// A runner started under `nice` (systemd's `Nice=`, say) runs every job at its own nice
/// value, warm or cold: a warm sandbox waits at a higher value and is set back to the
/// runner's at the hand-over, not to 0, which would run the job ahead of what the operator
/// asked. Here `run-job` under `nice -n 5`, once cold and once with the job handed to a
/// sandbox warmed for it (the test hook `runner.warm_every_job`); the host reads the nice
/// value of every thread below the runner while the tool waits (the tool cannot: seccomp
/// refuses it `getpriority`).
#[test]
fn a_runner_under_nice_runs_its_jobs_at_its_nice_value_warm_or_cold() {
    require_host();
    let _h = exclusive();
    let expected = (openvibe_skill_runner::supervise::runner_nice() + 5)
        .min(19)
        .to_string();
    let code = "setTimeout(() => process.stdout.write(JSON.stringify({waited: true})), 1500);";
    for warm in [false, true] {
        let state = warm_or_cold(warm);
        let mut child =
            spawn_piped(runner_under(&["nice", "-n", "5"], state.path()).args(["run-job", "-"]));
        let id = format!("itest-nice-{}", if warm { "warm" } else { "cold" });
        let text = serde_json::to_vec(&job(&id, code, json!(null))).expect("json");
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), &text).expect("the job");
        // Node has its threads once it runs the tool: wait for a process of the job's uid
        // below the runner (at most 10 s), then a moment for the tool's timer.
        let node_runs = || {
            let below: Vec<u32> = nice_below(child.id()).into_iter().map(|(p, _)| p).collect();
            all_sandbox_processes()
                .iter()
                .any(|p| p.uid >= SANDBOX_UID_BASE && below.contains(&(p.pid as u32)))
        };
        assert!(
            wait_for(std::time::Duration::from_secs(10), node_runs),
            "the job's Node never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
        let seen = nice_below(child.id());
        let r = result_of(child, &format!("warm: {warm}"));
        assert_status(&r, "ok", None);
        assert!(seen.len() >= 3, "warm: {warm}: the job's threads: {seen:?}");
        assert!(
            seen.iter().all(|(_, nice)| *nice == expected),
            "warm: {warm}: every thread below the runner at its nice value {expected}: {seen:?}"
        );
        state.assert_clean();
        assert_host_clean(&id);
    }
}

#[test]
fn malformed_jobs_are_rejected_and_nothing_runs() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let good = job("itest-bad", ECHO, json!({}));
    let mut cases: Vec<(&str, Value, &str)> = Vec::new();
    let mut j = good.clone();
    j["surprise"] = json!(1);
    cases.push(("unknown top-level field", j, "invalid_job"));
    let mut j = good.clone();
    j["args"]["extra"] = json!(1);
    cases.push(("unknown args field", j, "invalid_job"));
    let mut j = good.clone();
    j["class"] = json!("container");
    cases.push(("class", j, "invalid_job"));
    let mut j = good.clone();
    j["artifact"] = json!("openvibe-skill-runner@1.0.1");
    cases.push(("artifact", j, "invalid_job"));
    let mut j = good.clone();
    j["limits"]["wall_ms"] = json!(30001);
    cases.push(("wall above cap", j, "limits_above_cap"));
    let mut j = good.clone();
    j["limits"]["mem_bytes"] = json!(268435457u64);
    cases.push(("memory above cap", j, "limits_above_cap"));
    let mut j = good.clone();
    j["net"] = json!("everything");
    cases.push(("unknown net", j, "invalid_job"));
    let mut j = good.clone();
    j["args"]["entry"] = json!("../tool.js");
    cases.push(("entry traverses", j, "invalid_job"));
    let mut j = good.clone();
    j["inputs"][0]["name"] = json!("../tool.js");
    cases.push(("input name traverses", j, "invalid_job"));
    let mut j = good.clone();
    j["args"]["tool"] = json!("Probe");
    cases.push(("tool name", j, "invalid_job"));
    let mut j = good.clone();
    j["job_id"] = json!("id with spaces");
    cases.push(("job id", j, "invalid_job"));
    for (what, j, reason) in cases {
        let r = state.run_job(&j);
        assert_eq!(r["status"], "rejected", "{what}: {r}");
        assert_eq!(r["reason"], reason, "{what}: {r}");
        assert!(
            r["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}"
        );
        assert!(r.get("output").is_none(), "{what}");
    }
    for garbage in [&b"not json"[..], b"", b"[]", b"{\"job_id\":", b"\xff\xfe"] {
        let r = state.run_job_text(garbage);
        assert_eq!(r["status"], "rejected", "{r}");
        assert_eq!(r["reason"], "invalid_job", "{r}");
    }
    assert_host_clean("itest-bad");
}

#[test]
fn a_wrong_hash_or_missing_bytes_is_integrity_and_nothing_runs() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    // The code would leave a mark if it ran: it cannot write, but it would print output.
    let mut j = job("itest-integrity", ECHO, json!({}));
    j["inputs"][0]["sha256"] = json!(sha(b"other bytes"));
    let r = state.run_job(&j);
    assert_status(&r, "integrity", Some("sha256_mismatch"));
    assert!(
        r["message"].as_str().unwrap_or("").contains("tool.js"),
        "{r}"
    );
    assert_eq!(r["wall_ms"], 0);

    let code = "process.stdout.write('1')//never cached";
    let mut j = job("itest-integrity", code, json!({}));
    j["inputs"][0]
        .as_object_mut()
        .expect("input")
        .remove("content_base64");
    let r = state.run_job(&j);
    assert_status(&r, "integrity", Some("input_missing"));

    // Once the bytes were seen, the cache has them (verified again on read).
    let j = job("itest-integrity", code, json!({}));
    assert_status(&state.run_job(&j), "ok", None);
    let mut j = job("itest-integrity", code, json!({}));
    j["inputs"][0]
        .as_object_mut()
        .expect("input")
        .remove("content_base64");
    let r = state.run_job(&j);
    assert_status(&r, "ok", None);
    assert_eq!(r["output"], json!(1));
    assert_host_clean("itest-integrity");
}

#[test]
fn networked_modes_run_a_tool_that_uses_no_network() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    for net in ["openvibe-only", "public"] {
        let mut j = job("itest-net", ECHO, json!({"n": 1}));
        j["net"] = json!(net);
        let r = state.run_job(&j);
        assert_status(&r, "ok", None);
        assert_eq!(r["output"], json!({"got": {"n": 1}}));
        assert_eq!(r["net"], net);
        assert_eq!(r["egress"], json!([]), "no attempt, no record");
    }
    assert_host_clean("itest-net");
}

#[test]
fn binary_and_invalid_inputs_are_refused() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let mut j = job("itest-binary", ECHO, json!({}));
    let elf = b"\x7fELF\x02\x01\x01\x00\x00\x00";
    j["inputs"].as_array_mut().expect("inputs").push(json!({
        "name": "payload.bin",
        "sha256": sha(elf),
        "content_base64": base64::engine::general_purpose::STANDARD.encode(elf),
    }));
    let r = state.run_job(&j);
    assert_status(&r, "rejected", Some("invalid_job"));
    let big = "x".repeat(64 * 1024 + 1);
    let r = state.run_job(&job("itest-binary", &big, json!({})));
    assert_status(&r, "rejected", Some("invalid_job"));
    assert_host_clean("itest-binary");
}

#[test]
fn a_tool_that_never_reads_a_large_input_does_not_hang() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let big = "y".repeat(250 * 1024);
    let code = "process.stdout.write(JSON.stringify({ignored:true}))";
    let r = state.run_job(&job("itest-noread", code, json!(big)));
    assert_status(&r, "ok", None);
    assert_eq!(r["output"], json!({"ignored": true}));
    assert_host_clean("itest-noread");
}

#[test]
fn output_split_inside_a_utf8_sequence_is_reassembled() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    // "é" is C3 A9: the two bytes go out in two writes with a pause between.
    let code = "process.stdout.write(Buffer.from([0x22,0xc3]));setTimeout(()=>process.stdout.write(Buffer.from([0xa9,0x22])),50);";
    let r = state.run_job(&job("itest-utf8", code, json!({})));
    assert_status(&r, "ok", None);
    assert_eq!(r["output"], json!("é"));
    assert_host_clean("itest-utf8");
}

/// Two runners side by side never give two running jobs the same uid, even when they
/// cannot tell each other apart by pid: each runner here is pid 1 of a pid namespace of
/// its own, as runners in two containers on one host are.
#[test]
fn two_runners_side_by_side_never_share_a_uid() {
    require_host();
    let _h = exclusive();
    let states = [State::new(), State::new()];
    // Each job holds its uid for 2 s, so the two runs overlap.
    let code = "setTimeout(()=>process.stdout.write(JSON.stringify({uid:process.getuid(),gid:process.getgid()})),2000)";
    let runners: Vec<_> = states
        .iter()
        .enumerate()
        .map(|(i, state)| {
            let job = serde_json::to_vec(&job(&format!("itest-uid-{i}"), code, json!({})))
                .expect("job json");
            // unshare(1), from util-linux, runs the runner in a pid namespace.
            let mut child = spawn_piped(
                runner_under(
                    &["unshare", "--pid", "--fork", "--kill-child"],
                    state.path(),
                )
                .args(["run-job", "-"]),
            );
            use std::io::Write as _;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(&job)
                .expect("write the job");
            child
        })
        .collect();
    let results: Vec<Value> = runners
        .into_iter()
        .map(|child| result_of(child, "one of two runners"))
        .collect();
    for r in &results {
        assert_status(r, "ok", None);
        assert!(
            r["wall_ms"].as_u64().unwrap_or(0) >= 2000,
            "the job held its uid for 2 s: {r}"
        );
    }
    let uid = |r: &Value| r["output"]["uid"].as_u64().unwrap_or(0);
    let (a, b) = (uid(&results[0]), uid(&results[1]));
    assert!(
        a >= SANDBOX_UID_BASE && b >= SANDBOX_UID_BASE,
        "sandbox uids: {a} {b}"
    );
    assert_ne!(a, b, "two live jobs of two runners got the same uid");
    for r in &results {
        assert_eq!(
            r["output"]["gid"], r["output"]["uid"],
            "gid is the uid: {r}"
        );
    }
    for s in &states {
        s.assert_clean();
    }
    assert_host_clean("itest-uid-");
}

/// A `run-job` of a job `id` whose tool idles, once its tool runs.
fn run_job_idling(state: &State, id: &str) -> std::process::Child {
    let text = serde_json::to_vec(&job(id, "setInterval(()=>{},1000)", json!({}))).expect("job");
    let child = state.start_run_job(&text);
    assert!(
        wait_for(std::time::Duration::from_secs(60), || {
            !sandbox_processes(id).is_empty()
        }),
        "the job's tool never ran"
    );
    child
}

/// A `run-job` interrupted while its tool runs (a terminal's Ctrl-C, a `kill`, a closed
/// terminal) kills the job and removes what it made before it ends: its processes, its
/// cgroups and its folder. It prints the result, `internal` `shutdown`, saying which signal
/// came. Before, the command died at the signal: the job's processes went with it, and its
/// cgroups and folder stayed.
#[test]
fn an_interrupted_run_job_kills_its_job_and_leaves_nothing_behind() {
    use nix::sys::signal::{kill, Signal};
    require_host();
    let _h = exclusive();
    for (signal, name) in [
        (Signal::SIGINT, "SIGINT"),
        (Signal::SIGTERM, "SIGTERM"),
        (Signal::SIGHUP, "SIGHUP"),
    ] {
        let state = State::new();
        let id = format!("itest-interrupted-{}", name.to_lowercase());
        let child = run_job_idling(&state, &id);
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
        kill(pid, signal).expect("signal the runner");
        let r = result_of(child, name);
        assert_status(&r, "internal", Some("shutdown"));
        let message = r["message"].as_str().unwrap_or("");
        assert!(message.contains(&format!("interrupted ({name})")), "{r}");
        state.assert_clean();
        assert_host_clean(&id);
    }
}

/// A `run-job` killed by SIGKILL cannot remove its job's cgroups and folder; its job's
/// processes end with it (the parent-death signal), and the next runner removes the empty
/// cgroups it left (where a systemd scope held them, the scope took them away already) and
/// then its folder.
#[test]
fn what_a_killed_run_job_left_is_removed_by_the_next_runner() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let id = "itest-killed-run-job";
    let mut child = run_job_idling(&state, id);
    // Where a systemd scope holds the runner's jobs, systemd removes them with it.
    let scoped = leftover_cgroups(id)
        .iter()
        .any(|p| p.to_string_lossy().contains("/openvibe-skill-runner-"));
    child.kill().expect("SIGKILL the runner");
    child.wait().expect("reap the runner");
    assert!(
        wait_for(std::time::Duration::from_secs(10), || {
            sandbox_processes(id).is_empty()
        }),
        "the job's processes outlived their runner"
    );
    if scoped {
        assert!(
            wait_for(std::time::Duration::from_secs(10), || leftover_cgroups(id)
                .is_empty()),
            "systemd did not remove the killed runner's scope"
        );
    } else {
        assert!(
            !leftover_cgroups(id).is_empty(),
            "the killed runner's cgroups: the test proves nothing"
        );
    }
    let folders = std::fs::read_dir(state.path().join("jobs")).map_or(0, |d| d.count());
    assert_eq!(folders, 1, "the killed runner's job folder");
    assert_status(
        &state.run_job(&job("itest-killed-next", ECHO, json!({}))),
        "ok",
        None,
    );
    assert_host_clean(id);
    state.assert_clean();
}

/// A job that ends `integrity` keeps nothing in the input cache, not even its inputs that
/// did match; a job that runs keeps its inputs there for the next one.
#[test]
fn a_job_that_ends_integrity_leaves_nothing_in_the_cache() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let data = "d".repeat(640 * 1024);
    let mut j = job("itest-cache", ECHO, json!({}));
    j["inputs"].as_array_mut().expect("inputs").insert(
        0,
        json!({
            "name": "data.txt",
            "sha256": sha(data.as_bytes()),
            "content_base64": base64::engine::general_purpose::STANDARD.encode(&data),
        }),
    );
    j["inputs"][1]["sha256"] = json!(sha(b"not the entry's bytes"));
    let r = state.run_job(&j);
    assert_status(&r, "integrity", Some("sha256_mismatch"));
    let cache = state.path().join("cache");
    let cached = |dir: &std::path::Path| -> Vec<String> {
        std::fs::read_dir(dir).map_or(Vec::new(), |d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
    };
    assert_eq!(
        cached(&cache),
        Vec::<String>::new(),
        "cache after integrity"
    );
    j["inputs"][1]["sha256"] = json!(sha(ECHO.as_bytes()));
    assert_status(&state.run_job(&j), "ok", None);
    let mut names = cached(&cache);
    names.sort();
    let mut expected = vec![sha(data.as_bytes()), sha(ECHO.as_bytes())];
    expected.sort();
    assert_eq!(names, expected);
    assert_host_clean("itest-cache");
}

/// The cache holds at most `runner.cache_max_bytes`: the least recently used input goes.
#[test]
fn the_input_cache_is_bounded() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    // Room for two 300 KiB inputs, not three.
    let config = "[runner]\ncache_max_bytes = 700000\n";
    let files: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|c| c.repeat(300 * 1024))
        .collect();
    for (i, data) in files.iter().enumerate() {
        let mut j = job(&format!("itest-bound-{i}"), ECHO, json!({}));
        j["inputs"].as_array_mut().expect("inputs").push(json!({
            "name": "data.txt",
            "sha256": sha(data.as_bytes()),
            "content_base64": base64::engine::general_purpose::STANDARD.encode(data),
        }));
        let text = serde_json::to_vec(&j).expect("job json");
        assert_status(&state.run_job_configured(&text, Some(config)), "ok", None);
    }
    let cache = state.path().join("cache");
    let total: u64 = std::fs::read_dir(&cache)
        .expect("cache dir")
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    assert!(total <= 700_000, "the cache holds {total} bytes");
    assert!(
        cache.join(sha(files[2].as_bytes())).exists(),
        "the newest input is kept"
    );
    assert!(
        !cache.join(sha(files[0].as_bytes())).exists(),
        "the least recently used input went"
    );
    assert_host_clean("itest-bound-");
}

/// End to end, the pids cgroup ends a job: with `pids_max` at 9, Node starts (its main
/// thread and V8's workers fit) but its libuv pool cannot grow to the four threads eight
/// parallel pbkdf2 calls ask for; the job ends `limit`/`pids`, and the control with the
/// default limit runs the same tool to the end. (At 12 and above it runs; at 6 and below
/// Node cannot start its own threads and hangs until the wall clock.)
#[test]
fn a_job_over_its_pids_limit_ends_limit_pids() {
    require_host();
    let _h = exclusive();
    let code = "const c = require('crypto'); let n = 0; \
                for (let i = 0; i < 8; i++) c.pbkdf2('a', 'b', 20000, 64, 'sha512', () => { \
                  if (++n === 8) process.stdout.write(JSON.stringify(n)); });";
    let state = State::new();
    let control = state.run_job(&job("itest-pids-control", code, json!(null)));
    assert_status(&control, "ok", None);
    assert_eq!(control["output"], 8, "{control}");
    let state = State::new();
    let r = state.run_job_configured(
        serde_json::to_vec(&job("itest-pids", code, json!(null)))
            .expect("job json")
            .as_slice(),
        Some("[runner]\npids_max = 9\n"),
    );
    assert_status(&r, "limit", Some("pids"));
    assert!(r.get("output").is_none(), "{r}");
    assert_host_clean("itest-pids");
}

/// A tool that prints its answer over several lines (CR LF too) and writes terminal control
/// sequences and a bidi override to stderr.
const PRETTY: &str = r#"process.stderr.write('\x1b[31mred\x1b]0;title\x07 \u202e!');
process.stdout.write('{\n  "a": 1,\r\n  "b": [1, "x\\ny"]\n}\n');"#;

/// SPEC: `run-job` prints the result as one JSON line. The tool's output is kept as it
/// wrote it but for its line breaks, which are whitespace between tokens (a line break in
/// a string is escaped), printed as spaces there; `run --json` the same. `run`'s summary
/// for a person shows what the tool wrote with its control characters escaped, never sent
/// to the terminal.
#[test]
fn the_cli_prints_one_line_and_sends_the_terminal_nothing_from_the_tool() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let expected = json!({"a": 1, "b": [1, "x\ny"]});
    let text = serde_json::to_vec(&job("itest-pretty", PRETTY, json!(null))).expect("json");
    let out = state
        .start_run_job(&text)
        .wait_with_output()
        .expect("run-job");
    let line = String::from_utf8(out.stdout).expect("UTF-8");
    assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
    assert!(line.ends_with('\n') && !line.contains('\r'), "{line:?}");
    let r: Value = serde_json::from_str(&line).expect("the line is the result");
    assert_status(&r, "ok", None);
    assert_eq!(r["output"], expected);

    let skill = tempfile::Builder::new()
        .prefix("ovsr-pretty-")
        .tempdir()
        .expect("temp dir");
    let manifest = json!({
        "slug": "pretty", "version": "1.0.0", "runs": "sandbox",
        "tools": [{"name": "pretty", "description": "Prints over lines.",
            "language": "javascript", "entry": "pretty.js", "args": {"type": "object"},
            "net": "deny"}]
    });
    std::fs::write(skill.path().join("skill.json"), manifest.to_string()).expect("manifest");
    std::fs::write(skill.path().join("pretty.js"), PRETTY).expect("code");
    let run = |json: bool| {
        let mut cmd = runner_in(state.path());
        cmd.arg("run").arg(skill.path()).args(["--tool", "pretty"]);
        if json {
            cmd.arg("--json");
        }
        cmd.output().expect("run")
    };
    let out = run(true);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let line = String::from_utf8(out.stdout).expect("UTF-8");
    assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
    let r: Value = serde_json::from_str(&line).expect("the line is the result");
    assert_eq!(r["output"], expected);
    assert_eq!(r["stderr"], "\u{1b}[31mred\u{1b}]0;title\u{7} \u{202e}!");

    let out = run(false);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let said = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(
        !said.contains(['\u{1b}', '\u{7}', '\u{202e}', '\r']),
        "no control character of the tool reaches the terminal: {said:?}"
    );
    assert!(
        said.contains("\\u{1b}[31mred\\u{1b}]0;title\\u{7} \\u{202e}!"),
        "shown escaped: {said}"
    );
    state.assert_clean();
    assert_host_clean("itest-pretty");
}

/// A result that cannot be written (stdout on a full disk, a closed pipe) is said on
/// stderr with exit 74, never a panic; `doctor` the same.
#[test]
fn a_result_that_cannot_be_written_exits_74_without_a_panic() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let full = || std::fs::File::create("/dev/full").expect("/dev/full");
    let file = state.path().join("job.json");
    std::fs::write(
        &file,
        serde_json::to_vec(&job("itest-full", ECHO, json!(1))).expect("json"),
    )
    .expect("the job");
    let out = runner_in(state.path())
        .arg("run-job")
        .arg(&file)
        .stdout(full())
        .output()
        .expect("run-job");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{err}");
    assert!(
        err.contains("cannot write to stdout") && !err.contains("panicked"),
        "{err}"
    );
    let out = runner_in(state.path())
        .arg("doctor")
        .stdout(full())
        .output()
        .expect("doctor");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    state.assert_clean();
    assert_host_clean("itest-full");
}

/// `run`'s errors name what is wrong in the skill folder, which may be someone else's: a
/// key, a file name or an argument name that holds terminal control codes reaches the
/// terminal escaped, never as the codes themselves.
#[test]
fn run_errors_show_the_skill_folders_control_characters_escaped() {
    let _h = shared();
    let state = State::new();
    let osc = "\u{1b}]52;c;aGk=\u{7}\nopenvibe-skill-runner: all is well";
    let clear = "\u{1b}[2J";
    let tool = |extra: (&str, serde_json::Value), args: serde_json::Value| {
        let mut t = serde_json::json!({
            "name": "t",
            "description": "A tool.",
            "language": "javascript",
            "entry": "t.js",
            "args": args,
            "net": "deny"
        });
        if !extra.0.is_empty() {
            t[extra.0] = extra.1;
        }
        serde_json::json!({"slug": "esc", "version": "1.0.0", "runs": "sandbox", "tools": [t]})
    };
    let object = serde_json::json!({"type": "object"});
    let cases = [
        (
            "an unknown key",
            tool((osc, serde_json::json!(1)), object.clone()),
            None,
        ),
        (
            "a required argument",
            tool(
                ("", serde_json::Value::Null),
                serde_json::json!({"type": "object", "required": [clear],
                    "properties": {clear: {"type": "string"}}}),
            ),
            None,
        ),
        (
            "a file name",
            tool(("", serde_json::Value::Null), object),
            Some(format!("{clear}.js")),
        ),
    ];
    for (what, manifest, extra_file) in cases {
        let dir = tempfile::Builder::new()
            .prefix("ovsr-escape-")
            .tempdir()
            .expect("temp dir");
        std::fs::write(dir.path().join("skill.json"), manifest.to_string()).expect("manifest");
        std::fs::write(dir.path().join("t.js"), "process.stdout.write('1')").expect("code");
        if let Some(name) = extra_file {
            std::fs::write(dir.path().join(name), "1").expect("file");
        }
        let out = runner_in(state.path())
            .args(["run", &dir.path().display().to_string(), "--tool", "t"])
            .args(["--input", "{}"])
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert!(
            !out.stderr.iter().any(|b| *b == 0x1b || *b == 0x07),
            "{what}: a control code reached the terminal: {err:?}"
        );
        assert!(err.contains("\\u{1b}"), "{what}: shown escaped: {err}");
        assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
    }
}

/// `run-job` given more than any job can be prints the `rejected` result (SPEC: a result
/// printed, exit 0), reading no further than a job could carry; nothing runs.
#[test]
fn a_job_larger_than_any_job_is_rejected_with_its_result() {
    use std::io::Write as _;
    let _h = shared();
    let state = State::new();
    let mut child = spawn_piped(runner_in(state.path()).args(["run-job", "-"]));
    let mut stdin = child.stdin.take().expect("stdin");
    // A job's start, then padding past 8 MiB: the runner stops reading at its bound, so
    // the write may end early with a broken pipe.
    let writer = std::thread::spawn(move || {
        let mut text = br#"{"job_id":"big","artifact":"function","args":{"input":""#.to_vec();
        text.resize(9 * 1024 * 1024, b'a');
        let _ = stdin.write_all(&text);
    });
    let out = child.wait_with_output().expect("run-job ends");
    writer.join().expect("writer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let result: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON result");
    assert_eq!(result["status"], "rejected", "{result}");
    assert_eq!(result["reason"], "invalid_job", "{result}");
    assert_eq!(result["job_id"], "", "{result}");
    assert!(
        result["message"]
            .as_str()
            .is_some_and(|m| m.contains("larger than 8388608 bytes")),
        "{result}"
    );
    state.assert_clean();
}

/// `run --input @FILE` reads no further than a job could carry: `/dev/zero` is refused at
/// once, not read until memory runs out.
#[test]
fn an_input_file_larger_than_a_job_is_refused_unread() {
    let _h = shared();
    let state = State::new();
    let out = runner_in(state.path())
        .args([
            "run",
            "/nonexistent-skill",
            "--tool",
            "echo",
            "--input",
            "@/dev/zero",
        ])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("larger than 8388608 bytes"), "{err}");
}
