//! Applying a plan: one file per layer, plus the ordered init stage.

pub mod cgroup;
pub mod exec_gate;
pub mod init;
pub mod landlock;
pub mod netns;
pub mod seccomp;
pub mod uids;

use crate::fault::MissingLayer;
use std::path::{Path, PathBuf};

/// What the host gives, layer by layer (cgroups and Node are checked by their modules).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Layers {
    pub root: bool,
    pub namespaces: Vec<(String, bool)>,
    pub landlock_abi: i32,
    pub seccomp: bool,
    /// Seccomp user notification with CONTINUE, which the exec gate needs.
    pub exec_gate: bool,
    /// Why the exec gate cannot work here, and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec_gate_problem: Option<String>,
    pub kernel: String,
}

/// The namespaces every job gets (SPEC.md: mount, pid, net, ipc, uts, cgroup).
pub const NAMESPACES: &[&str] = &["mnt", "pid", "net", "ipc", "uts", "cgroup"];

impl Layers {
    pub fn probe() -> Layers {
        let kernel = nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default();
        let gate = exec_gate::kernel_support();
        Layers {
            root: nix::unistd::geteuid().is_root(),
            namespaces: NAMESPACES
                .iter()
                .map(|n| (n.to_string(), Path::new("/proc/self/ns").join(n).exists()))
                .collect(),
            landlock_abi: landlock::kernel_abi(),
            seccomp: seccomp_available(),
            exec_gate: gate.is_ok(),
            exec_gate_problem: gate.err(),
            kernel,
        }
    }

    /// Marks layers absent (configuration `pretend_missing`, for tests of failing closed).
    pub fn pretend_missing(&mut self, layers: &[MissingLayer]) {
        for l in layers {
            match l {
                MissingLayer::Landlock => self.landlock_abi = 0,
                MissingLayer::Seccomp => self.seccomp = false,
                MissingLayer::ExecGate => {
                    self.exec_gate = false;
                    self.exec_gate_problem = Some("seccomp user notification is unavailable (pretend_missing); boot Linux 5.5 or later with CONFIG_SECCOMP_FILTER=y".into());
                }
                MissingLayer::Namespaces => self.namespaces.iter_mut().for_each(|n| n.1 = false),
                // Detection itself is made to fail (`cgroup_parent`).
                MissingLayer::Cgroups => {}
            }
        }
    }

    /// The first layer that is missing, said so that an operator knows what to change.
    pub fn first_problem(&self) -> Option<String> {
        if !self.root {
            return Some(
                "the runner must run as root: it creates namespaces, mounts and cgroups for each job (each job itself runs as an unprivileged uid)".into(),
            );
        }
        for (ns, ok) in &self.namespaces {
            if !ok {
                return Some(format!(
                    "the kernel has no {ns} namespace (/proc/self/ns/{ns}); enable CONFIG_{}_NS",
                    ns.to_uppercase()
                ));
            }
        }
        if self.landlock_abi < 1 {
            return Some("landlock is unavailable: boot a kernel with CONFIG_SECURITY_LANDLOCK=y and landlock in lsm=".into());
        }
        if !self.seccomp {
            return Some(
                "seccomp filters are unavailable: the kernel needs CONFIG_SECCOMP_FILTER=y".into(),
            );
        }
        if !self.exec_gate {
            return Some(format!(
                "the exec gate cannot work here: {}",
                self.exec_gate_problem
                    .as_deref()
                    .unwrap_or("seccomp user notification is unavailable; boot Linux 5.5 or later")
            ));
        }
        None
    }
}

/// Seccomp filter mode is there when the kernel answers `PR_GET_SECCOMP` and lists
/// `Seccomp_filters` in /proc/self/status.
fn seccomp_available() -> bool {
    // SAFETY: PR_GET_SECCOMP only returns the calling thread's mode.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    mode >= 0
        && std::fs::read_to_string("/proc/self/status")
            .map(|s| s.contains("Seccomp_filters:"))
            .unwrap_or(false)
}

/// The cgroup parent detection is given: the configured one (`runner.cgroup_parent`), or,
/// when the cgroups are pretended missing (`pretend_missing`, a test hook), a parent the
/// real detection refuses before it creates anything (not an absolute path), so the engine
/// and `doctor` meet a real detection error, never a message made up for the test.
pub fn cgroup_parent(config: &crate::config::Config) -> Option<PathBuf> {
    if config
        .runner
        .pretend_missing
        .contains(&MissingLayer::Cgroups)
    {
        return Some(PathBuf::from("pretend_missing/cgroups"));
    }
    config.runner.cgroup_parent.clone()
}
