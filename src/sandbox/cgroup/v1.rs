//! cgroup v1: a hierarchy per controller (or a few co-mounted). A job has a cgroup in the
//! memory and pids hierarchies, and in cpuacct and freezer when they are mounted.

use super::common::{create_parent, override_cgroup_path, CgroupMount, HostView, SelfCgroup};
use super::{
    io_error, keyed_value, read_keyed, read_u64, wait_until, Backend, CgroupError, CgroupLimits,
    CgroupStats, CgroupVersion, Kernel, FREEZE_TIMEOUT, PARENT_NAME,
};
use std::fs;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub(crate) struct V1 {
    /// One per distinct hierarchy, in the order the job's cgroups are created.
    parents: Vec<PathBuf>,
    memory: usize,
    pids: usize,
    cpuacct: Option<usize>,
    freezer: Option<usize>,
    swap_accounting: bool,
    /// "legacy", or "hybrid" with where the unused cgroup2 mount is.
    layout: String,
    /// The parent was configured, not detected.
    configured: bool,
}

/// How a host gets a v1 controller it lacks.
pub(crate) fn mount_fix(controller: &str) -> String {
    format!(
        "mount it (`mkdir -p /sys/fs/cgroup/{controller} && mount -t cgroup -o {controller} \
         cgroup /sys/fs/cgroup/{controller}`) with a kernel that has it (no \
         cgroup_disable={controller} on the kernel command line), or boot the host with pure \
         cgroup v2 (systemd.unified_cgroup_hierarchy=1)"
    )
}

/// Find (and create) the runner's parent in each hierarchy it uses.
pub(crate) fn place(
    view: &HostView<'_>,
    mounts: &[&CgroupMount],
    v2_mount: Option<&CgroupMount>,
    self_cgroup: &SelfCgroup,
    kernel: &dyn Kernel,
) -> Result<V1, CgroupError> {
    // Both required hierarchies before creating anything, so a failure leaves no trace.
    for controller in ["memory", "pids"] {
        if !mounts.iter().any(|m| m.has_controller(controller)) {
            return Err(required(Unplaced::NotMounted, controller, v2_mount));
        }
    }
    let configured = view
        .parent_override
        .map(|path| override_cgroup_path(path, mounts))
        .transpose()?;
    let mut parents = Vec::new();
    let mut place_in = |controller: &'static str| {
        place_one(
            view,
            mounts,
            self_cgroup,
            configured.as_deref(),
            controller,
            kernel,
            &mut parents,
        )
    };
    let memory = place_in("memory").map_err(|err| required(err, "memory", v2_mount))?;
    let pids = place_in("pids").map_err(|err| required(err, "pids", v2_mount))?;
    let cpuacct = optional(place_in("cpuacct"), "cpuacct");
    let freezer = optional(place_in("freezer"), "freezer");
    let swap_accounting = parents
        .get(memory)
        .is_some_and(|dir| dir.join("memory.memsw.limit_in_bytes").exists());
    let layout = match v2_mount {
        Some(mount) => format!(
            "hybrid (the cgroup2 mount at {} is not used: memory and pids are on v1)",
            mount.mountpoint.display()
        ),
        None => "legacy".to_owned(),
    };
    Ok(V1 {
        parents,
        memory,
        pids,
        cpuacct,
        freezer,
        swap_accounting,
        layout,
        configured: configured.is_some(),
    })
}

/// Why a hierarchy has no place for the runner.
enum Unplaced {
    NotMounted,
    Failed(CgroupError),
}

fn required(
    unplaced: Unplaced,
    controller: &'static str,
    v2_mount: Option<&CgroupMount>,
) -> CgroupError {
    match unplaced {
        Unplaced::Failed(err) => err,
        Unplaced::NotMounted => CgroupError::MissingController {
            controller,
            detail: match v2_mount {
                Some(mount) => format!(
                    "no cgroup v1 hierarchy has it (/proc/self/mountinfo), and the cgroup2 \
                     mount at {} cannot stand in because the other controllers are on v1",
                    mount.mountpoint.display()
                ),
                None => "no cgroup v1 hierarchy has it (/proc/self/mountinfo)".to_owned(),
            },
            fix: mount_fix(controller),
        },
    }
}

fn optional(placed: Result<usize, Unplaced>, controller: &str) -> Option<usize> {
    match placed {
        Ok(index) => Some(index),
        Err(Unplaced::NotMounted) => None,
        Err(Unplaced::Failed(err)) => {
            tracing::warn!(controller, %err, "optional cgroup v1 hierarchy not used");
            None
        }
    }
}

fn place_one(
    view: &HostView<'_>,
    mounts: &[&CgroupMount],
    self_cgroup: &SelfCgroup,
    configured: Option<&str>,
    controller: &'static str,
    kernel: &dyn Kernel,
    parents: &mut Vec<PathBuf>,
) -> Result<usize, Unplaced> {
    let candidates: Vec<&CgroupMount> = mounts
        .iter()
        .copied()
        .filter(|m| m.has_controller(controller))
        .collect();
    if candidates.is_empty() {
        return Err(Unplaced::NotMounted);
    }
    let cgroup_path = match configured {
        Some(path) => path.to_owned(),
        None => {
            let own = self_cgroup.v1_path(controller).ok_or_else(|| {
                Unplaced::Failed(CgroupError::Placement {
                    detail: format!(
                        "/proc/self/cgroup lists no {controller} hierarchy although one is mounted"
                    ),
                    fix: "configure an explicit parent cgroup".to_owned(),
                })
            })?;
            format!("{}/{PARENT_NAME}", own.trim_end_matches('/'))
        }
    };
    let dir = candidates
        .iter()
        .find_map(|m| m.dir_of_cgroup(view.fs_root, &cgroup_path))
        .ok_or_else(|| {
            Unplaced::Failed(CgroupError::Placement {
                detail: format!(
                    "the {controller} cgroup {cgroup_path} is not visible in any mount of that \
                     hierarchy (a cgroup namespace, or a bind mount of another subtree)"
                ),
                fix: "configure an explicit parent cgroup that the mount shows, or mount the \
                      hierarchy's root"
                    .to_owned(),
            })
        })?;
    if let Some(index) = parents.iter().position(|p| *p == dir) {
        // Co-mounted with a controller already placed (e.g. cpu,cpuacct).
        return Ok(index);
    }
    create_parent(kernel, &dir).map_err(Unplaced::Failed)?;
    parents.push(dir);
    Ok(parents.len() - 1)
}

fn job_dir(dirs: &[PathBuf], index: usize) -> Result<&Path, CgroupError> {
    dirs.get(index).map(PathBuf::as_path).ok_or_else(|| {
        io_error(
            "find",
            Path::new("a hierarchy of the job cgroup"),
            std::io::Error::from_raw_os_error(libc::ENOENT),
        )
    })
}

impl Backend for V1 {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V1
    }

    fn describe(&self) -> Vec<(String, String)> {
        let path = |index: Option<usize>, absent: &str| {
            index
                .and_then(|i| self.parents.get(i))
                .map_or_else(|| absent.to_owned(), |p| p.display().to_string())
        };
        vec![
            ("version".to_owned(), "v1".to_owned()),
            ("layout".to_owned(), self.layout.clone()),
            (
                "placement".to_owned(),
                if self.configured {
                    "configured parent".to_owned()
                } else {
                    "below the runner's own cgroup in each hierarchy (v1 allows it; nothing \
                     moves)"
                        .to_owned()
                },
            ),
            ("memory".to_owned(), path(Some(self.memory), "missing")),
            ("pids".to_owned(), path(Some(self.pids), "missing")),
            (
                "cpuacct".to_owned(),
                path(self.cpuacct, "not mounted: CPU time reads 0"),
            ),
            (
                "freezer".to_owned(),
                path(
                    self.freezer,
                    "not mounted: processes are killed without freezing first",
                ),
            ),
            (
                "swap accounting".to_owned(),
                if self.swap_accounting {
                    "yes (memory.memsw.limit_in_bytes = the memory limit)".to_owned()
                } else {
                    "no: jobs run only while the host has no swap on (/proc/swaps); boot \
                     with swapaccount=1 to cap a job's swap"
                        .to_owned()
                },
            ),
        ]
    }

    fn swap_limit_file(&self) -> Option<PathBuf> {
        self.swap_accounting
            .then(|| self.parents.get(self.memory))
            .flatten()
            .map(|dir| dir.join("memory.memsw.limit_in_bytes"))
    }

    fn parents(&self) -> &[PathBuf] {
        &self.parents
    }

    fn write_limits(
        &self,
        kernel: &dyn Kernel,
        dirs: &[PathBuf],
        limits: &CgroupLimits,
    ) -> Result<(), CgroupError> {
        let write = |file: PathBuf, value: &str| {
            kernel
                .write(&file, value)
                .map_err(|err| io_error("write", &file, err))
        };
        let memory = job_dir(dirs, self.memory)?;
        let mem = limits.mem_bytes.to_string();
        // memsw may never be below limit_in_bytes: set the memory limit first.
        write(memory.join("memory.limit_in_bytes"), &mem)?;
        let memsw = memory.join("memory.memsw.limit_in_bytes");
        if memsw.exists() {
            write(memsw, &mem)?;
        } else {
            super::without_swap_limit(kernel, &memsw)?;
        }
        let swappiness = memory.join("memory.swappiness");
        if swappiness.exists() {
            if let Err(err) = kernel.write(&swappiness, "0") {
                tracing::debug!(file = %swappiness.display(), %err, "swappiness not set");
            }
        }
        let pids = job_dir(dirs, self.pids)?;
        write(pids.join("pids.max"), &limits.pids_max.to_string())?;
        Ok(())
    }

    fn stats(&self, dirs: &[PathBuf]) -> CgroupStats {
        let mut stats = CgroupStats::default();
        if let Some(dir) = self.cpuacct.and_then(|i| dirs.get(i)) {
            stats.cpu_ns = read_u64(&dir.join("cpuacct.usage")).unwrap_or(0);
        }
        if let Some(memory) = dirs.get(self.memory) {
            stats.mem_peak_bytes = read_u64(&memory.join("memory.max_usage_in_bytes")).unwrap_or(0);
            let failcnt = read_u64(&memory.join("memory.failcnt"))
                .unwrap_or(0)
                .saturating_add(read_u64(&memory.join("memory.memsw.failcnt")).unwrap_or(0));
            let oom_kills = fs::read_to_string(memory.join("memory.oom_control"))
                .ok()
                .and_then(|text| keyed_value(&text, "oom_kill"))
                .unwrap_or(0);
            stats.memory_limit_hit = super::memory_limit_reached(
                failcnt,
                stats.mem_peak_bytes,
                read_u64(&memory.join("memory.limit_in_bytes")),
            );
            stats.oom_killed = oom_kills > 0;
        }
        if let Some(pids) = dirs.get(self.pids) {
            stats.pids_limit_hit = read_keyed(&pids.join("pids.events"), "max").unwrap_or(0) > 0;
        }
        stats
    }

    fn kill_file(&self, _dirs: &[PathBuf]) -> Option<PathBuf> {
        None
    }

    fn set_frozen(&self, kernel: &dyn Kernel, dirs: &[PathBuf], frozen: bool) -> bool {
        let Some(dir) = self.freezer.and_then(|i| dirs.get(i)) else {
            return false;
        };
        let state = dir.join("freezer.state");
        let wanted = if frozen { "FROZEN" } else { "THAWED" };
        if let Err(err) = kernel.write(&state, wanted) {
            tracing::debug!(file = %state.display(), %err, wanted, "freezer refused");
            return false;
        }
        if frozen {
            // FREEZING until every task has stopped; kill anyway if it takes too long.
            wait_until(FREEZE_TIMEOUT, || {
                fs::read_to_string(&state)
                    .map(|s| s.trim() == "FROZEN")
                    .unwrap_or(false)
            });
        }
        true
    }
}
