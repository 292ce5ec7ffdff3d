//! Whether the state directory may be trusted: the runner runs as root and keeps there
//! what shapes every job (the runtime record, whose libraries become the job's mounts; the
//! input cache; each job's folder; the daemon's journal). A directory another user may
//! change would let that user plant a symlink the runner writes through, or a record that
//! adds host files to a job's root.
//!
//! The rule: the directory is the runner's own (owned by its user, writable by no one
//! else), and no other user can replace it or any folder or link on the way to it: each
//! is owned by root or the runner's user and, when others may write in it, sticky (they
//! can then add names, never take the runner's away). Checked along the path as given
//! (each link on it too) and along the path it resolves to.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

/// `dir` as an absolute path (the working directory's at this moment before a relative
/// one), or as given when the working directory cannot be read (the engine's start then
/// says so). Applied where the command line or the configuration file sets it, so the
/// logs, the daemon's journal and recovery, and every job name one path, whatever working
/// directory a later step runs in (a job's pid 1 changes its own to `/`).
pub fn settled(dir: &Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// Makes the state directory (and any missing folder above it) readable by the runner's
/// user alone, as the packaged unit's `StateDirectoryMode=0700` does: it holds every job's
/// result and the skills' code. A folder that is there is left as it is.
pub fn create(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// A file of the state directory opened to read: never through a link, and only a regular
/// file (no pipe to block on, no device). The folder is the runner's own ([`problem`]);
/// this is the second guard, for the runtime record and the input cache.
pub fn open_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if file.metadata()?.is_file() {
        Ok(file)
    } else {
        Err(std::io::Error::other("not a regular file"))
    }
}

/// What is wrong with `dir` as the state directory, with what to do; `None` when the
/// runner may trust it. `dir` must exist.
pub fn problem(dir: &Path) -> Option<String> {
    judged(dir).err()
}

fn judged(dir: &Path) -> Result<(), String> {
    let me = nix::unistd::geteuid().as_raw();
    let cannot = |what: &str, e: std::io::Error| {
        format!("cannot {what} the state directory {}: {e}", dir.display())
    };
    let absolute = std::path::absolute(dir).map_err(|e| cannot("resolve", e))?;
    let real = std::fs::canonicalize(&absolute).map_err(|e| cannot("resolve", e))?;
    for path in [&absolute, &real] {
        along(path, me, dir, "the state directory")?;
    }
    let meta = std::fs::metadata(&real).map_err(|e| cannot("inspect", e))?;
    if !meta.is_dir() {
        return Err(format!(
            "the state directory {} is not a folder",
            dir.display()
        ));
    }
    if meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "the state directory {} (owner uid {}, mode {:o}) must belong to the runner's user \
             (uid {me}) and be writable by it alone: another user could plant files the \
             runner trusts; use a folder only this user may change (chown {me} and chmod \
             700 it), or another --state-dir",
            dir.display(),
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// What is wrong with the way to the daemon's socket at `path` (made already): a folder or
/// link on it, the socket's own folder included, that another user may change could let
/// that user put a socket of their own in the daemon's place, and answer its callers.
/// The same rule as the state directory's way; `None` when nobody else can.
pub fn socket_problem(path: &Path) -> Option<String> {
    let me = nix::unistd::geteuid().as_raw();
    let absolute = match std::path::absolute(path) {
        Ok(a) => a,
        Err(e) => return Some(format!("cannot resolve the socket {}: {e}", path.display())),
    };
    let real = match absolute.parent().map(std::fs::canonicalize) {
        Some(Ok(dir)) => dir.join(absolute.file_name().unwrap_or_default()),
        Some(Err(e)) => return Some(format!("cannot resolve the socket {}: {e}", path.display())),
        None => absolute.clone(),
    };
    for way in [&absolute, &real] {
        if let Err(e) = along(way, me, path, "the socket") {
            return Some(e);
        }
    }
    None
}

/// Whether only root or the user `me` may change the file at `path` and what it names: the
/// file belongs to one of them and no one else may write it, and each folder and link on
/// the way, as written and as resolved, passes the state directory's rule. For the files
/// the runner trusts as its own (the Node it runs, a policy or preload overriding the
/// built-in one); `what` names the file in the message.
pub fn file_problem(path: &Path, me: u32, what: &str) -> Option<String> {
    let judged = || -> Result<(), String> {
        let cannot = |e: std::io::Error| format!("cannot resolve {what} {}: {e}", path.display());
        let absolute = std::path::absolute(path).map_err(cannot)?;
        let real = std::fs::canonicalize(&absolute).map_err(cannot)?;
        for way in [&absolute, &real] {
            along(way, me, path, what)?;
        }
        let meta = std::fs::metadata(&real).map_err(cannot)?;
        let fix = "make it root's (chown root, chmod go-w) or put it where only root may write";
        if !meta.is_file() {
            return Err(format!("{what} {} is not a regular file", path.display()));
        }
        if meta.uid() != 0 && meta.uid() != me {
            return Err(format!(
                "{what} {} belongs to uid {}: that user could change what the runner trusts; \
                 {fix}",
                path.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{what} {} may be written by other users (mode {:o}); {fix}",
                path.display(),
                meta.mode() & 0o7777
            ));
        }
        Ok(())
    };
    judged().err()
}

/// Each folder and link on the way to `path` (not `path` itself when it is a folder: the
/// caller checks it as the state directory), looked at without following links. `what`
/// names `shown` in the messages.
fn along(path: &Path, me: u32, shown: &Path, what: &str) -> Result<(), String> {
    let mut prefix = PathBuf::new();
    let parts: Vec<Component> = path.components().collect();
    for (i, part) in parts.iter().enumerate() {
        prefix.push(part);
        let meta = match std::fs::symlink_metadata(&prefix) {
            Ok(m) => m,
            Err(e) => {
                return Err(format!(
                    "cannot inspect {} on the way to {what} {}: {e}",
                    prefix.display(),
                    shown.display()
                ))
            }
        };
        let last = i + 1 == parts.len();
        if last && meta.is_dir() {
            break;
        }
        if meta.uid() != 0 && meta.uid() != me {
            return Err(format!(
                "{} on the way to {what} {} belongs to uid {}: that user could replace what \
                 the runner trusts; use a path whose every folder and link belongs to root \
                 or to the runner's user",
                prefix.display(),
                shown.display(),
                meta.uid()
            ));
        }
        let sticky = meta.mode() & 0o1000 != 0;
        if meta.is_dir() && meta.mode() & 0o022 != 0 && !sticky {
            return Err(format!(
                "{} on the way to {what} {} may be written by other users (mode {:o}) and is \
                 not sticky: they could rename what is there and put their own in its \
                 place; use a folder only root or the runner's user may change",
                prefix.display(),
                shown.display(),
                meta.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::problem;
    use std::os::unix::fs::PermissionsExt as _;

    fn chmod(path: &std::path::Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    fn root() -> bool {
        if nix::unistd::geteuid().is_root() {
            return true;
        }
        crate::test_skips::skipped("state_dir", "giving a folder to another user takes root");
        false
    }

    #[test]
    fn the_runners_own_folder_is_trusted_and_one_others_may_write_is_not() {
        let top = tempfile::tempdir().expect("a temporary folder");
        let state = top.path().join("state");
        std::fs::create_dir(&state).expect("mkdir");
        chmod(&state, 0o700);
        assert_eq!(problem(&state), None);
        chmod(&state, 0o755);
        assert_eq!(problem(&state), None);
        chmod(&state, 0o775);
        let p = problem(&state).expect("group-writable is refused");
        assert!(
            p.contains("writable by it alone") && p.contains("775"),
            "{p}"
        );
        chmod(&state, 0o1777);
        assert!(
            problem(&state).is_some(),
            "sticky is not enough for the folder itself"
        );
    }

    #[test]
    fn a_folder_of_another_user_is_refused_on_the_way_and_at_the_end() {
        if !root() {
            return;
        }
        let nobody = nix::unistd::Uid::from_raw(65534);
        let top = tempfile::tempdir().expect("a temporary folder");
        let state = top.path().join("state");
        std::fs::create_dir(&state).expect("mkdir");
        nix::unistd::chown(&state, Some(nobody), None).expect("chown");
        let p = problem(&state).expect("another user's folder is refused");
        assert!(p.contains("owner uid 65534"), "{p}");
        // Its files are then that user's to replace: the runtime record, the cache.
        let inner = state.join("inner");
        std::fs::create_dir(&inner).expect("mkdir");
        let p = problem(&inner).expect("a folder inside another user's folder is refused");
        assert!(p.contains("belongs to uid 65534"), "{p}");
    }

    #[test]
    fn a_parent_others_may_write_must_be_sticky() {
        let top = tempfile::tempdir().expect("a temporary folder");
        let shared = top.path().join("shared");
        std::fs::create_dir(&shared).expect("mkdir");
        let state = shared.join("state");
        std::fs::create_dir(&state).expect("mkdir");
        chmod(&shared, 0o777);
        let p = problem(&state).expect("a parent anyone may rename in is refused");
        assert!(p.contains("not sticky"), "{p}");
        chmod(&shared, 0o1777);
        assert_eq!(problem(&state), None, "as under /tmp");
    }

    #[test]
    fn a_link_on_the_way_is_judged_and_so_is_where_it_leads() {
        if !root() {
            return;
        }
        let top = tempfile::tempdir().expect("a temporary folder");
        let state = top.path().join("state");
        std::fs::create_dir(&state).expect("mkdir");
        let link = top.path().join("link");
        std::os::unix::fs::symlink(&state, &link).expect("symlink");
        assert_eq!(problem(&link), None, "root's link to root's folder");
        // Another user's link could be pointed elsewhere at any time.
        std::os::unix::fs::lchown(&link, Some(65534), None).expect("lchown");
        let p = problem(&link).expect("another user's link is refused");
        assert!(p.contains("belongs to uid 65534"), "{p}");
        // A root link to a folder others may write.
        let open = top.path().join("open");
        std::fs::create_dir(&open).expect("mkdir");
        chmod(&open, 0o777);
        let to_open = top.path().join("to-open");
        std::os::unix::fs::symlink(&open, &to_open).expect("symlink");
        assert!(problem(&to_open).is_some(), "judged where it leads");
    }

    #[test]
    fn a_state_directory_the_runner_makes_is_its_users_alone() {
        let top = tempfile::tempdir().expect("a temporary folder");
        let state = top.path().join("made/state");
        super::create(&state).expect("create");
        for dir in [&state, &top.path().join("made")] {
            let mode = std::fs::metadata(dir).expect("stat").permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", dir.display());
        }
        assert_eq!(problem(&state), None);
    }

    #[test]
    fn a_missing_folder_or_a_file_is_named() {
        let top = tempfile::tempdir().expect("a temporary folder");
        let p = problem(&top.path().join("absent")).expect("refused");
        assert!(p.contains("cannot resolve"), "{p}");
        let file = top.path().join("file");
        std::fs::write(&file, "x").expect("write");
        let p = problem(&file).expect("refused");
        assert!(p.contains("not a folder"), "{p}");
    }
}
