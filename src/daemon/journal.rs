//! The journal: every accepted job and its terminal result, durable (SQLite in WAL mode,
//! `synchronous=FULL`: a commit is on disk when the call returns), under the state dir.
//!
//! A row is written when the daemon accepts a job (state `queued`) and completed when the
//! job ends (state `done`, with its result), each before the caller is answered. A restart
//! finds the rows that never reached `done` and ends them `internal`.
//!
//! Calls block on disk I/O: from async code, call them on the blocking pool.

use crate::job::{JobResult, Net, Status};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::sync::Mutex;

pub const FILE_NAME: &str = "journal.sqlite3";

pub struct Journal {
    conn: Mutex<Connection>,
}

/// What the journal knows of one job id.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// Accepted, not ended (only ever seen for the current run, or before recovery).
    Accepted,
    Done(Box<JobResult>),
}

#[derive(Debug, thiserror::Error)]
#[error("journal: {0}")]
pub struct JournalError(String);

impl From<rusqlite::Error> for JournalError {
    fn from(e: rusqlite::Error) -> Self {
        JournalError(e.to_string())
    }
}

impl From<serde_json::Error> for JournalError {
    fn from(e: serde_json::Error) -> Self {
        JournalError(format!("a stored result is not valid: {e}"))
    }
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
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(JournalError(format!(
                "{} cannot use write-ahead logging (journal_mode is {mode})",
                path.display()
            )));
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
        Ok(Journal {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records this run; returns its id and the pids of earlier runs (whose job cgroups and
    /// directories carry those pids in their names).
    pub fn begin_run(&self, pid: u32) -> Result<(i64, Vec<u32>), JournalError> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT DISTINCT pid FROM runs")?;
        let earlier = stmt
            .query_map([], |r| r.get::<_, u32>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        drop(stmt);
        conn.execute(
            "INSERT INTO runs(pid, started_ms) VALUES (?1, ?2)",
            params![pid, now_ms()],
        )?;
        Ok((conn.last_insert_rowid(), earlier))
    }

    /// Forgets earlier runs once their leftovers are gone.
    pub fn forget_runs_before(&self, run_id: i64) -> Result<(), JournalError> {
        self.conn()
            .execute("DELETE FROM runs WHERE run_id < ?1", params![run_id])?;
        Ok(())
    }

    pub fn end_run(&self, run_id: i64) -> Result<(), JournalError> {
        self.conn().execute(
            "UPDATE runs SET ended_ms = ?2 WHERE run_id = ?1",
            params![run_id, now_ms()],
        )?;
        Ok(())
    }

    /// Ends every job that was accepted but never ended (an earlier run died): each gets
    /// the result `make(job_id, net)` gives. Returns their ids.
    pub fn recover(
        &self,
        make: impl Fn(&str, Net) -> JobResult,
    ) -> Result<Vec<String>, JournalError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let open: Vec<(String, String)> = {
            let mut stmt = tx.prepare("SELECT job_id, net FROM jobs WHERE state = 'queued'")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        let now = now_ms();
        for (id, net) in &open {
            let result = make(id, Net::parse(net).unwrap_or_default());
            finish_in(&tx, id, &result, now)?;
        }
        tx.commit()?;
        Ok(open.into_iter().map(|(id, _)| id).collect())
    }

    /// What the journal holds for a job id.
    pub fn get(&self, job_id: &str) -> Result<Option<Entry>, JournalError> {
        let conn = self.conn();
        let row: Option<(String, Option<String>)> = conn
            .query_row(
                "SELECT state, result FROM jobs WHERE job_id = ?1",
                params![job_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        match row {
            None => Ok(None),
            Some((state, Some(result))) if state == "done" => {
                Ok(Some(Entry::Done(Box::new(serde_json::from_str(&result)?))))
            }
            Some(_) => Ok(Some(Entry::Accepted)),
        }
    }

    /// Records an accepted job. An id whose journaled result is `rejected` (nothing ran)
    /// is replaced; any other existing row is an error (the caller checked for duplicates).
    pub fn accept(
        &self,
        job_id: &str,
        run_id: i64,
        tool: &str,
        net: Net,
        accepted_ms: i64,
    ) -> Result<(), JournalError> {
        let n = self.conn().execute(
            "INSERT INTO jobs(job_id, run_id, accepted_ms, tool, net, state)
             VALUES (?1, ?2, ?3, ?4, ?5, 'queued')
             ON CONFLICT(job_id) DO UPDATE SET
                 run_id = excluded.run_id, accepted_ms = excluded.accepted_ms,
                 tool = excluded.tool, net = excluded.net, state = 'queued',
                 status = NULL, reason = NULL, result = NULL, finished_ms = NULL
             WHERE jobs.state = 'done' AND jobs.status = 'rejected'",
            params![job_id, run_id, tool, net.as_str(), accepted_ms],
        )?;
        if n == 1 {
            Ok(())
        } else {
            Err(JournalError(format!("job {job_id} is already journaled")))
        }
    }

    /// Records the terminal result of an accepted job.
    pub fn finish(&self, result: &JobResult) -> Result<(), JournalError> {
        let conn = self.conn();
        let n = finish_in(&conn, &result.job_id, result, now_ms())?;
        if n == 1 {
            Ok(())
        } else {
            Err(JournalError(format!(
                "job {} was not journaled as accepted",
                result.job_id
            )))
        }
    }

    /// Records a job that ended the moment it came (rejected): accepted and done at once.
    /// Replaces an earlier `rejected` row of the same id, nothing else.
    pub fn record_rejected(
        &self,
        result: &JobResult,
        run_id: i64,
        tool: &str,
    ) -> Result<bool, JournalError> {
        let now = now_ms();
        let text = serde_json::to_string(result)?;
        let n = self.conn().execute(
            "INSERT INTO jobs(job_id, run_id, accepted_ms, tool, net, state, status, reason, result, finished_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 'done', ?6, ?7, ?8, ?3)
             ON CONFLICT(job_id) DO UPDATE SET
                 run_id = excluded.run_id, accepted_ms = excluded.accepted_ms,
                 tool = excluded.tool, net = excluded.net, state = 'done',
                 status = excluded.status, reason = excluded.reason,
                 result = excluded.result, finished_ms = excluded.finished_ms
             WHERE jobs.state = 'done' AND jobs.status = 'rejected'",
            params![
                result.job_id,
                run_id,
                now,
                tool,
                result.net,
                result.status.as_str(),
                result.reason,
                text
            ],
        )?;
        Ok(n == 1)
    }

    /// Removes finished jobs that ended before `before_ms`; returns how many.
    pub fn prune(&self, before_ms: i64) -> Result<usize, JournalError> {
        Ok(self.conn().execute(
            "DELETE FROM jobs WHERE state = 'done' AND finished_ms < ?1",
            params![before_ms],
        )?)
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

fn finish_in(
    conn: &Connection,
    job_id: &str,
    result: &JobResult,
    now: i64,
) -> Result<usize, JournalError> {
    let text = serde_json::to_string(result)?;
    Ok(conn.execute(
        "UPDATE jobs SET state = 'done', status = ?2, reason = ?3, result = ?4, finished_ms = ?5
         WHERE job_id = ?1 AND state = 'queued'",
        params![job_id, result.status.as_str(), result.reason, text, now],
    )?)
}

/// The result of a job the daemon accepted but never ended because it stopped.
pub fn restarted(job_id: &str, net: Net, node: Option<&str>) -> JobResult {
    JobResult::not_run(
        job_id,
        Status::Internal,
        "runner_restarted",
        "the runner restarted (it was stopped or crashed) before the job ended; it may have \
         started, and whatever it left on the host was removed",
        net,
        node,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, status: Status, reason: &str) -> JobResult {
        JobResult::not_run(id, status, reason, "m", Net::Deny, Some("v24"))
    }

    #[test]
    fn accepted_jobs_end_once_and_survive_a_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(FILE_NAME);
        let j = Journal::open(&path).unwrap();
        let (run, earlier) = j.begin_run(100).unwrap();
        assert!(earlier.is_empty());
        j.accept("a", run, "t", Net::Deny, now_ms()).unwrap();
        j.accept("b", run, "t", Net::Deny, now_ms()).unwrap();
        assert!(j.accept("a", run, "t", Net::Deny, now_ms()).is_err());
        assert_eq!(j.get("a").unwrap(), Some(Entry::Accepted));
        let ok = result("a", Status::Ok, "x");
        j.finish(&ok).unwrap();
        assert!(j.finish(&ok).is_err(), "a job ends once");
        assert_eq!(j.get("a").unwrap(), Some(Entry::Done(Box::new(ok.clone()))));
        assert_eq!(j.get("zzz").unwrap(), None);
        drop(j);

        // A restart: "b" never ended.
        let j = Journal::open(&path).unwrap();
        let (run2, earlier) = j.begin_run(200).unwrap();
        assert_eq!(earlier, vec![100]);
        assert!(run2 > run);
        let ended = j.recover(|id, net| restarted(id, net, None)).unwrap();
        assert_eq!(ended, vec!["b".to_string()]);
        match j.get("b").unwrap() {
            Some(Entry::Done(r)) => {
                assert_eq!(r.status, Status::Internal);
                assert!(r.message.unwrap().contains("restarted"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(j.get("a").unwrap(), Some(Entry::Done(Box::new(ok))));
        assert!(j
            .recover(|id, net| restarted(id, net, None))
            .unwrap()
            .is_empty());
        j.forget_runs_before(run2).unwrap();
        let (_, earlier) = j.begin_run(300).unwrap();
        assert_eq!(earlier, vec![200]);
        let census = j.census().unwrap();
        assert_eq!(
            census,
            vec![
                ("done".to_string(), Some("internal".to_string()), 1),
                ("done".to_string(), Some("ok".to_string()), 1)
            ]
        );
    }

    #[test]
    fn a_rejected_id_may_come_again_nothing_else_may() {
        let tmp = tempfile::tempdir().unwrap();
        let j = Journal::open(&tmp.path().join(FILE_NAME)).unwrap();
        let (run, _) = j.begin_run(1).unwrap();
        assert!(j
            .record_rejected(&result("r", Status::Rejected, "busy"), run, "t")
            .unwrap());
        assert!(j
            .record_rejected(&result("r", Status::Rejected, "runner_off"), run, "t")
            .unwrap());
        j.accept("r", run, "t", Net::Deny, now_ms()).unwrap();
        assert!(!j
            .record_rejected(&result("r", Status::Rejected, "busy"), run, "t")
            .unwrap());
        j.finish(&result("r", Status::Limit, "wall")).unwrap();
        assert!(j.accept("r", run, "t", Net::Deny, now_ms()).is_err());
        assert!(!j
            .record_rejected(&result("r", Status::Rejected, "busy"), run, "t")
            .unwrap());
        match j.get("r").unwrap() {
            Some(Entry::Done(r)) => assert_eq!(r.status, Status::Limit),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn prune_removes_only_old_finished_jobs() {
        let tmp = tempfile::tempdir().unwrap();
        let j = Journal::open(&tmp.path().join(FILE_NAME)).unwrap();
        let (run, _) = j.begin_run(1).unwrap();
        j.accept("old", run, "t", Net::Deny, 0).unwrap();
        j.finish(&result("old", Status::Ok, "x")).unwrap();
        j.accept("open", run, "t", Net::Deny, 0).unwrap();
        assert_eq!(j.prune(now_ms() - 60_000).unwrap(), 0);
        assert_eq!(j.prune(now_ms() + 1).unwrap(), 1);
        assert_eq!(j.get("old").unwrap(), None);
        assert_eq!(j.get("open").unwrap(), Some(Entry::Accepted));
    }
}
