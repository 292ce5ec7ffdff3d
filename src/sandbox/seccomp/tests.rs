//! Tests of the seccomp layer.
//!
//! Pure tests run the compiled programs through a small classic-BPF interpreter that
//! combines filters the way the kernel does. Tests that install filters do it in a child
//! process, because seccomp cannot be undone: the test binary re-executes itself to run
//! [`reexec_probe`] (birdcage style), or installs in `pre_exec` right before exec'ing Node.

use super::compile::compile_filters;
use super::policy::applies_in;
use super::*;
use crate::bpf::{x32_guard, AUDIT_ARCH_X86_64};
use crate::job::Net;
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
use std::io::Write as _;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SHIPPED: &str = include_str!("../../../policies/seccomp.json");
pub(super) const NETS: [Net; 3] = [Net::Deny, Net::OpenvibeOnly, Net::Public];

pub(super) const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
pub(super) const EPERM_RET: u32 = RET_ERRNO | libc::EPERM as u32;
pub(super) const ENOSYS_RET: u32 = RET_ERRNO | libc::ENOSYS as u32;

const CLONE_THREAD_FLAGS: u64 = (libc::CLONE_VM
    | libc::CLONE_FS
    | libc::CLONE_FILES
    | libc::CLONE_SIGHAND
    | libc::CLONE_THREAD
    | libc::CLONE_SYSVSEM
    | libc::CLONE_SETTLS
    | libc::CLONE_PARENT_SETTID
    | libc::CLONE_CHILD_CLEARTID) as u64;
const NAMESPACE_FLAGS: [libc::c_int; 8] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWTIME,
];

pub(super) fn shipped() -> ValidPolicy {
    match parse_policy(SHIPPED) {
        Ok(p) => p,
        Err(e) => panic!("the shipped policy does not parse: {e}"),
    }
}

fn compiled(net: Net) -> CompiledFilters {
    match compile(&shipped(), net) {
        Ok(f) => f,
        Err(e) => panic!(
            "the shipped policy does not compile for {}: {e}",
            net.as_str()
        ),
    }
}

/// The filters [`compile`] joins, each a program of its own, in installation order.
pub(super) fn separate_filters(policy: &ValidPolicy, net: Net) -> CompiledFilters {
    match compile_filters(policy, net) {
        Ok(filters) => CompiledFilters {
            programs: filters.into_iter().map(|f| f.program).collect(),
        },
        Err(e) => panic!("the policy does not compile for {}: {e}", net.as_str()),
    }
}

fn separate(net: Net) -> CompiledFilters {
    separate_filters(&shipped(), net)
}

// ---------------------------------------------------------------------------------------
// A classic-BPF interpreter for seccomp programs and the kernel's way of combining them.

#[derive(Clone, Copy)]
pub(super) struct Call {
    pub(super) nr: i64,
    pub(super) arch: u32,
    pub(super) args: [u64; 6],
}

pub(super) fn call(nr: i64, args: &[u64]) -> Call {
    let mut all = [0u64; 6];
    all[..args.len()].copy_from_slice(args);
    Call {
        nr,
        arch: AUDIT_ARCH_X86_64,
        args: all,
    }
}

fn load(c: &Call, offset: u32) -> u32 {
    match offset {
        0 => c.nr as u32,
        4 => c.arch,
        16..=63 if offset.is_multiple_of(4) => {
            let arg = c.args[((offset - 16) / 8) as usize];
            if (offset - 16).is_multiple_of(8) {
                arg as u32
            } else {
                (arg >> 32) as u32
            }
        }
        _ => panic!("load from offset {offset} of seccomp_data"),
    }
}

fn run(program: &[Instruction], c: &Call) -> u32 {
    let mut acc = 0u32;
    let mut pc = 0usize;
    loop {
        let ins = program[pc];
        pc += 1;
        match ins.code {
            0x20 => acc = load(c, ins.k),
            0x54 => acc &= ins.k,
            0x05 => pc += ins.k as usize,
            0x15 | 0x25 | 0x35 => {
                let taken = match ins.code {
                    0x15 => acc == ins.k,
                    0x25 => acc > ins.k,
                    _ => acc >= ins.k,
                };
                pc += usize::from(if taken { ins.jt } else { ins.jf });
            }
            0x06 => return ins.k,
            code => panic!("instruction code {code:#x} at {}", pc - 1),
        }
    }
}

/// seccomp_run_filters(): newest filter first, a result replaced only by a strictly stricter
/// action (ACTION_ONLY compared as s32), so the newest filter wins a tie.
pub(super) fn evaluate(filters: &CompiledFilters, c: &Call) -> u32 {
    let mut ret = RET_ALLOW;
    for program in filters.programs.iter().rev() {
        let cur = run(program, c);
        let action = |r: u32| (r & libc::SECCOMP_RET_ACTION_FULL) as i32;
        if action(cur) < action(ret) {
            ret = cur;
        }
    }
    ret
}

fn outcome(net: Net, nr: i64, args: &[u64]) -> u32 {
    evaluate(&compiled(net), &call(nr, args))
}

pub(super) fn name_of(ret: u32) -> String {
    match ret {
        RET_ALLOW => "allow".into(),
        RET_KILL_PROCESS => "kill-process".into(),
        r if r & 0xffff_0000 == RET_ERRNO => format!("errno {}", r & 0xffff),
        r => format!("{r:#x}"),
    }
}

#[track_caller]
fn assert_outcome(net: Net, what: &str, nr: i64, args: &[u64], want: u32) {
    let got = outcome(net, nr, args);
    assert_eq!(
        name_of(got),
        name_of(want),
        "{what} in net mode {}",
        net.as_str()
    );
}

// ---------------------------------------------------------------------------------------
// The shipped policy.

#[test]
fn shipped_policy_parses_and_every_group_says_why() {
    let policy = shipped();
    assert_eq!(policy.architectures, [Arch::X86_64]);
    assert_eq!(policy.default_action, Action::Errno);
    assert_eq!(policy.default_errno_ret, Some(1));
    for (i, group) in policy.syscalls.iter().enumerate() {
        let why = group.comment.as_deref().unwrap_or("").trim();
        assert!(why.len() > 20, "syscalls[{i}] has no reason in its comment");
    }
}

#[test]
fn load_policy_reads_the_file_and_names_a_missing_one() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/seccomp.json");
    assert_eq!(load_policy(&path).ok(), Some(shipped()));
    let missing = Path::new("/nonexistent/seccomp.json");
    let err = load_policy(missing).err().map(|e| e.to_string());
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("/nonexistent/seccomp.json")),
        "{err:?}"
    );
}

#[test]
fn every_name_in_the_shipped_policy_is_a_known_syscall() {
    for group in &shipped().syscalls {
        for name in &group.names {
            assert!(syscall_number(name).is_some(), "unknown syscall {name}");
        }
    }
}

#[test]
fn syscall_numbers_are_the_x86_64_ones() {
    assert_eq!(syscall_number("read"), Some(0));
    assert_eq!(syscall_number("clone"), Some(56));
    assert_eq!(syscall_number("clone3"), Some(435));
    assert_eq!(syscall_number("io_uring_setup"), Some(425));
    assert_eq!(syscall_number("_sysctl"), Some(156));
    assert_eq!(syscall_number("SYS_read"), None);
    assert_eq!(syscall_number("no_such_call"), None);
    assert_eq!(syscall_number(""), None);
}

#[test]
fn compiles_for_every_net_mode_within_kernel_limits() {
    for net in NETS {
        let filters = compiled(net);
        // allow list, ENOSYS, EPERM (explicit denials, TIOCSTI/TIOCLINUX), joined
        assert_eq!(separate(net).programs.len(), 3, "{}", net.as_str());
        assert_eq!(filters.programs.len(), 1, "{}", net.as_str());
        for program in &filters.programs {
            assert!(!program.is_empty() && program.len() <= MAX_PROGRAM_LEN);
        }
        assert!(filters.to_bpf_programs().is_ok());
    }
}

#[test]
fn compiled_filters_round_trip_through_plan_json() {
    for net in NETS {
        let filters = compiled(net);
        let json = serde_json::to_string(&filters).unwrap_or_default();
        let back: Result<CompiledFilters, _> = serde_json::from_str(&json);
        assert_eq!(back.ok(), Some(filters.clone()), "{}", net.as_str());
        // Compact: base64 of 8 bytes an instruction, nothing else but the brackets.
        let instructions: usize = filters.programs.iter().map(Vec::len).sum();
        let budget = 4 * (instructions * INSTRUCTION_BYTES).div_ceil(3) + 32;
        assert!(
            json.len() <= budget,
            "{} bytes for {instructions} instructions",
            json.len()
        );
    }
}

/// The bytes in the plan are `struct sock_filter` exactly as the kernel reads it.
#[test]
fn a_program_in_the_plan_is_its_raw_sock_filter_bytes() {
    use base64::Engine as _;
    assert_eq!(
        std::mem::size_of::<seccompiler::sock_filter>(),
        INSTRUCTION_BYTES
    );
    let filters = compiled(Net::Deny);
    let value = serde_json::to_value(&filters).unwrap_or_default();
    let texts = value["programs"].as_array().cloned().unwrap_or_default();
    assert_eq!(texts.len(), filters.programs.len(), "{value}");
    let programs = filters.to_bpf_programs().unwrap_or_default();
    for (text, program) in texts.iter().zip(&programs) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(text.as_str().unwrap_or_default())
            .unwrap_or_default();
        // SAFETY: sock_filter is a repr(C) struct of plain integers with no padding (2 + 1 +
        // 1 + 4 bytes, checked above); the slice covers exactly the vector's elements.
        let raw = unsafe {
            std::slice::from_raw_parts(
                program.as_ptr().cast::<u8>(),
                program.len() * INSTRUCTION_BYTES,
            )
        };
        assert_eq!(decoded, raw);
    }
    let one = Instruction {
        code: 0x0015,
        jt: 1,
        jf: 2,
        k: 0xc000_003e,
    };
    assert_eq!(one.to_bytes(), [0x15, 0, 1, 2, 0x3e, 0, 0, 0xc0]);
    assert_eq!(Instruction::from_bytes(one.to_bytes()), one);
}

#[test]
fn a_program_of_a_bad_length_is_refused_on_decoding() {
    use base64::Engine as _;
    let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![6u8; n]);
    let decode = |programs: Vec<String>| {
        serde_json::from_value::<CompiledFilters>(serde_json::json!({ "programs": programs }))
            .map_err(|e| e.to_string())
    };
    let ok = decode(vec![b64(8), b64(8 * MAX_PROGRAM_LEN)]);
    assert_eq!(
        ok.map(|f| f.programs.iter().map(Vec::len).collect::<Vec<_>>()),
        Ok(vec![1, MAX_PROGRAM_LEN])
    );
    for (programs, problem) in [
        (
            vec![b64(7)],
            "7 bytes is not a whole number of 8-byte instructions",
        ),
        (vec![b64(8), b64(12)], "12 bytes is not a whole number"),
        (vec![b64(8 * 3 + 1)], "25 bytes is not a whole number"),
        (
            vec![String::new()],
            "0 instructions (a program has 1 to 4096)",
        ),
        (
            vec![b64(8 * (MAX_PROGRAM_LEN + 1))],
            "more than 4096 instructions",
        ),
        (
            vec![b64(8 * MAX_PROGRAM_LEN + 1)],
            "32769 bytes is not a whole",
        ),
        (vec!["AAAA!AAAAAA=".into()], "not base64"),
    ] {
        let index = programs.len() - 1;
        let err = decode(programs).err().unwrap_or_default();
        assert!(
            err.contains(problem) && err.contains(&format!("seccomp program {index} ")),
            "{problem}: {err}"
        );
    }
    // The plan's old shape (instructions as objects) is not read as a program.
    let old = serde_json::json!({"programs": [[{"code": 6, "jt": 0, "jf": 0, "k": 0}]]});
    assert!(serde_json::from_value::<CompiledFilters>(old).is_err());
}

#[test]
fn compiling_is_deterministic() {
    assert_eq!(compiled(Net::Deny), compiled(Net::Deny));
}

/// Every call Node 24.22.3 made under strace (startup, stdin/stdout, timers, Buffer, crypto,
/// require, fs, os.networkInterfaces, dns, net, exit, throw, heap OOM abort) and the
/// fallbacks it takes when the first choice answers ENOSYS.
#[test]
fn what_node_needs_is_allowed_in_every_mode() {
    let needed = [
        "futex",
        "mmap",
        "munmap",
        "rt_sigaction",
        "madvise",
        "rt_sigprocmask",
        "read",
        "mprotect",
        "close",
        "getpid",
        "fcntl",
        "brk",
        "getuid",
        "capget",
        "getgid",
        "geteuid",
        "getegid",
        "fstat",
        "getcwd",
        "newfstatat",
        "rseq",
        "set_robust_list",
        "exit",
        "write",
        "statx",
        "epoll_pwait",
        "gettid",
        "pipe2",
        "eventfd2",
        "epoll_create1",
        "getrandom",
        "pread64",
        "readlink",
        "epoll_ctl",
        "uname",
        "sched_getaffinity",
        "sysinfo",
        "set_tid_address",
        "execve",
        "arch_prctl",
        "access",
        "exit_group",
        "recvmsg",
        "lseek",
        "connect",
        "sendto",
        "clock_nanosleep",
        "poll",
        "sched_getscheduler",
        "sched_getparam",
        "recvfrom",
        "getsockname",
        "bind",
        "tgkill",
        "getsockopt",
        "setsockopt",
        "sendmmsg",
        "getrusage",
        "getdents64",
        "getppid",
        "kill",
        "rt_sigreturn",
        "mremap",
        "sched_yield",
        "clock_gettime",
        "writev",
        "preadv",
    ];
    for net in NETS {
        for name in needed {
            let nr = syscall_number(name).unwrap_or(-1);
            assert_outcome(net, name, nr, &[], RET_ALLOW);
        }
        let thread = [CLONE_THREAD_FLAGS];
        assert_outcome(net, "clone(thread)", libc::SYS_clone, &thread, RET_ALLOW);
        let name = [libc::PR_SET_NAME as u64];
        assert_outcome(net, "prctl(PR_SET_NAME)", libc::SYS_prctl, &name, RET_ALLOW);
        let own_limits = [0, libc::RLIMIT_NOFILE as u64];
        assert_outcome(
            net,
            "prlimit64(0)",
            libc::SYS_prlimit64,
            &own_limits,
            RET_ALLOW,
        );
        let read_only = (libc::O_RDONLY | libc::O_CLOEXEC) as u64;
        let at = libc::AT_FDCWD as u64;
        assert_outcome(
            net,
            "openat(O_RDONLY)",
            libc::SYS_openat,
            &[at, 0, read_only],
            RET_ALLOW,
        );
        let tcgets = [0, libc::TCGETS];
        assert_outcome(net, "ioctl(TCGETS)", libc::SYS_ioctl, &tcgets, RET_ALLOW);
        let fionbio = [0, libc::FIONBIO];
        assert_outcome(net, "ioctl(FIONBIO)", libc::SYS_ioctl, &fionbio, RET_ALLOW);
        let route = [
            libc::AF_NETLINK as u64,
            (libc::SOCK_RAW | libc::SOCK_CLOEXEC) as u64,
            0,
        ];
        assert_outcome(net, "netlink route", libc::SYS_socket, &route, RET_ALLOW);
        let unix = [libc::AF_UNIX as u64, libc::SOCK_STREAM as u64, 0];
        assert_outcome(net, "unix socket", libc::SYS_socket, &unix, RET_ALLOW);
        assert_outcome(
            net,
            "unix socketpair",
            libc::SYS_socketpair,
            &unix,
            RET_ALLOW,
        );
    }
}

#[test]
fn clone3_io_uring_and_pkeys_answer_enosys() {
    let names = [
        "clone3",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "pkey_alloc",
        "pkey_free",
        "pkey_mprotect",
    ];
    for net in NETS {
        for name in names {
            let nr = syscall_number(name).unwrap_or(-1);
            assert_outcome(net, name, nr, &[], ENOSYS_RET);
        }
    }
    // The ENOSYS answers come from their own filter, the first one installed.
    let filters = separate(Net::Deny);
    let enosys_filter = filters
        .programs
        .iter()
        .position(|p| p.iter().any(|i| i.code == 0x06 && i.k == ENOSYS_RET));
    assert_eq!(enosys_filter, Some(0));
}

#[test]
fn enosys_wins_in_either_order_because_the_allow_list_answers_allow() {
    let filters = separate(Net::Deny);
    let allow_list = filters.programs.len() - 1;
    for nr in [
        libc::SYS_clone3,
        libc::SYS_io_uring_setup,
        libc::SYS_pkey_alloc,
    ] {
        let c = call(nr, &[]);
        // The ENOSYS group is mirrored into the allow list, so no errno tie arises there.
        assert_eq!(run(&filters.programs[allow_list], &c), RET_ALLOW);
        assert_eq!(run(&filters.programs[0], &c), ENOSYS_RET);
        assert_eq!(evaluate(&filters, &c), ENOSYS_RET);
        let mut reversed = filters.clone();
        reversed.programs.reverse();
        assert_eq!(evaluate(&reversed, &c), ENOSYS_RET);
    }
    // Explicit EPERM groups are not mirrored: the allow list alone still refuses them.
    let ptrace = call(libc::SYS_ptrace, &[]);
    assert_eq!(run(&filters.programs[allow_list], &ptrace), EPERM_RET);
}

/// Two filters answering the same call with different errnos: seccomp(2) gives the tie to
/// the newest. Why the ENOSYS group must not rely on the default's filter being older.
pub(super) fn errno_filter(nr: i64, errno: u32) -> Vec<Instruction> {
    let rules = [(nr, vec![])].into_iter().collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno),
        TargetArch::x86_64,
    );
    let program = filter.and_then(BpfProgram::try_from);
    match program {
        Ok(p) => p.iter().map(Instruction::from).collect(),
        Err(e) => panic!("errno filter: {e}"),
    }
}

pub(super) fn tie_filters(eperm_first: bool) -> CompiledFilters {
    let eperm = errno_filter(libc::SYS_getppid, libc::EPERM as u32);
    let enosys = errno_filter(libc::SYS_getppid, libc::ENOSYS as u32);
    let programs = if eperm_first {
        vec![eperm, enosys]
    } else {
        vec![enosys, eperm]
    };
    CompiledFilters { programs }
}

#[test]
fn between_two_errno_filters_the_newest_wins() {
    let getppid = call(libc::SYS_getppid, &[]);
    assert_eq!(evaluate(&tie_filters(true), &getppid), ENOSYS_RET);
    assert_eq!(evaluate(&tie_filters(false), &getppid), EPERM_RET);
}

#[test]
fn clone_makes_threads_only() {
    for net in NETS {
        let sigchld = libc::SIGCHLD as u64;
        assert_outcome(
            net,
            "fork-style clone",
            libc::SYS_clone,
            &[sigchld],
            EPERM_RET,
        );
        let vm_only = (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | sigchld;
        assert_outcome(
            net,
            "vfork-style clone",
            libc::SYS_clone,
            &[vm_only],
            EPERM_RET,
        );
        let no_thread = CLONE_THREAD_FLAGS & !(libc::CLONE_THREAD as u64);
        assert_outcome(
            net,
            "clone without THREAD",
            libc::SYS_clone,
            &[no_thread],
            EPERM_RET,
        );
        let no_sighand = CLONE_THREAD_FLAGS & !(libc::CLONE_SIGHAND as u64);
        assert_outcome(
            net,
            "clone without SIGHAND",
            libc::SYS_clone,
            &[no_sighand],
            EPERM_RET,
        );
        for ns in NAMESPACE_FLAGS {
            let flags = CLONE_THREAD_FLAGS | ns as u32 as u64;
            assert_outcome(
                net,
                &format!("clone {ns:#x}"),
                libc::SYS_clone,
                &[flags],
                EPERM_RET,
            );
        }
        // The kernel reads only the low 32 bits; so does the mask.
        let high = CLONE_THREAD_FLAGS | 1 << 32;
        assert_outcome(
            net,
            "thread clone, high bits",
            libc::SYS_clone,
            &[high],
            RET_ALLOW,
        );
        for name in ["fork", "vfork", "execveat"] {
            let nr = syscall_number(name).unwrap_or(-1);
            assert_outcome(net, name, nr, &[], EPERM_RET);
        }
    }
}

#[test]
fn files_open_for_reading_only() {
    let at = libc::AT_FDCWD as u64;
    let reading = [
        libc::O_RDONLY,
        libc::O_RDONLY | libc::O_CLOEXEC,
        libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_DIRECTORY,
        libc::O_PATH | libc::O_NOFOLLOW,
    ];
    let writing = [
        libc::O_WRONLY,
        libc::O_RDWR,
        libc::O_WRONLY | libc::O_RDWR,
        libc::O_RDONLY | libc::O_CREAT,
        libc::O_RDONLY | libc::O_TRUNC,
        libc::O_RDONLY | libc::O_APPEND,
        libc::O_TMPFILE | libc::O_RDWR,
        libc::O_RDONLY | (libc::O_TMPFILE & !libc::O_DIRECTORY),
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
    ];
    for net in NETS {
        for flags in reading {
            let what = format!("open flags {flags:#x}");
            assert_outcome(
                net,
                &what,
                libc::SYS_openat,
                &[at, 0, flags as u64],
                RET_ALLOW,
            );
            assert_outcome(net, &what, libc::SYS_open, &[0, flags as u64], RET_ALLOW);
        }
        for flags in writing {
            let what = format!("open flags {flags:#x}");
            assert_outcome(
                net,
                &what,
                libc::SYS_openat,
                &[at, 0, flags as u64],
                EPERM_RET,
            );
            assert_outcome(net, &what, libc::SYS_open, &[0, flags as u64], EPERM_RET);
            // The kernel reads flags as an int: high bits change nothing.
            let high = flags as u32 as u64 | 1 << 40;
            assert_outcome(net, &what, libc::SYS_openat, &[at, 0, high], EPERM_RET);
        }
        for name in ["openat2", "creat", "name_to_handle_at"] {
            let nr = syscall_number(name).unwrap_or(-1);
            assert_outcome(net, name, nr, &[], EPERM_RET);
        }
    }
}

#[test]
fn ioctl_and_fcntl_allow_only_the_commands_node_asks_for() {
    // FIGETBSZ, FS_IOC_GETFLAGS, FS_IOC_FIEMAP, FS_IOC_GETFSUUID, SIOCGIFCONF, TCSETS,
    // FICLONE: the filesystems', the sockets', a terminal's.
    let refused_ioctls: [u64; 7] = [
        0x2,
        0x8008_6601,
        0xc020_660b,
        0x8011_1500,
        0x8912,
        0x5402,
        0x4004_9409,
    ];
    let allowed_ioctls = [0x5401u64, 0x5413, 0x541b, 0x5421, 0x5450, 0x5451];
    // F_SETLK, F_SETLKW, F_GETLK, F_OFD_SETLK, F_NOTIFY, F_SETOWN, F_SETSIG, F_SETLEASE,
    // F_SETPIPE_SZ, F_ADD_SEALS.
    let refused_fcntls: [u64; 10] = [6, 7, 5, 37, 1026, 8, 10, 1024, 1031, 1033];
    let allowed_fcntls = [0u64, 1, 2, 3, 4, 1030];
    for net in NETS {
        for (nr, refused, allowed) in [
            (libc::SYS_ioctl, &refused_ioctls[..], &allowed_ioctls[..]),
            (libc::SYS_fcntl, &refused_fcntls[..], &allowed_fcntls[..]),
        ] {
            for &cmd in refused {
                let what = format!("{nr} command {cmd:#x}");
                assert_outcome(net, &what, nr, &[3, cmd, 0], EPERM_RET);
            }
            for &cmd in allowed {
                for high in [0u64, 1 << 32] {
                    let what = format!("{nr} command {:#x}", cmd | high);
                    assert_outcome(net, &what, nr, &[3, cmd | high, 0], RET_ALLOW);
                }
                // A command is one value, not a bit pattern: one bit more is another.
                let what = format!("{nr} command {:#x}", cmd | 0x100_0000);
                assert_outcome(net, &what, nr, &[3, cmd | 0x100_0000, 0], EPERM_RET);
            }
        }
    }
}

#[test]
fn mmap_refuses_huge_pages_and_madvise_refuses_ksm() {
    const MAP_HUGETLB: u64 = 0x40000;
    const MADV_MERGEABLE: u64 = 12;
    let anon = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
    let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
    for net in NETS {
        for flags in [
            anon | MAP_HUGETLB,
            anon | MAP_HUGETLB | 21 << 26,
            MAP_HUGETLB | 1 << 40,
        ] {
            let args = [0, 1 << 21, rw, flags, u64::MAX, 0];
            let what = format!("mmap flags {flags:#x}");
            assert_outcome(net, &what, libc::SYS_mmap, &args, EPERM_RET);
        }
        let plain = [0, 4096, rw, anon, u64::MAX, 0];
        assert_outcome(net, "mmap anonymous", libc::SYS_mmap, &plain, RET_ALLOW);
        for advice in [MADV_MERGEABLE, MADV_MERGEABLE | 1 << 32] {
            let what = format!("madvise {advice:#x}");
            assert_outcome(net, &what, libc::SYS_madvise, &[0, 4096, advice], EPERM_RET);
        }
        for advice in [libc::MADV_DONTNEED, libc::MADV_FREE, libc::MADV_HUGEPAGE] {
            let what = format!("madvise {advice}");
            let args = [0, 4096, advice as u64];
            assert_outcome(net, &what, libc::SYS_madvise, &args, RET_ALLOW);
        }
    }
}

#[test]
fn ioctl_refuses_tiocsti_and_tioclinux_on_the_low_32_bits() {
    for net in NETS {
        for cmd in [libc::TIOCSTI, libc::TIOCLINUX] {
            for high in [0u64, 1 << 32, 0xffff_ffff << 32] {
                let args = [0, cmd | high];
                assert_outcome(
                    net,
                    &format!("ioctl {:#x}", cmd | high),
                    libc::SYS_ioctl,
                    &args,
                    EPERM_RET,
                );
            }
        }
        let near = [0, libc::TIOCSTI + 1];
        assert_outcome(
            net,
            "ioctl next to TIOCSTI",
            libc::SYS_ioctl,
            &near,
            RET_ALLOW,
        );
    }
}

#[test]
fn ioctl_refuses_the_socket_commands_that_load_a_module_on_the_low_32_bits() {
    // Bridge (SIOCGIFBR, SIOCSIFBR, SIOCBRADDBR, SIOCBRDELBR), DLCI and VLAN (SIOCADDDLCI,
    // SIOCDELDLCI, SIOCGIFVLAN, SIOCSIFVLAN): the kernel asks for their module first.
    let loading: [u64; 8] = [
        0x8940, 0x8941, 0x89a0, 0x89a1, 0x8980, 0x8981, 0x8982, 0x8983,
    ];
    for net in NETS {
        for cmd in loading {
            for high in [0u64, 1 << 32, 0xffff_ffff << 32] {
                let what = format!("ioctl {:#x}", cmd | high);
                let args = [3, cmd | high, 0];
                assert_outcome(net, &what, libc::SYS_ioctl, &args, EPERM_RET);
            }
        }
        // Their neighbours are refused too, as every command Node does not ask for is;
        // what libuv asks still reaches the kernel.
        for cmd in [0x893f, 0x8942, 0x899f, 0x89a2, 0x897f, 0x8984] {
            let what = format!("ioctl {cmd:#x}");
            assert_outcome(net, &what, libc::SYS_ioctl, &[3, cmd], EPERM_RET);
        }
        for cmd in [libc::TCGETS, libc::FIONBIO, libc::FIONREAD] {
            let what = format!("ioctl {cmd:#x}");
            assert_outcome(net, &what, libc::SYS_ioctl, &[3, cmd], RET_ALLOW);
        }
    }
}

#[test]
fn setsockopt_refuses_kernel_tls_on_the_low_32_bits() {
    const TCP_ULP: u64 = 31;
    const SOL_TLS: u64 = 282;
    let tcp = libc::IPPROTO_TCP as u64;
    for net in NETS {
        for high in [0u64, 1 << 32, 0xffff_ffff << 32] {
            let args = [3, tcp | high, TCP_ULP | high, 0, 4];
            assert_outcome(net, "TCP_ULP", libc::SYS_setsockopt, &args, EPERM_RET);
            for opt in [1, 2, 3] {
                let args = [3, SOL_TLS | high, opt, 0, 0];
                assert_outcome(net, "SOL_TLS", libc::SYS_setsockopt, &args, EPERM_RET);
            }
        }
        // TCP's other options (Node sets TCP_NODELAY and keepalive) reach the kernel.
        for opt in [libc::TCP_NODELAY, libc::TCP_KEEPIDLE, 30, 32] {
            let args = [3, tcp, opt as u64, 0, 4];
            let what = format!("TCP option {opt}");
            assert_outcome(net, &what, libc::SYS_setsockopt, &args, RET_ALLOW);
        }
    }
}

#[test]
fn preadv2_refuses_rwf_nowait_whatever_other_flags() {
    const RWF_NOWAIT: u64 = 0x8;
    for net in NETS {
        for flags in [RWF_NOWAIT, RWF_NOWAIT | 0x1, u64::MAX] {
            let args = [3, 0, 1, 0, 0, flags];
            let what = format!("preadv2 flags {flags:#x}");
            assert_outcome(net, &what, libc::SYS_preadv2, &args, EPERM_RET);
        }
        for flags in [0, 0x1, 0x10] {
            let args = [3, 0, 1, 0, 0, flags];
            let what = format!("preadv2 flags {flags:#x}");
            assert_outcome(net, &what, libc::SYS_preadv2, &args, RET_ALLOW);
        }
    }
}

#[test]
fn pipe2_refuses_a_notification_pipe_whatever_other_flags() {
    const O_NOTIFICATION_PIPE: u64 = libc::O_EXCL as u64;
    let libuv = (libc::O_CLOEXEC | libc::O_NONBLOCK) as u64;
    for net in NETS {
        for flags in [O_NOTIFICATION_PIPE, O_NOTIFICATION_PIPE | libuv, u64::MAX] {
            assert_outcome(
                net,
                &format!("pipe2 {flags:#x}"),
                libc::SYS_pipe2,
                &[0, flags],
                EPERM_RET,
            );
        }
        for flags in [0, libuv] {
            let what = format!("pipe2 {flags:#x}");
            assert_outcome(net, &what, libc::SYS_pipe2, &[0, flags], RET_ALLOW);
        }
    }
}

#[test]
fn setsockopt_refuses_classic_bpf_filters_on_the_low_32_bits() {
    let sol = libc::SOL_SOCKET as u64;
    for net in NETS {
        for opt in [libc::SO_ATTACH_FILTER, libc::SO_ATTACH_REUSEPORT_CBPF] {
            let opt = opt as u64;
            for high in [0u64, 1 << 32, 0xffff_ffff << 32] {
                assert_outcome(
                    net,
                    &format!("setsockopt {:#x} {:#x}", sol | high, opt | high),
                    libc::SYS_setsockopt,
                    &[0, sol | high, opt | high],
                    EPERM_RET,
                );
            }
        }
        // Other options, and the same number at another level, reach the kernel.
        let sndbuf = [0, sol, libc::SO_SNDBUF as u64];
        assert_outcome(net, "SO_SNDBUF", libc::SYS_setsockopt, &sndbuf, RET_ALLOW);
        let tcp = [0, libc::IPPROTO_TCP as u64, libc::SO_ATTACH_FILTER as u64];
        assert_outcome(net, "level TCP, 26", libc::SYS_setsockopt, &tcp, RET_ALLOW);
    }
}

#[test]
fn sockets_follow_the_net_mode() {
    let inet = |family: i32, ty: i32, proto: u64| [family as u64, ty as u64, proto];
    let nonblock = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    let tcp4 = inet(libc::AF_INET, libc::SOCK_STREAM | nonblock, 0);
    let udp4 = inet(libc::AF_INET, libc::SOCK_DGRAM | nonblock, 0);
    let tcp6 = inet(libc::AF_INET6, libc::SOCK_STREAM, 0);
    let udp6 = inet(libc::AF_INET6, libc::SOCK_DGRAM, 0);
    let s = libc::SYS_socket;
    for (name, args) in [
        ("tcp4", tcp4),
        ("udp4", udp4),
        ("tcp6", tcp6),
        ("udp6", udp6),
    ] {
        assert_outcome(Net::Deny, name, s, &args, EPERM_RET);
        assert_outcome(Net::OpenvibeOnly, name, s, &args, RET_ALLOW);
        assert_outcome(Net::Public, name, s, &args, RET_ALLOW);
    }
    let refused = [
        (
            "raw ip",
            inet(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP as u64),
        ),
        ("raw ip6", inet(libc::AF_INET6, libc::SOCK_RAW, 0)),
        (
            "ping",
            inet(libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_ICMP as u64),
        ),
        (
            "sctp",
            inet(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_SCTP as u64),
        ),
        (
            "explicit tcp",
            inet(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP as u64),
        ),
        ("seqpacket", inet(libc::AF_INET, libc::SOCK_SEQPACKET, 0)),
        ("dccp type", inet(libc::AF_INET, 6, 0)),
        ("packet", inet(libc::AF_PACKET, libc::SOCK_RAW, 0x0300)),
        ("vsock", inet(libc::AF_VSOCK, libc::SOCK_STREAM, 0)),
        ("alg", inet(libc::AF_ALG, libc::SOCK_SEQPACKET, 0)),
        ("bluetooth", inet(libc::AF_BLUETOOTH, libc::SOCK_STREAM, 0)),
        (
            "netlink audit",
            inet(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_AUDIT as u64),
        ),
        (
            "netlink netfilter",
            inet(libc::AF_NETLINK, libc::SOCK_RAW, 12),
        ),
        (
            "unix, high bits",
            [libc::AF_UNIX as u64 | 1 << 32, libc::SOCK_STREAM as u64, 0],
        ),
        (
            "inet, high bits",
            [libc::AF_INET as u64 | 1 << 32, libc::SOCK_STREAM as u64, 0],
        ),
    ];
    for net in NETS {
        for (name, args) in refused {
            assert_outcome(net, name, s, &args, EPERM_RET);
        }
        let pair4 = inet(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert_outcome(
            net,
            "socketpair inet",
            libc::SYS_socketpair,
            &pair4,
            EPERM_RET,
        );
    }
}

#[test]
fn deny_mode_has_no_inet_rule_and_the_network_modes_do() {
    let policy = shipped();
    let has_inet = |net: Net| {
        policy
            .syscalls
            .iter()
            .filter(|g| applies_in(g, net) && g.names.iter().any(|n| n == "socket"))
            .any(|g| {
                g.args.iter().any(|a| {
                    a.index == 0 && [libc::AF_INET as u64, libc::AF_INET6 as u64].contains(&a.value)
                })
            })
    };
    assert!(!has_inet(Net::Deny));
    assert!(has_inet(Net::OpenvibeOnly));
    assert!(has_inet(Net::Public));
    assert_ne!(compiled(Net::Deny), compiled(Net::Public));
    assert_eq!(compiled(Net::OpenvibeOnly), compiled(Net::Public));
}

#[test]
fn what_the_spec_forbids_is_refused_in_every_mode() {
    let forbidden = [
        "fork",
        "vfork",
        "execveat",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "fsopen",
        "fsmount",
        "move_mount",
        "open_tree",
        "bpf",
        "keyctl",
        "add_key",
        "request_key",
        "perf_event_open",
        "unshare",
        "setns",
        "userfaultfd",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "acct",
        "swapon",
        "swapoff",
        "reboot",
        "open_by_handle_at",
        "name_to_handle_at",
        "quotactl",
        "lookup_dcookie",
        "personality",
        "tkill",
        "listen",
        "accept",
        "accept4",
        "seccomp",
        "memfd_create",
        "wait4",
        "setuid",
        "setgid",
        "capset",
        "chmod",
        "unlink",
        "mkdir",
        "rename",
        "symlink",
        "truncate",
        "pwrite64",
        "shmget",
        "msgget",
        "inotify_init1",
        "sethostname",
        "clock_settime",
        "iopl",
        "modify_ldt",
        "landlock_create_ruleset",
    ];
    for net in NETS {
        for name in forbidden {
            let nr = syscall_number(name).unwrap_or(-1);
            assert_outcome(net, name, nr, &[], EPERM_RET);
        }
        let dumpable = [libc::PR_SET_DUMPABLE as u64];
        assert_outcome(
            net,
            "prctl(PR_SET_DUMPABLE)",
            libc::SYS_prctl,
            &dumpable,
            EPERM_RET,
        );
        let other = [1, libc::RLIMIT_NOFILE as u64];
        assert_outcome(
            net,
            "prlimit64(other pid)",
            libc::SYS_prlimit64,
            &other,
            EPERM_RET,
        );
        // The core limit (and every other but RLIMIT_NOFILE) may be read, never set: a
        // tool that lowered RLIMIT_CORE to 0 would dump its memory to a pipe core_pattern.
        let core = libc::RLIMIT_CORE as u64;
        let new_limit = 0x7fff_0000_u64;
        for (what, args, ret) in [
            ("prlimit64(0, CORE, NULL)", [0, core, 0], RET_ALLOW),
            ("prlimit64(0, CORE, new)", [0, core, new_limit], EPERM_RET),
            (
                "prlimit64(0, CORE|1<<32, new)",
                [0, core | 1 << 32, new_limit],
                EPERM_RET,
            ),
            (
                "prlimit64(0, STACK, new)",
                [0, libc::RLIMIT_STACK as u64, new_limit],
                EPERM_RET,
            ),
            (
                "prlimit64(0, NOFILE, new)",
                [0, libc::RLIMIT_NOFILE as u64, new_limit],
                RET_ALLOW,
            ),
            ("prlimit64(1, CORE, NULL)", [1, core, 0], EPERM_RET),
        ] {
            assert_outcome(net, what, libc::SYS_prlimit64, &args, ret);
        }
        // A number no kernel has yet: the default.
        assert_outcome(net, "unknown nr", 1000, &[], EPERM_RET);
    }
}

#[test]
fn other_abis_are_killed() {
    let filters = compiled(Net::Deny);
    // x32: x86_64's audit arch with bit 30 in the number (x32 getpid, x32 ioctl).
    for nr in [0x4000_0000 | 39, 0x4000_0000 | 514, 0x4000_0000, -1] {
        let x32 = call(nr, &[]);
        assert_eq!(
            name_of(evaluate(&filters, &x32)),
            "kill-process",
            "nr {nr:#x}"
        );
    }
    // i386 through int 0x80: another audit arch.
    let mut i386 = call(20, &[]);
    i386.arch = AUDIT_ARCH_I386;
    assert_eq!(name_of(evaluate(&filters, &i386)), "kill-process");
    // The x32 guard opens the allow list, before seccompiler's own arch check.
    let allow_list = filters.programs.last().map(|p| p[..3].to_vec());
    assert_eq!(allow_list, Some(x32_guard()));
}

// ---------------------------------------------------------------------------------------
// Policies that must be refused, with a message that names the culprit.

fn refusal(text: &str) -> String {
    match parse_policy(text) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

pub(super) fn with_group(group: &str) -> String {
    format!(
        r#"{{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86_64"],"syscalls":[{group}]}}"#
    )
}

#[test]
fn unknown_actions_ops_names_fields_and_arches_are_refused_by_name() {
    let cases = [
        (with_group(r#"{"names":["read"],"action":"SCMP_ACT_ALOW"}"#), "SCMP_ACT_ALOW"),
        (with_group(r#"{"names":["read"],"action":"SCMP_ACT_TRACE"}"#), "SCMP_ACT_TRACE"),
        (
            with_group(r#"{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"op":"SCMP_CMP_EQUAL"}]}"#),
            "SCMP_CMP_EQUAL",
        ),
        (with_group(r#"{"names":["read","raed"],"action":"SCMP_ACT_ALLOW"}"#), "raed"),
        (with_group(r#"{"names":["read"],"action":"SCMP_ACT_ALLOW","includes":{}}"#), "includes"),
        (
            with_group(r#"{"names":["socket"],"action":"SCMP_ACT_ALLOW","openvibe_net":["pubic"]}"#),
            "pubic",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86"],"syscalls":[]}"#.into(),
            "SCMP_ARCH_X86",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86_64"],"syscalls":[],"listenerPath":"/x"}"#.into(),
            "listenerPath",
        ),
    ];
    for (text, culprit) in cases {
        let message = refusal(&text);
        assert!(
            message.contains(culprit),
            "{message:?} does not name {culprit}"
        );
    }
}

#[test]
fn inconsistent_policies_are_refused_with_the_reason() {
    let cases = [
        (
            r#"{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_X86_64"],"syscalls":[]}"#.to_string(),
            "allow list",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","architectures":[],"syscalls":[]}"#.into(),
            "architectures",
        ),
        (
            with_group(r#"{"names":["read"],"action":"SCMP_ACT_ALLOW","errnoRet":1}"#),
            "errnoRet",
        ),
        (with_group(r#"{"names":["read"],"action":"SCMP_ACT_ERRNO","errnoRet":0}"#), "errnoRet 0"),
        (with_group(r#"{"names":[],"action":"SCMP_ACT_ALLOW"}"#), "names is empty"),
        (with_group(r#"{"names":["read","read"],"action":"SCMP_ACT_ALLOW"}"#), "twice"),
        (
            with_group(r#"{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{"index":6,"value":1,"op":"SCMP_CMP_EQ"}]}"#),
            "index 6",
        ),
        (
            with_group(r#"{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"valueTwo":1,"op":"SCMP_CMP_EQ"}]}"#),
            "valueTwo",
        ),
        (
            with_group(r#"{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":15,"valueTwo":16,"op":"SCMP_CMP_MASKED_EQ"}]}"#),
            "outside the mask",
        ),
        (
            with_group(r#"{"names":["read"],"action":"SCMP_ACT_ALLOW","openvibe_net":[]}"#),
            "no mode",
        ),
        (
            with_group(r#"{"names":["read"],"action":"SCMP_ACT_ALLOW"},{"names":["read"],"action":"SCMP_ACT_ERRNO"}"#),
            "`read` is also in syscalls[0]",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_KILL_PROCESS","architectures":["SCMP_ARCH_X86_64"],"syscalls":[{"names":["clone3"],"action":"SCMP_ACT_ERRNO","errnoRet":38}]}"#.into(),
            "weaker than defaultAction",
        ),
    ];
    for (text, reason) in cases {
        let message = refusal(&text);
        assert!(
            message.contains(reason),
            "{message:?} does not say {reason:?}"
        );
    }
}

#[test]
fn a_minimal_policy_compiles_and_groups_merge() {
    let text = with_group(
        r#"{"names":["read","write"],"action":"SCMP_ACT_ALLOW"},
           {"names":["write"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"op":"SCMP_CMP_EQ"}]},
           {"names":["getpid"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"op":"SCMP_CMP_EQ"}]},
           {"names":["getpid"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":2,"op":"SCMP_CMP_EQ"}]}"#,
    );
    let policy = parse_policy(&text).ok();
    let filters = policy.and_then(|p| compile(&p, Net::Deny).ok());
    let Some(filters) = filters else {
        panic!("minimal policy refused")
    };
    assert_eq!(filters.programs.len(), 1);
    let eval = |nr, args: &[u64]| name_of(evaluate(&filters, &call(nr, args)));
    // An unconditional rule absorbs a conditional one for the same call.
    assert_eq!(eval(libc::SYS_write, &[7]), "allow");
    // Two groups for one call are ORed.
    assert_eq!(eval(libc::SYS_getpid, &[1]), "allow");
    assert_eq!(eval(libc::SYS_getpid, &[2]), "allow");
    assert_eq!(eval(libc::SYS_getpid, &[3]), "errno 1");
    // No defaultErrnoRet: EPERM, as OCI says.
    assert_eq!(eval(libc::SYS_close, &[]), "errno 1");
}

#[test]
fn install_refuses_an_empty_or_malformed_plan_before_touching_the_kernel() {
    let none = install(&CompiledFilters::default())
        .err()
        .map(|e| e.to_string());
    assert!(none.is_some_and(|e| e.contains("no seccomp filter")));
    let empty_program = CompiledFilters {
        programs: vec![vec![]],
    };
    let bad = install(&empty_program).err().map(|e| e.to_string());
    assert!(bad.is_some_and(|e| e.contains("malformed")));
    let huge = CompiledFilters {
        programs: vec![vec![
            Instruction {
                code: 6,
                jt: 0,
                jf: 0,
                k: 0
            };
            MAX_PROGRAM_LEN + 1
        ]],
    };
    // Checked without install: were the check to regress, nothing reaches the kernel here.
    assert!(huge.to_bpf_programs().is_err());
    assert!(install_programs(&[]).is_err());
}

// ---------------------------------------------------------------------------------------
// Installed for real, in a re-executed copy of this test binary.

const PROBE_ENV: &str = "OVSR_SECCOMP_PROBE";

/// Runs one probe scenario in a fresh process: this test binary, told by an environment
/// variable to run only [`reexec_probe`].
fn run_probe(scenario: &str) -> std::process::Output {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let test = format!(
        "{}::reexec_probe",
        module_path!().split_once("::").map_or("", |(_, rest)| rest)
    );
    Command::new(exe)
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(PROBE_ENV, scenario)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("re-exec the test binary: {e}"))
}

#[track_caller]
fn assert_probe_passes(scenario: &str) {
    let out = run_probe(scenario);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("PROBE DONE"),
        "probe {scenario} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(!stdout.contains("FAIL "), "{stdout}");
}

#[test]
fn installed_deny_filter_refuses_and_allows_what_it_should() {
    assert_probe_passes("deny");
}

#[test]
fn installed_public_filter_allows_inet_but_not_raw_sockets() {
    assert_probe_passes("public");
}

#[test]
fn installed_openvibe_only_filter_allows_inet_but_not_raw_sockets() {
    assert_probe_passes("openvibe-only");
}

/// The filters the joined program stands for, installed one by one, pass the same probes.
#[test]
fn installed_separate_filters_pass_the_same_probes() {
    for net in NETS {
        assert_probe_passes(&format!("{}-separate", net.as_str()));
    }
}

#[test]
fn installed_errno_filters_tie_to_the_newest() {
    assert_probe_passes("tie-enosys-last");
    assert_probe_passes("tie-eperm-last");
}

#[test]
fn installed_filter_kills_an_x32_syscall() {
    let out = run_probe("x32");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("INSTALLED"), "{stdout}");
    assert!(!stdout.contains("X32 RETURNED"), "{stdout}");
    assert_eq!(out.status.signal(), Some(libc::SIGSYS), "{stdout}");
}

/// The child's side. A no-op unless [`PROBE_ENV`] names a scenario.
#[test]
fn reexec_probe() {
    let Ok(scenario) = std::env::var(PROBE_ENV) else {
        return;
    };
    // A killed probe must not leave a core file behind.
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit reads the struct we pass and touches nothing else.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &no_core) };
    let mut probe = Probe::default();
    let filters = match scenario.as_str() {
        "tie-enosys-last" => tie_filters(true),
        "tie-eperm-last" => tie_filters(false),
        other => match other.strip_suffix("-separate") {
            Some(net) => separate(Net::parse(net).unwrap_or(Net::Deny)),
            None => compiled(Net::parse(other).unwrap_or(Net::Deny)),
        },
    };
    if let Err(e) = install(&filters) {
        println!("FAIL install: {e}");
        std::process::exit(1);
    }
    println!("INSTALLED {scenario}");
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    probe.check("NoNewPrivs set", status.contains("NoNewPrivs:\t1"));
    probe.check("filter mode", status.contains("Seccomp:\t2"));
    match scenario.as_str() {
        "deny" | "deny-separate" => probe_deny(&mut probe),
        "public" | "openvibe-only" | "public-separate" | "openvibe-only-separate" => {
            probe_network(&mut probe)
        }
        "tie-enosys-last" => probe.errno("getppid", raw(libc::SYS_getppid, &[]), libc::ENOSYS),
        "tie-eperm-last" => probe.errno("getppid", raw(libc::SYS_getppid, &[]), libc::EPERM),
        "x32" => {
            let _ = std::io::stdout().flush();
            let r = raw(0x4000_0000 | libc::SYS_getpid, &[]);
            println!("X32 RETURNED {r:?}");
        }
        other => probe.check(&format!("known scenario {other}"), false),
    }
    println!("PROBE DONE");
    let _ = std::io::stdout().flush();
    std::process::exit(if probe.failed { 1 } else { 0 });
}

#[derive(Default)]
struct Probe {
    failed: bool,
}

impl Probe {
    fn check(&mut self, what: &str, ok: bool) {
        if ok {
            println!("PASS {what}");
        } else {
            self.failed = true;
            println!("FAIL {what}");
        }
    }

    /// Expects the call to fail with `errno` (seccomp's answer, not the kernel's).
    fn errno(&mut self, what: &str, r: Result<libc::c_long, i32>, errno: i32) {
        match r {
            Err(e) if e == errno => println!("PASS {what}: errno {e}"),
            other => {
                self.failed = true;
                println!("FAIL {what}: want errno {errno}, got {other:?}");
            }
        }
    }

    fn succeeds(&mut self, what: &str, r: Result<libc::c_long, i32>) {
        match r {
            Ok(v) => println!("PASS {what}: {v}"),
            Err(e) => {
                self.failed = true;
                println!("FAIL {what}: errno {e}");
            }
        }
    }
}

fn raw(nr: libc::c_long, args: &[u64]) -> Result<libc::c_long, i32> {
    let mut a = [0u64; 6];
    a[..args.len()].copy_from_slice(args);
    // SAFETY: every call the probes make passes null or valid pointers, or numbers the filter
    // is expected to refuse before the kernel reads them; a fork-like call that got through
    // is handled by the caller.
    let r = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(r)
    }
}

/// A process-creating call must fail; if the filter let it through, the copy leaves at once.
fn no_new_process(probe: &mut Probe, what: &str, r: Result<libc::c_long, i32>) {
    match r {
        Ok(0) => {
            // SAFETY: _exit in the unexpected child ends it without running anything else.
            unsafe { libc::_exit(0) }
        }
        Ok(pid) => {
            let mut status = 0;
            // SAFETY: reaps the child we just made; status is a valid out pointer.
            unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::__WALL) };
            probe.check(&format!("{what} created pid {pid}"), false);
        }
        Err(e) => probe.check(
            &format!("{what} refused with EPERM (errno {e})"),
            e == libc::EPERM,
        ),
    }
}

fn socket(family: i32, ty: i32, proto: u64) -> Result<libc::c_long, i32> {
    raw(libc::SYS_socket, &[family as u64, ty as u64, proto])
}

fn probe_deny(p: &mut Probe) {
    let cloexec = libc::SOCK_CLOEXEC;
    p.errno(
        "socket AF_INET stream",
        socket(libc::AF_INET, libc::SOCK_STREAM, 0),
        libc::EPERM,
    );
    p.errno(
        "socket AF_INET6 dgram",
        socket(libc::AF_INET6, libc::SOCK_DGRAM, 0),
        libc::EPERM,
    );
    p.errno(
        "socket AF_PACKET",
        socket(libc::AF_PACKET, libc::SOCK_RAW, 0x0300),
        libc::EPERM,
    );
    p.errno(
        "socket AF_VSOCK",
        socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0),
        libc::EPERM,
    );
    p.errno(
        "socket AF_ALG",
        socket(libc::AF_ALG, libc::SOCK_SEQPACKET, 0),
        libc::EPERM,
    );
    let audit = socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_AUDIT as u64);
    p.errno("socket netlink audit", audit, libc::EPERM);
    let high = raw(
        libc::SYS_socket,
        &[libc::AF_UNIX as u64 | 1 << 32, libc::SOCK_STREAM as u64, 0],
    );
    p.errno("socket AF_UNIX with high bits", high, libc::EPERM);
    p.succeeds(
        "socket AF_UNIX",
        socket(libc::AF_UNIX, libc::SOCK_STREAM | cloexec, 0),
    );
    let route = socket(
        libc::AF_NETLINK,
        libc::SOCK_RAW | cloexec,
        libc::NETLINK_ROUTE as u64,
    );
    p.succeeds("socket netlink route", route);
    let mut pair = [0 as libc::c_int; 2];
    let pair_ptr = pair.as_mut_ptr() as u64;
    let unix = [libc::AF_UNIX as u64, libc::SOCK_STREAM as u64, 0, pair_ptr];
    p.succeeds("socketpair AF_UNIX", raw(libc::SYS_socketpair, &unix));
    let inet = [libc::AF_INET as u64, libc::SOCK_STREAM as u64, 0, pair_ptr];
    p.errno(
        "socketpair AF_INET",
        raw(libc::SYS_socketpair, &inet),
        libc::EPERM,
    );
    let fd = pair[0] as u64;
    p.errno("listen", raw(libc::SYS_listen, &[fd, 1]), libc::EPERM);
    // A classic BPF program that accepts everything, which the kernel would take.
    let accept_all = [libc::sock_filter {
        code: 0x06, // BPF_RET | BPF_K
        jt: 0,
        jf: 0,
        k: u32::MAX,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: accept_all.as_ptr() as *mut libc::sock_filter,
    };
    let prog_ptr = &prog as *const libc::sock_fprog as u64;
    let prog_len = std::mem::size_of::<libc::sock_fprog>() as u64;
    let sol = libc::SOL_SOCKET as u64;
    for (what, opt) in [
        ("SO_ATTACH_FILTER", libc::SO_ATTACH_FILTER),
        ("SO_ATTACH_REUSEPORT_CBPF", libc::SO_ATTACH_REUSEPORT_CBPF),
    ] {
        let args = [fd, sol, opt as u64, prog_ptr, prog_len];
        p.errno(what, raw(libc::SYS_setsockopt, &args), libc::EPERM);
    }
    let size: libc::c_int = 65536;
    let size_ptr = &size as *const libc::c_int as u64;
    let sndbuf = [fd, sol, libc::SO_SNDBUF as u64, size_ptr, 4];
    p.succeeds("SO_SNDBUF", raw(libc::SYS_setsockopt, &sndbuf));
    let mut pipe_fds = [0 as libc::c_int; 2];
    let pipe_ptr = pipe_fds.as_mut_ptr() as u64;
    let notification = [pipe_ptr, libc::O_EXCL as u64];
    p.errno(
        "pipe2 O_NOTIFICATION_PIPE",
        raw(libc::SYS_pipe2, &notification),
        libc::EPERM,
    );
    let libuv = [pipe_ptr, (libc::O_CLOEXEC | libc::O_NONBLOCK) as u64];
    p.succeeds("pipe2 as libuv", raw(libc::SYS_pipe2, &libuv));
    // stdin is /dev/null: a plain preadv2 reads nothing and succeeds.
    let mut buf = [0u8; 8];
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let iov_ptr = &iov as *const libc::iovec as u64;
    p.errno(
        "preadv2 RWF_NOWAIT",
        raw(libc::SYS_preadv2, &[0, iov_ptr, 1, 0, 0, 0x8]),
        libc::EPERM,
    );
    p.succeeds("preadv2", raw(libc::SYS_preadv2, &[0, iov_ptr, 1, 0, 0, 0]));

    p.errno("clone3", raw(libc::SYS_clone3, &[0, 0]), libc::ENOSYS);
    p.errno(
        "io_uring_setup",
        raw(libc::SYS_io_uring_setup, &[1, 0]),
        libc::ENOSYS,
    );
    p.errno(
        "io_uring_enter",
        raw(libc::SYS_io_uring_enter, &[u64::MAX]),
        libc::ENOSYS,
    );
    p.errno(
        "io_uring_register",
        raw(libc::SYS_io_uring_register, &[u64::MAX]),
        libc::ENOSYS,
    );
    p.errno(
        "pkey_alloc",
        raw(libc::SYS_pkey_alloc, &[0, 0]),
        libc::ENOSYS,
    );

    p.errno("unshare(0)", raw(libc::SYS_unshare, &[0]), libc::EPERM);
    p.errno("setns", raw(libc::SYS_setns, &[u64::MAX, 0]), libc::EPERM);
    p.errno("mount", raw(libc::SYS_mount, &[0, 0, 0, 0, 0]), libc::EPERM);
    p.errno(
        "ptrace",
        raw(libc::SYS_ptrace, &[libc::PTRACE_GETREGS as u64, 0]),
        libc::EPERM,
    );
    p.errno("bpf", raw(libc::SYS_bpf, &[0, 0, 0]), libc::EPERM);
    p.errno("keyctl", raw(libc::SYS_keyctl, &[0]), libc::EPERM);
    p.errno(
        "perf_event_open",
        raw(libc::SYS_perf_event_open, &[0, 0, u64::MAX]),
        libc::EPERM,
    );
    p.errno("userfaultfd", raw(libc::SYS_userfaultfd, &[0]), libc::EPERM);
    p.errno(
        "personality query",
        raw(libc::SYS_personality, &[0xffff_ffff]),
        libc::EPERM,
    );
    p.errno(
        "execveat",
        raw(libc::SYS_execveat, &[u64::MAX, 0, 0, 0, 0]),
        libc::EPERM,
    );
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u64;
    p.succeeds("kill(self, 0)", raw(libc::SYS_kill, &[pid, 0]));
    let tid = raw(libc::SYS_gettid, &[]).unwrap_or(0) as u64;
    p.succeeds("tgkill(self, 0)", raw(libc::SYS_tgkill, &[pid, tid, 0]));

    let mut byte = 0u8;
    let b = &mut byte as *mut u8 as u64;
    let tiocsti = libc::TIOCSTI;
    p.errno(
        "ioctl TIOCSTI",
        raw(libc::SYS_ioctl, &[0, tiocsti, b]),
        libc::EPERM,
    );
    let high = tiocsti | 1 << 32;
    p.errno(
        "ioctl TIOCSTI|1<<32",
        raw(libc::SYS_ioctl, &[0, high, b]),
        libc::EPERM,
    );
    p.errno(
        "ioctl TIOCLINUX",
        raw(libc::SYS_ioctl, &[0, libc::TIOCLINUX, b]),
        libc::EPERM,
    );
    let mut termios = std::mem::MaybeUninit::<libc::termios>::zeroed();
    let t = termios.as_mut_ptr() as u64;
    // stdin is /dev/null: the kernel itself answers ENOTTY, so the call got through.
    p.errno(
        "ioctl TCGETS reaches the kernel",
        raw(libc::SYS_ioctl, &[0, libc::TCGETS, t]),
        libc::ENOTTY,
    );
    let mut one: libc::c_int = 1;
    let o = &mut one as *mut libc::c_int as u64;
    p.succeeds(
        "ioctl FIONBIO",
        raw(libc::SYS_ioctl, &[fd, libc::FIONBIO, o]),
    );

    let name = c"probe".as_ptr() as u64;
    p.succeeds(
        "prctl PR_SET_NAME",
        raw(libc::SYS_prctl, &[libc::PR_SET_NAME as u64, name]),
    );
    p.errno(
        "prctl PR_SET_DUMPABLE",
        raw(libc::SYS_prctl, &[libc::PR_SET_DUMPABLE as u64, 0]),
        libc::EPERM,
    );
    let mut lim = std::mem::MaybeUninit::<libc::rlimit>::zeroed();
    let l = lim.as_mut_ptr() as u64;
    let nofile = libc::RLIMIT_NOFILE as u64;
    p.succeeds(
        "prlimit64 own",
        raw(libc::SYS_prlimit64, &[0, nofile, 0, l]),
    );
    p.errno(
        "prlimit64 pid 1",
        raw(libc::SYS_prlimit64, &[1, nofile, 0, l]),
        libc::EPERM,
    );

    let at = libc::AT_FDCWD as u64;
    let status = c"/proc/self/status".as_ptr() as u64;
    let read_only = libc::O_RDONLY as u64 | libc::O_CLOEXEC as u64;
    p.succeeds(
        "openat read-only",
        raw(libc::SYS_openat, &[at, status, read_only]),
    );
    let path = std::ffi::CString::new(format!("/tmp/ovsr-seccomp-probe-{pid}"));
    let path = path.unwrap_or_default();
    let create = (libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC) as u64;
    let created = raw(libc::SYS_openat, &[at, path.as_ptr() as u64, create, 0o600]);
    p.errno("openat O_CREAT", created, libc::EPERM);
    let exists = raw(libc::SYS_access, &[path.as_ptr() as u64, libc::F_OK as u64]);
    p.errno("no file was created", exists, libc::ENOENT);

    no_new_process(p, "fork", raw(libc::SYS_fork, &[]));
    let sigchld = libc::SIGCHLD as u64;
    no_new_process(
        p,
        "clone(SIGCHLD)",
        raw(libc::SYS_clone, &[sigchld, 0, 0, 0, 0]),
    );
    let newnet = libc::CLONE_NEWNET as u64 | sigchld;
    no_new_process(
        p,
        "clone(CLONE_NEWNET)",
        raw(libc::SYS_clone, &[newnet, 0, 0, 0, 0]),
    );
    // The kernel refuses THREAD with NEWUSER itself (EINVAL): seccomp must answer first.
    let thread_userns = CLONE_THREAD_FLAGS | libc::CLONE_NEWUSER as u64;
    p.errno(
        "clone thread+CLONE_NEWUSER",
        raw(libc::SYS_clone, &[thread_userns, 0, 0, 0, 0]),
        libc::EPERM,
    );

    // Threads still work (glibc: clone3 -> ENOSYS -> clone) and inherit the filter.
    let thread = std::thread::spawn(|| socket(libc::AF_INET, libc::SOCK_STREAM, 0));
    match thread.join() {
        Ok(r) => p.errno("thread spawned; AF_INET in it", r, libc::EPERM),
        Err(_) => p.check("thread spawned", false),
    }
}

fn probe_network(p: &mut Probe) {
    let nonblock = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    p.succeeds("socket AF_INET stream", socket(libc::AF_INET, nonblock, 0));
    p.succeeds(
        "socket AF_INET dgram",
        socket(libc::AF_INET, libc::SOCK_DGRAM, 0),
    );
    match socket(libc::AF_INET6, libc::SOCK_STREAM, 0) {
        // A kernel without IPv6 answers EAFNOSUPPORT itself: the filter let it through.
        Err(libc::EAFNOSUPPORT) => p.check("socket AF_INET6 reaches the kernel", true),
        r => p.succeeds("socket AF_INET6 stream", r),
    }
    let icmp = libc::IPPROTO_ICMP as u64;
    p.errno(
        "socket SOCK_RAW",
        socket(libc::AF_INET, libc::SOCK_RAW, icmp),
        libc::EPERM,
    );
    p.errno(
        "socket ping",
        socket(libc::AF_INET, libc::SOCK_DGRAM, icmp),
        libc::EPERM,
    );
    let sctp = libc::IPPROTO_SCTP as u64;
    p.errno(
        "socket SCTP stream",
        socket(libc::AF_INET, libc::SOCK_STREAM, sctp),
        libc::EPERM,
    );
    p.errno(
        "socket AF_PACKET",
        socket(libc::AF_PACKET, libc::SOCK_RAW, 0x0300),
        libc::EPERM,
    );
    p.succeeds(
        "socket AF_UNIX",
        socket(libc::AF_UNIX, libc::SOCK_STREAM, 0),
    );
    p.errno("clone3", raw(libc::SYS_clone3, &[0, 0]), libc::ENOSYS);
    let thread = std::thread::spawn(|| 6 * 7);
    p.check("thread spawned", thread.join().is_ok_and(|v| v == 42));
}

// ---------------------------------------------------------------------------------------
// The real Node under the compiled filter.

/// The Node binary to try: `OVSR_TEST_NODE` if set, else the pinned runtime. Without one
/// the tests below report a skip (`crate::test_skips`), which `scripts/test` fails.
fn nodes() -> Vec<PathBuf> {
    if let Some(node) = std::env::var_os("OVSR_TEST_NODE") {
        return vec![PathBuf::from(node)];
    }
    let pinned = PathBuf::from(crate::runtime::PINNED_PATH);
    if pinned.is_file() {
        return vec![pinned];
    }
    crate::test_skips::skipped(
        "the seccomp tests with the real Node",
        &format!(
            "no Node at {} (scripts/install-node puts it there)",
            pinned.display()
        ),
    );
    Vec::new()
}

fn node_major(node: &Path) -> u32 {
    let out = Command::new(node).arg("--version").output();
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    text.ok()
        .and_then(|v| {
            v.trim()
                .trim_start_matches('v')
                .split('.')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

const MAIN_JS: &str = r#"
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const triple = require('./triple.js');
let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (c) => { input += c; });
process.stdin.on('end', () => {
  setTimeout(() => {
    const v = JSON.parse(input);
    const buf = Buffer.from(v.text, 'utf8');
    let denied = null;
    try { fs.readFileSync('/etc/passwd'); } catch (e) { denied = e.code; }
    let ifaces;
    try { ifaces = typeof os.networkInterfaces(); } catch (e) { ifaces = e.code; }
    setImmediate(() => {
      process.stdout.write(JSON.stringify({
        bytes: buf.length,
        hex: buf.toString('hex'),
        random: crypto.randomBytes(16).length,
        sha256: crypto.createHash('sha256').update(buf).digest('hex').slice(0, 8),
        tripled: triple(v.n),
        note: fs.readFileSync(__dirname + '/note.txt', 'utf8').trim(),
        denied,
        ifaces,
      }) + '\n');
    });
  }, 20);
});
"#;

const NET_JS: &str = r#"
const net = require('net');
const dns = require('dns');
const out = {};
let pending = 2;
const done = () => { if (--pending === 0) console.log(JSON.stringify({ connect: out.connect, dns: out.dns })); };
const s = net.connect({ host: '127.0.0.1', port: 1 });
s.on('error', (e) => { out.connect = e.code; done(); });
s.on('connect', () => { out.connect = 'connected'; s.destroy(); done(); });
dns.lookup('example.com', (e) => { out.dns = e ? 'error' : 'resolved'; done(); });
"#;

const OOM_JS: &str =
    "const a = []; for (;;) { a.push(new Array(100000).fill({ x: Math.random() })); }\n";

struct NodeRun {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `node <permission flags> [extra] <script>` with the compiled filter installed in the
/// child right before exec, as the init does.
fn run_node(
    node: &Path,
    net: Net,
    dir: &Path,
    script: &str,
    extra: &[&str],
    stdin: &str,
) -> NodeRun {
    let programs = compiled(net)
        .to_bpf_programs()
        .unwrap_or_else(|e| panic!("convert filters: {e}"));
    let permission = if node_major(node) >= 22 {
        "--permission"
    } else {
        "--experimental-permission"
    };
    let mut cmd = Command::new(node);
    cmd.env_clear()
        .current_dir(dir)
        .arg(permission)
        .arg(format!("--allow-fs-read={}/", dir.display()))
        .arg("--disallow-code-generation-from-strings")
        .args(extra)
        .arg(dir.join(script))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: runs in the forked child before exec; install_programs allocates nothing (the
    // programs were converted above) and makes only the prctl and seccomp system calls.
    unsafe {
        cmd.pre_exec(move || {
            install_programs(&programs).map_err(|e| match e {
                SeccompError::Install {
                    source: seccompiler::Error::Seccomp(io) | seccompiler::Error::Prctl(io),
                    ..
                } => io,
                _ => std::io::Error::from_raw_os_error(libc::EINVAL),
            })
        });
    }
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn node: {e}"));
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin.as_bytes());
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for node: {e}"));
    NodeRun {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn skill_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let files = [
        ("main.js", MAIN_JS),
        ("triple.js", "module.exports = (n) => n * 3;\n"),
        ("note.txt", "from the skill folder\n"),
        ("net.js", NET_JS),
        ("oom.js", OOM_JS),
        ("throw.js", "throw new Error('boom');\n"),
        ("exit3.js", "console.error('bye'); process.exit(3);\n"),
    ];
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap_or_else(|e| panic!("write {name}: {e}"));
    }
    dir
}

#[test]
fn node_runs_a_tool_under_the_deny_filter() {
    for node in nodes() {
        let dir = skill_dir();
        let run = run_node(
            &node,
            Net::Deny,
            dir.path(),
            "main.js",
            &[],
            r#"{"text":"hé","n":14}"#,
        );
        assert_eq!(run.status.code(), Some(0), "{}\n{}", run.stdout, run.stderr);
        let want = r#"{"bytes":3,"hex":"68c3a9","random":16,"sha256":"7dfbe0ea","tripled":42,"note":"from the skill folder","denied":"ERR_ACCESS_DENIED","ifaces":"object"}"#;
        assert_eq!(run.stdout.trim(), want, "stderr: {}", run.stderr);

        let thrown = run_node(&node, Net::Deny, dir.path(), "throw.js", &[], "");
        assert_eq!(thrown.status.code(), Some(1), "{}", thrown.stderr);
        assert!(thrown.stderr.contains("boom"), "{}", thrown.stderr);

        let exit3 = run_node(&node, Net::Deny, dir.path(), "exit3.js", &[], "");
        assert_eq!(exit3.status.code(), Some(3), "{}", exit3.stderr);
        assert_eq!(exit3.stderr.trim(), "bye");
    }
}

#[test]
fn node_network_calls_fail_cleanly_under_deny_and_reach_the_kernel_under_public() {
    for node in nodes() {
        let dir = skill_dir();
        let deny = run_node(&node, Net::Deny, dir.path(), "net.js", &[], "");
        assert_eq!(
            deny.status.code(),
            Some(0),
            "{}\n{}",
            deny.stdout,
            deny.stderr
        );
        assert_eq!(
            deny.stdout.trim(),
            r#"{"connect":"EPERM","dns":"error"}"#,
            "{}",
            deny.stderr
        );

        let public = run_node(&node, Net::Public, dir.path(), "net.js", &[], "");
        assert_eq!(
            public.status.code(),
            Some(0),
            "{}\n{}",
            public.stdout,
            public.stderr
        );
        assert!(
            public.stdout.contains(r#""connect":"ECONNREFUSED""#),
            "{}",
            public.stdout
        );
    }
}

#[test]
fn node_heap_oom_aborts_under_the_filter() {
    for node in nodes() {
        let dir = skill_dir();
        let flags = ["--max-old-space-size=16"];
        let run = run_node(&node, Net::Deny, dir.path(), "oom.js", &flags, "");
        assert_eq!(
            run.status.signal(),
            Some(libc::SIGABRT),
            "{:?}\n{}",
            run.status,
            run.stderr
        );
        assert!(run.stderr.contains("heap out of memory"), "{}", run.stderr);
    }
}
