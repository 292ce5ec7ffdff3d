//! A skill folder's files as a job's inputs: every regular file but the manifest and
//! dot-files, read without following links, bounded, hashed and carried in base64.
//!
//! Whoever owns the folder may rename anything in it at any moment, also while `run` (as
//! root, maybe) reads it: a sub-folder swapped for a symlink to a folder they cannot read,
//! a file for a pipe. So the folder is opened once, and everything under it is reached from
//! the descriptor of its own directory, one name at a time: listed from the directory's
//! descriptor, looked at with `fstatat(…, AT_SYMLINK_NOFOLLOW)`, opened with `openat(…,
//! O_NOFOLLOW)`, checked with `fstat` on what was opened, and read from that descriptor. No
//! path is resolved again after the folder itself is opened, so a rename can make the walk
//! refuse, never read something outside the folder.

use super::*;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, IntoRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;

/// A regular file of the folder found by the walk: open, and its size when it was opened.
struct Found {
    /// Its input name: its path relative to the skill folder, with `/`.
    name: String,
    /// Its path, only to name it in a message; never opened.
    path: PathBuf,
    file: fs::File,
    len: u64,
}

/// Every regular file of the folder open as `root` but `skill.json` and
/// dot-files/dot-folders, sorted by name, each read, hashed and carried in base64; `dir`
/// only names it in messages. The caller opens the folder once ([`open_folder`]) for its
/// manifest and its files, so both come from the same folder.
pub(super) fn collect_inputs_from(
    root: BorrowedFd<'_>,
    dir: &Path,
) -> Result<Vec<Input>, SkillError> {
    let mut files = Vec::new();
    walk(root, dir, "", 1, &mut files)?;
    files.sort_by(|a, b| a.name.cmp(&b.name));
    #[cfg(test)]
    seam::hit(seam::Point::Reads);

    let mut inputs = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for Found {
        name,
        path,
        file,
        len,
    } in files
    {
        total += len;
        if total > MAX_INPUTS_TOTAL_BYTES as u64 {
            return Err(SkillError::Folder {
                path: dir.to_path_buf(),
                message: format!(
                    "the files to send hold more than {MAX_INPUTS_TOTAL_BYTES} bytes (1 MiB) in \
                     all (reached at {name}); move what the tools do not need out of the folder \
                     or into a dot-folder"
                ),
            });
        }
        // From the descriptor the walk opened and checked: whatever the path leads to now.
        let bytes =
            read_bounded(file, len, len).map_err(|e| e.into_skill_error(&path, name.as_str()))?;
        job::check_input_content(&name, &bytes).map_err(|message| SkillError::Folder {
            path: path.clone(),
            message: format!("{message}; only text files up to these sizes can be sent"),
        })?;
        inputs.push(Input {
            sha256: hex::encode(Sha256::digest(&bytes)),
            content_base64: Some(base64::engine::general_purpose::STANDARD.encode(&bytes)),
            media_id: None,
            name,
        });
    }
    Ok(inputs)
}

/// Collects the files under the directory open as `dir`, each open; `dir_path` names it in
/// messages, `prefix` is its name relative to the skill folder, `depth` the number of
/// components a file here has.
fn walk(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    prefix: &str,
    depth: usize,
    files: &mut Vec<Found>,
) -> Result<(), SkillError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SkillError::Io { path, source }
    };
    let mut entries = list(dir).map_err(io(dir_path))?;
    entries.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for entry in entries {
        let raw = entry.as_bytes();
        let path = dir_path.join(OsStr::from_bytes(raw));
        // On the bytes, so that a dot-file is left out whatever its name holds after the dot.
        if raw.first() == Some(&b'.') {
            continue;
        }
        let Ok(file_name) = std::str::from_utf8(raw) else {
            return Err(SkillError::Folder {
                path,
                message: "the name is not UTF-8; rename it with [A-Za-z0-9._-]".into(),
            });
        };
        if prefix.is_empty() && file_name == MANIFEST_FILE {
            continue;
        }
        let name = if prefix.is_empty() {
            file_name.to_owned()
        } else {
            format!("{prefix}/{file_name}")
        };
        let kind = kind_at(dir, &entry).map_err(io(&path))?;
        #[cfg(test)]
        seam::hit(seam::Point::Entry(&name));
        if kind == Kind::Symlink {
            return Err(symlink_error(path));
        }
        if kind == Kind::Dir {
            if depth >= MAX_NAME_COMPONENTS {
                return Err(SkillError::Folder {
                    path,
                    message: format!(
                        "is nested too deep; a file's path may have at most \
                         {MAX_NAME_COMPONENTS} components"
                    ),
                });
            }
            // Had it become a symlink since `kind_at`, this fails (ENOTDIR or ELOOP); a
            // second look, for the message only, tells that from any other failure.
            let sub = open_at(
                dir,
                &entry,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            )
            .map_err(|source| match kind_at(dir, &entry) {
                Ok(Kind::Symlink) => symlink_error(path.clone()),
                _ => SkillError::Io {
                    path: path.clone(),
                    source,
                },
            })?;
            walk(sub.as_fd(), &path, &name, depth + 1, files)?;
            continue;
        }
        if kind != Kind::File {
            return Err(SkillError::Folder {
                path,
                message: "is not a regular file (a socket, pipe or device); remove it from the \
                          skill folder"
                    .into(),
            });
        }
        job::check_input_name(&name).map_err(|e| SkillError::Folder {
            path: path.clone(),
            message: format!(
                "{e}; rename it (names use [A-Za-z0-9._-], at most 64 characters per part)"
            ),
        })?;
        // What is opened is checked again: it may no longer be what `kind_at` saw.
        let (file, len) =
            open_regular_at(dir, &entry).map_err(|e| e.into_skill_error(&path, &name))?;
        let cap = if name.ends_with(".js") {
            MAX_JS_BYTES
        } else {
            MAX_INPUTS_TOTAL_BYTES
        };
        if len > cap as u64 {
            return Err(SkillError::Folder {
                path,
                message: format!(
                    "is {len} bytes; a {} may be at most {cap} bytes",
                    if cap == MAX_JS_BYTES {
                        ".js file"
                    } else {
                        "file"
                    }
                ),
            });
        }
        files.push(Found {
            name,
            path,
            file,
            len,
        });
        if files.len() > MAX_INPUTS {
            return Err(SkillError::Folder {
                path: dir_path.to_path_buf(),
                message: format!(
                    "the skill folder has more than {MAX_INPUTS} files to send; move what the \
                     tools do not need out of the folder or into a dot-folder"
                ),
            });
        }
    }
    Ok(())
}

fn symlink_error(path: PathBuf) -> SkillError {
    SkillError::Folder {
        path,
        message: "is a symlink; the runner sends only regular files, so replace it with a copy \
                  of the file (or rename it to start with '.' to leave it out)"
            .into(),
    }
}

/// Opens a skill folder to walk it or to read its manifest. The folder itself is reached by
/// its path as given, a symlink followed as before; what is under it is reached from this
/// descriptor only.
pub(super) fn open_folder(dir: &Path) -> io::Result<OwnedFd> {
    let folder = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    Ok(OwnedFd::from(folder))
}

/// `openat(dir, name, flags | O_CLOEXEC)`. `flags` never holds `O_CREAT`, so no mode.
fn open_at(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `dir` is an open descriptor for the whole call (borrowed), `name` is a
    // NUL-terminated string that outlives the call, and without O_CREAT/O_TMPFILE openat
    // reads no mode argument.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat succeeded, so `fd` is a new open descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Symlink,
    /// A socket, pipe or device.
    Other,
}

/// What `name` in `dir` is, the name itself and not what a symlink points to.
fn kind_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Kind> {
    let mut stat = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `dir` is an open descriptor for the whole call, `name` is NUL-terminated and
    // outlives the call, and `stat` is writable memory the size of the `struct stat` that
    // fstatat fills.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            stat.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatat returned 0, so it filled `stat`.
    let mode = unsafe { stat.assume_init() }.st_mode & libc::S_IFMT;
    Ok(match mode {
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFREG => Kind::File,
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    })
}

/// Closes a directory stream of [`list`] when dropped.
struct DirStream(*mut libc::DIR);

impl Drop for DirStream {
    fn drop(&mut self) {
        // SAFETY: the stream came from a successful fdopendir and is closed only here, once.
        unsafe { libc::closedir(self.0) };
    }
}

/// The names in the directory open as `dir`, but `.` and `..`, in no order.
fn list(dir: BorrowedFd<'_>) -> io::Result<Vec<CString>> {
    // `.` from `dir`: the same directory, with a position of its own for the listing.
    let own = open_at(dir, c".", libc::O_RDONLY | libc::O_DIRECTORY)?.into_raw_fd();
    // SAFETY: `own` is an open directory descriptor that only this function holds; on
    // success the stream owns it (closedir closes it).
    let stream = unsafe { libc::fdopendir(own) };
    if stream.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `own` is still this function's to close, once.
        drop(unsafe { OwnedFd::from_raw_fd(own) });
        return Err(e);
    }
    let stream = DirStream(stream);
    let mut names = Vec::new();
    loop {
        // readdir tells its end from an error only by errno, so errno is cleared first.
        // SAFETY: __errno_location returns this thread's errno, valid for the thread's life.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `stream.0` is an open stream that only this function uses.
        let entry = unsafe { libc::readdir(stream.0) };
        if entry.is_null() {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(0) {
                return Ok(names);
            }
            return Err(e);
        }
        // SAFETY: readdir returned an entry whose d_name is NUL-terminated and valid until
        // the next readdir or closedir of this stream; it is copied before either.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
        if name.to_bytes() != b"." && name.to_bytes() != b".." {
            names.push(name.to_owned());
        }
    }
}

pub(super) enum ReadError {
    Io(std::io::Error),
    NotRegular,
    TooLarge(u64),
}

impl ReadError {
    pub(super) fn into_skill_error(self, path: &Path, what: &str) -> SkillError {
        let path = path.to_path_buf();
        match self {
            ReadError::Io(source) => SkillError::Io { path, source },
            ReadError::NotRegular => SkillError::Folder {
                path,
                message: format!(
                    "{what} is not a regular file (a symlink or something else); replace it \
                     with the file itself"
                ),
            },
            ReadError::TooLarge(max) => SkillError::Folder {
                path,
                message: format!("{what} is larger than {max} bytes, or grew while being read"),
            },
        }
    }
}

/// Reads `name` of the directory open as `dir`, which must be a regular file there (not a
/// symlink, pipe or device), never more than `max` bytes.
pub(super) fn read_file_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    max: u64,
) -> Result<Vec<u8>, ReadError> {
    let (file, len) = open_regular_at(dir, name)?;
    read_bounded(file, len, max)
}

/// Opens `name` of the directory open as `dir` to read it, if it is a regular file: never
/// through a symlink, without blocking on a pipe and without taking a terminal; what was
/// opened is checked with `fstat` before anything is read. Gives the file and its size.
fn open_regular_at(dir: BorrowedFd<'_>, name: &CStr) -> Result<(fs::File, u64), ReadError> {
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    let fd = open_at(dir, name, flags).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            ReadError::NotRegular
        } else {
            ReadError::Io(e)
        }
    })?;
    let file = fs::File::from(fd);
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular);
    }
    Ok((file, meta.len()))
}

/// At most `max` bytes of `file`, whose size was `len`; more is an error (it grew).
fn read_bounded(file: fs::File, len: u64, max: u64) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::with_capacity(len.min(max) as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge(max));
    }
    Ok(bytes)
}

/// Test-only: runs a closure at fixed points of the walk, to rename things under it there.
#[cfg(test)]
pub(super) mod seam {
    use std::cell::RefCell;

    /// Where the walk is.
    pub enum Point<'a> {
        /// The kind of the entry of this input name is known; it is not opened yet.
        Entry(&'a str),
        /// The folder is walked; the files found are about to be read.
        Reads,
    }

    type Hook = Box<dyn FnMut(Point<'_>)>;

    thread_local! {
        static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    /// Runs `hook` at each point of the walks of this thread, until [`clear`].
    pub fn set(hook: impl FnMut(Point<'_>) + 'static) {
        HOOK.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
    }

    pub fn clear() {
        HOOK.with(|h| *h.borrow_mut() = None);
    }

    pub(super) fn hit(point: Point<'_>) {
        let hook = HOOK.with(|h| h.borrow_mut().take());
        if let Some(mut hook) = hook {
            hook(point);
            HOOK.with(|h| {
                let mut slot = h.borrow_mut();
                if slot.is_none() {
                    *slot = Some(hook);
                }
            });
        }
    }
}
