/*
 * The native probe of the adversarial suite (integration/probe.rs, integration/probe.md).
 *
 * HOSTILE ON PURPOSE. It tries, one after another, the system calls a sandboxed tool must
 * not be able to make. Never run it outside the sandbox, not even to see what it does: the
 * suite compiles it (cc -static -O2) and runs it only through Engine::with_probe_executable,
 * under the very plan Node gets (same init stage, namespaces, uid, landlock, seccomp).
 *
 * Its argv is Node's (from the plan) and is ignored. It writes the preload's gate record to
 * stderr, as Node's preload does at its gate. On stdin come the gate's go byte (a
 * newline, which Node's preload would read) and the job's args.input as JSON: one string,
 * "MODE ARG...":
 *   "main ABSTRACT HOSTPATH HOSTPID SYSVKEY"  every attempt that returns; prints
 *       {"attempts": {NAME: {"ret": R, "errno": E}}, "facts": {...}} and exits 0
 *   "int80"  an i386 system call through int $0x80: seccomp must kill the process
 *   "x32"    an x32 system call (number | 0x40000000): seccomp must kill the process
 *   "net"    every network route a program could try, with no JavaScript in the way (raw,
 *       packet and ICMP sockets, UDP anywhere, TCP to other ports, bind, listen, routes);
 *       prints {"attempts": {...}} like main
 *   "exec LOADER"  every way to start a program again once "Node" (this probe) runs: itself
 *       through /proc/self/exe, its own path, a descriptor of it (/proc/self/fd, execveat
 *       with AT_EMPTY_PATH and with an absolute path), the loader LOADER with itself as
 *       argument, a #! script, and an exec from a second thread; prints {"attempts": ...}.
 *       Every exec names this probe with argv[1] "exec-landed": should one ever succeed,
 *       the new image prints {"exec_landed": WHICH} and exits at once, and does nothing else.
 *
 * Safety inside the probe itself: every loop is bounded; a process-creating call that
 * unexpectedly succeeds makes its child exit at once (raw_spawn); kill(-1, SIGKILL) is
 * tried only after the probe checked that its pid namespace holds; no call here could
 * change the host even if it went through (no reboot, acct, clock or swap calls; signals
 * to processes outside the job use signal 0).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x80
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

extern char **environ;

/* ---- output: one JSON object, built in a bounded buffer (stdout cap is 64 KiB) ---- */

static char out[60000];
static size_t outlen;
static int overflow;

static void emit(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + outlen, sizeof out - outlen, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof out - outlen) {
        overflow = 1;
        return;
    }
    outlen += (size_t)n;
}

static void emit_str(const char *s, size_t n) {
    emit("\"");
    for (size_t i = 0; i < n && !overflow; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            emit("\\%c", c);
        else if (c == '\n')
            emit("\\n");
        else if (c < 0x20 || c >= 0x7f)
            emit("\\u%04x", c);
        else
            emit("%c", c);
    }
    emit("\"");
}

static int first_attempt = 1;

static void attempt(const char *name, long ret, int err) {
    emit("%s\"%s\":{\"ret\":%ld,\"errno\":%d}", first_attempt ? "" : ",", name, ret,
         ret < 0 ? err : 0);
    first_attempt = 0;
}

/* An attempt whose result is not a descriptor to keep. */
#define TRY(name, expr)                                                                   \
    do {                                                                                  \
        errno = 0;                                                                        \
        long r_ = (long)(expr);                                                           \
        int e_ = errno;                                                                   \
        attempt(name, r_, e_);                                                            \
    } while (0)

/* An attempt whose success made something (`r_`, the call's result): `undo` removes it. */
#define TRY_UNDO(name, expr, undo)                                                        \
    do {                                                                                  \
        errno = 0;                                                                        \
        long r_ = (long)(expr);                                                           \
        int e_ = errno;                                                                   \
        attempt(name, r_, e_);                                                            \
        if (r_ >= 0)                                                                      \
            undo;                                                                         \
    } while (0)

/* An attempt that may return a descriptor: closed at once. */
#define TRY_FD(name, expr) TRY_UNDO(name, expr, close((int)r_))

static int first_fact = 1;

static void fact_num(const char *name, long v) {
    emit("%s\"%s\":%ld", first_fact ? "" : ",", name, v);
    first_fact = 0;
}

static void fact_str(const char *name, const char *s, size_t n) {
    emit("%s\"%s\":", first_fact ? "" : ",", name);
    emit_str(s, n);
    first_fact = 0;
}

/* ---- helpers ---- */

/* Reads at most cap-1 bytes of a file; returns the length, or -errno. */
static long slurp(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = 0;
    for (int i = 0; i < 64 && len + 1 < cap; i++) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = 0;
    close(fd);
    return (long)len;
}

/* The value after "Key:" in /proc/self/status, whitespace trimmed. */
static void status_field(const char *status, const char *key, char *val, size_t cap) {
    val[0] = 0;
    size_t klen = strlen(key);
    const char *p = status;
    for (int i = 0; i < 200 && p && *p; i++) {
        if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
            const char *v = p + klen + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t n = 0;
            while (v[n] && v[n] != '\n' && n + 1 < cap)
                n++;
            memcpy(val, v, n);
            val[n] = 0;
            return;
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
}

/* Numeric entries of a /proc directory (pids, descriptors), listed into `list`. */
static long numeric_entries(const char *path, char *list, size_t cap, int skip_fd) {
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    long count = 0;
    size_t len = 0;
    list[0] = 0;
    for (int i = 0; i < 4096; i++) {
        struct dirent *e = readdir(d);
        if (!e)
            break;
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (*end != 0 || end == e->d_name)
            continue;
        if (skip_fd && v == dirfd(d))
            continue;
        count++;
        int n = snprintf(list + len, cap - len, "%s%ld", len ? "," : "", v);
        if (n > 0 && (size_t)n < cap - len)
            len += (size_t)n;
    }
    closedir(d);
    return count;
}

/*
 * A process- or thread-creating system call made with the syscall instruction inline, so
 * that a child (should the call ever succeed) runs nothing but exit: it touches no stack
 * and no memory, which matters when it shares the parent's (vfork, CLONE_VM). Returns the
 * kernel's answer, errno-style.
 */
static long raw_spawn(long nr, long a1, long a2) {
    long ret;
    register long r10 __asm__("r10") = 0;
    register long r8 __asm__("r8") = 0;
    __asm__ volatile("syscall\n\t"
                     "test %%rax, %%rax\n\t"
                     "jnz 1f\n\t"
                     "mov $60, %%eax\n\t" /* SYS_exit */
                     "xor %%edi, %%edi\n\t"
                     "syscall\n\t"
                     "ud2\n"
                     "1:\n\t"
                     : "=a"(ret)
                     : "0"(nr), "D"(a1), "S"(a2), "d"(0L), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    if (ret < 0 && ret > -4096) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

struct probe_clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls,
        set_tid, set_tid_size, cgroup;
};

static void *thread_main(void *arg) { return arg; }

static long make_thread(void) {
    pthread_t t;
    int rc = pthread_create(&t, NULL, thread_main, NULL);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    pthread_join(t, NULL);
    return 0;
}

static long connect_abstract(const char *name) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n > sizeof a.sun_path - 2)
        n = sizeof a.sun_path - 2;
    memcpy(a.sun_path + 1, name, n);
    long r = connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n));
    int e = errno;
    close(s);
    errno = e;
    return r;
}

/* Binds its own abstract socket (allowed), then tries to serve on it. */
static long listen_abstract(int *bind_ret) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path + 1, "ovsr-probe-own", 14);
    *bind_ret = bind(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 15));
    long r = listen(s, 1);
    int e = errno;
    close(s);
    errno = e;
    return r;
}

static long process_vm(int write, pid_t pid) {
    char local[16], remote[16];
    struct iovec l = {local, sizeof local}, r = {remote, sizeof remote};
    return syscall(write ? SYS_process_vm_writev : SYS_process_vm_readv, pid, &l, 1, &r, 1, 0);
}

static long try_execve(const char *path) {
    char *argv[] = {(char *)path, NULL};
    char *envp[] = {NULL};
    return execve(path, argv, envp);
}

/* ---- exec mode: the exec gate ---- */

static char self_path[512];

/* Execs this probe (path) so that, if the exec went through, the new image only says so. */
static long exec_self(const char *path, const char *which) {
    char *argv[] = {"probe", "exec-landed", (char *)which, NULL};
    char *envp[] = {NULL};
    return execve(path, argv, envp);
}

static void *exec_thread_main(void *arg) {
    long *ret = arg;
    errno = 0;
    ret[0] = exec_self("/proc/self/exe", "thread");
    ret[1] = errno;
    return NULL;
}

static void exec_mode(const char *loader) {
    emit("{\"attempts\":{");
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    self_path[n > 0 ? n : 0] = 0;
    TRY("exec_self_proc_exe", exec_self("/proc/self/exe", "proc_self_exe"));
    TRY("exec_self_path", exec_self(self_path, "self_path"));
    {
        int fd = open(self_path, O_RDONLY | O_CLOEXEC);
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        TRY("exec_self_proc_fd", exec_self(p, "proc_fd"));
        char *argv[] = {"probe", "exec-landed", "execveat", NULL};
        char *envp[] = {NULL};
        TRY("execveat_self_fd_empty_path", syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH));
        TRY("execveat_fd_absolute_path", syscall(SYS_execveat, fd, self_path, argv, envp, 0));
        TRY("execveat_cwd_self_path", syscall(SYS_execveat, AT_FDCWD, self_path, argv, envp, 0));
        if (fd >= 0)
            close(fd);
    }
    {
        char *argv[] = {"ld.so", self_path, "exec-landed", "loader", NULL};
        char *envp[] = {NULL};
        TRY("exec_loader_with_self", execve(loader, argv, envp));
    }
    /* A #! script naming this probe as its interpreter, in /skill (where the job's files are). */
    TRY("exec_script", exec_self("/skill/script.sh", "script"));
    {
        static long ret[2];
        pthread_t t;
        int rc = pthread_create(&t, NULL, exec_thread_main, ret);
        if (rc == 0) {
            pthread_join(t, NULL);
            attempt("exec_from_thread", ret[0], (int)ret[1]);
        } else {
            attempt("exec_from_thread", -1, 10000 + rc);
        }
    }
    emit("}}");
}

/* ---- modes ---- */

static void main_mode(const char *abstract, const char *hostpath, long hostpid, long sysvkey) {
    static char buf[16384], list[1024], val[128];

    emit("{\"facts\":{");
    /* Inherited descriptors, before this probe opened any. */
    long nfd = numeric_entries("/proc/self/fd", list, sizeof list, 1);
    fact_num("fd_count", nfd);
    fact_str("fds", list, strlen(list));
    long envc = 0;
    for (char **e = environ; e && *e && envc < 1000; e++)
        envc++;
    fact_num("env_count", envc);
    pid_t pid = getpid();
    fact_num("pid", pid);
    fact_num("ppid", getppid());
    fact_num("uid", (long)getuid());
    fact_num("euid", (long)geteuid());
    fact_num("gid", (long)getgid());
    struct rlimit core = {0, 0};
    if (getrlimit(RLIMIT_CORE, &core) == 0) {
        fact_num("rlimit_core_soft", (long)core.rlim_cur);
        fact_num("rlimit_core_hard", (long)core.rlim_max);
    }
    {
        char filter[64];
        long fn = slurp("/proc/self/coredump_filter", filter, sizeof filter);
        fact_str("coredump_filter", filter, fn > 0 ? (size_t)fn : 0);
    }
    struct utsname u;
    if (uname(&u) == 0)
        fact_str("nodename", u.nodename, strlen(u.nodename));
    long n = slurp("/proc/self/status", buf, sizeof buf);
    if (n > 0) {
        const char *keys[] = {"CapInh", "CapPrm",  "CapEff",          "CapBnd",
                              "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            status_field(buf, keys[i], val, sizeof val);
            fact_str(keys[i], val, strlen(val));
        }
    }
    long npids = numeric_entries("/proc", list, sizeof list, 0);
    fact_num("proc_pid_count", npids);
    fact_str("proc_pids", list, strlen(list));
    n = slurp("/proc/self/mountinfo", buf, sizeof buf);
    long lines = 0;
    for (long i = 0; i < n; i++)
        lines += buf[i] == '\n';
    fact_num("mountinfo_lines", n < 0 ? n : lines);
    fact_str("mountinfo", buf, n > 0 ? (size_t)(n < 6000 ? n : 6000) : 0);
    n = slurp("/proc/self/cgroup", buf, sizeof buf);
    fact_str("cgroup", buf, n > 0 ? (size_t)n : 0);
    n = slurp("/proc/sys/kernel/hostname", buf, sizeof buf);
    fact_str("proc_hostname", buf, n > 0 ? (size_t)n : 0);
    n = slurp("/proc/self/environ", buf, sizeof buf);
    fact_num("self_environ_bytes", n);
    fact_str("self_environ", buf, n > 0 ? (size_t)(n < 4000 ? n : 4000) : 0);
    n = slurp("/proc/sysvipc/msg", buf, sizeof buf);
    fact_str("sysvipc_msg", buf, n > 0 ? (size_t)(n < 4000 ? n : 4000) : 0);
    n = slurp("/proc/self/net/unix", buf, sizeof buf);
    fact_str("net_unix", buf, n > 0 ? (size_t)(n < 4000 ? n : 4000) : 0);
    /* /proc beyond what a tool needs: bytes read (at most 16 KiB), or -errno. */
    const char *procs[][2] = {
        {"proc_cmdline", "/proc/cmdline"},          {"proc_version", "/proc/version"},
        {"proc_config_gz", "/proc/config.gz"},      {"proc_keys", "/proc/keys"},
        {"proc_key_users", "/proc/key-users"},      {"proc_timer_list", "/proc/timer_list"},
        {"proc_slabinfo", "/proc/slabinfo"},        {"proc_vmallocinfo", "/proc/vmallocinfo"},
        {"proc_pagetypeinfo", "/proc/pagetypeinfo"}, {"proc_kpagecount", "/proc/kpagecount"},
        {"proc_sched_debug", "/proc/sched_debug"},  {"proc_self_stack", "/proc/self/stack"},
        {"proc_self_syscall", "/proc/self/syscall"}, {"proc_sys_core_pattern", "/proc/sys/kernel/core_pattern"},
        {"proc_net_tcp", "/proc/net/tcp"},          {"proc_net_dev", "/proc/net/dev"},
        {"proc_mounts", "/proc/mounts"},            {"proc_iomem", "/proc/iomem"},
    };
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++)
        fact_num(procs[i][0], slurp(procs[i][1], buf, sizeof buf));
    /* Kernel addresses: kallsyms shows them only to the privileged, zeros otherwise. */
    n = slurp("/proc/kallsyms", buf, sizeof buf);
    long nonzero = 0, symlines = 0;
    for (const char *l = buf; n > 0 && l && *l && symlines < 400; symlines++) {
        if (strncmp(l, "0000000000000000", 16) != 0)
            nonzero++;
        l = strchr(l, '\n');
        if (l)
            l++;
    }
    fact_num("kallsyms_lines_read", n < 0 ? n : symlines);
    fact_num("kallsyms_nonzero_addresses", nonzero);
    n = slurp("/proc/keys", buf, sizeof buf);
    fact_str("proc_keys_text", buf, n > 0 ? (size_t)(n < 2000 ? n : 2000) : 0);
    n = slurp("/proc/self/net/dev", buf, sizeof buf);
    fact_str("net_dev", buf, n > 0 ? (size_t)(n < 2000 ? n : 2000) : 0);
    emit("},\"attempts\":{");

    /* Namespaces. */
    TRY("unshare_newuser", unshare(CLONE_NEWUSER));
    TRY("unshare_newns", unshare(CLONE_NEWNS));
    TRY("unshare_newnet", unshare(CLONE_NEWNET));
    TRY("unshare_newpid", unshare(CLONE_NEWPID));
    TRY("unshare_newipc", unshare(CLONE_NEWIPC));
    TRY("unshare_newuts", unshare(CLONE_NEWUTS));
    TRY("unshare_newcgroup", unshare(CLONE_NEWCGROUP));
    TRY("unshare_newtime", unshare(CLONE_NEWTIME));
    TRY("unshare_files", unshare(CLONE_FILES));
    {
        int nsfd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        TRY("setns_net", setns(nsfd, CLONE_NEWNET));
        TRY("setns_any", setns(nsfd, 0));
        if (nsfd >= 0)
            close(nsfd);
        int mntfd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
        TRY("setns_mnt", setns(mntfd, CLONE_NEWNS));
        if (mntfd >= 0)
            close(mntfd);
    }

    /* The mount table. */
    TRY("mount_tmpfs", mount("tmpfs", "/skill", "tmpfs", 0, NULL));
    TRY("mount_remount_rw", mount(NULL, "/skill", NULL, MS_REMOUNT | MS_BIND, NULL));
    TRY("mount_bind", mount("/proc", "/skill", NULL, MS_BIND, NULL));
    TRY("umount2_proc", umount2("/proc", MNT_DETACH));
    TRY("pivot_root", syscall(SYS_pivot_root, ".", "."));
    TRY("chroot", chroot("/skill"));
    TRY_FD("fsopen", syscall(SYS_fsopen, "tmpfs", 0));
    TRY_FD("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/skill", OPEN_TREE_CLONE));
    TRY("mount_setattr", syscall(SYS_mount_setattr, AT_FDCWD, "/skill", 0, NULL, 0));

    /* Other processes. */
    TRY("ptrace_traceme", syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0));
    TRY("ptrace_attach_1", syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, 1, 0, 0));
    TRY("ptrace_seize_1", syscall(SYS_ptrace, 0x4206 /* PTRACE_SEIZE */, 1, 0, 0));
    TRY("process_vm_readv_1", process_vm(0, 1));
    TRY("process_vm_writev_self", process_vm(1, pid));
    TRY_FD("pidfd_open_1", syscall(SYS_pidfd_open, 1, 0));
    TRY("kcmp", syscall(SYS_kcmp, pid, 1, 0 /* KCMP_FILE */, 0, 0));

    /* Kernel attack surface. */
    {
        union bpf_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.map_type = BPF_MAP_TYPE_ARRAY;
        attr.key_size = 4;
        attr.value_size = 4;
        attr.max_entries = 1;
        TRY_FD("bpf_map_create", syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr));
    }
    TRY("keyctl_session", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
    TRY("keyctl_join", syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "ovsr-probe"));
    TRY("add_key", syscall(SYS_add_key, "user", "ovsr-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING));
    TRY("request_key", syscall(SYS_request_key, "user", "ovsr-probe", NULL, 0));
    {
        struct perf_event_attr pe;
        memset(&pe, 0, sizeof pe);
        pe.type = PERF_TYPE_SOFTWARE;
        pe.size = sizeof pe;
        pe.config = PERF_COUNT_SW_CPU_CLOCK;
        pe.disabled = 1;
        TRY_FD("perf_event_open", syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0));
    }
    TRY_FD("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC));
    {
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        TRY_FD("io_uring_setup", syscall(SYS_io_uring_setup, 8, &p));
    }
    TRY("io_uring_enter", syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
    TRY("io_uring_register", syscall(SYS_io_uring_register, -1, 0, NULL, 0));
    TRY("pkey_alloc", syscall(SYS_pkey_alloc, 0, 0));
    TRY("pkey_mprotect", syscall(SYS_pkey_mprotect, out, 4096, PROT_READ, 0));
    {
        unsigned long ctx = 0;
        TRY("io_setup", syscall(SYS_io_setup, 1, &ctx));
    }
    TRY_FD("memfd_create", syscall(SYS_memfd_create, "ovsr-probe", 0));
    TRY_FD("memfd_secret", syscall(SYS_memfd_secret, 0));
    {
        unsigned int action = 0x7fff0000u; /* SECCOMP_RET_ALLOW */
        TRY("seccomp_get_action_avail", syscall(SYS_seccomp, 2 /* GET_ACTION_AVAIL */, 0, &action));
    }
    TRY("personality_query", syscall(SYS_personality, 0xffffffffUL));
    {
        char ldt[16];
        TRY("modify_ldt_read", syscall(SYS_modify_ldt, 0, ldt, sizeof ldt));
    }
    TRY("iopl", syscall(SYS_iopl, 3));
    TRY("ioperm", syscall(SYS_ioperm, 0x80, 1, 1));
    TRY("finit_module", syscall(SYS_finit_module, -1, "", 0));
    TRY("delete_module", syscall(SYS_delete_module, "ovsr_probe_none", 0));
    TRY("kexec_file_load", syscall(SYS_kexec_file_load, -1, -1, 0, "", 0));
    /* Bad magic numbers: even a reboot that got through seccomp and capabilities does nothing. */
    TRY("reboot_bad_magic", syscall(SYS_reboot, 0, 0, 0, NULL));
    TRY("syslog_size", syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0));
    /* One byte longer than a name may be: even one that got through seccomp and the
       capability check changes nothing (EINVAL), here or, were the uts namespace gone too,
       on the host. */
    {
        char longname[65];
        memset(longname, 'p', sizeof longname);
        TRY("sethostname", sethostname(longname, sizeof longname));
        TRY("setdomainname", setdomainname(longname, sizeof longname));
    }
    {
        char h[sizeof(int) * 2 + 128];
        memset(h, 0, sizeof h);
        ((unsigned int *)h)[0] = 128;
        int mnt = 0;
        TRY("name_to_handle_at", syscall(SYS_name_to_handle_at, AT_FDCWD, "/skill/tool.js", h, &mnt, 0));
        TRY_FD("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, h, O_RDONLY));
    }

    /* Process creation: raw_spawn makes any child that comes to life exit at once. */
    TRY("fork", raw_spawn(SYS_fork, 0, 0));
    TRY("vfork", raw_spawn(SYS_vfork, 0, 0));
    TRY("clone_fork", raw_spawn(SYS_clone, SIGCHLD, 0));
    TRY("clone_newns", raw_spawn(SYS_clone, SIGCHLD | CLONE_NEWNS, 0));
    TRY("clone_newuser", raw_spawn(SYS_clone, SIGCHLD | CLONE_NEWUSER, 0));
    TRY("clone_newpid", raw_spawn(SYS_clone, SIGCHLD | CLONE_NEWPID, 0));
    TRY("clone_newnet", raw_spawn(SYS_clone, SIGCHLD | CLONE_NEWNET, 0));
    TRY("clone_vm_no_thread", raw_spawn(SYS_clone, SIGCHLD | CLONE_VM, 0));
    TRY("clone_thread_newns",
        raw_spawn(SYS_clone, CLONE_VM | CLONE_SIGHAND | CLONE_THREAD | CLONE_NEWNS, 0));
    TRY("clone_thread_newuser",
        raw_spawn(SYS_clone, CLONE_VM | CLONE_SIGHAND | CLONE_THREAD | CLONE_NEWUSER, 0));
    TRY("clone_thread_newnet",
        raw_spawn(SYS_clone, CLONE_VM | CLONE_SIGHAND | CLONE_THREAD | CLONE_NEWNET, 0));
    /* Thread flags only in the high half, which the kernel ignores: a fork in disguise. */
    TRY("clone_thread_flags_in_high_half",
        raw_spawn(SYS_clone,
                  (long)(SIGCHLD | ((unsigned long)(CLONE_VM | CLONE_SIGHAND | CLONE_THREAD) << 32)),
                  0));
    {
        struct probe_clone_args ca;
        memset(&ca, 0, sizeof ca);
        ca.exit_signal = SIGCHLD;
        TRY("clone3_fork", raw_spawn(SYS_clone3, (long)&ca, sizeof ca));
        ca.flags = CLONE_NEWUSER;
        TRY("clone3_newuser", raw_spawn(SYS_clone3, (long)&ca, sizeof ca));
    }
    /* The allowed path, for contrast: glibc's pthread_create tries clone3 (ENOSYS), then clone. */
    TRY("pthread_create", make_thread());

    /* execve: only the probe itself may be executed (as only Node is, for a job). */
    TRY("execve_bin_sh", try_execve("/bin/sh"));
    TRY("execve_skill_tool", try_execve("/skill/tool.js"));
    TRY("execve_dev_null", try_execve("/dev/null"));
    TRY("execve_proc_dir", try_execve("/proc"));
    {
        int fd = open("/skill/tool.js", O_RDONLY | O_CLOEXEC);
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        TRY("execve_proc_self_fd_tool", try_execve(p));
        char *argv[] = {"x", NULL};
        char *envp[] = {NULL};
        TRY("execveat_tool_fd", syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH));
        if (fd >= 0)
            close(fd);
        TRY("execveat_path", syscall(SYS_execveat, AT_FDCWD, "/skill/tool.js", argv, envp, 0));
    }

    /* Sockets under net deny. */
    TRY_FD("socket_inet_stream", socket(AF_INET, SOCK_STREAM, 0));
    TRY_FD("socket_inet_dgram", socket(AF_INET, SOCK_DGRAM, 0));
    TRY_FD("socket_inet6_stream", socket(AF_INET6, SOCK_STREAM, 0));
    TRY_FD("socket_inet6_dgram", socket(AF_INET6, SOCK_DGRAM, 0));
    TRY_FD("socket_inet_raw", socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
    TRY_FD("socket_inet_ping", socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP));
    TRY_FD("socket_inet_sctp", socket(AF_INET, SOCK_STREAM, 132 /* IPPROTO_SCTP */));
    TRY_FD("socket_packet", socket(AF_PACKET, SOCK_RAW, 0x0300 /* htons(ETH_P_ALL) */));
    TRY_FD("socket_netlink_route", socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
    TRY_FD("socket_netlink_audit", socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT));
    TRY_FD("socket_netlink_uevent", socket(AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT));
    TRY_FD("socket_netlink_netfilter", socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER));
    TRY_FD("socket_netlink_xfrm", socket(AF_NETLINK, SOCK_RAW, NETLINK_XFRM));
    TRY_FD("socket_netlink_generic", socket(AF_NETLINK, SOCK_RAW, NETLINK_GENERIC));
    TRY_FD("socket_vsock", socket(AF_VSOCK, SOCK_STREAM, 0));
    TRY_FD("socket_alg", socket(AF_ALG, SOCK_SEQPACKET, 0));
    TRY_FD("socket_bluetooth", socket(31 /* AF_BLUETOOTH */, SOCK_RAW, 0));
    TRY_FD("socket_unix_stream", socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    TRY_FD("socket_unix_dgram", socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    {
        int sv[2] = {-1, -1};
        TRY("socketpair_unix", socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        if (sv[0] >= 0)
            close(sv[0]);
        if (sv[1] >= 0)
            close(sv[1]);
        TRY("socketpair_inet", socketpair(AF_INET, SOCK_STREAM, 0, sv));
    }
    TRY("connect_host_abstract", connect_abstract(abstract));
    {
        int b = -1;
        long r = listen_abstract(&b);
        int e = errno;
        attempt("bind_own_abstract", b, e);
        attempt("listen_own_abstract", r, e);
    }
    TRY("accept", accept(0, NULL, NULL));

    /* Terminal injection (stdin is a pipe: without the filter the kernel says ENOTTY). */
    {
        char c = 'x';
        TRY("ioctl_tiocsti", syscall(SYS_ioctl, 0, (unsigned long)TIOCSTI, &c));
        TRY("ioctl_tiocsti_high_bits", syscall(SYS_ioctl, 0, (unsigned long)TIOCSTI | (1UL << 32), &c));
        TRY("ioctl_tioclinux", syscall(SYS_ioctl, 0, (unsigned long)TIOCLINUX, &c));
        TRY("ioctl_tioclinux_high_bits", syscall(SYS_ioctl, 0, (unsigned long)TIOCLINUX | (1UL << 63), &c));
        char t[64];
        TRY("ioctl_tcgets", syscall(SYS_ioctl, 0, (unsigned long)TCGETS, t));
    }

    /* Kernel attack surface nothing in Node uses: notification pipes (watch_queue) and
       classic BPF programs attached to a socket. */
    {
        int p[2] = {-1, -1};
        TRY("pipe2_notification", syscall(SYS_pipe2, p, O_EXCL)); /* O_NOTIFICATION_PIPE */
        int sv[2] = {-1, -1};
        long r = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
        int e = errno;
        struct sock_filter accept_all = {0x06 /* BPF_RET|BPF_K */, 0, 0, 0xffffffffu};
        struct sock_fprog prog = {1, &accept_all};
        if (r == 0) {
            TRY("setsockopt_attach_filter",
                setsockopt(sv[0], SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog));
            TRY("setsockopt_attach_reuseport_cbpf",
                setsockopt(sv[0], SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog));
            close(sv[0]);
            close(sv[1]);
        } else {
            attempt("setsockopt_attach_filter", r, e);
            attempt("setsockopt_attach_reuseport_cbpf", r, e);
        }
    }

    /* Writes through every mount. */
    char host_target[512];
    snprintf(host_target, sizeof host_target, "%s", hostpath);
    const char *creat_paths[][2] = {
        {"open_creat_skill", "/skill/x"},     {"open_creat_tmp", "/tmp/x"},
        {"open_creat_root", "/x"},            {"open_creat_proc_self", "/proc/self/x"},
        {"open_creat_dev", "/dev/x"},         {"open_creat_host_path", host_target},
    };
    for (size_t i = 0; i < sizeof creat_paths / sizeof creat_paths[0]; i++)
        TRY_FD(creat_paths[i][0], openat(AT_FDCWD, creat_paths[i][1], O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    TRY_FD("open_wronly_tool", openat(AT_FDCWD, "/skill/tool.js", O_WRONLY | O_CLOEXEC));
    TRY_FD("open_rdwr_tool", openat(AT_FDCWD, "/skill/tool.js", O_RDWR | O_CLOEXEC));
    TRY_FD("open_trunc_tool", openat(AT_FDCWD, "/skill/tool.js", O_RDONLY | O_TRUNC | O_CLOEXEC));
    TRY_FD("open_append_tool", openat(AT_FDCWD, "/skill/tool.js", O_WRONLY | O_APPEND | O_CLOEXEC));
    TRY_FD("open_tmpfile_skill", openat(AT_FDCWD, "/skill", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    TRY_FD("open_wronly_dev_null", openat(AT_FDCWD, "/dev/null", O_WRONLY | O_CLOEXEC));
    TRY_FD("open_wronly_proc_hostname", openat(AT_FDCWD, "/proc/sys/kernel/hostname", O_WRONLY | O_CLOEXEC));
    TRY_FD("open_wronly_sysrq_trigger", openat(AT_FDCWD, "/proc/sysrq-trigger", O_WRONLY | O_CLOEXEC));
    TRY_FD("open_wronly_self_mem", openat(AT_FDCWD, "/proc/self/mem", O_RDWR | O_CLOEXEC));
    TRY_FD("legacy_open_creat", syscall(SYS_open, "/skill/y", O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    TRY_FD("legacy_creat", syscall(SYS_creat, "/skill/y", 0644));
    {
        struct open_how how;
        memset(&how, 0, sizeof how);
        how.flags = O_CREAT | O_WRONLY | O_CLOEXEC;
        how.mode = 0644;
        TRY_FD("openat2_creat", syscall(SYS_openat2, AT_FDCWD, "/skill/y", &how, sizeof how));
        how.flags = O_RDONLY | O_CLOEXEC;
        how.mode = 0;
        TRY_FD("openat2_read", syscall(SYS_openat2, AT_FDCWD, "/skill/tool.js", &how, sizeof how));
    }
    {
        int fd = open("/skill/tool.js", O_RDONLY | O_CLOEXEC);
        TRY("read_only_fd_write", write(fd, "x", 1));
        TRY("read_only_fd_pwrite", syscall(SYS_pwrite64, fd, "x", 1, 0));
        void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        attempt("read_only_fd_mmap_shared_write", m == MAP_FAILED ? -1 : 0, errno);
        if (m != MAP_FAILED)
            munmap(m, 4096);
        TRY("fchmod", fchmod(fd, 0777));
        TRY("fchown", fchown(fd, 0, 0));
        TRY("ftruncate", ftruncate(fd, 0));
        TRY("fallocate", fallocate(fd, 0, 0, 4096));
        TRY("fsetxattr", fsetxattr(fd, "user.ovsr", "x", 1, 0));
        /* A filesystem's own ioctl and a read lock, on a file the job may read: seccomp
         * allows only the commands Node asks for. */
        {
            int size = 0;
            TRY("ioctl_figetbsz", ioctl(fd, 2 /* FIGETBSZ */, &size));
            struct flock lock;
            memset(&lock, 0, sizeof lock);
            lock.l_type = F_RDLCK;
            lock.l_whence = SEEK_SET;
            TRY("fcntl_ofd_read_lock", fcntl(fd, 37 /* F_OFD_SETLK */, &lock));
            TRY("fcntl_getfl", fcntl(fd, F_GETFL));
        }
        if (fd >= 0)
            close(fd);
    }
    /* Memory the cgroup does not count (the host's huge page pool), and KSM's merging, a
     * timing channel between jobs. The anonymous page is the probe's own. */
    {
        void *m = mmap(NULL, 2 << 20, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
        attempt("mmap_hugetlb", m == MAP_FAILED ? -1 : 0, errno);
        if (m != MAP_FAILED)
            munmap(m, 2 << 20);
        void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            TRY("madvise_mergeable", madvise(p, 4096, MADV_MERGEABLE));
            TRY("madvise_dontneed", madvise(p, 4096, MADV_DONTNEED));
            munmap(p, 4096);
        }
    }
    TRY("mkdir_skill", mkdir("/skill/d", 0755));
    TRY("mkdir_tmp", mkdir("/tmp/d", 0755));
    TRY("mkdir_root", mkdir("/d", 0755));
    TRY("mkdirat_skill", mkdirat(AT_FDCWD, "/skill/d", 0755));
    TRY("mknod_fifo", mknod("/skill/fifo", S_IFIFO | 0600, 0));
    TRY("unlink_tool", unlink("/skill/tool.js"));
    TRY("unlinkat_tool", unlinkat(AT_FDCWD, "/skill/tool.js", 0));
    TRY("rmdir_skill", rmdir("/skill"));
    TRY("rename_tool", rename("/skill/tool.js", "/skill/y.js"));
    TRY("renameat2_exchange", syscall(SYS_renameat2, AT_FDCWD, "/skill/tool.js", AT_FDCWD, "/proc", 2));
    TRY("symlink", symlink("/", "/skill/l"));
    TRY("symlinkat", symlinkat("/", AT_FDCWD, "/skill/l"));
    TRY("link", link("/skill/tool.js", "/skill/h"));
    TRY("linkat", linkat(AT_FDCWD, "/skill/tool.js", AT_FDCWD, "/skill/h", 0));
    TRY("chmod", chmod("/skill/tool.js", 0777));
    TRY("chmod_skill_dir", chmod("/skill", 0777));
    TRY("chown", chown("/skill/tool.js", 0, 0));
    TRY("truncate", truncate("/skill/tool.js", 0));
    TRY("utimensat", utimensat(AT_FDCWD, "/skill/tool.js", NULL, 0));
    TRY("setxattr", setxattr("/skill/tool.js", "user.ovsr", "x", 1, 0));

    /* Reads beyond what is needed. */
    const char *reads[][2] = {
        {"read_etc_passwd", "/etc/passwd"},
        {"read_etc_shadow", "/etc/shadow"},
        {"read_proc_1_environ", "/proc/1/environ"},
        {"read_proc_1_cmdline", "/proc/1/cmdline"},
        {"read_proc_1_root_passwd", "/proc/1/root/etc/passwd"},
        {"read_proc_1_mem", "/proc/1/mem"},
        {"read_proc_self_root_passwd", "/proc/self/root/etc/passwd"},
        {"read_proc_kcore", "/proc/kcore"},
        {"read_sys_kernel", "/sys/kernel"},
        {"read_sys_fs_cgroup", "/sys/fs/cgroup"},
        {"read_dev_mem", "/dev/mem"},
        {"read_dev_kmsg", "/dev/kmsg"},
        {"read_dev_tty", "/dev/tty"},
        {"read_dev_shm", "/dev/shm"},
        {"read_work", "/work"},
        {"read_home", "/home"},
        {"read_host_path", host_target},
        /* Allowed reads, for contrast. */
        {"read_skill_tool", "/skill/tool.js"},
        {"read_dev_urandom", "/dev/urandom"},
        {"read_proc_self_status", "/proc/self/status"},
    };
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++)
        TRY_FD(reads[i][0], openat(AT_FDCWD, reads[i][1], O_RDONLY | O_CLOEXEC));
    TRY_FD("opendir_root", openat(AT_FDCWD, "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    TRY_FD("opendir_dev", openat(AT_FDCWD, "/dev", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    TRY_FD("opendir_skill", openat(AT_FDCWD, "/skill", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    {
        char l[256];
        TRY("readlink_proc_1_root", readlink("/proc/1/root", l, sizeof l));
        TRY("readlink_proc_1_exe", readlink("/proc/1/exe", l, sizeof l));
        TRY("stat_proc_1", access("/proc/1", F_OK));
    }

    /* Identity and privilege. */
    TRY("setuid_0", setuid(0));
    TRY("setgid_0", setgid(0));
    TRY("setresuid_0", syscall(SYS_setresuid, 0, 0, 0));
    TRY("setgroups_0", syscall(SYS_setgroups, 1, (gid_t[]){0}));
    {
        struct {
            uint32_t version;
            int pid;
        } hdr = {0x20080522 /* _LINUX_CAPABILITY_VERSION_3 */, 0};
        struct {
            uint32_t effective, permitted, inheritable;
        } data[2];
        memset(data, 0xff, sizeof data);
        TRY("capset_raise", syscall(SYS_capset, &hdr, data));
    }
    TRY("prctl_set_dumpable", prctl(PR_SET_DUMPABLE, 1, 0, 0, 0));
    {
        /* Lowering the core limit needs no privilege; 0 would let a pipe core_pattern
         * dump this process again. */
        struct rlimit zero = {0, 0};
        TRY("prlimit_core_zero", syscall(SYS_prlimit64, 0, RLIMIT_CORE, &zero, NULL));
        TRY("setrlimit_core_zero", setrlimit(RLIMIT_CORE, &zero));
        struct rlimit nofile;
        TRY("prlimit_nofile_read", syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &nofile));
    }
    TRY("prctl_cap_ambient_raise", prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, 21 /* SYS_ADMIN */, 0, 0));
    TRY("prctl_set_name", prctl(PR_SET_NAME, "probe", 0, 0, 0));
    TRY("setpgid", setpgid(0, 0));

    /* Cross-job channels: System V and POSIX IPC. */
    /* An id that got through is removed at once. */
    TRY_UNDO("shmget_private", shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600),
             shmctl((int)r_, IPC_RMID, NULL));
    TRY("msgget_host_key", msgget((key_t)sysvkey, 0));
    TRY("semget_host_key", semget((key_t)sysvkey, 0, 0));
    TRY_UNDO("msgget_private", msgget(IPC_PRIVATE, IPC_CREAT | 0600),
             msgctl((int)r_, IPC_RMID, NULL));
    TRY_FD("mq_open", syscall(SYS_mq_open, "ovsr-probe", O_RDONLY, 0, NULL));

    /* Signals: to the host's processes (signal 0 only), to pid 1, then to everyone. */
    TRY("kill_host_pid_sig0", kill((pid_t)hostpid, 0));
    TRY("kill_pid1_sig0", kill(1, 0));
    TRY("kill_pid1_sigkill", kill(1, SIGKILL));
    {
        /* kill(-1) reaches every process the caller may signal: only once the pid
         * namespace is shown to hold (this probe is pid 2 and sees at most pid 1 and
         * itself) is it tried; otherwise the attempt is reported as skipped (ret -2). */
        long seen = numeric_entries("/proc", list, sizeof list, 0);
        if (pid == 2 && seen >= 1 && seen <= 2 && getppid() == 1)
            TRY("kill_minus1_sigkill", kill(-1, SIGKILL));
        else
            attempt("kill_minus1_sigkill", -2, 0);
    }
    emit("}}");
}

/* Cross-job channels: an abstract unix datagram socket bound in one job, a sender in
 * another. Both bounded (at most 3 s of waiting). Each reports, on the wall clock, when it
 * was there, so the test can show that the two jobs overlapped. Not the monotonic clock:
 * each job has a time namespace of its own, whose monotonic clock starts near zero when
 * its sandbox was made, so two jobs' readings differ by the whole seconds between their
 * sandboxes (a warm one's can be made long before its job). CLOCK_REALTIME is the host's
 * in every time namespace. */
static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int abstract_addr(const char *name, struct sockaddr_un *a, socklen_t *len) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n + 1 > sizeof a->sun_path)
        return -1;
    memcpy(a->sun_path + 1, name, n); /* sun_path[0] = 0: the abstract namespace */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    return 0;
}

static int listen_mode(const char *name) {
    struct sockaddr_un a;
    socklen_t alen;
    if (abstract_addr(name, &a, &alen) != 0)
        return 3;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int bind_errno = 0, self_errno = 0;
    long self_received = -1, received = -1;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, alen) != 0)
        bind_errno = errno;
    long long from_ns = now_ns();
    struct timeval tv = {.tv_sec = 3, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    /* Control: the job reaches its own name, so a refusal from elsewhere is isolation. */
    int s2 = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s2 < 0 || sendto(s2, "self", 4, 0, (struct sockaddr *)&a, alen) != 4)
        self_errno = errno;
    char buf[64];
    self_received = recv(fd, buf, sizeof buf, 0);
    /* Then wait for another job's message: none may arrive. */
    received = recv(fd, buf, sizeof buf, 0);
    int recv_errno = received < 0 ? errno : 0;
    long long until_ns = now_ns();
    printf("{\"bind_errno\":%d,\"self_errno\":%d,\"self_received\":%ld,\"received\":%ld,\"recv_errno\":%d,"
           "\"from_ns\":%lld,\"until_ns\":%lld}",
           bind_errno, self_errno, self_received, received, recv_errno, from_ns, until_ns);
    return 0;
}

static int send_mode(const char *name) {
    struct sockaddr_un a;
    socklen_t alen;
    if (abstract_addr(name, &a, &alen) != 0)
        return 3;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int last_errno = 0, sent = 0;
    long long first_ns = now_ns();
    for (int i = 0; i < 20 && !sent; i++) {
        if (sendto(fd, "cross", 5, 0, (struct sockaddr *)&a, alen) == 5)
            sent = 1;
        else
            last_errno = errno;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    long long last_ns = now_ns();
    printf("{\"sent\":%d,\"errno\":%d,\"first_ns\":%lld,\"last_ns\":%lld}", sent, last_errno,
           first_ns, last_ns);
    return 0;
}


/* ---- net: the routes out, tried natively (the job's net mode decides what answers) ---- */

/* One TCP connect with a 2 s bound; the socket is closed, errno kept. */
static long tcp_connect(int family, const struct sockaddr *a, socklen_t alen) {
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {.tv_sec = 2, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    long r = connect(fd, a, alen);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

static long tcp_connect4(uint32_t addr, uint16_t port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr = {htonl(addr)}};
    return tcp_connect(AF_INET, (struct sockaddr *)&a, sizeof a);
}

static long tcp_connect6(const uint8_t addr[16], uint16_t port) {
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    memcpy(&a.sin6_addr, addr, 16);
    return tcp_connect(AF_INET6, (struct sockaddr *)&a, sizeof a);
}

/* A UDP datagram to addr:port and a wait of at most 300 ms for any answer: the return is
 * the bytes received (an answer came back), or -1 with errno (EAGAIN: nothing came). */
static long udp_roundtrip4(uint32_t addr, uint16_t port) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr = {htonl(addr)}};
    struct timeval tv = {.tv_sec = 0, .tv_usec = 300 * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    long r = -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && send(fd, "probe", 5, 0) == 5) {
        char buf[512];
        r = recv(fd, buf, sizeof buf, 0);
    }
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

static void net_mode(void) {
    emit("{\"attempts\":{");
    /* Sockets no tool needs: refused by seccomp in every mode. */
    TRY_FD("raw_icmp", socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP));
    TRY_FD("raw_tcp", socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_TCP));
    TRY_FD("raw_icmpv6", socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6));
    TRY_FD("ping_socket", socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_ICMP));
    TRY_FD("ping6_socket", socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_ICMPV6));
    TRY_FD("packet_socket", socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
    TRY_FD("sctp_stream", socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_SCTP));
    TRY_FD("mptcp_stream", socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 262));
    TRY_FD("netlink_netfilter", socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER));
    /* TCP and UDP as the mode allows. */
    TRY_FD("tcp_socket", socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    TRY_FD("udp_socket", socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    TRY("tcp_1.2.3.4:80", tcp_connect4(0x01020304, 80));
    TRY("tcp_1.2.3.4:443", tcp_connect4(0x01020304, 443));
    TRY("tcp_1.2.3.4:22", tcp_connect4(0x01020304, 22));
    TRY("tcp_1.2.3.4:8080", tcp_connect4(0x01020304, 8080));
    TRY("tcp_127.0.0.1:22", tcp_connect4(0x7f000001, 22));
    TRY("tcp_169.254.169.254:80", tcp_connect4(0xa9fea9fe, 80));
    static const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5};
    TRY("tcp6_2001:db8::5:443", tcp_connect6(v6, 443));
    TRY("tcp6_2001:db8::5:22", tcp_connect6(v6, 22));
    TRY("udp_1.2.3.4:9", udp_roundtrip4(0x01020304, 9));
    TRY("udp_8.8.8.8:123", udp_roundtrip4(0x08080808, 123));
    TRY("udp_10.0.0.1:5353", udp_roundtrip4(0x0a000001, 5353));
    /* Serving: no bind to a TCP port, no listen. */
    {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int se = errno;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(8081), .sin_addr = {htonl(0)}};
        TRY("tcp_bind_8081", fd < 0 ? (errno = se, -1) : bind(fd, (struct sockaddr *)&a, sizeof a));
        TRY("tcp_listen", fd < 0 ? (errno = se, -1) : listen(fd, 1));
        if (fd >= 0)
            close(fd);
    }
    /* Changing the namespace's routes or interfaces needs CAP_NET_ADMIN, which it lacks:
     * an ioctl that would bring an interface down. */
    {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int se = errno;
        struct ifreq_min {
            char name[16];
            short flags;
            char pad[22];
        } ifr;
        memset(&ifr, 0, sizeof ifr);
        /* No such interface: the capability check comes first (EPERM), and one that got
           through finds nothing to take down (ENODEV), not even the job's own lo. */
        strcpy(ifr.name, "ovsr-none0");
        TRY("siocsifflags_down",
            fd < 0 ? (errno = se, -1) : ioctl(fd, 0x8914 /* SIOCSIFFLAGS */, &ifr));
        if (fd >= 0)
            close(fd);
    }
    emit("}}");
}

int main(int argc, char **argv) {
    static char in[4096];
    if (argc >= 3 && strcmp(argv[1], "exec-landed") == 0) {
        /* An exec went through: say which, do nothing else. */
        printf("{\"exec_landed\":\"%.64s\"}", argv[2]);
        return 0;
    }
    /* At its gate, before it reads, Node's preload says so on stderr (the runner takes the
     * record off; a warm sandbox is ready only once it has come): the probe does as well. */
    static const char gate_record[] = "\0openvibe-skill-runner:gate\n";
    if (write(2, gate_record, sizeof gate_record - 1) < 0)
        return 70;
    size_t len = 0;
    for (int i = 0; i < 16 && len + 1 < sizeof in; i++) {
        ssize_t n = read(0, in + len, sizeof in - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    in[len] = 0;
    /* The gate's go byte comes first, as Node's preload reads it; then the input, a JSON
     * string: drop the quotes, split on spaces. */
    char *s = in;
    if (*s == '\n')
        s++;
    if (*s == '"')
        s++;
    char *q = strchr(s, '"');
    if (q)
        *q = 0;
    char *words[6] = {0};
    int nw = 0;
    for (char *tok = strtok(s, " "); tok && nw < 6; tok = strtok(NULL, " "))
        words[nw++] = tok;
    const char *mode = nw > 0 ? words[0] : "";

    if (strcmp(mode, "int80") == 0) {
        fprintf(stderr, "probe: int80: about to make an i386 getpid\n");
        long ret;
        __asm__ volatile("int $0x80" : "=a"(ret) : "0"(20L) : "memory");
        printf("{\"int80_survived\":%ld}", ret);
        return 0;
    }
    if (strcmp(mode, "x32") == 0) {
        fprintf(stderr, "probe: x32: about to make an x32 getpid\n");
        long ret = syscall(0x40000000L | SYS_getpid);
        printf("{\"x32_survived\":%ld}", ret);
        return 0;
    }
    if (strcmp(mode, "net") == 0 && nw == 1) {
        net_mode();
        if (overflow)
            return 2;
        fwrite(out, 1, outlen, stdout);
        return 0;
    }
    if (strcmp(mode, "exec") == 0 && nw == 2) {
        exec_mode(words[1]);
        if (overflow)
            return 2;
        fwrite(out, 1, outlen, stdout);
        return 0;
    }
    if (strcmp(mode, "listen") == 0 && nw == 2)
        return listen_mode(words[1]);
    if (strcmp(mode, "send") == 0 && nw == 2)
        return send_mode(words[1]);
    if (strcmp(mode, "main") == 0 && nw == 5) {
        main_mode(words[1], words[2], strtol(words[3], NULL, 10), strtol(words[4], NULL, 10));
        if (overflow) {
            fprintf(stderr, "probe: output buffer overflow\n");
            return 2;
        }
        fwrite(out, 1, outlen, stdout);
        return 0;
    }
    fprintf(stderr, "probe: unknown input\n");
    return 3;
}
