//! At start: one daemon per state directory, and nothing of an earlier run left behind.
//!
//! The engine names each job's cgroup and directory `<job_id>.<pid>.<seq>`, `pid` being
//! the runner process that ran it. A leftover is removed when that process is gone (a
//! `run-job` or a daemon that died), is this daemon's pid (recovery runs before this
//! daemon makes anything, so the name is an earlier process's with the same pid: a
//! container's daemon is pid 1 at every start), or is still an earlier daemon of this state
//! directory on its way out (the journal lists their pids and when they started; a process
//! that has the pid now and started after that daemon recorded its start is another one).
//! Killing through the job's cgroup ends every process of it, and the job's mounts live in
//! its own mount namespace, which goes with them. A leftover of any other process that
//! lives is another runner's running job, or the pid was taken by an unrelated process: it
//! is left alone, and removed by a later start once that process is gone.
//!
//! A sweep that fails (a process that will not die, a file that cannot be removed) is
//! tried again while the daemon serves ([`Earlier`] keeps the rules of the start: a name
//! with this daemon's pid is then a leftover only if the first sweep saw it).
//!
//! Before any of that, a name a live uid lease records (`uids::live_names`) is never a
//! leftover: a job of a runner alive anywhere on the host, whose pid may belong to another
//! pid namespace (where it may even be this daemon's own).

use super::journal::{EarlierRun, ProcessIdentity};
use crate::config::Config;
use crate::sandbox::cgroup::CgroupHost;
use crate::sandbox::uids;
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The flock that keeps a second daemon off this state directory; held while it lives.
pub struct StateLock {
    _dir: std::fs::File,
}

/// Locks the state directory itself (a flock on the folder's own descriptor), not a file in
/// it: a lock file removed by a cleaner or a mistaken `rm` would let a second daemon take a
/// new one and then record the first one's jobs `runner_restarted` and remove what they run.
pub fn lock_state_dir(state: &Path) -> Result<StateLock, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(state)
        .map_err(|e| format!("cannot open the state directory {}: {e}", state.display()))?;
    // SAFETY: flock on a descriptor we own.
    let r = unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r != 0 {
        return Err(format!(
            "another daemon uses the state directory {} (it holds the folder's lock); give \
             this one --state-dir",
            state.display()
        ));
    }
    // An earlier version's lock file: nothing reads it now.
    let _ = std::fs::remove_file(state.join("daemon.lock"));
    Ok(StateLock { _dir: dir })
}

/// The runner pid in a job's name `<job_id>.<pid>.<seq>`.
pub fn owner_pid(name: &str) -> Option<u32> {
    let mut parts = name.rsplitn(3, '.');
    let seq = parts.next()?;
    let pid = parts.next()?;
    let id = parts.next()?;
    if id.is_empty() || seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok().filter(|p| *p > 0)
}

/// Whether a process has the pid `pid` (in this pid namespace).
pub(super) fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(nix::errno::Errno::ESRCH) => false,
        Err(_) => true,
    }
}

/// When the process `pid` started, on the wall clock (ms); none when it is gone or its
/// `/proc` entry cannot be read.
fn started_ms(pid: u32) -> Option<i64> {
    let start_ticks = ProcessIdentity::of(pid)?.start_ticks;
    // SAFETY: sysconf reads a constant of the system.
    let ticks_per_s = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|t| *t > 0)?;
    // The start is counted on the boot clock; its age, subtracted from the wall clock now.
    let boot = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).ok()?;
    let boot_ms = boot.tv_sec() * 1000 + boot.tv_nsec() / 1_000_000;
    let start_ms = i64::try_from(start_ticks.saturating_mul(1000) / ticks_per_s).ok()?;
    Some(super::journal::now_ms() - (boot_ms - start_ms))
}

/// What tells an earlier run's names from this daemon's own, fixed at its start: the
/// earlier daemons the journal lists, and the names with this daemon's pid that the first
/// sweep found.
#[derive(Debug, Clone)]
pub struct Earlier {
    runs: Vec<EarlierRun>,
    /// None until the first sweep has run: it runs before this daemon made anything, so
    /// every name with its pid is an earlier process's (a container's daemon is pid 1 at
    /// every start). Then the names that sweep found: any other name with this pid is one
    /// of this daemon's own jobs or warm sandboxes.
    own_pid: Option<BTreeSet<String>>,
    /// Whether the first sweep listed everything (cgroups, mounts, folders): if not, a
    /// name with this daemon's pid it did not see may be an earlier process's still.
    complete: bool,
    /// The cgroups whose processes outlasted a sweep's kill, handed to the late removal
    /// (`JobCgroup::remove_late`), and when: a later sweep leaves them to it meanwhile.
    late: BTreeMap<String, Instant>,
}

impl Earlier {
    /// At start, before this daemon made anything: `runs`, the earlier daemons the journal
    /// lists.
    pub fn at_start(runs: Vec<EarlierRun>) -> Earlier {
        Earlier {
            runs,
            own_pid: None,
            complete: false,
            late: BTreeMap::new(),
        }
    }

    /// Whether the first sweep saw everything, so that once a sweep leaves nothing, nothing
    /// of the earlier runs is left (the journal may forget them).
    pub fn first_sweep_complete(&self) -> bool {
        self.own_pid.is_some() && self.complete
    }

    /// From now on, no name with this process's pid is a leftover: when the first sweep did
    /// not end (its thread failed), so what it saw is unknown, or for a command's sweep.
    pub fn seen_none_of_own_pid(&mut self) {
        self.own_pid.get_or_insert_with(BTreeSet::new);
    }
}

/// Whether the job named `name` is a leftover by the pid in it: see the module's comment
/// ([`leftovers_among`] also asks the live leases). A name with this daemon's pid, in the
/// first sweep, is added to `own_seen`.
fn is_leftover(name: &str, earlier: &Earlier, own_seen: &mut BTreeSet<String>) -> bool {
    let Some(pid) = owner_pid(name) else {
        return false;
    };
    if pid == std::process::id() {
        return match &earlier.own_pid {
            None => {
                own_seen.insert(name.to_owned());
                true
            }
            Some(at_start) => at_start.contains(name),
        };
    }
    if !alive(pid) {
        return true;
    }
    // A live process has the pid: the earlier daemon itself only if it is the process that
    // daemon recorded (its boot and its start in ticks since then: no clock that can be
    // set). A journal an older runner wrote holds no identity: then only if the process was
    // already alive when that daemon recorded its start (two live processes never share a
    // pid), with a second of slack for the clocks' rounding.
    let identity = ProcessIdentity::of(pid);
    let start = started_ms(pid);
    if identity.is_none() && start.is_none() {
        return !alive(pid);
    }
    earlier
        .runs
        .iter()
        .filter(|run| run.pid == pid)
        .any(|run| match &run.identity {
            Some(recorded) => identity.as_ref() == Some(recorded),
            None => start.is_some_and(|s| s <= run.started_ms + 1000),
        })
}

/// Of `names`, just listed, the leftovers. The live uid leases (`uids::live_names`) are
/// read after the listing, and only when the pid rules would take a name (a clean host is
/// never probed); a lock directory that cannot be read leaves everything alone.
/// `live` reads the names ([`uids::live_names`] in use); `own_seen` as in [`is_leftover`].
fn leftovers_among(
    names: impl IntoIterator<Item = String>,
    earlier: &Earlier,
    own_seen: &mut BTreeSet<String>,
    live: impl FnOnce() -> Result<BTreeSet<String>, String>,
) -> Result<BTreeSet<String>, String> {
    let by_pid: BTreeSet<String> = names
        .into_iter()
        .filter(|n| is_leftover(n, earlier, own_seen))
        .collect();
    if by_pid.is_empty() {
        return Ok(by_pid);
    }
    let live = live()?;
    Ok(by_pid.into_iter().filter(|n| !live.contains(n)).collect())
}

/// The names the host's live uid leases record.
fn live_leases() -> Result<BTreeSet<String>, String> {
    uids::live_names(Path::new(uids::LOCK_DIR))
}

/// Before the job of a command that runs one itself (`run-job`, `run`): removes what
/// runners killed before their end left (SIGKILL lets no runner remove its own, and where
/// no systemd scope takes its cgroups away nothing else would: a daemon cleans only its own
/// parents and state directory). The names are judged as at a daemon's start, with no
/// earlier daemon known and none with this process's pid (unlike a daemon's at its start,
/// a command's may be another pid namespace's runner sharing the parent). No process is
/// killed: only empty cgroups go (the kernel refuses to remove any other), and a job's
/// folder in `jobs_dir` only once none of its cgroups is left here, and never while a
/// mount on the host lies under `jobs_dir` (the daemon detaches those first). Returns how
/// many cgroups and folders were removed.
pub fn remove_killed_runners_leftovers(
    host: &CgroupHost,
    jobs_dir: &Path,
) -> Result<usize, String> {
    let mut earlier = Earlier::at_start(Vec::new());
    earlier.seen_none_of_own_pid();
    let judge =
        |names: Vec<String>| leftovers_among(names, &earlier, &mut BTreeSet::new(), live_leases);
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let paths = host.leftovers().map_err(|e| e.to_string())?;
    let dead = judge(paths.iter().filter_map(|p| name(p)).collect())?;
    let mut removed = 0;
    let mut stays = BTreeSet::new();
    for path in &paths {
        let Some(n) = name(path) else { continue };
        if !dead.contains(&n) {
            stays.insert(n);
            continue;
        }
        match std::fs::remove_dir(path) {
            Ok(()) => removed += 1,
            Err(e) => {
                // Its processes may still be ending: the next runner removes it.
                tracing::debug!(cgroup = %path.display(), error = %e, "a dead runner's job cgroup stays");
                stays.insert(n);
            }
        }
    }
    let mountinfo = read_mountinfo()?;
    Ok(removed + remove_dead_folders(jobs_dir, &stays, &earlier, &mountinfo, live_leases)?)
}

/// Of [`remove_killed_runners_leftovers`]: the folders in `jobs_dir` the rules take, but
/// for the names in `stays` (cgroups left) and none while `mountinfo` has a mount under
/// `jobs_dir`. Returns how many were removed.
fn remove_dead_folders(
    jobs_dir: &Path,
    stays: &BTreeSet<String>,
    earlier: &Earlier,
    mountinfo: &str,
    live: impl FnOnce() -> Result<BTreeSet<String>, String>,
) -> Result<usize, String> {
    if !mounts_below(mountinfo, jobs_dir).is_empty() {
        return Err(format!(
            "a mount lies under {}: its folders are left to the daemon's start",
            jobs_dir.display()
        ));
    }
    let folders: Vec<String> = match std::fs::read_dir(jobs_dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !stays.contains(n))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(format!("cannot list {}: {e}", jobs_dir.display())),
    };
    let mut removed = 0;
    for n in leftovers_among(folders, earlier, &mut BTreeSet::new(), live)? {
        match std::fs::remove_dir_all(jobs_dir.join(&n)) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::debug!(folder = %n, error = %e, "a dead runner's job folder stays"),
        }
    }
    Ok(removed)
}

/// Kills and removes the leftovers; returns how many were found. The first sweep fixes
/// which names with this daemon's pid are an earlier process's (in `earlier`), whatever
/// it returns.
pub fn clean_leftovers(
    cgroups: Option<CgroupHost>,
    config: &Config,
    jobs_dir: &Path,
    earlier: &mut Earlier,
) -> Result<usize, String> {
    let mut own_seen = BTreeSet::new();
    let mut late = std::mem::take(&mut earlier.late);
    let (result, listed_all) = sweep(cgroups, config, jobs_dir, earlier, &mut own_seen, &mut late);
    earlier.late = late;
    if earlier.own_pid.is_none() {
        earlier.own_pid = Some(own_seen);
        earlier.complete = listed_all;
    }
    result
}

/// How long a sweep leaves a cgroup to its late removal: that removal's bound and a margin.
const LEFT_TO_LATE_REMOVAL: Duration = Duration::from_secs(65);

/// One sweep: what it removed or the problems, and whether it listed everything.
fn sweep(
    cgroups: Option<CgroupHost>,
    config: &Config,
    jobs_dir: &Path,
    earlier: &Earlier,
    own_seen: &mut BTreeSet<String>,
    late: &mut BTreeMap<String, Instant>,
) -> (Result<usize, String>, bool) {
    let mut problems = Vec::new();
    let mut listed_all = true;
    let mut removed = 0;
    let host = match cgroups {
        Some(h) => Some(h),
        None => CgroupHost::detect(config.runner.cgroup_parent.as_deref())
            .map_err(|e| problems.push(format!("cgroups: {e}")))
            .ok(),
    };
    late.retain(|_, since| since.elapsed() < LEFT_TO_LATE_REMOVAL);
    if let Some(host) = &host {
        let listed = host.leftovers().map_err(|e| e.to_string());
        let names = listed.and_then(|paths| {
            leftovers_among(
                paths
                    .iter()
                    .filter_map(|p| p.file_name())
                    .map(|n| n.to_string_lossy().into_owned()),
                earlier,
                own_seen,
                live_leases,
            )
        });
        match names {
            Ok(names) => {
                for name in names {
                    if late.contains_key(&name) {
                        problems.push(format!(
                            "cgroup {name}: its processes are still being killed"
                        ));
                        continue;
                    }
                    removed += 1;
                    tracing::warn!(cgroup = %name, "killing and removing a job cgroup left by an earlier run");
                    match host.open_job(&name).map(|j| j.remove()) {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) | Err(e) => {
                            if matches!(e, crate::sandbox::cgroup::CgroupError::KillTimeout { .. })
                            {
                                late.insert(name.clone(), Instant::now());
                            }
                            problems.push(format!("cgroup {name}: {e}"));
                        }
                    }
                }
            }
            Err(e) => {
                listed_all = false;
                problems.push(format!("cannot list job cgroups: {e}"));
            }
        }
    } else {
        listed_all = false;
    }
    // Mounts on the host under the jobs directory (there should be none: a job mounts in
    // its own namespace); detach any, deepest first, before removing directories. A
    // folder with a mount still under it, or any when the mounts cannot be read, stays:
    // removing it would reach into what is mounted there.
    let mounted = match read_mountinfo() {
        Ok(info) => {
            let points = mounts_below(&info, jobs_dir);
            match leftovers_among(
                points.iter().map(|(n, _)| n.clone()),
                earlier,
                own_seen,
                live_leases,
            ) {
                Ok(left) => {
                    for (_, p) in points.iter().filter(|(n, _)| left.contains(n)) {
                        tracing::warn!(mount = %p.display(), "detaching a mount left by an earlier run");
                        if let Err(e) = nix::mount::umount2(p, nix::mount::MntFlags::MNT_DETACH) {
                            problems.push(format!("mount {}: {e}", p.display()));
                        }
                    }
                }
                Err(e) => problems.push(e),
            }
            read_mountinfo().map(|info| {
                mounts_below(&info, jobs_dir)
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect::<BTreeSet<String>>()
            })
        }
        Err(e) => Err(e),
    };
    let mounted = match mounted {
        Ok(names) => names,
        Err(e) => {
            listed_all = false;
            problems.push(format!("{e}: no job folder is removed"));
            return (Err(problems.join("; ")), listed_all);
        }
    };
    let listed = std::fs::read_dir(jobs_dir).map(|entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect::<Vec<String>>()
    });
    match listed.map(|names| leftovers_among(names, earlier, own_seen, live_leases)) {
        Ok(Err(e)) => problems.push(e),
        Ok(Ok(left)) => {
            for name in left {
                let path = jobs_dir.join(&name);
                if mounted.contains(&name) {
                    problems.push(format!("{}: a mount is still under it", path.display()));
                    continue;
                }
                removed += 1;
                tracing::warn!(dir = %path.display(), "removing a job directory left by an earlier run");
                if let Err(err) = std::fs::remove_dir_all(&path) {
                    if err.kind() != std::io::ErrorKind::NotFound {
                        problems.push(format!("{}: {err}", path.display()));
                    }
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            listed_all = false;
            problems.push(format!("cannot list {}: {e}", jobs_dir.display()));
        }
    }
    let result = if problems.is_empty() {
        Ok(removed)
    } else {
        Err(problems.join("; "))
    };
    (result, listed_all)
}

fn read_mountinfo() -> Result<String, String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))
}

/// The mount points `mountinfo` lists below `dir`, each with the name of the folder of
/// `dir` it lies in, deepest first. `dir` is compared by its real path (a relative path or
/// a link to it names the same mounts), and the points decoded (mountinfo writes a space,
/// a tab, a line break and a backslash as `\ooo`).
fn mounts_below(mountinfo: &str, dir: &Path) -> Vec<(String, PathBuf)> {
    let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut points: Vec<(String, PathBuf)> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(crate::sandbox::cgroup::unescape_path)
        .filter_map(|p| {
            let name = p.strip_prefix(&real).ok()?.components().next()?;
            let name = name.as_os_str().to_string_lossy().into_owned();
            Some((name, p))
        })
        .collect();
    points.sort_by_key(|(_, p)| std::cmp::Reverse(p.as_os_str().len()));
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`is_leftover`] in the first sweep, `runs` the earlier daemons.
    fn leftover(name: &str, runs: &[EarlierRun]) -> bool {
        is_leftover(
            name,
            &Earlier::at_start(runs.to_vec()),
            &mut BTreeSet::new(),
        )
    }

    #[test]
    fn owner_pid_from_names() {
        assert_eq!(owner_pid("job_1.123.0"), Some(123));
        assert_eq!(owner_pid("a.b.c.77.12"), Some(77));
        assert_eq!(owner_pid("job.x.1"), None);
        assert_eq!(owner_pid("123.4"), None);
        assert_eq!(owner_pid("openvibe"), None);
        assert_eq!(owner_pid(".5.6"), None);
    }

    #[test]
    fn leftovers_are_of_dead_runners_of_this_pid_or_of_earlier_daemons_still_ending() {
        let me = std::process::id();
        // Recovery runs before this daemon made anything: its own pid is an earlier one's.
        assert!(leftover(&format!("j.{me}.1"), &[]));
        assert!(
            leftover("j.4194305.1", &[]),
            "a pid above the kernel's limit (PID_MAX_LIMIT, 2^22), which cannot exist"
        );
        // ...unless a live uid lease names it: another runner's job, whose pid (of a pid
        // namespace of its own, where it may be 1, as this daemon's may) tells nothing. The
        // leases are read only when the pid rules would take a name.
        let names = || {
            [
                format!("j.{me}.1"),
                "j.4194305.1".into(),
                "j.4194305.2".into(),
            ]
            .into_iter()
            .chain(["not-a-job".to_string()])
        };
        let at_start = Earlier::at_start(Vec::new());
        let live = || {
            Ok(BTreeSet::from([
                format!("j.{me}.1"),
                "j.4194305.1".to_string(),
            ]))
        };
        assert_eq!(
            leftovers_among(names(), &at_start, &mut BTreeSet::new(), live),
            Ok(BTreeSet::from(["j.4194305.2".to_string()]))
        );
        let unread = || -> Result<BTreeSet<String>, String> { Err("unreadable".into()) };
        assert_eq!(
            leftovers_among(names(), &at_start, &mut BTreeSet::new(), unread),
            Err("unreadable".to_string()),
            "leases that cannot be read leave everything alone"
        );
        assert_eq!(
            leftovers_among(
                ["not-a-job".to_string()],
                &at_start,
                &mut BTreeSet::new(),
                unread
            ),
            Ok(BTreeSet::new()),
            "nothing the pid rules take: the leases are not read"
        );
        assert!(!leftover("not-a-job", &[]));

        // A live process (the test's parent stands for it): another runner's job...
        let parent = nix::unistd::getppid().as_raw() as u32;
        let name = format!("j.{parent}.1");
        assert!(!leftover(&name, &[]));
        // ...unless it is the earlier daemon that recorded its start while it lived...
        let now = super::super::journal::now_ms();
        let ending = EarlierRun {
            pid: parent,
            started_ms: now,
            identity: None,
        };
        assert!(leftover(&name, std::slice::from_ref(&ending)));
        // ...and not when the earlier daemon recorded its start before this process began:
        // the pid was taken again, by a process that may be running its own job.
        let start = started_ms(parent).expect("the parent's start");
        let reused = EarlierRun {
            pid: parent,
            started_ms: start - 5_000,
            identity: None,
        };
        assert!(!leftover(&name, &[reused]));
        // With the identity recorded, the process is told by it, not by the wall clock: the
        // parent is the recorded daemon even if the clock was set back since...
        let recorded = ProcessIdentity::of(parent).expect("the parent's identity");
        let set_back = EarlierRun {
            started_ms: start - 600_000,
            identity: Some(recorded.clone()),
            ..ending.clone()
        };
        assert!(leftover(&name, &[set_back]));
        // ...and another process (a later start, or another boot) is not, whatever the
        // wall clock says.
        for other in [
            ProcessIdentity {
                start_ticks: recorded.start_ticks + 1,
                ..recorded.clone()
            },
            ProcessIdentity {
                boot_id: "another-boot".into(),
                ..recorded.clone()
            },
        ] {
            let not_it = EarlierRun {
                identity: Some(other),
                ..ending.clone()
            };
            assert!(!leftover(&name, &[not_it]));
        }
    }

    #[test]
    fn a_process_start_is_read_on_the_wall_clock() {
        let now = super::super::journal::now_ms();
        let mine = started_ms(std::process::id()).expect("this process's start");
        assert!(
            mine <= now + 1_000 && mine > now - 3_600_000,
            "this test process started within the hour: {mine} against {now}"
        );
        assert_eq!(started_ms(4_194_305), None);
    }

    #[test]
    fn job_directories_of_dead_runners_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let dead = jobs.join("old.4194305.3");
        std::fs::create_dir_all(dead.join("skill/tools")).unwrap();
        std::fs::write(dead.join("skill/tools/a.js"), "x").unwrap();
        let mine = jobs.join(format!("cur.{}.1", std::process::id()));
        std::fs::create_dir_all(&mine).unwrap();
        let live = jobs.join(format!("other.{}.1", nix::unistd::getppid().as_raw()));
        std::fs::create_dir_all(&live).unwrap();
        let lock = lock_state_dir(tmp.path()).unwrap();
        assert!(
            lock_state_dir(tmp.path()).is_err(),
            "one daemon per state dir"
        );
        // Nothing in the folder a cleaner could remove frees it.
        for entry in std::fs::read_dir(tmp.path()).unwrap().flatten() {
            if entry.file_type().unwrap().is_file() {
                std::fs::remove_file(entry.path()).unwrap();
            }
        }
        assert!(
            lock_state_dir(tmp.path()).is_err(),
            "still one daemon once the folder's files are removed"
        );
        drop(lock);
        assert!(lock_state_dir(tmp.path()).is_ok(), "free once let go");
        // No cgroup host is needed for the directories; a failing detection is reported.
        let mut earlier = Earlier::at_start(Vec::new());
        let _ = clean_leftovers(None, &Config::default(), &jobs, &mut earlier);
        assert!(!dead.exists());
        assert!(
            !mine.exists(),
            "an earlier process's with this daemon's pid"
        );
        assert!(live.exists(), "a live runner's job is left alone");
        // A later sweep (a retry) leaves this daemon's own jobs alone.
        let own = jobs.join(format!("new.{}.2", std::process::id()));
        std::fs::create_dir_all(&own).unwrap();
        std::fs::create_dir_all(&dead).unwrap();
        let _ = clean_leftovers(None, &Config::default(), &jobs, &mut earlier);
        assert!(!dead.exists(), "a dead runner's, on a later sweep too");
        assert!(
            own.exists(),
            "this daemon's own job, made after the first sweep"
        );
    }

    #[test]
    fn a_commands_sweep_takes_dead_runners_folders_but_not_its_own_pid_nor_under_a_mount() {
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let dead = jobs.join("old.4194305.3");
        std::fs::create_dir_all(dead.join("skill")).unwrap();
        std::fs::write(dead.join("skill/a.js"), "x").unwrap();
        let busy = jobs.join("busy.4194305.4");
        std::fs::create_dir_all(&busy).unwrap();
        let mine = jobs.join(format!("pidns.{}.1", std::process::id()));
        std::fs::create_dir_all(&mine).unwrap();
        let mut earlier = Earlier::at_start(Vec::new());
        earlier.seen_none_of_own_pid();
        let stays = BTreeSet::from(["busy.4194305.4".to_string()]);
        let under = format!(
            "36 35 98:0 / {}/old.4194305.3/skill rw - tmpfs tmpfs rw\n",
            jobs.display()
        );
        let none = || Ok(BTreeSet::new());
        assert!(remove_dead_folders(&jobs, &stays, &earlier, &under, none).is_err());
        assert!(
            dead.exists(),
            "nothing goes while a mount lies under the folder"
        );
        let elsewhere = "36 35 98:0 / /mnt rw - tmpfs tmpfs rw\n";
        assert_eq!(
            remove_dead_folders(&jobs, &stays, &earlier, elsewhere, none),
            Ok(1)
        );
        assert!(!dead.exists(), "a dead runner's");
        assert!(
            busy.exists(),
            "its cgroup is left: its processes may still run"
        );
        assert!(mine.exists(), "a name with this process's pid");
    }

    #[test]
    fn mount_points_are_matched_by_the_folders_real_path_and_decoded() {
        let tmp = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(tmp.path())
            .unwrap()
            .join("state dir/jobs");
        std::fs::create_dir_all(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(real.parent().unwrap(), &link).unwrap();
        let escaped = real.display().to_string().replace(' ', "\\040");
        let info = format!(
            "1 0 8:1 / / rw - ext4 /dev/root rw\n\
             36 35 0:5 / {escaped}/a.4194305.1/skill rw - tmpfs tmpfs rw\n\
             37 35 0:5 / {escaped}/a.4194305.1/skill/deep rw - tmpfs tmpfs rw\n\
             38 35 0:5 / {escaped}x/b.1.1 rw - tmpfs tmpfs rw\n"
        );
        let found = mounts_below(&info, &link.join("jobs"));
        assert_eq!(
            found,
            vec![
                (
                    "a.4194305.1".to_string(),
                    real.join("a.4194305.1/skill/deep")
                ),
                ("a.4194305.1".to_string(), real.join("a.4194305.1/skill")),
            ],
            "deepest first; not a sibling folder whose name only begins the same"
        );
        assert_eq!(
            crate::sandbox::cgroup::unescape_path("/a\\134b\\011c\\9\\777"),
            PathBuf::from("/a\\b\tc\\9\\777"),
            "an escape past a byte is kept as written"
        );
    }

    #[test]
    fn after_the_first_sweep_a_name_with_this_daemons_pid_is_a_leftover_only_if_it_saw_it() {
        let me = std::process::id();
        let none = || Ok(BTreeSet::new());
        let mut earlier = Earlier::at_start(Vec::new());
        let mut seen = BTreeSet::new();
        let names = [format!("old.{me}.1"), "dead.4194305.1".to_string()];
        let first = leftovers_among(names.clone(), &earlier, &mut seen, none);
        assert_eq!(first, Ok(BTreeSet::from(names.clone())));
        assert_eq!(seen, BTreeSet::from([format!("old.{me}.1")]));
        earlier.own_pid = Some(seen);
        // Say the first sweep could not remove them: a retry takes them, not this daemon's
        // own job made since.
        let later = leftovers_among(
            names.iter().cloned().chain([format!("new.{me}.2")]),
            &earlier,
            &mut BTreeSet::new(),
            none,
        );
        assert_eq!(later, Ok(BTreeSet::from(names)));
    }
}
