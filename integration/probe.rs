//! The native probe: a small static C program (`probe/probe.c`) run in place of Node under
//! the very same plan (same init stage, namespaces, uid, landlock and seccomp programs),
//! trying the system calls JavaScript cannot reach. Each attempt expects one errno, or the
//! kill of the process, and says which layer answers; `probe.md` is the table.
//!
//! The probe is hostile code: it is compiled here and only ever run inside the sandbox.

use crate::common::*;
use base64::Engine as _;
use openvibe_skill_runner::engine::Engine;
use serde_json::{json, Value};
use sha2::Digest;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Compiles the probe into a directory of its own: root-owned, 0755, static.
fn compile_probe() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("ovsr-probe-")
        .tempdir()
        .expect("probe temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod probe dir");
    let exe = dir.path().join("probe");
    let src = repo().join("integration/probe/probe.c");
    let out = std::process::Command::new("cc")
        .args(["-static", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run cc (gcc and libc6-dev are needed for the native probe)");
    assert!(
        out.status.success(),
        "compiling the probe failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod probe");
    (dir, exe)
}

/// The probe engine, with the real Node's loader and libraries still mounted (and the
/// loader executable, as for a Node job): the loader route is then a real one. Returns the
/// loader's path.
fn probe_engine_with_loader(state: &State, exe: &Path) -> (Engine, PathBuf) {
    let node = Engine::start(hermetic_engine_config(state.path()))
        .unwrap_or_else(|e| panic!("the engine must start on the test host: {e}"));
    let libraries = node.runtime.libraries.clone();
    let loader = node
        .runtime
        .loader
        .clone()
        .expect("the pinned Node names its ELF interpreter");
    let mut engine = node
        .with_probe_executable(exe.to_path_buf())
        .with_runner_executable(PathBuf::from(INIT));
    engine.runtime.libraries = libraries;
    engine.runtime.loader = Some(loader.clone());
    (engine, loader)
}

fn probe_engine(state: &State, exe: &Path) -> Engine {
    // The policy and preload of this source tree, not one installed on the machine.
    Engine::start(hermetic_engine_config(state.path()))
        .unwrap_or_else(|e| panic!("the engine must start on the test host: {e}"))
        .with_probe_executable(exe.to_path_buf())
        .with_runner_executable(PathBuf::from(INIT))
}

/// Runs the probe once with `input` on its stdin; returns the job's result as JSON.
fn run_probe(engine: &Engine, job_id: &str, input: &str) -> Value {
    run_probe_net(engine, job_id, input, "deny")
}

/// The same under a given `net`.
fn run_probe_net(engine: &Engine, job_id: &str, input: &str, net: &str) -> Value {
    run_probe_files(engine, job_id, input, net, &[])
}

/// The same with more files in the job's `/skill` beside the entry.
fn run_probe_files(
    engine: &Engine,
    job_id: &str,
    input: &str,
    net: &str,
    files: &[(&str, &str)],
) -> Value {
    let code = "// the native probe ignores its entry\n";
    let inputs: Vec<Value> = std::iter::once(("tool.js", code))
        .chain(files.iter().copied())
        .map(|(name, text)| {
            json!({
                "name": name,
                "sha256": hex::encode(sha2::Sha256::digest(text.as_bytes())),
                "content_base64": base64::engine::general_purpose::STANDARD.encode(text),
            })
        })
        .collect();
    let job = json!({
        "job_id": job_id,
        "class": "function",
        "artifact": "openvibe-skill-runner@1.0.0",
        "args": {"tool": "probe", "entry": "tool.js", "input": input},
        "inputs": inputs,
        "net": net,
        "limits": {"wall_ms": 20000, "mem_bytes": 134217728}
    });
    run_engine_job(engine, job)
}

/// What one attempt must give.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Fails with this errno.
    Errno(i32),
    /// Fails with one of these errnos: which one is the kernel's choice, not the sandbox's.
    OneOf(&'static [i32]),
    /// Succeeds (0 or a descriptor): an allowed call, kept as the contrast that shows
    /// the refusals around it come from a rule and not from a broken probe.
    Allowed,
}

use libc::{EACCES, EBADF, ECONNREFUSED, ENOENT, ENOSYS, ENOTTY, EPERM, ESRCH};
use Expect::{Allowed, Errno, OneOf};

/// Every attempt of the probe's main mode: the answer, and which layer gives it.
/// "seccomp" means policies/seccomp.json (EPERM is its defaultErrnoRet and the errnoRet of
/// its explicit deny groups, ENOSYS its fallback group); the kernel would otherwise give
/// another answer, named in the comment where it differs.
fn expectations() -> Vec<(&'static str, Expect, &'static str)> {
    vec![
        // Namespaces: seccomp denies unshare and setns outright (without it the kernel
        // would also refuse, EPERM, for want of CAP_SYS_ADMIN: two layers).
        ("unshare_newuser", Errno(EPERM), "seccomp: no user namespace, the door to most unprivileged kernel exploits"),
        ("unshare_newns", Errno(EPERM), "seccomp: no new mount namespace"),
        ("unshare_newnet", Errno(EPERM), "seccomp: no new net namespace"),
        ("unshare_newpid", Errno(EPERM), "seccomp: no new pid namespace"),
        ("unshare_newipc", Errno(EPERM), "seccomp: no new ipc namespace"),
        ("unshare_newuts", Errno(EPERM), "seccomp: no new uts namespace"),
        ("unshare_newcgroup", Errno(EPERM), "seccomp: no new cgroup namespace"),
        ("unshare_newtime", Errno(EPERM), "seccomp: no new time namespace"),
        ("unshare_files", Errno(EPERM), "seccomp: unshare is refused whatever the flags"),
        ("setns_net", Errno(EPERM), "seccomp: no entering another namespace"),
        ("setns_any", Errno(EPERM), "seccomp: setns with nstype 0"),
        ("setns_mnt", Errno(EPERM), "seccomp: setns into a mount namespace"),
        // The mount table.
        ("mount_tmpfs", Errno(EPERM), "seccomp: no mount over /skill"),
        ("mount_remount_rw", Errno(EPERM), "seccomp: no read-write remount of /skill"),
        ("mount_bind", Errno(EPERM), "seccomp: no bind mount"),
        ("umount2_proc", Errno(EPERM), "seccomp: no unmounting /proc"),
        ("pivot_root", Errno(EPERM), "seccomp: no pivot_root"),
        ("chroot", Errno(EPERM), "seccomp: no chroot"),
        ("fsopen", Errno(EPERM), "seccomp: new mount API closed too"),
        ("open_tree", Errno(EPERM), "seccomp: new mount API (open_tree) closed"),
        ("mount_setattr", Errno(EPERM), "seccomp: new mount API (mount_setattr) closed"),
        // Other processes.
        ("ptrace_traceme", Errno(EPERM), "seccomp: ptrace denied"),
        ("ptrace_attach_1", Errno(EPERM), "seccomp: no attaching to pid 1"),
        ("ptrace_seize_1", Errno(EPERM), "seccomp: no seizing pid 1"),
        ("process_vm_readv_1", Errno(EPERM), "seccomp: no reading pid 1's memory"),
        ("process_vm_writev_self", Errno(EPERM), "seccomp: process_vm_writev denied even on itself"),
        ("pidfd_open_1", Errno(EPERM), "seccomp: no pidfd"),
        ("kcmp", Errno(EPERM), "seccomp: no kcmp"),
        // Kernel attack surface.
        ("bpf_map_create", Errno(EPERM), "seccomp: no eBPF"),
        ("keyctl_session", Errno(EPERM), "seccomp: the keyrings are not namespaced"),
        ("keyctl_join", Errno(EPERM), "seccomp: no joining a session keyring"),
        ("add_key", Errno(EPERM), "seccomp: add_key denied"),
        ("request_key", Errno(EPERM), "seccomp: request_key denied"),
        ("perf_event_open", Errno(EPERM), "seccomp: no perf events"),
        ("userfaultfd", Errno(EPERM), "seccomp: no userfaultfd (race widening)"),
        ("io_uring_setup", Errno(ENOSYS), "seccomp ENOSYS group: libuv falls back to epoll"),
        ("io_uring_enter", Errno(ENOSYS), "seccomp ENOSYS group"),
        ("io_uring_register", Errno(ENOSYS), "seccomp ENOSYS group"),
        ("pkey_alloc", Errno(ENOSYS), "seccomp ENOSYS group: V8 falls back to mprotect"),
        ("pkey_mprotect", Errno(ENOSYS), "seccomp ENOSYS group"),
        ("io_setup", Errno(EPERM), "seccomp: no AIO"),
        ("memfd_create", Errno(EPERM), "seccomp: no anonymous file to fill and execute"),
        ("memfd_secret", Errno(EPERM), "seccomp: no memfd_secret"),
        ("seccomp_get_action_avail", Errno(EPERM), "seccomp: the seccomp call itself is not allowed"),
        ("personality_query", Errno(EPERM), "seccomp: personality denied, even the query"),
        ("modify_ldt_read", Errno(EPERM), "seccomp: no LDT"),
        ("iopl", Errno(EPERM), "seccomp: no I/O privilege level"),
        ("ioperm", Errno(EPERM), "seccomp: no I/O ports"),
        ("finit_module", Errno(EPERM), "seccomp: no module loading"),
        ("delete_module", Errno(EPERM), "seccomp: no module unloading"),
        ("kexec_file_load", Errno(EPERM), "seccomp: no kexec"),
        ("reboot_bad_magic", Errno(EPERM), "seccomp: reboot denied before its magic is read"),
        ("syslog_size", Errno(EPERM), "seccomp: no kernel log"),
        ("sethostname", Errno(EPERM), "seccomp: host name fixed (and the uts namespace's own)"),
        ("setdomainname", Errno(EPERM), "seccomp: domain name fixed"),
        ("name_to_handle_at", Errno(EPERM), "seccomp: no file handles"),
        ("open_by_handle_at", Errno(EPERM), "seccomp: no 'shocker' open by inode"),
        // Process creation: no child, whatever the spelling.
        ("fork", Errno(EPERM), "seccomp: fork denied explicitly"),
        ("vfork", Errno(EPERM), "seccomp: vfork denied explicitly"),
        ("clone_fork", Errno(EPERM), "seccomp: clone without CLONE_THREAD"),
        ("clone_newns", Errno(EPERM), "seccomp: clone with CLONE_NEWNS"),
        ("clone_newuser", Errno(EPERM), "seccomp: clone with CLONE_NEWUSER"),
        ("clone_newpid", Errno(EPERM), "seccomp: clone with CLONE_NEWPID"),
        ("clone_newnet", Errno(EPERM), "seccomp: clone with CLONE_NEWNET"),
        ("clone_vm_no_thread", Errno(EPERM), "seccomp: CLONE_VM without CLONE_THREAD is a process"),
        ("clone_thread_newns", Errno(EPERM), "seccomp: thread flags do not carry a namespace flag through"),
        ("clone_thread_newuser", Errno(EPERM), "seccomp: thread flags with CLONE_NEWUSER"),
        ("clone_thread_newnet", Errno(EPERM), "seccomp: thread flags with CLONE_NEWNET"),
        ("clone_thread_flags_in_high_half", Errno(EPERM), "seccomp: thread flags in bits 32-63, which the kernel ignores, do not make a fork pass"),
        ("clone3_fork", Errno(ENOSYS), "seccomp ENOSYS group: clone3's flags are in memory seccomp cannot read"),
        ("clone3_newuser", Errno(ENOSYS), "seccomp ENOSYS group"),
        ("pthread_create", Allowed, "contrast: a thread is made (clone3 ENOSYS, then clone with thread flags)"),
        // execve is allowed by the policy (the init needs it) and answered by the exec gate,
        // which refuses every exec after the init's before the kernel looks at the path;
        // the root and the mounts stand behind it (ENOENT, EACCES without the gate).
        ("execve_bin_sh", Errno(EPERM), "exec gate; root: there is no /bin/sh in the job's root"),
        ("execve_skill_tool", Errno(EPERM), "exec gate; mount: /skill is noexec, DAC (0444) and landlock (no Execute)"),
        ("execve_dev_null", Errno(EPERM), "exec gate; kernel: not a regular file (and the device mount is noexec)"),
        ("execve_proc_dir", Errno(EPERM), "exec gate; kernel: a directory (and /proc is noexec)"),
        ("execve_proc_self_fd_tool", Errno(EPERM), "exec gate; mount: the descriptor's file is on the noexec /skill"),
        ("execveat_tool_fd", Errno(EPERM), "seccomp: execveat denied explicitly"),
        ("execveat_path", Errno(EPERM), "seccomp: execveat denied explicitly"),
        // Sockets under net deny.
        ("socket_inet_stream", Errno(EPERM), "seccomp: no AF_INET under deny"),
        ("socket_inet_dgram", Errno(EPERM), "seccomp: no UDP under deny"),
        ("socket_inet6_stream", Errno(EPERM), "seccomp: no AF_INET6 under deny"),
        ("socket_inet6_dgram", Errno(EPERM), "seccomp: no UDP6 under deny"),
        ("socket_inet_raw", Errno(EPERM), "seccomp: no raw sockets"),
        ("socket_inet_ping", Errno(EPERM), "seccomp: no ICMP ping sockets"),
        ("socket_inet_sctp", Errno(EPERM), "seccomp: no SCTP"),
        ("socket_packet", Errno(EPERM), "seccomp: no packet sockets"),
        ("socket_netlink_route", Allowed, "allowed: NETLINK_ROUTE for os.networkInterfaces (read-only without CAP_NET_ADMIN)"),
        ("socket_netlink_audit", Errno(EPERM), "seccomp: netlink other than route"),
        ("socket_netlink_uevent", Errno(EPERM), "seccomp: no kobject uevents"),
        ("socket_netlink_netfilter", Errno(EPERM), "seccomp: no netfilter netlink"),
        ("socket_netlink_xfrm", Errno(EPERM), "seccomp: no xfrm netlink"),
        ("socket_netlink_generic", Errno(EPERM), "seccomp: no generic netlink"),
        ("socket_vsock", Errno(EPERM), "seccomp: no vsock (the VM host's sockets)"),
        ("socket_alg", Errno(EPERM), "seccomp: no AF_ALG"),
        ("socket_bluetooth", Errno(EPERM), "seccomp: no other family"),
        ("socket_unix_stream", Allowed, "allowed: AF_UNIX (glibc's nscd lookups)"),
        ("socket_unix_dgram", Allowed, "allowed: AF_UNIX datagram"),
        ("socketpair_unix", Allowed, "allowed: unix socket pairs"),
        ("socketpair_inet", Errno(EPERM), "seccomp: socketpair of another family"),
        ("connect_host_abstract", Errno(ECONNREFUSED), "net namespace: the host's abstract name does not exist in the job's (landlock's abstract-socket scope stands behind it)"),
        ("bind_own_abstract", Allowed, "allowed: bind (getifaddrs needs it)"),
        ("listen_own_abstract", Errno(EPERM), "seccomp: a tool serves nothing (listen denied)"),
        ("accept", Errno(EPERM), "seccomp: accept denied"),
        // Terminal injection: stdin is a pipe, so without the filter the kernel says ENOTTY.
        ("ioctl_tiocsti", Errno(EPERM), "seccomp: TIOCSTI refused"),
        ("ioctl_tiocsti_high_bits", Errno(EPERM), "seccomp: compared on the low 32 bits, high bits do not slip past"),
        ("ioctl_tioclinux", Errno(EPERM), "seccomp: TIOCLINUX refused"),
        ("ioctl_tioclinux_high_bits", Errno(EPERM), "seccomp: TIOCLINUX with bit 63 set"),
        ("ioctl_tcgets", Errno(ENOTTY), "contrast: an allowed ioctl reaches the kernel, which answers ENOTTY on a pipe"),
        ("pipe2_notification", Errno(EPERM), "seccomp: no notification pipe (watch_queue)"),
        ("setsockopt_attach_filter", Errno(EPERM), "seccomp: no classic BPF on a socket"),
        ("setsockopt_attach_reuseport_cbpf", Errno(EPERM), "seccomp: no classic BPF for a reuseport group"),
        // Writes through every mount: seccomp's openat/open groups admit no write flag,
        // so EPERM; landlock (no write right) and the read-only mounts stand behind it.
        ("open_creat_skill", Errno(EPERM), "seccomp: O_CREAT|O_WRONLY in /skill (ro bind, landlock read-only)"),
        ("open_creat_tmp", Errno(EPERM), "seccomp: /tmp (ro root tmpfs)"),
        ("open_creat_root", Errno(EPERM), "seccomp: / (ro root tmpfs)"),
        ("open_creat_proc_self", Errno(EPERM), "seccomp: /proc/self"),
        ("open_creat_dev", Errno(EPERM), "seccomp: /dev"),
        ("open_creat_host_path", Errno(EPERM), "seccomp: a host path (not mounted)"),
        ("open_wronly_tool", Errno(EPERM), "seccomp: O_WRONLY"),
        ("open_rdwr_tool", Errno(EPERM), "seccomp: O_RDWR"),
        ("open_trunc_tool", Errno(EPERM), "seccomp: O_RDONLY|O_TRUNC"),
        ("open_append_tool", Errno(EPERM), "seccomp: O_APPEND"),
        ("open_tmpfile_skill", Errno(EPERM), "seccomp: O_TMPFILE"),
        ("open_wronly_dev_null", Errno(EPERM), "seccomp: even /dev/null, which landlock would let be written"),
        ("open_wronly_proc_hostname", Errno(EPERM), "seccomp: no sysctl writes"),
        ("open_wronly_sysrq_trigger", Errno(EPERM), "seccomp: no sysrq"),
        ("open_wronly_self_mem", Errno(EPERM), "seccomp: no writing its own memory through /proc"),
        ("legacy_open_creat", Errno(EPERM), "seccomp: the legacy open call has the same flag rule"),
        ("legacy_creat", Errno(EPERM), "seccomp: creat not allowed"),
        ("openat2_creat", Errno(EPERM), "seccomp: openat2 not allowed (its flags are in memory)"),
        ("openat2_read", Errno(EPERM), "seccomp: openat2 not allowed, even to read"),
        ("read_only_fd_write", Errno(EBADF), "kernel: the descriptor was opened read-only"),
        ("read_only_fd_pwrite", Errno(EPERM), "seccomp: pwrite64 not allowed (the kernel would say EBADF)"),
        ("read_only_fd_mmap_shared_write", Errno(EACCES), "kernel: no shared writable map of a read-only descriptor"),
        ("mmap_hugetlb", Errno(EPERM), "seccomp: huge pages come from the host's pool, which the memory cgroup does not count (without it: ENOMEM where the host keeps none)"),
        ("madvise_mergeable", Errno(EPERM), "seccomp: no KSM merging, whose timing tells what other processes hold (without it: allowed)"),
        ("madvise_dontneed", Allowed, "contrast: handing pages back, as V8 does, is allowed"),
        ("ioctl_figetbsz", Errno(EPERM), "seccomp: only the ioctl commands Node asks for (the kernel answers any file's block size)"),
        ("fcntl_ofd_read_lock", Errno(EPERM), "seccomp: only the fcntl commands Node uses, no locks (the kernel grants a read lock on a read-only descriptor)"),
        ("fcntl_getfl", Allowed, "contrast: F_GETFL, which libuv asks, is allowed"),
        ("fchmod", Errno(EPERM), "seccomp: fchmod"),
        ("fchown", Errno(EPERM), "seccomp: fchown"),
        ("ftruncate", Errno(EPERM), "seccomp: ftruncate"),
        ("fallocate", Errno(EPERM), "seccomp: fallocate"),
        ("fsetxattr", Errno(EPERM), "seccomp: fsetxattr"),
        ("mkdir_skill", Errno(EPERM), "seccomp: mkdir (the kernel would say EROFS)"),
        ("mkdir_tmp", Errno(EPERM), "seccomp: mkdir"),
        ("mkdir_root", Errno(EPERM), "seccomp: mkdir"),
        ("mkdirat_skill", Errno(EPERM), "seccomp: mkdirat"),
        ("mknod_fifo", Errno(EPERM), "seccomp: mknod"),
        ("unlink_tool", Errno(EPERM), "seccomp: unlink"),
        ("unlinkat_tool", Errno(EPERM), "seccomp: unlinkat"),
        ("rmdir_skill", Errno(EPERM), "seccomp: rmdir"),
        ("rename_tool", Errno(EPERM), "seccomp: rename"),
        ("renameat2_exchange", Errno(EPERM), "seccomp: renameat2"),
        ("symlink", Errno(EPERM), "seccomp: symlink"),
        ("symlinkat", Errno(EPERM), "seccomp: symlinkat"),
        ("link", Errno(EPERM), "seccomp: link"),
        ("linkat", Errno(EPERM), "seccomp: linkat"),
        ("chmod", Errno(EPERM), "seccomp: chmod"),
        ("chmod_skill_dir", Errno(EPERM), "seccomp: chmod of /skill"),
        ("chown", Errno(EPERM), "seccomp: chown"),
        ("truncate", Errno(EPERM), "seccomp: truncate"),
        ("utimensat", Errno(EPERM), "seccomp: utimensat"),
        ("setxattr", Errno(EPERM), "seccomp: setxattr"),
        // Reads beyond what is needed.
        ("read_etc_passwd", Errno(ENOENT), "root: no /etc/passwd in the job's root"),
        ("read_etc_shadow", Errno(ENOENT), "root: no /etc/shadow"),
        ("read_proc_1_environ", Errno(ENOENT), "proc hidepid=invisible: pid 1 (root) is not even listed"),
        ("read_proc_1_cmdline", Errno(ENOENT), "hidepid=invisible"),
        ("read_proc_1_root_passwd", Errno(ENOENT), "hidepid=invisible"),
        ("read_proc_1_mem", Errno(ENOENT), "hidepid=invisible"),
        ("read_proc_self_root_passwd", Errno(ENOENT), "root: its own root is the job's"),
        ("read_proc_kcore", OneOf(&[EACCES, ENOENT]), "DAC 0400 root where the job's subset=pid procfs lists it (6.18 here does), absent where it does not (Debian's 6.12)"),
        ("read_sys_kernel", Errno(ENOENT), "root: no /sys"),
        ("read_sys_fs_cgroup", Errno(ENOENT), "root: no /sys"),
        ("read_dev_mem", Errno(ENOENT), "root: only four device nodes"),
        ("read_dev_kmsg", Errno(ENOENT), "root: no /dev/kmsg"),
        ("read_dev_tty", Errno(ENOENT), "root: no /dev/tty"),
        ("read_dev_shm", Errno(ENOENT), "root: no /dev/shm (no cross-job channel)"),
        ("read_work", Errno(ENOENT), "root: no host tree"),
        ("read_home", Errno(ENOENT), "root: no host tree"),
        ("read_host_path", Errno(ENOENT), "root: the host's file is not there"),
        ("read_skill_tool", Allowed, "contrast: /skill is readable"),
        ("read_dev_urandom", Allowed, "contrast: /dev/urandom is readable"),
        ("read_proc_self_status", Allowed, "contrast: its own /proc entries are readable"),
        ("opendir_root", Errno(EACCES), "landlock: no ReadDir on / (DAC 0755 would allow)"),
        ("opendir_dev", Errno(EACCES), "landlock: no ReadDir on /dev"),
        ("opendir_skill", Allowed, "contrast: /skill may be listed"),
        ("readlink_proc_1_root", Errno(ENOENT), "hidepid=invisible"),
        ("readlink_proc_1_exe", Errno(ENOENT), "hidepid=invisible"),
        ("stat_proc_1", Errno(ENOENT), "hidepid=invisible"),
        // Identity and privilege.
        ("setuid_0", Errno(EPERM), "seccomp: setuid (no capability either)"),
        ("setgid_0", Errno(EPERM), "seccomp: setgid"),
        ("setresuid_0", Errno(EPERM), "seccomp: setresuid"),
        ("setgroups_0", Errno(EPERM), "seccomp: setgroups"),
        ("capset_raise", Errno(EPERM), "seccomp: capset (the bounding set is empty too)"),
        ("prctl_set_dumpable", Errno(EPERM), "seccomp: prctl other than PR_SET_NAME/PR_GET_NAME"),
        ("prlimit_core_zero", Errno(EPERM), "seccomp: no limit but RLIMIT_NOFILE may be set; RLIMIT_CORE stays 1, so a pipe core_pattern gets no dump"),
        ("setrlimit_core_zero", Errno(EPERM), "seccomp: glibc's setrlimit is prlimit64 with a new limit"),
        ("prlimit_nofile_read", Allowed, "contrast: reading a limit is allowed"),
        ("prctl_cap_ambient_raise", Errno(EPERM), "seccomp: no ambient capability"),
        ("prctl_set_name", Allowed, "contrast: PR_SET_NAME is allowed"),
        ("setpgid", Errno(EPERM), "seccomp: setpgid"),
        // Cross-job channels.
        ("shmget_private", Errno(EPERM), "seccomp: no SysV shared memory"),
        ("msgget_host_key", Errno(EPERM), "seccomp: no SysV message queue (and the ipc namespace hides the host's, see facts)"),
        ("semget_host_key", Errno(EPERM), "seccomp: no SysV semaphores"),
        ("msgget_private", Errno(EPERM), "seccomp: no SysV message queue"),
        ("mq_open", Errno(EPERM), "seccomp: no POSIX message queues"),
        // Signals.
        ("kill_host_pid_sig0", Errno(ESRCH), "pid namespace: the test's own pid does not exist in the job"),
        ("kill_pid1_sig0", Errno(EPERM), "DAC: pid 1 is root's (landlock's signal scope stands behind it)"),
        ("kill_pid1_sigkill", Errno(EPERM), "DAC: pid 1 is root's"),
        ("kill_minus1_sigkill", Errno(ESRCH), "pid namespace: nothing to signal but pid 1 (exempt) and itself (tried only once the namespace was shown to hold)"),
    ]
}

fn attempt_errno(attempts: &Value, name: &str) -> Option<(i64, i64)> {
    let a = attempts.get(name)?;
    Some((a["ret"].as_i64()?, a["errno"].as_i64()?))
}

fn fact<'a>(facts: &'a Value, name: &str) -> &'a Value {
    facts
        .get(name)
        .unwrap_or_else(|| panic!("the probe reported no fact {name}: {facts:#}"))
}

fn fact_str<'a>(facts: &'a Value, name: &str) -> &'a str {
    fact(facts, name)
        .as_str()
        .unwrap_or_else(|| panic!("fact {name} is not a string"))
}

fn fact_i64(facts: &Value, name: &str) -> i64 {
    fact(facts, name)
        .as_i64()
        .unwrap_or_else(|| panic!("fact {name} is not a number"))
}

/// A SysV message queue made on the host for one test, removed with it.
struct HostQueue {
    key: i32,
    id: i32,
}

impl HostQueue {
    fn new() -> HostQueue {
        let base = 0x0f5e_0000 | (std::process::id() as i32 & 0xffff);
        for i in 0..64 {
            let key = base.wrapping_add(i << 16);
            // SAFETY: msgget takes plain integers.
            let id = unsafe { libc::msgget(key, libc::IPC_CREAT | libc::IPC_EXCL | 0o600) };
            if id >= 0 {
                return HostQueue { key, id };
            }
        }
        panic!(
            "cannot create a SysV message queue on the host: {}",
            std::io::Error::last_os_error()
        );
    }
}

impl Drop for HostQueue {
    fn drop(&mut self) {
        // SAFETY: IPC_RMID with a null buffer removes the queue this test made.
        unsafe { libc::msgctl(self.id, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

/// The probe's directory holds the probe and nothing else.
fn assert_probe_dir_untouched(dir: &Path) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the probe dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec!["probe".to_string()],
        "nothing appeared beside the probe"
    );
}

#[test]
fn native_probe_every_forbidden_call_fails_with_its_errno() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let (dir, exe) = compile_probe();
    let engine = probe_engine(&state, &exe);

    // What the host offers, for the probe to try to reach: an abstract unix socket, a
    // SysV queue, its own pid, and a path beside the probe (whose directory exists in the
    // job's root as the probe's mount point, but empty).
    let abstract_name = format!("ovsr-probe-abs-{}", std::process::id());
    let addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            abstract_name.as_bytes(),
        )
        .expect("abstract address");
    let listener =
        std::os::unix::net::UnixListener::bind_addr(&addr).expect("host abstract listener");
    let queue = HostQueue::new();
    let canary = dir.path().join("canary");
    let input = format!(
        "main {abstract_name} {} {} {}",
        canary.display(),
        std::process::id(),
        queue.key
    );

    let r = run_probe(&engine, "itest-probe-main", &input);
    assert_status(&r, "ok", None);
    let out = &r["output"];
    let attempts = &out["attempts"];
    let facts = &out["facts"];

    // Every attempt is checked, and every check was attempted.
    let table = expectations();
    let reported: std::collections::BTreeSet<&str> = attempts
        .as_object()
        .expect("attempts object")
        .keys()
        .map(String::as_str)
        .collect();
    let expected: std::collections::BTreeSet<&str> = table.iter().map(|(n, _, _)| *n).collect();
    assert_eq!(
        reported, expected,
        "the probe's attempts and this table match"
    );
    let mut wrong = Vec::new();
    for (name, expect, why) in &table {
        let (ret, errno) = attempt_errno(attempts, name).expect("attempt present");
        let ok = match expect {
            Errno(e) => ret < 0 && errno == i64::from(*e),
            OneOf(es) => ret < 0 && es.iter().any(|e| errno == i64::from(*e)),
            Allowed => ret >= 0,
        };
        if !ok {
            wrong.push(format!(
                "{name}: expected {expect:?}, got ret {ret} errno {errno} ({}) -- {why}",
                std::io::Error::from_raw_os_error(errno as i32)
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "attempts with another outcome:\n{}",
        wrong.join("\n")
    );

    // Who the probe is: pid 2 under the job's pid 1, an unprivileged uid of its own, no
    // capability, no_new_privs, in seccomp filter mode, only descriptors 0-2, nothing of
    // the host's environment.
    assert_eq!(
        fact_i64(facts, "pid"),
        2,
        "pid namespace: the tool is pid 2"
    );
    assert_eq!(
        fact_i64(facts, "ppid"),
        1,
        "pid namespace: under the job's init"
    );
    assert_eq!(
        fact_i64(facts, "proc_pid_count"),
        1,
        "hidepid: /proc lists only itself"
    );
    for id in ["uid", "euid", "gid"] {
        let v = fact_i64(facts, id);
        assert!(
            v >= SANDBOX_UID_BASE as i64 && v < u32::MAX as i64,
            "{id} {v} is a sandbox id"
        );
    }
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(fact_str(facts, cap), "0000000000000000", "{cap} is empty");
    }
    assert_eq!(fact_str(facts, "NoNewPrivs"), "1", "no_new_privs is set");
    // 1, not 0: the kernel ignores 0 when core_pattern is a pipe, and reads 1 as no dump.
    assert_eq!(fact_i64(facts, "rlimit_core_soft"), 1, "core limit (soft)");
    assert_eq!(fact_i64(facts, "rlimit_core_hard"), 1, "core limit (hard)");
    // And a core holds none of the tool's memory: a socket core_pattern ignores the limit.
    assert_eq!(
        fact_str(facts, "coredump_filter").trim(),
        "00000000",
        "coredump_filter"
    );
    assert_eq!(fact_str(facts, "Seccomp"), "2", "seccomp filter mode");
    assert!(
        fact_str(facts, "Seccomp_filters")
            .parse::<u32>()
            .is_ok_and(|n| n >= 1),
        "at least one filter"
    );
    assert_eq!(
        fact_str(facts, "fds"),
        "0,1,2",
        "no descriptor but 0, 1 and 2"
    );
    let host_env: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
    for entry in fact_str(facts, "self_environ")
        .split('\0')
        .filter(|e| !e.is_empty())
    {
        assert!(
            !host_env.iter().any(|h| h == entry),
            "the host's {entry:?} reached the job's environment"
        );
    }
    assert_eq!(fact_str(facts, "nodename"), "skill", "uts namespace");
    assert_eq!(
        fact_str(facts, "proc_hostname"),
        "",
        "/proc/sys is not in the job's procfs (subset=pid): no host-wide /proc file"
    );
    for line in fact_str(facts, "cgroup").lines() {
        assert!(
            line.ends_with(":/"),
            "cgroup namespace rooted at the job: {line}"
        );
    }

    // Mounts: few, each read-only and nosuid (proc read-write but hidepid, nosuid, nodev,
    // noexec). Whether they name host paths is the next test's question.
    let mountinfo = fact_str(facts, "mountinfo");
    let lines: Vec<&str> = mountinfo.lines().collect();
    assert!(
        (3..=16).contains(&lines.len()),
        "a small mount table: {mountinfo}"
    );
    for line in &lines {
        let fields: Vec<&str> = line.split(' ').collect();
        let (point, opts) = (fields.get(4).copied(), fields.get(5).copied());
        let opts: Vec<&str> = opts.unwrap_or("").split(',').collect();
        assert!(opts.contains(&"nosuid"), "nosuid: {line}");
        assert!(opts.contains(&"ro"), "read-only: {line}");
        if point == Some("/proc") {
            assert!(line.contains("hidepid=invisible"), "{line}");
            assert!(
                opts.contains(&"noexec") && opts.contains(&"nodev"),
                "{line}"
            );
        }
    }
    // /skill is no mount of its own: its files were written into the job's tmpfs root.
    assert!(
        !lines.iter().any(|l| l.split(' ').nth(4) == Some("/skill")),
        "{mountinfo}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.split(' ').nth(4) == Some("/") && l.contains(" - tmpfs ")),
        "the job's root is a tmpfs of its own: {mountinfo}"
    );

    // The host's channels are not the job's: its SysV queue and abstract socket are
    // listed on the host and absent in the job (ipc and net namespaces), its network
    // has only a loopback.
    let listed_on_host = |path: &str, needle: &str| {
        std::fs::read_to_string(path)
            .expect("read host proc")
            .lines()
            .any(|l| l.split_whitespace().any(|f| f == needle))
    };
    let key = queue.key.to_string();
    assert!(
        listed_on_host("/proc/sysvipc/msg", &key),
        "control: the host lists its queue"
    );
    assert!(
        !fact_str(facts, "sysvipc_msg")
            .lines()
            .any(|l| l.split_whitespace().next() == Some(key.as_str())),
        "ipc namespace: the host's queue is not visible in the job"
    );
    let at_name = format!("@{abstract_name}");
    assert!(
        listed_on_host("/proc/net/unix", &at_name),
        "control: the host lists its socket"
    );
    assert!(
        !fact_str(facts, "net_unix").contains(&abstract_name),
        "net namespace: the host's abstract socket is not visible in the job"
    );
    let ifaces: Vec<&str> = fact_str(facts, "net_dev")
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(str::trim))
        .collect();
    assert_eq!(ifaces, vec!["lo"], "net namespace: only a loopback");

    // /proc beyond what a tool needs: root-only files stay closed (DAC), kernel
    // addresses read as zeros, no key is visible.
    assert_eq!(
        fact_i64(facts, "proc_self_stack"),
        -i64::from(EACCES),
        "kernel stacks need CAP_SYS_ADMIN"
    );
    // The job's procfs holds its own processes only (subset=pid): no host-wide file.
    for name in [
        "proc_cmdline",
        "proc_version",
        "proc_config_gz",
        "proc_keys",
        "proc_key_users",
        "proc_timer_list",
        "proc_slabinfo",
        "proc_vmallocinfo",
        "proc_pagetypeinfo",
        "proc_kpagecount",
        "proc_sched_debug",
        "proc_sys_core_pattern",
        "proc_iomem",
        "kallsyms_lines_read",
    ] {
        assert_eq!(
            fact_i64(facts, name),
            -i64::from(libc::ENOENT),
            "{name}: host-wide /proc files are not in the job's procfs"
        );
    }

    // The host is unchanged: nothing at the path the probe tried to create, no connection
    // reached the host's listener, no job directory, process or cgroup left.
    assert!(!canary.exists(), "no file at the host path");
    assert_probe_dir_untouched(dir.path());
    listener.set_nonblocking(true).expect("nonblocking");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the host's abstract listener saw a connection: {other:?}"),
    }
    drop(queue);
    state.assert_clean();
    assert_host_clean("itest-probe");
}

#[test]
fn native_probe_mountinfo_names_no_host_path() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let (dir, exe) = compile_probe();
    let engine = probe_engine(&state, &exe);
    let input = format!("main none {}/canary 1 1", dir.path().display());
    let r = run_probe(&engine, "itest-probe-mounts", &input);
    assert_status(&r, "ok", None);
    let mountinfo = fact_str(&r["output"]["facts"], "mountinfo").to_string();
    // Field 4 of mountinfo is the mount's root inside its file system: for a bind mount,
    // the host path it came from. The job may see the paths it runs at (Node's, the
    // probe's); it must not learn where the runner keeps its state or source.
    let state_dir = state.path().display().to_string();
    let source_dir = env!("CARGO_MANIFEST_DIR");
    for forbidden in [state_dir.as_str(), source_dir, "/home/", "/root/"] {
        assert!(
            !mountinfo.contains(forbidden),
            "the job's mountinfo names the host path {forbidden:?}:\n{mountinfo}"
        );
    }
    state.assert_clean();
    assert_host_clean("itest-probe");
}

#[test]
fn native_probe_other_abis_are_killed() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let (dir, exe) = compile_probe();
    let engine = probe_engine(&state, &exe);
    // An i386 call through int 0x80 (audit arch i386: seccompiler's arch check) and an
    // x32 call (nr | 0x40000000: the runner's x32 guard) end the process with SIGSYS;
    // the probe's note on stderr shows it got as far as the call.
    for (mode, marker) in [
        ("int80", "probe: int80: about to"),
        ("x32", "probe: x32: about to"),
    ] {
        let r = run_probe(&engine, &format!("itest-probe-{mode}"), mode);
        assert_status(&r, "error", Some("signal"));
        assert_eq!(r["signal"], "SIGSYS", "{mode}: killed by seccomp: {r:#}");
        assert!(
            r["stderr"].as_str().unwrap_or("").contains(marker),
            "{mode}: the probe reached the call: {r:#}"
        );
        assert!(r.get("output").is_none_or(Value::is_null), "{mode}: {r:#}");
    }
    assert_probe_dir_untouched(dir.path());
    state.assert_clean();
    assert_host_clean("itest-probe");
}

/// The exec gate alone, with the policy's seccomp filter left out (the layer matrix's
/// hook): an i386 call through int 0x80 and an x32 call kill the process all the same, so
/// no other ABI's execve can pass the gate. The control leaves the gate out as well: the
/// same calls (a getpid each) then return, so it is the gate that kills. Before, the gate
/// let every other ABI through and relied on the policy's filter.
#[test]
fn native_probe_other_abis_are_killed_by_the_exec_gate_alone() {
    use openvibe_skill_runner::fault::Layer;
    require_host();
    let _h = exclusive();
    let state = State::new();
    let (dir, exe) = compile_probe();
    for (omit, gate) in [
        (vec![Layer::Seccomp], true),
        (vec![Layer::Seccomp, Layer::ExecGate], false),
    ] {
        let engine = engine_omitting(state.path(), omit)
            .with_probe_executable(exe.to_path_buf())
            .with_runner_executable(PathBuf::from(INIT));
        for (mode, marker) in [
            ("int80", "probe: int80: about to"),
            ("x32", "probe: x32: about to"),
        ] {
            let r = run_probe(&engine, &format!("itest-probe-gate-{mode}"), mode);
            assert!(
                r["stderr"].as_str().unwrap_or("").contains(marker),
                "{mode}: the probe reached the call: {r:#}"
            );
            if gate {
                assert_status(&r, "error", Some("signal"));
                assert_eq!(r["signal"], "SIGSYS", "{mode}: killed by the gate: {r:#}");
            } else {
                assert_status(&r, "ok", None);
                assert!(
                    r["output"][format!("{mode}_survived")].is_i64(),
                    "{mode}: without the gate the call returns: {r:#}"
                );
            }
        }
    }
    assert_probe_dir_untouched(dir.path());
    state.assert_clean();
    assert_host_clean("itest-probe");
}

/// Two jobs at once: one binds an abstract unix socket, the other sends to that name.
/// Each job has its own network namespace (abstract names live there) and landlock
/// scoping behind it, so nothing arrives; the control shows the listener reaches itself.
#[test]
fn native_probe_two_jobs_share_no_abstract_socket() {
    require_host();
    let _host = exclusive();
    let (_dir, exe) = compile_probe();
    let state = State::new();
    let engine = std::sync::Arc::new(probe_engine(&state, &exe));
    let name = format!("ovsr-cross-{}", std::process::id());
    let listener = {
        let engine = engine.clone();
        let input = format!("listen {name}");
        std::thread::spawn(move || run_probe(&engine, "probe-cross-listen", &input))
    };
    // The sender starts once the listener's job is running (its sandbox processes are
    // there), and the two report when they were there: the test proves they overlapped.
    let started = std::time::Instant::now();
    while sandbox_processes("probe-cross-listen").is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the listening job never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    let sender = run_probe(&engine, "probe-cross-send", &format!("send {name}"));
    let listener = listener.join().expect("listener thread");
    assert_eq!(sender["status"], "ok", "{sender}");
    assert_eq!(listener["status"], "ok", "{listener}");
    let (l, s) = (&listener["output"], &sender["output"]);
    assert_eq!(l["bind_errno"], 0, "the listener binds its name: {l}");
    assert_eq!(
        l["self_received"], 4,
        "control: a job reaches its own name: {l}"
    );
    assert_eq!(s["sent"], 0, "the other job cannot reach it: {s}");
    assert_eq!(s["errno"], i64::from(ECONNREFUSED), "{s}");
    assert_eq!(l["received"], -1, "nothing arrived from the other job: {l}");
    let ns = |v: &Value, k: &str| v[k].as_i64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert!(
        ns(l, "from_ns") <= ns(s, "first_ns") && ns(s, "last_ns") <= ns(l, "until_ns"),
        "the sender's attempts fell within the listener's time bound to its name (the two \
         jobs overlapped): listener {l}, sender {s}"
    );
    assert_host_clean("probe-cross");
}

/// Every network route under each net mode, natively: what answers, and which layer.
fn net_expectations(net: &str) -> Vec<(&'static str, Expect, &'static str)> {
    use libc::EACCES;
    let egress = net != "deny";
    // Under deny no AF_INET socket exists at all, so everything after it is EPERM.
    let inet = |e: Expect| if egress { e } else { Errno(EPERM) };
    vec![
        (
            "raw_icmp",
            Errno(EPERM),
            "seccomp: no raw socket in any mode",
        ),
        ("raw_tcp", Errno(EPERM), "seccomp: no raw socket"),
        ("raw_icmpv6", Errno(EPERM), "seccomp: no raw IPv6 socket"),
        (
            "ping_socket",
            Errno(EPERM),
            "seccomp: ICMP datagram sockets (protocol 1) do not match",
        ),
        (
            "ping6_socket",
            Errno(EPERM),
            "seccomp: ICMPv6 datagram sockets do not match",
        ),
        ("packet_socket", Errno(EPERM), "seccomp: no AF_PACKET"),
        ("sctp_stream", Errno(EPERM), "seccomp: protocol 0 only"),
        ("mptcp_stream", Errno(EPERM), "seccomp: protocol 0 only"),
        (
            "netlink_netfilter",
            Errno(EPERM),
            "seccomp: netlink route only",
        ),
        (
            "tcp_socket",
            inet(Allowed),
            "seccomp: TCP sockets exist only with egress",
        ),
        (
            "udp_socket",
            inet(Allowed),
            "seccomp: UDP sockets exist only with egress",
        ),
        (
            "tcp_1.2.3.4:80",
            inet(Allowed),
            "lands on the runner's proxy (which refuses it: no request)",
        ),
        (
            "tcp_1.2.3.4:443",
            inet(Allowed),
            "lands on the runner's proxy",
        ),
        (
            "tcp_1.2.3.4:22",
            inet(Errno(EACCES)),
            "landlock: connect to 53, 80 and 443 only",
        ),
        (
            "tcp_1.2.3.4:8080",
            inet(Errno(EACCES)),
            "landlock: connect to 53, 80 and 443 only",
        ),
        (
            "tcp_127.0.0.1:22",
            inet(Errno(EACCES)),
            "landlock: connect to 53, 80 and 443 only",
        ),
        (
            "tcp_169.254.169.254:80",
            inet(Allowed),
            "lands on the runner's proxy, which refuses it",
        ),
        (
            "tcp6_2001:db8::5:443",
            inet(Allowed),
            "lands on the runner's proxy, which refuses it",
        ),
        ("tcp6_2001:db8::5:22", inet(Errno(EACCES)), "landlock"),
        (
            "udp_1.2.3.4:9",
            inet(Errno(ECONNREFUSED)),
            "nothing but DNS answers UDP: port unreachable",
        ),
        (
            "udp_8.8.8.8:123",
            inet(Errno(ECONNREFUSED)),
            "no NTP or anything else",
        ),
        (
            "udp_10.0.0.1:5353",
            inet(Errno(ECONNREFUSED)),
            "no mDNS or LAN",
        ),
        (
            "tcp_bind_8081",
            inet(Errno(EACCES)),
            "landlock: no TCP bind",
        ),
        (
            "tcp_listen",
            inet(Errno(EPERM)),
            "seccomp: a tool serves nothing",
        ),
        (
            "siocsifflags_down",
            inet(Errno(EPERM)),
            "no CAP_NET_ADMIN (and seccomp's ioctl list)",
        ),
    ]
}

#[test]
fn native_probe_network_routes_in_every_mode() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let (_dir, exe) = compile_probe();
    let engine = probe_engine(&state, &exe);
    for net in ["deny", "openvibe-only", "public"] {
        let r = run_probe_net(&engine, &format!("itest-probe-net-{net}"), "net", net);
        assert_status(&r, "ok", None);
        let attempts = &r["output"]["attempts"];
        let expected = net_expectations(net);
        assert_eq!(
            attempts.as_object().map(|o| o.len()),
            Some(expected.len()),
            "{net}: every attempt is checked: {attempts:#}"
        );
        for (name, want, why) in expected {
            let (ret, errno) = attempt_errno(attempts, name)
                .unwrap_or_else(|| panic!("{net}: the probe did not try {name}"));
            match want {
                Allowed => assert!(ret >= 0, "{net} {name} ({why}): refused with errno {errno}"),
                Errno(e) => assert!(
                    ret < 0 && errno == e as i64,
                    "{net} {name} ({why}): expected errno {e}, got ret {ret} errno {errno}"
                ),
                OneOf(es) => assert!(
                    ret < 0 && es.iter().any(|e| errno == i64::from(*e)),
                    "{net} {name} ({why}): expected one of errnos {es:?}, got ret {ret} errno {errno}"
                ),
            }
        }
        // What reached the proxy is in the record, refused; nothing else is.
        let egress = r["egress"].as_array().cloned().unwrap_or_default();
        if net == "deny" {
            assert!(egress.is_empty(), "{egress:?}");
        } else {
            let mut seen: Vec<(String, u64)> = egress
                .iter()
                .map(|e| {
                    assert_eq!(e["allowed"], false, "{net}: {e}");
                    (
                        e["host"].as_str().unwrap_or("").to_string(),
                        e["port"].as_u64().unwrap_or(0),
                    )
                })
                .collect();
            seen.sort();
            assert_eq!(
                seen,
                vec![
                    ("1.2.3.4".to_string(), 80),
                    ("1.2.3.4".to_string(), 443),
                    ("169.254.169.254".to_string(), 80),
                    ("2001:db8::5".to_string(), 443),
                ],
                "{net}: {egress:?}"
            );
        }
    }
    assert_host_clean("itest-probe-net");
}

/// What every exec attempt of the probe's exec mode gets: EPERM, and which layer alone would
/// have let it through without the exec gate.
fn exec_expectations() -> Vec<(&'static str, &'static str)> {
    vec![
        ("exec_self_proc_exe", "exec gate alone: the policy allows execve, landlock and the mount let the probe (Node, for a job) execute"),
        ("exec_self_path", "exec gate alone: the binary's own path, as the init execs it"),
        ("exec_self_proc_fd", "exec gate alone: a descriptor of the binary through /proc/self/fd"),
        ("execveat_self_fd_empty_path", "exec gate and the policy (execveat denied explicitly)"),
        ("execveat_fd_absolute_path", "exec gate and the policy: an absolute path ignores the descriptor"),
        ("execveat_cwd_self_path", "exec gate and the policy"),
        ("exec_loader_with_self", "exec gate alone: landlock lets the loader execute (Node needs it) and it would map the binary"),
        ("exec_script", "exec gate; mount: /skill is noexec"),
        ("exec_from_thread", "exec gate alone: a second thread, as a Node worker would"),
    ]
}

#[test]
fn native_probe_no_second_exec_in_any_net_mode() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let (dir, exe) = compile_probe();
    let (engine, loader) = probe_engine_with_loader(&state, &exe);
    // A #! script whose interpreter is the probe itself, with the exec-landed argument.
    let script = format!("#!{} exec-landed\n", exe.display());
    for net in ["deny", "openvibe-only", "public"] {
        let r = run_probe_files(
            &engine,
            &format!("itest-probe-exec-{net}"),
            &format!("exec {}", loader.display()),
            net,
            &[("script.sh", &script)],
        );
        // The first exec, the init's of the probe standing in for Node, went through: the
        // probe ran and answered. No later one did: no image said "exec_landed".
        assert!(
            r["output"].get("exec_landed").is_none(),
            "{net}: an exec went through: {r:#}"
        );
        assert_status(&r, "ok", None);
        let attempts = &r["output"]["attempts"];
        let expected = exec_expectations();
        assert_eq!(
            attempts.as_object().map(|o| o.len()),
            Some(expected.len()),
            "{net}: every attempt is checked: {attempts:#}"
        );
        for (name, why) in expected {
            let (ret, errno) = attempt_errno(attempts, name)
                .unwrap_or_else(|| panic!("{net}: the probe did not try {name}"));
            assert!(
                ret < 0 && errno == EPERM as i64,
                "{net} {name} ({why}): expected EPERM, got ret {ret} errno {errno}"
            );
        }
    }
    assert_probe_dir_untouched(dir.path());
    assert_host_clean("itest-probe-exec");
}
