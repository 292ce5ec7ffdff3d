//! The cgroup layer: one cgroup per job that caps memory (with no swap beyond the cap) and
//! the number of processes, and accounts CPU time, on cgroup v2 or, where that is what the
//! host has, cgroup v1.
//!
//! # Detection
//! [`CgroupHost::detect`] reads `/proc/self/mountinfo` and `/proc/self/cgroup` once and picks
//! one backend (youki's `CgroupManager` habit): v1 when the memory or pids controller is
//! mounted as a v1 hierarchy (legacy and hybrid hosts; a hybrid host's controller-less
//! `cgroup2` mount is then ignored), otherwise v2 when a `cgroup2` filesystem is mounted. The
//! rest of the code never asks which. A missing memory or pids controller is an error that
//! names the controller and the host change that provides it: there is no weaker sandbox.
//! CPU accounting (v1 `cpuacct`) and the v1 freezer are used when mounted and reported by
//! [`CgroupHost::describe`] when not.
//!
//! # Placement: where the runner's cgroups go
//! The runner writes only to cgroups it created, moves only processes it started (and, in
//! the v2 cases below, itself, alone), and puts every job in `<parent>/<job name>`:
//! - An explicit parent (configuration) overrides detection. It is either a path under a
//!   cgroup mount (`/sys/fs/cgroup/openvibe`) or a cgroup path as `/proc/self/cgroup` writes
//!   it (`/openvibe`), applied in every hierarchy the runner uses. The operator hands that
//!   cgroup to the runner: it is created when missing, and on v2 the runner enables
//!   `+memory +pids` (and `+cpu` where offered) in its `cgroup.subtree_control`.
//! - v1: in each hierarchy, `<the runner's own cgroup>/openvibe-skill-runner`, e.g.
//!   `/sys/fs/cgroup/memory/<own>/openvibe-skill-runner` and
//!   `/sys/fs/cgroup/pids/openvibe-skill-runner`.
//! - v2, no parent configured: in this order (`v2::choose`),
//!   1. a cgroup delegated to the runner: systemd marked it delegated (`Delegate=yes`, the
//!      packaged unit), or, without systemd, it offers memory and pids and holds only the
//!      runner (a container's cgroup). v2 forbids controllers below a cgroup that holds
//!      processes, so the runner moves its own process, and nothing else, into
//!      `<own>/supervisor`, enables the controllers in `<own>` and `<own>/jobs`, and puts
//!      jobs in `<own>/jobs/<name>`. A runner already in `…/supervisor` (a second
//!      detection) treats the cgroup above as its own.
//!   2. with systemd as init (a login shell, `sudo`, a service without `Delegate=yes`): the
//!      runner asks systemd over D-Bus for a transient scope
//!      `openvibe-skill-runner-<pid>.scope` with `Delegate=yes` holding only its own
//!      process, as the container runtimes' systemd driver does, then as in 1. Nothing
//!      else moves; systemd removes the scope when the runner is gone.
//!   3. without systemd: a cgroup of the runner's own below the root,
//!      `/sys/fs/cgroup/openvibe-skill-runner`, the runner moved (alone) into its leaf
//!      `supervisor-<pid>` (a runner in the root cgroup stays there), jobs in `jobs/`. The
//!      root must enable memory and pids for its children; with no systemd to do it, the
//!      runner adds them (never removes). Empty leaves of runners gone are removed.
//!
//! Every failure says which step failed and what to change (`CgroupError::fix`).
//!
//! Detection creates the parent (it is where the runner claims its cgroups); it is left in
//! place on exit. Job cgroups are created with their limits written before any process joins.
//!
//! # Killing
//! `kill_all` writes v2's `cgroup.kill` where the kernel has it; otherwise (and for anything
//! still listed after that) it freezes the job when it can, SIGKILLs each listed process
//! through a pidfd after checking the pid is still in the job (so a recycled pid of a
//! stranger is never hit), thaws, and repeats until the job is empty, for at most a second.
//! These calls sleep briefly: from async code, call them in a blocking task.

mod common;
mod detect;
mod systemd;
mod v1;
mod v2;

#[cfg(test)]
mod host_tests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::fs;
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The directory the runner creates for its job cgroups (see the module docs).
pub const PARENT_NAME: &str = "openvibe-skill-runner";
/// v2, delegated cgroup: where the runner moves its own process.
pub const SUPERVISOR_NAME: &str = "supervisor";
/// v2, the runner's own cgroup below the root: the leaf each runner moves itself into is
/// `supervisor-<pid>`.
pub const SUPERVISOR_LEAF_PREFIX: &str = "supervisor-";
/// v2, delegated cgroup: the parent of the job cgroups.
pub const JOBS_NAME: &str = "jobs";

/// Longest job cgroup name, the same bound as a `job_id`.
const MAX_NAME_LEN: usize = 64;
/// How long `kill_all` keeps killing before it reports the survivors.
const KILL_TIMEOUT: Duration = Duration::from_secs(1);
/// How long `remove` retries an `rmdir` that answers EBUSY.
const RMDIR_TIMEOUT: Duration = Duration::from_secs(1);
/// How long to wait for a freeze to take effect before killing anyway.
const FREEZE_TIMEOUT: Duration = Duration::from_millis(100);
const POLL: Duration = Duration::from_millis(5);

/// What a job's cgroup caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupLimits {
    /// Memory, page cache included; swap is not allowed beyond it.
    pub mem_bytes: u64,
    /// Processes and threads, all counted.
    pub pids_max: u64,
}

/// What a job's cgroup measured. Best effort: a file the kernel lacks reads as 0 / false.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupStats {
    /// CPU time of every process of the job (v1 `cpuacct.usage`, v2 `cpu.stat` usage_usec).
    pub cpu_ns: u64,
    /// Peak memory (v1 `memory.max_usage_in_bytes`, v2 `memory.peak` else `memory.current`).
    pub mem_peak_bytes: u64,
    /// The memory cap was reached (v1 `memory.failcnt` or `memory.memsw.failcnt` > 0 or an
    /// oom_kill in `memory.oom_control`; v2 `memory.events` max, oom or oom_kill > 0).
    pub memory_limit_hit: bool,
    /// The kernel's OOM killer killed a process of the job.
    pub oom_killed: bool,
    /// A fork was refused by the pids cap (`pids.events` max > 0).
    pub pids_limit_hit: bool,
}

/// Which cgroup interface the host gives the runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl fmt::Display for CgroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CgroupVersion::V1 => "v1",
            CgroupVersion::V2 => "v2",
        })
    }
}

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
         they may be stuck in the kernel (check /proc/<pid>/stack); the cgroup is left in place"
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
            CgroupError::KillTimeout { .. } | CgroupError::RemoveBusy { .. } => {
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

fn io_error(action: &'static str, path: &Path, err: io::Error) -> CgroupError {
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

/// The few effects on the kernel, behind a trait so the logic runs against a fake tree
/// in tests (youki's `Syscall` habit). Reads go straight to the filesystem.
pub(crate) trait Kernel: Send + Sync + fmt::Debug {
    /// `mkdir` a cgroup; the kernel fills in its interface files.
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    /// `rmdir` an empty cgroup.
    fn rmdir(&self, path: &Path) -> io::Result<()>;
    /// Write one value to an existing interface file: open(O_WRONLY) and one write.
    fn write(&self, path: &Path, value: &str) -> io::Result<()>;
    /// SIGKILL `pid` if, once pinned by a pidfd, it is still listed in one of `procs_files`.
    fn kill_listed(&self, pid: i32, procs_files: &[PathBuf]) -> io::Result<()>;
}

/// The real kernel.
#[derive(Debug)]
pub(crate) struct HostKernel;

impl Kernel for HostKernel {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        fs::DirBuilder::new().mode(0o755).create(path)
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }

    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        let mut file = fs::OpenOptions::new().write(true).open(path)?;
        file.write_all(value.as_bytes())
    }

    fn kill_listed(&self, pid: i32, procs_files: &[PathBuf]) -> io::Result<()> {
        // SAFETY: pidfd_open takes a pid and a flags word and returns a new descriptor or -1;
        // no memory is shared with the kernel.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if raw < 0 {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::ESRCH) => Ok(()),
                // Kernels before 5.3: no pidfd; the membership check then narrows the pid
                // reuse window to a few microseconds instead of closing it.
                Some(libc::ENOSYS) => {
                    if is_listed(pid, procs_files) {
                        match nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid),
                            nix::sys::signal::Signal::SIGKILL,
                        ) {
                            Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
                            Err(errno) => Err(io::Error::from(errno)),
                        }
                    } else {
                        Ok(())
                    }
                }
                _ => Err(err),
            };
        }
        let Ok(raw) = i32::try_from(raw) else {
            return Err(io::Error::other(
                "pidfd_open returned an out-of-range descriptor",
            ));
        };
        // SAFETY: `raw` is a descriptor pidfd_open just returned; nothing else owns it, and
        // OwnedFd closes it once.
        let pidfd = unsafe { OwnedFd::from_raw_fd(raw) };
        // The pidfd pins the process: if its pid is still listed in the job, it is ours.
        if !is_listed(pid, procs_files) {
            return Ok(());
        }
        // SAFETY: pidfd_send_signal with a live pidfd we own, a signal number, a null
        // siginfo (the kernel fills one in) and zero flags.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::ESRCH) {
                return Err(err);
            }
        }
        Ok(())
    }
}

fn is_listed(pid: i32, procs_files: &[PathBuf]) -> bool {
    procs_files.iter().any(|file| {
        fs::read_to_string(file)
            .map(|text| parse_pids(&text).contains(&pid))
            .unwrap_or(false)
    })
}

/// The version-specific part, chosen once at detection.
pub(crate) trait Backend: Send + Sync + fmt::Debug {
    fn version(&self) -> CgroupVersion;
    fn describe(&self) -> Vec<(String, String)>;
    /// One parent per hierarchy a job joins; the job's cgroup is `<parent>/<name>` in each.
    fn parents(&self) -> &[PathBuf];
    /// Write the limits into a job's fresh cgroups (`dirs` in the order of `parents`).
    fn write_limits(
        &self,
        kernel: &dyn Kernel,
        dirs: &[PathBuf],
        limits: &CgroupLimits,
    ) -> Result<(), CgroupError>;
    fn stats(&self, dirs: &[PathBuf]) -> CgroupStats;
    /// v2's `cgroup.kill`, when the kernel has it.
    fn kill_file(&self, dirs: &[PathBuf]) -> Option<PathBuf>;
    /// Freeze (or thaw) the job. True when the request was accepted (the caller must then
    /// thaw), false when this host cannot freeze.
    fn set_frozen(&self, kernel: &dyn Kernel, dirs: &[PathBuf], frozen: bool) -> bool;
    /// The leaf the runner moved itself into at placement, if it did.
    fn runner_leaf(&self) -> Option<v2::RunnerLeaf> {
        None
    }
}

/// The leaf this process moved itself into (v2 without systemd), left at exit by
/// [`leave_runner_leaf`].
static RUNNER_LEAF: Mutex<Option<v2::RunnerLeaf>> = Mutex::new(None);

/// Called once at the end of every command that placed cgroups (`run`, `run-job`, `doctor`,
/// `serve`), after its jobs are gone: a runner that moved itself into a `supervisor-<pid>`
/// leaf goes back to the cgroup it came from and removes the leaf, so it leaves nothing
/// behind. A runner killed before this leaves an empty leaf that the next start removes.
pub fn leave_runner_leaf() {
    let leaf = match RUNNER_LEAF.lock() {
        Ok(mut guard) => guard.take(),
        Err(poisoned) => poisoned.into_inner().take(),
    };
    if let Some(leaf) = leaf {
        if let Err(err) = v2::leave(&HostKernel, &leaf, nix::unistd::getpid().as_raw()) {
            tracing::warn!("{err}");
        }
    }
}

/// The host's cgroups as the runner uses them: detected once, cheap to clone.
#[derive(Debug, Clone)]
pub struct CgroupHost {
    backend: Arc<dyn Backend>,
    kernel: Arc<dyn Kernel>,
}

impl CgroupHost {
    /// Detect the cgroup setup of this host and claim the runner's parent cgroups (see the
    /// module docs). `parent_override` is the configured parent, if any.
    pub fn detect(parent_override: Option<&Path>) -> Result<CgroupHost, CgroupError> {
        let mountinfo = read_host_file(Path::new("/proc/self/mountinfo"))?;
        let self_cgroup = read_host_file(Path::new("/proc/self/cgroup"))?;
        let pid = nix::unistd::getpid().as_raw();
        let host_systemd = systemd::HostSystemd;
        let fs_root = Path::new("/");
        let host = detect::detect_at(
            &common::HostView {
                mountinfo: &mountinfo,
                self_cgroup: &self_cgroup,
                fs_root,
                self_pid: pid,
                parent_override,
                systemd: systemd::booted(fs_root).then_some(&host_systemd as &dyn systemd::Systemd),
            },
            Arc::new(HostKernel),
        )?;
        if let Some(leaf) = host.backend.runner_leaf() {
            match RUNNER_LEAF.lock() {
                Ok(mut guard) => *guard = Some(leaf),
                Err(poisoned) => *poisoned.into_inner() = Some(leaf),
            }
        }
        Ok(host)
    }

    pub(crate) fn from_parts(backend: Arc<dyn Backend>, kernel: Arc<dyn Kernel>) -> CgroupHost {
        CgroupHost { backend, kernel }
    }

    pub fn version(&self) -> CgroupVersion {
        self.backend.version()
    }

    /// What `doctor` shows: version, parent paths, optional features, as (name, value).
    pub fn describe(&self) -> Vec<(String, String)> {
        self.backend.describe()
    }

    /// Create the job's cgroup in every hierarchy and write its limits, before any process
    /// joins. Fails if a cgroup of that name exists.
    pub fn create_job(&self, name: &str, limits: &CgroupLimits) -> Result<JobCgroup, CgroupError> {
        validate_name(name)?;
        validate_limits(limits)?;
        let dirs: Vec<PathBuf> = self
            .backend
            .parents()
            .iter()
            .map(|p| p.join(name))
            .collect();
        if let Some(existing) = dirs.iter().find(|dir| dir.exists()) {
            return Err(CgroupError::JobExists {
                path: existing.clone(),
            });
        }
        // Holds only what this call created, so dropping it on an error below removes
        // exactly that and nothing of a concurrent job of the same name.
        let mut job = JobCgroup {
            host: self.clone(),
            name: name.to_owned(),
            dirs: Vec::with_capacity(dirs.len()),
            removed: false,
        };
        for dir in dirs {
            match self.kernel.mkdir(&dir) {
                Ok(()) => job.dirs.push(dir),
                Err(err) if err.raw_os_error() == Some(libc::EEXIST) => {
                    return Err(CgroupError::JobExists { path: dir });
                }
                Err(err) => return Err(io_error("create", &dir, err)),
            }
        }
        self.backend
            .write_limits(self.kernel.as_ref(), &job.dirs, limits)?;
        tracing::debug!(name, ?limits, dirs = ?job.dirs, "job cgroup created");
        Ok(job)
    }

    /// Reopen a job cgroup that exists under the runner's parent (a leftover of an earlier
    /// run), so it can be killed and removed.
    pub fn open_job(&self, name: &str) -> Result<JobCgroup, CgroupError> {
        validate_name(name)?;
        let all: Vec<PathBuf> = self
            .backend
            .parents()
            .iter()
            .map(|p| p.join(name))
            .collect();
        if !all.iter().any(|dir| dir.is_dir()) {
            return Err(CgroupError::NoSuchJob {
                name: name.to_owned(),
                parents: self.backend.parents().to_vec(),
            });
        }
        Ok(JobCgroup {
            host: self.clone(),
            name: name.to_owned(),
            // The missing ones count as removed: a crash may have come between two mkdirs.
            dirs: all,
            removed: false,
        })
    }

    /// Job cgroups still present under the runner's parents, every hierarchy's, sorted.
    pub fn leftovers(&self) -> Result<Vec<PathBuf>, CgroupError> {
        let mut found = Vec::new();
        for parent in self.backend.parents() {
            let entries = match fs::read_dir(parent) {
                Ok(entries) => entries,
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => return Err(io_error("list", parent, err)),
            };
            for entry in entries {
                let entry = entry.map_err(|err| io_error("list", parent, err))?;
                let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
                if is_dir {
                    found.push(entry.path());
                }
            }
        }
        found.sort();
        Ok(found)
    }
}

fn read_host_file(path: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(path).map_err(|err| CgroupError::HostFile {
        path: path.to_path_buf(),
        err,
    })
}

fn validate_name(name: &str) -> Result<(), CgroupError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(CgroupError::InvalidName {
            name: name.to_owned(),
        })
    }
}

fn validate_limits(limits: &CgroupLimits) -> Result<(), CgroupError> {
    if limits.mem_bytes == 0 {
        return Err(CgroupError::InvalidLimits {
            detail: "mem_bytes is 0; give the job some memory".to_owned(),
        });
    }
    if limits.pids_max == 0 {
        return Err(CgroupError::InvalidLimits {
            detail: "pids_max is 0; a job needs at least its own process".to_owned(),
        });
    }
    // The kernel's counters are signed 64-bit.
    if limits.mem_bytes > i64::MAX as u64 || limits.pids_max > i64::MAX as u64 {
        return Err(CgroupError::InvalidLimits {
            detail: format!("{limits:?} exceeds what the kernel accepts (2^63 - 1)"),
        });
    }
    Ok(())
}

/// One job's cgroup, in every hierarchy. Dropping it kills the job and removes the cgroups.
#[derive(Debug)]
pub struct JobCgroup {
    host: CgroupHost,
    name: String,
    dirs: Vec<PathBuf>,
    removed: bool,
}

impl JobCgroup {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The job's cgroup directory in each hierarchy.
    pub fn paths(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The files through which a single-threaded process joins this job by itself,
    /// writing `0` to each: v1's `tasks`, which for the calling thread skips the global
    /// threadgroup lock (and its RCU grace period, about 10 ms per job), or v2's
    /// `cgroup.procs`.
    pub fn self_join_files(&self) -> Vec<PathBuf> {
        let file = match self.host.version() {
            CgroupVersion::V1 => "tasks",
            CgroupVersion::V2 => "cgroup.procs",
        };
        self.dirs.iter().map(|d| d.join(file)).collect()
    }

    /// Move a process the runner started into the job, in every hierarchy.
    pub fn add_process(&self, pid: i32) -> Result<(), CgroupError> {
        if pid <= 0 {
            return Err(CgroupError::InvalidPid { pid });
        }
        let value = pid.to_string();
        for dir in &self.dirs {
            let procs = dir.join("cgroup.procs");
            self.host
                .kernel
                .write(&procs, &value)
                .map_err(|err| io_error("write a pid to", &procs, err))?;
        }
        Ok(())
    }

    /// The processes in the job (union over the hierarchies), sorted.
    pub fn pids(&self) -> Result<Vec<i32>, CgroupError> {
        let mut all = Vec::new();
        for file in self.procs_files() {
            match fs::read_to_string(&file) {
                Ok(text) => all.extend(parse_pids(&text)),
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(io_error("read", &file, err)),
            }
        }
        all.sort_unstable();
        all.dedup();
        Ok(all)
    }

    fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Kill every process of the job and wait (at most a second) until none is left.
    pub fn kill_all(&self) -> Result<(), CgroupError> {
        let kernel = self.host.kernel.as_ref();
        let backend = self.host.backend.as_ref();
        let started = Instant::now();
        let procs_files = self.procs_files();
        let mut round = 0u32;
        loop {
            let pids = self.pids()?;
            if pids.is_empty() {
                return Ok(());
            }
            let waited = started.elapsed();
            if waited >= KILL_TIMEOUT {
                return Err(CgroupError::KillTimeout {
                    path: self.dirs.first().cloned().unwrap_or_default(),
                    pids,
                    waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                });
            }
            // cgroup.kill kills the whole job at once, forks in flight included; what is
            // still listed a round later (or everything, without it) is frozen and killed
            // one by one.
            let killed_at_once = round == 0
                && backend.kill_file(&self.dirs).is_some_and(|file| {
                    kernel
                        .write(&file, "1")
                        .inspect_err(|err| {
                            tracing::debug!(file = %file.display(), %err, "cgroup.kill refused");
                        })
                        .is_ok()
                });
            if !killed_at_once {
                self.freeze_and_kill(&procs_files);
            }
            round += 1;
            thread::sleep(POLL);
        }
    }

    fn freeze_and_kill(&self, procs_files: &[PathBuf]) {
        let kernel = self.host.kernel.as_ref();
        let backend = self.host.backend.as_ref();
        let frozen = backend.set_frozen(kernel, &self.dirs, true);
        match self.pids() {
            Ok(pids) => {
                for pid in pids {
                    if let Err(err) = kernel.kill_listed(pid, procs_files) {
                        tracing::warn!(pid, %err, job = %self.name, "cannot SIGKILL a job process");
                    }
                }
            }
            Err(err) => tracing::warn!(%err, job = %self.name, "cannot list the job's processes"),
        }
        // A frozen process with a pending SIGKILL dies when thawed; thaw in every case.
        if frozen {
            backend.set_frozen(kernel, &self.dirs, false);
        }
    }

    /// What the job used and which limits it hit; best effort.
    pub fn stats(&self) -> CgroupStats {
        self.host.backend.stats(&self.dirs)
    }

    /// Kill the job's processes and remove its cgroups.
    pub fn remove(mut self) -> Result<(), CgroupError> {
        self.removed = true;
        self.destroy()
    }

    /// [`JobCgroup::remove`] on a thread where blocking belongs (it sleeps: up to a second
    /// of killing and a second of rmdir retries), never on an async worker.
    pub async fn remove_blocking(self) -> Result<(), CgroupError> {
        let name = self.name.clone();
        tokio::task::spawn_blocking(move || self.remove())
            .await
            .unwrap_or_else(|e| Err(thread_failed("remove", name, e)))
    }

    /// [`JobCgroup::kill_all`] on a thread where blocking belongs, never on an async
    /// worker.
    pub async fn kill_all_blocking(&self) -> Result<(), CgroupError> {
        let view = self.view();
        tokio::task::spawn_blocking(move || view.kill_all())
            .await
            .unwrap_or_else(|e| Err(thread_failed("kill the processes of", self.name.clone(), e)))
    }

    /// The same cgroup, for killing, without owning it: dropping the view removes nothing.
    fn view(&self) -> JobCgroup {
        JobCgroup {
            host: self.host.clone(),
            name: self.name.clone(),
            dirs: self.dirs.clone(),
            removed: true,
        }
    }

    fn destroy(&self) -> Result<(), CgroupError> {
        self.kill_all()?;
        let mut first_error = None;
        for dir in &self.dirs {
            if let Err(err) = self.rmdir_retrying(dir) {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn rmdir_retrying(&self, dir: &Path) -> Result<(), CgroupError> {
        let started = Instant::now();
        loop {
            match self.host.kernel.rmdir(dir) {
                Ok(()) => return Ok(()),
                Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(err) if err.raw_os_error() == Some(libc::EBUSY) => {
                    let waited = started.elapsed();
                    if waited >= RMDIR_TIMEOUT {
                        return Err(CgroupError::RemoveBusy {
                            path: dir.to_path_buf(),
                            err,
                            waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                        });
                    }
                    thread::sleep(POLL);
                }
                Err(err) => return Err(io_error("remove", dir, err)),
            }
        }
    }
}

fn thread_failed(action: &'static str, name: String, e: tokio::task::JoinError) -> CgroupError {
    CgroupError::Thread {
        action,
        name,
        detail: e.to_string(),
    }
}

impl Drop for JobCgroup {
    /// Kills and removes what was not removed: inside an async runtime on its blocking
    /// threads (a drop on an async worker must not sleep there), else right here.
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        self.removed = true;
        let leftover = Leftover(JobCgroup {
            host: self.host.clone(),
            name: std::mem::take(&mut self.name),
            dirs: std::mem::take(&mut self.dirs),
            removed: true,
        });
        match tokio::runtime::Handle::try_current() {
            // A closure the runtime drops unrun (it is shutting down) still drops the
            // leftover, which then removes it on that thread.
            Ok(rt) => drop(rt.spawn_blocking(move || drop(leftover))),
            Err(_) => drop(leftover),
        }
    }
}

/// A job cgroup a drop left behind, removed when this is dropped (wherever that runs).
struct Leftover(JobCgroup);

impl Drop for Leftover {
    fn drop(&mut self) {
        if let Err(err) = self.0.destroy() {
            tracing::warn!(job = %self.0.name, %err, "job cgroup not cleaned up");
        }
    }
}

// ---- reading interface files ----------------------------------------------------------

/// The pids of a `cgroup.procs` text; lines that are not a positive number are skipped.
fn parse_pids(text: &str) -> Vec<i32> {
    text.lines()
        .filter_map(|line| line.trim().parse::<i32>().ok())
        .filter(|pid| *pid > 0)
        .collect()
}

/// A single-number file (`memory.failcnt`, `cpuacct.usage`); missing or odd reads as None.
fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The value of `key` in a flat keyed file (`key value` per line: `memory.events`,
/// `pids.events`, `cpu.stat`, `memory.oom_control`).
fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        if fields.next()? == key {
            fields.next()?.parse().ok()
        } else {
            None
        }
    })
}

fn read_keyed(path: &Path, key: &str) -> Option<u64> {
    keyed_value(&fs::read_to_string(path).ok()?, key)
}

/// Space-separated names (`cgroup.controllers`, `cgroup.subtree_control`).
fn read_names(path: &Path) -> Result<Vec<String>, CgroupError> {
    let text = fs::read_to_string(path).map_err(|err| io_error("read", path, err))?;
    Ok(text.split_whitespace().map(str::to_owned).collect())
}

/// Poll `done` until it holds or `timeout` passes.
fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    loop {
        if done() {
            return true;
        }
        if started.elapsed() >= timeout {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
}
