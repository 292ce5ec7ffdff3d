//! Every rule of `job.rs` against SPEC.md, each cap tested on both sides of its edge.

use super::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const ENTRY: &str = "tools/count.js";
const ENTRY_CODE: &[u8] = b"process.stdout.write('1')\n";

// ---- builders -------------------------------------------------------------------------

fn sha_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// An input carrying its bytes, with the right digest.
fn carried(name: &str, bytes: &[u8]) -> Value {
    json!({ "name": name, "sha256": sha_hex(bytes), "content_base64": b64(bytes) })
}

/// An input whose bytes come from the cache or Media.
fn by_reference(name: &str) -> Value {
    json!({ "name": name, "media_id": "med_1", "sha256": sha_hex(name.as_bytes()) })
}

/// A job that passes every rule: the base every test changes one thing of.
fn good_job() -> Value {
    json!({
        "job_id": "job_01JD3",
        "class": "function",
        "artifact": ARTIFACT,
        "args": { "tool": "count_words", "entry": ENTRY, "input": { "text": "hi" } },
        "inputs": [carried(ENTRY, ENTRY_CODE)],
    })
}

/// `good_job` with one field set (a JSON pointer to the parent object, the key, the value).
fn with(pointer: &str, key: &str, value: Value) -> Value {
    let mut job = good_job();
    set(&mut job, pointer, key, value);
    job
}

fn set(job: &mut Value, pointer: &str, key: &str, value: Value) {
    job.pointer_mut(pointer)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("no object at {pointer:?}"))
        .insert(key.to_string(), value);
}

fn without(pointer: &str, key: &str) -> Value {
    let mut job = good_job();
    job.pointer_mut(pointer)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("no object at {pointer:?}"))
        .remove(key);
    job
}

/// `good_job` with these inputs; the entry stays `tools/count.js`, so include it.
fn with_inputs(inputs: Vec<Value>) -> Value {
    with("", "inputs", Value::Array(inputs))
}

/// The door's verdict without the head.
fn parse_job(text: &[u8], bounds: &Bounds) -> Result<ValidJob, Rejection> {
    admit(text, bounds).map_err(|r| r.rejection)
}

fn check(job: Value) -> Result<ValidJob, Rejection> {
    parse_job_value(job, &Bounds::default())
}

fn check_text(text: &str) -> Result<ValidJob, Rejection> {
    parse_job(text.as_bytes(), &Bounds::default())
}

#[track_caller]
fn accepted(job: Value) -> ValidJob {
    match check(job) {
        Ok(valid) => valid,
        Err(r) => panic!("expected the job to pass, got {}: {}", r.reason, r.message),
    }
}

#[track_caller]
fn rejected_as(job: Value, reason: &str) -> Rejection {
    match check(job) {
        Ok(_) => panic!("expected {reason}, the job passed"),
        Err(r) => {
            assert_eq!(r.reason.as_str(), reason, "message: {}", r.message);
            r
        }
    }
}

#[track_caller]
fn invalid(job: Value) -> Rejection {
    rejected_as(job, "invalid_job")
}

#[track_caller]
fn invalid_saying(job: Value, needle: &str) {
    let r = invalid(job);
    assert!(
        r.message.contains(needle),
        "message {:?} should mention {needle:?}",
        r.message
    );
}

fn names_job(names: &[&str]) -> Value {
    let mut inputs = vec![carried(ENTRY, ENTRY_CODE)];
    inputs.extend(names.iter().map(|n| carried(n, b"x")));
    with_inputs(inputs)
}

// ---- the whole job ------------------------------------------------------------------

#[test]
fn good_job_passes_with_defaults() {
    let v = accepted(good_job());
    assert_eq!(v.job_id, "job_01JD3");
    assert_eq!(v.tool, "count_words");
    assert_eq!(v.entry, ENTRY);
    assert_eq!(v.input_json, br#"{"text":"hi"}"#);
    assert_eq!(v.net, Net::Deny);
    assert_eq!(v.wall_ms, WALL_MS_DEFAULT);
    assert_eq!(v.wall_ms, 10_000);
    assert_eq!(v.mem_bytes, MEM_BYTES_DEFAULT);
    assert_eq!(v.mem_bytes, 134_217_728);
    assert_eq!(v.ttl_ms, TTL_MS_DEFAULT);
    assert_eq!(v.ttl_ms, 120_000);
    assert_eq!(v.subject, None);
    assert_eq!(v.project, None);
    assert_eq!(v.inputs.len(), 1);
    assert_eq!(v.inputs[0].content.as_deref(), Some(ENTRY_CODE));
    assert_eq!(v.inputs[0].sha256_hex(), sha_hex(ENTRY_CODE));
}

#[test]
fn the_spec_example_passes() {
    let mut job = good_job();
    set(
        &mut job,
        "",
        "subject",
        json!("person id (X-OV-Subject), optional"),
    );
    set(&mut job, "", "project", json!("prj_1"));
    set(&mut job, "", "net", json!("deny"));
    set(
        &mut job,
        "",
        "limits",
        json!({ "wall_ms": 10000, "mem_bytes": 134217728 }),
    );
    set(&mut job, "", "ttl_ms", json!(120000));
    let v = accepted(job);
    assert_eq!(
        v.subject.as_deref(),
        Some("person id (X-OV-Subject), optional")
    );
    assert_eq!(v.project.as_deref(), Some("prj_1"));
}

#[test]
fn parse_job_reads_text_and_rejects_what_is_not_a_job() {
    let text = serde_json::to_string(&good_job()).expect("serializable");
    assert!(check_text(&text).is_ok());
    for bad in ["", "null", "[]", "\"job\"", "{", "{}", "not json"] {
        let r = check_text(bad).expect_err(bad);
        assert_eq!(r.reason.as_str(), "invalid_job", "{bad:?}");
    }
}

#[test]
fn a_duplicated_key_is_rejected() {
    // A second `net` must not be able to override the first one.
    let text = format!(
        r#"{{"job_id":"j","class":"function","artifact":"{ARTIFACT}","net":"deny","net":"public",
            "args":{{"tool":"t","entry":"{ENTRY}","input":null}},
            "inputs":[{}]}}"#,
        carried(ENTRY, ENTRY_CODE)
    );
    assert_eq!(
        check_text(&text).expect_err("dup").reason.as_str(),
        "invalid_job"
    );
}

#[test]
fn required_fields_are_required() {
    for key in ["job_id", "class", "artifact", "args", "inputs"] {
        invalid(without("", key));
    }
    for key in ["tool", "entry", "input"] {
        invalid(without("/args", key));
    }
    for key in ["name", "sha256"] {
        invalid(without("/inputs/0", key));
    }
}

#[test]
fn missing_args_input_is_rejected_but_null_is_fine() {
    invalid_saying(without("/args", "input"), "input");
    let v = accepted(with("/args", "input", Value::Null));
    assert_eq!(v.input_json, b"null");
}

#[test]
fn args_input_may_be_any_json_value() {
    for input in [
        json!(0),
        json!("text"),
        json!([1, 2]),
        json!(true),
        json!({ "a": { "b": [] } }),
    ] {
        let v = accepted(with("/args", "input", input.clone()));
        assert_eq!(v.input_json, serde_json::to_vec(&input).expect("json"));
    }
}

#[test]
fn wrong_types_are_rejected() {
    invalid(with("", "job_id", json!(1)));
    invalid(with("", "inputs", json!({})));
    invalid(with("", "net", Value::Null));
    invalid(with("", "net", json!(0)));
    invalid(with("", "limits", json!({ "wall_ms": -1 })));
    invalid(with("", "limits", json!({ "wall_ms": 1.5 })));
    invalid(with("", "limits", json!({ "mem_bytes": "1" })));
    invalid(with("", "ttl_ms", json!(-5)));
    invalid(with("/args", "tool", json!(["count"])));
}

// ---- unknown fields -----------------------------------------------------------------

#[test]
fn unknown_field_at_top_level_is_rejected() {
    invalid_saying(with("", "nett", json!("public")), "nett");
    invalid(with("", "Net", json!("deny")));
    invalid(with("", "env", json!({})));
}

#[test]
fn unknown_field_in_args_is_rejected() {
    invalid_saying(with("/args", "argv", json!(["--x"])), "argv");
}

#[test]
fn unknown_field_in_an_input_is_rejected() {
    invalid_saying(with("/inputs/0", "mode", json!("0755")), "mode");
}

#[test]
fn unknown_field_in_limits_is_rejected() {
    invalid_saying(
        with("", "limits", json!({ "wall_ms": 5, "cpu_ms": 5 })),
        "cpu_ms",
    );
    invalid(with("", "limits", json!({ "wallms": 5 })));
}

// ---- job_id ---------------------------------------------------------------------------

#[test]
fn job_id_length_edges() {
    invalid_saying(with("", "job_id", json!("")), "job_id");
    accepted(with("", "job_id", json!("a")));
    accepted(with("", "job_id", json!("a".repeat(64))));
    invalid(with("", "job_id", json!("a".repeat(65))));
}

#[test]
fn job_id_charset() {
    accepted(with("", "job_id", json!("Az09_.-")));
    for bad in [
        "a b",
        "a/b",
        "a:b",
        "a\nb",
        "a\0b",
        "é",
        "job\u{202e}",
        "a+b",
        "a%b",
        "\"",
        "../x",
    ] {
        let r = invalid(with("", "job_id", json!(bad)));
        assert!(!r.message.contains(bad), "the message echoes {bad:?}");
    }
    assert!(valid_job_id("..")); // dots are in the charset; the id is never a path
}

fn head(v: &Value) -> JobHead {
    read_head(&serde_json::to_vec(v).expect("json")).expect("an object")
}

#[test]
fn read_head_never_echoes_a_malformed_id() {
    assert_eq!(head(&good_job()).job_id, "job_01JD3");
    assert_eq!(
        head(&json!({ "job_id": "a".repeat(64) })).job_id,
        "a".repeat(64)
    );
    for bad in [
        json!({ "job_id": "a".repeat(65) }),
        json!({ "job_id": "" }),
        json!({ "job_id": "<script>" }),
        json!({ "job_id": "a b" }),
        json!({ "job_id": "x\ny" }),
        json!({ "job_id": 7 }),
        json!({ "job_id": null }),
        json!({}),
    ] {
        assert_eq!(head(&bad).job_id, "", "{bad}");
    }
    // The id given twice: none is echoed (the job is rejected for it).
    assert_eq!(
        read_head(br#"{"job_id":"a","job_id":"b"}"#).expect("object"),
        JobHead::default()
    );
}

#[test]
fn read_head_tells_what_is_not_a_job() {
    for text in ["[]", "\"job_01\"", "null", "7"] {
        assert_eq!(
            read_head(text.as_bytes()),
            Err(NotAJob::NotObject),
            "{text}"
        );
    }
    for text in ["", "{", "not json", "{} {}", "\u{feff}{}"] {
        assert!(
            matches!(read_head(text.as_bytes()), Err(NotAJob::NotJson(_))),
            "{text:?}"
        );
    }
}

#[test]
fn read_head_reads_past_any_input_value() {
    // Values a JSON value type cannot hold: the id and net are still read.
    let text = br#"{"job_id":"j1","net":"public","args":{"tool":"count_words","input":[1e400,"\ud800",{"a":1,"a":2}]}}"#;
    assert_eq!(
        read_head(text).expect("object"),
        JobHead {
            job_id: "j1".into(),
            net: Net::Public,
            tool: "count_words".into()
        }
    );
    assert_eq!(head(&json!({ "args": { "tool": "Bad Tool" } })).tool, "");
    assert_eq!(head(&json!({ "args": [] })).tool, "");
}

// ---- class and artifact ---------------------------------------------------------------

#[test]
fn class_must_be_function() {
    accepted(with("", "class", json!("function")));
    for bad in ["", "Function", "function ", "service", "build"] {
        invalid_saying(with("", "class", json!(bad)), "class");
    }
}

#[test]
fn artifact_must_match_exactly() {
    accepted(with("", "artifact", json!("openvibe-skill-runner@1.0.0")));
    for bad in [
        "",
        "openvibe-skill-runner",
        "openvibe-skill-runner@1.0.1",
        "openvibe-skill-runner@1.0.0 ",
        "OpenVibe-Skill-Runner@1.0.0",
        "openvibe-codes@1.0.0",
    ] {
        invalid_saying(with("", "artifact", json!(bad)), "artifact");
    }
}

#[test]
fn subject_and_project_are_labels() {
    for field in ["subject", "project"] {
        accepted(with("", field, json!("p")));
        accepted(with("", field, json!("x".repeat(256))));
        invalid_saying(with("", field, json!("x".repeat(257))), field);
        invalid_saying(with("", field, json!("")), field);
        invalid_saying(with("", field, json!("a\nb")), field);
        invalid(with("", field, json!(5)));
    }
}

// ---- args.tool and args.entry ---------------------------------------------------------

#[test]
fn tool_name_regex() {
    for good in ["a", "count_words", "a1", "a_", "x9_y", &"a".repeat(32)] {
        accepted(with("/args", "tool", json!(good)));
        assert!(valid_tool_name(good), "{good:?}");
    }
    for bad in [
        "",
        "_a",
        "1a",
        "Count",
        "countWords",
        "count-words",
        "count.words",
        "count words",
        "é",
        &"a".repeat(33),
    ] {
        invalid_saying(with("/args", "tool", json!(bad)), "args.tool");
        assert!(!valid_tool_name(bad), "{bad:?}");
    }
}

#[test]
fn entry_must_end_in_js_and_name_an_input() {
    let mut mjs = with_inputs(vec![carried("tools/count.mjs", b"1")]);
    set(&mut mjs, "/args", "entry", json!("tools/count.mjs"));
    invalid_saying(mjs, ".js");
    invalid_saying(
        with("/args", "entry", json!("tools/other.js")),
        "none of the inputs",
    );
    invalid_saying(
        with("/args", "entry", json!("Tools/Count.js")),
        "none of the inputs",
    );
    invalid_saying(
        with("/args", "entry", json!("/skill/tools/count.js")),
        "none",
    );
    invalid_saying(with("/args", "entry", json!("./tools/count.js")), "none");
    invalid(with("/args", "entry", json!("")));
    invalid(with("/args", "entry", json!("tools/count.JS")));
    // An entry may also be an input fetched by reference.
    let mut job = with_inputs(vec![by_reference("main.js")]);
    set(&mut job, "/args", "entry", json!("main.js"));
    let v = accepted(job);
    assert_eq!(v.inputs[0].content, None);
    assert_eq!(v.inputs[0].media_id.as_deref(), Some("med_1"));
}

// ---- args.input size ------------------------------------------------------------------

/// A string input whose JSON serialization is exactly `len` bytes (the two quotes included).
fn input_of_serialized_len(len: usize) -> Value {
    let v = json!("a".repeat(len - 2));
    assert_eq!(serde_json::to_vec(&v).expect("json").len(), len);
    v
}

#[test]
fn input_json_at_256_kib_passes_and_one_byte_over_is_rejected() {
    let cap = 256 * 1024;
    assert_eq!(Bounds::default().max_input_json_bytes, cap);
    let v = accepted(with("/args", "input", input_of_serialized_len(cap)));
    assert_eq!(v.input_json.len(), cap);
    invalid_saying(
        with("/args", "input", input_of_serialized_len(cap + 1)),
        "args.input",
    );
}

#[test]
fn input_json_cap_follows_custom_bounds() {
    let bounds = Bounds {
        max_input_json_bytes: 100,
    };
    let ok = with("/args", "input", input_of_serialized_len(100));
    assert!(parse_job_value(ok, &bounds).is_ok());
    let over = with("/args", "input", input_of_serialized_len(101));
    assert_eq!(
        parse_job_value(over, &bounds)
            .expect_err("over")
            .reason
            .as_str(),
        "invalid_job"
    );
    // A larger bound lets through what the default refuses.
    let big = Bounds {
        max_input_json_bytes: 512 * 1024,
    };
    let job = with("/args", "input", input_of_serialized_len(256 * 1024 + 1));
    assert!(parse_job_value(job, &big).is_ok());
}

/// A job whose `args.input` is the given text, exactly.
fn job_text_with_input(input: &str) -> String {
    format!(
        r#"{{"job_id":"j","class":"function","artifact":"{ARTIFACT}",
            "args":{{"tool":"t","entry":"{ENTRY}","input":{input}}},
            "inputs":[{}]}}"#,
        carried(ENTRY, ENTRY_CODE)
    )
}

#[test]
fn input_json_is_the_text_as_written_and_the_cap_counts_it() {
    // Whitespace inside the value reaches stdin as written (around it, it is not part of
    // the value), and counts against the cap.
    let text = job_text_with_input("  { \"a\" :   1 }  ");
    assert_eq!(
        check_text(&text).expect("ok").input_json,
        br#"{ "a" :   1 }"#
    );
    let bounds = Bounds {
        max_input_json_bytes: 13,
    };
    assert!(parse_job(text.as_bytes(), &bounds).is_ok());
    let bounds = Bounds {
        max_input_json_bytes: 12,
    };
    let r = parse_job(text.as_bytes(), &bounds).expect_err("over");
    assert!(r.message.contains("13 bytes"), "{}", r.message);
}

#[test]
fn input_json_keeps_order_numbers_and_escapes() {
    for input in [
        r#"{"zeta":2,"id":1234567890123456789012,"alpha":[3,1]}"#,
        r#"{"zeta":1,"id":1234567890123456789012,"alpha":1.0000000000000002,"neg":-0}"#,
        r#"["\u00e9","é","\/","\ud800",1E400,-1e-400,-0.0]"#,
        "-0",
        "123456789012345678901234567890",
    ] {
        let v = check_text(&job_text_with_input(input)).expect(input);
        assert_eq!(v.input_json, input.as_bytes());
    }
}

#[test]
fn a_key_given_twice_in_args_input_is_refused_and_named() {
    for (input, at) in [
        (r#"{"a":1,"a":2}"#, "the top"),
        (r#"{"a":1,"\u0061":2}"#, "the top"),
        (r#"{"x":[{"k":1,"k":2}]}"#, "/x/0"),
    ] {
        let r = check_text(&job_text_with_input(input)).expect_err(input);
        assert_eq!(r.reason.as_str(), "invalid_job");
        assert!(r.message.contains("args.input"), "{}", r.message);
        assert!(r.message.contains("more than once"), "{}", r.message);
        assert!(r.message.contains(at), "{}", r.message);
    }
    // The same key in two objects is fine.
    assert!(check_text(&job_text_with_input(r#"[{"k":1},{"k":2}]"#)).is_ok());
}

#[test]
fn args_input_deeper_than_the_limit_is_refused() {
    let depth = crate::json_text::MAX_DEPTH;
    let at = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert!(check_text(&job_text_with_input(&at)).is_ok());
    let r = check_text(&job_text_with_input(&format!("[{at}]"))).expect_err("deep");
    assert!(r.message.contains("deeper"), "{}", r.message);
}

// ---- limits ---------------------------------------------------------------------------

fn limits(value: Value) -> Result<ValidJob, Rejection> {
    check(with("", "limits", value))
}

#[test]
fn wall_ms_edges() {
    assert_eq!(
        limits(json!({ "wall_ms": 0 }))
            .expect_err("0")
            .reason
            .as_str(),
        "invalid_job"
    );
    assert_eq!(limits(json!({ "wall_ms": 1 })).expect("1").wall_ms, 1);
    assert_eq!(
        limits(json!({ "wall_ms": 30000 })).expect("cap").wall_ms,
        30_000
    );
    let r = limits(json!({ "wall_ms": 30001 })).expect_err("over");
    assert_eq!(r.reason.as_str(), "limits_above_cap");
    assert!(r.message.contains("wall_ms"), "{}", r.message);
    assert_eq!(
        limits(json!({ "wall_ms": u64::MAX }))
            .expect_err("max")
            .reason
            .as_str(),
        "limits_above_cap"
    );
    // Beyond u64: above the cap all the same.
    assert_eq!(
        check_text(&serde_json::to_string(&good_job()).expect("json").replacen(
            "\"job_id\"",
            "\"limits\":{\"wall_ms\":18446744073709551616},\"job_id\"",
            1
        ))
        .expect_err("u64 overflow")
        .reason
        .as_str(),
        "limits_above_cap"
    );
}

#[test]
fn mem_bytes_edges() {
    let mib16 = 16 * 1024 * 1024;
    assert_eq!(
        limits(json!({ "mem_bytes": mib16 - 1 }))
            .expect_err("below")
            .reason
            .as_str(),
        "invalid_job"
    );
    assert_eq!(
        limits(json!({ "mem_bytes": 0 }))
            .expect_err("0")
            .reason
            .as_str(),
        "invalid_job"
    );
    assert_eq!(
        limits(json!({ "mem_bytes": mib16 }))
            .expect("min")
            .mem_bytes,
        mib16
    );
    assert_eq!(
        limits(json!({ "mem_bytes": 268435456u64 }))
            .expect("cap")
            .mem_bytes,
        268_435_456
    );
    let r = limits(json!({ "mem_bytes": 268435457u64 })).expect_err("over");
    assert_eq!(r.reason.as_str(), "limits_above_cap");
    assert!(r.message.contains("mem_bytes"), "{}", r.message);
}

#[test]
fn limits_default_one_by_one() {
    let v = limits(json!({})).expect("empty limits");
    assert_eq!((v.wall_ms, v.mem_bytes), (10_000, 134_217_728));
    let v = limits(json!({ "wall_ms": 500 })).expect("wall only");
    assert_eq!((v.wall_ms, v.mem_bytes), (500, 134_217_728));
    let v = limits(json!({ "mem_bytes": 33554432 })).expect("mem only");
    assert_eq!((v.wall_ms, v.mem_bytes), (10_000, 33_554_432));
}

#[test]
fn ttl_default_and_bounds() {
    assert_eq!(accepted(good_job()).ttl_ms, 120_000);
    assert_eq!(accepted(with("", "ttl_ms", json!(1))).ttl_ms, 1);
    assert_eq!(
        accepted(with("", "ttl_ms", json!(TTL_MS_CAP))).ttl_ms,
        TTL_MS_CAP
    );
    invalid_saying(with("", "ttl_ms", json!(0)), "ttl_ms");
    invalid_saying(with("", "ttl_ms", json!(TTL_MS_CAP + 1)), "ttl_ms");
}

// ---- net ------------------------------------------------------------------------------

#[test]
fn net_defaults_to_deny() {
    assert_eq!(accepted(good_job()).net, Net::Deny);
    assert_eq!(Net::default(), Net::Deny);
}

#[test]
fn each_net_mode_is_accepted() {
    for (text, net) in [
        ("deny", Net::Deny),
        ("openvibe-only", Net::OpenvibeOnly),
        ("public", Net::Public),
    ] {
        assert_eq!(accepted(with("", "net", json!(text))).net, net);
        assert_eq!(Net::parse(text), Some(net));
        assert_eq!(net.as_str(), text);
        assert_eq!(serde_json::to_value(net).expect("json"), json!(text));
    }
}

#[test]
fn unknown_net_mode_is_rejected() {
    for bad in [
        "",
        "Deny",
        "PUBLIC",
        "openvibe_only",
        "openvibeOnly",
        "allow",
        "none",
        "public ",
    ] {
        invalid(with("", "net", json!(bad)));
        assert_eq!(Net::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn read_head_reads_a_valid_mode_and_falls_back_to_deny() {
    assert_eq!(head(&json!({ "net": "public" })).net, Net::Public);
    assert_eq!(
        head(&json!({ "net": "openvibe-only" })).net,
        Net::OpenvibeOnly
    );
    assert_eq!(head(&json!({ "net": "everything" })).net, Net::Deny);
    assert_eq!(head(&json!({ "net": 1 })).net, Net::Deny);
    assert_eq!(head(&json!({})).net, Net::Deny);
}

// ---- input names ----------------------------------------------------------------------

#[test]
fn names_of_one_to_eight_components_pass() {
    for depth in 1..=8 {
        let mut parts = vec!["d"; depth - 1];
        parts.push("f.txt");
        let name = parts.join("/");
        accepted(names_job(&[&name]));
        assert!(check_input_name(&name).is_ok(), "{name}");
    }
}

#[test]
fn a_name_of_nine_components_is_rejected() {
    let name = format!("{}f.txt", "d/".repeat(8));
    assert_eq!(name.split('/').count(), 9);
    invalid_saying(names_job(&[&name]), "components");
}

#[test]
fn component_length_64_passes_65_is_rejected() {
    let c64 = "c".repeat(64);
    let c65 = "c".repeat(65);
    accepted(names_job(&[&c64]));
    accepted(names_job(&[&format!("{c64}/{c64}")]));
    invalid_saying(names_job(&[&c65]), "longer than 64");
    invalid_saying(names_job(&[&format!("d/{c65}")]), "longer than 64");
}

#[test]
fn dot_and_dot_dot_components_are_rejected() {
    for bad in [
        ".",
        "..",
        "./a",
        "a/.",
        "../a",
        "a/../b",
        "a/..",
        "../../etc/passwd",
    ] {
        invalid(names_job(&[bad]));
        assert!(check_input_name(bad).is_err(), "{bad:?}");
    }
    // Dots inside a component are fine.
    accepted(names_job(&["...", ".env", "a..b", "..a"]));
}

#[test]
fn empty_components_are_rejected() {
    for bad in ["", "/a", "a/", "a//b", "/", "//", "/etc/passwd"] {
        invalid(names_job(&[bad]));
        assert!(check_input_name(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn characters_outside_the_set_are_rejected() {
    for bad in [
        "a\\b",
        "..\\x",
        "a b",
        " a",
        "a\t",
        "é.js",
        "a\u{0}b",
        "a\nb",
        "a:b",
        "a*b",
        "~",
        "a\u{200b}",
        "Ａ",
        "a?b",
        "$HOME",
    ] {
        invalid(names_job(&[bad]));
        assert!(check_input_name(bad).is_err(), "{bad:?}");
    }
    accepted(names_job(&["A-Z_a.z-0.9"]));
}

#[test]
fn duplicate_names_are_rejected_also_case_insensitively() {
    invalid_saying(names_job(&["a.txt", "a.txt"]), "twice");
    invalid_saying(names_job(&["a.txt", "A.TXT"]), "twice");
    invalid_saying(names_job(&["tools/COUNT.js"]), "twice");
    invalid_saying(names_job(&["d/x", "D/x"]), "twice");
}

#[test]
fn a_name_cannot_be_both_file_and_folder() {
    invalid_saying(names_job(&["a", "a/b.js"]), "both a file and a folder");
    invalid_saying(names_job(&["a/b.js", "a"]), "both a file and a folder");
    invalid_saying(names_job(&["a/b", "a/b/c/d"]), "both a file and a folder");
    invalid_saying(names_job(&["tools"]), "both a file and a folder");
    invalid_saying(names_job(&["A", "a/b.js"]), "both a file and a folder");
    accepted(names_job(&["a/b", "a/c", "ab/c", "a.b/c"]));
}

// ---- sha256 and base64 ----------------------------------------------------------------

#[test]
fn sha256_must_be_64_lowercase_hex() {
    let good = sha_hex(ENTRY_CODE);
    accepted(with("/inputs/0", "sha256", json!(good)));
    let bad = [
        good.to_uppercase(),
        format!("{}A", &good[..63]),
        good[..63].to_string(),
        format!("{good}0"),
        format!("{}g", &good[..63]),
        format!("{} ", &good[..63]),
        format!("0x{}", &good[..62]),
        String::new(),
        "é".repeat(32),
    ];
    for s in bad {
        invalid_saying(with("/inputs/0", "sha256", json!(s)), "sha256");
    }
}

#[test]
fn sha256_is_not_compared_at_validation() {
    // A wrong digest is well formed; the mismatch is `integrity`, found when the bytes are laid out.
    let v = accepted(with("/inputs/0", "sha256", json!("0".repeat(64))));
    assert_eq!(v.inputs[0].sha256, [0u8; 32]);
}

#[test]
fn invalid_base64_is_rejected() {
    for bad in [
        "!!!!", "abc", "YQ", "YQ=", "Y Q==", "YQ==\n", "YQ==YQ==", "-_8=",
    ] {
        invalid_saying(
            with("/inputs/0", "content_base64", json!(bad)),
            "content_base64",
        );
    }
}

#[test]
fn empty_content_is_allowed() {
    let v = accepted(with_inputs(vec![
        carried(ENTRY, ENTRY_CODE),
        carried("empty.txt", b""),
    ]));
    assert_eq!(v.inputs[1].content.as_deref(), Some(&b""[..]));
}

#[test]
fn media_id_charset() {
    let mut input = by_reference("a.txt");
    input["media_id"] = json!("med_8f:A.b-c");
    accepted(with_inputs(vec![carried(ENTRY, ENTRY_CODE), input.clone()]));
    for bad in ["", ".", "..", "med 1", "../x", "m/1", &"m".repeat(129)] {
        input["media_id"] = json!(bad);
        invalid_saying(
            with_inputs(vec![carried(ENTRY, ENTRY_CODE), input.clone()]),
            "media_id",
        );
    }
}

// ---- inputs: count and sizes ----------------------------------------------------------

fn many_inputs(count: usize) -> Value {
    let mut inputs = vec![carried(ENTRY, ENTRY_CODE)];
    inputs.extend((1..count).map(|i| carried(&format!("f{i}.txt"), b"x")));
    with_inputs(inputs)
}

#[test]
fn sixty_four_inputs_pass_sixty_five_are_rejected() {
    assert_eq!(accepted(many_inputs(64)).inputs.len(), 64);
    invalid_saying(many_inputs(65), "at most 64");
}

#[test]
fn no_inputs_is_rejected() {
    invalid_saying(with_inputs(vec![]), "inputs");
}

#[test]
fn total_carried_bytes_over_one_mib_are_rejected() {
    let mib = 1024 * 1024;
    let half = vec![b'a'; mib / 2];
    // Exactly 1 MiB carried in all passes (the entry's bytes count too).
    let rest = vec![b'b'; mib - mib / 2 - ENTRY_CODE.len()];
    accepted(with_inputs(vec![
        carried(ENTRY, ENTRY_CODE),
        carried("a.txt", &half),
        carried("b.txt", &rest),
    ]));
    let over = vec![b'b'; mib - mib / 2 - ENTRY_CODE.len() + 1];
    invalid_saying(
        with_inputs(vec![
            carried(ENTRY, ENTRY_CODE),
            carried("a.txt", &half),
            carried("b.txt", &over),
        ]),
        "1 MiB",
    );
}

#[test]
fn one_input_over_one_mib_is_rejected() {
    let mib = 1024 * 1024;
    accepted(with_inputs(vec![
        by_reference(ENTRY),
        carried("big.txt", &vec![b'a'; mib]),
    ]));
    invalid(with_inputs(vec![
        by_reference(ENTRY),
        carried("big.txt", &vec![b'a'; mib + 1]),
    ]));
    // Far over: refused before decoding.
    invalid_saying(
        with_inputs(vec![
            by_reference(ENTRY),
            carried("big.txt", &vec![b'a'; 4 * mib]),
        ]),
        "1 MiB",
    );
}

#[test]
fn inputs_by_reference_do_not_count_towards_the_carried_total() {
    let v = accepted(with_inputs(vec![
        by_reference(ENTRY),
        by_reference("b.txt"),
    ]));
    assert!(v.inputs.iter().all(|i| i.content.is_none()));
}

#[test]
fn js_input_of_64_kib_passes_one_byte_more_is_rejected() {
    let kib64 = 64 * 1024;
    let code = vec![b'/'; kib64];
    accepted(with_inputs(vec![carried(ENTRY, &code)]));
    accepted(with_inputs(vec![
        carried(ENTRY, ENTRY_CODE),
        carried("lib/util.js", &code),
    ]));
    let code = vec![b'/'; kib64 + 1];
    invalid_saying(with_inputs(vec![carried(ENTRY, &code)]), "64 KiB");
    invalid_saying(
        with_inputs(vec![
            carried(ENTRY, ENTRY_CODE),
            carried("lib/util.js", &code),
        ]),
        "64 KiB",
    );
    // The 64 KiB cap is for .js; other text may be larger.
    accepted(with_inputs(vec![
        carried(ENTRY, ENTRY_CODE),
        carried("data.json", &vec![b' '; kib64 + 1]),
    ]));
}

#[test]
fn invalid_utf8_is_rejected() {
    for bytes in [&b"\xff"[..], b"ok\xc3", b"\xed\xa0\x80", b"a\x80b"] {
        invalid_saying(
            with_inputs(vec![carried(ENTRY, ENTRY_CODE), carried("a.txt", bytes)]),
            "UTF-8",
        );
        invalid_saying(with_inputs(vec![carried(ENTRY, bytes)]), "UTF-8");
    }
    accepted(with_inputs(vec![
        carried(ENTRY, ENTRY_CODE),
        carried("a.txt", "ünïcödé ✓ 🦀".as_bytes()),
    ]));
}

#[test]
fn nul_bytes_are_rejected() {
    for bytes in [&b"\0"[..], b"a\0b", b"code();\0"] {
        invalid_saying(
            with_inputs(vec![carried(ENTRY, ENTRY_CODE), carried("a.txt", bytes)]),
            "NUL",
        );
        invalid_saying(with_inputs(vec![carried(ENTRY, bytes)]), "NUL");
    }
}

#[test]
fn check_input_content_on_its_own() {
    assert!(check_input_content("a.js", &vec![b'a'; MAX_JS_BYTES]).is_ok());
    assert!(check_input_content("a.js", &vec![b'a'; MAX_JS_BYTES + 1]).is_err());
    assert!(check_input_content("a.txt", &vec![b'a'; MAX_INPUTS_TOTAL_BYTES]).is_ok());
    assert!(check_input_content("a.txt", &vec![b'a'; MAX_INPUTS_TOTAL_BYTES + 1]).is_err());
    assert!(check_input_content("a.txt", b"\xfe").is_err());
    assert!(check_input_content("a.txt", b"\0").is_err());
    assert!(check_input_content("a.txt", b"").is_ok());
}

// ---- the result -----------------------------------------------------------------------

/// The top-level keys of the serialized result, in the order they were written.
fn result_keys(r: &JobResult) -> Vec<String> {
    let text = serde_json::to_string(r).expect("json");
    let value: Value = serde_json::from_str(&text).expect("object");
    let mut keys: Vec<String> = value.as_object().expect("object").keys().cloned().collect();
    // A parsed map may be sorted; the text keeps the written order.
    keys.sort_by_key(|k| text.find(&format!("\"{k}\":")).unwrap_or(usize::MAX));
    keys
}

const SPEC_ORDER: [&str; 16] = [
    "job_id",
    "status",
    "reason",
    "message",
    "output",
    "stderr",
    "stderr_truncated",
    "exit_code",
    "signal",
    "wall_ms",
    "cpu_ms",
    "mem_peak_bytes",
    "net",
    "egress",
    "runner",
    "node",
];

fn output_text(text: &str) -> JsonText {
    JsonText::parse(text, DuplicateKeys::Keep).expect("json")
}

fn ok_result() -> JobResult {
    JobResult {
        job_id: "job_01JD3".into(),
        status: Status::Ok,
        reason: None,
        message: None,
        output: Some(output_text(r#"{"words":1}"#)),
        stderr: String::new(),
        stderr_truncated: false,
        exit_code: Some(0),
        signal: None,
        wall_ms: 61,
        cpu_ms: 48,
        mem_peak_bytes: 41_234_432,
        net: Net::Deny,
        egress: vec![],
        runner: RUNNER.into(),
        node: Some("v24.22.3".into()),
    }
}

#[test]
fn result_serializes_with_the_spec_field_names_and_order() {
    let r = ok_result();
    assert_eq!(result_keys(&r), SPEC_ORDER);
    let expected = r#"{"job_id":"job_01JD3","status":"ok","reason":null,"message":null,"output":{"words":1},"stderr":"","stderr_truncated":false,"exit_code":0,"signal":null,"wall_ms":61,"cpu_ms":48,"mem_peak_bytes":41234432,"net":"deny","egress":[],"runner":"openvibe-skill-runner@1.0.0","node":"v24.22.3"}"#;
    assert_eq!(serde_json::to_string(&r).expect("json"), expected);
    let back: JobResult = serde_json::from_str(expected).expect("round trip");
    assert_eq!(back, r);
}

#[test]
fn output_is_absent_unless_set() {
    let mut r = ok_result();
    r.output = None;
    let keys = result_keys(&r);
    assert!(!keys.iter().any(|k| k == "output"));
    let expected: Vec<&str> = SPEC_ORDER.into_iter().filter(|k| *k != "output").collect();
    assert_eq!(keys, expected);
    // `output: null` from a tool that printed `null` is still present.
    r.output = Some(output_text("null"));
    let text = serde_json::to_string(&r).expect("json");
    assert!(text.contains(r#""output":null"#));
    // And read back (the journal), it is still there: `null` is the tool's answer.
    let back: JobResult = serde_json::from_str(&text).expect("read back");
    assert_eq!(back.output.as_ref().map(JsonText::as_str), Some("null"));
}

#[test]
fn output_is_read_back_as_written() {
    let mut r = ok_result();
    let written = r#"{"zeta":1,"id":1234567890123456789012,"alpha":1.0000000000000002,"neg":-0,"e":"\u00e9\/"}"#;
    r.output = Some(output_text(written));
    let text = serde_json::to_string(&r).expect("json");
    assert!(text.contains(&format!(r#""output":{written},"#)), "{text}");
    let back: JobResult = serde_json::from_str(&text).expect("read back");
    assert_eq!(back.output.as_ref().map(JsonText::as_str), Some(written));
    assert_eq!(back, r);
}

#[test]
fn statuses_serialize_snake_case() {
    for (status, text) in [
        (Status::Ok, "ok"),
        (Status::Error, "error"),
        (Status::Limit, "limit"),
        (Status::Integrity, "integrity"),
        (Status::Rejected, "rejected"),
        (Status::Expired, "expired"),
        (Status::Cancelled, "cancelled"),
        (Status::Internal, "internal"),
    ] {
        assert_eq!(serde_json::to_value(status).expect("json"), json!(text));
        assert_eq!(status.as_str(), text);
        let back: Status = serde_json::from_value(json!(text)).expect("parse");
        assert_eq!(back, status);
    }
}

#[test]
fn rejected_result_for_a_bad_job() {
    let mut raw = with("", "net", json!("public"));
    set(&mut raw, "", "limits", json!({ "wall_ms": 30001 }));
    let rejection = check(raw.clone()).expect_err("above cap");
    let h = head(&raw);
    let r = JobResult::rejected(&h.job_id, &rejection, h.net, Some("v24.22.3"));
    assert_eq!(r.job_id, "job_01JD3");
    assert_eq!(r.status, Status::Rejected);
    assert_eq!(r.reason, Some(Reason::LimitsAboveCap));
    assert!(r.message.as_deref().is_some_and(|m| m.contains("30001")));
    assert_eq!(r.output, None);
    assert_eq!(r.net, Net::Public);
    assert_eq!(r.runner, "openvibe-skill-runner@1.0.0");
    assert_eq!((r.wall_ms, r.cpu_ms, r.mem_peak_bytes), (0, 0, 0));
    assert_eq!(r.exit_code, None);
    let v = serde_json::to_value(&r).expect("json");
    assert_eq!(v["status"], "rejected");
    assert!(v.get("output").is_none());
}

#[test]
fn egress_record_field_names() {
    let rec = EgressRecord {
        host: "openvibe.services".into(),
        port: 443,
        allowed: true,
        bytes_out: 10,
        bytes_in: 20,
        dns: None,
    };
    assert_eq!(
        serde_json::to_string(&rec).expect("json"),
        r#"{"host":"openvibe.services","port":443,"allowed":true,"bytes_out":10,"bytes_in":20}"#
    );
    let lookup = EgressRecord {
        host: "nothing.example.org".into(),
        port: 53,
        allowed: true,
        bytes_out: 0,
        bytes_in: 0,
        dns: Some(LookupOutcome::Nxdomain),
    };
    assert_eq!(
        serde_json::to_string(&lookup).expect("json"),
        r#"{"host":"nothing.example.org","port":53,"allowed":true,"bytes_out":0,"bytes_in":0,"dns":"nxdomain"}"#
    );
}

#[test]
fn rejection_messages_do_not_echo_long_attacker_text() {
    let long = format!("x{}", "y".repeat(10_000));
    let r = invalid(with("", "class", json!(long)));
    assert!(r.message.len() < 300, "{} bytes", r.message.len());
    let r = invalid(with("/args", "tool", json!(long)));
    assert!(r.message.len() < 300, "{} bytes", r.message.len());
}

// ---- shapes and duplicates (found by fuzzing) -------------------------------------

fn parse_text(text: &str) -> Result<ValidJob, Rejection> {
    parse_job(text.as_bytes(), &Bounds::default())
}

#[test]
fn duplicate_keys_are_refused_at_every_level() {
    let good = serde_json::to_string(&good_job()).expect("json");
    assert!(parse_text(&good).is_ok());
    let body = good.trim_end_matches('}');
    for extra in [
        r#","net":"deny","net":"public""#,
        r#","job_id":"other""#,
        r#","args":{"tool":"t","entry":"a.js","input":1}"#,
    ] {
        let text = format!("{body}{extra}}}");
        let r = parse_text(&text).expect_err(extra);
        assert_eq!(r.reason.as_str(), "invalid_job");
        assert!(r.message.contains("duplicate"), "{extra}: {}", r.message);
    }
    let mut j = good_job();
    j["limits"] = json!({"wall_ms": 1000});
    let text = serde_json::to_string(&j)
        .expect("json")
        .replace(r#""wall_ms":1000"#, r#""wall_ms":1000,"wall_ms":30000"#);
    assert!(parse_text(&text).is_err(), "duplicate inside limits");
}

#[test]
fn objects_must_be_objects_and_net_a_string() {
    let z = "0".repeat(64);
    let arrays = format!(
        r#"{{"job_id":"j","class":"function","artifact":"openvibe-skill-runner@1.0.0","args":["t","a.js",null],"inputs":[["a.js",null,"{z}",null]],"limits":[1000,16777216]}}"#
    );
    assert_eq!(
        parse_text(&arrays).expect_err("arrays").reason.as_str(),
        "invalid_job"
    );
    for (key, value) in [
        ("net", json!({"deny": null})),
        ("net", json!({"public": null})),
        ("limits", json!([1000, 16777216])),
        ("args", json!(["t", "a.js", null])),
        ("inputs", json!({"name": "a.js"})),
    ] {
        let mut j = good_job();
        j[key] = value.clone();
        let text = serde_json::to_string(&j).expect("json");
        let r = parse_text(&text).expect_err(key);
        assert_eq!(r.reason.as_str(), "invalid_job", "{key}: {value}");
        assert!(
            parse_job_value(j, &Bounds::default()).is_err(),
            "{key}: {value}"
        );
    }
    assert!(parse_text("[]").is_err());
}

#[test]
fn rejection_messages_carry_no_invisible_characters() {
    let mut j = good_job();
    j["\u{202e}evil\u{200b}"] = json!(1);
    let r = parse_text(&serde_json::to_string(&j).expect("json")).expect_err("unknown");
    assert!(r.message.is_ascii(), "{}", r.message);
    assert!(!r.message.chars().any(|c| c.is_control()));
}

#[test]
fn the_job_id_is_read_alone_and_as_written() {
    use super::{job_id_text, IdText};
    assert_eq!(
        job_id_text(br#"{"job_id": "a b"}"#),
        IdText::Once(r#""a b""#)
    );
    assert_eq!(job_id_text(br#"{"job_id": null}"#), IdText::Once("null"));
    assert_eq!(job_id_text(br#"{"job_id": 5}"#), IdText::Once("5"));
    assert_eq!(
        job_id_text(br#"{"job_id": [1, [2]]}"#),
        IdText::Once("[1, [2]]")
    );
    assert_eq!(job_id_text(br#"{"class": "function"}"#), IdText::Missing);
    assert_eq!(
        job_id_text(b"[1]"),
        IdText::Missing,
        "an array's first element is no job_id"
    );
    assert_eq!(job_id_text(b"{"), IdText::Missing);
    // Other fields, even given twice, do not hide the id, and are not built.
    let dup = br#"{"job_id": "dup-key-job", "net": "deny", "net": "public"}"#;
    assert_eq!(job_id_text(dup), IdText::Once(r#""dup-key-job""#));
    assert_eq!(
        job_id_text(br#"{"job_id": "a", "x": 1, "job_id": "b"}"#),
        IdText::Twice
    );
    let mut big = br#"{"job_id": 0, "x": ["#.to_vec();
    big.extend(std::iter::repeat_n(&b"0,"[..], 100_000).flatten());
    big.extend(b"0]}");
    assert_eq!(job_id_text(&big), IdText::Once("0"));
}

#[test]
fn another_key_with_a_lone_surrogate_leaves_the_job_its_id_and_is_rejected() {
    // Valid JSON (RFC 8259's grammar allows it; JSON.parse reads it): the job has its one
    // id, so it is answered with its rejected result, not refused as not JSON.
    let t = serde_json::to_string(&good_job()).expect("json");
    for key in [r#""\ud800""#, r#""x\udfff""#] {
        let text = t.replacen('{', &format!("{{{key}:0,"), 1);
        let r = admit(text.as_bytes(), &Bounds::default()).expect_err(key);
        assert_eq!(
            r.head.as_ref().map(|h| h.job_id.as_str()),
            Ok(good_job()["job_id"].as_str().expect("an id")),
            "{key}: {r:?}"
        );
        assert_eq!(r.rejection.reason, Reason::InvalidJob, "{key}: {r:?}");
    }
}

#[test]
fn a_fraction_is_told_by_the_numbers_text() {
    for whole in [
        "0",
        "-0",
        "10000",
        "10000.0",
        "1e4",
        "1E+4",
        "1.5e1",
        "0.25e2",
        "100.00e-2",
        "0e-999",
        "-0.0e5",
        "1e99999999999999999999",
    ] {
        assert!(!has_fraction(whole), "{whole}");
    }
    for fraction in [
        "0.5",
        "1e-1",
        "30000.00000000000000001",
        "1.00000000000000000001e4",
        "1e-99999999999999999999",
        "-0.5",
        "125e-3",
        "1.25e1",
    ] {
        assert!(has_fraction(fraction), "{fraction}");
    }
}

#[test]
fn a_limit_is_read_by_its_value_and_any_number_above_a_cap_is_above_it() {
    let text_with = |limits: &str| {
        let mut v = good_job();
        v.as_object_mut().expect("an object").remove("limits");
        let t = serde_json::to_string(&v).expect("json");
        t.replacen('{', &format!("{{\"limits\":{limits},"), 1)
    };
    let door = |limits: &str| admit(text_with(limits).as_bytes(), &Bounds::default());
    for (limits, wall, mem) in [
        (r#"{"wall_ms":1e4}"#, 10_000, MEM_BYTES_DEFAULT),
        (
            r#"{"wall_ms":30000.0,"mem_bytes":1.6777216e7}"#,
            30_000,
            16_777_216,
        ),
        (
            r#"{"wall_ms":null,"mem_bytes":268435456E0}"#,
            WALL_MS_DEFAULT,
            MEM_BYTES_CAP,
        ),
    ] {
        let j = door(limits).unwrap_or_else(|r| panic!("{limits}: {r:?}"));
        assert_eq!((j.wall_ms, j.mem_bytes), (wall, mem), "{limits}");
    }
    for (limits, key) in [
        (r#"{"wall_ms":1e9}"#, "wall_ms"),
        (r#"{"wall_ms":30001.0}"#, "wall_ms"),
        (r#"{"mem_bytes":1e12}"#, "mem_bytes"),
        (r#"{"mem_bytes":99999999999999999999999}"#, "mem_bytes"),
        (r#"{"wall_ms":1e300}"#, "wall_ms"),
        // Past what a double holds.
        (r#"{"wall_ms":1e400}"#, "wall_ms"),
        (r#"{"mem_bytes":1E+309}"#, "mem_bytes"),
    ] {
        let r = door(limits).expect_err(limits);
        assert_eq!(
            r.rejection.reason,
            Reason::LimitsAboveCap,
            "{limits}: {r:?}"
        );
        assert!(
            r.rejection.message.contains(&format!("limits.{key}")),
            "{limits}: {r:?}"
        );
        assert_eq!(r.head.map(|h| h.job_id), Ok("job_01JD3".to_string()));
    }
    let huge = door(r#"{"mem_bytes":99999999999999999999999}"#).expect_err("above");
    assert!(
        huge.rejection
            .message
            .contains("18446744073709551615 or more is above the cap"),
        "the message does not show a number that was not written: {huge:?}"
    );
    for limits in [
        r#"{"wall_ms":1.5}"#,
        r#"{"wall_ms":-5}"#,
        r#"{"mem_bytes":-1e3}"#,
        r#"{"mem_bytes":16777216.5}"#,
        r#"{"wall_ms":"ten"}"#,
        r#"{"wall_ms":true}"#,
        r#"{"wall_ms":-1e400}"#,
        r#"{"wall_ms":[1]}"#,
        r#"{"wall_ms":{"a":1}}"#,
        r#"{"mem_bytes":-0.5}"#,
        // Fractions a double does not hold: read as a double, each is a whole number.
        r#"{"wall_ms":30000.00000000000000001}"#,
        r#"{"mem_bytes":268435456.000000000001}"#,
        r#"{"wall_ms":1.00000000000000000001e4}"#,
        r#"{"wall_ms":1e-400}"#,
    ] {
        let r = door(limits).expect_err(limits);
        assert_eq!(r.rejection.reason, Reason::InvalidJob, "{limits}: {r:?}");
        // One position, the document's (the limit's value is past its 20th column).
        let m = &r.rejection.message;
        assert_eq!(m.matches(" at line ").count(), 1, "{limits}: {r:?}");
        let column: usize = m
            .rsplit("column ")
            .next()
            .and_then(|c| c.trim().parse().ok())
            .unwrap_or(0);
        assert!(column > 20, "{limits}: {m}");
    }
    // ttl_ms is read the same way.
    let ttl = |t: &str| {
        let text = text_with("{}").replacen('{', &format!("{{\"ttl_ms\":{t},"), 1);
        admit(text.as_bytes(), &Bounds::default())
    };
    assert_eq!(ttl("6e4").expect("a minute").ttl_ms, 60_000);
    assert_eq!(
        ttl("1e30").expect_err("above").rejection.reason,
        Reason::InvalidJob
    );
    assert_eq!(
        ttl("0.5").expect_err("a fraction").rejection.reason,
        Reason::InvalidJob
    );
}
