//! Tests of failing closed: a sandbox step made to fail on purpose, a layer treated as
//! absent on this host. Both are typed, so a typo in the configuration is refused when it
//! is read instead of silently testing nothing; both can only make jobs fail, never run
//! them with less.

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

#[cfg(test)]
mod tests {
    use super::*;

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
