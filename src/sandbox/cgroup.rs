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
//!      `openvibe-skill-runner-<pid>.scope` (a random suffix when that name is taken)
//!      with `Delegate=yes` holding only its own process (named as the request's sender,
//!      pid 0), as the container runtimes' systemd driver does, then as in 1. Nothing
//!      else moves; systemd removes the scope when the runner is gone.
//!   3. without systemd: a cgroup of the runner's own below the root,
//!      `/sys/fs/cgroup/openvibe-skill-runner`, the runner moved (alone) into its leaf
//!      `supervisor-<pid>` (a runner in the root cgroup stays there), jobs in `jobs/`. The
//!      root must enable memory and pids for its children; with no systemd to do it, the
//!      runner adds them (never removes). Empty leaves of runners gone are removed; a
//!      runner whose leaf such a cleanup took before its move makes it again.
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
//! stranger is never hit), thaws, and repeats until the job is empty, for at most
//! `KILL_TIMEOUT` (5 s). Removing a job whose processes outlast that bound hands the cgroup
//! to a thread that keeps killing and removes it once it is empty, so a slow kill leaves no
//! empty job cgroup behind. These calls sleep briefly: from async code, call them in a
//! blocking task.

mod common;
pub(crate) use common::unescape_path;
mod detect;
mod error;
mod job;
mod mark;
mod systemd;
mod v1;
mod v2;

pub use common::{parse_mountinfo, CgroupMount};
pub use detect::version_for;
use error::io_error;
pub use error::CgroupError;
pub use job::JobCgroup;
pub use mark::HandOverMark;

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

/// Longest job cgroup name: a `job_id` (up to 64 characters) and the `.<pid>.<seq>` the
/// engine adds to make it unique (up to 32 more) fit, well under the 255 bytes a name of
/// the cgroup filesystem may have. At 64, the bound of the id alone, a job with a 64
/// character id could never get a cgroup and ended `internal`.
pub const MAX_NAME_LEN: usize = 128;
/// How long `kill_all` keeps killing before it reports the survivors. A SIGKILLed process
/// dies only once the scheduler runs it again to take the signal (and it has freed its
/// memory): a job spinning on both cores of a loaded 2-core machine took longer than a
/// second, which the old bound of 1 s turned into an `internal` end of a job that was in
/// fact killed. Five times that leaves room for an overloaded host, and a caller that waits
/// on a kill still gets an answer within seconds.
const KILL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a job cgroup whose processes outlasted `KILL_TIMEOUT` at its removal is still
/// killed, in the background, and removed once empty; past that it is logged as left
/// behind (the next runner's start removes leftovers).
const LATE_REMOVAL_TIMEOUT: Duration = Duration::from_secs(60);
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
    /// Peak memory (v1 `memory.max_usage_in_bytes`, v2 `memory.peak` else `memory.current`,
    /// which the supervisor raises to what its [`PeakSampler`] saw).
    pub mem_peak_bytes: u64,
    /// The job's own memory cap was reached: on v1 a failure in `memory.failcnt` or
    /// `memory.memsw.failcnt`, or the peak at the limit (Linux 6.18's v1 counted no
    /// failure for a job its limit's OOM killer ended); on v2 `memory.events` max or oom,
    /// or the peak at `memory.max`.
    pub memory_limit_hit: bool,
    /// The kernel's OOM killer killed a process of the job (v1 `oom_kill` in
    /// `memory.oom_control`, v2 `memory.events` oom_kill or oom_group_kill > 0): for its
    /// cap, or, without [`Self::memory_limit_hit`], because the host ran out.
    pub oom_killed: bool,
    /// A fork was refused by the pids cap (`pids.events` max > 0).
    pub pids_limit_hit: bool,
}

impl CgroupStats {
    /// Whether any limit of the cgroup was reached (memory, the OOM killer, pids): the
    /// flags count over the cgroup's life.
    pub fn limit_reached(&self) -> bool {
        self.memory_limit_hit || self.oom_killed || self.pids_limit_hit
    }
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
    /// Whether the host swaps: `/proc/swaps` lists a device or file (a kernel built without
    /// swap has no such file).
    fn swap_in_use(&self) -> io::Result<bool> {
        match fs::read_to_string(SWAPS) {
            Ok(text) => Ok(swaps_listed(&text)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

const SWAPS: &str = "/proc/swaps";

/// Whether `/proc/swaps`'s text lists anything below its header line.
pub(crate) fn swaps_listed(text: &str) -> bool {
    text.lines().skip(1).any(|line| !line.trim().is_empty())
}

/// A job's swap limit file (`swap_file`) is missing: this kernel does not account swap to
/// cgroups. That is fine while the host uses no swap; with swap on, a job could use swap
/// beyond `mem_bytes` (SPEC.md: no swap), so the job is refused.
pub(crate) fn without_swap_limit(kernel: &dyn Kernel, swap_file: &Path) -> Result<(), CgroupError> {
    match kernel.swap_in_use() {
        Ok(false) => Ok(()),
        Ok(true) => Err(CgroupError::NoSwapLimit {
            path: swap_file.to_path_buf(),
        }),
        Err(err) => Err(CgroupError::HostFile {
            path: PathBuf::from(SWAPS),
            err,
        }),
    }
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
    /// The file that holds a job's swap to its limit, as it shows in the runner's memory
    /// parent; `None` when this kernel has none there (no swap accounting).
    fn swap_limit_file(&self) -> Option<PathBuf>;
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
    /// The file whose readings make a job's memory peak where the kernel keeps none
    /// (v2 before Linux 5.19: no `memory.peak`); `None` where it does.
    fn memory_to_sample(&self, _dirs: &[PathBuf]) -> Option<PathBuf> {
        None
    }
}

/// How often a [`PeakSampler`] reads a job's memory.
pub const PEAK_SAMPLE: Duration = Duration::from_millis(10);

/// A job's memory peak kept by the runner where the kernel keeps none: its cgroup's
/// `memory.current` read every [`PEAK_SAMPLE`] while the job runs, the highest kept. The
/// cgroup's own stats are read after the job was killed, when it holds nearly nothing, so
/// without it a job killed or aborted at its memory (V8's heap ceiling) showed a peak of
/// about 0 and was judged a crash. Stops when dropped.
#[derive(Debug)]
pub struct PeakSampler {
    peak: Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl PeakSampler {
    /// Starts reading `file` (a tokio runtime's task), with a first reading right away: a
    /// job that ends before the task first runs has a peak all the same.
    pub fn start(file: PathBuf) -> PeakSampler {
        let first = read_u64(&file).unwrap_or(0);
        let peak = Arc::new(std::sync::atomic::AtomicU64::new(first));
        let seen = peak.clone();
        let task = tokio::spawn(async move {
            let mut every = tokio::time::interval(PEAK_SAMPLE);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                if let Some(now) = read_u64(&file) {
                    seen.fetch_max(now, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
        PeakSampler { peak, task }
    }

    /// The highest reading so far.
    pub fn peak(&self) -> u64 {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for PeakSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether this process may call `clone3`, with which a v2 job's pid 1 is made inside its
/// cgroup: `None` when it may; the answer when a seccomp profile around the runner (a
/// container's) refuses the call, `ENOSYS` as Docker's default one does, or `EPERM`. The
/// init stage then moves pid 1 in instead (`sandbox::init`). Asked with no arguments,
/// which the kernel itself refuses (`EINVAL`) before it reads anything or makes a process.
pub fn clone3_refused() -> Option<nix::errno::Errno> {
    // SAFETY: a null pointer with size 0: the kernel answers EINVAL (a size below its
    // smallest `clone_args`) before touching memory; a filter answers before the kernel.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            std::ptr::null_mut::<libc::clone_args>(),
            0usize,
        )
    };
    match nix::errno::Errno::last() {
        refused @ (nix::errno::Errno::ENOSYS | nix::errno::Errno::EPERM) if rc < 0 => Some(refused),
        _ => None,
    }
}

/// How a v2 job's pid 1 comes into its cgroup here, as `doctor` says it, from
/// [`clone3_refused`]'s answer.
pub fn v2_join(refused: Option<nix::errno::Errno>) -> String {
    match refused {
        None => "pid 1 made inside the job's cgroup (clone3 with CLONE_INTO_CGROUP)".into(),
        Some(e) => format!(
            "pid 1 moves itself into the job's cgroup through cgroup.procs, a few ms a job: \
             clone3 is refused here ({e}), as a container's seccomp profile does; allow \
             clone3 in it to skip that wait"
        ),
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

    /// Why no job can run here for swap, if so: the kernel does not account swap to
    /// cgroups and the host swaps. The engine does not start on such a host and `doctor`
    /// names it; each job's cgroup refuses too, for swap turned on after the start.
    /// Detection itself does not refuse: the start's clean-up of an earlier run's
    /// cgroups needs it whatever the swap.
    pub fn swap_problem(&self) -> Option<CgroupError> {
        if self.backend.swap_limit_file().is_some() {
            return None;
        }
        let file = match self.backend.version() {
            CgroupVersion::V1 => "memory.memsw.limit_in_bytes",
            CgroupVersion::V2 => "memory.swap.max",
        };
        let parent = self.backend.parents().first().cloned().unwrap_or_default();
        without_swap_limit(self.kernel.as_ref(), &parent.join(file)).err()
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

// ---- reading interface files ----------------------------------------------------------

/// The pids of a `cgroup.procs` text; lines that are not a positive number are skipped.
fn parse_pids(text: &str) -> Vec<i32> {
    text.lines()
        .filter_map(|line| line.trim().parse::<i32>().ok())
        .filter(|pid| *pid > 0)
        .collect()
}

/// How close to its limit a cgroup's peak must have come to count as the limit reached:
/// the kernel charges a cgroup in batches of up to 64 pages.
const AT_THE_LIMIT: u64 = 256 * 1024;

/// Whether a job reached its own memory limit, in the same terms on v1 and v2: the
/// `failures` the kernel counted against the limit (v1 `memory.failcnt` and
/// `memory.memsw.failcnt`, v2 `memory.events` max and oom), or a `peak` that came within
/// [`AT_THE_LIMIT`] of the `limit` (none for `max`, an unreadable file or no limit at all).
fn memory_limit_reached(failures: u64, peak: u64, limit: Option<u64>) -> bool {
    failures > 0
        || limit.is_some_and(|limit| peak > 0 && peak.saturating_add(AT_THE_LIMIT) >= limit)
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
