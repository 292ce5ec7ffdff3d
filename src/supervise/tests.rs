//! Unit tests of `src/supervise.rs`.

use super::*;

fn exited(code: i32, stdout: &str) -> Outcome {
    Outcome {
        reports: vec![Report::Exited { code }],
        stdout: stdout.as_bytes().to_vec(),
        ..Default::default()
    }
}

fn status_reason(o: &Outcome) -> (Status, Option<String>) {
    let v = classify(o, 1000, 1 << 27);
    (v.status, v.reason.map(|r| r.as_str().to_string()))
}

#[test]
fn one_json_value_is_ok() {
    let v = classify(&exited(0, " {\"words\": 1}\n"), 1000, 1);
    assert_eq!(v.status, Status::Ok);
    assert_eq!(
        v.output.as_ref().map(JsonText::as_str),
        Some("{\"words\": 1}")
    );
    assert_eq!(v.exit_code, Some(0));
    let v = classify(&exited(0, "null"), 1000, 1);
    assert_eq!(v.output.as_ref().map(JsonText::as_str), Some("null"));
}

#[test]
fn the_output_is_the_exact_text_the_tool_wrote() {
    for text in [
        r#"{"zeta":1,"id":1234567890123456789012,"alpha":1.0000000000000002,"neg":-0}"#,
        r#"["\u00e9","é","\/",1E400,-1e-400,"\ud800"]"#,
        r#"{"dup":1,"dup":2}"#,
        "-0",
    ] {
        let v = classify(&exited(0, &format!("\n\t {text} \r\n")), 1000, 1);
        assert_eq!(v.status, Status::Ok, "{text}: {:?}", v.message);
        assert_eq!(v.output.as_ref().map(JsonText::as_str), Some(text));
    }
}

#[test]
fn output_deeper_than_the_limit_is_bad_output() {
    let depth = crate::json_text::MAX_DEPTH;
    let at = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert_eq!(status_reason(&exited(0, &at)), (Status::Ok, None));
    let over = format!("[{at}]");
    let v = classify(&exited(0, &over), 1000, 1);
    assert_eq!(
        (v.status, v.reason.map(Reason::as_str)),
        (Status::Error, Some("bad_output"))
    );
    assert!(v.message.unwrap_or_default().contains("deeper"));
}

#[test]
fn not_one_value_is_bad_output() {
    for s in [
        "{} {}",
        "{",
        "hello",
        "1 2",
        "\u{feff}{}",
        "NaN",
        "[1,]",
        "\u{a0}1",
        // Whitespace to Unicode but not to JSON: something written, not one value.
        "\u{a0}",
        "\u{3000}",
        "\u{2028}",
        "\x0b",
        "\x0c",
        " \u{85}\n",
    ] {
        assert_eq!(
            status_reason(&exited(0, s)),
            (Status::Error, Some("bad_output".into())),
            "{s:?}"
        );
    }
    let mut o = exited(0, "");
    o.stdout = vec![b'"', 0xe2, 0x82, b'"'];
    assert_eq!(status_reason(&o).1.as_deref(), Some("bad_output"));
}

#[test]
fn empty_is_no_output() {
    for s in ["", " \n", "\r\n\t "] {
        assert_eq!(
            status_reason(&exited(0, s)),
            (Status::Error, Some("no_output".into())),
            "{s:?}"
        );
    }
}

#[test]
fn exit_and_signal() {
    assert_eq!(
        status_reason(&exited(3, "{}")),
        (Status::Error, Some("exit".into()))
    );
    let o = Outcome {
        reports: vec![Report::Signaled { signal: 11 }],
        ..Default::default()
    };
    let v = classify(&o, 1, 1);
    assert_eq!(v.reason.map(Reason::as_str), Some("signal"));
    assert_eq!(v.signal.as_deref(), Some("SIGSEGV"));
}

#[test]
fn an_end_seen_past_the_wall_clock_is_a_wall_limit_never_ok() {
    let mut o = exited(0, "{}");
    o.wall = Duration::from_micros(1_000_900);
    assert_eq!(
        status_reason(&o),
        (Status::Ok, None),
        "within the millisecond"
    );
    o.wall = Duration::from_millis(1_002);
    assert_eq!(status_reason(&o), (Status::Limit, Some("wall".into())));
    let v = classify(&o, 1000, 1 << 27);
    assert!(v.output.is_none());
    assert!(
        v.message
            .as_deref()
            .is_some_and(|m| m.contains("limit of 1000 ms") && m.contains("ended at 1002 ms")),
        "{:?}",
        v.message
    );
}

#[test]
fn kills_by_the_runner() {
    let mut o = exited(0, "{}");
    o.killed = Some(Kill::Wall);
    assert_eq!(status_reason(&o), (Status::Limit, Some("wall".into())));
    o.killed = Some(Kill::Output);
    assert_eq!(status_reason(&o), (Status::Limit, Some("output".into())));
    o.killed = Some(Kill::Cancelled(Cause::Requested));
    assert_eq!(
        status_reason(&o),
        (Status::Cancelled, Some("cancelled".into()))
    );
    // The runner stopping is not the dispatcher's cancel: internal, decided here.
    o.killed = Some(Kill::Cancelled(Cause::Shutdown { grace_ms: 700 }));
    assert_eq!(
        status_reason(&o),
        (Status::Internal, Some("shutdown".into()))
    );
    let v = classify(&o, 1000, 1 << 27);
    assert!(v
        .message
        .is_some_and(|m| m.contains("grace period of 700 ms")));
}

const V8_MESSAGE: &[u8] =
    b"FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory";

#[test]
fn memory_of_either_kind_is_a_limit() {
    // V8's own ceiling (64 MiB at 128 MiB): abort with most of the ceiling in use.
    let mut o = Outcome {
        reports: vec![Report::Signaled { signal: 6 }],
        ..Default::default()
    };
    o.stats.mem_peak_bytes = 90 << 20;
    assert_eq!(status_reason(&o), (Status::Limit, Some("memory".into())));
    // Whatever stderr says (a tool may close it before it runs out).
    o.stderr = b"nothing to see".to_vec();
    assert_eq!(status_reason(&o), (Status::Limit, Some("memory".into())));
    // The least V8 gives up with: 80% of the ceiling.
    o.stats.mem_peak_bytes = (64 << 20) / 5 * 4;
    assert_eq!(status_reason(&o), (Status::Limit, Some("memory".into())));
    // The kernel's: the cgroup's OOM killer, at the job's cap.
    let mut o = Outcome {
        reports: vec![Report::Signaled { signal: 9 }],
        ..Default::default()
    };
    o.stats.oom_killed = true;
    o.stats.memory_limit_hit = true;
    assert_eq!(status_reason(&o), (Status::Limit, Some("memory".into())));
    // The OOM killer with the job under its cap: the host's, not the job's limit.
    o.stats.memory_limit_hit = false;
    assert_eq!(
        status_reason(&o),
        (Status::Internal, Some("host_out_of_memory".into()))
    );
    // A tool that ended well all the same is what it is.
    let mut ok = exited(0, "{}");
    ok.stats.oom_killed = true;
    assert_eq!(status_reason(&ok).0, Status::Ok);
    // A failed allocation the tool turned into an error exit.
    let mut o = exited(1, "");
    o.stats.memory_limit_hit = true;
    assert_eq!(status_reason(&o), (Status::Limit, Some("memory".into())));
    // The message alone, printed by a tool that exits normally, is not a limit.
    let mut o = exited(1, "");
    o.stderr = V8_MESSAGE.to_vec();
    assert_eq!(status_reason(&o), (Status::Error, Some("exit".into())));
}

/// A tool that prints V8's message itself and aborts far below its heap ceiling: the
/// runner's evidence says it did not run out of memory.
#[test]
fn a_faked_heap_message_is_not_memory() {
    let mut o = Outcome {
        reports: vec![Report::Signaled { signal: 6 }],
        stderr: V8_MESSAGE.to_vec(),
        ..Default::default()
    };
    o.stats.mem_peak_bytes = 10 << 20;
    let v = classify(&o, 1000, 128 << 20);
    assert_eq!(
        (v.status, v.reason.map(Reason::as_str), v.signal.as_deref()),
        (Status::Error, Some("signal"), Some("SIGABRT"))
    );
    // Just under 80% of the ceiling is not enough either.
    o.stats.mem_peak_bytes = (64 << 20) / 5 * 4 - 1;
    assert_eq!(status_reason(&o), (Status::Error, Some("signal".into())));
    // Nor is a high peak with another signal than V8's abort.
    o.stats.mem_peak_bytes = 100 << 20;
    o.reports = vec![Report::Signaled { signal: 9 }];
    assert_eq!(status_reason(&o), (Status::Error, Some("signal".into())));
}

#[test]
fn a_successful_tool_near_its_limit_is_still_ok() {
    let mut o = exited(0, "{}");
    o.stats.memory_limit_hit = true;
    o.stats.pids_limit_hit = true;
    assert_eq!(status_reason(&o).0, Status::Ok);
}

#[test]
fn pids() {
    let mut o = exited(1, "");
    o.stats.pids_limit_hit = true;
    assert_eq!(status_reason(&o), (Status::Limit, Some("pids".into())));
}

#[test]
fn setup_failure_is_internal_and_nothing_ran() {
    let o = Outcome {
        reports: vec![
            Report::SetupFailed {
                step: "landlock".into(),
                error: "not fully enforced".into(),
            },
            Report::Exited { code: 127 },
        ],
        ..Default::default()
    };
    let v = classify(&o, 1, 1);
    assert_eq!(v.status, Status::Internal);
    assert!(v.message.unwrap().contains("landlock"));
}

#[test]
fn no_report_is_internal() {
    let o = Outcome::default();
    assert_eq!(status_reason(&o).0, Status::Internal);
}

/// What is left of a job after its end record gets [`END_GRACE`] to end by itself, but
/// never runs past the job's wall clock: with the wall clock 5 ms away it is killed at
/// 5 ms, not at the grace's 50; with the wall clock far away, at the grace. Tokio's paused
/// clock makes both times exact (nothing is raced); the process that would go on is a real
/// `sleep`, in a real (empty) job cgroup, as `settle` kills through both.
#[tokio::test(start_paused = true)]
async fn what_remains_of_a_job_ends_at_the_grace_or_its_wall_clock_whichever_comes_first() {
    use crate::sandbox::cgroup::{CgroupHost, CgroupLimits};
    let test = "what_remains_of_a_job_ends_at_the_grace_or_its_wall_clock_whichever_comes_first";
    if !nix::unistd::geteuid().is_root() {
        crate::test_skips::skipped(test, "it needs root to create a job cgroup");
        return;
    }
    let parent = std::env::var_os("OPENVIBE_TEST_CGROUP_PARENT").map(std::path::PathBuf::from);
    let host = CgroupHost::detect(parent.as_deref())
        .unwrap_or_else(|e| panic!("cgroup detection failed on this root host: {e}"));
    let limits = CgroupLimits {
        mem_bytes: 64 << 20,
        pids_max: 16,
    };
    for (wall_left, ends_at) in [
        (Duration::from_millis(5), Duration::from_millis(5)),
        (Duration::from_secs(10), END_GRACE),
    ] {
        let name = format!(
            "suptest-{}-grace-{}",
            std::process::id(),
            wall_left.as_millis()
        );
        let cgroup = host
            .create_job(&name, &limits)
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
        let child = tokio::process::Command::new("sleep")
            .arg("30")
            .kill_on_drop(true)
            .spawn()
            .expect("spawn sleep");
        let pid = nix::unistd::Pid::from_raw(child.id().expect("a pid") as i32);
        let began = tokio::time::Instant::now();
        let remains = Remains {
            rest: Some((child, tokio::spawn(async {}))),
            deadline: began + wall_left,
        };
        remains.settle(&cgroup).await.expect("settle");
        assert_eq!(began.elapsed(), ends_at, "wall clock {wall_left:?} away");
        // Killed and reaped: the pid names no process of ours any more.
        assert_eq!(
            nix::sys::signal::kill(pid, None),
            Err(nix::errno::Errno::ESRCH),
            "the process that went on is gone"
        );
        cgroup
            .remove()
            .unwrap_or_else(|e| panic!("remove {name}: {e}"));
    }
}

#[test]
fn a_child_whose_runner_is_gone_goes_no_further_than_the_fork() {
    use std::os::unix::process::CommandExt as _;
    let spawn = |runner: libc::pid_t| {
        let mut cmd = std::process::Command::new("true");
        // SAFETY: die_with makes only async-signal-safe calls and does not allocate.
        unsafe {
            cmd.pre_exec(move || die_with(runner));
        }
        cmd.status()
    };
    let me = nix::unistd::getpid().as_raw();
    assert!(spawn(me).expect("its parent is alive").success());
    // A parent other than the one it was started by (as after the runner's death, when
    // the child is handed to a reaper): it never reaches the exec.
    let e = spawn(me + 1).expect_err("an orphan stops before exec");
    assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "{e}");
}

/// The stderr reader takes the gate record and the end record off a tool's stderr, tells
/// each on its own channel, and keeps what Node wrote before the gate and the tool after.
#[tokio::test]
async fn stderr_loses_the_preloads_records_and_tells_the_gate_and_the_end() {
    let stream = [
        b"(node) warning\n".as_slice(),
        end::GATE_RECORD,
        b"tool says\n",
        END_RECORD,
        b"7\n",
    ]
    .concat();
    let (end_tx, end_rx) = tokio::sync::oneshot::channel();
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel();
    let (kept, truncated) = read_stderr(&stream[..], 1024, end_tx, Some(gate_tx)).await;
    assert_eq!(kept, b"(node) warning\ntool says\n");
    assert!(!truncated);
    assert_eq!(end_rx.await, Ok(7));
    assert_eq!(gate_rx.await, Ok(()));
    // Without a gate looked for (a start without one), the record is left as it came.
    let (end_tx, _) = tokio::sync::oneshot::channel();
    let (kept, _) = read_stderr(&stream[..40], 1024, end_tx, None).await;
    assert_eq!(kept, &stream[..40]);
    // A stream that ends before the gate tells no gate, and is stderr whole.
    let (end_tx, _) = tokio::sync::oneshot::channel();
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel();
    let (kept, _) = read_stderr(&b"node died"[..], 1024, end_tx, Some(gate_tx)).await;
    assert_eq!(kept, b"node died");
    assert!(gate_rx.await.is_err());
    // Past the most that may come before the gate, read a chunk at a time, the gate is
    // untold, and what came is stderr, scanned for the end record as any.
    let long = vec![b'w'; end::BEFORE_GATE_MAX + 1];
    let stream = [long.as_slice(), END_RECORD, b"3\n"].concat();
    let (end_tx, end_rx) = tokio::sync::oneshot::channel();
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel();
    let (kept, truncated) = read_stderr(&stream[..], 1024, end_tx, Some(gate_tx)).await;
    assert_eq!(kept, &long[..1024]);
    assert!(truncated);
    assert_eq!(end_rx.await, Ok(3));
    assert!(gate_rx.await.is_err());
}

/// A warm sandbox waits below the runner's priority only when pid 1 can set the tool's
/// back (CAP_SYS_NICE), never on RLIMIT_NICE alone: with a raised limit and no capability,
/// every hand-over failed at `setpriority` on the tool (another uid) and each job ran cold
/// after a wasted warm-up. This machine cannot raise RLIMIT_NICE (no CAP_SYS_RESOURCE), so
/// the decision is tested here, on its inputs.
#[test]
fn a_warm_sandbox_waits_lower_only_with_the_capability() {
    assert_eq!(nice_to_wait_at(0, true), WARM_NICE);
    assert_eq!(nice_to_wait_at(15, true), 19);
    assert_eq!(nice_to_wait_at(0, false), 0);
    assert_eq!(nice_to_wait_at(5, false), 5);
}
