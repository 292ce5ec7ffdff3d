//! A job's inputs: find their bytes, verify them, lay them out read-only.
//!
//! Bytes come from the job itself, else from the content-addressed cache (verified again
//! on read). They are hashed in memory before anything is written or run, and written
//! into a fresh directory with `openat`/`mkdirat` relative to directory descriptors and
//! `O_NOFOLLOW|O_EXCL`, so no name can lead outside it.

use crate::job::{check_input_content, ValidInput, ValidJob};
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fchmod, mkdirat, Mode};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Why the inputs could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// No source had the bytes (status `integrity`, reason `input_missing`).
    #[error(
        "input {name:?} (sha256 {sha256}) has no bytes: not in the job, not in the runner's cache"
    )]
    Missing { name: String, sha256: String },
    /// The Media service did not deliver the bytes (status `integrity`, `input_missing`).
    #[error(
        "input {name:?} has no bytes: not in the job, not in the runner's cache, and {detail}"
    )]
    Unavailable { name: String, detail: String },
    /// The bytes do not hash to what the job says (status `integrity`, `sha256_mismatch`).
    #[error("input {name:?}: its bytes hash to {found}, the job says {expected}")]
    Mismatch {
        name: String,
        expected: String,
        found: String,
    },
    /// The bytes break a content rule (status `rejected`, `invalid_job`).
    #[error("{0}")]
    Content(String),
    /// The runner could not write (status `internal`).
    #[error("cannot lay out input {name:?}: {err}")]
    Io { name: String, err: String },
}

pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The content-addressed cache: `<dir>/<sha256 hex>`, read-only files.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    pub fn new(dir: PathBuf) -> Cache {
        Cache { dir }
    }

    /// The bytes for a digest, only if they still hash to it; a corrupt entry is removed.
    pub fn get(&self, digest: &[u8; 32]) -> Option<Vec<u8>> {
        let path = self.dir.join(hex::encode(digest));
        let bytes = std::fs::read(&path).ok()?;
        if &sha256(&bytes) == digest {
            Some(bytes)
        } else {
            tracing::warn!(path = %path.display(), "cache entry does not match its name; removed");
            let _ = std::fs::remove_file(&path);
            None
        }
    }

    /// Keeps verified bytes for later jobs. Best effort: a failure only costs a refetch.
    pub fn put(&self, digest: &[u8; 32], bytes: &[u8]) {
        let name = hex::encode(digest);
        let path = self.dir.join(&name);
        if path.exists() {
            return;
        }
        if std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        let tmp = self.dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let ok = std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()))
            .is_ok();
        if ok {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o444));
            let _ = std::fs::rename(&tmp, &path);
        } else {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// Every input's bytes, verified against its digest, in the job's order.
/// The bytes must hash to the input's digest (the one check every source goes through).
pub fn verify(input: &ValidInput, bytes: &[u8]) -> Result<(), InputError> {
    let found = sha256(bytes);
    if found != input.sha256 {
        return Err(InputError::Mismatch {
            name: input.name.clone(),
            expected: input.sha256_hex(),
            found: hex::encode(found),
        });
    }
    Ok(())
}

pub fn resolve(job: &ValidJob, cache: &Cache) -> Result<Vec<(String, Vec<u8>)>, InputError> {
    let mut out = Vec::with_capacity(job.inputs.len());
    let mut total = 0usize;
    for input in &job.inputs {
        let bytes = bytes_of(input, cache)?;
        verify(input, &bytes)?;
        check_input_content(&input.name, &bytes).map_err(InputError::Content)?;
        total += bytes.len();
        if total > crate::job::MAX_INPUTS_TOTAL_BYTES {
            return Err(InputError::Content(format!(
                "inputs hold more than {} bytes (1 MiB) in all",
                crate::job::MAX_INPUTS_TOTAL_BYTES
            )));
        }
        if input.content.is_some() {
            cache.put(&input.sha256, &bytes);
        }
        out.push((input.name.clone(), bytes));
    }
    Ok(out)
}

fn bytes_of(input: &ValidInput, cache: &Cache) -> Result<Vec<u8>, InputError> {
    if let Some(b) = &input.content {
        return Ok(b.clone());
    }
    cache.get(&input.sha256).ok_or_else(|| InputError::Missing {
        name: input.name.clone(),
        sha256: input.sha256_hex(),
    })
}

fn io_err(name: &str, e: impl std::fmt::Display) -> InputError {
    InputError::Io {
        name: name.to_string(),
        err: e.to_string(),
    }
}

/// Writes the files under `dir` (which must exist, be empty and be ours): directories
/// 0555, files 0444, nothing followed, nothing replaced.
pub fn lay_out(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<(), InputError> {
    let root: OwnedFd = openat(
        nix::fcntl::AT_FDCWD,
        dir,
        OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err(".", e))?;
    // Directories are made writable while filling and sealed afterwards, deepest first.
    let mut made: BTreeMap<String, ()> = BTreeMap::new();
    for (name, bytes) in files {
        let parts: Vec<&str> = name.split('/').collect();
        let mut cur: OwnedFd = root.try_clone().map_err(|e| io_err(name, e))?;
        let mut prefix = String::new();
        for part in &parts[..parts.len() - 1] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            if !made.contains_key(&prefix) {
                mkdirat(cur.as_fd(), *part, Mode::from_bits_truncate(0o700))
                    .map_err(|e| io_err(name, e))?;
                made.insert(prefix.clone(), ());
            }
            cur = openat(
                cur.as_fd(),
                *part,
                OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| io_err(name, e))?;
        }
        let leaf = parts[parts.len() - 1];
        let fd = openat(
            cur.as_fd(),
            leaf,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| io_err(name, e))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes).map_err(|e| io_err(name, e))?;
        fchmod(file.as_fd(), Mode::from_bits_truncate(0o444)).map_err(|e| io_err(name, e))?;
    }
    for prefix in made.keys().rev() {
        let fd = openat(
            root.as_fd(),
            prefix.as_str(),
            OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_err(prefix, e))?;
        fchmod(fd.as_fd(), Mode::from_bits_truncate(0o555)).map_err(|e| io_err(prefix, e))?;
    }
    fchmod(root.as_fd(), Mode::from_bits_truncate(0o555)).map_err(|e| io_err(".", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn lays_out_nested_read_only_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("skill");
        std::fs::create_dir(&dir).unwrap();
        let files = vec![
            ("tools/a.js".to_string(), b"1".to_vec()),
            ("tools/lib/b.js".to_string(), b"2".to_vec()),
            ("data.json".to_string(), b"{}".to_vec()),
        ];
        lay_out(&dir, &files).unwrap();
        assert_eq!(std::fs::read(dir.join("tools/lib/b.js")).unwrap(), b"2");
        let mode = |p: &str| {
            std::fs::symlink_metadata(dir.join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(mode("tools/a.js"), 0o444);
        assert_eq!(mode("tools/lib"), 0o555);
        assert_eq!(mode("tools"), 0o555);
        assert_eq!(mode("."), 0o555);
        // Let the tempdir clean up.
        for p in [".", "tools", "tools/lib"] {
            std::fs::set_permissions(dir.join(p), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    #[test]
    fn never_follows_a_planted_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("skill");
        std::fs::create_dir(&dir).unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("tools")).unwrap();
        let err = lay_out(&dir, &[("tools/a.js".into(), b"x".to_vec())]).unwrap_err();
        assert!(matches!(err, InputError::Io { .. }), "{err}");
        assert!(!outside.join("a.js").exists());
        std::os::unix::fs::symlink(outside.join("f"), dir.join("f.js")).unwrap();
        assert!(lay_out(&dir, &[("f.js".into(), b"x".to_vec())]).is_err());
        assert!(!outside.join("f").exists());
    }

    #[test]
    fn cache_verifies_on_read() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path().join("cache"));
        let d = sha256(b"hello");
        assert!(cache.get(&d).is_none());
        cache.put(&d, b"hello");
        assert_eq!(cache.get(&d).unwrap(), b"hello");
        // Corrupt the entry: it is refused and removed.
        let p = tmp.path().join("cache").join(hex::encode(d));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(&p, b"evil").unwrap();
        assert!(cache.get(&d).is_none());
        assert!(!p.exists());
    }
}
