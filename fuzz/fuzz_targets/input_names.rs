//! One input name, as any UTF-8 text. `check_input_name` must accept exactly SPEC.md's names
//! (1-8 components of `[A-Za-z0-9._-]{1,64}`, none `.` or `..`); a job holding a name twice,
//! differing only in case, must be rejected; a job whose one input is a valid `.js` name is
//! accepted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openvibe_skill_runner::job::{check_input_name, parse_job_value, Bounds};
use openvibe_skill_runner_fuzz::{assert_name_safe, assert_rejection_sane, name_is_valid};
use serde_json::{json, Value};

const ZERO_SHA: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn job(entry: &str, names: &[&str]) -> Value {
    let inputs: Vec<Value> = names
        .iter()
        .map(|n| json!({ "name": n, "sha256": ZERO_SHA, "media_id": "med_1" }))
        .collect();
    json!({
        "job_id": "fuzz-1",
        "class": "function",
        "artifact": "openvibe-skill-runner@1.0.0",
        "args": { "tool": "t", "entry": entry, "input": null },
        "inputs": inputs,
    })
}

/// The name with the case of every ASCII letter turned around.
fn swap_case(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_lowercase() {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    let verdict = check_input_name(name);
    assert_eq!(
        verdict.is_ok(),
        name_is_valid(name),
        "check_input_name({name:?}) = {verdict:?}"
    );
    match &verdict {
        Ok(()) => assert_name_safe(name),
        Err(message) => assert!(
            message.len() <= 4096 && !message.chars().any(char::is_control),
            "message {message:?}"
        ),
    }
    if verdict.is_err() {
        return;
    }
    let bounds = Bounds::default();

    // Two inputs differing only in case (when the name has a letter), entry a third input.
    let swapped = swap_case(name);
    if swapped != name {
        let outcome = parse_job_value(
            job("zzzz/entry.js", &[name, &swapped, "zzzz/entry.js"]),
            &bounds,
        );
        let Err(r) = outcome else {
            panic!("{name:?} and {swapped:?} both accepted: {outcome:?}");
        };
        assert_rejection_sane(&r);
        assert!(r.message.contains("twice"), "{name:?}: {r:?}");
    }
    // The same name twice, exactly.
    let outcome = parse_job_value(job(name, &[name, name]), &bounds);
    assert!(outcome.is_err(), "{name:?} twice accepted");

    // A valid .js name is a valid entry on its own.
    if name.ends_with(".js") {
        let outcome = parse_job_value(job(name, &[name]), &bounds);
        assert!(outcome.is_ok(), "{name:?} alone rejected: {outcome:?}");
    }
});
