//! The exec gate: once Node runs, nothing in the job can start a program again.
//!
//! Seccomp sees a system call's number and arguments, never the path an `execve` names, and
//! landlock must let the Node binary (and its loader) be executed for the init's own exec.
//! Neither can tell that exec from a later one: `execve("/proc/self/exe", …)` would restart
//! Node inside the sandbox without `--permission`, without
//! `--disallow-code-generation-from-strings` and without the preload. So the answer to an
//! exec is not a rule but a count, kept by the runner:
//!
//! 1. The init (its last process, before the policy's filter) installs a small filter of its
//!    own that answers `execve` and `execveat` with `SECCOMP_RET_USER_NOTIF` and allows every
//!    other call. It asks for the filter's listener (`SECCOMP_FILTER_FLAG_NEW_LISTENER`), sends
//!    it to the runner over a unix socket (`SCM_RIGHTS`, [`GATE_FD`]) and closes its own copy.
//!    Filters only ever add refusals (the kernel keeps the strictest answer of all), so this
//!    one takes nothing from the policy: what the policy refuses (execveat) stays refused.
//! 2. The runner serves the listener on a thread of its own ([`serve`]). The first
//!    notification, if it is an `execve` of the process that sent the listener (its pid, read
//!    from the kernel's `SCM_CREDENTIALS`, not from anything the job says), is the init's exec
//!    of Node and continues (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). Every later one, from any
//!    thread or process of the job, by any path (`/proc/self/exe`, Node's own path, a
//!    descriptor, the loader with Node as argument, a `#!` script), is answered `EPERM`.
//!    Nothing is decided from the job's memory, so there is no race on the path: the filter
//!    is inherited across exec and fork, and the count is kept outside the job.
//! 3. If the runner's listener closes (the job ended, the runner died), every exec still to
//!    come fails with `ENOSYS`: the gate fails closed.
//!
//! The listener, the socket and the thread live exactly as long as the job's supervision:
//! [`Gate::finish`] stops the thread and closes both descriptors.

use crate::bpf::sock_filter as ins;
use crate::bpf::{
    AUDIT_ARCH_X86_64, BPF_JMP_JEQ_K, BPF_JMP_JGE_K, BPF_LD_W_ABS, BPF_RET_K, SECCOMP_DATA_ARCH,
    SECCOMP_DATA_NR, X32_SYSCALL_BIT,
};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The descriptor the init stage receives its end of the gate socket on.
pub const GATE_FD: i32 = 5;

/// The gate's program: execve and execveat of x86_64 go to the runner, every other x86_64
/// call is allowed (and left to the policy's filter, installed after it). Another ABI
/// (i386 through `int 0x80`, whose execve is 11) and x32 calls (numbers from
/// `X32_SYSCALL_BIT`, x32's execve among them) kill the process, as the policy's filter
/// does: the gate alone holds every way to an exec, with the policy left out too.
const PROGRAM: [libc::sock_filter; 9] = [
    ins(BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARCH),
    ins(BPF_JMP_JEQ_K, 0, 6, AUDIT_ARCH_X86_64),
    ins(BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_NR),
    ins(BPF_JMP_JGE_K, 4, 0, X32_SYSCALL_BIT),
    ins(BPF_JMP_JEQ_K, 2, 0, libc::SYS_execve as u32),
    ins(BPF_JMP_JEQ_K, 1, 0, libc::SYS_execveat as u32),
    ins(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ins(BPF_RET_K, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
    ins(BPF_RET_K, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
];

/// Installs the gate's filter on the calling thread and returns its listener. The caller
/// must be single-threaded and have set `no_new_privs`. Allocates nothing, so it may run
/// between fork and exec.
pub fn install() -> io::Result<OwnedFd> {
    let prog = libc::sock_fprog {
        len: PROGRAM.len() as u16,
        filter: PROGRAM.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: seccomp(2) reads `prog`, which points at PROGRAM (static, 9 instructions) and
    // outlives the call; it returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Sends `listener` over the unix socket `sock` (one byte, `SCM_RIGHTS`). Allocates
/// nothing, so it may run between fork and exec.
pub fn send_listener(sock: RawFd, listener: RawFd) -> io::Result<()> {
    const SPACE: usize = 64;
    #[repr(C, align(8))]
    struct Cmsg([u8; SPACE]);
    let mut cbuf = Cmsg([0; SPACE]);
    let mut byte = [b'g'];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    if space > SPACE {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: a zeroed msghdr is valid; every pointer set below points at a live local.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.0.as_mut_ptr().cast();
    msg.msg_controllen = space;
    // SAFETY: msg_control holds `space` bytes, enough for one header and one descriptor, so
    // CMSG_FIRSTHDR is not null and CMSG_DATA points inside the buffer.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::copy_nonoverlapping(
            (&listener as *const RawFd).cast::<u8>(),
            libc::CMSG_DATA(cmsg),
            std::mem::size_of::<RawFd>(),
        );
    }
    // SAFETY: sendmsg reads the message built above.
    let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
    if n != 1 {
        return Err(if n < 0 {
            io::Error::last_os_error()
        } else {
            io::Error::from(io::ErrorKind::WriteZero)
        });
    }
    Ok(())
}

/// The init's side, its last step before the policy's filter: install the gate, hand its
/// listener to the runner, keep no copy of it or of the socket.
pub fn install_and_hand_over(sock: RawFd) -> Result<(), String> {
    let listener = install().map_err(|e| {
        format!("installing the exec gate's filter with a listener failed: {e}; the kernel needs seccomp user notification (Linux 5.5 or later)")
    })?;
    send_listener(sock, listener.as_raw_fd())
        .map_err(|e| format!("handing the exec gate's listener to the runner failed: {e}"))?;
    drop(listener);
    // SAFETY: closing the gate socket, which this process no longer needs.
    unsafe { libc::close(sock) };
    Ok(())
}

/// What the gate answered during one job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GateReport {
    /// The init's own exec of Node was let through.
    pub continued: bool,
    /// Exec attempts answered `EPERM` (every one after the first, and a first that was not
    /// the init's).
    pub refused: u32,
}

/// The runner's side of one job's gate: the socket end the init gets, and the thread that
/// answers its notifications.
pub struct Gate {
    stop: Option<OwnedFd>,
    /// The report of the thread, sent when it ends.
    thread: Option<tokio::sync::oneshot::Receiver<GateReport>>,
}

/// Makes the socket pair and starts the thread serving the runner's end; returns the gate
/// and the end to pass to the init stage as [`GATE_FD`]. The thread is a thread of its own,
/// not one of tokio's blocking threads: a gate lives as long as its job (a warm sandbox's
/// as long as it waits), and enough of them would hold every blocking thread, leaving none
/// for the cgroup kill that ends them.
pub fn start() -> io::Result<(Gate, OwnedFd)> {
    use nix::sys::socket::{setsockopt, socketpair, sockopt, AddressFamily, SockFlag, SockType};
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(io::Error::from)?;
    setsockopt(&ours, sockopt::PassCred, &true).map_err(io::Error::from)?;
    let (stop_r, stop_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    let (report, thread) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("ovsr-exec-gate".into())
        .spawn(move || {
            let _ = report.send(serve(ours, stop_r, Decide::Count));
        })?;
    Ok((
        Gate {
            stop: Some(stop_w),
            thread: Some(thread),
        },
        theirs,
    ))
}

impl Gate {
    /// Stops the thread (closing the listener, so an exec still pending fails) and returns
    /// what it answered. Call it once every process of the job is gone.
    pub async fn finish(mut self) -> GateReport {
        self.stop.take();
        match self.thread.take() {
            Some(t) => t.await.unwrap_or_default(),
            None => GateReport::default(),
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        // Closing the stop pipe ends the thread; it then closes its descriptors itself.
        self.stop.take();
    }
}

/// How notifications are answered. Only `Count` exists outside this module's tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decide {
    /// The first `execve` of the sender continues; everything else is refused.
    Count,
    /// Everything continues: the gate removed, for the test that shows the tests notice.
    #[cfg(test)]
    ContinueAll,
}

/// Waits for the init's listener on `sock`, then answers its notifications until `stop`
/// is closed (or the filter has no process left). Blocking: run it on a thread of its own.
pub(crate) fn serve(sock: OwnedFd, stop: OwnedFd, decide: Decide) -> GateReport {
    let mut report = GateReport::default();
    let Some((listener, sender)) = receive_listener(&sock, &stop) else {
        return report;
    };
    drop(sock);
    let mut first = true;
    loop {
        match wait(&listener, &stop) {
            Woke::Ready(revents) if revents & libc::POLLIN != 0 => {}
            // POLLHUP: no process holds the filter any more; or stopped, or poll failed.
            _ => break,
        }
        // SAFETY: the kernel requires a zeroed notification buffer; all-zero is valid.
        let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: SECCOMP_IOCTL_NOTIF_RECV writes one `struct seccomp_notif` into `notif`.
        let rc = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut notif,
            )
        };
        if rc < 0 {
            match io::Error::last_os_error().raw_os_error() {
                // The notifying task was killed before we read it, or a signal.
                Some(libc::ENOENT) | Some(libc::EINTR) => continue,
                // Anything else: stop serving; the listener closes and every exec fails.
                _ => break,
            }
        }
        let is_init = notif.pid as i32 == sender && notif.data.nr == libc::SYS_execve as i32;
        let allow = match decide {
            Decide::Count => first && is_init,
            #[cfg(test)]
            Decide::ContinueAll => true,
        };
        first = false;
        if allow && answer(&listener, notif.id, true).is_ok() {
            report.continued = true;
        } else {
            // Refused, or CONTINUE not understood by the kernel: the exec fails.
            let _ = answer(&listener, notif.id, false);
            report.refused = report.refused.saturating_add(1);
        }
    }
    report
}

/// What [`wait`] saw.
enum Woke {
    /// `fd` has events: its `revents`.
    Ready(libc::c_short),
    /// `stop` became readable or hung up: the job is over.
    Stopped,
    /// poll itself failed.
    Failed,
}

/// Blocks until `fd` or `stop` has an event (poll, restarted after a signal).
fn wait(fd: &OwnedFd, stop: &OwnedFd) -> Woke {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: poll on two descriptors borrowed for the call, in an array it may write.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Woke::Failed;
        }
        if fds[1].revents != 0 {
            return Woke::Stopped;
        }
        return Woke::Ready(fds[0].revents);
    }
}

/// Continues the notified call, or fails it with EPERM.
fn answer(listener: &OwnedFd, id: u64, allow: bool) -> io::Result<()> {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: if allow { 0 } else { -libc::EPERM },
        flags: if allow {
            libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32
        } else {
            0
        },
    };
    // SAFETY: SECCOMP_IOCTL_NOTIF_SEND reads one `struct seccomp_notif_resp`.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The listener and the pid (in the runner's pid namespace) of the process that sent it,
/// or `None` if the socket closed (the init failed before it got there) or `stop` did.
fn receive_listener(sock: &OwnedFd, stop: &OwnedFd) -> Option<(OwnedFd, i32)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    loop {
        match wait(sock, stop) {
            Woke::Ready(0) => continue,
            Woke::Ready(_) => {}
            Woke::Stopped | Woke::Failed => return None,
        }
        let mut byte = [0u8; 1];
        let mut iov = [io::IoSliceMut::new(&mut byte)];
        let mut cmsg = nix::cmsg_space!([RawFd; 4], libc::ucred);
        let msg = match recvmsg::<()>(
            sock.as_fd().as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(m) => m,
            Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
        };
        let mut listener = None;
        let mut pid = None;
        let mut extra = Vec::new();
        for c in msg.cmsgs().ok()? {
            match c {
                ControlMessageOwned::ScmRights(received) => {
                    for raw in received {
                        // SAFETY: the kernel installed these descriptors for us just now.
                        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
                        if listener.is_none() {
                            listener = Some(fd);
                        } else {
                            extra.push(fd);
                        }
                    }
                }
                ControlMessageOwned::ScmCredentials(creds) => pid = Some(creds.pid()),
                _ => {}
            }
        }
        drop(extra);
        if msg.bytes == 0 && listener.is_none() {
            return None;
        }
        return match (listener, pid) {
            (Some(l), Some(p)) if p > 0 => Some((l, p)),
            _ => None,
        };
    }
}

/// Whether this kernel has what the gate relies on: seccomp user notification
/// (`SECCOMP_RET_USER_NOTIF`, Linux 5.0) answered with `SECCOMP_USER_NOTIF_FLAG_CONTINUE`
/// (Linux 5.5). Err names what is missing and what to do.
pub fn kernel_support() -> Result<(), String> {
    let action: u32 = libc::SECCOMP_RET_USER_NOTIF;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 from `action`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    };
    if rc != 0 {
        return Err(format!(
            "the kernel has no seccomp user notification ({}); boot Linux 5.5 or later with CONFIG_SECCOMP_FILTER=y",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: a zeroed struct of three u16 is valid; the kernel fills it in.
    let mut sizes: libc::seccomp_notif_sizes = unsafe { std::mem::zeroed() };
    // SAFETY: SECCOMP_GET_NOTIF_SIZES writes one `struct seccomp_notif_sizes`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0,
            &mut sizes as *mut libc::seccomp_notif_sizes,
        )
    };
    if rc != 0 {
        return Err(format!(
            "the kernel does not report seccomp notification sizes ({}); boot Linux 5.5 or later",
            io::Error::last_os_error()
        ));
    }
    if (sizes.seccomp_notif as usize) < std::mem::size_of::<libc::seccomp_notif>()
        || (sizes.seccomp_notif_resp as usize) < std::mem::size_of::<libc::seccomp_notif_resp>()
    {
        return Err(format!(
            "the kernel's seccomp notification structures ({} and {} bytes) are smaller than this runner's; boot Linux 5.5 or later",
            sizes.seccomp_notif, sizes.seccomp_notif_resp
        ));
    }
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .map_err(|e| format!("cannot read the kernel release: {e}"))?;
    match kernel_version(&release) {
        Some(v) if v >= (5, 5) => Ok(()),
        Some((major, minor)) => Err(format!(
            "kernel {major}.{minor} cannot let a notified call continue (SECCOMP_USER_NOTIF_FLAG_CONTINUE came in Linux 5.5); boot Linux 5.5 or later"
        )),
        None => Err(format!(
            "cannot read the kernel version from {release:?}; the exec gate needs Linux 5.5 or later"
        )),
    }
}

fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// In the init stage: checks [`GATE_FD`] is a socket the runner passed and keeps it from
/// crossing an exec. A missing gate is a setup failure: no job runs without it.
pub fn check_inherited() -> Result<(), String> {
    // SAFETY: a zeroed stat is valid; fstat fills it for our own descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st`.
    if unsafe { libc::fstat(GATE_FD, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK
    {
        return Err(format!(
            "descriptor {GATE_FD} is not the exec gate's socket; the runner must pass it (a runner and an init of different versions?)"
        ));
    }
    // SAFETY: fcntl on our own descriptor.
    if unsafe { libc::fcntl(GATE_FD, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err(format!("gate descriptor: {}", io::Error::last_os_error()));
    }
    Ok(())
}

/// In the init's processes that do not become Node: close their copy of the gate socket.
pub fn close_inherited() {
    // SAFETY: closing our own copy of the gate socket; EBADF is harmless.
    unsafe { libc::close(GATE_FD) };
}

#[cfg(test)]
mod tests;
