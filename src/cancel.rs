//! A job's cancel, carrying why it came: the one place that decides what a cancelled job's
//! result says.
//!
//! A job ends `cancelled` only when the dispatcher asked for it; when the runner stops
//! (SIGTERM) it ends `internal` `shutdown`. The cause is set with the cancel itself, so the
//! status is decided once, where the job ends, and never rewritten afterwards.

use crate::job::Reason;
use std::sync::{Arc, OnceLock};
use tokio_util::sync::CancellationToken;

/// Why a job was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The dispatcher asked for it (`DELETE /v1/jobs/{id}`).
    Requested,
    /// The runner is stopping; a running job is killed once the grace period of `grace_ms`
    /// is over.
    Shutdown { grace_ms: u64 },
    /// A `run` or `run-job` command was interrupted by this signal (a terminal's Ctrl-C, a
    /// `kill`); the job is killed at once and everything it made removed.
    Interrupted { signal: &'static str },
}

impl Cause {
    /// The result's reason (and with it its status).
    pub fn reason(self) -> Reason {
        match self {
            Cause::Requested => Reason::Cancelled,
            Cause::Shutdown { .. } | Cause::Interrupted { .. } => Reason::Shutdown,
        }
    }

    /// The result's message; `started`: the tool was running when the cancel came.
    pub fn message(self, started: bool) -> String {
        match (self, started) {
            (Cause::Requested, true) => "the job was cancelled".into(),
            (Cause::Requested, false) => "the job was cancelled before it started".into(),
            (Cause::Shutdown { grace_ms }, true) => format!(
                "the runner was stopped (SIGTERM) and killed the job after the grace period of {grace_ms} ms"
            ),
            (Cause::Shutdown { .. }, false) => {
                "the runner was stopped (SIGTERM) before the job started".into()
            }
            (Cause::Interrupted { signal }, true) => {
                format!("the command was interrupted ({signal}) and killed the job")
            }
            (Cause::Interrupted { signal }, false) => {
                format!("the command was interrupted ({signal}) before the job started")
            }
        }
    }
}

/// A job's cancel: a token and the cause of the first cancel. Clones share both.
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    token: CancellationToken,
    cause: Arc<OnceLock<Cause>>,
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Cancels for this cause. A second cancel changes nothing: the first cause stays.
    pub fn cancel(&self, cause: Cause) {
        let _ = self.cause.set(cause);
        self.token.cancel();
    }

    /// Waits for the cancel; its cause.
    pub async fn cancelled(&self) -> Cause {
        self.token.cancelled().await;
        // The token is private and only `cancel` cancels it, after setting the cause.
        self.cause().unwrap_or(Cause::Requested)
    }

    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// The cause, once cancelled.
    pub fn cause(&self) -> Option<Cause> {
        self.cause.get().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_cause_wins_and_every_clone_sees_it() {
        let c = Cancel::new();
        let other = c.clone();
        assert!(!c.is_cancelled());
        assert_eq!(c.cause(), None);
        c.cancel(Cause::Requested);
        c.cancel(Cause::Shutdown { grace_ms: 5 });
        assert!(other.is_cancelled());
        assert_eq!(other.cancelled().await, Cause::Requested);

        let s = Cancel::new();
        s.cancel(Cause::Shutdown { grace_ms: 5 });
        s.cancel(Cause::Requested);
        assert_eq!(s.clone().cancelled().await, Cause::Shutdown { grace_ms: 5 });
    }

    #[test]
    fn a_requested_cancel_is_cancelled_a_stop_is_internal_shutdown() {
        assert_eq!(
            Cause::Requested.reason().status(),
            crate::job::Status::Cancelled
        );
        let stop = Cause::Shutdown { grace_ms: 250 };
        assert_eq!(stop.reason(), Reason::Shutdown);
        assert_eq!(stop.reason().status(), crate::job::Status::Internal);
        assert!(
            stop.message(true).contains("250 ms"),
            "{}",
            stop.message(true)
        );
        assert!(stop.message(false).contains("before the job started"));
        assert!(Cause::Requested
            .message(false)
            .contains("before it started"));
        let int = Cause::Interrupted { signal: "SIGINT" };
        assert_eq!(int.reason(), Reason::Shutdown);
        assert!(int.message(true).contains("interrupted (SIGINT)"));
        assert!(int.message(false).contains("before the job started"));
    }
}
