//! Applying a plan: one file per layer, plus the ordered init stage.

pub mod cgroup;
pub mod exec_gate;
pub mod init;
pub mod init_exe;
pub mod landlock;
pub mod netns;
pub mod seccomp;
pub mod uids;

use crate::fault::MissingLayer;
pub use crate::plan::TimeNamespace;
use std::path::{Path, PathBuf};

/// What the host gives, layer by layer (cgroups and Node are checked by their modules).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Layers {
    pub root: bool,
    pub namespaces: Vec<(String, bool)>,
    pub landlock_abi: i32,
    /// How jobs get a time namespace, if they do: the kernel has them (`/proc/self/ns/time`,
    /// Linux 5.6 and CONFIG_TIME_NS) and either the runner holds CAP_SYS_TIME, which
    /// setting a namespace's clocks takes, or (without it, as under systemd's
    /// `ProtectClock=`, which the shipped unit sets) a user namespace can be made to own
    /// one, tried once here. A job's monotonic and boot clocks then start near zero
    /// instead of counting from the host's boot. Not a boundary (SPEC does not list it),
    /// so a host without it still runs jobs.
    pub time_namespace: TimeNamespace,
    pub seccomp: bool,
    /// Seccomp user notification with CONTINUE, which the exec gate needs.
    pub exec_gate: bool,
    /// Why the exec gate cannot work here, and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec_gate_problem: Option<String>,
    pub kernel: String,
}

/// What to change on a host that lacks a layer, written once: `doctor` gives it beside each
/// failed check, and [`Layers::first_problem`] (why no job runs) ends with it.
pub mod fixes {
    pub const ROOT: &str = "run the runner as root: it creates namespaces, mounts and cgroups for each job (each job itself runs as an unprivileged uid)";
    pub const LANDLOCK: &str = "boot a kernel with CONFIG_SECURITY_LANDLOCK=y and landlock in lsm=";
    pub const SECCOMP: &str = "the kernel needs CONFIG_SECCOMP_FILTER=y";
    pub const EXEC_GATE: &str = "boot Linux 5.5 or later with CONFIG_SECCOMP_FILTER=y (seccomp user notification); no job runs without the exec gate";

    /// For a namespace (`mnt`, `pid`, …) the kernel does not have.
    pub fn namespace(ns: &str) -> String {
        format!("enable CONFIG_{}_NS in the kernel", ns.to_uppercase())
    }
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
            time_namespace: time_namespace_support(),
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
            return Some(format!("the runner is not root; {}", fixes::ROOT));
        }
        for (ns, ok) in &self.namespaces {
            if !ok {
                return Some(format!(
                    "the kernel has no {ns} namespace (/proc/self/ns/{ns}); {}",
                    fixes::namespace(ns)
                ));
            }
        }
        if self.landlock_abi < 1 {
            return Some(format!("landlock is unavailable: {}", fixes::LANDLOCK));
        }
        if !self.seccomp {
            return Some(format!(
                "seccomp filters are unavailable: {}",
                fixes::SECCOMP
            ));
        }
        if !self.exec_gate {
            return Some(match &self.exec_gate_problem {
                Some(problem) => format!("the exec gate cannot work here: {problem}"),
                None => format!(
                    "the exec gate cannot work here: seccomp user notification is unavailable; {}",
                    fixes::EXEC_GATE
                ),
            });
        }
        None
    }
}

/// How this runner can give a job a time namespace ([`Layers::time_namespace`]).
fn time_namespace_support() -> TimeNamespace {
    if !Path::new("/proc/self/ns/time").exists() {
        return TimeNamespace::None;
    }
    let has = |cap| caps::has_cap(None, caps::CapSet::Effective, cap).unwrap_or(false);
    if has(caps::Capability::CAP_SYS_TIME) {
        TimeNamespace::Own
    } else if has(caps::Capability::CAP_SYS_ADMIN)
        && *USER_NAMESPACE_SETS_CLOCKS.get_or_init(user_namespace_sets_clocks)
    {
        TimeNamespace::InUserNamespace
    } else {
        TimeNamespace::None
    }
}

/// [`user_namespace_sets_clocks`], tried once per process: `/v1/info` probes the layers at
/// each request, and a fork for each would cost the daemon for nothing.
static USER_NAMESPACE_SETS_CLOCKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Whether a child of this process can make a user namespace and, owned by it, a time
/// namespace whose clocks it may set: what the init stage's helper does for each job
/// under [`TimeNamespace::InUserNamespace`], tried once (a kernel may refuse user
/// namespaces: `user.max_user_namespaces`, a container's seccomp profile, an LSM).
fn user_namespace_sets_clocks() -> bool {
    const OFFSETS: &[u8] = b"/proc/self/timens_offsets\0";
    const ZERO: &[u8] = b"monotonic 0 0\n";
    // SAFETY: the child calls only async-signal-safe system calls on memory prepared
    // before the fork, then `_exit`; this process may have other threads.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            // SAFETY: raw system calls on constant buffers; `_exit` ends the child at once.
            unsafe {
                let code = if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWTIME) != 0 {
                    1
                } else {
                    let fd = libc::open(OFFSETS.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 {
                        2
                    } else if libc::write(fd, ZERO.as_ptr().cast(), ZERO.len())
                        != ZERO.len() as isize
                    {
                        3
                    } else {
                        0
                    }
                };
                libc::_exit(code)
            }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => loop {
            match nix::sys::wait::waitpid(child, None) {
                Err(nix::errno::Errno::EINTR) => continue,
                Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => return true,
                _ => return false,
            }
        },
        Err(_) => false,
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

/// A random number: from the kernel's `getrandom`, else (it never fails once the kernel's
/// pool is ready, long before any job) from std's randomly keyed hasher. For what must not
/// tell one job about others (a job's uid) or must differ between runners (warm sandboxes'
/// names); nothing secret rests on it.
pub fn random_u32() -> u32 {
    let mut bytes = [0u8; 4];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into the buffer it is given, which
    // lives across the call.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n == 4 {
        return u32::from_ne_bytes(bytes);
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() as u32
}

#[cfg(test)]
mod tests;
