//! Tests that cannot run what they test on this host say so, and `scripts/test` fails them.
//!
//! A developer's `cargo test` without root or without the pinned Node prints a `SKIPPED`
//! note and goes on; `scripts/test` sets `OPENVIBE_TEST_NO_SKIPS=1`, under which a test that
//! would skip fails instead, naming what it needs. The suite never passes having proved less
//! than it says.

/// The variable `scripts/test` sets: any skip is a failure.
pub const NO_SKIPS: &str = "OPENVIBE_TEST_NO_SKIPS";

/// Call where a test returns early because the host lacks what it needs.
pub fn skipped(test: &str, why: &str) {
    if std::env::var_os(NO_SKIPS).is_some_and(|v| !v.is_empty() && v != "0") {
        panic!("{test} cannot run here: {why} ({NO_SKIPS} is set: scripts/test runs no test that skips)");
    }
    eprintln!("SKIPPED {test}: {why} (scripts/test fails it instead)");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_fails_when_skips_are_not_allowed() {
        // The variable is process-wide; this test only reads the current setting and runs
        // the check in a thread so its panic is observed, not propagated.
        let strict = std::env::var_os(NO_SKIPS).is_some_and(|v| !v.is_empty() && v != "0");
        let outcome = std::thread::spawn(|| skipped("a_test", "it needs something"))
            .join()
            .is_err();
        assert_eq!(
            outcome, strict,
            "a skip panics exactly when {NO_SKIPS} is set"
        );
    }
}
