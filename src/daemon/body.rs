//! The request bodies the daemon holds: their largest size and the budget every connection
//! shares while they are read and parsed (`http` takes from it, `jobs` owns it).

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The largest request body: a job carries at most 1 MiB of inputs (base64) and a 256 KiB
/// input by default, so 8 MiB leaves room for a configured larger input.
pub const MAX_BODY_BYTES: usize = crate::job::MAX_JOB_TEXT_BYTES;
/// How many bytes of job bodies the daemon holds at once, over every connection: eight of
/// the largest (a job's body is usually a few KiB). Without it, each of up to 512
/// connections could bring `MAX_BODY_BYTES` at the same time (4 GiB).
pub const BODY_BUDGET_BYTES: usize = 8 * MAX_BODY_BYTES;

/// The bytes of request bodies every connection together may hold while they are read and
/// parsed ([`BODY_BUDGET_BYTES`] in the daemon).
pub struct BodyBudget {
    bytes: usize,
    left: Arc<Semaphore>,
}

impl BodyBudget {
    pub fn new(bytes: usize) -> BodyBudget {
        BodyBudget {
            bytes,
            left: Arc::new(Semaphore::new(bytes)),
        }
    }

    /// The bytes the bodies being read hold now.
    pub fn held(&self) -> usize {
        self.bytes - self.left.available_permits()
    }

    /// `n` more bytes for a body, or none when the budget has not that many left.
    pub(super) fn take(&self, n: usize) -> Option<OwnedSemaphorePermit> {
        let n = u32::try_from(n).ok()?;
        self.left.clone().try_acquire_many_owned(n).ok()
    }
}

/// A request body read whole; its bytes count against the [`BodyBudget`] until it is
/// dropped.
pub struct HeldBody {
    pub bytes: Vec<u8>,
    _held: Option<OwnedSemaphorePermit>,
}

impl HeldBody {
    pub(super) fn new(bytes: Vec<u8>, held: Option<OwnedSemaphorePermit>) -> HeldBody {
        HeldBody { bytes, _held: held }
    }
}
