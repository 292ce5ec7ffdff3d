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
    }
}

/// Runs the shipped init stage on `plan`, which must end with `code`; its first report (a
/// setup failure, followed by pid 1's report of its child's exit when it came after the
/// fork).
fn run(plan: &Plan, code: i32) -> Value {
    let bytes = openvibe_skill_runner::sandbox::init::encode_plan(plan).expect("encode");
    let (status, reports, _) = init_of_build(
        INIT,
        openvibe_skill_runner::sandbox::init_exe::BUILD_ID,
        &bytes,
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

#[test]
fn on_cgroup_v2_pid_1_is_made_inside_the_jobs_cgroup() {
    require_host();
    let Some(mount) = cgroup_mounts()
        .into_iter()
        .find_map(|m| m.v2.then_some(m.mountpoint))
    else {
        panic!("no cgroup2 hierarchy is mounted; every host the runner supports has one");
    };
    let cgroup = mount.join(format!("ovsr-itest-v2-{}", std::process::id()));
    std::fs::create_dir(&cgroup).expect("make the test's own cgroup");
    let scratch = tempfile::tempdir().expect("scratch");
    let root = scratch.path().join("no-such-root");
    let outcome = std::panic::catch_unwind(|| {
        // Made inside: pid 1 found itself listed there and made the cgroup namespace (it
        // would have reported `join cgroups` otherwise); its child reached the root's
        // tmpfs, which has no mount point here.
        let r = run(
            &plan(
                CgroupJoin::CloneInto {
                    dir: cgroup.clone(),
                },
                &root,
            ),
            0,
        );
        assert_eq!(r["kind"], "setup_failed", "{r}");
        assert_eq!(r["step"], "mount root tmpfs", "{r}");
        assert!(
            cpu_usage(&cgroup) > 0,
            "nothing ran in the job's cgroup: {r}"
        );
        assert_eq!(
            read(&cgroup.join("cgroup.procs")),
            "",
            "the job's processes ended"
        );
        // Into a folder that is no cgroup, the kernel refuses the clone itself: it is
        // clone3's CLONE_INTO_CGROUP, not a fork and a move.
        let r = run(
            &plan(
                CgroupJoin::CloneInto {
                    dir: scratch.path().to_path_buf(),
                },
                &root,
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
                &root,
            ),
            127,
        );
        assert_eq!(r["step"], "join cgroups", "{r}");
        assert!(
            r["error"].as_str().unwrap_or_default().contains("ENOTDIR"),
            "{r}"
        );
    });
    // The test's cgroup goes whatever happened; its processes have all ended (the init
    // stage waits for pid 1, and pid 1 for its child).
    let removed = std::fs::remove_dir(&cgroup);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    removed.expect("remove the test's cgroup");
    assert!(!root.exists(), "the init made the missing root");
}
