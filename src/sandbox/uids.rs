//! Job uids that no two live jobs share, across every runner on the host.
//!
//! Each uid of the configured range has a lock file in a host-wide directory
//! (`/run/openvibe-skill-runner/uids/<uid>`). A job holds an exclusive `flock` on its
//! uid's file for its whole life, from before its cgroup is made until after every process
//! of it is gone and the cgroup is removed. The daemon and every CLI run take uids the same
//! way, so a uid is never handed to two live jobs, whatever `sandbox_uid_base` each runner
//! has (the files are named by the uid itself, so overlapping ranges are covered too).
//! While it holds the lock, a job's file holds its name (its cgroup's and folder's), which
//! a daemon's recovery reads to leave alone the live jobs of every runner on the host.
//!
//! Why `flock` on files that are never removed: the kernel drops the lock when the holder's
//! descriptor closes, including when the runner is killed, so a stale lock cannot exist
//! and nothing has to be cleaned up (when a runner dies its jobs die with it: every stage of
//! the sandbox has a parent-death SIGKILL). Removing a file would open a race (one runner
//! locks the old inode, another creates and locks a new one under the same name). The
//! lowest free uid is taken, so the directory holds about as many files as jobs ever ran
//! at once on the host, not one per uid of the range.
//!
//! A uid is reused after its job ended, as a pid is: nothing it owned survives the job (no
//! writable file anywhere, its IPC objects die with its ipc namespace, keyrings are out of
//! seccomp's reach, every process is killed through the cgroup before the lock is let go).

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The host-wide directory of uid locks, shared by every runner on the host.
pub const LOCK_DIR: &str = "/run/openvibe-skill-runner/uids";

/// The lowest uid a job may get: below are the 16-bit ids accounts, system users, systemd's
/// dynamic users and `nobody` (65534) use.
pub const MIN_UID: u64 = 65_536;
/// The highest uid a job may get: some programs read uid_t as signed, and (uid_t)-1 means
/// "unchanged" to setresuid, so uids stay below 2^31.
pub const MAX_UID: u64 = 2_147_483_646;

/// Why `sandbox_uid_base` and `sandbox_uid_count` cannot be used, if they cannot.
pub fn range_problem(base: u32, count: u32) -> Option<String> {
    let first = u64::from(base);
    let last = first + u64::from(count.max(1)) - 1;
    if count == 0 {
        return Some(
            "runner.sandbox_uid_count is 0: jobs need at least one uid (the default is 65536)"
                .into(),
        );
    }
    if first < MIN_UID {
        return Some(format!(
            "runner.sandbox_uid_base {base} is below {MIN_UID}: those ids belong to accounts, \
             system users and nobody; use an id no account uses, such as 2100000000 (the default)"
        ));
    }
    if last > MAX_UID {
        return Some(format!(
            "runner.sandbox_uid_base {base} + runner.sandbox_uid_count {count} reaches uid {last}, \
             above {MAX_UID}: uids from 2^31 up are read as negative by some programs and \
             4294967295 means \"unchanged\" to setresuid; lower the base or the count"
        ));
    }
    None
}

/// The uids of one runner's range and where their locks live.
#[derive(Debug)]
pub struct UidPool {
    dir: PathBuf,
    base: u32,
    count: u32,
}

/// A uid held for one job; the lock goes when this is dropped.
#[derive(Debug)]
pub struct UidLease {
    uid: u32,
    _lock: Flock<File>,
}

impl UidLease {
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// Writes `name` (the job's cgroup and directory) into the lock file the lease holds,
    /// before either is made: a daemon's recovery leaves alone what a live lease names
    /// ([`live_names`]), whichever runner holds it and in whichever pid namespace, where
    /// the pid in the name tells nothing.
    fn record(&self, name: &str) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt as _;
        self._lock.set_len(0)?;
        self._lock.write_all_at(name.as_bytes(), 0)
    }

    /// From the start of the job's processes: the uid stays taken unless
    /// [`KeptUid::release`] is called once they are known to be gone.
    pub fn keep_until_released(self) -> KeptUid {
        KeptUid(Some(self))
    }
}

/// The lease of a uid that a job's processes may run as. Let go only by
/// [`KeptUid::release`]; dropped any other way (an error path, a panic unwinding, a warm
/// sandbox nobody discarded) its lock is kept for as long as this runner lives, so the uid
/// is never handed to another job while processes may still run as it. Fails closed: the
/// cost of a mistake is one uid of the range, not two jobs sharing one.
#[derive(Debug)]
pub struct KeptUid(Option<UidLease>);

impl KeptUid {
    /// Every process of the job is gone (killed through its cgroup, the cgroup removed):
    /// the uid is free for the next job.
    pub fn release(mut self) {
        drop(self.0.take());
    }
}

impl Drop for KeptUid {
    fn drop(&mut self) {
        if let Some(lease) = self.0.take() {
            tracing::warn!(
                uid = lease.uid,
                "a job's processes may still run as this uid: it stays taken until the runner exits"
            );
            // The descriptor stays open, so the lock stays held (the kernel lets it go when
            // the runner exits).
            std::mem::forget(lease);
        }
    }
}

impl UidPool {
    /// The pool of `count` uids from `base`, locked under `dir` (made 0700 if missing; it
    /// must be a root-owned directory that no one else can write).
    pub fn open(dir: &Path, base: u32, count: u32) -> Result<UidPool, String> {
        if let Some(problem) = range_problem(base, count) {
            return Err(problem);
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| {
                format!(
                    "cannot create the uid lock directory {}: {e}",
                    dir.display()
                )
            })?;
        let meta = std::fs::symlink_metadata(dir)
            .map_err(|e| format!("the uid lock directory {}: {e}", dir.display()))?;
        if !meta.is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "the uid lock directory {} must be a directory owned by root that only root \
                 can write; remove it and let the runner make it again",
                dir.display()
            ));
        }
        Ok(UidPool {
            dir: dir.to_path_buf(),
            base,
            count,
        })
    }

    /// A uid of the range that no live job of any runner holds, held until the lease is
    /// dropped: the first free one from a random place among the range's first
    /// [`LEASE_SPREAD`]. Taking the lowest free uid would tell each job how many others
    /// held one when it started (`process.getuid()` counts the host's jobs); the spread
    /// keeps the lock folder to about that many files.
    ///
    /// The lease records `name`, the job's cgroup and directory, which are made after it
    /// ([`UidLease::record`]).
    pub fn lease(&self, name: &str) -> Result<UidLease, String> {
        let lease = self.lease_from(super::random_u32() % self.count.clamp(1, LEASE_SPREAD))?;
        lease.record(name).map_err(|e| {
            format!(
                "cannot record job {name} in its uid lock {}: {e}",
                self.dir.join(lease.uid.to_string()).display()
            )
        })?;
        Ok(lease)
    }

    /// The first free uid from `start` into the range (then from its beginning).
    fn lease_from(&self, start: u32) -> Result<UidLease, String> {
        for i in 0..self.count {
            let uid = self.base + (start + i) % self.count;
            let path = self.dir.join(uid.to_string());
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
                .map_err(|e| format!("cannot open the uid lock {}: {e}", path.display()))?;
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(UidLease { uid, _lock: lock }),
                Err((_, Errno::EWOULDBLOCK)) => continue,
                Err((_, e)) => {
                    return Err(format!("cannot lock the uid lock {}: {e}", path.display()))
                }
            }
        }
        Err(format!(
            "all {} sandbox uids from {} are held by running jobs on this host; raise \
             runner.sandbox_uid_count or run fewer jobs at once",
            self.count, self.base
        ))
    }
}

/// The job names that live leases record, any runner's ([`UidLease::record`]): the lock
/// files in `dir` that a holder has locked, read without taking them (a free one is locked
/// for an instant and let go: a lease taken then moves on to the next uid). A missing
/// directory holds none. Read after listing what may be left over: a job's name is in its
/// lock before its cgroup or directory exists.
pub fn live_names(dir: &Path) -> Result<BTreeSet<String>, String> {
    use std::io::Read as _;
    let mut live = BTreeSet::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(live),
        Err(e) => {
            return Err(format!(
                "cannot list the uid locks in {}: {e}",
                dir.display()
            ))
        }
    };
    for entry in entries {
        let entry =
            entry.map_err(|e| format!("cannot list the uid locks in {}: {e}", dir.display()))?;
        if entry
            .file_name()
            .to_str()
            .is_none_or(|n| n.parse::<u32>().is_err())
        {
            continue;
        }
        let path = entry.path();
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot open the uid lock {}: {e}", path.display())),
        };
        match Flock::lock(file, FlockArg::LockSharedNonblock) {
            Ok(_free) => continue,
            Err((file, Errno::EWOULDBLOCK)) => {
                let mut name = String::new();
                // A name is at most a cgroup name's 255 bytes.
                let _ = file.take(512).read_to_string(&mut name);
                let name = name.trim();
                if !name.is_empty() {
                    live.insert(name.to_string());
                }
            }
            Err((_, e)) => return Err(format!("cannot test the uid lock {}: {e}", path.display())),
        }
    }
    Ok(live)
}

/// How many of the range's uids a lease may start from (see [`UidPool::lease`]).
pub const LEASE_SPREAD: u32 = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(dir: &Path, base: u32, count: u32) -> UidPool {
        UidPool::open(dir, base, count).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn live_leases_never_share_a_uid_and_a_freed_uid_is_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("uids");
        let a = pool(&dir, 2_100_000_000, 3);
        // A second runner with the same range, and a third whose range overlaps.
        let b = pool(&dir, 2_100_000_000, 3);
        let c = pool(&dir, 2_099_999_999, 4);
        let l1 = a.lease_from(0).unwrap();
        let l2 = b.lease_from(0).unwrap();
        let l3 = c.lease_from(0).unwrap();
        assert_eq!(l1.uid(), 2_100_000_000);
        assert_eq!(l2.uid(), 2_100_000_001);
        assert_eq!(l3.uid(), 2_099_999_999);
        let l4 = c.lease_from(0).unwrap();
        assert_eq!(l4.uid(), 2_100_000_002, "c skips what a and b hold");
        let err = a.lease_from(0).unwrap_err();
        assert!(err.contains("sandbox_uid_count"), "{err}");
        drop(l2);
        assert_eq!(a.lease_from(0).unwrap().uid(), 2_100_000_001);
        drop((l1, l3, l4));
    }

    #[test]
    fn a_kept_uid_is_free_again_only_when_released() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("uids");
        let p = pool(&dir, 2_100_000_000, 3);
        // Released: the same uid is the next one handed out.
        let lease = p.lease_from(0).unwrap();
        assert_eq!(lease.uid(), 2_100_000_000);
        lease.keep_until_released().release();
        assert_eq!(p.lease_from(0).unwrap().uid(), 2_100_000_000);
        // Dropped without release (an error path): the uid stays taken.
        drop(p.lease_from(0).unwrap().keep_until_released());
        assert_eq!(p.lease_from(0).unwrap().uid(), 2_100_000_001);
        // Dropped by a panic unwinding (a removal task that panicked): taken as well.
        let unwound = std::panic::catch_unwind(|| {
            let lease = p.lease_from(0).unwrap();
            assert_eq!(lease.uid(), 2_100_000_001);
            let _kept = lease.keep_until_released();
            panic!("a removal that panicked");
        });
        assert!(unwound.is_err());
        let next = p.lease_from(0).unwrap();
        assert_eq!(next.uid(), 2_100_000_002, "both kept uids stay taken");
        let err = p.lease_from(0).unwrap_err();
        assert!(err.contains("sandbox_uid_count"), "{err}");
    }

    #[test]
    fn a_lock_held_by_another_process_is_respected_and_freed_when_it_dies() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("uids");
        let p = pool(&dir, 2_100_000_000, 2);
        drop(p.lease_from(0).unwrap());
        // Another process holds the first uid's lock: a shell locks it with flock(1) on
        // its descriptor 9 and becomes `sleep`, which keeps the descriptor and the lock.
        let mut holder = std::process::Command::new("sh")
            .args(["-c", "exec 9>\"$1\" && flock -x 9 && exec sleep 30", "sh"])
            .arg(dir.join("2100000000"))
            .spawn()
            .expect("sh");
        let mut held = false;
        for _ in 0..100 {
            let l = p.lease_from(0).unwrap();
            if l.uid() == 2_100_000_001 {
                held = true;
                break;
            }
            drop(l);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(held, "the other process's lock was never seen");
        holder.kill().expect("kill the holder");
        holder.wait().expect("wait for the holder");
        let mut freed = false;
        for _ in 0..100 {
            if p.lease_from(0).unwrap().uid() == 2_100_000_000 {
                freed = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(freed, "a dead holder's lock is free again");
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("uids");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        if !nix::unistd::geteuid().is_root() {
            crate::test_skips::skipped(
                "a_directory_others_can_write_is_refused",
                "the pool's directory check runs as root",
            );
            return;
        }
        let err = UidPool::open(&dir, 2_100_000_000, 1).unwrap_err();
        assert!(err.contains("only root"), "{err}");
    }

    #[test]
    fn ranges_are_checked() {
        assert_eq!(range_problem(2_100_000_000, 65_536), None);
        assert_eq!(range_problem(65_536, 1), None);
        assert_eq!(range_problem(2_147_483_646, 1), None);
        for (base, count, says) in [
            (2_100_000_000, 0, "sandbox_uid_count is 0"),
            (0, 10, "below 65536"),
            (65_535, 1, "below 65536"),
            (1000, 1, "below 65536"),
            (2_147_483_646, 2, "above 2147483646"),
            (4_294_967_295, 1, "above 2147483646"),
            (4_294_900_000, 65_536, "above 2147483646"),
            (2_100_000_000, u32::MAX, "above 2147483646"),
        ] {
            let p = range_problem(base, count).unwrap_or_default();
            assert!(p.contains(says), "{base}+{count}: {p:?}");
        }
    }

    /// The uid a job gets does not count the uids others hold: with three held, leases
    /// start at random places among the first LEASE_SPREAD, never on a held one.
    #[test]
    fn a_lease_does_not_tell_how_many_are_held() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("uids");
        let p = UidPool::open(&dir, 2_100_000_000, 65_536).unwrap_or_else(|e| panic!("{e}"));
        let held: Vec<UidLease> = (0..3).map(|_| p.lease_from(0).unwrap()).collect();
        let held_uids: Vec<u32> = held.iter().map(UidLease::uid).collect();
        assert_eq!(held_uids, [2_100_000_000, 2_100_000_001, 2_100_000_002]);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..64 {
            let l = p.lease("job.1.0").unwrap();
            assert!(!held_uids.contains(&l.uid()), "a held uid was leased again");
            assert!(l.uid() < 2_100_000_000 + LEASE_SPREAD + 3, "{}", l.uid());
            seen.insert(l.uid());
        }
        assert!(
            seen.len() > 32,
            "leases do not spread: {} distinct uids of 64",
            seen.len()
        );
        // A small range is used whole, wrapping around.
        let small_dir = tmp.path().join("small");
        let small = UidPool::open(&small_dir, 2_100_000_000, 2).unwrap_or_else(|e| panic!("{e}"));
        let a = small.lease("job.1.0").unwrap();
        let b = small.lease("job.1.0").unwrap();
        assert_ne!(a.uid(), b.uid());
        assert!(small.lease("job.1.0").is_err());
    }

    /// A live lease's job name is read by a recovery from its lock file, whoever holds it
    /// (another process here); a released one's is not, and a kept one's still is.
    #[test]
    fn the_names_of_live_leases_are_read_from_their_locks() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("uids");
        assert!(live_names(&dir).unwrap().is_empty(), "no directory: none");
        let p = pool(&dir, 2_100_000_000, 4);
        let a = p.lease("a.1.0").unwrap();
        let b = p.lease("b.1.7").unwrap();
        let names = |d: &Path| live_names(d).unwrap().into_iter().collect::<Vec<_>>();
        assert_eq!(names(&dir), ["a.1.0", "b.1.7"]);
        // A uid taken again records its new job's name, not the last one's.
        let uid_a = a.uid();
        drop(a);
        assert_eq!(names(&dir), ["b.1.7"], "a released lease names nothing");
        let again = p.lease_from(uid_a - 2_100_000_000).unwrap();
        assert_eq!(again.uid(), uid_a);
        again.record("c.2.0").unwrap();
        assert_eq!(names(&dir), ["b.1.7", "c.2.0"]);
        drop(again.keep_until_released());
        drop(b);
        assert_eq!(names(&dir), ["c.2.0"], "a kept lease still names its job");
        // Held by another process: a shell locks a file no lease of this process holds
        // (the kept one's uid was drawn at random) and becomes `sleep`.
        let other = (2_100_000_000..2_100_000_004)
            .find(|&uid| uid != uid_a)
            .map(|uid| dir.join(uid.to_string()))
            .unwrap();
        std::fs::write(&other, "d.1.0").unwrap();
        let mut holder = std::process::Command::new("sh")
            .args(["-c", "exec 9<\"$1\" && flock -x 9 && exec sleep 30", "sh"])
            .arg(&other)
            .spawn()
            .expect("sh");
        let mut seen = false;
        for _ in 0..100 {
            if names(&dir).contains(&"d.1.0".to_string()) {
                seen = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        holder.kill().expect("kill the holder");
        holder.wait().expect("wait for the holder");
        assert!(seen, "another process's lease was never read");
        // flock(1), the shell's child, may still be exiting with the descriptor.
        let mut last = names(&dir);
        for _ in 0..100 {
            if last == ["c.2.0"] {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            last = names(&dir);
        }
        assert_eq!(last, ["c.2.0"], "its lock died with it");
    }
}
