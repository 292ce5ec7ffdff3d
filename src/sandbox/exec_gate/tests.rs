//! Unit tests of `src/sandbox/exec_gate.rs`.

use super::*;
use std::os::unix::process::CommandExt;

#[test]
fn kernel_versions() {
    assert_eq!(kernel_version("6.18.0-1-amd64"), Some((6, 18)));
    assert_eq!(kernel_version("5.4.0"), Some((5, 4)));
    assert_eq!(kernel_version("x"), None);
}

#[test]
fn the_program_sends_exactly_execve_and_execveat() {
    // Interpreted by hand: a small checker of the program's one path per syscall.
    let run = |arch: u32, nr: u32| -> u32 {
        let mut pc = 0usize;
        let mut acc = 0u32;
        loop {
            let i = PROGRAM[pc];
            match i.code {
                BPF_LD_W_ABS => acc = if i.k == SECCOMP_DATA_ARCH { arch } else { nr },
                BPF_JMP_JEQ_K => {
                    pc += if acc == i.k { i.jt } else { i.jf } as usize;
                }
                BPF_JMP_JGE_K => {
                    pc += if acc >= i.k { i.jt } else { i.jf } as usize;
                }
                BPF_RET_K => return i.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
            pc += 1;
        }
    };
    let x86 = AUDIT_ARCH_X86_64;
    assert_eq!(run(x86, 59), libc::SECCOMP_RET_USER_NOTIF);
    assert_eq!(run(x86, 322), libc::SECCOMP_RET_USER_NOTIF);
    for nr in [0, 1, 56, 57, 58, 60, 321, 323, 0x3fff_ffff] {
        assert_eq!(run(x86, nr), libc::SECCOMP_RET_ALLOW, "nr {nr}");
    }
    // x32's calls (its execve is 520 | 0x40000000, execveat 545 | 0x40000000) and another
    // arch (i386's execve is 11, through int 0x80) are killed by the gate itself, as the
    // policy kills them: before, the gate let them through and relied on the policy.
    for nr in [
        59 | 0x4000_0000,
        520 | 0x4000_0000,
        545 | 0x4000_0000,
        0x4000_0000,
        u32::MAX,
    ] {
        assert_eq!(
            run(x86, nr),
            libc::SECCOMP_RET_KILL_PROCESS,
            "x32 nr {nr:#x}"
        );
    }
    for (arch, nr) in [
        (0x4000_0003, 11),
        (0x4000_0003, 0),
        (0, 59),
        (0xc000_00b7, 221),
    ] {
        assert_eq!(
            run(arch, nr),
            libc::SECCOMP_RET_KILL_PROCESS,
            "arch {arch:#x} nr {nr}"
        );
    }
    assert!(kernel_support().is_ok(), "{:?}", kernel_support());
}

/// Runs `sh -c script` behind the gate, served by `decide`, as the init does: the
/// child installs the gate between fork and exec and hands its listener over, so its
/// exec of sh is the first notification. Returns sh's stdout and the gate's report.
fn behind_gate(script: &str, decide: Decide) -> (String, GateReport) {
    use nix::sys::socket::{setsockopt, socketpair, sockopt, AddressFamily, SockFlag, SockType};
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .expect("socketpair");
    setsockopt(&ours, sockopt::PassCred, &true).expect("SO_PASSCRED");
    let (stop_r, stop_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
    let server = std::thread::spawn(move || serve(ours, stop_r, decide));
    let sock = theirs.as_raw_fd();
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args(["-c", script]).env_clear();
    // SAFETY: only prctl, seccomp, sendmsg and close run between fork and exec; none
    // allocates or takes a lock.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            let listener = install()?;
            send_listener(sock, listener.as_raw_fd())?;
            drop(listener);
            libc::close(sock);
            Ok(())
        });
    }
    let out = cmd.output().expect("run sh behind the gate");
    drop(theirs);
    drop(stop_w);
    let report = server.join().expect("gate thread");
    (String::from_utf8_lossy(&out.stdout).into_owned(), report)
}

/// The first exec (sh) runs; every exec after it, by path, through /proc/self/exe,
/// through the loader and from a child process, is refused. Nothing is executed that
/// could change anything: /bin/true, and sh itself with `exit 0`.
#[test]
fn the_first_exec_runs_and_no_later_one_does() {
    let script = "echo started; \
        /bin/true; echo \"child=$?\"; \
        (exec /proc/self/exe -c 'exit 0'); echo \"self=$?\"; \
        (exec /lib64/ld-linux-x86-64.so.2 /bin/true); echo \"loader=$?\"";
    let (out, report) = behind_gate(script, Decide::Count);
    assert!(
        out.starts_with("started\n"),
        "the first exec must run: {out:?}"
    );
    for refused in ["child=", "self=", "loader="] {
        let line = out
            .lines()
            .find(|l| l.starts_with(refused))
            .unwrap_or_else(|| panic!("no {refused} line in {out:?}"));
        assert_ne!(
            line,
            format!("{refused}0"),
            "{refused}: an exec ran: {out:?}"
        );
    }
    assert!(report.continued, "{report:?}");
    assert_eq!(report.refused, 3, "{report:?}");
}

/// The gate removed (every exec continues): the same script's later execs run, so the
/// test above would fail. This keeps that test honest.
#[test]
fn without_the_gate_the_later_execs_run() {
    let (out, report) = behind_gate(
        "echo started; /bin/true; echo \"child=$?\"",
        Decide::ContinueAll,
    );
    assert_eq!(out, "started\nchild=0\n");
    assert!(report.continued && report.refused == 0, "{report:?}");
}

/// A first notification that is not the sender's execve is refused, and nothing
/// continues after it: the listener is sent by one process and the exec comes from its
/// child, so the credentials name another pid than the notification does.
#[test]
fn only_the_senders_own_exec_continues() {
    use nix::sys::socket::{setsockopt, socketpair, sockopt, AddressFamily, SockFlag, SockType};
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .expect("socketpair");
    setsockopt(&ours, sockopt::PassCred, &true).expect("SO_PASSCRED");
    let (stop_r, stop_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
    let server = std::thread::spawn(move || serve(ours, stop_r, Decide::Count));
    let sock = theirs.as_raw_fd();
    let mut cmd = std::process::Command::new("/bin/true");
    // SAFETY: only prctl, seccomp, sendmsg, close, fork, execve, waitpid and _exit run
    // between fork and exec; none allocates or takes a lock. Neither process returns:
    // the grandchild's exit code says how its exec ended, the child passes it on.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            let listener = install()?;
            send_listener(sock, listener.as_raw_fd())?;
            drop(listener);
            libc::close(sock);
            match libc::fork() {
                -1 => Err(io::Error::last_os_error()),
                0 => {
                    let path = c"/bin/true";
                    let argv = [path.as_ptr(), std::ptr::null()];
                    let envp = [std::ptr::null()];
                    libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
                    let e = *libc::__errno_location();
                    libc::_exit(if e == libc::EPERM { 50 } else { 51 });
                }
                child => {
                    let mut status = 0;
                    libc::waitpid(child, &mut status, 0);
                    libc::_exit(if libc::WIFEXITED(status) {
                        libc::WEXITSTATUS(status)
                    } else {
                        41
                    });
                }
            }
        });
    }
    let status = cmd.status().expect("run /bin/true behind the gate");
    drop(theirs);
    drop(stop_w);
    let report = server.join().expect("gate thread");
    assert_eq!(
        status.code(),
        Some(50),
        "the grandchild's exec must fail with EPERM"
    );
    assert!(!report.continued, "{report:?}");
    assert_eq!(report.refused, 1, "{report:?}");
}

/// Each gate serves on a thread of its own: however many gates are open (running jobs and
/// warm sandboxes waiting), tokio's blocking threads stay free for the work that ends them
/// (the cgroup kill, its removal). On the runtime's blocking pool, two open gates here would
/// hold both of its threads, and the blocking task below would never run.
#[test]
fn open_gates_hold_no_blocking_thread_of_the_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        // Each with the init's end kept open, as while its job runs.
        let gates: Vec<(Gate, std::os::fd::OwnedFd)> =
            (0..3).map(|_| start().expect("a gate")).collect();
        let ran = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            tokio::task::spawn_blocking(|| 42),
        )
        .await;
        assert!(
            matches!(ran, Ok(Ok(42))),
            "a blocking task did not run while three gates were open"
        );
        for (g, theirs) in gates {
            drop(theirs);
            let report = tokio::time::timeout(std::time::Duration::from_secs(5), g.finish())
                .await
                .expect("a gate's thread ends once stopped");
            assert_eq!(report, GateReport::default());
        }
    });
}
