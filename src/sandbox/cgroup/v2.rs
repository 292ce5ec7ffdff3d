//! cgroup v2: one unified hierarchy; a job is one cgroup under the runner's parent.

use super::common::{
    create_parent, mkdir_or_existing, override_cgroup_path, CgroupMount, HostView, SelfCgroup,
};
use super::{
    io_error, parse_pids, read_keyed, read_names, read_u64, wait_until, Backend, CgroupError,
    CgroupLimits, CgroupStats, CgroupVersion, Kernel, FREEZE_TIMEOUT, JOBS_NAME, PARENT_NAME,
    SUPERVISOR_LEAF_PREFIX, SUPERVISOR_NAME,
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
    /// Where the runner moved itself from, when it moved into a leaf of its own below the
    /// root; it goes back there at exit (see [`leave`]).
    runner_leaf: Option<RunnerLeaf>,
}

/// A `supervisor-<pid>` leaf the runner moved itself into, and the cgroup it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunnerLeaf {
    pub(crate) leaf: PathBuf,
    pub(crate) origin: PathBuf,
    pub(crate) mount_dir: PathBuf,
}

/// Find (and prepare) the parent of the job cgroups; see the module docs of `cgroup`.
pub(crate) fn place(
    view: &HostView<'_>,
    mount: &CgroupMount,
    self_cgroup: &SelfCgroup,
    kernel: &dyn Kernel,
) -> Result<V2, CgroupError> {
    let mount_dir = mount.dir(view.fs_root);
    let mut runner_leaf = None;
    let (parent, placement) = if let Some(configured) = view.parent_override {
        let cgroup_path = override_cgroup_path(configured, &[mount])?;
        let dir = mount
            .dir_of_cgroup(view.fs_root, &cgroup_path)
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
                fix: "configure an explicit parent cgroup (runner.cgroup_parent)".to_owned(),
            })?;
        choose(view, mount, own, kernel, &mut runner_leaf)?
    };
    let cpu_enabled = enable_controllers(kernel, &parent)?;
    Ok(V2 {
        parents: vec![parent],
        mount_dir,
        placement,
        cpu_enabled,
        runner_leaf,
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

/// The placement for a runner in cgroup `own` (no configured parent), in this order:
/// 1. a cgroup delegated to the runner (a systemd service with `Delegate=yes`, or, without
///    systemd, any cgroup that offers memory and pids and holds only the runner): the
///    runner moves itself into `supervisor/` and puts jobs in `jobs/`;
/// 2. with systemd as init: a transient scope with `Delegate=yes` holding only the runner
///    (asked for over D-Bus), then as in 1;
/// 3. without systemd: a cgroup of the runner's own below the root,
///    `/openvibe-skill-runner`, with the runner in `supervisor-<pid>/` (unless it is in the
///    root cgroup already) and jobs in `jobs/`.
fn choose(
    view: &HostView<'_>,
    mount: &CgroupMount,
    own: &str,
    kernel: &dyn Kernel,
    runner_leaf: &mut Option<RunnerLeaf>,
) -> Result<(PathBuf, String), CgroupError> {
    let mount_dir = mount.dir(view.fs_root);
    // The mount must show the runner's own cgroup. One mounted outside the runner's cgroup
    // namespace (the host's `/sys/fs/cgroup` bound into a container with a namespace of its
    // own: the mount's root reads `/../..`) does not, and its root is neither the host's
    // root as this process sees it nor the namespace's: nothing is made or moved there.
    if mount.dir_of_cgroup(view.fs_root, own).is_none() {
        return Err(CgroupError::Placement {
            detail: format!(
                "the cgroup2 mount at {} shows the cgroup {}, not the runner's own cgroup {own} \
                 (a mount made outside this cgroup namespace, or of another subtree)",
                mount.mountpoint.display(),
                mount.root
            ),
            fix: "mount this cgroup namespace's own cgroup2 filesystem there instead (in a \
                  container: `mount -t cgroup2 none /sys/fs/cgroup`, not a bind of the host's \
                  /sys/fs/cgroup)"
                .to_owned(),
        });
    }
    // The root of the runner's cgroup namespace. The host's own root cgroup has no
    // `cgroup.type` and may hold processes while its children use controllers; a
    // namespace's root (a container's own cgroup, `--cgroupns=private`) is an ordinary
    // cgroup that may not, so it is used as one delegated to the runner.
    let namespace_root = own == "/" && mount_dir.join("cgroup.type").exists();
    if own == "/" && !namespace_root {
        return place_below_root(view, &mount_dir, None, kernel);
    }
    // A runner already placed below the root by an earlier detection (or started by
    // one): the parent is ours.
    let own_parent = Path::new(own).parent().and_then(Path::to_str);
    let own_name = Path::new(own).file_name().and_then(|n| n.to_str());
    if own_parent.and_then(|p| p.strip_prefix('/')) == Some(PARENT_NAME)
        && own_name.is_some_and(|n| n.starts_with(SUPERVISOR_LEAF_PREFIX))
    {
        return place_below_root(view, &mount_dir, None, kernel);
    }
    let own_dir = mount
        .dir_of_cgroup(view.fs_root, own)
        .ok_or_else(|| invisible(own, mount))?;
    let (delegated, moved) = delegated_dir(&own_dir);
    let usable = delegation_problem(view, &delegated, moved);
    match (usable, view.systemd) {
        (Ok(()), _) => place_in_delegated(view, &delegated, moved, kernel),
        // Below a namespace's root the runner cannot go (that is the root it sees), and
        // it moves no process but its own.
        (Err(why), _) if namespace_root => Err(CgroupError::Placement {
            detail: format!(
                "the runner is in the root of its cgroup namespace (a container's own \
                 cgroup), which it can use only alone: {why}"
            ),
            fix: "start the container's other processes in a child cgroup (its init can \
                  move itself into one, such as /sys/fs/cgroup/init, before it starts \
                  anything), run the runner as the container's only process, or set \
                  runner.cgroup_parent to a cgroup handed to the runner"
                .to_owned(),
        }),
        (Err(_), Some(systemd)) => {
            let (unit, scope) = systemd.start_scope(view.self_pid)?;
            let scope_dir = mount
                .dir_of_cgroup(view.fs_root, &scope)
                .ok_or_else(|| invisible(&scope, mount))?;
            // The scope holds only the runner, and systemd delegated it: every check of a
            // delegated cgroup applies, and a failure is reported as such.
            delegation_problem(view, &scope_dir, false).map_err(|why| CgroupError::Placement {
                detail: format!(
                    "systemd started the transient scope {unit} for the runner, but {why}"
                ),
                fix: "check that systemd delegates memory and pids (systemd 244 or \
                          later; no DisableControllers= on its slice) with `systemctl show \
                          -p Delegate,DelegateControllers` on the scope"
                    .to_owned(),
            })?;
            let (jobs, _) = place_in_delegated(view, &scope_dir, false, kernel)?;
            Ok((
                jobs,
                format!(
                    "systemd transient scope {unit} (Delegate=yes, asked for over D-Bus): \
                     runner in {SUPERVISOR_NAME}/, jobs in {JOBS_NAME}/"
                ),
            ))
        }
        (Err(_), None) => {
            let (jobs, placement) = place_below_root(view, &mount_dir, Some(&own_dir), kernel)?;
            *runner_leaf = Some(RunnerLeaf {
                leaf: mount_dir
                    .join(PARENT_NAME)
                    .join(format!("{SUPERVISOR_LEAF_PREFIX}{}", view.self_pid)),
                origin: own_dir,
                mount_dir,
            });
            Ok((jobs, placement))
        }
    }
}

/// `own_dir`, or the cgroup above when the runner already moved itself into `supervisor`.
fn delegated_dir(own_dir: &Path) -> (PathBuf, bool) {
    match (own_dir.file_name(), own_dir.parent()) {
        (Some(name), Some(parent)) if name == SUPERVISOR_NAME => (parent.to_path_buf(), true),
        _ => (own_dir.to_path_buf(), false),
    }
}

/// Why the runner cannot use `dir` as a delegated cgroup, in words, or Ok.
fn delegation_problem(view: &HostView<'_>, dir: &Path, moved: bool) -> Result<(), String> {
    if let Some(systemd) = view.systemd {
        if !systemd.marks_delegated(dir) {
            return Err(format!(
                "systemd has not delegated {} to the runner (no Delegate=yes)",
                dir.display()
            ));
        }
    }
    let offered = read_names(&dir.join("cgroup.controllers")).map_err(|e| e.to_string())?;
    let missing: Vec<&str> = REQUIRED
        .into_iter()
        .filter(|c| !offered.iter().any(|o| o == c))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} does not offer {} (not in cgroup.controllers)",
            dir.display(),
            missing.join(" and ")
        ));
    }
    if !moved {
        let procs = dir.join("cgroup.procs");
        let text = fs::read_to_string(&procs).map_err(|e| format!("{}: {e}", procs.display()))?;
        let others: Vec<i32> = parse_pids(&text)
            .into_iter()
            .filter(|pid| *pid != view.self_pid)
            .collect();
        if !others.is_empty() {
            return Err(format!(
                "processes {others:?} share the runner's cgroup {}, and cgroup v2 allows \
                 controllers below a cgroup only when it holds no process",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// The runner's own cgroup below the root, `<mount>/openvibe-skill-runner`: used where no
/// systemd manages the tree. The root's `cgroup.subtree_control` must list memory and
/// pids; without systemd nobody else enables them, so the runner adds them (it never
/// removes anything there). `move_from`: the runner's cgroup, when the runner moves its own
/// process, and nothing else, out of it into `supervisor-<pid>/` (a runner in the root
/// cgroup stays there).
fn place_below_root(
    view: &HostView<'_>,
    mount_dir: &Path,
    move_from: Option<&Path>,
    kernel: &dyn Kernel,
) -> Result<(PathBuf, String), CgroupError> {
    let root_control = mount_dir.join("cgroup.subtree_control");
    let offered = read_names(&mount_dir.join("cgroup.controllers"))?;
    let enabled = read_names(&root_control)?;
    let mut to_enable = Vec::new();
    for controller in REQUIRED {
        if enabled.iter().any(|c| c == controller) {
            continue;
        }
        if !offered.iter().any(|c| c == controller) {
            return Err(CgroupError::MissingController {
                controller,
                detail: format!(
                    "the kernel offers no {controller} controller in cgroup v2 (not in {})",
                    mount_dir.join("cgroup.controllers").display()
                ),
                fix: format!(
                    "use a kernel with it, remove cgroup_disable={controller} from the \
                     kernel command line, and unmount any v1 hierarchy that holds it"
                ),
            });
        }
        if view.systemd.is_some() {
            return Err(CgroupError::MissingController {
                controller,
                detail: format!(
                    "{} does not list it, so cgroups below the root cannot use it",
                    root_control.display()
                ),
                fix: format!(
                    "systemd manages the root cgroup: enable {controller} accounting for \
                     the runner's slice (DefaultMemoryAccounting=yes, \
                     DefaultTasksAccounting=yes in /etc/systemd/system.conf), or run the \
                     runner as a systemd service with Delegate=yes"
                ),
            });
        }
        to_enable.push(format!("+{controller}"));
    }
    if !to_enable.is_empty() {
        kernel
            .write(&root_control, &to_enable.join(" "))
            .map_err(|err| io_error("enable controllers in", &root_control, err))?;
        tracing::info!(file = %root_control.display(), enabled = %to_enable.join(" "),
            "enabled the controllers jobs need for the root's children");
    }
    let parent = mount_dir.join(PARENT_NAME);
    create_parent(kernel, &parent)?;
    enable_controllers(kernel, &parent)?;
    let mut placement = format!(
        "own cgroup below the root (no systemd delegation here): {}",
        parent.display()
    );
    if move_from.is_some() {
        remove_stale_leaves(&parent, kernel);
        let leaf = parent.join(format!("{SUPERVISOR_LEAF_PREFIX}{}", view.self_pid));
        let procs = leaf.join("cgroup.procs");
        // Until the move, the leaf is empty, and another runner starting this instant
        // removes the empty leaves it finds (remove_stale_leaves): the move then finds the
        // leaf gone (ENOENT) or on its way out (ENODEV), or the mkdir finds its name still
        // taken by it (EEXIST, not yet a folder one can see). The leaf is made again; once
        // the runner is in it, no rmdir can take it.
        let mut attempts = 0;
        loop {
            attempts += 1;
            let step = mkdir_or_existing(kernel, &leaf)
                .map_err(|err| ("create", &leaf, err))
                .and_then(|()| {
                    kernel
                        .write(&procs, &view.self_pid.to_string())
                        .map_err(|err| ("move the runner into", &procs, err))
                });
            match step {
                Ok(()) => break,
                Err((_, _, err))
                    if attempts < LEAF_ATTEMPTS
                        && matches!(
                            err.raw_os_error(),
                            Some(libc::ENOENT | libc::ENODEV | libc::EEXIST)
                        ) =>
                {
                    tracing::debug!(leaf = %leaf.display(), error = %err,
                        "the runner's leaf went before the move (another runner's cleanup); made again");
                    // A leaf on its way out may still hold its name for a moment: a short
                    // wait, longer each time (28 ms at most in all), lets its rmdir end.
                    std::thread::sleep(std::time::Duration::from_millis(u64::from(attempts)));
                }
                Err((what, path, err)) => {
                    // The runner is not in it: the empty leaf goes now rather than at the
                    // next runner's start (an rmdir that fails leaves it to that one).
                    let _ = kernel.rmdir(&leaf);
                    return Err(io_error(what, path, err));
                }
            }
        }
        placement.push_str(&format!(
            ", runner moved into {SUPERVISOR_LEAF_PREFIX}{}/",
            view.self_pid
        ));
    }
    let jobs = parent.join(JOBS_NAME);
    create_parent(kernel, &jobs)?;
    placement.push_str(&format!(", jobs in {JOBS_NAME}/"));
    Ok((jobs, placement))
}

/// How many times a runner makes its `supervisor-<pid>` leaf again when another runner's
/// cleanup removed it before the move (each time needs another runner starting then).
const LEAF_ATTEMPTS: u32 = 8;

/// Empty `supervisor-<pid>` leaves: those of runners that have exited, and, for an
/// instant, one a runner starting now has not moved into yet (that runner makes it again).
/// A busy one stays.
fn remove_stale_leaves(parent: &Path, kernel: &dyn Kernel) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if !name.starts_with(SUPERVISOR_LEAF_PREFIX) {
            continue;
        }
        let empty = fs::read_to_string(entry.path().join("cgroup.procs"))
            .map(|t| parse_pids(&t).is_empty())
            .unwrap_or(false);
        if empty {
            // Another runner may be moving into it this instant: EBUSY then, and it stays.
            let _ = kernel.rmdir(&entry.path());
        }
    }
}

/// At the runner's exit: move the runner's process (`pid`, all its threads) back where it
/// came from, or to the root cgroup when that is gone, and remove its own leaf, so a runner
/// leaves no cgroup of its own behind. A runner no longer in its leaf moves nowhere.
pub(crate) fn leave(kernel: &dyn Kernel, leaf: &RunnerLeaf, pid: i32) -> Result<(), CgroupError> {
    let procs = leaf.leaf.join("cgroup.procs");
    let listed = fs::read_to_string(&procs)
        .map(|text| parse_pids(&text).contains(&pid))
        .unwrap_or(false);
    if listed {
        let mut moved = Err(CgroupError::Placement {
            detail: format!(
                "neither {} nor the root cgroup {} takes the runner back",
                leaf.origin.display(),
                leaf.mount_dir.display()
            ),
            fix: format!(
                "remove the empty {} once the runner has exited; the next runner start also \
                 removes it",
                leaf.leaf.display()
            ),
        });
        for target in [&leaf.origin, &leaf.mount_dir] {
            let target_procs = target.join("cgroup.procs");
            if kernel.write(&target_procs, &pid.to_string()).is_ok() {
                moved = Ok(());
                break;
            }
        }
        moved?;
    }
    match kernel.rmdir(&leaf.leaf) {
        Ok(()) => Ok(()),
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        Err(err) => Err(io_error("remove the runner's own leaf", &leaf.leaf, err)),
    }
}

/// The runner runs in a cgroup delegated to it, `delegated` (checked by
/// [`delegation_problem`]): it moves itself into `<delegated>/supervisor` (unless `moved`
/// already) and puts the jobs in `<delegated>/jobs`.
fn place_in_delegated(
    view: &HostView<'_>,
    delegated: &Path,
    moved: bool,
    kernel: &dyn Kernel,
) -> Result<(PathBuf, String), CgroupError> {
    if !moved {
        let supervisor = delegated.join(SUPERVISOR_NAME);
        create_parent(kernel, &supervisor)?;
        let supervisor_procs = supervisor.join("cgroup.procs");
        kernel
            .write(&supervisor_procs, &view.self_pid.to_string())
            .map_err(|err| io_error("move the runner into", &supervisor_procs, err))?;
    }
    enable_controllers(kernel, delegated)?;
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
            runner_leaf: None,
        }
    }
}

impl Backend for V2 {
    fn runner_leaf(&self) -> Option<RunnerLeaf> {
        self.runner_leaf.clone()
    }

    fn version(&self) -> CgroupVersion {
        CgroupVersion::V2
    }

    fn swap_limit_file(&self) -> Option<PathBuf> {
        let file = self.parents.first()?.join("memory.swap.max");
        file.exists().then_some(file)
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
                    "no: jobs run only while the host has no swap on (/proc/swaps); boot \
                     with swapaccount=1 / CONFIG_MEMCG_SWAP to cap a job's swap",
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
        } else {
            super::without_swap_limit(kernel, &dir.join("memory.swap.max"))?;
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
        let mem_peak_bytes = read_u64(&dir.join("memory.peak"))
            .or_else(|| read_u64(&dir.join("memory.current")))
            .unwrap_or(0);
        CgroupStats {
            cpu_ns: read_keyed(&dir.join("cpu.stat"), "usage_usec")
                .unwrap_or(0)
                .saturating_mul(1000),
            mem_peak_bytes,
            memory_limit_hit: super::memory_limit_reached(
                event("max").saturating_add(event("oom")),
                mem_peak_bytes,
                read_u64(&dir.join("memory.max")),
            ),
            oom_killed: oom_kills > 0 || event("oom_group_kill") > 0,
            pids_limit_hit: read_keyed(&dir.join("pids.events"), "max").unwrap_or(0) > 0,
        }
    }

    fn kill_file(&self, dirs: &[PathBuf]) -> Option<PathBuf> {
        dirs.first()
            .map(|dir| dir.join("cgroup.kill"))
            .filter(|file| file.exists())
    }

    fn memory_to_sample(&self, dirs: &[PathBuf]) -> Option<PathBuf> {
        dirs.first()
            .filter(|dir| !dir.join("memory.peak").exists())
            .map(|dir| dir.join("memory.current"))
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
