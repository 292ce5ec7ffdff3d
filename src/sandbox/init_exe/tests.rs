use super::*;
use std::os::unix::fs::PermissionsExt;

/// A stand-in for an init executable of this build (its bytes hold the build id).
fn file(dir: &Path, name: &str, mode: u32) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/false\n{BUILD_ID}\n")).expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    p
}

fn root_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    d
}

/// Whether this test can run (the files it makes must be root's); a skip otherwise.
fn as_root(test: &str) -> bool {
    let root = nix::unistd::geteuid().is_root();
    if !root {
        crate::test_skips::skipped(test, "it needs root (the init executable must be root's)");
    }
    root
}

#[test]
fn looks_beside_the_binary_then_in_the_packages_lib_folder() {
    let dir = Path::new("/usr/bin");
    let [first, second] = candidates(dir);
    assert_eq!(first, Path::new("/usr/bin/openvibe-skill-runner-init"));
    assert!(second.ends_with("../lib/openvibe-skill-runner/openvibe-skill-runner-init"));
}

#[test]
fn no_init_beside_the_binary_is_the_runner_itself() {
    let d = root_dir();
    assert_eq!(find(d.path()), None);
    let itself = InitExe::runner_itself();
    assert_eq!(itself.exec_path(), Path::new("/proc/self/exe"));
}

#[test]
fn the_first_candidate_found_wins() {
    let d = root_dir();
    let lib = d.path().join("lib/openvibe-skill-runner");
    std::fs::create_dir_all(&lib).expect("lib");
    let bin = d.path().join("bin");
    std::fs::create_dir(&bin).expect("bin");
    let in_lib = file(&lib, NAME, 0o755);
    assert_eq!(
        find(&bin).map(|p| std::fs::canonicalize(p).expect("real")),
        Some(std::fs::canonicalize(&in_lib).expect("real"))
    );
    let beside = file(&bin, NAME, 0o755);
    assert_eq!(find(&bin), Some(beside));
}

#[test]
fn a_root_owned_executable_is_pinned_and_executed_through_its_descriptor() {
    if !as_root("a_root_owned_executable_is_pinned_and_executed_through_its_descriptor") {
        return;
    }
    let d = root_dir();
    let p = file(d.path(), NAME, 0o755);
    let init = pin(&p).expect("trusted").expect("of this build");
    let exec = init.exec_path().to_string_lossy().into_owned();
    let n: i32 = exec
        .strip_prefix("/proc/self/fd/")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not executed through a descriptor: {exec}"));
    assert!(
        n >= 10,
        "the descriptor {n} could be overwritten by the init's own (3-6)"
    );
    // The descriptor is the file, and stays so when the path is replaced.
    std::fs::remove_file(&p).expect("rm");
    file(d.path(), NAME, 0o755);
    let meta = std::fs::metadata(init.exec_path()).expect("through the descriptor");
    assert_eq!(
        meta.nlink(),
        0,
        "the pinned file is the one removed, not the new one"
    );
    let flags = nix::fcntl::fcntl(
        // SAFETY: n is the descriptor `init` keeps open for as long as it lives.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(n) },
        nix::fcntl::FcntlArg::F_GETFD,
    )
    .expect("F_GETFD");
    assert_ne!(flags & libc::FD_CLOEXEC, 0, "no init inherits it");
}

#[test]
fn an_init_others_may_write_or_that_is_not_roots_stops_the_start() {
    if !as_root("an_init_others_may_write_or_that_is_not_roots_stops_the_start") {
        return;
    }
    let d = root_dir();
    let writable = file(d.path(), "group-writable", 0o775);
    let e = pin(&writable).expect_err("group-writable");
    assert!(e.contains("may be written by users other than root"), "{e}");
    let not_exec = file(d.path(), "not-executable", 0o644);
    let e = pin(&not_exec).expect_err("not executable");
    assert!(e.contains("is not executable"), "{e}");
    let theirs = file(d.path(), "theirs", 0o755);
    std::os::unix::fs::chown(&theirs, Some(4321), Some(4321)).expect("chown");
    let e = pin(&theirs).expect_err("not root's");
    assert!(e.contains("belongs to uid 4321, not root"), "{e}");
    let folder = d.path().join(NAME);
    std::fs::create_dir(&folder).expect("dir");
    let e = pin(&folder).expect_err("a folder");
    assert!(e.contains("is not a regular file"), "{e}");
}

#[test]
fn an_init_in_a_folder_others_may_write_stops_the_start() {
    if !as_root("an_init_in_a_folder_others_may_write_stops_the_start") {
        return;
    }
    let d = root_dir();
    let open = d.path().join("open");
    std::fs::create_dir(&open).expect("dir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let p = file(&open, NAME, 0o755);
    let e = pin(&p).expect_err("world-writable folder");
    assert!(e.contains("folder") && e.contains("1777"), "{e}");
}

#[test]
fn an_init_of_another_build_is_passed_over_for_the_runner_itself() {
    if !as_root("an_init_of_another_build_is_passed_over_for_the_runner_itself") {
        return;
    }
    let d = root_dir();
    let p = d.path().join(NAME);
    std::fs::write(&p, b"#!/bin/false\n0123456789abcdef\n").expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    assert!(
        pin(&p).expect("trusted").is_none(),
        "another build's init was pinned"
    );
}

#[test]
fn a_link_in_a_folder_others_may_write_stops_the_start_though_its_target_is_trusted() {
    if !as_root("a_link_in_a_folder_others_may_write_stops_the_start_though_its_target_is_trusted")
    {
        return;
    }
    let d = root_dir();
    let target = file(d.path(), "real-init", 0o755);
    let open = d.path().join("open");
    std::fs::create_dir(&open).expect("dir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let link = open.join(NAME);
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let e = pin(&link).expect_err("a link planted in a writable folder");
    assert!(e.contains("folder") && e.contains("777"), "{e}");
    // The same link in a folder only root may write is followed.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    assert!(pin(&link).expect("trusted").is_some());
}

/// A reader that hands out at most `step` bytes a call, as a pipe or a slow disk may.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[test]
fn the_build_id_is_found_wherever_it_lies_in_the_image_even_across_two_blocks() {
    let needle = BUILD_ID.as_bytes();
    let size = 200 * 1024;
    // At the start, across the first block's end (64 KiB: half before it, or all but its
    // first byte after it), at the very end; read whole blocks, 4 KiB or 7 bytes a call.
    for at in [
        0,
        64 * 1024 - needle.len() / 2,
        64 * 1024 - 1,
        size - needle.len(),
    ] {
        let mut image = vec![b'x'; size];
        image[at..at + needle.len()].copy_from_slice(needle);
        for step in [usize::MAX, 4096, 7] {
            let found = holds(Trickle { data: &image, step }, needle).expect("read");
            assert!(
                found,
                "the id at {at}, read {step} bytes at a time, was not found"
            );
        }
    }
    let mut image = vec![b'x'; size];
    // All of it but its last byte, across the block's end: not the id.
    let at = 64 * 1024 - 3;
    image[at..at + needle.len() - 1].copy_from_slice(&needle[..needle.len() - 1]);
    assert!(!holds(
        Trickle {
            data: &image,
            step: usize::MAX
        },
        needle
    )
    .expect("read"));
    assert!(!holds(Trickle { data: &[], step: 1 }, needle).expect("read"));
}
