//! What the fuzz targets share: the invariants every accepted job must hold, the checks on
//! every rejection, and a second, independent reading of SPEC.md's Job and Inputs rules
//! ([`reference_verdict`]) that the structured target compares the parser against.
//!
//! Written from SPEC.md (and the README's decisions where SPEC.md leaves a bound open), not
//! from `src/job.rs`, so that a rule the parser forgets or adds shows up as a disagreement.

use base64::Engine as _;
use openvibe_skill_runner::job::{
    self, Bounds, Reason, Rejection, ValidJob, ARTIFACT, MAX_INPUTS, MAX_INPUTS_TOTAL_BYTES, MAX_JS_BYTES,
    MEM_BYTES_CAP, MEM_BYTES_MIN, TTL_MS_CAP, WALL_MS_CAP,
};
use openvibe_skill_runner::json_text::{DuplicateKeys, JsonText};
use serde_json::{Map, Value};
use std::collections::HashSet;

/// SPEC.md's job is JSON objects and `net` a string. serde would also read a struct from an
/// array of its fields and an enum from a one-key object; the parser refuses both, and the
/// targets ask it to. (Duplicate keys: every job's text takes the one door, `admit`,
/// which refuses them; `job_parser` checks that.)
pub const STRICT_SHAPES: bool = true;

/// A rejection's message goes back to the dispatcher: bounded, and never a raw control
/// character (no terminal escape, no forged log line).
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// SPEC.md's input name rule, written out: 1-8 components, each `[A-Za-z0-9._-]{1,64}`, none
/// `.` or `..`.
pub fn name_is_valid(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    (1..=8).contains(&parts.len())
        && parts.iter().all(|p| {
            (1..=64).contains(&p.len())
                && *p != "."
                && *p != ".."
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        })
}

/// The properties an accepted name must have, asserted one by one so a failure says which.
pub fn assert_name_safe(name: &str) {
    assert!(!name.is_empty(), "accepted an empty name");
    assert!(!name.starts_with('/'), "accepted an absolute name {name:?}");
    assert!(
        !name.ends_with('/'),
        "accepted a name ending in '/' {name:?}"
    );
    let parts: Vec<&str> = name.split('/').collect();
    assert!(
        parts.len() <= 8,
        "accepted {} components: {name:?}",
        parts.len()
    );
    for part in parts {
        assert!(!part.is_empty(), "accepted an empty component: {name:?}");
        assert!(
            part != "." && part != "..",
            "accepted a traversing name {name:?}"
        );
        assert!(part.len() <= 64, "accepted a component over 64: {name:?}");
        assert!(
            part.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')),
            "accepted a character outside [A-Za-z0-9._-]: {name:?}"
        );
    }
}

fn job_id_is_valid(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn tool_is_valid(tool: &str) -> bool {
    let b = tool.as_bytes();
    (1..=32).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

fn media_id_is_valid(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id != "."
        && id != ".."
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b':'))
}

fn label_is_valid(s: &str) -> bool {
    (1..=256).contains(&s.len()) && !s.chars().any(char::is_control)
}

fn is_code_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".js") || lower.ends_with(".mjs") || lower.ends_with(".cjs")
}

fn content_is_valid(name: &str, bytes: &[u8]) -> bool {
    bytes.len() <= MAX_INPUTS_TOTAL_BYTES
        && (!is_code_name(name) || bytes.len() <= MAX_JS_BYTES)
        && std::str::from_utf8(bytes).is_ok()
        && !bytes.contains(&0)
}

/// Everything an accepted job must satisfy, whatever the bytes it came from.
pub fn assert_valid_job(job: &ValidJob, bounds: &Bounds) {
    assert!(job_id_is_valid(&job.job_id), "job_id {:?}", job.job_id);
    assert!(job::valid_job_id(&job.job_id));
    assert!(tool_is_valid(&job.tool), "tool {:?}", job.tool);
    for label in [&job.subject, &job.project].into_iter().flatten() {
        assert!(label_is_valid(label), "label {label:?}");
    }
    assert!(
        (1..=WALL_MS_CAP).contains(&job.wall_ms),
        "wall_ms {}",
        job.wall_ms
    );
    assert!(
        (MEM_BYTES_MIN..=MEM_BYTES_CAP).contains(&job.mem_bytes),
        "mem_bytes {}",
        job.mem_bytes
    );
    assert!(
        (1..=TTL_MS_CAP).contains(&job.ttl_ms),
        "ttl_ms {}",
        job.ttl_ms
    );
    assert!(job.input_json.len() <= bounds.max_input_json_bytes);
    // Exactly one JSON value, within the depth limit, no key twice in an object.
    let input = std::str::from_utf8(&job.input_json).expect("input_json is UTF-8");
    let kept = JsonText::parse(input, DuplicateKeys::Refuse).expect("input_json is JSON");
    assert_eq!(kept.as_str(), input, "input_json has whitespace around it");

    assert!((1..=MAX_INPUTS).contains(&job.inputs.len()));
    assert!(job.entry.ends_with(".js"), "entry {:?}", job.entry);
    assert!(
        job.inputs.iter().any(|i| i.name == job.entry),
        "entry {:?} is none of the inputs",
        job.entry
    );
    let mut folded = HashSet::new();
    let mut carried = 0usize;
    for input in &job.inputs {
        assert_name_safe(&input.name);
        assert!(job::check_input_name(&input.name).is_ok());
        assert!(
            folded.insert(input.name.to_ascii_lowercase()),
            "two inputs named {:?} (case-insensitively)",
            input.name
        );
        assert_eq!(input.sha256_hex().len(), 64);
        if let Some(id) = &input.media_id {
            assert!(media_id_is_valid(id), "media_id {id:?}");
        }
        if let Some(bytes) = &input.content {
            carried += bytes.len();
            assert!(
                content_is_valid(&input.name, bytes),
                "content of {:?}",
                input.name
            );
        }
    }
    assert!(carried <= MAX_INPUTS_TOTAL_BYTES, "{carried} bytes carried");
    // No name is both a file and a folder of another (`a` and `a/b`).
    for input in &job.inputs {
        let lower = input.name.to_ascii_lowercase();
        let mut at = 0;
        while let Some(slash) = lower[at..].find('/') {
            let folder = &lower[..at + slash];
            assert!(
                !folded.contains(folder),
                "{:?} sits under another input",
                input.name
            );
            at += slash + 1;
        }
    }
}

/// Every rejection: a known reason, and a message fit to send back.
pub fn assert_rejection_sane(r: &Rejection) {
    assert!(
        matches!(r.reason, Reason::InvalidJob | Reason::LimitsAboveCap),
        "reason {:?}",
        r.reason
    );
    assert!(!r.message.is_empty());
    assert!(
        r.message.len() <= MAX_MESSAGE_BYTES,
        "a {}-byte rejection message",
        r.message.len()
    );
    assert!(
        !r.message.chars().any(char::is_control),
        "a control character in the rejection message {:?}",
        r.message
    );
}

/// Parses, checks what comes out, and returns whether the job was accepted.
pub fn check_outcome(outcome: &Result<ValidJob, Rejection>, bounds: &Bounds) -> bool {
    match outcome {
        Ok(job) => {
            assert_valid_job(job, bounds);
            true
        }
        Err(r) => {
            assert_rejection_sane(r);
            false
        }
    }
}

/// SPEC.md's verdict on a job given as a JSON value: `Ok` when every rule holds, else the
/// first broken rule in words. Independent of `src/job.rs` on purpose.
pub fn reference_verdict(raw: &Value, bounds: &Bounds) -> Result<(), String> {
    let job = object(raw, "job", JOB_FIELDS)?;
    let job_id = string(job, "job_id")?.ok_or("job_id missing")?;
    if !job_id_is_valid(job_id) {
        return Err("job_id".into());
    }
    if string(job, "class")?.ok_or("class missing")? != "function" {
        return Err("class".into());
    }
    if string(job, "artifact")?.ok_or("artifact missing")? != ARTIFACT {
        return Err("artifact".into());
    }
    for field in ["subject", "project"] {
        if let Some(label) = string(job, field)? {
            if !label_is_valid(label) {
                return Err(field.into());
            }
        }
    }

    let args = object(job.get("args").ok_or("args missing")?, "args", ARGS_FIELDS)?;
    if !tool_is_valid(string(args, "tool")?.ok_or("tool missing")?) {
        return Err("args.tool".into());
    }
    let entry = string(args, "entry")?.ok_or("entry missing")?;
    let input = args.get("input").ok_or("args.input missing")?;
    if serde_json::to_vec(input).map_err(|e| e.to_string())?.len() > bounds.max_input_json_bytes {
        return Err("args.input too large".into());
    }

    match job.get("net") {
        None => {}
        Some(Value::String(s)) if matches!(s.as_str(), "deny" | "openvibe-only" | "public") => {}
        Some(_) => return Err("net".into()),
    }
    let (mut wall_ms, mut mem_bytes) = (None, None);
    if let Some(limits) = job.get("limits") {
        let limits = object(limits, "limits", LIMITS_FIELDS)?;
        wall_ms = number(limits, "wall_ms")?;
        mem_bytes = number(limits, "mem_bytes")?;
    }
    if !(1..=WALL_MS_CAP).contains(&wall_ms.unwrap_or(10_000)) {
        return Err("wall_ms".into());
    }
    if !(MEM_BYTES_MIN..=MEM_BYTES_CAP).contains(&mem_bytes.unwrap_or(134_217_728)) {
        return Err("mem_bytes".into());
    }
    if !(1..=TTL_MS_CAP).contains(&number(job, "ttl_ms")?.unwrap_or(120_000)) {
        return Err("ttl_ms".into());
    }

    let Some(Value::Array(inputs)) = job.get("inputs") else {
        return Err("inputs is not an array".into());
    };
    if inputs.is_empty() || inputs.len() > MAX_INPUTS {
        return Err("input count".into());
    }
    let mut names: Vec<String> = Vec::new();
    let mut carried = 0usize;
    for input in inputs {
        let input = object(input, "input", INPUT_FIELDS)?;
        let name = string(input, "name")?.ok_or("name missing")?;
        if !name_is_valid(name) {
            return Err(format!("name {name:?}"));
        }
        let folded = name.to_ascii_lowercase();
        if names.iter().any(|n| n.to_ascii_lowercase() == folded) {
            return Err(format!("duplicate {name:?}"));
        }
        let sha = string(input, "sha256")?.ok_or("sha256 missing")?;
        if sha.len() != 64 || !sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err("sha256".into());
        }
        if let Some(id) = string(input, "media_id")? {
            if !media_id_is_valid(id) {
                return Err("media_id".into());
            }
        }
        if let Some(b64) = string(input, "content_base64")? {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| format!("base64: {e}"))?;
            carried += bytes.len();
            if carried > MAX_INPUTS_TOTAL_BYTES || !content_is_valid(name, &bytes) {
                return Err(format!("content of {name:?}"));
            }
        }
        names.push(name.to_string());
    }
    let folded: HashSet<String> = names.iter().map(|n| n.to_ascii_lowercase()).collect();
    for name in &names {
        let lower = name.to_ascii_lowercase();
        let parts: Vec<&str> = lower.split('/').collect();
        for end in 1..parts.len() {
            if folded.contains(&parts[..end].join("/")) {
                return Err(format!("{name:?} under a file"));
            }
        }
    }
    if !entry.ends_with(".js") || !names.iter().any(|n| n == entry) {
        return Err("entry".into());
    }
    Ok(())
}

const JOB_FIELDS: &[&str] = &[
    "job_id", "class", "artifact", "subject", "project", "args", "inputs", "net", "limits",
    "ttl_ms",
];
const ARGS_FIELDS: &[&str] = &["tool", "entry", "input"];
const INPUT_FIELDS: &[&str] = &["name", "media_id", "sha256", "content_base64"];
const LIMITS_FIELDS: &[&str] = &["wall_ms", "mem_bytes"];

fn object<'a>(v: &'a Value, what: &str, fields: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let map = v
        .as_object()
        .ok_or_else(|| format!("{what} is not an object"))?;
    if let Some(k) = map.keys().find(|k| !fields.contains(&k.as_str())) {
        return Err(format!("unknown field {k:?} in {what}"));
    }
    Ok(map)
}

/// A string field; absent and `null` are both "not given" (serde's `Option`).
fn string<'a>(map: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("{key} is not a string")),
    }
}

/// A non-negative integer field; absent and `null` are "not given".
fn number(map: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{key} is not a non-negative integer")),
    }
}
