//! The journal: every accepted job and its terminal result, durable (SQLite in WAL mode,
//! `synchronous=FULL`: a commit is on disk when the call returns), under the state dir.
//!
//! A row is written when the daemon accepts a job (state `queued`) and completed when the
//! job ends (state `done`, with its result), each before the caller is answered. A restart
//! finds the rows that never reached `done` and ends them `internal`.
//!
//! Every write first checks that the file at the journal's path is still the one the
//! connection writes, and checks again after its commit: a journal file removed while the
//! daemon runs (a cleaner, a mistaken `rm`) is written back at once from the database the
//! daemon still holds open, so nothing acknowledged is missing after a restart. A file
//! that was replaced by another is never overwritten: writes fail until it is moved away.
//!
//! Calls block on disk I/O: from async code, call them on the blocking pool.

use crate::job::{JobResult, Net, Reason};
use rusqlite::{params, Connection, ErrorCode, OptionalExtension};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub const FILE_NAME: &str = "journal.sqlite3";

pub struct Journal {
    path: PathBuf,
    conn: Mutex<Open>,
}

/// The connection and the identity (device, inode) of the file it writes. `file` is None
/// while the connection is detached from the path (a write-back that did not finish, or
/// a reopen after a side file was removed that failed): then nothing is written until
/// the file at the path is opened again.
struct Open {
    conn: Connection,
    file: Option<(u64, u64)>,
    /// The identities of the `-wal` and `-shm` files ([`SIDES`]) as the connection made or
    /// found them; None for one that was not there to be read.
    sides: [Option<(u64, u64)>; 2],
    /// While detached after a failed reopen: the file that must still be the one at the
    /// path to be opened again (another file put there meanwhile is never adopted).
    expect: Option<(u64, u64)>,
}

/// The side files SQLite keeps beside a database in WAL mode.
const SIDES: [&str; 2] = ["-wal", "-shm"];

/// `path` with `suffix` added to its name: the journal's side files, copy and mark.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

impl Open {
    /// Opens the database at `path` ([`connect`]) and reads the identities of its files.
    fn connect(path: &Path) -> Result<Open, JournalError> {
        let conn = connect(path)?;
        let file = file_id(path).map_err(|e| {
            JournalError::new(
                Trouble::Io,
                format!("cannot inspect {}: {e}", path.display()),
            )
        })?;
        Ok(Open {
            conn,
            file: Some(file),
            sides: SIDES.map(|ext| file_id(&beside(path, ext)).ok()),
            expect: None,
        })
    }

    /// No connection to any file (one in memory, which takes no write: every write first
    /// checks `file`).
    fn detached() -> Result<Open, JournalError> {
        Ok(Open {
            conn: Connection::open_in_memory()?,
            file: None,
            sides: [None, None],
            expect: None,
        })
    }
}

impl std::ops::Deref for Open {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl std::ops::DerefMut for Open {
    fn deref_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }
}

/// What the journal knows of one job id.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// Accepted, not ended (only ever seen for the current run, or before recovery).
    Accepted,
    Done(Box<JobResult>),
    /// Ended longer ago than the retention: the result is gone, the id and how it ended
    /// are kept, so the id is never run again ([`Journal::prune`]).
    Pruned(Pruned),
}

/// What the journal keeps of a job whose result was pruned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    pub status: String,
    pub reason: Option<String>,
    pub finished_ms: i64,
}

/// An earlier daemon of this state directory, as it recorded itself when it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlierRun {
    pub pid: u32,
    /// When it recorded its start (the wall clock, ms): its process was alive then.
    pub started_ms: i64,
    /// Which process it was, on no clock that can be set: none in a journal an older
    /// runner wrote.
    pub identity: Option<ProcessIdentity>,
}

/// A process as the kernel tells it from every other since the machine booted: the boot's
/// id and the process's start in clock ticks since that boot. A pid taken again, or a
/// wall clock set back, does not make another process look like this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessIdentity {
    pub boot_id: String,
    pub start_ticks: u64,
}

impl ProcessIdentity {
    /// Process `pid`'s identity (in this pid namespace); none when it is gone or `/proc`
    /// cannot tell.
    pub fn of(pid: u32) -> Option<ProcessIdentity> {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command name, which may hold spaces and parentheses: field 3 onwards.
        let rest = &stat[stat.rfind(')')? + 1..];
        let start_ticks = rest.split_whitespace().nth(19)?.parse().ok()?;
        Some(ProcessIdentity {
            boot_id: boot_id.trim().to_string(),
            start_ticks,
        })
    }
}

/// What kind of trouble the journal is in, which decides what an operator can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trouble {
    /// The file is not a database, or not a whole one: move it aside or restore it.
    Damaged,
    /// The file system is full: free space.
    Full,
    /// The file at the path is not the one this daemon writes (replaced, or removed and
    /// not yet written back).
    Detached,
    /// A row is not in the state the call needs (a job ended twice, …): a bug, not the disk.
    Conflict,
    /// The file was removed while an earlier daemon ran, and that daemon ended before it
    /// could write it back: the answers it held are gone. Its ids would run again.
    Lost,
    /// Anything else the disk or SQLite reported.
    Io,
}

#[derive(Debug, thiserror::Error)]
#[error("journal: {message}")]
pub struct JournalError {
    pub kind: Trouble,
    message: String,
}

impl JournalError {
    fn new(kind: Trouble, message: impl Into<String>) -> JournalError {
        JournalError {
            kind,
            message: message.into(),
        }
    }

    /// A journal call whose blocking task ended without an answer (it panicked).
    pub fn task_failed() -> JournalError {
        JournalError::new(Trouble::Io, "the journal task failed")
    }

    /// What to tell an operator when the daemon cannot start over the journal at `path`:
    /// the file, what is wrong, and what to do.
    pub fn at_start(&self, path: &Path) -> String {
        let p = path.display();
        match self.kind {
            Trouble::Damaged => format!(
                "the journal {p} is damaged ({}). It holds every job's answer, so the runner \
                 does not start over it. Stop here and either put back a good copy from a \
                 backup, or move it aside with its -wal and -shm files (mv {p} {p}.damaged; \
                 mv {p}-wal {p}-wal.damaged; mv {p}-shm {p}-shm.damaged) and start again with \
                 an empty journal (the ids it held are then unknown to the runner)",
                self.message
            ),
            Trouble::Lost => format!(
                "the journal {p} was removed while the last daemon ran, and it stopped before \
                 it could write the journal back ({}). The answers it held are lost, and the \
                 runner does not start without them: a job it answered, sent again, would \
                 run again. Put back a copy of {p} from a backup and start again; or, to \
                 start with an empty journal (the ids it held are then unknown to the \
                 runner), remove {}",
                self.message,
                removed_marker(path).display()
            ),
            Trouble::Full => format!(
                "cannot write the journal {p} ({}): the file system of the state directory \
                 is full; free space there and start again",
                self.message
            ),
            _ => format!(
                "cannot use the journal {p} ({}): check that the state directory is a \
                 writable local file system owned by the runner",
                self.message
            ),
        }
    }
}

impl From<rusqlite::Error> for JournalError {
    fn from(e: rusqlite::Error) -> Self {
        let kind = match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => Trouble::Damaged,
            Some(ErrorCode::DiskFull) => Trouble::Full,
            _ => Trouble::Io,
        };
        JournalError::new(kind, e.to_string())
    }
}

impl From<serde_json::Error> for JournalError {
    fn from(e: serde_json::Error) -> Self {
        JournalError::new(
            Trouble::Damaged,
            format!("a stored result is not valid: {e}"),
        )
    }
}

/// The (device, inode) of the file at `path`.
fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// Opens the database at `path` in WAL mode with every write synchronous, checks that it
/// is whole, and makes the tables.
fn connect(path: &Path) -> Result<Connection, JournalError> {
    // Made readable by the runner alone (results hold what tools wrote); SQLite gives the
    // `-wal` and `-shm` files the database file's mode.
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        if let Err(e) = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
        {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(JournalError::new(
                    Trouble::Io,
                    format!("cannot create {}: {e}", path.display()),
                ));
            }
        }
    }
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(JournalError::new(
            Trouble::Io,
            format!(
                "{} cannot use write-ahead logging (journal_mode is {mode})",
                path.display()
            ),
        ));
    }
    // A truncated or scribbled-on file can open and fail only later, on the page a
    // query reaches: check every page now, before the runner answers from it.
    let check: String = conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0))?;
    if check != "ok" {
        return Err(JournalError::new(Trouble::Damaged, check));
    }
    conn.execute_batch(
        "PRAGMA synchronous=FULL;
         PRAGMA cache_size=-256;
         CREATE TABLE IF NOT EXISTS runs(
             run_id INTEGER PRIMARY KEY AUTOINCREMENT,
             pid INTEGER NOT NULL,
             started_ms INTEGER NOT NULL,
             ended_ms INTEGER);
         CREATE TABLE IF NOT EXISTS jobs(
             job_id TEXT PRIMARY KEY NOT NULL,
             run_id INTEGER NOT NULL,
             accepted_ms INTEGER NOT NULL,
             tool TEXT NOT NULL,
             net TEXT NOT NULL,
             state TEXT NOT NULL CHECK (state IN ('queued', 'done')),
             status TEXT,
             reason TEXT,
             result TEXT,
             finished_ms INTEGER);
         CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
         CREATE INDEX IF NOT EXISTS jobs_by_finished ON jobs(finished_ms);",
    )?;
    // A journal an older runner made has no identity columns, nor the Node a job was
    // accepted to run with: added, empty for its rows. Each on its own (one ALTER is one
    // transaction), so a start that ended between them leaves the others to the next.
    for (table, column, kind) in [
        ("runs", "boot_id", "TEXT"),
        ("runs", "start_ticks", "INTEGER"),
        ("jobs", "node", "TEXT"),
    ] {
        let has = conn
            .prepare("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")?
            .exists([table, column])?;
        if !has {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind};"))?;
        }
    }
    Ok(conn)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// The mark left beside the path while the journal is removed and not written back: the
/// database is then only in the daemon's memory (and, from its copy on, in that copy).
/// A start that finds it and no journal knows the answers were lost (see [`Trouble::Lost`]).
fn removed_marker(path: &Path) -> PathBuf {
    beside(path, ".removed")
}

/// Where a journal being written back is copied first, beside it.
fn write_back_copy(path: &Path) -> PathBuf {
    beside(path, ".write-back")
}

fn io_error(what: &str, e: std::io::Error) -> JournalError {
    let kind = if e.raw_os_error() == Some(libc::ENOSPC) {
        Trouble::Full
    } else {
        Trouble::Io
    };
    JournalError::new(kind, format!("{what}: {e}"))
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Journal {
    /// Opens (or creates) the journal at `path`.
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        // A write-back that was cut short (the daemon died between closing the removed
        // file and renaming its copy into place): the copy is the journal.
        let copy = write_back_copy(path);
        if !path.exists() && copy.is_file() {
            tracing::warn!(journal = %path.display(), "putting in place the journal copy an interrupted write-back left");
            let j = Journal {
                path: path.to_path_buf(),
                conn: Mutex::new(Open::detached()?),
            };
            j.put_copy_in_place(&copy)?;
        }
        let marker = removed_marker(path);
        if marker.exists() {
            if !path.exists() {
                return Err(JournalError::new(
                    Trouble::Lost,
                    format!("{} is there, the journal is not", marker.display()),
                ));
            }
            // Written back after all (the daemon ended before it took its mark away).
            std::fs::remove_file(&marker).map_err(|e| io_error("cannot remove the mark", e))?;
        }
        Ok(Journal {
            path: path.to_path_buf(),
            conn: Mutex::new(Open::connect(path)?),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Open> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a call holds the connection now (a test's way to know a write is under way).
    #[cfg(test)]
    pub fn busy(&self) -> bool {
        self.conn.try_lock().is_err()
    }

    /// The connection for a write, once the file at the path is known to be its own.
    fn writable(&self) -> Result<std::sync::MutexGuard<'_, Open>, JournalError> {
        let mut open = self.conn();
        self.ensure_in_place(&mut open)?;
        Ok(open)
    }

    /// After a commit: the row is in the file at the path (written back if it went).
    fn committed(&self, mut open: std::sync::MutexGuard<'_, Open>) -> Result<(), JournalError> {
        self.ensure_in_place(&mut open)
    }

    /// Checks that the file at the journal's path is the one the connection writes;
    /// writes the journal back when the file is gone. Fails, writing nothing, when another
    /// file took its place or the write-back failed.
    pub fn check_file(&self) -> Result<(), JournalError> {
        let mut open = self.conn();
        self.ensure_in_place(&mut open)
    }

    /// A small write (the header's user version, set to itself): whether the journal
    /// takes writes again after a failure.
    pub fn probe(&self) -> Result<(), JournalError> {
        let open = self.writable()?;
        let v: i64 = open.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        open.execute_batch(&format!("PRAGMA user_version = {v}"))?;
        self.committed(open)
    }

    fn ensure_in_place(&self, open: &mut Open) -> Result<(), JournalError> {
        let p = self.path.display();
        let replaced = || {
            JournalError::new(
                Trouble::Detached,
                format!(
                    "{p} is not the file this daemon journals into: another file took its \
                     place while the daemon ran. Move that file away and the daemon writes \
                     its journal back there within a second; or restart the daemon to use \
                     the new file (the answers of this run's jobs are then lost)"
                ),
            )
        };
        match (file_id(&self.path), open.file) {
            (Ok(now), Some(ours)) if now == ours => self.keep_side_files(open),
            (Ok(_), Some(_)) => Err(replaced()),
            (Ok(now), None) if open.expect.is_some_and(|ours| ours != now) => Err(replaced()),
            (Ok(_), None) if write_back_copy(&self.path).exists() => Err(replaced()),
            (Ok(_), None) => {
                // A write-back put its copy in place and could not open it, or a reopen
                // after a side file went failed: again.
                *open = Open::connect(&self.path)?;
                tracing::warn!(journal = %p, "the journal written back is open again");
                self.unmark();
                Ok(())
            }
            (Err(e), file) if e.kind() == std::io::ErrorKind::NotFound => {
                if file.is_some() {
                    tracing::error!(
                        journal = %p,
                        "the journal file was removed while the daemon ran; writing it back from the database the daemon holds open"
                    );
                }
                if let Err(e) = self.write_back(open) {
                    self.mark_removed();
                    return Err(JournalError::new(
                        e.kind,
                        format!(
                            "{p} was removed while the daemon ran and cannot be written back yet: {}",
                            e.message
                        ),
                    ));
                }
                self.unmark();
                tracing::warn!(journal = %p, "the journal is back in place, with every job it held");
                Ok(())
            }
            (Err(e), _) => Err(io_error(&format!("cannot inspect {p}"), e)),
        }
    }

    /// Keeps the `-wal` and `-shm` files beside the journal. The `-wal` holds every commit
    /// since the last checkpoint: removed on its own (a cleaner taking "temporary" files),
    /// SQLite goes on writing into the unlinked file, and a crash loses those answers. Its
    /// identity is checked, not only its name: another program that opens the database
    /// meanwhile (the `sqlite3` shell) makes a new one at the name. So when either is gone
    /// or another, everything is checkpointed into the database file (synced), the
    /// connection closed and opened again, which makes or finds both anew. Closed first:
    /// a connection's close deletes the `-wal` at the name, which must not be the new
    /// one's. A reopen that fails leaves the journal detached (writes wait; reads go to
    /// the file, which holds everything), to be opened again only while the file at the
    /// path is still this one.
    fn keep_side_files(&self, open: &mut Open) -> Result<(), JournalError> {
        let gone = SIDES.iter().zip(open.sides).find_map(|(ext, made)| {
            let made = made?;
            (file_id(&beside(&self.path, ext)).ok() != Some(made)).then_some(*ext)
        });
        let Some(ext) = gone else {
            return Ok(());
        };
        let p = self.path.display();
        tracing::error!(journal = %p, side_file = ext, "a side file of the journal was removed or replaced while the daemon ran; checkpointing the journal into its file and opening it again");
        let busy: i64 = open.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
        if busy != 0 {
            return Err(JournalError::new(
                Trouble::Io,
                format!(
                    "the {ext} file of {p} was removed or replaced and the journal could not \
                     be checkpointed into its file (it is busy); tried again within a second"
                ),
            ));
        }
        let ours = open.file;
        *open = Open::detached()?;
        open.expect = ours;
        *open = Open::connect(&self.path)?;
        tracing::warn!(journal = %p, "the journal is open again, with its side files");
        Ok(())
    }

    /// Writes the open database back to the path: a complete copy beside it (`VACUUM
    /// INTO`), synced; the old connection closed (SQLite takes no more writes into an
    /// unlinked file anyway); the old `-wal` and `-shm` files removed, which the new file
    /// would otherwise inherit as its own; the copy renamed into place; a new connection.
    /// A failure before the copy is whole changes nothing (and is tried again); after
    /// it, the copy stays beside the path until it is in place (also across a restart:
    /// see [`Journal::open`]).
    fn write_back(&self, open: &mut Open) -> Result<(), JournalError> {
        let copy = write_back_copy(&self.path);
        if open.file.is_some() {
            let _ = std::fs::remove_file(&copy);
            let copied = (|| -> Result<(), JournalError> {
                let target = copy.to_str().ok_or_else(|| {
                    JournalError::new(Trouble::Io, "the state directory's path is not UTF-8")
                })?;
                open.execute("VACUUM INTO ?1", params![target])?;
                std::fs::File::open(&copy)
                    .and_then(|f| f.sync_all())
                    .map_err(|e| io_error("cannot sync the copy", e))
            })();
            if let Err(e) = copied {
                let _ = std::fs::remove_file(&copy);
                return Err(e);
            }
            // The copy holds everything: the old connection goes, and writes wait for
            // the new one.
            *open = Open::detached()?;
        }
        self.put_copy_in_place(&copy)?;
        *open = Open::connect(&self.path)?;
        Ok(())
    }

    /// Renames a write-back copy to the journal's path, after removing the `-wal` and
    /// `-shm` files of the database it replaces.
    fn put_copy_in_place(&self, copy: &Path) -> Result<(), JournalError> {
        for ext in SIDES {
            match std::fs::remove_file(beside(&self.path, ext)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("cannot remove the old journal's side file", e)),
            }
        }
        std::fs::rename(copy, &self.path)
            .map_err(|e| io_error("cannot rename the copy into place", e))?;
        sync_dir(self.dir()).map_err(|e| io_error("cannot sync the state directory", e))
    }

    /// Whether the journal is removed and not written back (the mark is there, and no
    /// whole copy, which the next start would put in place): what it holds is then lost
    /// should the daemon end now.
    pub fn removed_unwritten(&self) -> bool {
        removed_marker(&self.path).exists() && !write_back_copy(&self.path).is_file()
    }

    /// Leaves the mark that the journal is removed and not written back, once: should the
    /// daemon end before the write-back succeeds, the next start knows the journal was
    /// lost rather than begin an empty one. An empty file: it needs no free block.
    fn mark_removed(&self) {
        let marker = removed_marker(&self.path);
        if marker.exists() {
            return;
        }
        if let Err(e) = std::fs::File::create(&marker).and_then(|_| sync_dir(self.dir())) {
            tracing::error!(journal = %self.path.display(), error = %e, "cannot leave the mark that the journal is removed; should the daemon stop before it is written back, the next start would begin an empty journal");
        }
    }

    /// Takes the mark away: the journal is back in place.
    fn unmark(&self) {
        match std::fs::remove_file(removed_marker(&self.path)) {
            Ok(()) => {
                let _ = sync_dir(self.dir());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(error = %e, "cannot remove the mark that the journal was removed")
            }
        }
    }

    /// The state directory the journal is in.
    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// Records this run; returns its id and the earlier runs (their job cgroups and
    /// directories carry their pids in their names).
    pub fn begin_run(&self, pid: u32) -> Result<(i64, Vec<EarlierRun>), JournalError> {
        let conn = self.writable()?;
        let mut stmt =
            conn.prepare("SELECT pid, started_ms, boot_id, start_ticks FROM runs ORDER BY run_id")?;
        let earlier = stmt
            .query_map([], |r| {
                let boot_id: Option<String> = r.get(2)?;
                let start_ticks: Option<i64> = r.get(3)?;
                Ok(EarlierRun {
                    pid: r.get(0)?,
                    started_ms: r.get(1)?,
                    identity: match (boot_id, start_ticks.and_then(|t| u64::try_from(t).ok())) {
                        (Some(boot_id), Some(start_ticks)) => Some(ProcessIdentity {
                            boot_id,
                            start_ticks,
                        }),
                        _ => None,
                    },
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        drop(stmt);
        let me = ProcessIdentity::of(pid);
        conn.execute(
            "INSERT INTO runs(pid, started_ms, boot_id, start_ticks) VALUES (?1, ?2, ?3, ?4)",
            params![
                pid,
                now_ms(),
                me.as_ref().map(|m| m.boot_id.clone()),
                me.as_ref().and_then(|m| i64::try_from(m.start_ticks).ok()),
            ],
        )?;
        let run_id = conn.last_insert_rowid();
        self.committed(conn)?;
        Ok((run_id, earlier))
    }

    /// Forgets earlier runs once their leftovers are gone.
    pub fn forget_runs_before(&self, run_id: i64) -> Result<(), JournalError> {
        let conn = self.writable()?;
        conn.execute("DELETE FROM runs WHERE run_id < ?1", params![run_id])?;
        self.committed(conn)
    }

    pub fn end_run(&self, run_id: i64) -> Result<(), JournalError> {
        let conn = self.writable()?;
        conn.execute(
            "UPDATE runs SET ended_ms = ?2 WHERE run_id = ?1",
            params![run_id, now_ms()],
        )?;
        self.committed(conn)
    }

    /// Ends every job that was accepted but never ended (an earlier run died): each gets
    /// the result `make(job_id, net, node)` gives, `node` being the Node it was accepted
    /// to run with (none in a row an older runner wrote). Returns those results, in the
    /// order the jobs were accepted.
    pub fn recover(
        &self,
        make: impl Fn(&str, Net, Option<&str>) -> JobResult,
    ) -> Result<Vec<JobResult>, JournalError> {
        let mut conn = self.writable()?;
        let tx = conn.transaction()?;
        // `net` and `tool` as text, whatever their type: a row an earlier runner wrote has
        // `accepted_ms`, `tool` and `net` in each other's columns (its `net` is in `tool`).
        let open: Vec<(String, String, String, Option<String>)> = {
            let mut stmt = tx.prepare(
                "SELECT job_id, CAST(net AS TEXT), CAST(tool AS TEXT), node FROM jobs
                 WHERE state = 'queued' ORDER BY accepted_ms, job_id",
            )?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        let now = now_ms();
        let mut ended = Vec::with_capacity(open.len());
        for (id, net, tool, node) in &open {
            let result = make(id, recorded_net(net, tool), node.as_deref());
            finish_in(&tx, id, &result, now)?;
            ended.push(result);
        }
        tx.commit()?;
        self.committed(conn)?;
        Ok(ended)
    }

    /// What the journal holds for a job id. After a write-back that made its copy and could
    /// not put it in place (the daemon then holds no database open), the write-back is
    /// tried again; while it still fails, the id is read from the whole database on disk
    /// (the copy, or the file it became), opened read-only.
    pub fn get(&self, job_id: &str) -> Result<Option<Entry>, JournalError> {
        let mut open = self.conn();
        if open.file.is_none() {
            if let Err(trouble) = self.ensure_in_place(&mut open) {
                let on_disk = self.on_disk_read_only().map_err(|_| trouble)?;
                return get_in(&on_disk, job_id);
            }
        }
        get_in(&open, job_id)
    }

    /// The whole database a write-back left on disk, opened read-only and immutable (no
    /// side file made, nothing written): the copy beside the path, else the file at it.
    fn on_disk_read_only(&self) -> Result<Connection, JournalError> {
        let copy = write_back_copy(&self.path);
        let file = if copy.is_file() {
            copy
        } else {
            self.path.clone()
        };
        // A URI's path: `?`, `#` and `%` would end or change it.
        const IN_URI: &percent_encoding::AsciiSet =
            &percent_encoding::CONTROLS.add(b'?').add(b'#').add(b'%');
        let path = file.to_str().ok_or_else(|| {
            JournalError::new(Trouble::Io, "the state directory's path is not UTF-8")
        })?;
        let uri = format!(
            "file:{}?immutable=1",
            percent_encoding::utf8_percent_encode(path, IN_URI)
        );
        Ok(Connection::open_with_flags(
            uri,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
        )?)
    }

    /// Records an accepted job. An id with a row already, whatever it holds (a rejection
    /// too: an id's answer is its answer forever), is an error (the caller checked).
    ///
    /// Once its row is committed the job is accepted, whatever the check that follows
    /// finds: `Ok(Some(trouble))` when the file at the path is no longer the database
    /// that holds the row (another file took its place, or it went and could not be
    /// written back yet, while the row was written). The row is then where every earlier
    /// job's is, in the database the daemon holds open and writes back, as for a job
    /// accepted a moment before the trouble came; the trouble is the journal's, for the
    /// jobs that follow.
    pub fn accept(
        &self,
        job_id: &str,
        run_id: i64,
        tool: &str,
        net: Net,
        node: Option<&str>,
        accepted_ms: i64,
    ) -> Result<Option<JournalError>, JournalError> {
        let conn = self.writable()?;
        let n = conn
            .prepare_cached(
                "INSERT INTO jobs(job_id, run_id, accepted_ms, tool, net, node, state)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued')
                 ON CONFLICT(job_id) DO NOTHING",
            )?
            .execute(params![
                job_id,
                run_id,
                accepted_ms,
                tool,
                net.as_str(),
                node
            ])?;
        if n == 1 {
            Ok(self.committed(conn).err())
        } else {
            Err(JournalError::new(
                Trouble::Conflict,
                format!("job {job_id} is already journaled"),
            ))
        }
    }

    /// Records the terminal result of an accepted job.
    pub fn finish(&self, result: &JobResult) -> Result<(), JournalError> {
        let conn = self.writable()?;
        let n = finish_in(&conn, &result.job_id, result, now_ms())?;
        if n == 1 {
            self.committed(conn)
        } else {
            Err(JournalError::new(
                Trouble::Conflict,
                format!("job {} was not journaled as accepted", result.job_id),
            ))
        }
    }

    /// Records a job that ended the moment it came (rejected): accepted and done at once.
    /// `false`: the id has a row already, which stays (its answer is the journal's). As
    /// with [`Journal::accept`], trouble found after the commit (the file went astray) is
    /// given beside it: the row is in the database the daemon holds and writes back.
    pub fn record_rejected(
        &self,
        result: &JobResult,
        run_id: i64,
        tool: &str,
    ) -> Result<(bool, Option<JournalError>), JournalError> {
        let now = now_ms();
        let text = serde_json::to_string(result)?;
        let conn = self.writable()?;
        let n = conn.execute(
            "INSERT INTO jobs(job_id, run_id, accepted_ms, tool, net, state, status, reason, result, finished_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 'done', ?6, ?7, ?8, ?3)
             ON CONFLICT(job_id) DO NOTHING",
            params![
                result.job_id,
                run_id,
                now,
                tool,
                result.net.as_str(),
                result.status.as_str(),
                result.reason_str(),
                text
            ],
        )?;
        Ok((n == 1, self.committed(conn).err()))
    }

    /// Prunes jobs that ended before `before_ms`; returns how many. Each keeps its row
    /// without its result: its id, status, reason and end (about 150 bytes), so that a
    /// pruned id is never run, nor answered otherwise, later (SPEC.md: one id, one answer),
    /// a rejected one's too.
    pub fn prune(&self, before_ms: i64) -> Result<usize, JournalError> {
        let mut conn = self.writable()?;
        let tx = conn.transaction()?;
        let emptied = tx.execute(
            "UPDATE jobs SET result = NULL
             WHERE state = 'done' AND result IS NOT NULL AND finished_ms < ?1",
            params![before_ms],
        )?;
        tx.commit()?;
        self.committed(conn)?;
        Ok(emptied)
    }

    /// (state, status, count) over every row: for tests and operators.
    pub fn census(&self) -> Result<Vec<(String, Option<String>, u64)>, JournalError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT state, status, COUNT(*) FROM jobs GROUP BY state, status ORDER BY 1, 2",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// What `conn`'s journal holds for a job id.
fn get_in(conn: &Connection, job_id: &str) -> Result<Option<Entry>, JournalError> {
    type Row = (
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<i64>,
    );
    let row: Option<Row> = conn
        .prepare_cached(
            "SELECT state, result, status, reason, finished_ms FROM jobs WHERE job_id = ?1",
        )?
        .query_row(params![job_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .optional()?;
    match row {
        None => Ok(None),
        Some((state, Some(result), ..)) if state == "done" => {
            Ok(Some(Entry::Done(Box::new(serde_json::from_str(&result)?))))
        }
        Some((state, None, Some(status), reason, Some(finished_ms))) if state == "done" => {
            Ok(Some(Entry::Pruned(Pruned {
                status,
                reason,
                finished_ms,
            })))
        }
        Some(_) => Ok(Some(Entry::Accepted)),
    }
}

fn finish_in(
    conn: &Connection,
    job_id: &str,
    result: &JobResult,
    now: i64,
) -> Result<usize, JournalError> {
    let text = serde_json::to_string(result)?;
    Ok(conn
        .prepare_cached(
            "UPDATE jobs SET state = 'done', status = ?2, reason = ?3, result = ?4, finished_ms = ?5
             WHERE job_id = ?1 AND state = 'queued'",
        )?
        .execute(params![
            job_id,
            result.status.as_str(),
            result.reason_str(),
            text,
            now
        ])?)
}

/// The `net` a queued row holds, from its `net` and `tool` columns read as text. A row an
/// earlier runner wrote has its `net` in `tool` (its columns were put in a different
/// order); a row with neither a `net` there is `deny`, the contract's default.
fn recorded_net(net: &str, tool: &str) -> Net {
    Net::parse(net)
        .or_else(|| Net::parse(tool))
        .unwrap_or_default()
}

/// The result of a job the daemon accepted but never ended because it stopped.
pub fn restarted(job_id: &str, net: Net, node: Option<&str>) -> JobResult {
    JobResult::not_run(
        job_id,
        Reason::RunnerRestarted,
        "the runner restarted (it was stopped or crashed) before the job ended; it may have \
         started, and whatever it left on the host was removed",
        net,
        node,
    )
}

#[cfg(test)]
mod tests;
