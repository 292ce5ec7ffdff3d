//! One job's cgroup in every hierarchy: its processes, its limits' counters, freezing and
//! killing them, and its removal (also when dropped, on a blocking thread where a runtime
//! runs).

use super::*;
use crate::plan::CgroupJoin;

/// One job's cgroup, in every hierarchy. Dropping it kills the job and removes the cgroups.
#[derive(Debug)]
pub struct JobCgroup {
    pub(super) host: CgroupHost,
    pub(super) name: String,
    pub(super) dirs: Vec<PathBuf>,
    pub(super) removed: bool,
}

impl JobCgroup {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The job's cgroup directory in each hierarchy.
    pub fn paths(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// How the init stage puts the job into this cgroup ([`CgroupJoin`]): on v1 it writes
    /// `0` to each hierarchy's `tasks`, which for the calling thread skips the global
    /// threadgroup lock (and its RCU grace period, about 10 ms per job); on v2, whose one
    /// hierarchy is one directory, pid 1 is made inside it (an empty path, which the init
    /// stage refuses, should there be none).
    pub fn join(&self) -> CgroupJoin {
        match self.host.version() {
            CgroupVersion::V2 => CgroupJoin::CloneInto {
                dir: self.dirs.first().cloned().unwrap_or_default(),
            },
            CgroupVersion::V1 => CgroupJoin::Write {
                files: self.dirs.iter().map(|d| d.join("tasks")).collect(),
            },
        }
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

    pub(super) fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Kill every process of the job and wait (at most `KILL_TIMEOUT`) until none is left.
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

    pub(super) fn freeze_and_kill(&self, procs_files: &[PathBuf]) {
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

    /// A sampler of the job's memory where the kernel keeps no peak of it (see
    /// [`super::PeakSampler`]); `None` where it does. Needs a tokio runtime.
    pub fn sample_memory(&self) -> Option<super::PeakSampler> {
        self.host
            .backend
            .memory_to_sample(&self.dirs)
            .map(super::PeakSampler::start)
    }

    /// Kill the job's processes and remove its cgroups.
    pub fn remove(mut self) -> Result<(), CgroupError> {
        self.removed = true;
        self.destroy()
    }

    /// [`JobCgroup::remove`] on a thread where blocking belongs (it sleeps: up to
    /// `KILL_TIMEOUT` of killing and a second of rmdir retries), never on an async worker.
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

    /// Kills and removes. When the processes outlast the kill's bound, the error says so
    /// and the cgroup is handed to [`JobCgroup::remove_late`], which removes it once they
    /// are gone: a slow kill must not leave an empty job cgroup behind.
    fn destroy(&self) -> Result<(), CgroupError> {
        let done = self.kill_all().and_then(|()| self.rmdir_all());
        if matches!(done, Err(CgroupError::KillTimeout { .. })) {
            self.remove_late();
        }
        done
    }

    fn rmdir_all(&self) -> Result<(), CgroupError> {
        let mut first_error = None;
        for dir in &self.dirs {
            if let Err(err) = self.rmdir_retrying(dir) {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// On a thread of its own: keep killing for up to `LATE_REMOVAL_TIMEOUT`, then remove
    /// the cgroup once it is empty; what still fails is logged as left behind.
    fn remove_late(&self) {
        let late = self.view();
        let spawned = thread::Builder::new()
            .name("cgroup-late-removal".to_owned())
            .spawn(move || {
                let started = Instant::now();
                let killed = loop {
                    match late.kill_all() {
                        Ok(()) => break Ok(()),
                        Err(err) if started.elapsed() >= LATE_REMOVAL_TIMEOUT => break Err(err),
                        // Survivors after another KILL_TIMEOUT of killing: again, until
                        // the late bound.
                        Err(CgroupError::KillTimeout { .. }) => {}
                        Err(err) => break Err(err),
                    }
                };
                match killed.and_then(|()| late.rmdir_all()) {
                    Ok(()) => tracing::info!(
                        job = %late.name,
                        waited_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                        "job cgroup removed after its processes outlasted the kill's bound"
                    ),
                    Err(err) => {
                        tracing::error!(job = %late.name, %err, "job cgroup left behind")
                    }
                }
            });
        if let Err(err) = spawned {
            tracing::error!(job = %self.name, %err, "cannot start the thread that removes a job cgroup whose processes outlasted the kill: it is left behind");
        }
    }

    fn rmdir_retrying(&self, dir: &Path) -> Result<(), CgroupError> {
        let started = Instant::now();
        loop {
            match self.host.kernel.rmdir(dir) {
                Ok(()) => return Ok(()),
                Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(err) if err.raw_os_error() == Some(libc::EBUSY) => {
                    // Busy with a process that joined after the kill (an init stage still
                    // forking pid 1 into it): it is killed too, never left running.
                    self.kill_all()?;
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
