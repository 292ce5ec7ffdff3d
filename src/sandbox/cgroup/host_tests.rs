//! Against the real kernel, under the real detected parent: real limits, real processes.
//! They need root (they run as root here and in CI); without it they report a skip, which
//! `scripts/test` turns into a failure (`crate::test_skips`).
//! `OPENVIBE_TEST_CGROUP_PARENT` sets the parent, as the runner's configuration would.
//!
//! Every test names its cgroups `cgtest-<pid>-<what>`, touches only those, kills only
//! processes it started (or, through the job's cgroup, their children), and cleans up on
//! failure too: the job cgroup's Drop kills and removes it, `Started`'s Drop kills and reaps
//! the child by pid. Children are declared after the job, so they are dropped first.

use super::*;
use std::io::Read as _;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Child, Command, ExitStatus, Stdio};

const MIB: u64 = 1024 * 1024;

fn real_host(test: &str) -> Option<CgroupHost> {
    if !nix::unistd::geteuid().is_root() {
        crate::test_skips::skipped(test, "it needs root to create cgroups");
        return None;
    }
    let configured = std::env::var_os("OPENVIBE_TEST_CGROUP_PARENT").map(PathBuf::from);
    match CgroupHost::detect(configured.as_deref()) {
        Ok(host) => Some(host),
        Err(err) => panic!("cgroup detection failed on this root host: {err}"),
    }
}

fn unique(what: &str) -> String {
    format!("cgtest-{}-{what}", std::process::id())
}

/// A child this test started; dropping it SIGKILLs and reaps it by its pid.
struct Started(Child);

impl Started {
    /// Start `command` blocked on its stdin until `release`.
    fn spawn(command: &mut Command) -> Started {
        let child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
        Started(child)
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.0.id()).expect("pid fits i32")
    }

    fn release(&mut self) {
        let mut stdin = self.0.stdin.take().expect("stdin");
        stdin.write_all(b"go\n").expect("release the child");
    }

    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let started = Instant::now();
        while started.elapsed() < timeout {
            if let Some(status) = self.0.try_wait().expect("try_wait") {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }

    fn stderr(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut stderr) = self.0.stderr.take() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The cgroup paths `/proc/<pid>/cgroup` lists for `controller` (v1) or the v2 line.
fn cgroup_of(pid: i32, version: CgroupVersion, controller: &str) -> String {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("read /proc/pid/cgroup");
    text.lines()
        .find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let wanted = match version {
                CgroupVersion::V2 => id == "0" && controllers.is_empty(),
                CgroupVersion::V1 => controllers.split(',').any(|c| c == controller),
            };
            wanted.then(|| path.to_owned())
        })
        .unwrap_or_else(|| panic!("no {controller} line in {text}"))
}

fn assert_gone(host: &CgroupHost, paths: &[PathBuf], name: &str) {
    for path in paths {
        assert!(!path.exists(), "{} left behind", path.display());
    }
    let left = host.leftovers().expect("leftovers");
    assert!(
        !left
            .iter()
            .any(|p| p.file_name().is_some_and(|n| n == name)),
        "{name} still listed: {left:?}"
    );
}

#[test]
fn real_job_holds_its_process_measures_it_and_kills_it() {
    let Some(host) = real_host("real_job_holds_its_process_measures_it_and_kills_it") else {
        return;
    };
    let name = unique("basic");
    let job = host
        .create_job(
            &name,
            &CgroupLimits {
                mem_bytes: 64 * MIB,
                pids_max: 16,
            },
        )
        .expect("create job");
    assert!(job.paths().iter().all(|p| p.is_dir()));
    // The limits are in place before anything joins.
    let read_back = |file: &str| {
        job.paths()
            .iter()
            .find_map(|dir| fs::read_to_string(dir.join(file)).ok())
            .map(|text| text.trim().to_owned())
    };
    let mem = (64 * MIB).to_string();
    match host.version() {
        CgroupVersion::V1 => {
            assert_eq!(read_back("memory.limit_in_bytes"), Some(mem.clone()));
            if let Some(memsw) = read_back("memory.memsw.limit_in_bytes") {
                assert_eq!(memsw, mem);
            }
            assert_eq!(read_back("memory.swappiness").as_deref(), Some("0"));
        }
        CgroupVersion::V2 => {
            assert_eq!(read_back("memory.max"), Some(mem.clone()));
            assert_eq!(read_back("memory.oom.group").as_deref(), Some("1"));
            if let Some(swap) = read_back("memory.swap.max") {
                assert_eq!(swap, "0");
            }
        }
    }
    assert_eq!(read_back("pids.max").as_deref(), Some("16"));
    // Burn a little CPU inside the job, then sleep.
    let mut child = Started::spawn(Command::new("sh").args([
        "-c",
        "read x; i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; exec sleep 30",
    ]));
    let pid = child.pid();
    job.add_process(pid).expect("add the child");
    child.release();

    let path_ends = format!("/{name}");
    let controllers: &[&str] = match host.version() {
        CgroupVersion::V1 => &["memory", "pids"],
        CgroupVersion::V2 => &[""],
    };
    for controller in controllers {
        let path = cgroup_of(pid, host.version(), controller);
        assert!(
            path.ends_with(&path_ends),
            "{controller}: /proc/{pid}/cgroup says {path}"
        );
    }
    assert_eq!(job.pids().expect("pids"), vec![pid]);
    let exec_done = wait_until(Duration::from_secs(10), || {
        fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
    });
    assert!(exec_done, "the child never reached sleep");

    let stats = job.stats();
    assert!(stats.cpu_ns > 0, "{stats:?}");
    assert!(stats.mem_peak_bytes > 0, "{stats:?}");
    assert!(
        !stats.memory_limit_hit && !stats.oom_killed && !stats.pids_limit_hit,
        "{stats:?}"
    );

    job.kill_all().expect("kill_all");
    let status = child
        .wait_exit(Duration::from_secs(5))
        .expect("child ended");
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    assert!(job.pids().expect("pids").is_empty());

    let paths = job.paths().to_vec();
    job.remove().expect("remove");
    assert_gone(&host, &paths, &name);
}

/// A warm sandbox's hand-over starts the job's memory peak again, on every kernel: what
/// its start took before (here a 64 MiB buffer, freed) is not the job's. v1 resets its
/// peak in place, v2 from 6.12 keeps one per descriptor, and v2 from 5.19 to 6.11, whose
/// peak cannot be reset, samples `memory.current` from the mark. Before, that last one
/// gave the cgroup's whole peak, warm-up included.
#[tokio::test]
async fn real_hand_over_mark_starts_the_memory_peak_again() {
    let Some(host) = real_host("real_hand_over_mark_starts_the_memory_peak_again") else {
        return;
    };
    let name = unique("mark");
    let job = host
        .create_job(
            &name,
            &CgroupLimits {
                mem_bytes: 256 * MIB,
                pids_max: 16,
            },
        )
        .expect("create job");
    let mut child = Started::spawn(Command::new("sh").args([
        "-c",
        "read x; dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null; exec sleep 30",
    ]));
    let pid = child.pid();
    job.add_process(pid).expect("add the child");
    child.release();
    let slept = wait_until(Duration::from_secs(10), || {
        fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
    });
    assert!(slept, "the child never reached sleep");
    let kept_peak = job
        .paths()
        .iter()
        .any(|d| d.join("memory.peak").exists() || d.join("memory.max_usage_in_bytes").exists());
    if kept_peak {
        let before = job.stats().mem_peak_bytes;
        assert!(
            before >= 60 * MIB,
            "the start's 64 MiB is in the peak: {before}"
        );
    }
    let mut mark = job.mark_hand_over();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let peak = mark
        .peak_since()
        .unwrap_or_else(|| job.stats().mem_peak_bytes);
    assert!(
        peak > 0 && peak < 32 * MIB,
        "the job's peak since the mark: {peak}"
    );
    job.kill_all().expect("kill_all");
    let paths = job.paths().to_vec();
    job.remove().expect("remove");
    assert_gone(&host, &paths, &name);
}

#[test]
fn real_memory_limit_kills_the_job_not_the_host() {
    let Some(host) = real_host("real_memory_limit_kills_the_job_not_the_host") else {
        return;
    };
    let node = Path::new(crate::runtime::PINNED_PATH);
    if !node.is_file() {
        crate::test_skips::skipped(
            "real_memory_limit_kills_the_job_not_the_host",
            "the pinned Node is not installed (scripts/install-node)",
        );
        return;
    }
    let name = unique("memory");
    let limit = 32 * MIB;
    let job = host
        .create_job(
            &name,
            &CgroupLimits {
                mem_bytes: limit,
                pids_max: 16,
            },
        )
        .expect("create job");
    // Waits on stdin, so it allocates only once it is in the job; then ~200 MiB, 1 MiB
    // at a time, every page written.
    let mut child = Started::spawn(Command::new(node).args([
        "-e",
        "require('fs').readSync(0, Buffer.alloc(1)); const held = []; \
         for (let i = 0; i < 200; i++) held.push(Buffer.alloc(1 << 20, 1)); \
         console.log('survived', held.length);",
    ]));
    job.add_process(child.pid()).expect("add the child");
    child.release();
    let status = child
        .wait_exit(Duration::from_secs(30))
        .expect("the child should have been OOM-killed");
    let stderr = child.stderr();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "{status:?}, stderr: {stderr}"
    );
    let stats = job.stats();
    assert!(stats.memory_limit_hit, "{stats:?}");
    assert!(stats.oom_killed, "{stats:?}");
    assert!(stats.mem_peak_bytes > 0, "{stats:?}");
    assert!(
        stats.mem_peak_bytes <= limit,
        "peak {} above the limit {limit}",
        stats.mem_peak_bytes
    );
    // The host (this test process) is fine and can still allocate.
    let fine = vec![1u8; 64 * 1024 * 1024];
    assert_eq!(fine.iter().map(|b| u64::from(*b)).sum::<u64>(), 64 * MIB);

    let paths = job.paths().to_vec();
    job.remove().expect("remove");
    assert_gone(&host, &paths, &name);
}

#[test]
fn real_pids_limit_stops_a_fork_burst() {
    let Some(host) = real_host("real_pids_limit_stops_a_fork_burst") else {
        return;
    };
    let name = unique("pids");
    let job = host
        .create_job(
            &name,
            &CgroupLimits {
                mem_bytes: 64 * MIB,
                pids_max: 8,
            },
        )
        .expect("create job");
    let mut child = Started::spawn(Command::new("sh").args([
        "-c",
        "read x; i=0; while [ $i -lt 20 ]; do sleep 5 & i=$((i+1)); done; wait",
    ]));
    job.add_process(child.pid()).expect("add the child");
    child.release();
    let mut most = 0;
    let hit = wait_until(Duration::from_secs(10), || {
        most = most.max(job.pids().map(|p| p.len()).unwrap_or(0));
        job.stats().pids_limit_hit
    });
    assert!(
        hit,
        "pids.events never counted a refused fork: {:?}",
        job.stats()
    );
    for _ in 0..10 {
        most = most.max(job.pids().expect("pids").len());
        thread::sleep(Duration::from_millis(10));
    }
    assert!(most <= 8, "{most} processes in a job capped at 8");
    assert!(most >= 2, "the burst did start: {most}");

    job.kill_all().expect("kill_all");
    assert!(job.pids().expect("pids").is_empty());
    let status = child.wait_exit(Duration::from_secs(5)).expect("sh ended");
    // sh either died by SIGKILL or gave up on its own when a fork was refused.
    assert!(
        status.signal() == Some(libc::SIGKILL) || status.code().is_some(),
        "{status:?}"
    );
    let paths = job.paths().to_vec();
    job.remove().expect("remove");
    assert_gone(&host, &paths, &name);
}

#[test]
fn real_drop_kills_and_removes_and_names_are_not_reused() {
    let Some(host) = real_host("real_drop_kills_and_removes_and_names_are_not_reused") else {
        return;
    };
    let name = unique("drop");
    let limits = CgroupLimits {
        mem_bytes: 32 * MIB,
        pids_max: 4,
    };
    let job = host.create_job(&name, &limits).expect("create job");
    let err = host.create_job(&name, &limits).expect_err("exists");
    assert!(matches!(err, CgroupError::JobExists { .. }), "{err}");
    let mut child = Started::spawn(Command::new("sleep").arg("30"));
    job.add_process(child.pid()).expect("add the child");
    let paths = job.paths().to_vec();
    drop(job);
    let status = child
        .wait_exit(Duration::from_secs(5))
        .expect("child ended");
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    assert_gone(&host, &paths, &name);
}

#[test]
fn real_describe_names_version_and_parents() {
    let Some(host) = real_host("real_describe_names_version_and_parents") else {
        return;
    };
    let described = host.describe();
    let version = described
        .iter()
        .find(|(k, _)| k == "version")
        .map(|(_, v)| v.clone());
    assert_eq!(version, Some(host.version().to_string()));
    eprintln!("cgroups here: {described:#?}");
}

/// The v2 kill paths (cgroup.freeze, cgroup.kill) against the real kernel, on a hybrid
/// host's controller-less cgroup2 mount: they need no controller. Skipped elsewhere (a
/// pure v2 host runs them through the tests above).
#[test]
fn real_v2_freeze_and_kill_paths_on_a_hybrid_hosts_cgroup2_mount() {
    let test = "real_v2_freeze_and_kill_paths_on_a_hybrid_hosts_cgroup2_mount";
    let Some(host) = real_host(test) else {
        return;
    };
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let self_cgroup = fs::read_to_string("/proc/self/cgroup").expect("self cgroup");
    let v2_mount = common::parse_mountinfo(&mountinfo)
        .into_iter()
        .find(|m| m.v2);
    let own = common::parse_self_cgroup(&self_cgroup).v2;
    let (Some(mount), Some("/"), CgroupVersion::V1) = (v2_mount, own.as_deref(), host.version())
    else {
        crate::test_skips::skipped(test, "not a hybrid host with the runner in the v2 root");
        return;
    };
    let mount_dir = mount.dir(Path::new("/"));
    let parent = mount_dir.join(PARENT_NAME);
    common::create_parent(&HostKernel, &parent).expect("create the v2 parent");
    let name = unique("v2kill");
    let dir = parent.join(&name);
    HostKernel.mkdir(&dir).expect("mkdir the job");
    let v2_host = CgroupHost::from_parts(
        Arc::new(v2::V2::bare(mount_dir, parent)),
        Arc::new(HostKernel),
    );
    let job = JobCgroup {
        host: v2_host,
        name: name.clone(),
        dirs: vec![dir.clone()],
        removed: false,
    };
    let mut first = Started::spawn(Command::new("sleep").arg("30"));
    let mut second = Started::spawn(Command::new("sleep").arg("30"));
    job.add_process(first.pid()).expect("add");
    job.add_process(second.pid()).expect("add");
    assert_eq!(job.pids().expect("pids").len(), 2);

    // Freeze, kill one by one, thaw.
    job.freeze_and_kill(&job.procs_files());
    for child in [&mut first, &mut second] {
        let status = child.wait_exit(Duration::from_secs(5)).expect("ended");
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    }
    assert_eq!(
        fs::read_to_string(dir.join("cgroup.freeze"))
            .expect("freeze")
            .trim(),
        "0"
    );

    // cgroup.kill.
    let mut third = Started::spawn(Command::new("sleep").arg("30"));
    job.add_process(third.pid()).expect("add");
    assert!(
        job.host.backend.kill_file(&job.dirs).is_some(),
        "kernel ≥ 5.14"
    );
    job.kill_all().expect("kill_all");
    let status = third.wait_exit(Duration::from_secs(5)).expect("ended");
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");

    job.remove().expect("remove");
    assert!(!dir.exists());
}

/// `clone3_refused` tells a seccomp profile's refusal from the kernel's own answer:
/// nothing refuses the call here, and in a child under a filter that answers it with
/// ENOSYS (Docker's default) or EPERM, the probe says which.
#[test]
fn clone3_refused_tells_a_seccomp_refusal_from_the_kernels_answer() {
    use nix::sys::wait::{waitpid, WaitStatus};
    use nix::unistd::{fork, ForkResult};
    assert_eq!(clone3_refused(), None, "nothing filters clone3 here");
    assert!(v2_join(None).contains("made inside"), "{}", v2_join(None));
    let moved = v2_join(Some(nix::errno::Errno::ENOSYS));
    assert!(
        moved.contains("moves itself") && moved.contains("ENOSYS"),
        "{moved}"
    );
    for (errno, code) in [(libc::ENOSYS, 10), (libc::EPERM, 11)] {
        let program: seccompiler::BpfProgram = seccompiler::SeccompFilter::new(
            [(libc::SYS_clone3, vec![])].into_iter().collect(),
            seccompiler::SeccompAction::Allow,
            seccompiler::SeccompAction::Errno(errno as u32),
            seccompiler::TargetArch::x86_64,
        )
        .and_then(|f| f.try_into())
        .expect("the clone3 filter");
        let fprog = libc::sock_fprog {
            len: u16::try_from(program.len()).expect("a short program"),
            filter: program.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: the child makes only async-signal-safe calls (prctl, seccomp, the
        // probe's clone3, errno) on memory made before the fork, then _exits.
        match unsafe { fork() }.expect("fork") {
            ForkResult::Child => {
                // SAFETY: as above.
                let loaded = unsafe {
                    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                        && libc::syscall(
                            libc::SYS_seccomp,
                            libc::SECCOMP_SET_MODE_FILTER,
                            0,
                            &fprog as *const libc::sock_fprog,
                        ) == 0
                };
                let answer = match (loaded, clone3_refused()) {
                    (false, _) => 1,
                    (true, Some(e)) if e as i32 == errno => code,
                    (true, Some(_)) => 2,
                    (true, None) => 3,
                };
                // SAFETY: ends the child at once, with no destructors of the parent's state.
                unsafe { libc::_exit(answer) }
            }
            ForkResult::Parent { child } => {
                assert_eq!(
                    waitpid(child, None).expect("wait"),
                    WaitStatus::Exited(child, code),
                    "under a filter answering {errno}"
                );
            }
        }
    }
}
