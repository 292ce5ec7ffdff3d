//! What can go wrong with cgroups, each saying what was wrong and what to do (`fix`), and
//! the hint an I/O error on a cgroup file carries.

use super::*;

/// Everything that can go wrong, each saying what was wrong and what to do.
#[derive(thiserror::Error, Debug)]
pub enum CgroupError {
    #[error("cannot read {path}: {err}; the runner needs /proc mounted to find its cgroups")]
    HostFile { path: PathBuf, err: io::Error },
    #[error(
        "no cgroup filesystem is mounted (no cgroup or cgroup2 entry in /proc/self/mountinfo); \
         mount cgroup2 at /sys/fs/cgroup (`mount -t cgroup2 cgroup2 /sys/fs/cgroup`)"
    )]
    NoCgroupFs,
    #[error("the {controller} controller is not available: {detail}; {fix}")]
    MissingController {
        controller: &'static str,
        detail: String,
        fix: String,
    },
    #[error("cannot place the runner's cgroups: {detail}; {fix}")]
    Placement { detail: String, fix: String },
    #[error(
        "invalid job cgroup name {name:?}: use 1 to 64 characters of [A-Za-z0-9_.-], \
         not `.` or `..`"
    )]
    InvalidName { name: String },
    #[error(
        "{path} is missing (this kernel does not account swap to cgroups) and the host swaps: \
         a job could use swap beyond mem_bytes, which the contract forbids, so none runs; \
         turn on swap accounting (boot without swapaccount=0 or cgroup.memory=noswap; \
         before Linux 5.8, with swapaccount=1 where the kernel does not turn it on) or turn \
         swap off (swapoff -a)"
    )]
    NoSwapLimit { path: PathBuf },
    #[error("invalid cgroup limits: {detail}")]
    InvalidLimits { detail: String },
    #[error(
        "invalid pid {pid}: only a positive pid of a process the runner started may join a job"
    )]
    InvalidPid { pid: i32 },
    #[error(
        "job cgroup {path} already exists: a name is used once; remove the old job \
         (CgroupHost::leftovers / open_job) or pick another name"
    )]
    JobExists { path: PathBuf },
    #[error("no job cgroup named {name:?} under the runner's parent cgroups {parents:?}")]
    NoSuchJob { name: String, parents: Vec<PathBuf> },
    #[error("cannot {action} {path}: {err}; {hint}")]
    Io {
        action: &'static str,
        path: PathBuf,
        err: io::Error,
        hint: &'static str,
    },
    #[error(
        "processes {pids:?} were still in job cgroup {path} {waited_ms} ms after SIGKILL; \
         they may be stuck in the kernel (check /proc/<pid>/stack); the runner keeps killing \
         them and removes the cgroup once they are gone"
    )]
    KillTimeout {
        path: PathBuf,
        pids: Vec<i32>,
        waited_ms: u64,
    },
    #[error(
        "job cgroup {path} was still busy after {waited_ms} ms of rmdir retries: {err}; \
         something still holds it (a process or a nested cgroup): inspect and remove it by hand"
    )]
    RemoveBusy {
        path: PathBuf,
        err: io::Error,
        waited_ms: u64,
    },
    #[error(
        "the runner's thread that was to {action} job cgroup {name} failed: {detail}; the \
         cgroup may be left behind: the next runner start removes it"
    )]
    Thread {
        action: &'static str,
        name: String,
        detail: String,
    },
}

impl CgroupError {
    /// What to change for this failure, for `doctor`'s fix line.
    pub fn fix(&self) -> String {
        match self {
            CgroupError::HostFile { .. } => {
                "mount /proc (the runner reads /proc/self/mountinfo and /proc/self/cgroup)".into()
            }
            CgroupError::NoCgroupFs => {
                "mount cgroup2 at /sys/fs/cgroup (`mount -t cgroup2 cgroup2 /sys/fs/cgroup`)".into()
            }
            CgroupError::MissingController { fix, .. } | CgroupError::Placement { fix, .. } => {
                fix.clone()
            }
            CgroupError::Io { hint, .. } => (*hint).to_owned(),
            CgroupError::NoSwapLimit { .. } => {
                "turn on swap accounting (boot without swapaccount=0 or cgroup.memory=noswap; \
                 before Linux 5.8, with swapaccount=1 where the kernel does not turn it on) or \
                 turn swap off (swapoff -a)"
                    .into()
            }
            CgroupError::KillTimeout { .. } => {
                "if the cgroup named above is still there a minute later, inspect its processes \
                 and remove it by hand"
                    .into()
            }
            CgroupError::RemoveBusy { .. } => {
                "inspect the cgroup named above and remove it by hand".into()
            }
            CgroupError::InvalidName { .. }
            | CgroupError::InvalidLimits { .. }
            | CgroupError::InvalidPid { .. }
            | CgroupError::JobExists { .. }
            | CgroupError::NoSuchJob { .. }
            | CgroupError::Thread { .. } => {
                "this is a bug in the runner's use of cgroups: report it with the message".into()
            }
        }
    }
}

pub(super) fn io_error(action: &'static str, path: &Path, err: io::Error) -> CgroupError {
    let hint = match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "the runner needs write access to this cgroup: run it as root, or have the host \
             delegate the cgroup to it (systemd Delegate=yes)"
        }
        Some(libc::EROFS) => {
            "the cgroup filesystem is mounted read-only (common in containers): mount it \
             read-write or run the runner on the host"
        }
        Some(libc::ENOENT) => {
            "it does not exist: the controller is not enabled for this cgroup, or the cgroup \
             (or its parent) is gone"
        }
        Some(libc::EBUSY) => {
            "cgroup v2 forbids enabling controllers in a cgroup that holds processes of its \
             own: move them out, or configure an explicit parent cgroup"
        }
        Some(libc::ESRCH) => "the process has already exited",
        Some(libc::ENOSPC) | Some(libc::EAGAIN) => {
            "a cgroup limit refused it (cgroup.max.descendants, cgroup.max.depth or the \
             pids cap): raise it on the host"
        }
        Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => {
            "the kernel refused the value for this file: check the controller is enabled \
             here (`openvibe-skill-runner doctor`)"
        }
        _ => "check the host's cgroup setup with `openvibe-skill-runner doctor`",
    };
    CgroupError::Io {
        action,
        path: path.to_path_buf(),
        err,
        hint,
    }
}
