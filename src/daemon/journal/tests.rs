//! Unit tests of `src/daemon/journal.rs`.

use super::*;
use crate::job::Status;

fn result(id: &str, reason: Reason) -> JobResult {
    JobResult::not_run(id, reason, "m", Net::Deny, Some("v24"))
}

/// An `ok` result: no reason.
fn ok(id: &str) -> JobResult {
    let mut r = result(id, Reason::Exit);
    r.status = Status::Ok;
    r.reason = None;
    r
}

/// Each result's id, `net` and `node`, in order.
fn id_net_node(results: &[JobResult]) -> Vec<(&str, Net, Option<&str>)> {
    results
        .iter()
        .map(|r| (r.job_id.as_str(), r.net, r.node.as_deref()))
        .collect()
}

#[test]
fn accepted_jobs_end_once_and_survive_a_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(FILE_NAME);
    let j = Journal::open(&path).unwrap();
    let (run, earlier) = j.begin_run(100).unwrap();
    assert!(earlier.is_empty());
    j.accept("a", run, "t", Net::Deny, None, now_ms()).unwrap();
    j.accept("b", run, "t", Net::Deny, None, now_ms()).unwrap();
    assert!(j.accept("a", run, "t", Net::Deny, None, now_ms()).is_err());
    assert_eq!(j.get("a").unwrap(), Some(Entry::Accepted));
    let ok = ok("a");
    j.finish(&ok).unwrap();
    assert!(j.finish(&ok).is_err(), "a job ends once");
    assert_eq!(j.get("a").unwrap(), Some(Entry::Done(Box::new(ok.clone()))));
    assert_eq!(j.get("zzz").unwrap(), None);
    drop(j);

    // A restart: "b" never ended.
    let j = Journal::open(&path).unwrap();
    let before = now_ms();
    let (run2, earlier) = j.begin_run(200).unwrap();
    let pids: Vec<u32> = earlier.iter().map(|r| r.pid).collect();
    assert_eq!(pids, vec![100]);
    assert!(earlier[0].started_ms <= before, "{earlier:?}");
    assert!(run2 > run);
    let ended = j.recover(restarted).unwrap();
    let ids: Vec<&str> = ended.iter().map(|r| r.job_id.as_str()).collect();
    assert_eq!(ids, vec!["b"]);
    match j.get("b").unwrap() {
        Some(Entry::Done(r)) => {
            assert_eq!(r.status, Status::Internal);
            assert!(r.message.unwrap().contains("restarted"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(j.get("a").unwrap(), Some(Entry::Done(Box::new(ok))));
    assert!(j.recover(restarted).unwrap().is_empty());
    j.forget_runs_before(run2).unwrap();
    let (_, earlier) = j.begin_run(300).unwrap();
    let pids: Vec<u32> = earlier.iter().map(|r| r.pid).collect();
    assert_eq!(pids, vec![200]);
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
fn a_run_records_which_process_it_is_and_an_older_journal_gains_the_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(FILE_NAME);
    // A journal as an older runner made it, no identity in its runs, and the upgrade cut
    // off after its first column.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE runs(
                 run_id INTEGER PRIMARY KEY AUTOINCREMENT,
                 pid INTEGER NOT NULL,
                 started_ms INTEGER NOT NULL,
                 ended_ms INTEGER);
             INSERT INTO runs(pid, started_ms) VALUES (100, 5);
             ALTER TABLE runs ADD COLUMN boot_id TEXT;
             CREATE TABLE jobs(
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
             INSERT INTO jobs(job_id, run_id, accepted_ms, tool, net, state)
                 VALUES ('old', 1, 5, 't', 'public', 'queued');
             INSERT INTO jobs(job_id, run_id, accepted_ms, tool, net, state)
                 VALUES ('swapped', 1, 'fetch', 'openvibe-only', 6, 'queued');",
        )
        .unwrap();
    }
    let j = Journal::open(&path).unwrap();
    let me = std::process::id();
    let (_, earlier) = j.begin_run(me).unwrap();
    // Its jobs were accepted before rows named their Node: the results name none. The
    // second row is as the runner wrote them before its columns were put in order (the
    // job's `net` in `tool`): its `net` is found there.
    let ended = j.recover(restarted).unwrap();
    let seen = id_net_node(&ended);
    assert_eq!(
        seen,
        vec![
            ("old", Net::Public, None),
            ("swapped", Net::OpenvibeOnly, None)
        ]
    );
    assert_eq!(
        earlier,
        vec![EarlierRun {
            pid: 100,
            started_ms: 5,
            identity: None
        }]
    );
    drop(j);
    let j = Journal::open(&path).unwrap();
    let (_, earlier) = j.begin_run(me).unwrap();
    let recorded = earlier.last().and_then(|r| r.identity.clone());
    assert_eq!(recorded, ProcessIdentity::of(me));
    assert!(recorded.is_some_and(|r| !r.boot_id.is_empty() && r.start_ticks > 0));
}

/// A job the runner stopped in ends `runner_restarted` with the `net` it asked for and the
/// Node it was accepted to run with (SPEC.md: the result's `node` always names the version
/// that ran), not the Node of the runner that recovers it. Before, the row's columns were
/// written out of order, so every such result said `deny`, and the node was the new one's.
#[test]
fn a_restarted_job_keeps_its_net_and_its_node() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(FILE_NAME);
    let j = Journal::open(&path).unwrap();
    let (run, _) = j.begin_run(100).unwrap();
    j.accept("p", run, "fetch", Net::Public, Some("v24.1.0"), 42)
        .unwrap();
    j.accept("o", run, "t", Net::OpenvibeOnly, None, 43)
        .unwrap();
    drop(j);
    // What the row holds, column by column.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let row: (i64, String, String, Option<String>) = conn
            .query_row(
                "SELECT accepted_ms, tool, net, node FROM jobs WHERE job_id = 'p'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        assert_eq!(
            row,
            (42, "fetch".into(), "public".into(), Some("v24.1.0".into()))
        );
    }
    let j = Journal::open(&path).unwrap();
    j.begin_run(200).unwrap();
    let ended = j.recover(restarted).unwrap();
    let seen = id_net_node(&ended);
    assert_eq!(
        seen,
        vec![
            ("p", Net::Public, Some("v24.1.0")),
            ("o", Net::OpenvibeOnly, None)
        ]
    );
    match j.get("p").unwrap() {
        Some(Entry::Done(r)) => {
            assert_eq!((r.net, r.node.as_deref()), (Net::Public, Some("v24.1.0")))
        }
        other => panic!("{other:?}"),
    }
}

/// An id's first row is its row for good, a rejection's too (SPEC.md: the answer given
/// for an id is its answer forever): neither another rejection nor an acceptance
/// replaces it. Before, a rejected row gave way to either.
#[test]
fn an_ids_first_row_stays_a_rejections_too() {
    let tmp = tempfile::tempdir().unwrap();
    let j = Journal::open(&tmp.path().join(FILE_NAME)).unwrap();
    let (run, _) = j.begin_run(1).unwrap();
    assert!(
        j.record_rejected(&result("r", Reason::Busy), run, "t")
            .unwrap()
            .0
    );
    assert!(
        !j.record_rejected(&result("r", Reason::RunnerOff), run, "t")
            .unwrap()
            .0
    );
    assert!(j.accept("r", run, "t", Net::Deny, None, now_ms()).is_err());
    match j.get("r").unwrap() {
        Some(Entry::Done(r)) => assert_eq!(r.reason_str(), Some("busy")),
        other => panic!("{other:?}"),
    }
    j.accept("s", run, "t", Net::Deny, None, now_ms()).unwrap();
    assert!(
        !j.record_rejected(&result("s", Reason::Busy), run, "t")
            .unwrap()
            .0
    );
    j.finish(&result("s", Reason::Wall)).unwrap();
    assert!(j.accept("s", run, "t", Net::Deny, None, now_ms()).is_err());
    assert!(
        !j.record_rejected(&result("s", Reason::Busy), run, "t")
            .unwrap()
            .0
    );
    match j.get("s").unwrap() {
        Some(Entry::Done(r)) => assert_eq!(r.status, Status::Limit),
        other => panic!("{other:?}"),
    }
}

/// A new journal in a temporary folder, its run begun: the folder (which goes when it is
/// dropped), the journal's path, the journal and its run's id.
fn a_journal() -> (tempfile::TempDir, PathBuf, Journal, i64) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(FILE_NAME);
    let j = Journal::open(&path).unwrap();
    let (run, _) = j.begin_run(1).unwrap();
    (tmp, path, j, run)
}

fn done(j: &Journal, id: &str) -> Option<Status> {
    match j.get(id).unwrap() {
        Some(Entry::Done(r)) => Some(r.status),
        _ => None,
    }
}

#[test]
fn a_removed_journal_is_written_back_with_every_job() {
    for also_wal in [false, true] {
        let (tmp, path, j, run) = a_journal();
        j.accept("a", run, "t", Net::Deny, None, now_ms()).unwrap();
        j.finish(&ok("a")).unwrap();
        j.accept("b", run, "t", Net::Deny, None, now_ms()).unwrap();
        std::fs::remove_file(&path).unwrap();
        if also_wal {
            for ext in ["-wal", "-shm"] {
                let _ = std::fs::remove_file(tmp.path().join(format!("{FILE_NAME}{ext}")));
            }
        }
        // The next write notices, writes the journal back, then writes its row.
        j.finish(&result("b", Reason::Exit)).unwrap();
        assert!(path.is_file());
        j.accept("c", run, "t", Net::Deny, None, now_ms()).unwrap();
        // What a restart would read: everything, from the file at the path.
        let other = Journal::open(&path).unwrap();
        assert_eq!(done(&other, "a"), Some(Status::Ok), "also_wal {also_wal}");
        assert_eq!(done(&other, "b"), Some(Status::Error));
        assert_eq!(other.get("c").unwrap(), Some(Entry::Accepted));
        drop(j);
        drop(other);
        let reopened = Journal::open(&path).unwrap();
        assert_eq!(done(&reopened, "b"), Some(Status::Error));
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("write-back"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

/// A side file removed on its own (a cleaner taking the `-wal` as a temporary file): the
/// journal checkpoints into its file and opens again, so what it held and what it takes
/// next are in files at the path, where a restart after a crash reads them. Before, only
/// the database file was watched: SQLite wrote on into the unlinked `-wal`, and a crash
/// lost every answer since the last checkpoint (a restart ran those jobs again).
#[test]
fn a_removed_side_file_is_made_anew_and_nothing_is_left_in_the_removed_one() {
    for removed in [&["-wal"][..], &["-shm"], &["-wal", "-shm"]] {
        let (tmp, path, j, run) = a_journal();
        let side = |ext: &str| tmp.path().join(format!("{FILE_NAME}{ext}"));
        j.accept("a", run, "t", Net::Deny, None, now_ms()).unwrap();
        j.finish(&ok("a")).unwrap();
        for ext in removed {
            std::fs::remove_file(side(ext)).unwrap();
        }
        j.check_file().unwrap();
        for ext in ["-wal", "-shm"] {
            assert!(side(ext).is_file(), "{removed:?}: {ext} is not made anew");
        }
        j.accept("b", run, "t", Net::Deny, None, now_ms()).unwrap();
        // What a restart would read, from the files at the path.
        let other = Journal::open(&path).unwrap();
        assert_eq!(done(&other, "a"), Some(Status::Ok), "{removed:?}");
        assert_eq!(
            other.get("b").unwrap(),
            Some(Entry::Accepted),
            "{removed:?}"
        );
        drop(other);
        // The daemon's own connection still writes where the others read.
        j.finish(&ok("b")).unwrap();
        assert_eq!(done(&Journal::open(&path).unwrap(), "b"), Some(Status::Ok));
    }
}

/// A `-wal` removed, and made again at its name by another program that opened the
/// database meanwhile (the `sqlite3` shell, a backup tool): the file at the name is not
/// the journal's, which is noticed by its identity. Before the identity was checked, the
/// name alone was, and the journal went on writing into the unlinked file.
#[test]
fn a_side_file_made_again_by_another_program_is_not_taken_for_the_journals() {
    let (tmp, path, j, run) = a_journal();
    j.accept("a", run, "t", Net::Deny, None, now_ms()).unwrap();
    j.finish(&ok("a")).unwrap();
    // Another program's SQLite makes an empty `-wal` at the name as it opens (one in
    // this process would share the journal's own view of the files).
    let wal = tmp.path().join(format!("{FILE_NAME}-wal"));
    std::fs::remove_file(&wal).unwrap();
    std::fs::write(&wal, b"").unwrap();
    j.check_file().unwrap();
    j.accept("b", run, "t", Net::Deny, None, now_ms()).unwrap();
    // What a restart would read, from the files at the path.
    let restart = Journal::open(&path).unwrap();
    assert_eq!(done(&restart, "a"), Some(Status::Ok));
    assert_eq!(restart.get("b").unwrap(), Some(Entry::Accepted));
}

/// A reopen after a side file went that fails leaves the journal detached: it is opened
/// again only while the file at the path is still its own, never another put there.
#[test]
fn a_journal_detached_after_a_failed_reopen_never_adopts_another_file() {
    let (tmp, path, j, run) = a_journal();
    j.accept("a", run, "t", Net::Deny, None, now_ms()).unwrap();
    {
        let mut open = j.conn();
        let ours = open.file;
        *open = Open::detached().unwrap();
        open.expect = ours;
    }
    // Another file takes the path's place meanwhile.
    let other = tmp.path().join("other.sqlite3");
    drop(Journal::open(&other).unwrap());
    std::fs::rename(&other, &path).unwrap();
    let refused = j.accept("b", run, "t", Net::Deny, None, now_ms());
    assert_eq!(refused.map_err(|e| e.kind).err(), Some(Trouble::Detached));
    assert_eq!(
        Journal::open(&path).unwrap().get("a").unwrap(),
        None,
        "not ours"
    );
}

#[test]
fn a_removal_is_noticed_without_a_write() {
    let (_tmp, path, j, run) = a_journal();
    j.accept("a", run, "t", Net::Deny, None, now_ms()).unwrap();
    std::fs::remove_file(&path).unwrap();
    j.check_file().unwrap();
    assert_eq!(
        Journal::open(&path).unwrap().get("a").unwrap(),
        Some(Entry::Accepted)
    );
}

#[test]
fn a_write_back_cut_short_is_finished_at_open() {
    let (_tmp, path, j, run) = a_journal();
    j.accept("a", run, "t", Net::Deny, None, now_ms()).unwrap();
    j.finish(&ok("a")).unwrap();
    drop(j);
    // As if the daemon died after closing the removed file, before the rename.
    std::fs::rename(&path, write_back_copy(&path)).unwrap();
    let j = Journal::open(&path).unwrap();
    assert_eq!(done(&j, "a"), Some(Status::Ok));
    assert!(!write_back_copy(&path).exists());
}

#[test]
fn a_file_put_in_its_place_is_never_overwritten() {
    let (_tmp, path, j, run) = a_journal();
    j.accept("a", run, "t", Net::Deny, None, now_ms()).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, "someone else's").unwrap();
    let e = j.finish(&ok("a")).unwrap_err();
    assert_eq!(e.kind, Trouble::Detached);
    assert!(e.to_string().contains("Move that file away"), "{e}");
    assert_eq!(j.check_file().unwrap_err().kind, Trouble::Detached);
    assert_eq!(std::fs::read(&path).unwrap(), b"someone else's");
    // Moved away: the journal comes back, and the write goes through.
    std::fs::remove_file(&path).unwrap();
    j.finish(&ok("a")).unwrap();
    assert_eq!(done(&Journal::open(&path).unwrap(), "a"), Some(Status::Ok));
}

#[test]
fn a_damaged_journal_is_named_with_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(FILE_NAME);
    std::fs::write(&path, vec![b'x'; 8192]).unwrap();
    let e = Journal::open(&path).err().unwrap();
    assert_eq!(e.kind, Trouble::Damaged, "{e}");
    let said = e.at_start(&path);
    assert!(said.contains(&path.display().to_string()), "{said}");
    assert!(said.contains("move it aside"), "{said}");
    assert!(said.contains("backup"), "{said}");

    // A real journal cut short: opens, but is not whole.
    std::fs::remove_file(&path).unwrap();
    let j = Journal::open(&path).unwrap();
    let (run, _) = j.begin_run(1).unwrap();
    for i in 0..400 {
        let id = format!("job-{i:04}-{}", "x".repeat(40));
        j.accept(&id, run, "t", Net::Deny, None, now_ms()).unwrap();
        let mut r = ok(&id);
        r.message = Some("y".repeat(200));
        j.finish(&r).unwrap();
    }
    drop(j);
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len > 16 * 4096, "{len}");
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    let e = Journal::open(&path)
        .err()
        .expect("a truncated journal is refused");
    assert_eq!(e.kind, Trouble::Damaged, "{e}");
}

#[test]
fn prune_keeps_the_id_and_end_of_every_job_a_rejected_one_too() {
    let (_tmp, path, j, run) = a_journal();
    j.accept("old", run, "t", Net::Deny, None, 0).unwrap();
    j.finish(&ok("old")).unwrap();
    j.accept("failed", run, "t", Net::Deny, None, 0).unwrap();
    j.finish(&result("failed", Reason::Exit)).unwrap();
    let busy = result("busy", Reason::Busy);
    assert!(j.record_rejected(&busy, run, "t").unwrap().0);
    j.accept("open", run, "t", Net::Deny, None, 0).unwrap();
    assert_eq!(j.prune(now_ms() - 60_000).unwrap(), 0);
    assert!(matches!(j.get("old").unwrap(), Some(Entry::Done(_))));
    let before = now_ms() + 1;
    assert_eq!(j.prune(before).unwrap(), 3);
    let pruned = |status: &str, reason: Option<&str>| match j.get(if reason.is_some() {
        "failed"
    } else {
        "old"
    }) {
        Ok(Some(Entry::Pruned(p))) => {
            assert_eq!((p.status.as_str(), p.reason.as_deref()), (status, reason));
            assert!(
                p.finished_ms < before && p.finished_ms > before - 60_000,
                "{p:?}"
            );
        }
        other => panic!("expected a pruned entry, got {other:?}"),
    };
    pruned("ok", None);
    pruned("error", Some("exit"));
    match j.get("busy") {
        Ok(Some(Entry::Pruned(p))) => {
            assert_eq!(
                (p.status.as_str(), p.reason.as_deref()),
                ("rejected", Some("busy"))
            )
        }
        other => panic!("a rejected id keeps its row as any other: {other:?}"),
    }
    assert_eq!(j.get("open").unwrap(), Some(Entry::Accepted));
    // A pruned id is never accepted again, also after a reopen; a second prune finds
    // nothing more to take.
    assert!(j.accept("old", run, "t", Net::Deny, None, 0).is_err());
    assert_eq!(j.prune(now_ms() + 1).unwrap(), 0);
    drop(j);
    let j = Journal::open(&path).unwrap();
    assert!(matches!(j.get("old").unwrap(), Some(Entry::Pruned(_))));
    assert!(
        !j.record_rejected(&result("old", Reason::Busy), run, "t")
            .unwrap()
            .0
    );
    assert!(matches!(j.get("old").unwrap(), Some(Entry::Pruned(_))));
}

#[test]
fn the_journal_is_readable_by_the_runner_alone() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("a temporary folder");
    let j = Journal::open(&dir.path().join(FILE_NAME)).expect("open");
    j.begin_run(1).expect("a write");
    for name in [FILE_NAME.to_string(), format!("{FILE_NAME}-wal")] {
        let mode = std::fs::metadata(dir.path().join(&name))
            .expect("stat")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{name}: results hold what tools wrote");
    }
}

/// A queued row's `net`: in its own column, or (a row an earlier runner wrote, its columns
/// in another order, a number where `net` is) in `tool`'s; `deny` when neither holds one.
#[test]
fn a_rows_net_is_found_in_its_column_or_an_earlier_runners() {
    assert_eq!(recorded_net("public", "deny"), Net::Public);
    assert_eq!(
        recorded_net("1733550000000", "openvibe-only"),
        Net::OpenvibeOnly
    );
    assert_eq!(recorded_net("1733550000000", "fetch"), Net::Deny);
}

/// A write-back that made its copy and cannot put it in place (here a folder where the
/// old `-wal` file was, which it cannot remove) leaves the daemon no database open:
/// every id it holds is still answered, from the copy on disk, and once the obstacle
/// goes the next read puts the journal back in place. Before, a read then asked an
/// empty placeholder ("no such table"), and the daemon answered 500.
#[test]
fn ids_are_answered_while_a_write_back_cannot_finish() {
    let (tmp, path, j, run) = a_journal();
    let wal = tmp.path().join(format!("{FILE_NAME}-wal"));
    j.accept("a", run, "t", Net::Deny, None, now_ms()).unwrap();
    j.finish(&ok("a")).unwrap();
    j.accept("b", run, "t", Net::Deny, None, now_ms()).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&wal).unwrap();
    std::fs::create_dir(&wal).unwrap();
    assert!(j.check_file().is_err(), "the write-back cannot finish");
    assert!(write_back_copy(&path).is_file(), "its copy is whole");
    assert!(removed_marker(&path).exists());
    assert!(
        !j.removed_unwritten(),
        "a stop now loses nothing: the copy is whole"
    );
    for _ in 0..2 {
        assert_eq!(done(&j, "a"), Some(Status::Ok));
        assert_eq!(j.get("b").unwrap(), Some(Entry::Accepted));
        assert_eq!(j.get("never").unwrap(), None);
    }
    assert!(j.accept("c", run, "t", Net::Deny, None, now_ms()).is_err());
    // Read, not written: the copy is as the write-back made it, and nothing beside it.
    assert!(write_back_copy(&path).is_file() && !path.exists());
    std::fs::remove_dir(&wal).unwrap();
    assert_eq!(done(&j, "a"), Some(Status::Ok));
    assert!(
        path.is_file() && !write_back_copy(&path).exists() && !removed_marker(&path).exists(),
        "back in place"
    );
    j.accept("c", run, "t", Net::Deny, None, now_ms()).unwrap();
    assert_eq!(
        Journal::open(&path).unwrap().get("b").unwrap(),
        Some(Entry::Accepted)
    );
}

/// A journal removed while the daemon ran, whose write-back cannot even make its copy
/// (here a folder in the copy's place): the daemon leaves a mark while it holds the
/// journal only in memory. Written back in time, the mark goes. Stopped before that, the
/// next start refuses, saying what was lost and what to do, rather than begin an empty
/// journal that would run the ids it answered again; removing the mark is the operator's
/// choice of an empty one.
#[test]
fn a_journal_lost_with_its_daemon_is_not_replaced_by_an_empty_one() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(FILE_NAME);
    let copy = write_back_copy(&path);
    let marker = removed_marker(&path);
    let j = Journal::open(&path).unwrap();
    let (run, _) = j.begin_run(1).unwrap();
    j.accept("a", run, "t", Net::Deny, None, now_ms()).unwrap();
    j.finish(&ok("a")).unwrap();
    // Written back in time: no mark left.
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&copy).unwrap();
    assert!(j.check_file().is_err());
    assert!(
        marker.exists(),
        "marked while the journal is in memory only"
    );
    assert_eq!(
        done(&j, "a"),
        Some(Status::Ok),
        "still answered, from memory"
    );
    std::fs::remove_dir(&copy).unwrap();
    j.check_file().unwrap();
    assert!(path.is_file() && !marker.exists() && !j.removed_unwritten());
    // Stopped before it could write it back.
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&copy).unwrap();
    assert!(j.check_file().is_err());
    assert!(j.removed_unwritten(), "what the stop logs");
    drop(j);
    std::fs::remove_dir(&copy).unwrap();
    let Err(e) = Journal::open(&path) else {
        panic!("no empty journal in its place");
    };
    assert_eq!(e.kind, Trouble::Lost, "{e}");
    let told = e.at_start(&path);
    assert!(
        told.contains("remove") && told.contains(&*marker.to_string_lossy()),
        "{told}"
    );
    assert!(!path.exists(), "nothing made at the path");
    std::fs::remove_file(&marker).unwrap();
    assert_eq!(Journal::open(&path).unwrap().get("a").unwrap(), None);
}

/// A mark whose journal is there (the daemon wrote it back and ended before it took the
/// mark away) is removed at the start, the journal used.
#[test]
fn a_mark_beside_a_journal_written_back_is_removed() {
    let (_tmp, path, j, run) = a_journal();
    j.accept("a", run, "t", Net::Deny, None, now_ms()).unwrap();
    drop(j);
    std::fs::File::create(removed_marker(&path)).unwrap();
    let j = Journal::open(&path).unwrap();
    assert_eq!(j.get("a").unwrap(), Some(Entry::Accepted));
    assert!(!removed_marker(&path).exists());
}
