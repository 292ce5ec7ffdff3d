//! A job's inputs: find their bytes, verify them, lay them out read-only.
//!
//! Bytes come from the job itself, else from the content-addressed cache (verified again
//! on read), else from what the Media service sent for this job. They are hashed in memory
//! before anything is written or run, and written into a fresh directory with
//! `openat`/`mkdirat` relative to directory descriptors and `O_NOFOLLOW|O_EXCL`, so no name
//! can lead outside it. The cache keeps a job's new bytes only once every input of the job
//! is verified, and holds at most `runner.cache_max_bytes`, least recently used first out.

use crate::job::{check_input_content, ValidInput, ValidJob};
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fchmod, mkdirat, Mode};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

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

/// Bytes found for one job, by sha256, each verified: what the cache held for it when its
/// inputs were looked up ([`cached`]), so an entry evicted afterwards still serves the
/// job, and what the Media service sent.
pub type Fetched = HashMap<[u8; 32], Vec<u8>>;

/// How often a runner measures the cache directory again although its own count says it is
/// within its bound: other runners sharing the state directory add entries it does not
/// count.
const RESCAN: Duration = Duration::from_secs(60);

/// What an entry costs the cache's bound: its size in 4 KiB blocks, at least one, so that
/// empty or tiny entries cannot make the directory grow without bound either.
fn charge(len: u64) -> u64 {
    len.div_ceil(4096).max(1) * 4096
}

/// A cache temp file older than this was left by a runner that died while writing it.
const STALE_TMP: Duration = Duration::from_secs(600);

/// The cache's size and evictions, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Bytes the entries hold, counted as the bound counts them (4 KiB blocks).
    pub bytes: u64,
    /// Entries removed to keep the bound since this runner started.
    pub evictions: u64,
    /// The bound.
    pub max_bytes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    bytes: AtomicU64,
    measured: AtomicBool,
    evictions: AtomicU64,
    /// When the directory was last measured, in seconds since the epoch.
    scanned_at: AtomicU64,
    /// Makes each put's temporary file name its own within this process.
    puts: AtomicU64,
}

fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The content-addressed cache: `<dir>/<sha256 hex>`, read-only files, at most `max_bytes`
/// of them; an entry's modification time is when a job last used it (the LRU order,
/// shared by every runner using the same state directory).
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
    max_bytes: u64,
    counters: Arc<Counters>,
}

impl Cache {
    pub fn new(dir: PathBuf, max_bytes: u64) -> Cache {
        Cache {
            dir,
            max_bytes,
            counters: Arc::default(),
        }
    }

    /// The bytes for a digest, only if they still hash to it; a corrupt entry is removed.
    /// A hit makes the entry the most recently used.
    pub fn get(&self, digest: &[u8; 32]) -> Option<Vec<u8>> {
        let path = self.dir.join(hex::encode(digest));
        let mut file = crate::state_dir::open_file(&path).ok()?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).ok()?;
        if &sha256(&bytes) == digest {
            let _ = file.set_modified(SystemTime::now());
            Some(bytes)
        } else {
            tracing::warn!(path = %path.display(), "cache entry does not match its name; removed");
            let _ = std::fs::remove_file(&path);
            None
        }
    }

    /// Size and evictions; the size is measured on first use, then kept by `put`.
    pub fn stats(&self) -> CacheStats {
        if !self.counters.measured.load(Ordering::Relaxed) {
            self.enforce_bound();
        }
        CacheStats {
            bytes: self.counters.bytes.load(Ordering::Relaxed),
            evictions: self.counters.evictions.load(Ordering::Relaxed),
            max_bytes: self.max_bytes,
        }
    }

    /// Keeps verified bytes for later jobs, then evicts the least recently used entries
    /// past the bound. Best effort: a failure only costs a refetch. The directory is
    /// measured again only when this runner's count of it passes the bound, or a minute
    /// after it was last measured, not at every put: with many small entries a full scan
    /// per input made each job read the whole directory once for every input it brought.
    pub fn put(&self, digest: &[u8; 32], bytes: &[u8]) {
        let name = hex::encode(digest);
        let path = self.dir.join(&name);
        if let Ok(f) = crate::state_dir::open_file(&path) {
            let _ = f.set_modified(SystemTime::now());
            return;
        }
        let cost = charge(bytes.len() as u64);
        if self.max_bytes < cost {
            return;
        }
        if std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        // Two puts of the same bytes at once (two jobs bringing them) each write a file of
        // their own; the second rename replaces the first's with the same bytes.
        // Runners sharing the state directory may have the same pid (each pid 1 of its own
        // namespace) and count their puts alike: a random part keeps their names apart.
        let n = self.counters.puts.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!(
            ".{name}.{}.{n}.{:08x}.tmp",
            std::process::id(),
            crate::sandbox::random_u32()
        ));
        // A new file, never one that is there, never through a link; made read-only
        // through its own descriptor.
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&tmp);
        // A file already at the name is another writer's: neither used nor removed.
        let added = made.is_ok_and(|mut file| {
            let ok = file
                .write_all(bytes)
                .and_then(|()| file.sync_all())
                .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(0o444)))
                .is_ok();
            drop(file);
            let added = ok && std::fs::rename(&tmp, &path).is_ok();
            if !added {
                let _ = std::fs::remove_file(&tmp);
            }
            added
        });
        if added && self.counters.measured.load(Ordering::Relaxed) {
            let counted = self.counters.bytes.fetch_add(cost, Ordering::Relaxed) + cost;
            let since = epoch_secs(SystemTime::now())
                .saturating_sub(self.counters.scanned_at.load(Ordering::Relaxed));
            if counted <= self.max_bytes && since < RESCAN.as_secs() {
                return;
            }
        }
        self.enforce_bound();
    }

    /// Measures the cache and removes least recently used entries until it is within its
    /// bound (and temp files that a dead runner left). Other runners sharing the state
    /// directory may remove entries at the same time: a vanished file is simply gone.
    fn enforce_bound(&self) {
        let now = SystemTime::now();
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            self.counters.bytes.store(0, Ordering::Relaxed);
            self.counters
                .scanned_at
                .store(epoch_secs(now), Ordering::Relaxed);
            self.counters.measured.store(true, Ordering::Relaxed);
            return;
        };
        let mut entries: Vec<(SystemTime, PathBuf, u64)> = Vec::new();
        for e in dir.filter_map(Result::ok) {
            let Ok(meta) = e.metadata() else { continue };
            let name = e.file_name();
            let name = name.to_string_lossy();
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            let is_entry = name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit());
            if !is_entry {
                let stale = now.duration_since(modified).unwrap_or_default() > STALE_TMP;
                if meta.is_file() && name.ends_with(".tmp") && stale {
                    let _ = std::fs::remove_file(e.path());
                }
                continue;
            }
            if meta.is_file() {
                entries.push((modified, e.path(), charge(meta.len())));
            }
        }
        entries.sort();
        let mut total: u64 = entries.iter().map(|(_, _, c)| c).sum();
        for (_, path, cost) in &entries {
            if total <= self.max_bytes {
                break;
            }
            match std::fs::remove_file(path) {
                Ok(()) => {
                    self.counters.evictions.fetch_add(1, Ordering::Relaxed);
                    total -= cost;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => total -= cost,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot evict a cache entry");
                }
            }
        }
        self.counters.bytes.store(total, Ordering::Relaxed);
        self.counters
            .scanned_at
            .store(epoch_secs(now), Ordering::Relaxed);
        self.counters.measured.store(true, Ordering::Relaxed);
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

/// What the cache holds of the job's inputs that carry no bytes, each read and verified
/// once, for [`gather`] (and for the Media fetch, which skips them). It stops once the
/// bytes carried and found pass the inputs' total bound: the job fails on that bound
/// whatever the rest would hold.
pub fn cached(job: &ValidJob, cache: &Cache) -> Fetched {
    let mut found = Fetched::new();
    let mut total: usize = job
        .inputs
        .iter()
        .filter_map(|i| i.content.as_ref().map(Vec::len))
        .sum();
    for input in &job.inputs {
        if total > crate::job::MAX_INPUTS_TOTAL_BYTES {
            break;
        }
        if input.content.is_some() || found.contains_key(&input.sha256) {
            continue;
        }
        if let Some(bytes) = cache.get(&input.sha256) {
            total += bytes.len();
            found.insert(input.sha256, bytes);
        }
    }
    found
}

/// The bytes of each of the job's inputs (carried, found in the cache or fetched), each
/// verified against its sha256 and checked. New bytes (carried by the job or fetched for
/// it) go into the cache only after every input passed, so a job that ends `integrity` or
/// `rejected` leaves nothing there.
pub fn gather(
    job: &ValidJob,
    cache: &Cache,
    found: &Fetched,
) -> Result<Vec<(String, Vec<u8>)>, InputError> {
    // The bound first: a job whose carried and found bytes already pass it breaks a rule
    // (`rejected`), whichever of its inputs comes first and whether or not another one's
    // bytes are missing.
    over_bound(job, found)?;
    let mut out = Vec::with_capacity(job.inputs.len());
    let mut total = 0usize;
    for input in &job.inputs {
        let bytes = bytes_of(input, cache, found)?;
        verify(input, &bytes)?;
        check_input_content(&input.name, &bytes).map_err(InputError::Content)?;
        total += bytes.len();
        if total > crate::job::MAX_INPUTS_TOTAL_BYTES {
            return Err(InputError::Content(format!(
                "inputs hold more than {} bytes (1 MiB) in all",
                crate::job::MAX_INPUTS_TOTAL_BYTES
            )));
        }
        out.push((input.name.clone(), bytes));
    }
    for (input, (_, bytes)) in job.inputs.iter().zip(&out) {
        if input.content.is_some() || found.contains_key(&input.sha256) {
            cache.put(&input.sha256, bytes);
        }
    }
    Ok(out)
}

/// The bytes the job carries and `found` holds for it, counted per input as the bound
/// counts them.
pub fn held_bytes(job: &ValidJob, found: &Fetched) -> usize {
    job.inputs
        .iter()
        .filter_map(|i| i.content.as_ref().or_else(|| found.get(&i.sha256)))
        .map(Vec::len)
        .sum()
}

/// The inputs' bound broken by what the job carries and `found` holds already.
pub fn over_bound(job: &ValidJob, found: &Fetched) -> Result<(), InputError> {
    let held = held_bytes(job, found);
    if held > crate::job::MAX_INPUTS_TOTAL_BYTES {
        return Err(InputError::Content(format!(
            "inputs hold more than {} bytes (1 MiB) in all (those carried and cached hold {held})",
            crate::job::MAX_INPUTS_TOTAL_BYTES
        )));
    }
    Ok(())
}

fn bytes_of(input: &ValidInput, cache: &Cache, found: &Fetched) -> Result<Vec<u8>, InputError> {
    if let Some(b) = &input.content {
        return Ok(b.clone());
    }
    if let Some(b) = found.get(&input.sha256) {
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

    fn set_age(cache_dir: &Path, digest: &[u8; 32], secs_ago: u64) {
        let f = std::fs::File::open(cache_dir.join(hex::encode(digest))).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
            .unwrap();
    }

    /// Another runner's file in the making, at the name this runner's first put would have
    /// had were names drawn from the pid and a count alone (runners that are each pid 1 of
    /// their own namespace share the state directory): neither in the way nor removed.
    #[test]
    fn another_writers_file_in_the_making_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        std::fs::create_dir(&dir).unwrap();
        let cache = Cache::new(dir.clone(), 10 * 4096);
        let bytes = b"bytes both runners bring".to_vec();
        let digest = sha256(&bytes);
        let theirs = dir.join(format!(
            ".{}.{}.0.tmp",
            hex::encode(digest),
            std::process::id()
        ));
        std::fs::write(&theirs, b"half written").unwrap();
        cache.put(&digest, &bytes);
        assert_eq!(cache.get(&digest), Some(bytes), "the entry is made");
        assert_eq!(std::fs::read(&theirs).unwrap(), b"half written");
    }

    #[test]
    fn a_cache_entry_is_never_read_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        std::fs::create_dir(&dir).unwrap();
        let cache = Cache::new(dir.clone(), 10 * 4096);
        let bytes = b"the real bytes".to_vec();
        let digest = sha256(&bytes);
        // A link named as the entry, to a file holding those very bytes elsewhere.
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::write(&elsewhere, &bytes).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join(hex::encode(digest))).unwrap();
        assert_eq!(cache.get(&digest), None, "read through a link");
    }

    #[test]
    fn the_cache_keeps_its_bound_and_evicts_the_least_recently_used() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        // Room for three 4 KiB blocks.
        let cache = Cache::new(dir.clone(), 3 * 4096);
        let (a, b, c, d) = (
            b"a".as_slice(),
            b"b".as_slice(),
            b"c".as_slice(),
            b"d".as_slice(),
        );
        for (i, bytes) in [a, b, c].into_iter().enumerate() {
            cache.put(&sha256(bytes), bytes);
            set_age(&dir, &sha256(bytes), 300 - i as u64 * 100);
        }
        assert_eq!(cache.stats().bytes, 3 * 4096);
        assert_eq!(cache.stats().evictions, 0);
        // `a` is the oldest, but a job uses it now: `b` becomes the least recently used.
        assert_eq!(cache.get(&sha256(a)).unwrap(), a);
        cache.put(&sha256(d), d);
        assert!(cache.get(&sha256(b)).is_none(), "b was evicted");
        for kept in [a, c, d] {
            assert_eq!(cache.get(&sha256(kept)).unwrap(), kept);
        }
        let s = cache.stats();
        assert_eq!((s.bytes, s.evictions, s.max_bytes), (3 * 4096, 1, 3 * 4096));
        // An entry larger than the whole bound is never kept; 0 keeps nothing.
        let big = vec![b'x'; 4 * 4096];
        cache.put(&sha256(&big), &big);
        assert!(cache.get(&sha256(&big)).is_none());
        let none = Cache::new(tmp.path().join("none"), 0);
        none.put(&sha256(a), a);
        assert!(none.get(&sha256(a)).is_none());
        assert_eq!(none.stats().bytes, 0);
    }

    #[test]
    fn many_tiny_entries_count_against_the_bound() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path().join("cache"), 10 * 4096);
        for i in 0..50u32 {
            let bytes = i.to_string();
            cache.put(&sha256(bytes.as_bytes()), bytes.as_bytes());
        }
        let entries = std::fs::read_dir(tmp.path().join("cache")).unwrap().count();
        assert_eq!(entries, 10);
        assert_eq!(cache.stats().evictions, 40);
    }

    #[test]
    fn a_job_with_a_bad_input_leaves_nothing_in_the_cache() {
        use base64::Engine as _;
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path().join("cache"), 1 << 20);
        let good = vec![b'g'; 640 * 1024];
        let input = |name: &str, bytes: &[u8], sha: &[u8]| {
            serde_json::json!({
                "name": name,
                "sha256": hex::encode(sha256(sha)),
                "content_base64": base64::engine::general_purpose::STANDARD.encode(bytes),
            })
        };
        let job = job_with_inputs;
        // The good data file comes first, the entry's bytes do not match its sha256.
        let bad = job(vec![
            input("data.txt", &good, &good),
            input("t.js", b"1", b"2"),
        ]);
        let e = gather(&bad, &cache, &Fetched::new()).unwrap_err();
        assert!(matches!(e, InputError::Mismatch { .. }), "{e}");
        // Bytes fetched from Media for a job that then fails are not kept either.
        let fetched_bytes = b"fetched".to_vec();
        let mut fetched = Fetched::new();
        fetched.insert(sha256(&fetched_bytes), fetched_bytes.clone());
        let from_media = serde_json::json!({
            "name": "media.txt",
            "media_id": "med_1",
            "sha256": hex::encode(sha256(&fetched_bytes)),
        });
        let bad = job(vec![from_media.clone(), input("t.js", b"1", b"2")]);
        let _ = gather(&bad, &cache, &fetched).unwrap_err();
        let left = std::fs::read_dir(tmp.path().join("cache")).map_or(0, |d| d.count());
        assert_eq!(left, 0, "nothing of a job that ends integrity is cached");
        // A job whose inputs all pass keeps them.
        let ok = job(vec![
            input("data.txt", &good, &good),
            from_media,
            input("t.js", b"1", b"1"),
        ]);
        gather(&ok, &cache, &fetched).unwrap();
        assert_eq!(cache.get(&sha256(&good)).unwrap(), good);
        assert_eq!(cache.get(&sha256(&fetched_bytes)).unwrap(), fetched_bytes);
        assert_eq!(cache.get(&sha256(b"1")).unwrap(), b"1");
    }

    /// A job of the test tool with these inputs (JSON, as a job carries them).
    fn job_with_inputs(inputs: Vec<serde_json::Value>) -> ValidJob {
        let v = serde_json::json!({
            "job_id": "cache-test",
            "class": "function",
            "artifact": crate::job::ARTIFACT,
            "args": {"tool": "probe", "entry": "t.js", "input": {}},
            "inputs": inputs,
        });
        crate::job::parse_job_value(v, &crate::job::Bounds::default()).unwrap()
    }

    /// A job whose inputs `(name, the bytes whose sha256 it names)` carry no bytes: the
    /// cache (or Media) must have them.
    fn job_of(inputs: &[(&str, &[u8])]) -> ValidJob {
        job_with_inputs(
            inputs
                .iter()
                .map(|(name, named)| {
                    serde_json::json!({"name": name, "sha256": hex::encode(sha256(named))})
                })
                .collect(),
        )
    }

    #[test]
    fn inputs_past_the_bound_are_rejected_before_a_missing_one_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path().join("cache"), 4 << 20);
        let (a, b) = (vec![b'a'; 600 << 10], vec![b'b'; 600 << 10]);
        cache.put(&sha256(&a), &a);
        cache.put(&sha256(&b), &b);
        // The input nobody holds comes first.
        let job = job_of(&[("t.js", b"nowhere"), ("a.txt", &a), ("b.txt", &b)]);
        let found = cached(&job, &cache);
        let e = gather(&job, &cache, &found).unwrap_err();
        assert!(
            matches!(&e, InputError::Content(m) if m.contains("1 MiB")),
            "{e}"
        );
        // Within the bound, the missing one is what is wrong.
        let job = job_of(&[("t.js", b"nowhere"), ("a.txt", &a)]);
        let e = gather(&job, &cache, &cached(&job, &cache)).unwrap_err();
        assert!(matches!(e, InputError::Missing { .. }), "{e}");
    }

    #[test]
    fn bytes_found_in_the_cache_serve_the_job_after_their_entry_is_evicted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        let cache = Cache::new(dir.clone(), 1 << 20);
        cache.put(&sha256(b"1"), b"1");
        let job = job_of(&[("t.js", b"1"), ("gone.js", b"2")]);
        let found = cached(&job, &cache);
        assert_eq!(found.len(), 1, "only what the cache has");
        // Another job's put (or another runner) evicts the entry before the job's files
        // are gathered: what was read is what the job gets.
        std::fs::remove_file(dir.join(hex::encode(sha256(b"1")))).unwrap();
        let job = job_of(&[("t.js", b"1")]);
        let files = gather(&job, &cache, &found).unwrap();
        assert_eq!(files, vec![("t.js".to_string(), b"1".to_vec())]);
    }

    #[test]
    fn a_put_within_the_bound_does_not_measure_the_directory_again() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        // Room for three 4 KiB blocks.
        let cache = Cache::new(dir.clone(), 3 * 4096);
        cache.put(&sha256(b"a"), b"a");
        assert_eq!(cache.stats().bytes, 4096);
        // A temporary file a dead runner left: only a measure of the directory removes it.
        let stale = dir.join(".dead.1.0.tmp");
        std::fs::write(&stale, b"x").unwrap();
        std::fs::File::open(&stale)
            .unwrap()
            .set_modified(SystemTime::now() - STALE_TMP * 2)
            .unwrap();
        cache.put(&sha256(b"b"), b"b");
        assert!(stale.exists(), "a put within the bound reads no directory");
        assert_eq!(cache.stats().bytes, 2 * 4096, "counted, not measured");
        // Past the bound by this runner's own count: measured, stale file gone, and the
        // least recently used entry evicted.
        set_age(&dir, &sha256(b"a"), 100);
        cache.put(&sha256(b"c"), b"c");
        cache.put(&sha256(b"d"), b"d");
        assert!(!stale.exists(), "measured once past the bound");
        assert!(cache.get(&sha256(b"a")).is_none());
        assert_eq!(cache.stats().bytes, 3 * 4096);
        assert_eq!(cache.stats().evictions, 1);
        // A minute after the last measure, a put measures again whatever the count says:
        // the entries of other runners sharing the folder count too.
        let other = Cache::new(dir.clone(), 1 << 20);
        other.put(&sha256(b"e"), b"e");
        cache.counters.scanned_at.store(
            epoch_secs(SystemTime::now()) - RESCAN.as_secs(),
            Ordering::Relaxed,
        );
        cache.put(&sha256(b"f"), b"f");
        assert_eq!(cache.stats().bytes, 3 * 4096);
        assert_eq!(cache.stats().evictions, 3);
    }

    #[test]
    fn cache_verifies_on_read() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path().join("cache"), 1 << 20);
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
