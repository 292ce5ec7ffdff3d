//! Unit tests of `src/plan.rs`: every decision about a job's sandbox, checked on the plan.

use super::*;
use crate::bpf::Instruction;
use crate::job::{Bounds, Job};

fn job(mem: u64) -> ValidJob {
    let body = "process.stdout.write('1')";
    let sha = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(body.as_bytes()))
    };
    let j: Job = serde_json::from_value(serde_json::json!({
        "job_id": "j1", "class": "function", "artifact": crate::job::ARTIFACT,
        "args": {"tool": "t", "entry": "tools/t.js", "input": {}},
        "inputs": [{"name": "tools/t.js", "sha256": sha,
                    "content_base64": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, body)}],
        "limits": {"mem_bytes": mem}
    }))
    .unwrap();
    crate::job::validate(j, &Bounds::default()).unwrap()
}

fn rt(major: u32) -> Runtime {
    Runtime {
        node: "/opt/n/bin/node".into(),
        version: format!("v{major}.1.0"),
        major,
        minor: 1,
        sha256: String::new(),
        pinned: false,
        libraries: vec![
            "/lib/x86_64-linux-gnu/libc.so.6".into(),
            "/lib64/ld-linux-x86-64.so.2".into(),
        ],
        loader: Some("/lib64/ld-linux-x86-64.so.2".into()),
    }
}

fn paths() -> JobPaths {
    JobPaths {
        root: "/state/jobs/j1/root".into(),
    }
}

fn plan(major: u32, all_exist: bool) -> Plan {
    plan_for(&job(134_217_728), major, all_exist)
}

fn plan_for(job: &ValidJob, major: u32, all_exist: bool) -> Plan {
    let join = CgroupJoin::Write {
        files: vec!["/cg/memory/j1/tasks".into()],
    };
    plan_joining(job, major, all_exist, join)
}

fn plan_joining(job: &ValidJob, major: u32, all_exist: bool, cgroup_join: CgroupJoin) -> Plan {
    plan_on(job, major, all_exist, cgroup_join, TimeNamespace::Own)
}

/// [`plan_joining`] on a kernel with or without time namespaces for the runner.
fn plan_on(
    job: &ValidJob,
    major: u32,
    all_exist: bool,
    cgroup_join: CgroupJoin,
    time_namespace: TimeNamespace,
) -> Plan {
    let filters = CompiledFilters::default();
    let files = [("tools/t.js".to_string(), b"1".to_vec())];
    build(PlanInputs {
        job,
        runtime: &rt(major),
        paths: &paths(),
        files: &files,
        preload: b"'use strict'",
        seccomp: &|_| Ok(&filters),
        cgroup_join,
        uid: 2_100_000_007,
        egress_ports: &[443, 80],
        existing: &|_| all_exist,
        landlock_abi: 6,
        time_namespace,
        fault: None,
        node_hardening: true,
        omit: &[],
        warm: false,
    })
    .expect("a plan")
}

/// [`plan`]'s inputs for a warm sandbox of its shape: no files, layers left out.
fn warm_plan(omit: &[Layer]) -> Result<Plan, String> {
    let filters = CompiledFilters::default();
    let mut shape = job(134_217_728);
    shape.entry = String::new();
    build(PlanInputs {
        job: &shape,
        runtime: &rt(24),
        paths: &paths(),
        files: &[],
        preload: b"'use strict'",
        seccomp: &|_| Ok(&filters),
        cgroup_join: CgroupJoin::Write {
            files: vec!["/cg/memory/j1/tasks".into()],
        },
        uid: 2_100_000_007,
        egress_ports: &[443, 80],
        existing: &|_| true,
        landlock_abi: 6,
        time_namespace: TimeNamespace::Own,
        fault: None,
        node_hardening: true,
        omit,
        warm: true,
    })
}

fn plan_without(omit: &[Layer]) -> Plan {
    try_plan_without(omit).expect("a plan")
}

fn try_plan_without(omit: &[Layer]) -> Result<Plan, String> {
    try_plan(&job(134_217_728), 6, None, omit)
}

/// A plan of `job` on a kernel of landlock ABI `abi`, with a fault and layers left out.
fn try_plan(
    job: &ValidJob,
    abi: i32,
    fault: Option<Fault>,
    omit: &[Layer],
) -> Result<Plan, String> {
    let filters = CompiledFilters {
        programs: vec![vec![Instruction {
            code: crate::bpf::BPF_RET_K,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        }]],
    };
    let files = [("tools/t.js".to_string(), b"1".to_vec())];
    build(PlanInputs {
        job,
        runtime: &rt(24),
        paths: &paths(),
        files: &files,
        preload: b"'use strict'",
        seccomp: &|_| Ok(&filters),
        cgroup_join: CgroupJoin::Write {
            files: vec!["/cg/memory/j1/tasks".into(), "/cg/pids/j1/tasks".into()],
        },
        uid: 2_100_000_007,
        egress_ports: &[443, 80],
        existing: &|_| true,
        landlock_abi: abi,
        time_namespace: TimeNamespace::Own,
        fault,
        node_hardening: true,
        omit,
        warm: false,
    })
}

/// The plan itself refuses a left-out layer unless the build has the test hooks: a path
/// around the configuration's check still runs no job with less.
#[test]
fn only_a_test_build_plans_a_job_with_a_layer_left_out() {
    let r = try_plan_without(&[Layer::Landlock]);
    if crate::fault::HOOKS {
        assert!(r.is_ok_and(|p| p.omits(Layer::Landlock)));
    } else {
        let e = r.err().unwrap_or_default();
        assert!(e.contains("runner.omit_layers"), "{e}");
    }
    assert!(
        try_plan_without(&[]).is_ok(),
        "a plan in real use, in every build"
    );
}

#[test]
fn a_plan_in_real_use_leaves_nothing_out() {
    assert!(plan(24, true).omit.is_empty());
    assert!(Layer::ALL.iter().all(|l| !plan(24, true).omits(*l)));
    assert_eq!(plan(24, true).short_of_real_use(), Vec::<&str>::new());
    assert_eq!(plan(24, true).pid_one_pause_ms, 0);
    // pid 1 held before its parent-death signal is a test's plan only.
    let mut held = plan(24, true);
    held.pid_one_pause_ms = 1;
    assert_eq!(held.short_of_real_use(), ["no test hook"]);
    assert!(held.refused_without_hooks(false).is_some());
    // So is pid 1 held after a warm sandbox's hand-over.
    let mut paused = plan(24, true);
    paused.hand_over_pause_ms = 1;
    assert_eq!(paused.short_of_real_use(), ["no test hook"]);
    assert!(paused.refused_without_hooks(false).is_some());
    let egress = job_with_net(Net::Public);
    let p = try_plan(&egress, 6, None, &[]).expect("a plan");
    assert!(p.join_netns.is_some());
    assert_eq!(p.short_of_real_use(), Vec::<&str>::new());
    // An identity below the sandbox ids (an account's, root's) is no sandbox's.
    for (uid, gid) in [(0, 70_000), (70_000, 0), (1000, 1000)] {
        let mut p = plan(24, true);
        let who = p.privileges.as_mut().expect("an identity");
        (who.uid, who.gid) = (uid, gid);
        assert_eq!(
            p.short_of_real_use(),
            ["an unprivileged identity without groups"],
            "uid {uid} gid {gid}"
        );
    }
}

/// The cgroup namespace is made by the job's first process in its cgroup, so that it is
/// rooted there: the init stage on v1 (it joins by itself), pid 1 on v2 (made inside
/// while the init stage stays out). A v2 plan whose init stage made it is short of real
/// use: the job would see the runner's cgroup path.
#[test]
fn the_cgroup_namespace_is_made_by_the_jobs_first_process_in_its_cgroup() {
    let v1 = plan(24, true);
    assert_eq!(v1.unshare & libc::CLONE_NEWCGROUP, libc::CLONE_NEWCGROUP);
    assert_eq!(v1.pid_one_unshare, 0);
    let join = CgroupJoin::CloneInto {
        dir: "/cg/unified/jobs/j1".into(),
    };
    let mut v2 = plan_joining(&job(134_217_728), 24, true, join);
    assert_eq!(v2.unshare, v1.unshare & !libc::CLONE_NEWCGROUP);
    assert_eq!(v2.pid_one_unshare, libc::CLONE_NEWCGROUP);
    assert_eq!(v2.short_of_real_use(), Vec::<&str>::new());
    v2.unshare |= libc::CLONE_NEWCGROUP;
    assert_eq!(
        v2.short_of_real_use(),
        ["a cgroup namespace made inside the job's cgroup"]
    );
    v2.unshare &= !libc::CLONE_NEWCGROUP;
    v2.pid_one_unshare = 0;
    assert_eq!(v2.short_of_real_use(), ["ipc, uts and cgroup namespaces"]);
}

/// What the init stage of a shipped build checks: every layer left out shows in the plan's
/// own steps, whatever `omit` says (a cgroup limit is the runner's to write and Node's
/// hardening is Node's flags: neither is a step).
#[test]
#[cfg_attr(not(feature = "test-hooks"), ignore = "needs the test-hooks feature")]
fn every_layer_left_out_falls_short_of_real_use() {
    for layer in Layer::ALL {
        let mut p = plan_without(&[layer]);
        // The record alone must not be what tells: clear it.
        p.omit.clear();
        let short = p.short_of_real_use();
        // A cgroup limit is the runner's to write, Node's hardening is Node's flags: neither
        // is a step of the init stage.
        let not_a_step = matches!(
            layer,
            Layer::MemoryLimit | Layer::PidsLimit | Layer::NodePermission | Layer::Preload
        );
        assert_eq!(
            short.is_empty(),
            not_a_step,
            "{layer:?}: {short:?} (not a step of the init stage)"
        );
        // The init stage of a shipped build refuses it; a test build runs it.
        let refused = p.refused_without_hooks(false);
        assert_eq!(refused.is_some(), !not_a_step, "{layer:?}: {refused:?}");
        assert!(refused.is_none_or(|why| why.contains(short[0])));
        assert_eq!(p.refused_without_hooks(true), None);
    }
    assert_eq!(plan(24, true).refused_without_hooks(false), None);
    // The test-only Node without its hardening, as the exec gate's JavaScript test runs it
    // on a shipped build: its record names Node's layers only, and it runs.
    let unhardened = plan_without(&[Layer::NodePermission, Layer::Preload]);
    assert_eq!(unhardened.refused_without_hooks(false), None);
    // A plan that lost a step by mistake, with nothing in its record.
    let mut lost = plan(24, true);
    lost.landlock = None;
    assert!(lost
        .refused_without_hooks(false)
        .is_some_and(|why| why.contains("landlock") && why.contains("test-hooks")));
}

#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "a left-out layer needs --features test-hooks"
)]
fn no_mount_namespace_means_no_root_and_no_root_means_no_preload() {
    assert_eq!(
        with_implied(&[Layer::MountNamespace]),
        vec![Layer::Preload, Layer::Root, Layer::MountNamespace]
    );
    assert_eq!(
        with_implied(&[Layer::Root, Layer::Root]),
        vec![Layer::Preload, Layer::Root]
    );
    assert_eq!(with_implied(&[Layer::Seccomp]), vec![Layer::Seccomp]);
    // Without a root of its own nothing is mounted, and every path of the job's root
    // is where the host's tree shows it: under the job's root folder.
    let p = plan_without(&[Layer::MountNamespace]);
    assert!(p.omits(Layer::Root) && p.omits(Layer::Preload));
    assert!(p.mounts.is_empty());
    assert_eq!(p.cwd, PathBuf::from("/state/jobs/j1/root/skill"));
    assert_eq!(
        p.argv,
        vec![
            "/opt/n/bin/node",
            "--permission",
            "--allow-fs-read=/state/jobs/j1/root/skill/",
            "--allow-fs-read=/state/jobs/j1/root/runtime/harden.cjs",
            "--disallow-code-generation-from-strings",
            "--max-old-space-size=64",
            "/state/jobs/j1/root/skill/tools/t.js"
        ]
    );
    let dirs: Vec<&PathRule> = p
        .landlock
        .as_ref()
        .map(|l| l.paths.iter().filter(|r| r.access == ruleset::READ_DIR))
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(
        dirs.iter().map(|r| r.path.clone()).collect::<Vec<_>>(),
        vec![
            PathBuf::from("/state/jobs/j1/root/skill"),
            PathBuf::from("/proc")
        ]
    );
}

#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "a left-out layer needs --features test-hooks"
)]
fn node_permission_and_the_preload_are_left_out_one_at_a_time() {
    let p = plan_without(&[Layer::NodePermission]);
    assert_eq!(
        p.argv,
        vec![
            "/opt/n/bin/node",
            "--max-old-space-size=64",
            "--require=/runtime/harden.cjs",
            "/runtime/main"
        ]
    );
    assert_eq!(p.start, Start::Gated);
    let p = plan_without(&[Layer::Preload]);
    // Without the preload there is no gate: Node's main is the entry itself.
    assert_eq!(p.start, Start::Direct);
    assert_eq!(p.main_link, None);
    assert_eq!(p.argv.last().map(String::as_str), Some("/skill/tools/t.js"));
    assert!(p.argv.iter().any(|a| a == "--permission"));
    assert!(!p.argv.iter().any(|a| is_preload_flag(a)), "{:?}", p.argv);
    assert_eq!(p.argv.len(), 7);
    // The other OS layers leave the argv and the root as they are.
    let p = plan_without(&[Layer::Landlock, Layer::Seccomp, Layer::PidNamespace]);
    assert_eq!(p.argv, plan(24, true).argv);
    assert_eq!(p.mounts, plan(24, true).mounts);
    assert_eq!(
        p.omit,
        vec![Layer::PidNamespace, Layer::Landlock, Layer::Seccomp]
    );
}

#[test]
fn an_omitted_cgroup_limit_becomes_the_hosts_safety_net() {
    assert_eq!(cgroup_limits(128 * MIB, 64, &[]), (128 * MIB, 64));
    assert_eq!(
        cgroup_limits(128 * MIB, 64, &[Layer::MemoryLimit]),
        (OMITTED_MEM_BYTES, 64)
    );
    assert_eq!(
        cgroup_limits(128 * MIB, 64, &[Layer::PidsLimit]),
        (128 * MIB, OMITTED_PIDS_MAX)
    );
}

#[test]
fn the_plan_picks_its_own_net_modes_seccomp_programs_and_fails_without_them() {
    let mut public_job = job(134_217_728);
    public_job.net = Net::Public;
    let mut ovo_job = job(134_217_728);
    ovo_job.net = Net::OpenvibeOnly;
    let (runtime, job_paths) = (rt(24), paths());
    let (deny, public) = (
        CompiledFilters {
            programs: vec![vec![]],
        },
        CompiledFilters {
            programs: vec![vec![], vec![]],
        },
    );
    let pick = |net: Net| match net {
        Net::Deny => Ok(&deny),
        Net::Public => Ok(&public),
        Net::OpenvibeOnly => Err("the policy did not compile for openvibe-only".to_string()),
    };
    let files = [("tools/t.js".to_string(), b"1".to_vec())];
    let inputs = |j| PlanInputs {
        job: j,
        runtime: &runtime,
        paths: &job_paths,
        files: &files,
        preload: b"",
        seccomp: &pick,
        cgroup_join: CgroupJoin::Write { files: vec![] },
        uid: 2_100_000_007,
        egress_ports: &[],
        existing: &|_| true,
        landlock_abi: 6,
        time_namespace: TimeNamespace::Own,
        // A fault only where the build honours one (the plan refuses it otherwise).
        fault: crate::fault::HOOKS.then_some(Fault::Landlock),
        node_hardening: true,
        omit: &[],
        warm: false,
    };
    let p = build(inputs(&public_job)).expect("a plan");
    assert_eq!(p.seccomp.as_ref(), Some(&public));
    assert_eq!(p.fault, crate::fault::HOOKS.then_some(Fault::Landlock));
    let e = build(inputs(&ovo_job)).expect_err("no program for the mode");
    assert!(e.contains("openvibe-only"), "{e}");
}

#[test]
fn the_rlimits_the_cgroup_does_not_cover_are_in_the_plan() {
    let p = plan(24, true);
    assert_eq!((p.nofile, p.core_bytes, p.fsize_bytes), (256, 1, 0));
}

#[test]
fn node24_argv() {
    let p = plan(24, true);
    assert_eq!(
        p.argv,
        vec![
            "/opt/n/bin/node",
            "--permission",
            "--allow-fs-read=/skill/",
            "--allow-fs-read=/runtime/harden.cjs",
            "--disallow-code-generation-from-strings",
            "--max-old-space-size=64",
            "--require=/runtime/harden.cjs",
            "/runtime/main"
        ]
    );
    assert!(p.env.is_empty(), "the tool's environment is empty");
    assert_eq!(p.cwd, PathBuf::from("/skill"));
}

/// What `Engine::without_node_hardening` leaves of Node's argv (test only): the binary,
/// its heap ceiling and the main script.
#[test]
fn hardening_flags_are_told_apart() {
    for major in [24, 20] {
        let mut argv = plan(major, true).argv;
        argv.retain(|a| !is_node_hardening_flag(a));
        assert_eq!(
            argv,
            vec![
                "/opt/n/bin/node",
                "--max-old-space-size=64",
                "/runtime/main"
            ]
        );
    }
    assert!(!is_node_hardening_flag("--permissionx"));
}

#[test]
fn node20_argv() {
    let p = plan(20, true);
    assert_eq!(p.argv[1], "--experimental-permission");
    assert_eq!(p.argv[2], "--allow-fs-read=/skill/*");
}

/// The landlock ruleset of a plan in real use.
fn ruleset_of(p: &Plan) -> &LandlockPlan {
    p.landlock
        .as_ref()
        .expect("a plan in real use has landlock")
}

/// The paths a ruleset gives exactly `access`.
fn paths_with(p: &Plan, access: &[FsAccess]) -> Vec<String> {
    ruleset_of(p)
        .paths
        .iter()
        .filter(|r| r.access == access)
        .map(|r| r.path.display().to_string())
        .collect()
}

#[test]
fn only_node_and_loader_execute() {
    let p = plan(24, true);
    assert_eq!(
        paths_with(&p, ruleset::EXECUTE),
        vec!["/opt/n/bin/node", "/lib64/ld-linux-x86-64.so.2"]
    );
    assert!(ruleset_of(&p)
        .paths
        .iter()
        .filter(|r| r.access.contains(&FsAccess::Execute))
        .all(|r| r.access == ruleset::EXECUTE));
    assert_eq!(paths_with(&p, ruleset::WRITE_FILE), vec!["/dev/null"]);
    assert!(ruleset_of(&p).connect_tcp.is_empty());
}

#[test]
fn root_holds_only_runtime_skill_proc_and_devices() {
    let p = plan(24, true);
    let targets: Vec<String> = p
        .mounts
        .iter()
        .map(|m| match m {
            MountStep::BindFile { target, .. }
            | MountStep::Device { target, .. }
            | MountStep::Proc { target } => target.display().to_string(),
        })
        .collect();
    assert_eq!(
        targets,
        vec![
            "/opt/n/bin/node",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/ld-linux-x86-64.so.2",
            "/etc/ld.so.cache",
            "/dev/null",
            "/dev/zero",
            "/dev/urandom",
            "/dev/random",
            "/proc"
        ]
    );
    // The skill and the preload are written into the job's own root, not bound from
    // the host, so no host path shows in the job's mountinfo.
    assert_eq!(p.skill_files.len(), 1);
    assert_eq!(p.skill_files[0].name, "tools/t.js");
    // A gated start: the preload ends by waiting at the gate.
    let preload = format!(
        "'use strict'\njobMemBytes = {};\nwaitAtGate();\n",
        128 * MIB
    );
    assert_eq!(p.preload.bytes, preload.as_bytes());
    assert_eq!(p.root_bytes, ROOT_TMPFS_SLACK + 1 + preload.len() as u64);
}

#[test]
fn absent_optional_files_are_left_out() {
    let p = plan(24, false);
    assert!(!p
        .mounts
        .iter()
        .any(|m| matches!(m, MountStep::Device { .. })));
    assert!(paths_with(&p, ruleset::WRITE_FILE).is_empty());
}

#[test]
fn heap_ceiling_is_below_the_memory_limit() {
    assert_eq!(heap_mib(16 * MIB), 8);
    assert_eq!(heap_mib(128 * MIB), 64);
    assert_eq!(heap_mib(256 * MIB), 128);
    for mem in [16 * MIB, 100 * MIB, 256 * MIB] {
        assert!(heap_mib(mem) * MIB < mem);
    }
    assert_eq!(
        plan(24, true).privileges,
        Some(Privileges {
            uid: 2_100_000_007,
            gid: 2_100_000_007,
            groups: vec![]
        })
    );
}

#[test]
fn deny_has_no_network_files_and_no_ports() {
    let p = plan(24, true);
    assert_eq!(p.join_netns, None);
    assert!(p.etc_files.is_empty());
    assert!(ruleset_of(&p).connect_tcp.is_empty());
    assert!(!ruleset_of(&p)
        .paths
        .iter()
        .any(|r| r.path == Path::new("/etc/resolv.conf")));
}

#[test]
fn egress_joins_the_runners_namespace_with_its_resolver() {
    for net in [Net::OpenvibeOnly, Net::Public] {
        let mut j = job(134_217_728);
        j.net = net;
        let p = plan_for(&j, 24, true);
        assert_eq!(p.join_netns, Some(NETNS_FD));
        assert_eq!(p.net, net);
        assert_eq!(ruleset_of(&p).connect_tcp, vec![53, 80, 443]);
        let names: Vec<&str> = p.etc_files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, vec!["resolv.conf", "hosts"]);
        let resolv = String::from_utf8_lossy(&p.etc_files[0].bytes).into_owned();
        assert!(resolv.starts_with("nameserver 127.0.0.1\n"), "{resolv}");
        assert!(!resolv.contains("search"), "no search domains: {resolv}");
        for f in ["/etc/resolv.conf", "/etc/hosts"] {
            assert!(paths_with(&p, ruleset::READ_FILE).contains(&f.to_string()));
        }
        assert_eq!(
            p.root_bytes,
            ROOT_TMPFS_SLACK
                + 1
                + p.preload.bytes.len() as u64
                + (JOB_RESOLV_CONF_TEXT.len() + JOB_HOSTS_TEXT.len()) as u64
        );
    }
}

fn job_with_net(net: Net) -> ValidJob {
    let mut j = job(134_217_728);
    j.net = net;
    j
}

const EVERY_NAMESPACE: i32 = libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWTIME
    | libc::CLONE_NEWCGROUP;

/// A `deny` job gets every namespace new, its network's empty; a job with egress joins the
/// runner's network namespace and unshares every other.
#[test]
fn deny_unshares_every_namespace_and_egress_joins_the_runners_network() {
    let p = plan(24, true);
    assert_eq!(p.unshare, EVERY_NAMESPACE);
    assert_eq!(p.join_netns, None);
    for net in [Net::OpenvibeOnly, Net::Public] {
        let p = plan_for(&job_with_net(net), 24, true);
        assert_eq!(p.unshare, EVERY_NAMESPACE & !libc::CLONE_NEWNET, "{net:?}");
        assert_eq!(p.join_netns, Some(NETNS_FD), "{net:?}");
    }
}

/// A kernel without time namespaces still runs jobs (the namespace only hides the host's
/// uptime; SPEC does not require it): the plan leaves it out and nothing else.
#[test]
fn a_kernel_without_time_namespaces_gets_every_other_namespace() {
    let join = CgroupJoin::Write {
        files: vec!["/cg/memory/j1/tasks".into()],
    };
    let p = plan_on(&job(134_217_728), 24, true, join, TimeNamespace::None);
    assert_eq!(p.unshare, EVERY_NAMESPACE & !libc::CLONE_NEWTIME);
    assert!(!p.borrowed_time_namespace);
    let mut with = p.clone();
    with.unshare |= libc::CLONE_NEWTIME;
    assert_eq!(with, plan(24, true));
}

/// A runner without CAP_SYS_TIME (systemd's `ProtectClock=`) whose kernel lets a user
/// namespace own a time namespace: the init stage does not make the time namespace (it
/// could not set its clocks) but joins the one its helper made; nothing else changes.
#[test]
fn a_runner_without_cap_sys_time_borrows_a_time_namespace() {
    let join = CgroupJoin::Write {
        files: vec!["/cg/memory/j1/tasks".into()],
    };
    let p = plan_on(
        &job(134_217_728),
        24,
        true,
        join,
        TimeNamespace::InUserNamespace,
    );
    assert_eq!(p.unshare, EVERY_NAMESPACE & !libc::CLONE_NEWTIME);
    assert!(p.borrowed_time_namespace);
    let mut own = p.clone();
    own.unshare |= libc::CLONE_NEWTIME;
    own.borrowed_time_namespace = false;
    assert_eq!(own, plan(24, true));
}

/// A plan in real use has every step: the root entered, privileges dropped, landlock, the
/// exec gate handed over, seccomp.
#[test]
fn a_plan_in_real_use_has_every_step() {
    let p = plan(24, true);
    assert_eq!(p.root_steps, RootSteps::Enter);
    assert!(p.privileges.is_some() && p.landlock.is_some() && p.seccomp.is_some());
    assert_eq!(p.exec_gate, ExecGateStep::HandOver);
    assert_eq!(p.fault, None);
}

/// Each layer the matrix leaves out is a step the plan does not have, and nothing else
/// changes.
#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "a left-out layer needs --features test-hooks"
)]
fn each_layer_left_out_is_a_step_the_plan_lacks() {
    let full = plan(24, true);
    let without = |layer| plan_without(&[layer]);
    let p = without(Layer::MountNamespace);
    assert_eq!(p.unshare, EVERY_NAMESPACE & !libc::CLONE_NEWNS);
    assert_eq!(p.root_steps, RootSteps::FilesOnly);
    let p = without(Layer::Root);
    assert_eq!(p.unshare, EVERY_NAMESPACE, "still its own mount namespace");
    assert_eq!(p.root_steps, RootSteps::TmpfsOnly);
    assert!(p.mounts.is_empty());
    let p = without(Layer::PidNamespace);
    assert_eq!(p.unshare, EVERY_NAMESPACE & !libc::CLONE_NEWPID);
    let p = without(Layer::NetNamespace);
    assert_eq!(p.unshare, EVERY_NAMESPACE & !libc::CLONE_NEWNET);
    assert_eq!(p.join_netns, None);
    // A job with egress, without its network namespace: in the host's, joining none.
    let p = try_plan(&job_with_net(Net::Public), 6, None, &[Layer::NetNamespace]).expect("a plan");
    assert_eq!(p.unshare, EVERY_NAMESPACE & !libc::CLONE_NEWNET);
    assert_eq!(p.join_netns, None);
    let p = without(Layer::Privileges);
    assert_eq!(p.privileges, None);
    let p = without(Layer::Landlock);
    assert_eq!(p.landlock, None);
    let p = without(Layer::ExecGate);
    assert_eq!(p.exec_gate, ExecGateStep::CloseSocket);
    let p = without(Layer::Seccomp);
    assert_eq!(p.seccomp, None);
    // Each of those leaves every other step as it is.
    for layer in [
        Layer::Privileges,
        Layer::Landlock,
        Layer::ExecGate,
        Layer::Seccomp,
        Layer::PidNamespace,
    ] {
        let p = without(layer);
        assert_eq!(p.root_steps, full.root_steps, "{layer:?}");
        assert_eq!(p.mounts, full.mounts, "{layer:?}");
        assert_eq!(p.argv, full.argv, "{layer:?}");
        assert_eq!(p.privileges.is_some(), layer != Layer::Privileges);
        assert_eq!(p.landlock.is_some(), layer != Layer::Landlock);
        assert_eq!(p.seccomp.is_some(), layer != Layer::Seccomp);
        assert_eq!(
            p.exec_gate == ExecGateStep::HandOver,
            layer != Layer::ExecGate
        );
        assert_eq!(p.fault, None);
    }
}

/// Each fault is its step's input corrupted in the plan, and only that.
#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "a fault needs --features test-hooks"
)]
fn each_fault_is_its_steps_input_corrupted_in_the_plan() {
    let faulty = |j: &ValidJob, fault| try_plan(j, 6, Some(fault), &[]).expect("a plan");
    let deny = job(134_217_728);
    let public = job_with_net(Net::Public);
    for fault in Fault::ALL {
        let j = if fault == Fault::Netns {
            &public
        } else {
            &deny
        };
        let real = try_plan(j, 6, None, &[]).expect("a plan");
        let mut p = faulty(j, fault);
        assert_eq!(p.fault, Some(fault));
        match fault {
            Fault::Netns => {
                assert_eq!(
                    p.join_netns,
                    Some(REPORT_FD),
                    "the report pipe: no namespace"
                );
                p.join_netns = real.join_netns;
            }
            Fault::Cgroup => {
                assert_eq!(
                    p.cgroup_join,
                    CgroupJoin::Write {
                        files: vec![PathBuf::from("/cg/memory/j1"), PathBuf::from("/cg/pids/j1")]
                    },
                    "the folders, not their files"
                );
                p.cgroup_join = real.cgroup_join.clone();
            }
            Fault::Namespaces => {
                assert_eq!(p.unshare, EVERY_NAMESPACE | libc::SIGCHLD);
                p.unshare = real.unshare;
            }
            Fault::Mounts => {
                assert_eq!(
                    p.mounts[0],
                    MountStep::BindFile {
                        source: "/state/jobs/j1/root/missing-source".into(),
                        target: "/missing-target".into(),
                    },
                    "the missing source first"
                );
                assert_eq!(p.mounts[1..], real.mounts[..]);
                p.mounts = real.mounts.clone();
            }
            Fault::Capabilities => {
                let groups = p.privileges.as_ref().map(|i| i.groups.clone());
                assert_eq!(groups, Some(vec![2_100_000_007; NGROUPS_MAX + 1]));
                p.privileges = real.privileges.clone();
            }
            Fault::Landlock => {
                let l = ruleset_of(&p);
                assert_eq!(
                    l.paths.last(),
                    Some(&PathRule {
                        path: "/missing-by-fault".into(),
                        access: ruleset::READ_DIR.to_vec()
                    })
                );
                assert_eq!(l.paths[..l.paths.len() - 1], ruleset_of(&real).paths[..]);
                p.landlock = real.landlock.clone();
            }
            Fault::ExecGate => {
                assert_eq!(p.exec_gate, ExecGateStep::HandOverClosedSocket);
                p.exec_gate = real.exec_gate;
            }
            Fault::Seccomp => {
                let refused = refused_seccomp_program();
                assert_eq!(p.seccomp.as_ref(), Some(&refused));
                // A jump past the program's end: its target is outside it.
                let program = &refused.programs[0];
                assert_eq!(program[0].code, crate::bpf::BPF_JMP_JA);
                assert!(program[0].k as usize >= program.len());
                p.seccomp = real.seccomp.clone();
            }
        }
        p.fault = None;
        assert_eq!(p, real, "{fault:?} corrupts its own step only");
    }
}

/// On cgroup v2 the cgroup fault corrupts the folder pid 1 is made in: its `cgroup.procs`,
/// a file, which the init stage's `open(O_DIRECTORY)` refuses.
#[test]
fn the_cgroup_fault_on_v2_names_a_file_for_the_folder() {
    let mut p = try_plan(&job(134_217_728), 6, None, &[]).expect("a plan");
    p.cgroup_join = CgroupJoin::CloneInto {
        dir: "/cg/unified/jobs/j1".into(),
    };
    inject(&mut p, Fault::Cgroup).expect("injected");
    assert_eq!(
        p.cgroup_join,
        CgroupJoin::CloneInto {
            dir: "/cg/unified/jobs/j1/cgroup.procs".into()
        }
    );
}

/// A fault whose step the plan does not have is refused, never silently a test of
/// nothing.
#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "a fault needs --features test-hooks"
)]
fn a_fault_whose_step_is_absent_is_refused() {
    let deny = job(134_217_728);
    for (fault, omit) in [
        (Fault::Netns, None),
        (Fault::Mounts, Some(Layer::Root)),
        (Fault::Mounts, Some(Layer::MountNamespace)),
        (Fault::Capabilities, Some(Layer::Privileges)),
        (Fault::Landlock, Some(Layer::Landlock)),
        (Fault::ExecGate, Some(Layer::ExecGate)),
        (Fault::Seccomp, Some(Layer::Seccomp)),
    ] {
        let omit: Vec<Layer> = omit.into_iter().collect();
        let e = try_plan(&deny, 6, Some(fault), &omit).expect_err("no such step");
        assert!(
            e.contains(&format!("runner.fault_inject = \"{}\"", fault.as_str())),
            "{e}"
        );
    }
}

/// A fault is refused without the test hooks, like a left-out layer.
#[test]
fn only_a_test_build_plans_a_fault() {
    let r = try_plan(&job(134_217_728), 6, Some(Fault::Seccomp), &[]);
    if crate::fault::HOOKS {
        assert!(r.is_ok_and(|p| p.fault == Some(Fault::Seccomp)));
    } else {
        let e = r.err().unwrap_or_default();
        assert!(e.contains("runner.fault_inject"), "{e}");
    }
}

/// Which rights each path gets: read for files, read and list for directories, execute for
/// Node and its loader only, write for /dev/null only; one rule per path.
#[test]
fn each_path_gets_the_rights_of_its_kind() {
    let p = plan(24, true);
    let l = ruleset_of(&p);
    let mut seen: Vec<&PathBuf> = l.paths.iter().map(|r| &r.path).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), l.paths.len(), "one rule per path");
    assert_eq!(
        paths_with(&p, ruleset::READ_FILE),
        vec![
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/etc/ld.so.cache",
            "/dev/zero",
            "/dev/urandom",
            "/dev/random",
            "/runtime/harden.cjs"
        ]
    );
    assert_eq!(paths_with(&p, ruleset::READ_DIR), vec!["/skill", "/proc"]);
    assert_eq!(
        paths_with(&p, ruleset::EXECUTE),
        vec!["/opt/n/bin/node", "/lib64/ld-linux-x86-64.so.2"]
    );
    assert_eq!(paths_with(&p, ruleset::WRITE_FILE), vec!["/dev/null"]);
    assert_eq!(
        l.paths.len(),
        6 + 2 + 2 + 1,
        "no path with any other rights"
    );
    // An executable or a written file outside the read list still gets its rule.
    let g = ruleset::Grants {
        read_files: vec![],
        read_dirs: vec![],
        exec_files: vec!["/x".into()],
        write_files: vec!["/w".into()],
    };
    assert_eq!(
        ruleset::rules(&g),
        vec![
            PathRule {
                path: "/x".into(),
                access: ruleset::EXECUTE.to_vec()
            },
            PathRule {
                path: "/w".into(),
                access: ruleset::WRITE_FILE.to_vec()
            }
        ]
    );
}

/// The ruleset targets the kernel's ABI capped at the newest this runner knows; TCP is
/// handled from ABI 4 and the scopes from ABI 6; every filesystem right of the ABI is
/// handled.
#[test]
fn the_ruleset_targets_the_kernels_abi_capped() {
    assert_eq!(ruleset::target_abi(-1), None);
    assert_eq!(ruleset::target_abi(0), None);
    assert_eq!(ruleset::target_abi(1), Some(1));
    assert_eq!(ruleset::target_abi(6), Some(6));
    assert_eq!(ruleset::target_abi(9), Some(ruleset::NEWEST_USED));
    let public = job_with_net(Net::Public);
    for kernel in 1..=9 {
        for j in [&job(134_217_728), &public] {
            let p = try_plan(j, kernel, None, &[]).expect("a plan");
            let l = ruleset_of(&p);
            let abi = kernel.min(6) as u8;
            assert_eq!(l.abi, abi);
            let fs = l.handled_fs.len();
            assert_eq!(
                fs,
                match abi {
                    1 => 13,
                    2 => 14,
                    3 | 4 => 15,
                    _ => 16,
                },
                "ABI {abi}"
            );
            assert_eq!(
                l.handled_net.is_empty(),
                abi < 4,
                "TCP handled from ABI 4: {abi}"
            );
            if abi >= 4 {
                assert_eq!(
                    l.handled_net,
                    vec![NetAccess::BindTcp, NetAccess::ConnectTcp]
                );
            }
            assert_eq!(
                l.scopes,
                if abi >= 6 {
                    vec![Scope::AbstractUnixSocket, Scope::Signal]
                } else {
                    vec![]
                }
            );
            // Ports only where connect is handled, and only for a job with egress.
            let ports: Vec<u16> = if abi >= 4 && j.net != Net::Deny {
                vec![53, 80, 443]
            } else {
                vec![]
            };
            assert_eq!(l.connect_tcp, ports, "ABI {abi}, {:?}", j.net);
        }
    }
}

/// A `deny` job on a kernel with TCP rules: connect and bind are handled and no port is
/// allowed, so it connects nowhere.
#[test]
fn a_deny_job_connects_nowhere() {
    let p = plan(24, true);
    let l = ruleset_of(&p);
    assert!(l.handled_net.contains(&NetAccess::ConnectTcp));
    assert!(l.handled_net.contains(&NetAccess::BindTcp));
    assert!(l.connect_tcp.is_empty());
}

/// Without landlock on the kernel no plan is made (the runner refuses to start first), unless
/// the layer matrix leaves landlock out.
#[test]
fn no_landlock_on_the_kernel_no_plan() {
    let e = try_plan(&job(134_217_728), 0, None, &[]).expect_err("no plan without landlock");
    assert!(
        e.contains("landlock is unavailable") && e.contains("lsm="),
        "{e}"
    );
    if crate::fault::HOOKS {
        let p = try_plan(&job(134_217_728), 0, None, &[Layer::Landlock]).expect("a plan");
        assert_eq!(p.landlock, None);
    }
}

/// The plan crosses to the init stage as JSON: every step reads back as it was, a fault's
/// corrupted inputs included.
#[test]
fn the_plan_reads_back_from_its_json() {
    let mut plans = vec![
        plan(24, true),
        plan_for(&job_with_net(Net::Public), 24, true),
    ];
    if crate::fault::HOOKS {
        for fault in [Fault::Capabilities, Fault::Seccomp, Fault::ExecGate] {
            plans.push(try_plan(&job(134_217_728), 6, Some(fault), &[]).expect("a plan"));
        }
        plans.push(plan_without(&[Layer::MountNamespace, Layer::Landlock]));
    }
    for p in plans {
        let json = serde_json::to_vec(&p).expect("json");
        let back: Plan = serde_json::from_slice(&json).expect("read back");
        assert_eq!(back, p);
    }
    // A right the plan does not know is refused, not ignored.
    let typo = r#"{"path":"/x","access":["read_fiel"]}"#;
    assert!(serde_json::from_str::<PathRule>(typo).is_err());
}

/// What doctor and /v1/info say landlock restricts for a kernel ABI: the plan's decisions.
#[test]
fn landlock_features_follow_the_plans_abi() {
    use crate::plan::ruleset::features;
    assert!(features(0).is_empty());
    assert_eq!(features(3), vec!["filesystem"]);
    assert_eq!(features(4).len(), 2);
    assert_eq!(features(7).len(), 3);
}

/// A cold job's files and link are laid with its root, and its preload waits at the gate
/// for the go byte; a warm sandbox's plan has no file and no link (pid 1 lays them at the
/// hand-over) and the very same Node command line and preload.
#[test]
fn a_warm_plan_is_a_cold_plan_without_the_jobs_files() {
    let cold = plan(24, true);
    assert_eq!(cold.start, Start::Gated);
    assert_eq!(cold.main_link.as_deref(), Some("tools/t.js"));
    assert!(!cold.skill_files.is_empty());
    assert!(cold.preload.bytes.ends_with(GATE_LINE.as_bytes()));
    let warm = warm_plan(&[]).unwrap_or_else(|e| panic!("a warm plan: {e}"));
    assert_eq!(warm.start, Start::Warm);
    assert_eq!(warm.main_link, None);
    assert!(warm.skill_files.is_empty());
    assert_eq!(warm.argv, cold.argv);
    assert_eq!(warm.preload, cold.preload);
    assert_eq!(warm.mounts, cold.mounts);
    assert_eq!(warm.landlock, cold.landlock);
    assert_eq!(warm.seccomp, cold.seccomp);
    let files: u64 = cold.skill_files.iter().map(|f| f.bytes.len() as u64).sum();
    assert_eq!(
        warm.root_bytes + files,
        cold.root_bytes,
        "the hand-over's root size is a cold job's"
    );
}

#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "a left-out layer needs --features test-hooks"
)]
fn a_warm_plan_needs_the_whole_sandbox() {
    for layer in [Layer::Seccomp, Layer::Landlock, Layer::Preload, Layer::Root] {
        let err = warm_plan(&[layer]).err().unwrap_or_default();
        assert!(err.contains("whole sandbox"), "{layer:?}: {err}");
    }
}
