//! Untrusted bytes as a submitted job, through the one door `admit` (text straight to the
//! typed job: the engine's, `run-job`'s and the daemon's) and through `parse_job_value` (a
//! `Value` written back to text). Neither may panic; whatever either accepts must hold every
//! rule of SPEC.md "Job" and "Inputs"; what `admit` accepts the value path accepts with the
//! same fields; the tool's input is the exact text of `args.input`; and the id and `net` a
//! rejection would echo (`read_head`, and the head of `admit`'s refusal) are the job's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openvibe_skill_runner::job::{
    admit, parse_job_value, read_head, valid_job_id, Bounds, Job, JobHead, Rejection, ValidJob,
};
use openvibe_skill_runner_fuzz::{check_outcome, STRICT_SHAPES};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::HashMap;

fn assert_same(a: &ValidJob, b: &ValidJob, input_too: bool) {
    assert_eq!(a.job_id, b.job_id);
    assert_eq!((&a.subject, &a.project), (&b.subject, &b.project));
    assert_eq!(a.tool, b.tool);
    assert_eq!(a.entry, b.entry);
    if input_too {
        assert_eq!(a.input_json, b.input_json);
    }
    assert_eq!(a.net, b.net);
    assert_eq!(
        (a.wall_ms, a.mem_bytes, a.ttl_ms),
        (b.wall_ms, b.mem_bytes, b.ttl_ms)
    );
    assert_eq!(a.inputs.len(), b.inputs.len());
    for (x, y) in a.inputs.iter().zip(&b.inputs) {
        assert_eq!(x.name, y.name);
        assert_eq!(x.sha256, y.sha256);
        assert_eq!(x.content, y.content);
        assert_eq!(x.media_id, y.media_id);
    }
}

fuzz_target!(|data: &[u8]| {
    let bounds = Bounds::default();

    // What a rejected result would echo, read from the text.
    let head = read_head(data);
    if let Ok(h) = &head {
        assert!(
            h.job_id.is_empty() || valid_job_id(&h.job_id),
            "read_head gave {h:?}"
        );
    }

    // A JSON value's parse, written back to text.
    let mut via_value: Option<Result<ValidJob, Rejection>> = None;
    if let Ok(raw) = serde_json::from_slice::<Value>(data) {
        let plain = raw.is_object()
            && raw.get("net").is_none_or(Value::is_string)
            && raw.get("job_id").is_some_and(Value::is_string);
        let id = raw["job_id"].as_str().unwrap_or_default().to_string();
        let outcome = parse_job_value(raw, &bounds);
        if check_outcome(&outcome, &bounds) {
            let job = outcome.as_ref().expect("accepted");
            if plain || STRICT_SHAPES {
                assert_eq!(id, job.job_id, "the value's id is not the job's");
            }
        }
        via_value = Some(outcome);
    }

    // `admit`, text straight to the typed job: the one door. A refusal's head is what
    // `read_head` reads.
    let direct = match admit(data, &bounds) {
        Ok(job) => Ok(job),
        Err(refusal) => {
            assert_eq!(refusal.head, head, "the door's head is not read_head's");
            Err(refusal.rejection)
        }
    };
    let accepted = check_outcome(&direct, &bounds);
    match (&direct, &via_value) {
        // A value sorts keys and rounds numbers: only the rest is compared.
        (Ok(a), Some(Ok(b))) => assert_same(a, b, false),
        (Ok(_), other) => panic!("admit accepted what a value parse does not: {other:?}"),
        // A key given twice: the door (admit) refuses it; a `Value` kept only the last
        // one, so a value parse may accept it. That is why every door parses the text.
        _ => {}
    }
    if !accepted {
        return;
    }
    let first = direct.expect("accepted");
    let h = head.expect("an accepted job has a head");
    assert_eq!(
        h.job_id, first.job_id,
        "read_head disagrees with the parser"
    );
    assert_eq!(h.net, first.net, "read_head disagrees with the parser");
    assert_eq!(h.tool, first.tool, "read_head disagrees with the parser");
    assert_eq!(h, JobHead::of(&first), "an admitted job's head is not its text's");

    // The tool reads exactly the text of args.input.
    type Fields<'a> = HashMap<String, &'a RawValue>;
    let job: Fields = serde_json::from_slice(data).expect("an accepted job is an object");
    let args: Fields = serde_json::from_str(job["args"].get()).expect("args is an object");
    assert_eq!(first.input_json, args["input"].get().as_bytes());

    // Written back out and read again, the job is the same. The input size is left
    // unbounded here: a float may print a digit longer the second time.
    let job: Job = serde_json::from_slice(data).expect("an accepted job deserializes");
    let value = serde_json::to_value(&job).expect("a job serializes");
    let any_size = Bounds {
        max_input_json_bytes: usize::MAX,
    };
    let again = parse_job_value(value, &any_size);
    assert!(
        check_outcome(&again, &any_size),
        "re-parse rejected: {again:?}"
    );
    assert_same(&first, &again.expect("accepted"), false);
});
