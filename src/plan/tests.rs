//! Unit tests of `src/plan.rs`: every decision about a job's sandbox, checked on the plan.

use super::*;
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
    let filters = CompiledFilters::default();
    let files = [("tools/t.js".to_string(), b"1".to_vec())];
    build(PlanInputs {
        job,
        runtime: &rt(major),
        paths: &paths(),
        files: &files,
        preload: b"'use strict'",
        seccomp: &|_| Ok(&filters),
        cgroup_join: vec!["/cg/memory/j1/tasks".into()],
        uid: 2_100_000_007,
        egress_ports: &[443, 80],
        existing: &|_| all_exist,
        fault: None,
        node_hardening: true,
        omit: &[],
    })
    .expect("a plan")
}

fn plan_without(omit: &[Layer]) -> Plan {
    try_plan_without(omit).expect("a plan")
}

fn try_plan_without(omit: &[Layer]) -> Result<Plan, String> {
    let filters = CompiledFilters::default();
    let files = [("tools/t.js".to_string(), b"1".to_vec())];
    build(PlanInputs {
        job: &job(134_217_728),
        runtime: &rt(24),
        paths: &paths(),
        files: &files,
        preload: b"'use strict'",
        seccomp: &|_| Ok(&filters),
        cgroup_join: vec!["/cg/memory/j1/tasks".into()],
        uid: 2_100_000_007,
        egress_ports: &[443, 80],
        existing: &|_| true,
        fault: None,
        node_hardening: true,
        omit,
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
    assert_eq!(
        p.landlock.read_dirs,
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
            "/skill/tools/t.js"
        ]
    );
    let p = plan_without(&[Layer::Preload]);
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
        cgroup_join: vec![],
        uid: 2_100_000_007,
        egress_ports: &[],
        existing: &|_| true,
        // A fault only where the build honours one (the plan refuses it otherwise).
        fault: crate::fault::HOOKS.then_some(Fault::Landlock),
        node_hardening: true,
        omit: &[],
    };
    let p = build(inputs(&public_job)).expect("a plan");
    assert_eq!(p.seccomp, public);
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
            "/skill/tools/t.js"
        ]
    );
    assert!(p.env.is_empty(), "the tool's environment is empty");
    assert_eq!(p.cwd, PathBuf::from("/skill"));
}

/// What `Engine::without_node_hardening` leaves of Node's argv (test only): the binary,
/// its heap ceiling and the entry.
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
                "/skill/tools/t.js"
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

#[test]
fn only_node_and_loader_execute() {
    let p = plan(24, true);
    assert_eq!(
        p.landlock.exec_files,
        vec![
            PathBuf::from("/opt/n/bin/node"),
            PathBuf::from("/lib64/ld-linux-x86-64.so.2")
        ]
    );
    assert_eq!(p.landlock.write_files, vec![PathBuf::from("/dev/null")]);
    assert!(p.landlock.connect_tcp.is_empty());
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
    let preload = format!("'use strict'\njobMemBytes = {};\n", 128 * MIB);
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
    assert!(p.landlock.write_files.is_empty());
}

#[test]
fn heap_ceiling_is_below_the_memory_limit() {
    assert_eq!(heap_mib(16 * MIB), 8);
    assert_eq!(heap_mib(128 * MIB), 64);
    assert_eq!(heap_mib(256 * MIB), 128);
    for mem in [16 * MIB, 100 * MIB, 256 * MIB] {
        assert!(heap_mib(mem) * MIB < mem);
    }
    assert_eq!(plan(24, true).uid, 2_100_000_007);
}

#[test]
fn deny_has_no_network_files_and_no_ports() {
    let p = plan(24, true);
    assert!(!p.join_netns);
    assert!(p.etc_files.is_empty());
    assert!(p.landlock.connect_tcp.is_empty());
    assert!(!p
        .landlock
        .read_files
        .contains(&PathBuf::from("/etc/resolv.conf")));
}

#[test]
fn egress_joins_the_runners_namespace_with_its_resolver() {
    for net in [Net::OpenvibeOnly, Net::Public] {
        let mut j = job(134_217_728);
        j.net = net;
        let p = plan_for(&j, 24, true);
        assert!(p.join_netns);
        assert_eq!(p.net, net);
        assert_eq!(p.landlock.connect_tcp, vec![53, 80, 443]);
        let names: Vec<&str> = p.etc_files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, vec!["resolv.conf", "hosts"]);
        let resolv = String::from_utf8_lossy(&p.etc_files[0].bytes).into_owned();
        assert!(resolv.starts_with("nameserver 127.0.0.1\n"), "{resolv}");
        assert!(!resolv.contains("search"), "no search domains: {resolv}");
        for f in ["/etc/resolv.conf", "/etc/hosts"] {
            assert!(p.landlock.read_files.contains(&PathBuf::from(f)));
        }
        assert_eq!(
            p.root_bytes,
            ROOT_TMPFS_SLACK
                + 1
                + p.preload.bytes.len() as u64
                + (RESOLV_CONF.len() + HOSTS.len()) as u64
        );
    }
}
