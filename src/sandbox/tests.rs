//! Unit tests of `src/sandbox/mod.rs`: why no job runs ends with the fix `doctor` gives.

use super::*;

fn every_layer() -> Layers {
    Layers {
        root: true,
        namespaces: NAMESPACES.iter().map(|n| (n.to_string(), true)).collect(),
        landlock_abi: 6,
        time_namespace: TimeNamespace::Own,
        seccomp: true,
        exec_gate: true,
        exec_gate_problem: None,
        kernel: "6.1.0".into(),
    }
}

#[test]
fn a_host_with_every_layer_has_no_problem() {
    assert_eq!(every_layer().first_problem(), None);
}

#[test]
fn each_missing_layer_ends_with_its_one_fix() {
    let mut l = every_layer();
    l.root = false;
    let p = l.first_problem().unwrap_or_default();
    assert!(
        p.starts_with("the runner is not root") && p.ends_with(fixes::ROOT),
        "{p}"
    );

    let mut l = every_layer();
    l.namespaces[2].1 = false;
    let p = l.first_problem().unwrap_or_default();
    assert!(p.contains("no net namespace"), "{p}");
    assert!(p.ends_with(&fixes::namespace("net")), "{p}");
    assert!(p.contains("CONFIG_NET_NS"), "{p}");

    let mut l = every_layer();
    l.landlock_abi = 0;
    let p = l.first_problem().unwrap_or_default();
    assert!(
        p.starts_with("landlock is unavailable") && p.ends_with(fixes::LANDLOCK),
        "{p}"
    );

    let mut l = every_layer();
    l.seccomp = false;
    let p = l.first_problem().unwrap_or_default();
    assert!(p.ends_with(fixes::SECCOMP), "{p}");

    let mut l = every_layer();
    l.exec_gate = false;
    let p = l.first_problem().unwrap_or_default();
    assert!(
        p.starts_with("the exec gate cannot work here") && p.ends_with(fixes::EXEC_GATE),
        "{p}"
    );
    // The probe's own reason, when it has one, is what is said.
    l.exec_gate_problem = Some("the kernel is too old".into());
    assert_eq!(
        l.first_problem().as_deref(),
        Some("the exec gate cannot work here: the kernel is too old")
    );
}

#[test]
fn the_first_missing_layer_is_the_one_named() {
    let mut l = every_layer();
    l.landlock_abi = 0;
    l.seccomp = false;
    let p = l.first_problem().unwrap_or_default();
    assert!(p.contains("landlock"), "{p}");
}
