//! The init stage's way into a job's cgroup on cgroup v2: pid 1 of the job is made inside
//! it (`clone3` with `CLONE_INTO_CGROUP`), so no process is moved, which would cost the
//! kernel's RCU grace period at every job. Run on the host's v2 hierarchy (on a hybrid
//! host, its `unified` mount), in a cgroup of the test's own, with a plan written here
//! whose root cannot be mounted: the job's third process stops at its first mount, after
//! pid 1 has checked it is in the cgroup and made the cgroup namespace there.

use crate::common::*;
use openvibe_skill_runner::plan::{
    CgroupJoin, ExecGateStep, LandlockPlan, Plan, PlanFile, Privileges, RootSteps, Start,
};
use serde_json::Value;
use std::path::Path;

/// A plan of real use in form (every layer present, so the shipped init reads it) that
/// joins by `join` and whose root, `root`, does not exist.
fn plan(join: CgroupJoin, root: &Path) -> Plan {
    let file = |name: &str| PlanFile {
        name: name.into(),
        bytes: b"0".to_vec(),
    };
    Plan {
        job_id: "itest-cgroup-v2".into(),
        cgroup_join: join,
        join_netns: None,
        unshare: libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWNET
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS,
        pid_one_unshare: libc::CLONE_NEWCGROUP,
        borrowed_time_namespace: false,
        root: root.to_path_buf(),
        root_bytes: 1 << 20,
        root_steps: RootSteps::Enter,
        skill_files: vec![file("t.js")],
        start: Start::Gated,
        main_link: Some("t.js".into()),
        preload: file("harden.cjs"),
        etc_files: vec![],
        mounts: vec![],
        hostname: "job".into(),
        cwd: "/skill".into(),
        exe: "/nonexistent/node".into(),
        argv: vec!["node".into()],
        env: vec![],
        nofile: 64,
        core_bytes: 0,
        fsize_bytes: 1 << 20,
        privileges: Some(Privileges {
            uid: 65534,
            gid: 65534,
            groups: vec![],
        }),
        landlock: Some(LandlockPlan {
            abi: 1,
            handled_fs: vec![],
            handled_net: vec![],
            scopes: vec![],
            paths: vec![],
            connect_tcp: vec![],
        }),
        exec_gate: ExecGateStep::HandOver,
        seccomp: Some(openvibe_skill_runner::bpf::CompiledFilters { programs: vec![] }),
        net: Default::default(),
        fault: None,
        omit: vec![],
        pid_one_pause_ms: 0,
        hand_over_pause_ms: 0,
    }
}

/// Runs the shipped init stage on `plan`, which must end with `code`; its first report (a
/// setup failure, followed by pid 1's report of its child's exit when it came after the
/// fork).
fn run(plan: &Plan, code: i32) -> Value {
    run_under(plan, code, None)
}

/// [`run`], the init stage started under the seccomp program `filter`.
fn run_under(plan: &Plan, code: i32, filter: Option<&seccompiler::BpfProgram>) -> Value {
    let bytes = openvibe_skill_runner::sandbox::init::encode_plan(plan).expect("encode");
    let (status, reports, _) = init_of_build_under(
        INIT,
        openvibe_skill_runner::sandbox::init_exe::BUILD_ID,
        &bytes,
        filter,
    );
    // A and pid 1 end with 0 once the job's processes have; only a stage that fails
    // before the fork ends with 127.
    assert_eq!(status.code(), Some(code), "{status:?}: {reports}");
    let first = reports.lines().next().unwrap_or_default();
    serde_json::from_str(first).unwrap_or_else(|e| panic!("{e}: {reports}"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `usage_usec` of a v2 cgroup's `cpu.stat` (a core file, there without any
/// controller): above 0 once a process has run in it.
fn cpu_usage(dir: &Path) -> u64 {
    read(&dir.join("cpu.stat"))
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
        .expect("usage_usec")
}

/// Runs `test` with a v2 cgroup of its own (named for `name`), a scratch folder and a
/// root in it that does not exist; removes the cgroup whatever happened, then checks the
/// init made no root.
fn with_test_cgroup(name: &str, test: impl FnOnce(&Path, &Path, &Path)) {
    require_host();
    let _h = shared();
    let Some(mount) = cgroup_mounts()
        .into_iter()
        .find_map(|m| m.v2.then_some(m.mountpoint))
    else {
        panic!("no cgroup2 hierarchy is mounted; every host the runner supports has one");
    };
    let cgroup = mount.join(format!("ovsr-itest-{name}-{}", std::process::id()));
    std::fs::create_dir(&cgroup).expect("make the test's own cgroup");
    let scratch = tempfile::tempdir().expect("scratch");
    let root = scratch.path().join("no-such-root");
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        test(&cgroup, scratch.path(), &root)
    }));
    // The test's cgroup goes whatever happened; its processes have all ended (the init
    // stage waits for pid 1, and pid 1 for its child).
    let removed = std::fs::remove_dir(&cgroup);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    removed.expect("remove the test's cgroup");
    assert!(!root.exists(), "the init made the missing root");
}

/// Pid 1 came into `cgroup` and its child reached the root's first mount; every process
/// of it ended.
fn assert_ran_inside(r: &Value, cgroup: &Path) {
    assert_eq!(r["kind"], "setup_failed", "{r}");
    assert_eq!(r["step"], "mount root tmpfs", "{r}");
    assert!(
        cpu_usage(cgroup) > 0,
        "nothing ran in the job's cgroup: {r}"
    );
    assert_eq!(
        read(&cgroup.join("cgroup.procs")),
        "",
        "the job's processes ended"
    );
}

#[test]
fn on_cgroup_v2_pid_1_is_made_inside_the_jobs_cgroup() {
    with_test_cgroup("v2", |cgroup, scratch, root| {
        // Made inside: pid 1 found itself listed there and made the cgroup namespace (it
        // would have reported `join cgroups` otherwise); its child reached the root's
        // tmpfs, which has no mount point here.
        let r = run(
            &plan(
                CgroupJoin::CloneInto {
                    dir: cgroup.to_path_buf(),
                },
                root,
            ),
            0,
        );
        assert_ran_inside(&r, cgroup);
        // Into a folder that is no cgroup, the kernel refuses the clone itself: it is
        // clone3's CLONE_INTO_CGROUP, not a fork and a move.
        let r = run(
            &plan(
                CgroupJoin::CloneInto {
                    dir: scratch.to_path_buf(),
                },
                root,
            ),
            127,
        );
        assert_eq!(r["step"], "fork pid 1", "{r}");
        let error = r["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("clone3 into the job's cgroup") && error.contains("EBADF"),
            "{error}"
        );
        // A file for the folder (what the cgroup fault plans): refused before any fork.
        let r = run(
            &plan(
                CgroupJoin::CloneInto {
                    dir: cgroup.join("cgroup.procs"),
                },
                root,
            ),
            127,
        );
        assert_eq!(r["step"], "join cgroups", "{r}");
        assert!(
            r["error"].as_str().unwrap_or_default().contains("ENOTDIR"),
            "{r}"
        );
    });
}

/// A seccomp program that answers `clone3` with `errno` and allows everything else: what
/// a container's profile does (Docker's answers ENOSYS, so that glibc falls back to clone).
fn clone3_answered(errno: i32) -> seccompiler::BpfProgram {
    let filter = seccompiler::SeccompFilter::new(
        [(libc::SYS_clone3, vec![])].into_iter().collect(),
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(errno as u32),
        seccompiler::TargetArch::x86_64,
    )
    .expect("the clone3 filter");
    filter.try_into().expect("compile the clone3 filter")
}

#[test]
fn on_cgroup_v2_pid_1_moves_itself_in_where_clone3_is_refused() {
    with_test_cgroup("v2-refused", |cgroup, scratch, root| {
        // Refused as a call (ENOSYS, as Docker's profile answers): pid 1 is forked and
        // writes itself into the cgroup's cgroup.procs, checks it is listed there, and
        // goes on as if made inside.
        let enosys = clone3_answered(libc::ENOSYS);
        let r = run_under(
            &plan(
                CgroupJoin::CloneInto {
                    dir: cgroup.to_path_buf(),
                },
                root,
            ),
            0,
            Some(&enosys),
        );
        assert_ran_inside(&r, cgroup);
        // The same with EPERM (older profiles).
        let r = run_under(
            &plan(
                CgroupJoin::CloneInto {
                    dir: cgroup.to_path_buf(),
                },
                root,
            ),
            0,
            Some(&clone3_answered(libc::EPERM)),
        );
        assert_ran_inside(&r, cgroup);
        // Into a folder that is no cgroup: the move finds no cgroup.procs, makes none, and
        // pid 1 stops before forking anything; the message names both refusals.
        let r = run_under(
            &plan(
                CgroupJoin::CloneInto {
                    dir: scratch.to_path_buf(),
                },
                root,
            ),
            0,
            Some(&enosys),
        );
        assert_eq!(r["step"], "join cgroups", "{r}");
        let error = r["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("ENOSYS") && error.contains("cgroup.procs") && error.contains("ENOENT"),
            "{error}"
        );
        assert!(
            !scratch.join("cgroup.procs").exists(),
            "the move made a file in a folder that is no cgroup"
        );
        // Any other answer is no refusal of the call: no fallback, the fork fails.
        let r = run_under(
            &plan(
                CgroupJoin::CloneInto {
                    dir: cgroup.to_path_buf(),
                },
                root,
            ),
            127,
            Some(&clone3_answered(libc::EINVAL)),
        );
        assert_eq!(r["step"], "fork pid 1", "{r}");
        assert!(
            r["error"].as_str().unwrap_or_default().contains("EINVAL"),
            "{r}"
        );
        assert_eq!(read(&cgroup.join("cgroup.procs")), "", "nothing left in it");
    });
}

/// Pid 1 follows its init stage also when the stage ended before pid 1 had set its
/// parent-death signal (the runner killed at that moment, the stage with it), when no
/// signal would ever come: pid 1 finds the stage gone and stops before it forks anything.
/// The test hook holds pid 1 for three seconds before it sets the signal; the stage is
/// killed meanwhile.
#[test]
fn pid_1_follows_an_init_stage_that_ended_before_it_set_its_parent_death_signal() {
    use std::os::unix::process::ExitStatusExt as _;
    with_test_cgroup("pdeath", |cgroup, _scratch, root| {
        let mut held = plan(
            CgroupJoin::CloneInto {
                dir: cgroup.to_path_buf(),
            },
            root,
        );
        held.pid_one_pause_ms = 3000;
        let bytes = openvibe_skill_runner::sandbox::init::encode_plan(&held).expect("encode");
        let procs = || read(&cgroup.join("cgroup.procs"));
        let (status, reports, _) = init_of_build_with(
            INIT,
            openvibe_skill_runner::sandbox::init_exe::BUILD_ID,
            &bytes,
            None,
            |stage| {
                // Made inside the test's cgroup, pid 1 is listed there from its start, and
                // held for three seconds. The stage is killed in any case, so that
                // nothing outlives the test.
                let started = wait_for(std::time::Duration::from_secs(3), || {
                    !procs().trim().is_empty()
                });
                let pid = nix::unistd::Pid::from_raw(stage.id() as i32);
                nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL)
                    .expect("kill the init stage");
                assert!(started, "pid 1 never started");
            },
        );
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "{status:?}: {reports}"
        );
        let first = reports.lines().next().unwrap_or_default();
        let r: Value = serde_json::from_str(first).unwrap_or_else(|e| panic!("{e}: {reports}"));
        assert_eq!(r["kind"], "setup_failed", "{reports}");
        assert_eq!(r["step"], "parent death signal", "{reports}");
        assert!(
            r["error"]
                .as_str()
                .is_some_and(|e| e.contains("ended before pid 1 set its parent-death signal")),
            "{reports}"
        );
        assert!(
            !reports.contains("mount root tmpfs"),
            "pid 1 forked the job's process after its init stage had gone: {reports}"
        );
        assert!(
            wait_for(std::time::Duration::from_secs(5), || procs().is_empty()),
            "pid 1 is still in the job's cgroup: {}",
            procs()
        );
    });
}
