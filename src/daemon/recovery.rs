//! At start: one daemon per state directory, and nothing of an earlier run left behind.
//!
//! The engine names each job's cgroup and directory `<job_id>.<pid>.<seq>`, `pid` being
//! the runner process that ran it. A leftover is removed when that process is an earlier
//! daemon of this state directory (the journal lists their pids) or is gone (a `run-job`
//! or a daemon that died): killing through the job's cgroup ends every process of it, and
//! the job's mounts live in its own mount namespace, which goes with them. A leftover of a
//! runner process that still lives is another runner's running job and is left alone.

use crate::config::Config;
use crate::sandbox::cgroup::CgroupHost;
use std::collections::BTreeSet;
use std::os::fd::AsRawFd as _;
use std::path::Path;

/// The flock that keeps a second daemon off this state directory; held while it lives.
pub struct StateLock {
    _file: std::fs::File,
}

pub fn lock_state_dir(state: &Path) -> Result<StateLock, String> {
    let path = state.join("daemon.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // SAFETY: flock on a descriptor we own.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r != 0 {
        return Err(format!(
            "another daemon uses the state directory {} (it holds {}); give this one --state-dir",
            state.display(),
            path.display()
        ));
    }
    Ok(StateLock { _file: file })
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

fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(nix::errno::Errno::ESRCH) => false,
        Err(_) => true,
    }
}

fn is_leftover(name: &str, earlier: &[u32]) -> bool {
    match owner_pid(name) {
        Some(pid) if pid == std::process::id() => false,
        Some(pid) => earlier.contains(&pid) || !alive(pid),
        None => false,
    }
}

/// Kills and removes the leftovers; returns how many were found.
pub fn clean_leftovers(
    cgroups: Option<CgroupHost>,
    config: &Config,
    jobs_dir: &Path,
    earlier: &[u32],
) -> Result<usize, String> {
    let mut problems = Vec::new();
    let mut removed = 0;
    let host = match cgroups {
        Some(h) => Some(h),
        None => CgroupHost::detect(config.runner.cgroup_parent.as_deref())
            .map_err(|e| problems.push(format!("cgroups: {e}")))
            .ok(),
    };
    if let Some(host) = host {
        match host.leftovers() {
            Ok(paths) => {
                let names: BTreeSet<String> = paths
                    .iter()
                    .filter_map(|p| p.file_name())
                    .map(|n| n.to_string_lossy().into_owned())
                    .filter(|n| is_leftover(n, earlier))
                    .collect();
                for name in names {
                    removed += 1;
                    tracing::warn!(cgroup = %name, "killing and removing a job cgroup left by an earlier run");
                    match host.open_job(&name).map(|j| j.remove()) {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) | Err(e) => problems.push(format!("cgroup {name}: {e}")),
                    }
                }
            }
            Err(e) => problems.push(format!("cannot list job cgroups: {e}")),
        }
    }
    // Mounts on the host under the jobs directory (there should be none: a job mounts in
    // its own namespace); detach any, deepest first, before removing directories.
    let jobs_prefix = jobs_dir.display().to_string();
    if let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") {
        let mut points: Vec<&str> = info
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| m.starts_with(&format!("{jobs_prefix}/")))
            .collect();
        points.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for p in points {
            let name = p[jobs_prefix.len() + 1..].split('/').next().unwrap_or("");
            if is_leftover(name, earlier) {
                tracing::warn!(mount = p, "detaching a mount left by an earlier run");
                if let Err(e) = nix::mount::umount2(p, nix::mount::MntFlags::MNT_DETACH) {
                    problems.push(format!("mount {p}: {e}"));
                }
            }
        }
    }
    match std::fs::read_dir(jobs_dir) {
        Ok(entries) => {
            for e in entries.filter_map(Result::ok) {
                let name = e.file_name().to_string_lossy().into_owned();
                if !is_leftover(&name, earlier) {
                    continue;
                }
                removed += 1;
                tracing::warn!(dir = %e.path().display(), "removing a job directory left by an earlier run");
                if let Err(err) = std::fs::remove_dir_all(e.path()) {
                    if err.kind() != std::io::ErrorKind::NotFound {
                        problems.push(format!("{}: {err}", e.path().display()));
                    }
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => problems.push(format!("cannot list {}: {e}", jobs_dir.display())),
    }
    if problems.is_empty() {
        Ok(removed)
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn leftovers_are_of_earlier_or_dead_runners_only() {
        let me = std::process::id();
        assert!(!is_leftover(&format!("j.{me}.1"), &[me]));
        assert!(is_leftover("j.4000000.1", &[]), "a pid that cannot exist");
        let parent = nix::unistd::getppid().as_raw() as u32;
        assert!(!is_leftover(&format!("j.{parent}.1"), &[]));
        assert!(is_leftover(&format!("j.{parent}.1"), &[parent]));
        assert!(!is_leftover("not-a-job", &[]));
    }

    #[test]
    fn job_directories_of_dead_runners_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let dead = jobs.join("old.4000000.3");
        std::fs::create_dir_all(dead.join("skill/tools")).unwrap();
        std::fs::write(dead.join("skill/tools/a.js"), "x").unwrap();
        let mine = jobs.join(format!("cur.{}.1", std::process::id()));
        std::fs::create_dir_all(&mine).unwrap();
        let lock = lock_state_dir(tmp.path()).unwrap();
        assert!(
            lock_state_dir(tmp.path()).is_err(),
            "one daemon per state dir"
        );
        drop(lock);
        // No cgroup host is needed for the directories; a failing detection is reported.
        let _ = clean_leftovers(None, &Config::default(), &jobs, &[]);
        assert!(!dead.exists());
        assert!(mine.exists());
    }
}
