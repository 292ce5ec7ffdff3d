//! The daemon's warm pool (`[daemon.warm]`, issue 12) from the built binary: it fills when
//! skills are on, serves jobs of its shape, learns a shape recent jobs asked for, counts
//! nothing against `max_jobs`, and leaves nothing behind when skills go off, the
//! configuration changes, the daemon stops or is killed and started again.

use super::*;

/// The pool's view in `/v1/info`.
fn warm(d: &Daemon) -> Value {
    d.info()["warm"].clone()
}

/// Waits (bounded: 30 s) until the pool's view satisfies `cond`; the view.
fn until_warm(d: &Daemon, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let w = warm(d);
        if cond(&w) {
            return w;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the pool never got to {what}: {w}\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One counter or gauge from `/metrics`.
fn metric(d: &Daemon, name: &str) -> u64 {
    let text = d.rt.block_on(async {
        let (_, body) = request_bytes(d.socket(), "GET", "/metrics", None).await;
        String::from_utf8_lossy(&body).into_owned()
    });
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("openvibe_skill_runner_{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics: {text}"))
}

/// Whether `name` is one of the warm sandboxes of the runner whose pid is `pid`
/// (`warm-<tag>.<pid>.<n>`): another runner's on the same host are not this test's.
pub(super) fn is_warm_of(name: &str, pid: i32) -> bool {
    name.starts_with("warm-") && name.contains(&format!(".{pid}."))
}

/// What the processes whose parent is `pid` execute (`/proc/<child>/exe`).
fn children_exes(pid: i32) -> Vec<PathBuf> {
    let mut exes = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let ppid = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|v| v.trim().parse::<i32>().ok());
        if ppid == Some(pid) {
            if let Ok(exe) = std::fs::read_link(e.path().join("exe")) {
                exes.push(exe);
            }
        }
    }
    exes
}

/// The warm sandboxes' cgroups and folders of the daemon whose pid is `pid`.
fn warm_leftovers(d: &Daemon, pid: i32) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let named = |p: &Path| {
        p.file_name()
            .is_some_and(|n| is_warm_of(&n.to_string_lossy(), pid))
    };
    let dirs = std::fs::read_dir(d.state().join("jobs"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| named(p))
                .collect()
        })
        .unwrap_or_default();
    let cgroups = leftover_cgroups("warm-")
        .into_iter()
        .filter(|p| named(p))
        .collect();
    (cgroups, dirs)
}

/// No process, cgroup or folder of the daemon's warm sandboxes (the kernel may take a
/// moment to reap the last killed process), and no escaped sandbox process.
fn assert_no_warm_left(d: &Daemon, pid: i32) {
    let procs = || -> Vec<String> {
        all_sandbox_processes()
            .into_iter()
            .filter(|p| {
                p.escaped()
                    || p.cgroups
                        .iter()
                        .any(|c| c.split('/').any(|n| is_warm_of(n, pid)))
            })
            .map(|p| p.to_string())
            .collect()
    };
    let mut left = procs();
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        left = procs();
    }
    assert!(left.is_empty(), "warm sandbox processes left: {left:?}");
    let (cgroups, dirs) = warm_leftovers(d, pid);
    assert!(
        cgroups.is_empty() && dirs.is_empty(),
        "warm sandboxes left: {cgroups:?} {dirs:?}"
    );
}

const WORDS: &str = "let d='';process.stdin.on('data',c=>d+=c);process.stdin.on('end',()=>{const i=JSON.parse(d);process.stdout.write(JSON.stringify({n:i.n,pid:process.pid,argv:process.argv.slice(1)}))});";

#[test]
fn the_pool_fills_serves_and_drains_with_skills_off_and_on_shutdown() {
    require_host();
    let _guard = exclusive();
    let mut d = Daemon::start("");
    let pid = d.pid();
    let w = until_warm(&d, "two ready", |w| w["ready"] == 2);
    assert_eq!(w["enabled"], true);
    // Each sandbox's first process is the small init executable found beside the daemon's
    // binary, not the daemon re-executed.
    let inits = children_exes(pid);
    let init = std::fs::canonicalize(INIT).expect("the init executable");
    assert!(
        !inits.is_empty() && inits.iter().all(|e| *e == init),
        "the warm sandboxes' init stages run {inits:?}, not {}",
        init.display()
    );
    assert_eq!(w["shapes"][0]["mem_bytes"], 134_217_728);
    assert_eq!(w["shapes"][0]["net"], "deny");
    assert!(w["memory_bytes"].as_u64().unwrap_or(0) > 0, "{w}");
    // Never counted as jobs: nothing runs, nothing waits.
    let info = d.info();
    assert_eq!(
        (info["running"].clone(), info["queued"].clone()),
        (json!(0), json!(0))
    );
    assert_eq!(metric(&d, "jobs_running"), 0);
    assert_eq!(metric(&d, "warm_sandboxes_ready"), 2);
    let (cgroups, dirs) = warm_leftovers(&d, pid);
    let mut names: Vec<_> = cgroups.iter().filter_map(|p| p.file_name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(
        (names.len(), dirs.len()),
        (2, 2),
        "two warm sandboxes on the host (in every hierarchy)"
    );

    for i in 0..3 {
        let r = d.post_wait(&job(&format!("dpool-serve-{i}"), WORDS, 5000));
        assert_status(&r, "ok", None);
        assert_eq!(r["output"]["n"], 1);
        assert_eq!(
            r["output"]["pid"], 2,
            "Node is the job's pid 2, warm or cold"
        );
        assert_eq!(r["output"]["argv"], json!(["/skill/tool.js"]));
        // The pool is back to two before the next: each of these jobs is a hit.
        until_warm(&d, "refilled", |w| w["ready"] == 2);
    }
    assert_eq!(metric(&d, "warm_hits_total"), 3);
    assert_eq!(metric(&d, "warm_misses_total"), 0);
    assert!(metric(&d, "warm_made_total") >= 5);
    assert_host_clean("dpool-serve");

    // Off: every warm sandbox torn down, none made while off.
    let out = Command::new(BIN)
        .args(["skills", "off", "--config"])
        .arg(d.config())
        .output()
        .expect("skills off");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "off");
    // Drained means torn down: a sandbox being removed (a warm-up that ended after the
    // drain among them) counts as stopping until it is gone.
    until_warm(&d, "drained", |w| {
        w["ready"] == 0 && w["starting"] == 0 && w["stopping"] == 0
    });
    assert_no_warm_left(&d, pid);
    let made = metric(&d, "warm_made_total");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        metric(&d, "warm_made_total"),
        made,
        "nothing made while off"
    );

    // On again: it fills again; then SIGTERM leaves nothing.
    let out = Command::new(BIN)
        .args(["skills", "on", "--config"])
        .arg(d.config())
        .output()
        .expect("skills on");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "on");
    until_warm(&d, "two ready again", |w| w["ready"] == 2);
    d.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(20)), Some(0), "{}", d.log());
    assert_no_warm_left(&d, pid);
    d.assert_no_job_dirs();
}

#[test]
fn a_shape_recent_jobs_asked_for_is_learned_and_then_served_warm() {
    require_host();
    let _guard = exclusive();
    let d = Daemon::start("[daemon.warm]\nlearn = 1\n");
    until_warm(&d, "two ready", |w| w["ready"] == 2);
    let asked = 96 * 1024 * 1024;
    let of_shape = |id: &str| {
        let mut j = job(id, WORDS, 5000);
        j["limits"]["mem_bytes"] = json!(asked);
        j
    };
    for id in ["dpool-learn-0", "dpool-learn-1"] {
        assert_status(&d.post_wait(&of_shape(id)), "ok", None);
    }
    assert_eq!(
        metric(&d, "warm_misses_total"),
        2,
        "no sandbox of 96 MiB yet"
    );
    let w = until_warm(&d, "the learned shape ready", |w| {
        w["shapes"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["learned"] == true && s["ready"] == 1))
    });
    assert_eq!(w["shapes"][1]["mem_bytes"], asked, "{w}");
    let r = d.post_wait(&of_shape("dpool-learn-2"));
    assert_status(&r, "ok", None);
    assert_eq!(
        metric(&d, "warm_hits_total"),
        1,
        "the third job of the shape is a hit"
    );
    assert_eq!(metric(&d, "warm_misses_total"), 2);
    assert_host_clean("dpool-learn");
}

#[test]
fn a_disabled_pool_makes_nothing_and_every_job_runs_cold() {
    require_host();
    let _guard = exclusive();
    let d = Daemon::start("[daemon.warm]\nenabled = false\n");
    let pid = d.pid();
    std::thread::sleep(Duration::from_millis(1500));
    let w = warm(&d);
    assert_eq!(
        (w["enabled"].clone(), w["ready"].clone()),
        (json!(false), json!(0))
    );
    assert_eq!(metric(&d, "warm_made_total"), 0);
    let r = d.post_wait(&job("dpool-off-0", WORDS, 5000));
    assert_status(&r, "ok", None);
    assert_eq!(metric(&d, "warm_hits_total"), 0);
    assert_no_warm_left(&d, pid);
    assert_host_clean("dpool-off");
}

#[test]
fn a_configuration_change_and_age_replace_the_warm_sandboxes() {
    require_host();
    let _guard = exclusive();
    let d = Daemon::start("[daemon.warm]\nmax_age_ms = 600000\n");
    until_warm(&d, "two ready", |w| w["ready"] == 2);
    assert_eq!(metric(&d, "warm_discarded_total"), 0);
    // Any change of the file: none made before it serves a job after it.
    let text = std::fs::read_to_string(d.config()).expect("config");
    std::fs::write(
        d.config(),
        text.replace("max_age_ms = 600000", "max_age_ms = 1500"),
    )
    .expect("config");
    until_warm(&d, "the old ones discarded", |w| {
        w["discarded"].as_u64().unwrap_or(0) >= 2 && w["max_age_ms"] == 1500
    });
    // Then each lives 1.5 s at most: more are made and discarded as time goes by.
    let made = metric(&d, "warm_made_total");
    until_warm(&d, "recycled by age", |w| {
        w["made"].as_u64().unwrap_or(0) >= made + 2 && w["discarded"].as_u64().unwrap_or(0) >= 4
    });
    assert_status(&d.post_wait(&job("dpool-age-0", WORDS, 5000)), "ok", None);
    assert_host_clean("dpool-age");
}

#[test]
fn a_bad_warm_setting_stops_the_start_with_what_to_change() {
    require_host();
    let d = Daemon::prepare("[daemon.warm]\nshapes = [{ mem_bytes = 1024, count = 1 }]\n");
    let (code, err) = d.serve_to_the_end();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("daemon.warm.shapes") && err.contains("mem_bytes 1024"),
        "{err}"
    );
}

#[test]
fn a_daemon_killed_mid_warm_job_leaves_nothing_after_its_restart() {
    require_host();
    let _guard = exclusive();
    let mut d = Daemon::start("");
    let pid = d.pid();
    until_warm(&d, "two ready", |w| w["ready"] == 2);
    // A job in a warm sandbox, still running at the kill, and a warm one waiting.
    let idle = "setTimeout(()=>{},20000)";
    let (code, _) = d.post(&job("dpool-kill-mid", idle, 20000));
    assert_eq!(code, 202);
    d.wait_state("dpool-kill-mid", "running");
    let started = Instant::now();
    while metric(&d, "warm_hits_total") < 1 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the job took no warm sandbox"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    d.kill9();
    d.spawn();
    // The new run removed the old one's leftovers before serving, and ended the job.
    assert_no_warm_left(&d, pid);
    let v = d.get_job("dpool-kill-mid");
    assert_eq!(v["state"], "done", "{v}");
    assert_status(&v["result"], "internal", Some("runner_restarted"));
    until_warm(&d, "two ready after the restart", |w| w["ready"] == 2);
    assert_status(&d.post_wait(&job("dpool-kill-0", WORDS, 5000)), "ok", None);
    assert_host_clean("dpool-kill");
}
