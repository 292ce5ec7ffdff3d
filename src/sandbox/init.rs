//! The init stage: `openvibe-skill-runner-init sandbox-init <build id>` (or the runner
//! itself re-executed so, see [`super::init_exe`]), a fresh single-threaded process that
//! applies one plan and becomes Node.
//!
//! Three processes, one order:
//! - A (this process): reads the plan, joins the job's cgroups (v1; on v2 it makes B
//!   inside them; where a seccomp profile refuses clone3, B moves itself in), unshares
//!   the namespaces, forks B and waits for it.
//! - B, pid 1 of the job's pid namespace (on v2 it makes the cgroup namespace): forks C,
//!   reaps, and reports C's end on fd 3.
//! - C, pid 2: builds the root, drops every privilege, restricts itself and execs Node.
//!   A setup failure is written to fd 3 as a typed report and C exits 127.
//!
//! Node is never pid 1, so signals and aborts behave as anywhere else.

use super::{exec_gate, landlock, seccomp};
use crate::plan::{CgroupJoin, ExecGateStep, HandOver, MountStep, Plan, RootSteps, Start};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::resource::{setrlimit, Resource};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{chdir, execve, fork, pivot_root, setsid, ForkResult, Gid, Uid};
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::io::{Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};

/// The descriptor the parent reads reports from, and the job's network namespace when the
/// runner serves its egress (`Plan::join_netns`): numbers the plan and the runner share.
pub use crate::plan::{NETNS_FD, REPORT_FD, WARM_FD};
/// The largest plan the init stage accepts (a plan is a few KiB plus the skill's files:
/// the preload and the seccomp programs, as base64, are most of a small one).
const MAX_PLAN_BYTES: u64 = 4 * 1024 * 1024;

/// What the init stage tells the parent, one JSON line each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Report {
    /// A step failed before Node started; nothing of the tool ran.
    SetupFailed { step: String, error: String },
    /// Node exited with this code.
    Exited { code: i32 },
    /// Node was killed by this signal.
    Signaled { signal: i32 },
    /// A warm sandbox (`Start::Warm`): every layer is applied and Node is executed next,
    /// to wait at the preload's gate.
    Ready,
    /// A warm sandbox's pid 1 laid the job's files: the runner may open the gate.
    HandedOver,
}

/// Writes the plan the way `read_plan` expects it: a little-endian length, then JSON.
pub fn encode_plan(plan: &Plan) -> serde_json::Result<Vec<u8>> {
    encode_message(plan)
}

/// A little-endian length, then JSON: the plan on stdin, a warm sandbox's hand-over on
/// [`WARM_FD`].
pub fn encode_message<T: Serialize>(message: &T) -> serde_json::Result<Vec<u8>> {
    let json = serde_json::to_vec(message)?;
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out.extend_from_slice(&json);
    Ok(out)
}

fn report(r: &Report) {
    // SAFETY: fd 3 was set up by the parent for this process; ManuallyDrop keeps it open.
    let mut f = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(REPORT_FD) });
    if let Ok(mut line) = serde_json::to_vec(r) {
        line.push(b'\n');
        let _ = f.write_all(&line);
    }
}

/// Reads exactly the plan from stdin, never a byte more: what follows is the tool's input.
fn read_plan() -> Result<Plan, String> {
    read_message(0, "the plan")
}

/// Reads exactly one message written by [`encode_message`] from `fd`, never a byte more.
fn read_message<T: serde::de::DeserializeOwned>(fd: i32, what: &str) -> Result<T, String> {
    // SAFETY: `fd` is open in this process; ManuallyDrop keeps it open (stdin for Node).
    let mut input = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    let mut len = [0u8; 8];
    input
        .read_exact(&mut len)
        .map_err(|e| format!("reading the length of {what}: {e}"))?;
    let len = u64::from_le_bytes(len);
    if len > MAX_PLAN_BYTES {
        return Err(format!("{what} of {len} bytes is larger than allowed"));
    }
    let mut buf = vec![0u8; len as usize];
    input
        .read_exact(&mut buf)
        .map_err(|e| format!("reading {what}: {e}"))?;
    serde_json::from_slice(&buf).map_err(|e| format!("decoding {what}: {e}"))
}

/// Entry point of `sandbox-init <build id>`. Never returns.
pub fn main() -> ! {
    // Mount points and directories the stage makes are 0755 whatever the runner's umask.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    // A plan is only ever read by the init of the build that wrote it: another build's
    // could read the same fields differently.
    let build = std::env::args_os().nth(2);
    if build.as_deref() != Some(std::ffi::OsStr::new(super::init_exe::BUILD_ID)) {
        fail(
            "start",
            format!(
                "this init stage is build {} and was started for build {}: the runner and \
                 {} must come from the same build; reinstall the runner",
                super::init_exe::BUILD_ID,
                build
                    .as_deref()
                    .map_or("(none)".into(), |b| b.to_string_lossy()),
                super::init_exe::NAME,
            ),
        );
    }
    let plan = match read_plan() {
        Ok(p) => p,
        Err(e) => fail("read plan", e),
    };
    // Only a test build (the layer matrix, the fault tests) runs a job with less than
    // every layer; a shipped build refuses such a plan, however it came to be.
    if let Some(why) = plan.refused_without_hooks(crate::fault::HOOKS) {
        fail("read plan", why);
    }
    // A: a job with egress joins the namespace the runner made and serves (its listeners
    // exist already, so the tool cannot race them); a `deny` job gets a new, empty one below.
    if let Some(netns) = plan.join_netns {
        // SAFETY: setns(2) takes a descriptor number and reads no memory of ours; the kernel
        // refuses a descriptor that is not open or not a network namespace.
        if unsafe { libc::setns(netns, libc::CLONE_NEWNET) } != 0 {
            fail("join network namespace", nix::errno::Errno::last());
        }
    }
    // A: nothing but 0-2, the report descriptor, the exec gate's socket and, for a warm
    // sandbox, the hand-over's pipe crosses into the sandbox (the gate's socket is closed
    // before Node starts, see exec_gate; the hand-over's is pid 1's alone: close-on-exec,
    // and closed by pid 1's child before anything else).
    let warm = plan.start == Start::Warm;
    // SAFETY: close on descriptors this process does not use.
    unsafe {
        libc::close(NETNS_FD);
        if !warm {
            libc::close(WARM_FD);
        }
    }
    if let Err(e) = close_range(WARM_FD as u32 + 1, u32::MAX) {
        fail("close descriptors", e);
    }
    if warm {
        if let Err(e) = check_hand_over_pipe() {
            fail("hand-over pipe", e);
        }
    }
    if let Err(e) = exec_gate::check_inherited() {
        fail("exec gate", e);
    }
    // SAFETY: fcntl on our own descriptor.
    if unsafe { libc::fcntl(REPORT_FD, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        fail("report descriptor", std::io::Error::last_os_error());
    }
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        fail("parent death signal", e);
    }
    if let Err(e) = dump_no_memory() {
        fail("core dump filter", e);
    }
    // 0. The job's cgroups before anything of the job is forked: memory, pids and CPU
    //    limits hold for every process that follows. v1: this process joins them now. v2:
    //    pid 1 is made inside (below); this process opens the folder and stays outside.
    let cgroup_dir = match &plan.cgroup_join {
        CgroupJoin::Write { files } => match join_cgroups(files) {
            Ok(()) => None,
            Err(e) => fail("join cgroups", e),
        },
        CgroupJoin::CloneInto { dir } => match open_cgroup_dir(dir) {
            Ok(fd) => Some(fd),
            Err(e) => fail("join cgroups", e),
        },
    };
    // 0b. A time namespace this process could not set the clocks of (the runner lacks
    //     CAP_SYS_TIME): a helper makes it inside a user namespace of its own and sets
    //     them; this process joins it before the pid namespace below, so the helper is not
    //     the job's pid 1 and pid 1 is forked into the time namespace.
    if plan.borrowed_time_namespace {
        if let Err(e) = borrow_time_namespace() {
            fail("set the job's clocks", e);
        }
    }
    // 1. Namespaces as the plan lists them: mount, pid (for children), net (unless joined
    //    above), ipc, uts, and on v1 cgroup (on v2 pid 1 makes it, in the job's cgroup:
    //    `pid_one_unshare`). The flags go to the kernel as they are: it refuses any it
    //    does not know.
    let flags = CloneFlags::from_bits_retain(plan.unshare);
    if plan.root_steps.mounts() && !flags.contains(CloneFlags::CLONE_NEWNS) {
        fail(
            "unshare namespaces",
            "the plan mounts the job's root without a mount namespace of its own, which would mount in the host's; refusing (plan::build never makes such a plan)",
        );
    }
    if let Err(e) = unshare(flags) {
        fail("unshare namespaces", e);
    }
    // A new time namespace takes its offsets before any process is in it: pid 1, forked
    // next, is the first.
    if flags.contains(CloneFlags::from_bits_retain(libc::CLONE_NEWTIME)) {
        if let Err(e) = clocks_from_zero() {
            fail("set the job's clocks", e);
        }
    }
    // Pid 1 sets its parent-death signal only once it runs: if this process is gone by
    // then (the runner killed, and this process with it), no signal ever comes. This
    // process holds the write end of a pipe until it exits; pid 1 closes its own copy,
    // sets the signal, then finds the pipe hung up if this process has gone. A dying
    // process closes its descriptors before the kernel sends its children their
    // parent-death signals, so one of the two always reaches pid 1.
    let (parent, parent_alive) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok((read, write)) => (read, write),
        Err(e) => fail("parent death signal", e),
    };
    let (forked, move_in) = match cgroup_dir {
        // SAFETY: this process is single-threaded (a fresh exec that started no thread).
        None => (unsafe { fork() }, None),
        Some(dir) => match fork_into_cgroup(&dir) {
            // Refused as a call, not for this cgroup (a container's seccomp profile answers
            // clone3 with ENOSYS, as Docker's does, or EPERM): pid 1 is forked as on v1
            // and moves itself in before anything else, paying the RCU wait.
            Err(refused @ (nix::errno::Errno::ENOSYS | nix::errno::Errno::EPERM)) => {
                // SAFETY: as above, single-threaded.
                (unsafe { fork() }, Some(MoveIn { dir, refused }))
            }
            forked => (forked, None),
        },
    };
    match forked {
        Err(e) => fail(
            "fork pid 1",
            match plan.cgroup_join {
                CgroupJoin::CloneInto { ref dir } => format!(
                    "clone3 into the job's cgroup {}: {e}; the kernel refused this cgroup \
                     (`openvibe-skill-runner doctor` checks the runner's cgroup layout)",
                    dir.display()
                ),
                CgroupJoin::Write { .. } => e.to_string(),
            },
        ),
        Ok(ForkResult::Parent { child }) => {
            drop(move_in);
            drop(parent);
            // Held open until this process exits (see above).
            let _alive = parent_alive;
            close_stdio();
            exec_gate::close_inherited();
            // The hand-over's pipe is pid 1's alone: with a copy here, a pid 1 that died
            // before its hand-over would not hang the pipe up for the runner. (A cold
            // job's was closed at the start, and its number may be another pipe's now.)
            if warm {
                // SAFETY: closing this process's copy of a descriptor it does not use.
                unsafe { libc::close(WARM_FD) };
            }
            while let Err(nix::errno::Errno::EINTR) = waitpid(child, None) {}
            std::process::exit(0);
        }
        Ok(ForkResult::Child) => {
            drop(parent_alive);
            pid_one(plan, move_in, parent)
        }
    }
}

/// Whether the init stage still runs: the pipe it holds the only write end of has not
/// hung up (nothing is ever written to it).
fn still_runs(parent: &std::os::fd::OwnedFd) -> Result<bool, String> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd as _;
    let mut fds = [PollFd::new(parent.as_fd(), PollFlags::POLLIN)];
    loop {
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(0) => return Ok(true),
            Ok(_) => return Ok(false),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(format!("poll the init stage's pipe: {e}")),
        }
    }
}

/// v2, where clone3 was refused as a call: pid 1, forked outside the job's cgroup, moves
/// itself in through the folder A opened.
struct MoveIn {
    dir: std::os::fd::OwnedFd,
    /// clone3's answer, for the message if the move fails too.
    refused: nix::errno::Errno,
}

impl MoveIn {
    /// Writes `0` (the calling process) to the cgroup's `cgroup.procs`, which must exist:
    /// a folder that is no cgroup gets no file made in it.
    fn apply(self) -> Result<(), String> {
        use nix::fcntl::{openat, OFlag};
        let procs = openat(
            &self.dir,
            "cgroup.procs",
            OFlag::O_WRONLY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .and_then(|fd| nix::unistd::write(&fd, b"0"));
        procs.map(drop).map_err(|e| {
            format!(
                "clone3 into the job's cgroup was refused ({}: a seccomp profile around the \
                 runner, a container's, refuses clone3), and moving pid 1 in through \
                 cgroup.procs failed: {e}",
                self.refused
            )
        })
    }
}

/// Writes `0` (the calling thread; this process has no other) to each file, then checks
/// the process is listed in each cgroup: a job never runs outside its limits.
fn join_cgroups(files: &[PathBuf]) -> Result<(), String> {
    if files.is_empty() {
        return Err("the plan names no cgroup".into());
    }
    for file in files {
        std::fs::write(file, b"0").map_err(|e| format!("{}: {e}", file.display()))?;
        check_listed(file.parent().ok_or("a cgroup file without a directory")?)?;
    }
    Ok(())
}

/// This process is listed in the cgroup `dir` (its pid as this process's pid namespace
/// numbers it, as the kernel lists it to this process).
fn check_listed(dir: &Path) -> Result<(), String> {
    let me = std::process::id().to_string();
    let procs = std::fs::read_to_string(dir.join("cgroup.procs"))
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    if !procs.lines().any(|l| l.trim() == me) {
        return Err(format!("not in {} after joining it", dir.display()));
    }
    Ok(())
}

/// A, cgroup v2: the folder pid 1 is made in, opened before the namespaces.
fn open_cgroup_dir(dir: &Path) -> Result<std::os::fd::OwnedFd, String> {
    use nix::fcntl::{open, OFlag};
    if dir.as_os_str().is_empty() {
        return Err("the plan names no cgroup".into());
    }
    open(
        dir,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| format!("{}: {e}", dir.display()))
}

/// `linux/sched.h`'s flag, wider than the `c_int` the libc crate gives it.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// A, cgroup v2: forks pid 1 straight into the job's cgroup (`clone3` with
/// `CLONE_INTO_CGROUP`), which writing its pid to `cgroup.procs` after the fork would cost
/// an RCU grace period (see [`CgroupJoin`]). Returns like `fork(2)`.
fn fork_into_cgroup(dir: &std::os::fd::OwnedFd) -> nix::Result<ForkResult> {
    // SAFETY: `clone_args` is plain integers, for which zero is a valid value (and what
    // clone3 wants in every field not set).
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = libc::SIGCHLD as u64;
    args.cgroup = dir.as_raw_fd() as u64;
    // SAFETY: clone3 reads `args`, of the size given, and copies this process as fork(2)
    // does. The process is single-threaded, so the copy holds no lock that another thread
    // took. glibc's fork handlers do not run and its record of the thread's id keeps the
    // parent's: the child (pid 1) only forks through glibc, waits, reads, writes and
    // exits, none of which uses that record (glibc's own raise asks the kernel).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut libc::clone_args,
            std::mem::size_of::<libc::clone_args>(),
        )
    };
    match rc {
        0 => Ok(ForkResult::Child),
        pid if pid > 0 => Ok(ForkResult::Parent {
            child: nix::unistd::Pid::from_raw(pid as i32),
        }),
        _ => Err(nix::errno::Errno::last()),
    }
}

fn close_stdio() {
    for fd in 0..3 {
        // SAFETY: closing our own standard descriptors; the sandboxed child keeps its copies.
        unsafe { libc::close(fd) };
    }
}

/// B: pid 1 of the job. Forks Node's process and reports its end; in a warm sandbox,
/// first lays the job's files into the root at the hand-over.
fn pid_one(plan: Plan, move_in: Option<MoveIn>, parent: std::os::fd::OwnedFd) -> ! {
    if plan.pid_one_pause_ms > 0 {
        // The test hook (a plan with it is refused by a build without the hooks).
        std::thread::sleep(std::time::Duration::from_millis(
            plan.pid_one_pause_ms.into(),
        ));
    }
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        fail("parent death signal", e);
    }
    // The init stage may have ended before the signal was set: then it never comes.
    match still_runs(&parent) {
        Ok(true) => drop(parent),
        Ok(false) => fail(
            "parent death signal",
            "the init stage ended before pid 1 set its parent-death signal; pid 1 follows it",
        ),
        Err(e) => fail("parent death signal", e),
    }
    // v2 where clone3 was refused: into the job's cgroup first, before anything else.
    if let Some(move_in) = move_in {
        if let Err(e) = move_in.apply() {
            fail("join cgroups", e);
        }
    }
    // v2: made in (or moved into) the job's cgroup, it checks it is listed there.
    if let CgroupJoin::CloneInto { dir } = &plan.cgroup_join {
        if let Err(e) = check_listed(dir) {
            fail("join cgroups", e);
        }
    }
    // Then the namespaces the plan leaves to it (v2: the cgroup namespace, rooted at the
    // job's cgroup because pid 1 is its first process there).
    if plan.pid_one_unshare != 0 {
        if let Err(e) = unshare(CloneFlags::from_bits_retain(plan.pid_one_unshare)) {
            fail("unshare pid 1's namespaces", e);
        }
    }
    // Its working directory is the root, not the runner's (a CLI run's is wherever its
    // user stood): the tool's pivot_root then moves it into the job's root with the root
    // itself, and pid 1, which stays the host's uid 0, holds no way into the host's tree.
    if let Err(e) = chdir("/") {
        fail("pid 1's working directory", e);
    }
    // The host's root, to tell it from the job's at the hand-over (pid 1 writes as root).
    let host_root = match nix::sys::stat::stat("/") {
        Ok(st) => st.st_dev,
        Err(e) => fail("stat root", e),
    };
    // A tool that runs once its process is set up (a cold job's: the runner's go byte
    // follows the plan at once) waits before its exec for pid 1 to say it holds nothing
    // (see `shed_pid_one_privileges` below): one byte on this pipe, or its end if pid 1
    // failed. A warm sandbox's tool is held by its hand-over instead.
    let shed = match plan.start {
        Start::Warm => None,
        Start::Gated | Start::Direct => match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
            Ok(ends) => Some(ends),
            Err(e) => fail("pid 1's shed pipe", e),
        },
    };
    // SAFETY: still single-threaded.
    match unsafe { fork() } {
        Err(e) => fail("fork tool", e),
        Ok(ForkResult::Child) => {
            let err = become_tool(&plan, shed.map(|(read, _)| read));
            fail(err.0, err.1)
        }
        Ok(ForkResult::Parent { child }) => {
            let shed = shed.map(|(_, write)| write);
            close_stdio();
            exec_gate::close_inherited();
            let mut ended = None;
            let mut handed = false;
            if shed.is_some() && plan.hand_over_pause_ms > 0 {
                // The test hook (a plan with it is refused by a build without the hooks):
                // the tool must not start meanwhile.
                std::thread::sleep(std::time::Duration::from_millis(
                    plan.hand_over_pause_ms.into(),
                ));
            }
            if plan.start == Start::Warm {
                match await_hand_over(child, host_root) {
                    Ok(HandOverEnd::Handed) => handed = true,
                    Ok(HandOverEnd::ToolEnded(status)) => ended = Some(status),
                    // Ending pid 1 ends the namespace: Node, at its gate, with it.
                    Err((step, e)) => fail(step, e),
                }
            }
            // From here pid 1 only reaps and reports: it keeps no privilege a kernel bug
            // in reach of the job could borrow. In a warm sandbox this comes before the
            // hand-over's report, after which the runner lets the tool run at once: the
            // tool never runs beside a pid 1 that still holds them, and a shed that fails
            // ends a sandbox whose tool has not run.
            if let Err((step, e)) = shed_pid_one_privileges() {
                fail(step, e);
            }
            if let Some(shed) = shed {
                loop {
                    match nix::unistd::write(&shed, &[1]) {
                        Ok(_) => break,
                        Err(nix::errno::Errno::EINTR) => continue,
                        // A tool that ended meanwhile leaves no reader: nothing to tell.
                        Err(nix::errno::Errno::EPIPE) => break,
                        // Its process would wait to its wall clock: pid 1 ends it now.
                        Err(e) => fail("tell the tool pid 1 shed its privileges", e),
                    }
                }
                drop(shed);
            }
            if handed {
                report(&Report::HandedOver);
                if plan.hand_over_pause_ms > 0 {
                    // The test hook (a plan with it is refused by a build without the
                    // hooks): the tool runs meanwhile.
                    std::thread::sleep(std::time::Duration::from_millis(
                        plan.hand_over_pause_ms.into(),
                    ));
                }
            }
            loop {
                let status = match ended.take() {
                    Some(s) => Ok(s),
                    None => waitpid(None, None),
                };
                match status {
                    Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                        report(&Report::Exited { code });
                        break;
                    }
                    Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                        report(&Report::Signaled { signal: sig as i32 });
                        break;
                    }
                    Err(nix::errno::Errno::EINTR) | Ok(_) => continue,
                    Err(_) => break,
                }
            }
            std::process::exit(0);
        }
    }
}

/// B, once the tool runs (after the hand-over, in a warm sandbox): every capability
/// dropped, the bounding set first (it needs CAP_SETPCAP), then checked gone; no_new_privs
/// set, and not dumpable. It stays uid 0 of the host, with nothing a capability grants.
fn shed_pid_one_privileges() -> Result<(), StepError> {
    for set in [
        caps::CapSet::Bounding,
        caps::CapSet::Ambient,
        caps::CapSet::Inheritable,
        caps::CapSet::Effective,
        caps::CapSet::Permitted,
    ] {
        step("drop pid 1's capabilities", caps::clear(None, set))?;
    }
    for set in [
        caps::CapSet::Permitted,
        caps::CapSet::Effective,
        caps::CapSet::Bounding,
    ] {
        let held = step("read pid 1's capabilities", caps::read(None, set))?;
        if !held.is_empty() {
            return Err((
                "drop pid 1's capabilities",
                format!("{set:?} still holds {held:?}"),
            ));
        }
    }
    step("pid 1's no_new_privs", nix::sys::prctl::set_no_new_privs())?;
    step("pid 1 not dumpable", nix::sys::prctl::set_dumpable(false))?;
    Ok(())
}

/// A: the hand-over's descriptor must be the pipe the runner passed; it never crosses an
/// exec.
fn check_hand_over_pipe() -> Result<(), String> {
    // SAFETY: a descriptor number we only inspect; fstat fails on one that is not open.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(WARM_FD) };
    let st = nix::sys::stat::fstat(fd).map_err(|e| {
        format!("descriptor {WARM_FD}: {e}; the runner must pass the hand-over's pipe")
    })?;
    if st.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return Err(format!(
            "descriptor {WARM_FD} is not the hand-over's pipe (a runner and an init of different versions?)"
        ));
    }
    // SAFETY: fcntl on our own descriptor.
    if unsafe { libc::fcntl(WARM_FD, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err(format!(
            "hand-over descriptor: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

enum HandOverEnd {
    Handed,
    /// The tool ended before its job came (a warm sandbox that died waiting).
    ToolEnded(WaitStatus),
}

/// How often pid 1 looks whether the waiting tool still lives.
const WARM_CHECK_MS: u16 = 1000;

/// B in a warm sandbox: waits for the job's files on [`WARM_FD`] while the tool (Node at
/// its gate) lives, then lays them into the job's root, entered by the tool's process
/// (its `pivot_root` moved pid 1's root too), exactly as a cold job's are laid.
fn await_hand_over(child: nix::unistd::Pid, host_root: u64) -> Result<HandOverEnd, StepError> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use nix::sys::wait::WaitPidFlag;
    use std::os::fd::BorrowedFd;
    // SAFETY: WARM_FD was checked to be the runner's pipe and stays open in this process.
    let pipe = unsafe { BorrowedFd::borrow_raw(WARM_FD) };
    loop {
        let mut fds = [PollFd::new(pipe, PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(WARM_CHECK_MS)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => {}
            Ok(_) => break,
            Err(e) => return Err(("hand over", format!("waiting for the job: {e}"))),
        }
        match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::EINTR) => {}
            Ok(status) => return Ok(HandOverEnd::ToolEnded(status)),
            Err(e) => return Err(("hand over", format!("waiting for the tool: {e}"))),
        }
    }
    let hand_over: HandOver = step("hand over", read_message(WARM_FD, "the hand-over"))?;
    // SAFETY: closing our own descriptor, read to its end.
    unsafe { libc::close(WARM_FD) };
    // Never laid into the host's tree: the tool's pivot must have happened.
    let root = step("hand over", nix::sys::stat::stat("/"))?;
    let fs = step("hand over", nix::sys::statfs::statfs("/"))?;
    if root.st_dev == host_root || fs.filesystem_type() != nix::sys::statfs::TMPFS_MAGIC {
        return Err((
            "hand over",
            "pid 1's root is not the job's root; the job's files are not laid".into(),
        ));
    }
    // The root as a cold job's: writable for the files, at the size it would have had.
    let size = format!("size={}", hand_over.root_bytes);
    step(
        "hand over: writable root",
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REMOUNT | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some(size.as_str()),
        ),
    )?;
    lay_skill(&hand_over.skill_files, Some(&hand_over.entry))?;
    seal_root()?;
    // The tool waited at low priority (the runner started the sandbox so); it runs its
    // job at the runner's own, as a cold job would. Its process group is its session's:
    // every thread of it. So does pid 1, which reaps it and reports its end (the runner
    // does the init stage's).
    // A sandbox that waited at that value already (a runner that could not set it back,
    // see supervise::warm_nice) is left as it is: setting the tool's priority at all, even
    // to its own value, takes CAP_SYS_NICE (the tool runs as another uid).
    let nice = hand_over.nice;
    // SAFETY: getpriority takes numbers only (-1 on failure as well: then set anyway).
    let waited_at = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    if waited_at != nice {
        renice_tool(child, nice).map_err(|e| ("hand over: priority", e))?;
        // SAFETY: setpriority takes numbers only.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
            return Err((
                "hand over: priority",
                std::io::Error::last_os_error().to_string(),
            ));
        }
    }
    match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) => Ok(HandOverEnd::Handed),
        Ok(status) => Ok(HandOverEnd::ToolEnded(status)),
        Err(e) => Err(("hand over", format!("waiting for the tool: {e}"))),
    }
}

/// How often pid 1 sets the tool's threads to the runner's priority before it gives up.
const RENICE_ROUNDS: u32 = 100;

/// Sets every thread of the tool (its process group: Node leads its own session) to
/// `nice`, until none is left at another value. The kernel walks the group's threads
/// once; a thread Node creates meanwhile copies its creator's value before it joins the
/// group and may be missed, so the threads are read back (`/proc/<pid>/task`) and the
/// group set again while any differs.
fn renice_tool(child: nix::unistd::Pid, nice: i32) -> Result<(), String> {
    for _ in 0..RENICE_ROUNDS {
        // SAFETY: setpriority takes numbers only.
        if unsafe { libc::setpriority(libc::PRIO_PGRP, child.as_raw() as libc::id_t, nice) } != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        if threads_at_another_nice(child, nice)? == 0 {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Err(format!(
        "threads of the tool still at another priority after {RENICE_ROUNDS} rounds"
    ))
}

/// How many threads of `pid` run at a nice value other than `nice`.
fn threads_at_another_nice(pid: nix::unistd::Pid, nice: i32) -> Result<usize, String> {
    let dir = format!("/proc/{pid}/task");
    let tasks = std::fs::read_dir(&dir).map_err(|e| format!("{dir}: {e}"))?;
    let mut other = 0;
    for task in tasks.flatten() {
        // A thread that ended meanwhile has no stat left: it runs at nothing.
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // After the command (which may hold anything) come the state, field 3, and the
        // rest; nice is field 19.
        let value = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split(' ').nth(16))
            .and_then(|v| v.parse::<i32>().ok());
        match value {
            Some(v) if v == nice => {}
            Some(_) => other += 1,
            None => return Err(format!("{}: no nice value", task.path().display())),
        }
    }
    Ok(other)
}

/// A core dump of this process or any it forks (the filter is inherited, and kept across
/// execve) holds none of its memory: RLIMIT_CORE 1 stops core files and pipe helpers, but
/// a `core_pattern` naming a socket (`@`, Linux 6.16) ignores the limit, and would hand a
/// crashing tool's memory (its input) to whatever listens there. Without the file the
/// kernel writes no ELF cores at all.
fn dump_no_memory() -> Result<(), std::io::Error> {
    match std::fs::write("/proc/self/coredump_filter", "0") {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The offsets of the time namespace this process just made (`/proc/self/timens_offsets`,
/// for its children): its monotonic and boot clocks start near zero, as a freshly booted
/// machine's, so a job reads its own age there, not the host's uptime. The kernel refuses
/// a clock that would go below zero; the whole seconds taken off never make it.
fn clocks_from_zero() -> Result<(), String> {
    use nix::time::{clock_gettime, ClockId};
    let secs = |clock: ClockId| {
        clock_gettime(clock)
            .map(|t| t.tv_sec())
            .map_err(|e| format!("clock_gettime({clock}): {e}"))
    };
    let monotonic = secs(ClockId::CLOCK_MONOTONIC)?;
    let boottime = secs(ClockId::CLOCK_BOOTTIME)?;
    std::fs::write(
        "/proc/self/timens_offsets",
        format!("monotonic -{monotonic} 0\nboottime -{boottime} 0\n"),
    )
    .map_err(|e| format!("write /proc/self/timens_offsets: {e}"))
}

/// Joins a time namespace with clocks from zero that a helper child made inside a user
/// namespace, where it holds CAP_SYS_TIME ([`crate::plan::TimeNamespace::InUserNamespace`]).
/// This process keeps its own user namespace; being the owner's parent with CAP_SYS_ADMIN
/// lets it open the helper's namespace and join it. The helper exits once this process has
/// the namespace (or has died: the hold pipe's end closes either way).
fn borrow_time_namespace() -> Result<(), String> {
    use nix::fcntl::OFlag;
    use nix::unistd::pipe2;
    let (told_r, told_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    let (hold_r, hold_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    // SAFETY: this process is single-threaded (a fresh exec that started no thread).
    match unsafe { fork() }.map_err(|e| format!("fork the clocks' helper: {e}"))? {
        ForkResult::Child => {
            drop((told_r, hold_w));
            // The helper holds all capabilities in its user namespace: it keeps none of
            // the init stage's descriptors (the job's pipes, the report descriptor, the
            // exec gate's socket, the cgroup folder) while it has them.
            let keep = [told_w.as_raw_fd(), hold_r.as_raw_fd()];
            let time = CloneFlags::from_bits_retain(libc::CLONE_NEWTIME);
            let said = close_all_but(keep)
                .map_err(|e| format!("close the init stage's descriptors: {e}"))
                .and_then(|()| {
                    unshare(CloneFlags::CLONE_NEWUSER | time)
                        .map_err(|e| format!("unshare a user and a time namespace: {e}"))
                })
                .and_then(|()| clocks_from_zero())
                .err()
                .unwrap_or_default();
            let _ = std::fs::File::from(told_w).write_all(said.as_bytes());
            let _ = std::fs::File::from(hold_r).read(&mut [0u8; 1]);
            // SAFETY: _exit ends the helper at once, with no destructors or atexit handlers.
            unsafe { libc::_exit(0) }
        }
        ForkResult::Parent { child } => {
            drop((told_w, hold_r));
            let mut said = String::new();
            let joined = match std::fs::File::from(told_r).read_to_string(&mut said) {
                Err(e) => Err(format!("reading the clocks' helper: {e}")),
                Ok(_) if !said.is_empty() => Err(said),
                Ok(_) => {
                    let path = format!("/proc/{child}/ns/time_for_children");
                    std::fs::File::open(&path)
                        .map_err(|e| format!("open {path}: {e}"))
                        .and_then(|ns| {
                            nix::sched::setns(ns, CloneFlags::from_bits_retain(libc::CLONE_NEWTIME))
                                .map_err(|e| format!("join the helper's time namespace: {e}"))
                        })
                }
            };
            drop(hold_w);
            while let Err(nix::errno::Errno::EINTR) = waitpid(child, None) {}
            joined
        }
    }
}

/// Closes every descriptor of this process but the two in `keep`, with no allocation (the
/// clocks' helper runs it right after a fork).
fn close_all_but(mut keep: [std::os::fd::RawFd; 2]) -> Result<(), nix::errno::Errno> {
    keep.sort_unstable();
    let mut first: u32 = 0;
    for fd in keep {
        let Ok(fd) = u32::try_from(fd) else {
            return Err(nix::errno::Errno::EBADF);
        };
        if fd > first {
            close_range(first, fd - 1)?;
        }
        first = fd.saturating_add(1);
    }
    close_range(first, u32::MAX)
}

fn close_range(first: u32, last: u32) -> Result<(), nix::errno::Errno> {
    // SAFETY: close_range(2) takes numbers only; the caller owns every descriptor in range.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) };
    nix::errno::Errno::result(rc).map(drop)
}

fn fail(step: &str, err: impl std::fmt::Display) -> ! {
    report(&Report::SetupFailed {
        step: step.to_string(),
        error: err.to_string(),
    });
    // SAFETY: _exit ends this process at once, with no destructors or atexit handlers.
    unsafe { libc::_exit(127) }
}

type StepError = (&'static str, String);

fn step<T, E: std::fmt::Display>(name: &'static str, r: Result<T, E>) -> Result<T, StepError> {
    r.map_err(|e| (name, e.to_string()))
}

/// C: the ordered routine. Returns only on failure.
fn become_tool(plan: &Plan, shed: Option<std::os::fd::OwnedFd>) -> StepError {
    match setup(plan, shed) {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

/// Waits until pid 1 says it holds no privilege: its byte, or the pipe's end when pid 1
/// failed (or went), which ends this process before it becomes the tool.
fn await_pid_one_shed(shed: std::os::fd::OwnedFd) -> Result<(), StepError> {
    let mut byte = [0u8; 1];
    loop {
        return match nix::unistd::read(&shed, &mut byte) {
            Ok(1) => Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => Err((
                "await pid 1's shed",
                "pid 1 ended before it shed its privileges".into(),
            )),
            Err(e) => Err(("await pid 1's shed", e.to_string())),
        };
    }
}

fn setup(
    plan: &Plan,
    shed: Option<std::os::fd::OwnedFd>,
) -> Result<std::convert::Infallible, StepError> {
    // 0. The hand-over's pipe is pid 1's: the tool never holds it, not even before exec.
    if plan.start == Start::Warm {
        // SAFETY: closing a descriptor of our own that nothing else in this process uses.
        unsafe { libc::close(WARM_FD) };
    }
    // 1. Parent death: if pid 1 goes, so does the tool.
    step(
        "parent death signal",
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL),
    )?;
    // 2.-5. The job's root (the layer matrix, test-only, may leave it or the whole mount
    //    namespace out: see `build_root`).
    build_root(plan)?;
    // 6. Its own host name, its working directory, its own session.
    step("hostname", nix::unistd::sethostname(&plan.hostname))?;
    step("chdir cwd", chdir(&plan.cwd))?;
    step("setsid", setsid())?;
    // 7. Resource limits the cgroup does not cover, as the plan sets them: no core files
    //    (plan::CORE_BYTES says why 1), few descriptors, no file growth.
    step(
        "rlimit core",
        setrlimit(Resource::RLIMIT_CORE, plan.core_bytes, plan.core_bytes),
    )?;
    step(
        "rlimit nofile",
        setrlimit(Resource::RLIMIT_NOFILE, plan.nofile, plan.nofile),
    )?;
    step(
        "rlimit fsize",
        setrlimit(Resource::RLIMIT_FSIZE, plan.fsize_bytes, plan.fsize_bytes),
    )?;
    // 8. No capabilities, an unprivileged uid and gid of its own, no supplementary groups.
    if let Some(identity) = &plan.privileges {
        drop_privileges(identity)?;
    }
    // 9. No privilege can be gained again; the uid change cleared the death signal.
    step("no_new_privs", nix::sys::prctl::set_no_new_privs())?;
    step(
        "parent death signal",
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL),
    )?;
    // 10. Landlock, after the last mount.
    if let Some(rules) = &plan.landlock {
        step("landlock", landlock::apply(rules))?;
    }
    // 11. Seccomp, last: from here only Node's own syscalls are allowed.
    let exe = step("exe path", cstring(plan.exe.as_os_str()))?;
    let argv: Vec<CString> = step(
        "argv",
        plan.argv
            .iter()
            .map(|a| CString::new(a.as_str()))
            .collect::<Result<_, _>>(),
    )?;
    let env: Vec<CString> = step(
        "env",
        plan.env
            .iter()
            .map(|a| CString::new(a.as_str()))
            .collect::<Result<_, _>>(),
    )?;
    // 10a. Pid 1 holds nothing by now: the tool never runs beside a pid 1 that still
    //     holds what a kernel bug in its reach could borrow (its setup above takes longer
    //     than pid 1's shed, so this rarely waits).
    if let Some(shed) = shed {
        await_pid_one_shed(shed)?;
    }
    // 11a. The exec gate, before the policy (whose filter refuses seccomp(2)): from here
    //     every exec is the runner's to answer, and it lets through only the next one.
    match plan.exec_gate {
        ExecGateStep::HandOver => step(
            "exec gate",
            exec_gate::install_and_hand_over(exec_gate::GATE_FD),
        )?,
        // No gate: the runner's gate thread sees the socket close and answers nothing.
        ExecGateStep::CloseSocket => exec_gate::close_inherited(),
        ExecGateStep::HandOverClosedSocket => {
            exec_gate::close_inherited();
            step(
                "exec gate",
                exec_gate::install_and_hand_over(exec_gate::GATE_FD),
            )?
        }
    }
    // 11b. The policy's programs.
    if let Some(filters) = &plan.seccomp {
        step("seccomp", seccomp::install(filters))?;
    }
    // 12. Become Node: the gate's first notification, which the runner continues. A warm
    //     sandbox says first that it is ready (a write on the report descriptor, which
    //     closes with the exec).
    if plan.start == Start::Warm {
        report(&Report::Ready);
    }
    Err(match execve(&exe, &argv, &env) {
        Ok(never) => match never {},
        Err(e) => ("execve node", e.to_string()),
    })
}

/// Steps 2 to 5 of the routine: the job's own root, entered and sealed, as far as
/// `plan.root_steps` says (the layer matrix may stop it early: `RootSteps`).
fn build_root(plan: &Plan) -> Result<(), StepError> {
    let root: &Path = if plan.root_steps.mounts() {
        // 2. No mount event crosses between the host and the job, in either direction.
        step(
            "make mounts private",
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            ),
        )?;
        // 3. The job's root: an empty tmpfs holding only mount points.
        let size = format!("size={},mode=0755", plan.root_bytes);
        step(
            "mount root tmpfs",
            mount(
                Some("tmpfs"),
                &plan.root,
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some(size.as_str()),
            ),
        )?;
        // From here the root is reached through the working directory, which holds the
        // tmpfs itself, never through its host path again: a cleaner may remove that
        // path meanwhile (the jobs folder), and a path walked again would lay the mount
        // points on the host's disk, as root. The directory entered must be the tmpfs
        // just mounted (a mount of its own, on another device than its parent).
        step("chdir root", chdir(&plan.root))?;
        step("check root", entered_own_mount())?;
        Path::new(".")
    } else {
        &plan.root
    };
    if plan.root_steps != RootSteps::Enter {
        // The layer matrix: the files where the job finds them, no root to enter.
        write_files(root, crate::plan::SKILL_DIR, &plan.skill_files)?;
        return write_runtime_files(root, plan);
    }
    // 4. The skill's folder, the preload and /etc, written into the job's own root (no
    //    host path behind them); then Node, its libraries, devices and /proc, each
    //    read-only.
    step(
        "create skill directory",
        std::fs::create_dir_all(under(root, Path::new(crate::plan::SKILL_DIR))),
    )?;
    write_runtime_files(root, plan)?;
    for m in &plan.mounts {
        apply_mount(root, m)?;
    }
    // 5. Enter the root (the working directory already) and drop the host's tree.
    step("pivot_root", pivot_root(".", "."))?;
    step("detach old root", umount2(".", MntFlags::MNT_DETACH))?;
    step("chdir /", chdir("/"))?;
    // The tool's own files last, so that a warm sandbox, whose pid 1 lays them at the
    // hand-over (`lay_hand_over`), ends with the very same root (its inodes in the same
    // order).
    if plan.start != crate::plan::Start::Warm {
        lay_skill(&plan.skill_files, plan.main_link.as_deref())?;
    }
    seal_root()
}

/// The preload, and the plan's files under `/etc`, under `root`.
fn write_runtime_files(root: &Path, plan: &Plan) -> Result<(), StepError> {
    write_files(root, "/runtime", std::slice::from_ref(&plan.preload))?;
    if !plan.etc_files.is_empty() {
        write_files(root, "/etc", &plan.etc_files)?;
    }
    Ok(())
}

/// The tool's files under `/skill` and, for a gated start, `MAIN_LINK` to its entry; in
/// the job's root, entered and still writable.
fn lay_skill(files: &[crate::plan::PlanFile], entry: Option<&str>) -> Result<(), StepError> {
    write_files(Path::new("/"), crate::plan::SKILL_DIR, files)?;
    if let Some(entry) = entry {
        let target = Path::new(crate::plan::SKILL_DIR).join(entry);
        step(
            "main link",
            std::os::unix::fs::symlink(target, crate::plan::MAIN_LINK),
        )?;
    }
    Ok(())
}

/// The last step of the root: read-only, no set-uid, no devices, nothing executable
/// (Node and its loader are bind mounts of their own).
fn seal_root() -> Result<(), StepError> {
    step(
        "read-only root",
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_BIND
                | MsFlags::MS_REMOUNT
                | MsFlags::MS_RDONLY
                | MsFlags::MS_NOSUID
                | MsFlags::MS_NODEV
                | MsFlags::MS_NOEXEC,
            None::<&str>,
        ),
    )
}

/// Step 8: every capability dropped, the plan's groups (none), the job's own uid and gid.
fn drop_privileges(identity: &crate::plan::Privileges) -> Result<(), StepError> {
    for set in [
        caps::CapSet::Bounding,
        caps::CapSet::Ambient,
        caps::CapSet::Inheritable,
    ] {
        step("drop capabilities", caps::clear(None, set))?;
    }
    let gid = Gid::from_raw(identity.gid);
    let groups: Vec<Gid> = identity.groups.iter().map(|g| Gid::from_raw(*g)).collect();
    step("setgroups", nix::unistd::setgroups(&groups))?;
    let uid = Uid::from_raw(identity.uid);
    step("setresgid", nix::unistd::setresgid(gid, gid, gid))?;
    step("setresuid", nix::unistd::setresuid(uid, uid, uid))?;
    for set in [caps::CapSet::Permitted, caps::CapSet::Effective] {
        let held = step("read capabilities", caps::read(None, set))?;
        if !held.is_empty() {
            return Err(("drop capabilities", format!("{set:?} still holds {held:?}")));
        }
    }
    Ok(())
}

fn cstring(s: &std::ffi::OsStr) -> Result<CString, std::ffi::NulError> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(s.as_bytes())
}

/// Whether the working directory is a mount of its own (the job's root tmpfs, entered
/// right after it was mounted): on another device than its parent.
fn entered_own_mount() -> Result<(), String> {
    let here = nix::sys::stat::stat(".").map_err(|e| e.to_string())?;
    let parent = nix::sys::stat::stat("..").map_err(|e| e.to_string())?;
    if here.st_dev == parent.st_dev {
        return Err("the job's root is not the tmpfs just mounted (its folder was replaced or removed meanwhile)".into());
    }
    Ok(())
}

/// The path of `target` (absolute, inside the job) under the root: `.` (the working
/// directory, the job's tmpfs) or, with nothing mounted, the host's folder.
fn under(root: &Path, target: &Path) -> PathBuf {
    root.join(target.strip_prefix("/").unwrap_or(target))
}

fn make_mountpoint(path: &Path, dir: bool) -> Result<(), StepError> {
    if let Some(parent) = path.parent() {
        step("create mount point", std::fs::create_dir_all(parent))?;
    }
    if dir {
        step("create mount point", std::fs::create_dir_all(path))?;
    } else if !path.exists() {
        step("create mount point", std::fs::File::create(path).map(drop))?;
    }
    Ok(())
}

fn bind_read_only(source: &Path, target: &Path, extra: MsFlags) -> Result<(), StepError> {
    step(
        "bind mount",
        mount(
            Some(source),
            target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| format!("{} -> {}: {e}", source.display(), target.display())),
    )?;
    step(
        "read-only remount",
        mount(
            None::<&str>,
            target,
            None::<&str>,
            MsFlags::MS_BIND
                | MsFlags::MS_REMOUNT
                | MsFlags::MS_RDONLY
                | MsFlags::MS_NOSUID
                | extra,
            None::<&str>,
        )
        .map_err(|e| format!("{}: {e}", target.display())),
    )
}

fn write_files(root: &Path, dir: &str, files: &[crate::plan::PlanFile]) -> Result<(), StepError> {
    let at = under(root, Path::new(dir));
    step("create skill directory", std::fs::create_dir_all(&at))?;
    let files: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|f| (f.name.clone(), f.bytes.clone()))
        .collect();
    step("write skill files", crate::inputs::lay_out(&at, &files))
}

fn apply_mount(root: &Path, m: &MountStep) -> Result<(), StepError> {
    match m {
        MountStep::BindFile { source, target } => {
            let t = under(root, target);
            make_mountpoint(&t, false)?;
            bind_read_only(source, &t, MsFlags::MS_NODEV)
        }
        MountStep::Device { source, target } => {
            let t = under(root, target);
            make_mountpoint(&t, false)?;
            bind_read_only(source, &t, MsFlags::MS_NOEXEC)
        }
        MountStep::Proc { target } => {
            let t = under(root, target);
            make_mountpoint(&t, true)?;
            step(
                "mount proc",
                mount(
                    Some("proc"),
                    &t,
                    Some("proc"),
                    MsFlags::MS_RDONLY
                        | MsFlags::MS_NOSUID
                        | MsFlags::MS_NODEV
                        | MsFlags::MS_NOEXEC,
                    Some("hidepid=invisible,subset=pid"),
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests;
