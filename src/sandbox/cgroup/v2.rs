//! cgroup v2: one unified hierarchy; a job is one cgroup under the runner's parent.

use super::detect::{override_cgroup_path, CgroupMount, HostView, SelfCgroup};
use super::v1::create_parent;
use super::{
    io_error, parse_pids, read_keyed, read_names, read_u64, wait_until, Backend, CgroupError,
    CgroupLimits, CgroupStats, CgroupVersion, Kernel, FREEZE_TIMEOUT, JOBS_NAME, PARENT_NAME,
    SUPERVISOR_NAME,
};
use std::fs;
use std::path::{Path, PathBuf};

/// Controllers a job cannot run without.
const REQUIRED: [&str; 2] = ["memory", "pids"];

#[derive(Debug)]
pub(crate) struct V2 {
    /// Exactly one: the parent of the job cgroups.
    parents: Vec<PathBuf>,
    mount_dir: PathBuf,
    /// How the parent was chosen, for `describe`.
    placement: String,
    cpu_enabled: bool,
}

/// Find (and prepare) the parent of the job cgroups; see the module docs of `cgroup`.
pub(crate) fn place(
    view: &HostView<'_>,
    mount: &CgroupMount,
    self_cgroup: &SelfCgroup,
    kernel: &dyn Kernel,
) -> Result<V2, CgroupError> {
    let mount_dir = mount.dir(view.fs_root);
    let (parent, placement) = if let Some(configured) = view.parent_override {
        let cgroup_path = override_cgroup_path(configured, &[mount])?;
        let dir = mount
            .resolve(view.fs_root, &cgroup_path)
            .ok_or_else(|| invisible(&cgroup_path, mount))?;
        create_parent(kernel, &dir)?;
        (dir, "configured parent".to_owned())
    } else {
        let own = self_cgroup
            .v2
            .as_deref()
            .ok_or_else(|| CgroupError::Placement {
                detail: "/proc/self/cgroup has no `0::` line although cgroup2 is mounted"
                    .to_owned(),
                fix: "configure an explicit parent cgroup".to_owned(),
            })?;
        if own == "/" {
            place_under_root(&mount_dir, kernel)?
        } else {
            place_in_delegated(view, mount, own, kernel)?
        }
    };
    let cpu_enabled = enable_controllers(kernel, &parent)?;
    Ok(V2 {
        parents: vec![parent],
        mount_dir,
        placement,
        cpu_enabled,
    })
}

fn invisible(cgroup_path: &str, mount: &CgroupMount) -> CgroupError {
    CgroupError::Placement {
        detail: format!(
            "the cgroup {cgroup_path} is not visible in the cgroup2 mount at {} (a cgroup \
             namespace, or a bind mount of another subtree)",
            mount.mountpoint.display()
        ),
        fix: "configure an explicit parent cgroup that the mount shows".to_owned(),
    }
}

/// The runner runs in the root cgroup: its parent is `<mount>/openvibe-skill-runner`.
fn place_under_root(
    mount_dir: &Path,
    kernel: &dyn Kernel,
) -> Result<(PathBuf, String), CgroupError> {
    let offered = read_names(&mount_dir.join("cgroup.controllers"))?;
    let enabled = read_names(&mount_dir.join("cgroup.subtree_control"))?;
    for controller in REQUIRED {
        if enabled.iter().any(|c| c == controller) {
            continue;
        }
        let root_control = mount_dir.join("cgroup.subtree_control");
        return Err(CgroupError::MissingController {
            controller,
            detail: format!(
                "{} does not list it, so cgroups below the root cannot use it",
                root_control.display()
            ),
            fix: if offered.iter().any(|c| c == controller) {
                format!(
                    "enable it for the root's children: `echo +{controller} > {}` (systemd \
                     does so for MemoryAccounting=/TasksAccounting=)",
                    root_control.display()
                )
            } else {
                format!(
                    "the kernel offers no {controller} controller in cgroup v2 (not in \
                     {}): use a kernel with it, remove cgroup_disable={controller} from the \
                     kernel command line, and unmount any v1 hierarchy that holds it",
                    mount_dir.join("cgroup.controllers").display()
                )
            },
        });
    }
    let parent = mount_dir.join(PARENT_NAME);
    create_parent(kernel, &parent)?;
    Ok((
        parent,
        "root cgroup: created the parent below the root".to_owned(),
    ))
}

/// The runner runs in a (delegated) cgroup of its own: it moves itself into
/// `<own>/supervisor` and puts the jobs in `<own>/jobs`.
fn place_in_delegated(
    view: &HostView<'_>,
    mount: &CgroupMount,
    own: &str,
    kernel: &dyn Kernel,
) -> Result<(PathBuf, String), CgroupError> {
    let own_dir = mount
        .resolve(view.fs_root, own)
        .ok_or_else(|| invisible(own, mount))?;
    // Already moved by an earlier detection in this process: the cgroup above is ours.
    let (delegated, moved) = match own_dir.file_name() {
        Some(name) if name == SUPERVISOR_NAME => match own_dir.parent() {
            Some(parent) => (parent.to_path_buf(), true),
            None => (own_dir.clone(), false),
        },
        _ => (own_dir.clone(), false),
    };
    let offered = read_names(&delegated.join("cgroup.controllers"))?;
    for controller in REQUIRED {
        if !offered.iter().any(|c| c == controller) {
            return Err(CgroupError::MissingController {
                controller,
                detail: format!(
                    "the runner's cgroup {} does not offer it (not in cgroup.controllers): \
                     the host has not delegated it",
                    delegated.display()
                ),
                fix: "run the runner as a systemd service with Delegate=yes (or \
                      Delegate=memory pids cpu), or configure an explicit parent cgroup"
                    .to_owned(),
            });
        }
    }
    if !moved {
        let procs = delegated.join("cgroup.procs");
        let text = fs::read_to_string(&procs).map_err(|err| io_error("read", &procs, err))?;
        let others: Vec<i32> = parse_pids(&text)
            .into_iter()
            .filter(|pid| *pid != view.self_pid)
            .collect();
        if !others.is_empty() {
            return Err(CgroupError::Placement {
                detail: format!(
                    "processes {others:?} share the runner's cgroup {}; cgroup v2 allows \
                     controllers below a cgroup only when it holds no process, and the runner \
                     moves no process but its own",
                    delegated.display()
                ),
                fix: "run the runner alone in its cgroup (its own systemd service with \
                      Delegate=yes), or configure an explicit parent cgroup"
                    .to_owned(),
            });
        }
        let supervisor = delegated.join(SUPERVISOR_NAME);
        create_parent(kernel, &supervisor)?;
        let supervisor_procs = supervisor.join("cgroup.procs");
        kernel
            .write(&supervisor_procs, &view.self_pid.to_string())
            .map_err(|err| io_error("move the runner into", &supervisor_procs, err))?;
    }
    enable_controllers(kernel, &delegated)?;
    let jobs = delegated.join(JOBS_NAME);
    create_parent(kernel, &jobs)?;
    Ok((
        jobs,
        format!(
            "delegated cgroup {}: runner in {SUPERVISOR_NAME}/, jobs in {JOBS_NAME}/",
            delegated.display()
        ),
    ))
}

/// Enable memory and pids (required) and cpu (when offered) for the children of `dir`, a
/// cgroup the runner owns. Returns whether cpu is enabled.
fn enable_controllers(kernel: &dyn Kernel, dir: &Path) -> Result<bool, CgroupError> {
    let offered = read_names(&dir.join("cgroup.controllers"))?;
    for controller in REQUIRED {
        if !offered.iter().any(|c| c == controller) {
            return Err(CgroupError::MissingController {
                controller,
                detail: format!(
                    "{} does not list it",
                    dir.join("cgroup.controllers").display()
                ),
                fix: format!(
                    "enable it in the cgroup.subtree_control of {}'s parent",
                    dir.display()
                ),
            });
        }
    }
    let control = dir.join("cgroup.subtree_control");
    let enabled = read_names(&control)?;
    let missing: Vec<String> = REQUIRED
        .iter()
        .filter(|c| !enabled.iter().any(|e| e == *c))
        .map(|c| format!("+{c}"))
        .collect();
    if !missing.is_empty() {
        kernel
            .write(&control, &missing.join(" "))
            .map_err(|err| io_error("enable controllers in", &control, err))?;
    }
    if enabled.iter().any(|c| c == "cpu") {
        return Ok(true);
    }
    if !offered.iter().any(|c| c == "cpu") {
        return Ok(false);
    }
    // cpu only adds weights; CPU time comes from cpu.stat either way.
    match kernel.write(&control, "+cpu") {
        Ok(()) => Ok(true),
        Err(err) => {
            tracing::debug!(file = %control.display(), %err, "cpu controller not enabled");
            Ok(false)
        }
    }
}

impl V2 {
    /// A backend on `parent` without placement or controllers, for tests of the kill paths.
    #[cfg(test)]
    pub(crate) fn bare(mount_dir: PathBuf, parent: PathBuf) -> V2 {
        V2 {
            parents: vec![parent],
            mount_dir,
            placement: "test".to_owned(),
            cpu_enabled: false,
        }
    }
}

impl Backend for V2 {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V2
    }

    fn describe(&self) -> Vec<(String, String)> {
        let parent = self.parents.first().cloned().unwrap_or_default();
        let has = |file: &str, yes: &str, no: &str| {
            if parent.join(file).exists() {
                yes.to_owned()
            } else {
                no.to_owned()
            }
        };
        vec![
            ("version".to_owned(), "v2".to_owned()),
            ("mount".to_owned(), self.mount_dir.display().to_string()),
            ("placement".to_owned(), self.placement.clone()),
            ("parent".to_owned(), parent.display().to_string()),
            (
                "controllers".to_owned(),
                if self.cpu_enabled {
                    "memory pids cpu".to_owned()
                } else {
                    "memory pids (cpu not enabled; CPU time still comes from cpu.stat)".to_owned()
                },
            ),
            (
                "swap accounting".to_owned(),
                has(
                    "memory.swap.max",
                    "yes (memory.swap.max = 0)",
                    "no: swap use is not capped; boot with swapaccount=1 / CONFIG_MEMCG_SWAP",
                ),
            ),
            (
                "cgroup.kill".to_owned(),
                has(
                    "cgroup.kill",
                    "yes",
                    "no (kernel < 5.14): processes are frozen and killed one by one",
                ),
            ),
            (
                "memory.peak".to_owned(),
                has(
                    "memory.peak",
                    "yes",
                    "no (kernel < 5.19): peak memory reads memory.current",
                ),
            ),
        ]
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
        let dir = dirs.first().ok_or_else(|| {
            io_error(
                "find",
                Path::new("the job cgroup"),
                std::io::Error::from_raw_os_error(libc::ENOENT),
            )
        })?;
        let write = |name: &str, value: &str| {
            let file = dir.join(name);
            kernel
                .write(&file, value)
                .map_err(|err| io_error("write", &file, err))
        };
        write("memory.max", &limits.mem_bytes.to_string())?;
        if dir.join("memory.swap.max").exists() {
            write("memory.swap.max", "0")?;
        }
        // One OOM kill takes the whole job, not one process of it.
        if dir.join("memory.oom.group").exists() {
            write("memory.oom.group", "1")?;
        }
        write("pids.max", &limits.pids_max.to_string())?;
        Ok(())
    }

    fn stats(&self, dirs: &[PathBuf]) -> CgroupStats {
        let Some(dir) = dirs.first() else {
            return CgroupStats::default();
        };
        let event = |key: &str| read_keyed(&dir.join("memory.events"), key).unwrap_or(0);
        let oom_kills = event("oom_kill");
        CgroupStats {
            cpu_ns: read_keyed(&dir.join("cpu.stat"), "usage_usec")
                .unwrap_or(0)
                .saturating_mul(1000),
            mem_peak_bytes: read_u64(&dir.join("memory.peak"))
                .or_else(|| read_u64(&dir.join("memory.current")))
                .unwrap_or(0),
            memory_limit_hit: event("max") > 0 || event("oom") > 0 || oom_kills > 0,
            oom_killed: oom_kills > 0 || event("oom_group_kill") > 0,
            pids_limit_hit: read_keyed(&dir.join("pids.events"), "max").unwrap_or(0) > 0,
        }
    }

    fn kill_file(&self, dirs: &[PathBuf]) -> Option<PathBuf> {
        dirs.first()
            .map(|dir| dir.join("cgroup.kill"))
            .filter(|file| file.exists())
    }

    fn set_frozen(&self, kernel: &dyn Kernel, dirs: &[PathBuf], frozen: bool) -> bool {
        let Some(dir) = dirs.first() else {
            return false;
        };
        let freeze = dir.join("cgroup.freeze");
        if !freeze.exists() {
            return false;
        }
        if let Err(err) = kernel.write(&freeze, if frozen { "1" } else { "0" }) {
            tracing::debug!(file = %freeze.display(), %err, frozen, "freeze refused");
            return false;
        }
        if frozen {
            let events = dir.join("cgroup.events");
            wait_until(FREEZE_TIMEOUT, || {
                read_keyed(&events, "frozen").unwrap_or(0) == 1
            });
        }
        true
    }
}
