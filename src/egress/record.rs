//! The egress record of one job: every attempt, allowed or refused, with the bytes each way,
//! and the job's egress budgets (bytes each way, time).
//!
//! Decisions:
//! - **One recorder per job**, shared by the DNS responder and every proxied connection
//!   (`Arc<Recorder>`, a `Mutex` inside; the critical sections are a few additions).
//! - **Bounded**: the first `max_records` attempts are kept one by one, in the order they were
//!   made; later ones are folded into a single last entry whose host reads `…N more, M allowed`
//!   (port 0, `allowed: false`, the bytes of all of them), so a tool that loops on connect
//!   cannot grow the result.
//! - **Budgets are granted before bytes move**: the proxy asks [`Flow::grant_out`] /
//!   [`Flow::grant_in`] for the bytes it has just read and forwards only what was granted, so
//!   the job never exceeds its byte budget, not even by one buffer. A grant of less than was
//!   asked, or an error, means: forward what was granted and close both sides.
//! - **Time**: no connection opens after `job_time` from the recorder's start (the job's
//!   start), and each connection ends at [`Flow::deadline`], the earlier of that and its own
//!   `connection_time`. The proxy uses the deadline as its timeout; the recorder refuses grants
//!   past it.
//! - A refused attempt is recorded with zero bytes; an allowed one gets its bytes as they are
//!   granted (a connection that fails upstream stays `allowed: true` with zero bytes: the
//!   policy allowed it).
//! - **A name lookup is recorded once per name** (port 53, `dns` = what the tool was told),
//!   however many queries (A, AAAA, retries) the tool's resolver sent for it: `allowed` says
//!   whether the job may look the name up at all.
//! - **Queries the responder did not take** (past the job's caps: too many at once, too many
//!   in all, too long, a DNS-over-TCP connection past the connection cap) are counted, not
//!   read, and shown as one last entry `…N DNS queries unanswered` (port 53, refused), so a
//!   flood is visible in the result without costing a record per query.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use crate::job::{EgressRecord, LookupOutcome};

/// Per-job limits (from `[budget]` in `policies/egress.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    /// Records kept one by one; the rest are folded into one "…more" entry.
    pub max_records: usize,
    /// Bytes the job may send through the proxy, all connections together.
    pub bytes_out: u64,
    /// Bytes the job may receive through the proxy, all connections together.
    pub bytes_in: u64,
    /// From the job's start: no connection opens later, open ones end then.
    pub job_time: Duration,
    /// The longest one connection may last.
    pub connection_time: Duration,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            max_records: 256,
            bytes_out: 16 * 1024 * 1024,
            bytes_in: 64 * 1024 * 1024,
            job_time: Duration::from_secs(30),
            connection_time: Duration::from_secs(30),
        }
    }
}

/// Why a connection may not open or go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BudgetExceeded {
    #[error("the job's egress byte budget for sending is spent")]
    BytesOut,
    #[error("the job's egress byte budget for receiving is spent")]
    BytesIn,
    #[error("the job's egress time is over")]
    JobTime,
    #[error("the connection's time is over")]
    ConnectionTime,
}

#[derive(Debug, Default)]
struct Folded {
    count: u64,
    allowed: u64,
    bytes_out: u64,
    bytes_in: u64,
}

#[derive(Debug, Default)]
struct Inner {
    records: Vec<EgressRecord>,
    folded: Folded,
    total_out: u64,
    total_in: u64,
    /// Names whose lookup is recorded already.
    looked_up: HashSet<String>,
    /// DNS queries dropped unanswered at the job's caps.
    unanswered: u64,
}

/// Where a flow's bytes are counted.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Record(usize),
    Folded,
}

/// The egress record and budgets of one job.
#[derive(Debug)]
pub struct Recorder {
    budgets: Budgets,
    started: Instant,
    inner: Mutex<Inner>,
}

impl Recorder {
    /// A recorder whose clock starts now.
    pub fn new(budgets: Budgets) -> Arc<Recorder> {
        Recorder::with_start(budgets, Instant::now())
    }

    /// A recorder whose clock started at `started` (the job's start).
    pub fn with_start(budgets: Budgets, started: Instant) -> Arc<Recorder> {
        Arc::new(Recorder {
            budgets,
            started,
            inner: Mutex::new(Inner::default()),
        })
    }

    pub fn budgets(&self) -> &Budgets {
        &self.budgets
    }

    /// When the job's egress time ends.
    pub fn job_deadline(&self) -> Instant {
        self.started + self.budgets.job_time
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves only counters behind: keep using them.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(
        &self,
        inner: &mut Inner,
        host: &str,
        port: u16,
        allowed: bool,
        dns: Option<LookupOutcome>,
    ) -> Slot {
        if inner.records.len() < self.budgets.max_records {
            inner.records.push(EgressRecord {
                host: host.to_string(),
                port,
                allowed,
                bytes_out: 0,
                bytes_in: 0,
                dns,
            });
            Slot::Record(inner.records.len() - 1)
        } else {
            inner.folded.count += 1;
            inner.folded.allowed += u64::from(allowed);
            Slot::Folded
        }
    }

    /// Record a refused attempt (by DNS, by policy, by budget).
    pub fn refused(&self, host: &str, port: u16) {
        let mut inner = self.lock();
        self.push(&mut inner, host, port, false, None);
    }

    /// Record the lookup of `name` (port 53) with what the tool was told, unless this name's
    /// lookup is recorded already.
    pub fn looked_up(&self, name: &str, allowed: bool, outcome: LookupOutcome) {
        let mut inner = self.lock();
        if inner.looked_up.insert(name.to_string()) {
            self.push(&mut inner, name, 53, allowed, Some(outcome));
        }
    }

    /// Count a DNS query (or DNS-over-TCP connection) dropped unanswered at the job's caps.
    pub fn unanswered_query(&self) {
        let mut inner = self.lock();
        inner.unanswered = inner.unanswered.saturating_add(1);
    }

    /// Record an allowed attempt and return the flow that counts its bytes; refused (and
    /// recorded as refused) when the job's time or either byte budget is already spent.
    pub fn open(self: &Arc<Self>, host: &str, port: u16) -> Result<Flow, BudgetExceeded> {
        let now = Instant::now();
        let mut inner = self.lock();
        let spent = if now >= self.job_deadline() {
            Some(BudgetExceeded::JobTime)
        } else if inner.total_out >= self.budgets.bytes_out {
            Some(BudgetExceeded::BytesOut)
        } else if inner.total_in >= self.budgets.bytes_in {
            Some(BudgetExceeded::BytesIn)
        } else {
            None
        };
        if let Some(e) = spent {
            self.push(&mut inner, host, port, false, None);
            return Err(e);
        }
        let slot = self.push(&mut inner, host, port, true, None);
        let deadline = std::cmp::min(self.job_deadline(), now + self.budgets.connection_time);
        Ok(Flow {
            recorder: Arc::clone(self),
            slot,
            deadline,
        })
    }

    /// The bytes sent and received so far, all flows together.
    pub fn totals(&self) -> (u64, u64) {
        let inner = self.lock();
        (inner.total_out, inner.total_in)
    }

    /// Attempts made so far (kept and folded).
    pub fn attempts(&self) -> u64 {
        let inner = self.lock();
        inner.records.len() as u64 + inner.folded.count
    }

    /// The result's `egress` list: the kept records, then one "…N more, M allowed" entry when
    /// some were folded, then one "…N DNS queries unanswered" entry when some were dropped.
    pub fn records(&self) -> Vec<EgressRecord> {
        let inner = self.lock();
        let mut out = inner.records.clone();
        if inner.folded.count > 0 {
            out.push(EgressRecord {
                host: format!(
                    "…{} more, {} allowed",
                    inner.folded.count, inner.folded.allowed
                ),
                port: 0,
                allowed: false,
                bytes_out: inner.folded.bytes_out,
                bytes_in: inner.folded.bytes_in,
                dns: None,
            });
        }
        if inner.unanswered > 0 {
            out.push(EgressRecord {
                host: format!("…{} DNS queries unanswered", inner.unanswered),
                port: 53,
                allowed: false,
                bytes_out: 0,
                bytes_in: 0,
                dns: None,
            });
        }
        out
    }

    fn grant(
        &self,
        slot: Slot,
        deadline: Instant,
        want: usize,
        out: bool,
    ) -> Result<usize, BudgetExceeded> {
        let now = Instant::now();
        if now >= self.job_deadline() {
            return Err(BudgetExceeded::JobTime);
        }
        if now >= deadline {
            return Err(BudgetExceeded::ConnectionTime);
        }
        let mut guard = self.lock();
        let inner: &mut Inner = &mut guard;
        let (total, budget, err) = if out {
            (
                inner.total_out,
                self.budgets.bytes_out,
                BudgetExceeded::BytesOut,
            )
        } else {
            (
                inner.total_in,
                self.budgets.bytes_in,
                BudgetExceeded::BytesIn,
            )
        };
        if want == 0 {
            return Ok(0);
        }
        let left = budget.saturating_sub(total);
        if left == 0 {
            return Err(err);
        }
        let granted = std::cmp::min(want as u64, left);
        let (rec_out, rec_in) = match slot {
            Slot::Record(i) => {
                let r = &mut inner.records[i];
                (&mut r.bytes_out, &mut r.bytes_in)
            }
            Slot::Folded => {
                let f = &mut inner.folded;
                (&mut f.bytes_out, &mut f.bytes_in)
            }
        };
        if out {
            *rec_out += granted;
            inner.total_out += granted;
        } else {
            *rec_in += granted;
            inner.total_in += granted;
        }
        // `granted <= want`, which is a usize.
        Ok(granted as usize)
    }
}

/// One allowed connection's share of the record and budgets.
#[derive(Debug)]
pub struct Flow {
    recorder: Arc<Recorder>,
    slot: Slot,
    deadline: Instant,
}

impl Flow {
    /// May `want` bytes go from the tool to the upstream? Returns how many may (and counts
    /// them): fewer than `want` when the budget runs out on the way; an error when nothing may.
    pub fn grant_out(&self, want: usize) -> Result<usize, BudgetExceeded> {
        self.recorder.grant(self.slot, self.deadline, want, true)
    }

    /// Gives back `unused` bytes of a grant for sending that were not sent after all (a
    /// write that took fewer bytes, or none).
    pub fn give_back_out(&self, unused: usize) {
        if unused == 0 {
            return;
        }
        let unused = unused as u64;
        let mut inner = self.recorder.lock();
        inner.total_out = inner.total_out.saturating_sub(unused);
        match self.slot {
            Slot::Record(i) => {
                let r = &mut inner.records[i];
                r.bytes_out = r.bytes_out.saturating_sub(unused);
            }
            Slot::Folded => {
                inner.folded.bytes_out = inner.folded.bytes_out.saturating_sub(unused);
            }
        }
    }

    /// The same for bytes from the upstream to the tool.
    pub fn grant_in(&self, want: usize) -> Result<usize, BudgetExceeded> {
        self.recorder.grant(self.slot, self.deadline, want, false)
    }

    /// When this connection must end (job time or connection time, whichever is first).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// How long this connection may still last.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

#[cfg(test)]
mod tests;
