//! The one door: what it makes of a job's bytes, and that a refusal's head is what the
//! text says (or nothing, when the text is no job).

use super::*;
use crate::job::{Reason, WALL_MS_CAP};
use base64::Engine as _;
use serde_json::json;
use sha2::{Digest, Sha256};

const CODE: &[u8] = b"process.stdout.write('1')\n";

fn job() -> Value {
    json!({
        "job_id": "door_1",
        "class": "function",
        "artifact": crate::job::ARTIFACT,
        "net": "public",
        "args": { "tool": "count_words", "entry": "t.js", "input": { "text": "hi" } },
        "inputs": [{
            "name": "t.js",
            "sha256": hex::encode(Sha256::digest(CODE)),
            "content_base64": base64::engine::general_purpose::STANDARD.encode(CODE),
        }],
    })
}

fn text(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("a job serializes")
}

#[track_caller]
fn refused(text: &[u8]) -> Refusal {
    match admit(text, &Bounds::default()) {
        Ok(v) => panic!("expected a refusal, admitted {}", v.job_id),
        Err(r) => *r,
    }
}

fn the_head() -> JobHead {
    JobHead {
        job_id: "door_1".into(),
        net: Net::Public,
        tool: "count_words".into(),
    }
}

#[test]
fn a_valid_job_passes_with_the_head_its_text_has() {
    let t = text(&job());
    let v = admit(&t, &Bounds::default()).expect("admitted");
    assert_eq!(v.job_id, "door_1");
    assert_eq!(v.input_json, br#"{"text":"hi"}"#);
    assert_eq!(v.inputs[0].content.as_deref(), Some(CODE));
    assert_eq!(JobHead::of(&v), the_head());
    assert_eq!(read_head(&t), Ok(the_head()));
}

#[test]
fn text_that_is_no_job_has_no_head() {
    for t in ["", "{", "not json", "{} {}"] {
        let r = refused(t.as_bytes());
        assert!(matches!(r.head, Err(NotAJob::NotJson(_))), "{t:?}: {r:?}");
        assert_eq!(r.rejection.reason, Reason::InvalidJob);
        assert!(
            r.rejection.message.starts_with("the job is not valid"),
            "{}",
            r.rejection.message
        );
    }
    for t in ["[]", "\"door_1\"", "null", "7"] {
        let r = refused(t.as_bytes());
        assert_eq!(r.head, Err(NotAJob::NotObject), "{t}");
        assert_eq!(r.rejection.reason, Reason::InvalidJob);
        assert_eq!(r.rejection.message, "the job must be a JSON object");
    }
}

#[test]
fn a_broken_rule_keeps_the_head_for_the_result() {
    let mut j = job();
    j["class"] = json!("other");
    let r = refused(&text(&j));
    assert_eq!(r.head, Ok(the_head()));
    assert_eq!(r.rejection.reason, Reason::InvalidJob);
    assert!(r.rejection.message.contains("class"), "{r:?}");

    let mut j = job();
    j["limits"] = json!({ "wall_ms": WALL_MS_CAP + 1 });
    let r = refused(&text(&j));
    assert_eq!(r.head, Ok(the_head()));
    assert_eq!(r.rejection.reason, Reason::LimitsAboveCap);

    // An unknown field: the typed parse refuses it, the head is still read.
    let mut j = job();
    j["extra"] = json!(1);
    let r = refused(&text(&j));
    assert_eq!(r.head, Ok(the_head()));
    assert!(r.rejection.message.contains("extra"), "{r:?}");
}

#[test]
fn shapes_serde_would_bend_are_refused_before_the_typed_parse() {
    let mut j = job();
    j["limits"] = json!([1000, 20_000_000]);
    let r = refused(&text(&j));
    assert_eq!(r.rejection.message, "limits must be a JSON object");
    assert_eq!(r.head, Ok(the_head()));

    let mut j = job();
    j["net"] = json!({ "public": null });
    let r = refused(&text(&j));
    assert!(r.rejection.message.starts_with("net must be"), "{r:?}");
    // An unreadable net is echoed as deny.
    assert_eq!(r.head.expect("head").net, Net::Deny);

    let mut j = job();
    j["args"] = json!(["count_words", "t.js", null]);
    let r = refused(&text(&j));
    assert_eq!(r.rejection.message, "args must be a JSON object");
    assert_eq!(r.head.expect("head").tool, "");
}

#[test]
fn an_id_given_twice_is_refused_and_nothing_is_echoed() {
    let good = String::from_utf8(text(&job())).expect("utf-8");
    let twice = good.replacen('{', r#"{"job_id":"other","#, 1);
    let r = refused(twice.as_bytes());
    assert_eq!(r.head.as_ref().map(|h| h.job_id.as_str()), Ok(""));
    assert_eq!(r.rejection.reason, Reason::InvalidJob);
    assert_eq!(read_head(twice.as_bytes()), r.head);
    assert_eq!(super::job_id_text(twice.as_bytes()), super::IdText::Twice);
    // The same id twice is still two: nothing says the sender meant one.
    let same = good.replacen('{', r#"{"job_id":"door_1","#, 1);
    assert_eq!(
        refused(same.as_bytes()).head.map(|h| h.job_id),
        Ok(String::new())
    );
}

#[test]
fn another_key_given_twice_is_refused_under_the_jobs_one_id() {
    let good = String::from_utf8(text(&job())).expect("utf-8");
    for (key, value) in [
        ("net", r#""deny""#),
        ("class", r#""function""#),
        ("artifact", r#""x""#),
        ("inputs", "[]"),
    ] {
        let twice = good.replacen('{', &format!(r#"{{"{key}":{value},"#), 1);
        let r = refused(twice.as_bytes());
        assert_eq!(
            r.head.as_ref().map(|h| h.job_id.as_str()),
            Ok("door_1"),
            "{key}"
        );
        assert_eq!(r.rejection.reason, Reason::InvalidJob);
        assert!(
            r.rejection
                .message
                .contains(&format!("duplicate field `{key}`")),
            "{key}: {r:?}"
        );
        assert_eq!(read_head(twice.as_bytes()), r.head, "{key}");
    }
    // A key written with an escape is the same key.
    let escaped = good.replacen('{', r#"{"n\u0065t":"deny","#, 1);
    let r = refused(escaped.as_bytes());
    assert!(
        r.rejection.message.contains("duplicate field `net`"),
        "{r:?}"
    );
    assert_eq!(r.head.map(|h| h.job_id), Ok("door_1".to_string()));
}

#[test]
fn the_bounds_given_are_the_ones_applied() {
    let t = text(&job());
    let len = br#"{"text":"hi"}"#.len();
    let fits = Bounds {
        max_input_json_bytes: len,
    };
    assert!(admit(&t, &fits).is_ok());
    let tight = Bounds {
        max_input_json_bytes: len - 1,
    };
    let r = admit(&t, &tight).expect_err("over the bound");
    assert_eq!(r.head, Ok(the_head()));
    assert!(
        r.rejection.message.contains(&format!("{len} bytes")),
        "{r:?}"
    );
}

#[test]
fn a_refusals_head_is_what_read_head_reads() {
    let mut cases: Vec<Vec<u8>> = vec![b"[]".to_vec(), b"{}".to_vec(), b"nope".to_vec()];
    for (key, value) in [
        ("job_id", json!("a b")),
        ("job_id", json!(7)),
        ("net", json!("wide")),
        ("inputs", json!({})),
        ("ttl_ms", json!(0)),
    ] {
        let mut j = job();
        j[key] = value;
        cases.push(text(&j));
    }
    for t in cases {
        let r = refused(&t);
        assert_eq!(r.head, read_head(&t), "{}", String::from_utf8_lossy(&t));
    }
}

#[test]
fn a_value_takes_the_same_door() {
    let v = parse_job_value(job(), &Bounds::default()).expect("admitted");
    assert_eq!(JobHead::of(&v), the_head());
    let mut j = job();
    j["artifact"] = json!("other@1");
    let r = parse_job_value(j.clone(), &Bounds::default()).expect_err("refused");
    assert_eq!(
        Some(r),
        admit(&text(&j), &Bounds::default())
            .err()
            .map(|r| r.rejection)
    );
}

/// Inputs past the cap are refused by their count before the typed parse builds any of
/// them: a later item that would fail that parse is never reached.
#[test]
fn inputs_past_the_cap_are_counted_before_any_is_built() {
    let mut many = job();
    let item = many["inputs"][0].clone();
    let mut items = vec![item; crate::job::MAX_INPUTS];
    items.push(json!({ "name": 7, "sha256": [] }));
    many["inputs"] = json!(items);
    let r = refused(&text(&many));
    assert_eq!(r.rejection.reason, Reason::InvalidJob);
    assert_eq!(
        r.rejection.message,
        format!("65 inputs; at most {} are allowed", crate::job::MAX_INPUTS)
    );
    // Many more: counted, none of them kept.
    let empty = format!("[{}{{}}]", "{},".repeat(200_000));
    let mut huge = String::from_utf8(text(&job())).expect("utf-8");
    let at = huge.find("\"inputs\":").expect("inputs") + "\"inputs\":".len();
    let end = at + huge[at..].find(']').expect("the inputs' end") + 1;
    huge.replace_range(at..end, &empty);
    let r = refused(huge.as_bytes());
    assert_eq!(
        r.rejection.message,
        format!(
            "200001 inputs; at most {} are allowed",
            crate::job::MAX_INPUTS
        )
    );
    // At the cap, the bad item is what is refused.
    many["inputs"].as_array_mut().expect("inputs").remove(0);
    let r = refused(&text(&many));
    assert!(
        !r.rejection.message.contains("at most"),
        "{}",
        r.rejection.message
    );
}
