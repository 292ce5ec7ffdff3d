//! Unit tests of `src/sandbox/init.rs`.

use super::*;
use std::os::fd::{AsFd, OwnedFd};

/// The clocks' helper keeps only its two pipes: run in a forked child, `close_all_but`
/// leaves open exactly the two descriptors it is given, whatever lies below, between and
/// above them (here: this test process's own, a pipe's other end and one high number).
#[test]
fn the_clocks_helper_keeps_only_its_two_pipes() {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let (report_r, report_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).expect("pipe");
    let (other_r, other_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).expect("pipe");
    let high = fcntl(other_w.as_fd(), FcntlArg::F_DUPFD_CLOEXEC(700)).expect("dup high");
    // SAFETY: F_DUPFD_CLOEXEC just returned this descriptor; we own it.
    let high = unsafe { OwnedFd::from_raw_fd(high) };
    let keep = [other_r.as_raw_fd(), report_w.as_raw_fd()];
    assert!(keep[0] > 2 && keep[1] > 2, "both above stdio: {keep:?}");
    // SAFETY: the child calls only close_range, fcntl, write and _exit: async-signal-safe,
    // no allocation, so the test harness's other threads cannot leave it a held lock.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let mut open = [0u8; 1024];
            let code = match close_all_but(keep) {
                Err(_) => 2,
                Ok(()) => {
                    for (fd, slot) in open.iter_mut().enumerate() {
                        // SAFETY: F_GETFD on a number only asks whether it is open.
                        *slot = u8::from(unsafe { libc::fcntl(fd as i32, libc::F_GETFD) } >= 0);
                    }
                    // SAFETY: a write of our own buffer to a descriptor we kept.
                    let n = unsafe { libc::write(keep[1], open.as_ptr().cast(), open.len()) };
                    i32::from(n != open.len() as isize)
                }
            };
            // SAFETY: _exit ends the child at once, with no destructors.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            drop(report_w);
            let mut open = Vec::new();
            std::fs::File::from(report_r)
                .read_to_end(&mut open)
                .expect("read the child's report");
            let status = waitpid(child, None).expect("wait");
            assert_eq!(status, WaitStatus::Exited(child, 0));
            let still: Vec<usize> = (0..open.len()).filter(|&fd| open[fd] == 1).collect();
            let mut want = vec![keep[0] as usize, keep[1] as usize];
            want.sort_unstable();
            assert_eq!(still, want, "only the two kept descriptors stay open");
            // The parent's own are untouched.
            assert!(fcntl(high.as_fd(), FcntlArg::F_GETFD).is_ok());
            drop((other_w, high));
        }
    }
}
