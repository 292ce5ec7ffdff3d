//! Test hooks: a sandbox step made to fail on purpose, a layer treated as absent on this
//! host (tests of failing closed), and layers left out of a job (the layer matrix,
//! `integration/layers.rs`). All are typed, so a typo in the configuration is refused when
//! it is read instead of silently testing nothing.
//!
//! Only a build with the cargo feature `test-hooks` honours them; a release build (the
//! packaged daemon) refuses a configuration that sets any of them ([`hooks_problem`]), and
//! its engine refuses to start with them set in code.

use serde::{Deserialize, Serialize};

/// A step of the init stage made to fail (`runner.fault_inject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Joining the network namespace the runner serves (a job with egress).
    Netns,
    /// Joining the job's cgroups.
    Cgroup,
    /// Unsharing the namespaces.
    Namespaces,
    Mounts,
    Capabilities,
    Landlock,
    /// Installing the exec gate and handing its listener to the runner.
    ExecGate,
    Seccomp,
}

impl Fault {
    pub const ALL: [Fault; 8] = [
        Fault::Netns,
        Fault::Cgroup,
        Fault::Namespaces,
        Fault::Mounts,
        Fault::Capabilities,
        Fault::Landlock,
        Fault::ExecGate,
        Fault::Seccomp,
    ];

    /// Its name in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Netns => "netns",
            Fault::Cgroup => "cgroup",
            Fault::Namespaces => "namespaces",
            Fault::Mounts => "mounts",
            Fault::Capabilities => "capabilities",
            Fault::Landlock => "landlock",
            Fault::ExecGate => "exec_gate",
            Fault::Seccomp => "seccomp",
        }
    }
}

/// A layer treated as absent on this host (`runner.pretend_missing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissingLayer {
    Landlock,
    Seccomp,
    /// Seccomp user notification, which the exec gate needs.
    ExecGate,
    Namespaces,
    Cgroups,
}

/// A layer of the sandbox that a job can be run without (`runner.omit_layers`, test-only):
/// the layer matrix shows what each layer holds by leaving it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// Node's permission model and its grants, and `--disallow-code-generation-from-strings`.
    NodePermission,
    /// The hardening preload (`--require=/runtime/harden.cjs`).
    Preload,
    /// The job's own root: the bind mounts, the job's `/proc`, `pivot_root` and the
    /// read-only remount. The job then sees the host's tree.
    Root,
    /// The mount namespace (implies [`Layer::Root`]: nothing is ever mounted in the host's).
    MountNamespace,
    PidNamespace,
    /// The new, empty network namespace of a `deny` job: the job is in the host's.
    NetNamespace,
    /// Dropping every capability and the change to the job's own uid, gid and groups: the
    /// job runs as root.
    Privileges,
    Landlock,
    ExecGate,
    Seccomp,
    /// The memory cgroup's limit (raised to `OMITTED_MEM_BYTES` of the plan, a safety net for
    /// the test host far above every bomb's own bound).
    MemoryLimit,
    /// The pids cgroup's limit (raised to `OMITTED_PIDS_MAX` of the plan).
    PidsLimit,
}

impl Layer {
    pub const ALL: [Layer; 12] = [
        Layer::NodePermission,
        Layer::Preload,
        Layer::Root,
        Layer::MountNamespace,
        Layer::PidNamespace,
        Layer::NetNamespace,
        Layer::Privileges,
        Layer::Landlock,
        Layer::ExecGate,
        Layer::Seccomp,
        Layer::MemoryLimit,
        Layer::PidsLimit,
    ];

    /// Its name in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::NodePermission => "node_permission",
            Layer::Preload => "preload",
            Layer::Root => "root",
            Layer::MountNamespace => "mount_namespace",
            Layer::PidNamespace => "pid_namespace",
            Layer::NetNamespace => "net_namespace",
            Layer::Privileges => "privileges",
            Layer::Landlock => "landlock",
            Layer::ExecGate => "exec_gate",
            Layer::Seccomp => "seccomp",
            Layer::MemoryLimit => "memory_limit",
            Layer::PidsLimit => "pids_limit",
        }
    }
}

/// Whether this build honours the test hooks (the cargo feature `test-hooks`).
pub const HOOKS: bool = cfg!(feature = "test-hooks");

/// Why a configuration that sets a test hook cannot be used by this build, with what to do;
/// `None` when none is set or the build honours them.
pub fn hooks_problem(
    fault: Option<Fault>,
    missing: &[MissingLayer],
    omit: &[Layer],
    warm_every_job: bool,
    hand_over_pause_ms: u32,
) -> Option<String> {
    if HOOKS {
        return None;
    }
    let set: Vec<&str> = [
        ("runner.fault_inject", fault.is_some()),
        ("runner.pretend_missing", !missing.is_empty()),
        ("runner.omit_layers", !omit.is_empty()),
        ("runner.warm_every_job", warm_every_job),
        ("runner.hand_over_pause_ms", hand_over_pause_ms > 0),
    ]
    .into_iter()
    .filter_map(|(key, on)| on.then_some(key))
    .collect();
    if set.is_empty() {
        return None;
    }
    Some(format!(
        "{} {} a test hook that this build does not honour (a release build never does): remove {} from the configuration, or run the tests with a build made with `--features test-hooks`",
        set.join(", "),
        if set.len() == 1 { "is" } else { "are" },
        if set.len() == 1 { "it" } else { "them" },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layer_reads_back_by_its_name_and_a_typo_is_refused() {
        #[derive(Deserialize)]
        struct Omit {
            omit_layers: Vec<Layer>,
        }
        for l in Layer::ALL {
            let r: Omit = toml::from_str(&format!("omit_layers = [\"{}\"]", l.as_str()))
                .expect("a layer by its name");
            assert_eq!(r.omit_layers, vec![l]);
        }
        let e = toml::from_str::<Omit>("omit_layers = [\"landlok\"]")
            .err()
            .expect("a typo in omit_layers is an error");
        assert!(e.to_string().contains("landlok"), "{e}");
    }

    #[test]
    fn hooks_are_refused_exactly_when_the_build_lacks_the_feature() {
        assert_eq!(hooks_problem(None, &[], &[], false, 0), None);
        let p = hooks_problem(Some(Fault::Seccomp), &[], &[Layer::Landlock], true, 0);
        if HOOKS {
            assert_eq!(p, None);
        } else {
            let p = p.expect("refused without the feature");
            assert!(
                p.contains("runner.fault_inject, runner.omit_layers, runner.warm_every_job are a test hook")
                    && p.contains("--features test-hooks"),
                "{p}"
            );
            let p = hooks_problem(None, &[MissingLayer::Cgroups], &[], false, 0).expect("refused");
            assert!(
                p.starts_with("runner.pretend_missing is a test hook"),
                "{p}"
            );
        }
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Runner {
        #[serde(default)]
        fault_inject: Option<Fault>,
        #[serde(default)]
        pretend_missing: Vec<MissingLayer>,
    }

    #[test]
    fn every_fault_reads_back_by_its_name() {
        for f in Fault::ALL {
            let r: Runner = toml::from_str(&format!("fault_inject = \"{}\"", f.as_str()))
                .expect("a fault by its name");
            assert_eq!(r.fault_inject, Some(f));
        }
    }

    #[test]
    fn a_typo_is_refused_not_ignored() {
        let e = toml::from_str::<Runner>("fault_inject = \"seccom\"")
            .err()
            .expect("a typo in fault_inject is an error");
        assert!(e.to_string().contains("seccom"), "{e}");
        assert!(toml::from_str::<Runner>("pretend_missing = [\"landlok\"]").is_err());
        let r: Runner = toml::from_str("pretend_missing = [\"landlock\", \"cgroups\"]")
            .expect("layers by name");
        assert_eq!(
            r.pretend_missing,
            vec![MissingLayer::Landlock, MissingLayer::Cgroups]
        );
    }
}
