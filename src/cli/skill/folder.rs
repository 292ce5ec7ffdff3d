//! A skill folder's files as a job's inputs: every regular file but the manifest and
//! dot-files, read without following links, bounded, hashed and carried in base64.

use super::*;

/// Every regular file of the folder but `skill.json` and dot-files/dot-folders, sorted by
/// name, each read, hashed and carried in base64.
pub(super) fn collect_inputs(dir: &Path) -> Result<Vec<Input>, SkillError> {
    let mut files = Vec::new();
    walk(dir, "", 1, &mut files)?;
    files.sort_by(|a, b| a.0.cmp(&b.0));

    let mut inputs = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for (name, path, len) in files {
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
        let bytes =
            read_regular_file(&path, len).map_err(|e| e.into_skill_error(&path, name.as_str()))?;
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

/// Collects `(name, path, size)` of the files under `dir`; `prefix` is `dir`'s name relative
/// to the skill folder, `depth` the number of components a file here has.
fn walk(
    dir: &Path,
    prefix: &str,
    depth: usize,
    files: &mut Vec<(String, PathBuf, u64)>,
) -> Result<(), SkillError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SkillError::Io { path, source }
    };
    let mut entries = fs::read_dir(dir)
        .map_err(io(dir))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let Some(file_name) = entry.file_name().to_str().map(str::to_owned) else {
            return Err(SkillError::Folder {
                path,
                message: "the name is not UTF-8; rename it with [A-Za-z0-9._-]".into(),
            });
        };
        if file_name.starts_with('.') || (prefix.is_empty() && file_name == MANIFEST_FILE) {
            continue;
        }
        let name = if prefix.is_empty() {
            file_name
        } else {
            format!("{prefix}/{file_name}")
        };
        let meta = fs::symlink_metadata(&path).map_err(io(&path))?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            return Err(SkillError::Folder {
                path,
                message: "is a symlink; the runner sends only regular files, so replace it \
                          with a copy of the file (or rename it to start with '.' to leave it out)"
                    .into(),
            });
        }
        if kind.is_dir() {
            if depth >= MAX_NAME_COMPONENTS {
                return Err(SkillError::Folder {
                    path,
                    message: format!(
                        "is nested too deep; a file's path may have at most \
                         {MAX_NAME_COMPONENTS} components"
                    ),
                });
            }
            walk(&path, &name, depth + 1, files)?;
            continue;
        }
        if !kind.is_file() {
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
        let len = meta.len();
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
        files.push((name, path, len));
        if files.len() > MAX_INPUTS {
            return Err(SkillError::Folder {
                path: dir.to_path_buf(),
                message: format!(
                    "the skill folder has more than {MAX_INPUTS} files to send; move what the \
                     tools do not need out of the folder or into a dot-folder"
                ),
            });
        }
    }
    Ok(())
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

/// Reads a regular file, never through a symlink, and never more than `max` bytes.
pub(super) fn read_regular_file(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                ReadError::NotRegular
            } else {
                ReadError::Io(e)
            }
        })?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular);
    }
    let mut bytes = Vec::with_capacity(meta.len().min(max) as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge(max));
    }
    Ok(bytes)
}
