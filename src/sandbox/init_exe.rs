//! Which executable the runner starts as a job's init stage.
//!
//! The init stage (the module `sandbox::init`) is a fresh process that reads one plan,
//! applies it and becomes Node. It can be the runner itself, re-executed (`/proc/self/exe
//! sandbox-init`), or `openvibe-skill-runner-init`, a small executable of the same build
//! that holds the init stage and nothing else (no async runtime, no HTTP, no database): a
//! job's three setup processes then start, fork and exit from a 0.9 MB image instead of the
//! whole 19 MB runner, a part of what the sandbox costs a cold job (README, Performance).
//!
//! Where it is looked for, beside the running binary: `<dir>/openvibe-skill-runner-init`
//! (a build's `target/<profile>/`), then `<dir>/../lib/openvibe-skill-runner/` (the Debian
//! package's `/usr/lib/openvibe-skill-runner/`). The first found is used; if neither
//! exists, the runner itself. A found file that is not a root-owned executable, in a folder
//! only root may write to, stops the start: a job's first process runs as root, so it must
//! be exactly as trusted as the runner.
//!
//! The file is opened once, at the engine's start, and each init is executed through that
//! descriptor: an upgrade that replaces the file on disk does not reach a running daemon,
//! which keeps starting the init of its own build. Each init is given the runner's build id
//! ([`BUILD_ID`]); an init of another build refuses the plan. A found file that does not
//! hold this build's id (an upgrade half done, one file copied alone) is passed over for
//! the runner itself, with a warning.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// This build's id (build.rs: a hash of the sources, the manifest, the lock file and the
/// features), shared by the runner and its init executable.
pub const BUILD_ID: &str = env!("OVSR_BUILD_ID");

/// The init executable's file name.
pub const NAME: &str = "openvibe-skill-runner-init";

/// The executable a job's init stage is started from.
#[derive(Debug)]
pub struct InitExe {
    /// What is executed: `/proc/self/fd/<n>` for a pinned file, `/proc/self/exe` for the
    /// runner itself, or a path a test gave.
    exec: PathBuf,
    /// The file as found, for messages and `doctor`.
    shown: PathBuf,
    /// Keeps a pinned file open (close-on-exec, above every descriptor an init gets).
    _pinned: Option<OwnedFd>,
    /// Why the runner itself is the init, when it is (for `doctor`).
    why_itself: Option<String>,
}

impl InitExe {
    /// The runner binary itself, re-executed.
    pub fn runner_itself() -> InitExe {
        InitExe::itself_because(format!("no {NAME} beside the runner"))
    }

    fn itself_because(why: String) -> InitExe {
        InitExe {
            exec: PathBuf::from("/proc/self/exe"),
            shown: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe")),
            _pinned: None,
            why_itself: Some(why),
        }
    }

    /// A given executable, by path (tests: a test binary linking the crate is no runner).
    pub fn at(path: PathBuf) -> InitExe {
        InitExe {
            exec: path.clone(),
            shown: path,
            _pinned: None,
            why_itself: None,
        }
    }

    /// The init executable beside the running binary, pinned, or the runner itself when
    /// there is none; an error when one is found that cannot be trusted.
    pub fn locate() -> Result<InitExe, String> {
        let Ok(me) = std::env::current_exe() else {
            return Ok(InitExe::runner_itself());
        };
        let Some(dir) = me.parent() else {
            return Ok(InitExe::runner_itself());
        };
        let Some(path) = find(dir) else {
            return Ok(InitExe::runner_itself());
        };
        match pin(&path)? {
            Some(init) => Ok(init),
            None => {
                tracing::warn!(
                    init = %path.display(),
                    build = BUILD_ID,
                    "the init executable is of another build than this runner; the runner itself starts each job's init stage (reinstall the runner so that both files are of one build)"
                );
                Ok(InitExe::itself_because(format!(
                    "{} is of another build",
                    path.display()
                )))
            }
        }
    }

    /// The path to execute.
    pub fn exec_path(&self) -> &Path {
        &self.exec
    }

    /// The file it is, as found.
    pub fn shown(&self) -> &Path {
        &self.shown
    }

    /// What `doctor` says of it.
    pub fn describe(&self) -> String {
        match &self.why_itself {
            None => format!("{} (build {BUILD_ID})", self.shown.display()),
            Some(why) => format!(
                "the runner itself, {} ({why}; jobs run, their setup a little slower)",
                self.shown.display()
            ),
        }
    }
}

/// Where the init executable would be for a runner in `dir`, the first that exists.
pub fn candidates(dir: &Path) -> [PathBuf; 2] {
    [
        dir.join(NAME),
        dir.join("../lib/openvibe-skill-runner").join(NAME),
    ]
}

fn find(dir: &Path) -> Option<PathBuf> {
    candidates(dir)
        .into_iter()
        .find(|p| std::fs::symlink_metadata(p).is_ok())
}

/// Opens `path`, checks what was opened and keeps it open, high, close-on-exec; `None`
/// when it is the init of another build.
fn pin(path: &Path) -> Result<Option<InitExe>, String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("cannot open the init executable {}: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot inspect the init executable {}: {e}", path.display()))?;
    trusted(path, &meta)?;
    // The folder it was found in and, for a link, the folder it leads to: whoever may
    // write in either could have put another file there.
    let real = std::fs::canonicalize(path)
        .map_err(|e| format!("cannot resolve the init executable {}: {e}", path.display()))?;
    for dir in [path.parent(), real.parent()].into_iter().flatten() {
        let dmeta = std::fs::metadata(dir)
            .map_err(|e| format!("cannot inspect the folder {}: {e}", dir.display()))?;
        trusted_dir(dir, &dmeta)?;
    }
    // Of this build? Its image holds the build id it checks its argument against. One of
    // another build (an upgrade half done, a file copied alone) would refuse every plan.
    let holds = holds(&file, BUILD_ID.as_bytes())
        .map_err(|e| format!("cannot read the init executable {}: {e}", path.display()))?;
    if !holds {
        return Ok(None);
    }
    // Above 0-2 and every descriptor the init is given (3-6), so that placing those in
    // the child never overwrites it before the exec.
    let high = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(10))
        .map_err(|e| format!("cannot keep the init executable open: {e}"))?;
    // SAFETY: F_DUPFD_CLOEXEC just returned this new descriptor; nothing else owns it.
    let pinned = unsafe { OwnedFd::from_raw_fd(high) };
    Ok(Some(InitExe {
        exec: PathBuf::from(format!("/proc/self/fd/{}", pinned.as_raw_fd())),
        shown: real,
        _pinned: Some(pinned),
        why_itself: None,
    }))
}

/// Whether `needle` occurs in what `file` reads to its end, read a block at a time (the
/// init's image is about a megabyte; a run-job reads it once per start, and one buffer
/// grown to its size cost more than the search).
fn holds(mut file: impl Read, needle: &[u8]) -> std::io::Result<bool> {
    const BLOCK: usize = 64 * 1024;
    let finder = memchr::memmem::Finder::new(needle);
    let overlap = needle.len().saturating_sub(1);
    let mut buf = vec![0u8; BLOCK + overlap];
    let mut kept = 0;
    loop {
        // At most a block a read, after what was kept: the blocks' ends are where the
        // stream's 64 KiB multiples are, whatever the reader hands out.
        let n = match file.read(&mut buf[kept..kept + BLOCK]) {
            Ok(0) => return Ok(false),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let end = kept + n;
        if finder.find(&buf[..end]).is_some() {
            return Ok(true);
        }
        // An occurrence across two blocks starts in the last `overlap` bytes.
        let keep = overlap.min(end);
        buf.copy_within(end - keep..end, 0);
        kept = keep;
    }
}

/// A regular, executable file owned by root that no one else may write.
pub fn trusted(path: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    let fix = "reinstall the runner, or make it root's: chown root:root and chmod 755";
    if !meta.is_file() {
        return Err(format!(
            "the init executable {} is not a regular file; {fix}",
            path.display()
        ));
    }
    if meta.uid() != 0 {
        return Err(format!(
            "the init executable {} belongs to uid {}, not root; {fix}",
            path.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "the init executable {} may be written by users other than root (mode {:o}); {fix}",
            path.display(),
            meta.mode() & 0o7777
        ));
    }
    if meta.mode() & 0o100 == 0 {
        return Err(format!(
            "the init executable {} is not executable (mode {:o}); {fix}",
            path.display(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// A folder owned by root that no one else may write (a sticky folder is not enough: its
/// users may add files).
pub fn trusted_dir(dir: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "the init executable's folder {} may be written by users other than root \
             (owner uid {}, mode {:o}); install the runner in a folder only root may change",
            dir.display(),
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
