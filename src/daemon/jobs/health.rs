//! What keeps the runner from taking jobs besides the engine: the journal and the state
//! directory, checked every second and reported by `/v1/info`.

use super::{journal, Jobs};

/// What keeps the runner from taking jobs besides the engine: the journal and the state
/// directory.
#[derive(Default)]
pub(super) struct Health {
    /// Results that ended and are not in the journal yet.
    pub(super) unjournaled: usize,
    /// The last journal failure, cleared by the next write that succeeds.
    pub(super) journal: Option<String>,
    /// The jobs folder cannot be made.
    pub(super) jobs_dir: Option<String>,
}

impl Jobs {
    /// Why the runner takes no new job now because of its journal, if it does not.
    pub fn journal_problem(&self) -> Option<String> {
        let h = self.health();
        let failure = h.journal.as_deref().unwrap_or("waiting for the next try");
        if h.unjournaled > 0 {
            Some(format!(
                "{} finished job result(s) cannot be journaled yet ({failure}); they are kept \
                 in memory and written as soon as the journal takes them, and the runner takes \
                 no new job until then",
                h.unjournaled
            ))
        } else {
            h.journal.as_ref().map(|f| {
                format!(
                    "the journal cannot be written ({f}); the runner takes no new job until it can"
                )
            })
        }
    }

    /// Results kept in memory because the journal would not take them.
    pub fn unjournaled(&self) -> usize {
        self.health().unjournaled
    }

    /// Whether jobs can run and be journaled here now.
    pub fn ready(&self) -> bool {
        let h = self.health();
        self.runner.is_some() && h.unjournaled == 0 && h.journal.is_none() && h.jobs_dir.is_none()
    }

    /// Why jobs cannot run here now (the engine, the journal, the state directory).
    pub fn problem(&self) -> Option<String> {
        if let Some(p) = &self.problem {
            return Some(p.clone());
        }
        if let Some(p) = self.journal_problem() {
            return Some(p);
        }
        self.health().jobs_dir.clone()
    }

    /// Notes the outcome of a journal write: a failure is kept (and logged once) until a
    /// write succeeds.
    pub(super) fn journal_outcome(&self, r: &Result<(), String>) {
        let mut h = self.health();
        match r {
            Ok(()) => {
                if h.journal.take().is_some() {
                    tracing::warn!("the journal takes writes again");
                }
            }
            Err(e) => {
                if h.journal.as_deref() != Some(e) {
                    tracing::error!(error = %e, "the journal cannot be written; the runner takes no new job until it can");
                }
                h.journal = Some(e.clone());
            }
        }
    }

    /// Every second: the journal file is still in place (written back if it was removed),
    /// a failed journal takes writes again, the jobs folder is there (made again if it was
    /// removed). What cannot be fixed makes the runner not ready, with the reason.
    pub async fn check_state(&self) {
        let failed = self.health().journal.is_some();
        let jobs_dir = self
            .runner
            .as_ref()
            .and_then(|r| r.jobs_dir().map(|d| d.to_path_buf()));
        let checked = self
            .blocking(move |j| {
                let journal = if failed { j.probe() } else { j.check_file() };
                let dir = jobs_dir.map(|d| crate::engine::make_jobs_dir(&d).map(|made| (d, made)));
                (journal.map_err(|e| e.to_string()), dir)
            })
            .await;
        let Some((journal, dir)) = checked else {
            return;
        };
        if failed || journal.is_err() {
            self.journal_outcome(&journal);
        }
        let mut h = self.health();
        match dir {
            Some(Ok((d, true))) => {
                tracing::warn!(dir = %d.display(), "the jobs folder was removed while the daemon ran; made again");
                h.jobs_dir = None;
            }
            Some(Err(e)) => {
                let p = format!("the jobs folder cannot be made: {e}; the state directory must be writable by the runner");
                if h.jobs_dir.as_deref() != Some(&p) {
                    tracing::error!(problem = %p, "jobs cannot run");
                }
                h.jobs_dir = Some(p);
            }
            _ => {
                if h.jobs_dir.take().is_some() {
                    tracing::warn!("the jobs folder is back");
                }
            }
        }
    }

    /// Prunes finished jobs older than the retention.
    pub async fn prune(&self) {
        let days = self.settings().retention_days;
        let before = prune_before(journal::now_ms(), days);
        match self.blocking(move |j| j.prune(before)).await {
            Some(Ok(n)) if n > 0 => tracing::info!(removed = n, days, "journal pruned"),
            Some(Ok(_)) => {}
            other => tracing::warn!(?other, "cannot prune the journal"),
        }
    }
}

/// The time before which finished results are pruned: `days` before `now_ms`. A retention
/// too long to count in milliseconds (`retention_days` up to `u64::MAX`, an operator's
/// "keep them all") reaches back before any result, never wraps round into the future.
pub(super) fn prune_before(now_ms: i64, days: u64) -> i64 {
    let span = i64::try_from(days)
        .unwrap_or(i64::MAX)
        .saturating_mul(86_400_000);
    now_ms.saturating_sub(span)
}
