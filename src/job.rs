//! The contract: the job a dispatcher submits, its validation, and the result.
//!
//! Everything here is pure: no file, no clock, no process. [`admit`] (job/door.rs) is the
//! one door from a job's bytes to a [`ValidJob`] or to the refusal the `rejected` result
//! that SPEC.md asks for is made from; [`validate`] holds the rules it applies to the
//! typed job.

use crate::json_text::{DuplicateKeys, JsonText};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

mod door;
mod result;
pub use door::{admit, job_id_text, parse_job_value, read_head, IdText, JobHead, NotAJob, Refusal};
pub use result::{EgressRecord, JobResult, LookupOutcome, Reason, Status};

/// The one artifact this runner serves.
pub const ARTIFACT: &str = "openvibe-skill-runner@1.0.0";
/// What the result's `runner` field says.
pub const RUNNER: &str = "openvibe-skill-runner@1.0.0";

pub const WALL_MS_DEFAULT: u64 = 10_000;
pub const WALL_MS_CAP: u64 = 30_000;
pub const MEM_BYTES_MIN: u64 = 16 * 1024 * 1024;
pub const MEM_BYTES_DEFAULT: u64 = 134_217_728;
pub const MEM_BYTES_CAP: u64 = 268_435_456;
pub const TTL_MS_DEFAULT: u64 = 120_000;
/// The runner's own bound on `ttl_ms`: a day. SPEC.md sets no cap; a longer one is a typo.
pub const TTL_MS_CAP: u64 = 86_400_000;
pub const INPUT_JSON_DEFAULT_CAP: usize = 256 * 1024;
/// The largest a job's whole text may be, read by `run-job` or as the daemon's request body.
pub const MAX_JOB_TEXT_BYTES: usize = 8 * 1024 * 1024;
/// The largest `runner.max_input_json_bytes` may be set to: an input of that size, 1 MiB
/// of inputs as base64 (1.4 MiB) and the rest of the job still fit in
/// [`MAX_JOB_TEXT_BYTES`], so a job under the bound can always be sent.
pub const INPUT_JSON_MAX_CAP: usize = 4 * 1024 * 1024;
pub const MAX_INPUTS: usize = 64;
pub const MAX_INPUTS_TOTAL_BYTES: usize = 1024 * 1024;

/// The refusal of a job with `n` inputs, past [`MAX_INPUTS`].
pub(crate) fn too_many_inputs(n: usize) -> Rejection {
    Rejection::invalid(format!("{n} inputs; at most {MAX_INPUTS} are allowed"))
}
pub const MAX_JS_BYTES: usize = 64 * 1024;
pub const MAX_NAME_COMPONENTS: usize = 8;
pub const MAX_COMPONENT_LEN: usize = 64;
pub const MAX_JOB_ID_LEN: usize = 64;
pub const STDOUT_CAP: usize = 64 * 1024;
pub const STDERR_KEEP: usize = 16 * 1024;

/// The job exactly as SPEC.md writes it. Unknown fields are an error at every level.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub job_id: String,
    pub class: String,
    pub artifact: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    pub args: Args,
    pub inputs: Vec<Input>,
    #[serde(default)]
    pub net: Net,
    #[serde(default)]
    pub limits: Limits,
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub ttl_ms: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    pub tool: String,
    pub entry: String,
    /// Any JSON value, kept as the text the job carried (src/json_text.rs); required
    /// (send `null` for a tool that takes nothing).
    pub input: JsonText,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_id: Option<String>,
    pub sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_base64: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Net {
    #[default]
    Deny,
    OpenvibeOnly,
    Public,
}

impl Net {
    pub fn as_str(self) -> &'static str {
        match self {
            Net::Deny => "deny",
            Net::OpenvibeOnly => "openvibe-only",
            Net::Public => "public",
        }
    }

    pub fn parse(s: &str) -> Option<Net> {
        match s {
            "deny" => Some(Net::Deny),
            "openvibe-only" => Some(Net::OpenvibeOnly),
            "public" => Some(Net::Public),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub wall_ms: Option<u64>,
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub mem_bytes: Option<u64>,
}

/// A limit (or `ttl_ms`) is a JSON number, and JSON has no integer type: it is read by its value, not
/// its spelling. `1e4` and `10000.0` are 10000; a whole number too large for 64 bits (`1e12`
/// fits, `1e20` and 99999999999999999999999 do not) reads as `u64::MAX`, above every cap,
/// so it is `limits_above_cap` as any other number above the cap is, and so does one past
/// what a double holds (`1e400`). A fraction, a negative number or anything but a number
/// (or `null`, which is the default) is refused.
fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    // Kept as its text first: serde_json refuses a number past f64's range before any
    // visitor sees it.
    let Some(raw) = Option::<Box<serde_json::value::RawValue>>::deserialize(d)? else {
        return Ok(None);
    };
    let text = raw.get();
    let in_range = serde_json::from_str::<f64>(text).is_ok();
    match text.chars().next() {
        // A JSON value that starts with a digit is a number, and a valid number fails to
        // read as a double only when it is past a double's range: above every cap.
        Some(c) if c.is_ascii_digit() && !in_range => return Ok(Some(u64::MAX)),
        Some('-') if !in_range => {
            return Err(D::Error::invalid_value(
                serde::de::Unexpected::Other("a number below a double's range"),
                &"a whole number of at least 0",
            ))
        }
        _ => {}
    }
    // A number, read as one (nothing else is built: an array or an object is refused at
    // its first byte), then by the visitor; its errors carry no position of their own.
    let number: serde_json::Number = serde_json::from_str(text).map_err(|_| {
        let unexpected = match text.chars().next() {
            Some('"') => serde::de::Unexpected::Other("a string"),
            Some('[') => serde::de::Unexpected::Seq,
            Some('{') => serde::de::Unexpected::Map,
            Some('t') => serde::de::Unexpected::Bool(true),
            Some('f') => serde::de::Unexpected::Bool(false),
            _ => serde::de::Unexpected::Other("not a number"),
        };
        D::Error::invalid_type(unexpected, &"a whole number")
    })?;
    // A fraction too small for a double (`30000.00000000000000001` reads as 30000) is still
    // a fraction: judged on the text, not on the double.
    if has_fraction(text) {
        return Err(D::Error::invalid_value(
            serde::de::Unexpected::Other("a number with a fraction"),
            &"a whole number",
        ));
    }
    serde::Deserializer::deserialize_any(number, WholeNumber).map_err(D::Error::custom)
}

/// Whether the JSON number `text` (valid JSON) has a nonzero digit after its decimal point
/// once its exponent is applied: `1.5e1` has none, `10000.0` none, `1e-1` one.
fn has_fraction(text: &str) -> bool {
    let text = text.strip_prefix('-').unwrap_or(text);
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], &text[at + 1..]),
        None => (text, "0"),
    };
    // An exponent past i64 (valid JSON) saturates; the digits are few, so any such one puts
    // every digit on one side of the point.
    let exponent: i64 =
        exponent
            .trim_start_matches('+')
            .parse()
            .unwrap_or(if exponent.starts_with('-') {
                i64::MIN
            } else {
                i64::MAX
            });
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    // The digits in order, and how many of them stand before the point.
    let before = i64::try_from(whole.len())
        .unwrap_or(i64::MAX)
        .saturating_add(exponent);
    whole
        .bytes()
        .chain(fraction.bytes())
        .enumerate()
        .any(|(i, d)| d != b'0' && i64::try_from(i).unwrap_or(i64::MAX) >= before)
}

struct WholeNumber;

impl<'de> serde::de::Visitor<'de> for WholeNumber {
    type Value = Option<u64>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a whole number")
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Option<u64>, E> {
        Ok(Some(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Option<u64>, E> {
        u64::try_from(v).map(Some).map_err(|_| {
            E::invalid_value(serde::de::Unexpected::Signed(v), &"a number of at least 0")
        })
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Option<u64>, E> {
        if v.is_finite() && v >= 0.0 && v.fract() == 0.0 {
            // `as` saturates: a whole number past 64 bits is u64::MAX.
            Ok(Some(v as u64))
        } else {
            Err(E::invalid_value(
                serde::de::Unexpected::Float(v),
                &"a whole number of at least 0",
            ))
        }
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Option<u64>, E> {
        Ok(None)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Option<u64>, E> {
        Ok(None)
    }
}

/// A limit's value in a message: a number past 64 bits was read as `u64::MAX`.
fn limit_shown(v: u64) -> String {
    if v == u64::MAX {
        format!("{v} or more")
    } else {
        v.to_string()
    }
}

/// The bounds a deployment may tune (SPEC.md: "configurable").
#[derive(Debug, Clone)]
pub struct Bounds {
    pub max_input_json_bytes: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_input_json_bytes: INPUT_JSON_DEFAULT_CAP,
        }
    }
}

/// A job that passed every rule. Its input bytes may still be unknown (cache or Media).
#[derive(Debug, Clone)]
pub struct ValidJob {
    pub job_id: String,
    pub subject: Option<String>,
    pub project: Option<String>,
    pub tool: String,
    pub entry: String,
    /// `args.input` exactly as the job carried it: what the tool reads on stdin.
    pub input_json: Vec<u8>,
    pub inputs: Vec<ValidInput>,
    pub net: Net,
    pub wall_ms: u64,
    pub mem_bytes: u64,
    pub ttl_ms: u64,
}

#[derive(Debug, Clone)]
pub struct ValidInput {
    pub name: String,
    pub media_id: Option<String>,
    /// The expected digest, decoded from lowercase hex.
    pub sha256: [u8; 32],
    /// Bytes carried in the job itself, already decoded from base64.
    pub content: Option<Vec<u8>>,
}

impl ValidInput {
    pub fn sha256_hex(&self) -> String {
        hex::encode(self.sha256)
    }
}

/// Why a job was turned away before anything ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// `invalid_job` or `limits_above_cap`.
    pub reason: Reason,
    pub message: String,
}

impl Rejection {
    fn invalid(message: impl Into<String>) -> Self {
        Rejection {
            reason: Reason::InvalidJob,
            message: message.into(),
        }
    }

    fn above_cap(message: impl Into<String>) -> Self {
        Rejection {
            reason: Reason::LimitsAboveCap,
            message: message.into(),
        }
    }
}

pub fn valid_job_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_JOB_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `^[a-z][a-z0-9_]{0,31}$`
pub fn valid_tool_name(tool: &str) -> bool {
    let b = tool.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && b[0].is_ascii_lowercase()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

/// Checks one input name; says what is wrong in words.
pub fn check_input_name(full: &str) -> Result<(), String> {
    let name = truncate_for_message(full);
    let name = name.as_str();
    if full.is_empty() {
        return Err("an input name is empty".into());
    }
    let parts: Vec<&str> = full.split('/').collect();
    if parts.len() > MAX_NAME_COMPONENTS {
        return Err(format!(
            "input name {name:?} has {} path components; at most {MAX_NAME_COMPONENTS} are allowed",
            parts.len()
        ));
    }
    for part in parts {
        if part.is_empty() {
            return Err(format!(
                "input name {name:?} is not a relative path of non-empty components (no leading, trailing or double '/')"
            ));
        }
        if part == "." || part == ".." {
            return Err(format!(
                "input name {name:?} contains {part:?}; names may not traverse"
            ));
        }
        if part.len() > MAX_COMPONENT_LEN {
            return Err(format!(
                "input name {name:?} has a component longer than {MAX_COMPONENT_LEN} characters"
            ));
        }
        if !part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(format!(
                "input name {name:?} has a character outside [A-Za-z0-9._-]"
            ));
        }
    }
    Ok(())
}

fn valid_media_id(id: &str) -> bool {
    // It becomes a URL path segment: never `.` or `..`.
    id != "."
        && id != ".."
        && !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b':'))
}

fn valid_label(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control)
}

fn parse_sha256(hex_text: &str) -> Option<[u8; 32]> {
    if hex_text.len() != 64
        || !hex_text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_text, &mut out).ok()?;
    Some(out)
}

/// The one rule a deployment tunes: `args.input`'s text is at most `bounds`' bytes.
pub fn check_input_size(len: usize, bounds: &Bounds) -> Result<(), Rejection> {
    if len > bounds.max_input_json_bytes {
        return Err(Rejection::invalid(format!(
            "args.input is {len} bytes of JSON text; at most {} are allowed",
            bounds.max_input_json_bytes
        )));
    }
    Ok(())
}

/// Every rule of SPEC.md's Job and Inputs sections that can be checked without the bytes
/// of inputs fetched from elsewhere. Rules on the bytes themselves are in
/// [`check_input_content`], run once the bytes are known and verified.
pub fn validate(job: Job, bounds: &Bounds) -> Result<ValidJob, Rejection> {
    if !valid_job_id(&job.job_id) {
        return Err(Rejection::invalid(
            "job_id must be 1-64 characters of [A-Za-z0-9_.-]",
        ));
    }
    if job.class != "function" {
        return Err(Rejection::invalid(format!(
            "class must be \"function\", not {:?}",
            truncate_for_message(&job.class)
        )));
    }
    if job.artifact != ARTIFACT {
        return Err(Rejection::invalid(format!(
            "artifact must be exactly {ARTIFACT:?}, not {:?}",
            truncate_for_message(&job.artifact)
        )));
    }
    for (field, value) in [("subject", &job.subject), ("project", &job.project)] {
        if let Some(v) = value {
            if !valid_label(v) {
                return Err(Rejection::invalid(format!(
                    "{field} must be 1-256 bytes of UTF-8 without control characters"
                )));
            }
        }
    }
    if !valid_tool_name(&job.args.tool) {
        return Err(Rejection::invalid(format!(
            "args.tool {:?} does not match ^[a-z][a-z0-9_]{{0,31}}$",
            truncate_for_message(&job.args.tool)
        )));
    }

    let wall_ms = job.limits.wall_ms.unwrap_or(WALL_MS_DEFAULT);
    if wall_ms == 0 {
        return Err(Rejection::invalid("limits.wall_ms must be at least 1"));
    }
    if wall_ms > WALL_MS_CAP {
        return Err(Rejection::above_cap(format!(
            "limits.wall_ms {} is above the cap of {WALL_MS_CAP}",
            limit_shown(wall_ms)
        )));
    }
    let mem_bytes = job.limits.mem_bytes.unwrap_or(MEM_BYTES_DEFAULT);
    if mem_bytes < MEM_BYTES_MIN {
        return Err(Rejection::invalid(format!(
            "limits.mem_bytes {mem_bytes} is below the minimum of {MEM_BYTES_MIN} (16 MiB)"
        )));
    }
    if mem_bytes > MEM_BYTES_CAP {
        return Err(Rejection::above_cap(format!(
            "limits.mem_bytes {} is above the cap of {MEM_BYTES_CAP}",
            limit_shown(mem_bytes)
        )));
    }
    let ttl_ms = job.ttl_ms.unwrap_or(TTL_MS_DEFAULT);
    if ttl_ms == 0 || ttl_ms > TTL_MS_CAP {
        return Err(Rejection::invalid(format!(
            "ttl_ms {} is outside 1..={TTL_MS_CAP}",
            limit_shown(ttl_ms)
        )));
    }

    // The text as the job carried it is what the tool reads: the cap counts that text
    // (whitespace inside the value included), and nothing here rewrites it.
    let input = job.args.input.as_str();
    check_input_size(input.len(), bounds)?;
    job.args
        .input
        .check(DuplicateKeys::Refuse)
        .map_err(|e| Rejection::invalid(format!("args.input is refused: {e}")))?;
    let input_json = input.as_bytes().to_vec();

    if job.inputs.is_empty() {
        return Err(Rejection::invalid(
            "inputs is empty; the entry must be one of the inputs",
        ));
    }
    if job.inputs.len() > MAX_INPUTS {
        return Err(too_many_inputs(job.inputs.len()));
    }

    let mut seen_folded: HashSet<String> = HashSet::new();
    let mut inputs = Vec::with_capacity(job.inputs.len());
    let mut carried_total = 0usize;
    for input in job.inputs {
        check_input_name(&input.name).map_err(Rejection::invalid)?;
        if !seen_folded.insert(input.name.to_ascii_lowercase()) {
            return Err(Rejection::invalid(format!(
                "input name {:?} appears twice (names are compared case-insensitively)",
                input.name
            )));
        }
        let sha256 = parse_sha256(&input.sha256).ok_or_else(|| {
            Rejection::invalid(format!(
                "input {:?}: sha256 must be 64 lowercase hex characters",
                input.name
            ))
        })?;
        if let Some(id) = &input.media_id {
            if !valid_media_id(id) {
                return Err(Rejection::invalid(format!(
                    "input {:?}: media_id must be 1-128 characters of [A-Za-z0-9_.:-]",
                    input.name
                )));
            }
        }
        let content = match &input.content_base64 {
            None => None,
            Some(b64) => {
                // Refuse to decode something that could not fit the total before allocating.
                if b64.len() / 4 * 3 > MAX_INPUTS_TOTAL_BYTES + 3 {
                    return Err(Rejection::invalid(format!(
                        "input {:?} is larger than the 1 MiB allowed for all inputs",
                        input.name
                    )));
                }
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64.as_bytes())
                    .map_err(|e| {
                        Rejection::invalid(format!(
                            "input {:?}: content_base64 is not valid base64: {e}",
                            input.name
                        ))
                    })?;
                carried_total += bytes.len();
                if carried_total > MAX_INPUTS_TOTAL_BYTES {
                    return Err(Rejection::invalid(format!(
                        "inputs hold more than {MAX_INPUTS_TOTAL_BYTES} bytes (1 MiB) in all"
                    )));
                }
                Some(bytes)
            }
        };
        if let Some(bytes) = &content {
            check_input_content(&input.name, bytes).map_err(Rejection::invalid)?;
        }
        inputs.push(ValidInput {
            name: input.name,
            media_id: input.media_id,
            sha256,
            content,
        });
    }
    check_tree(&inputs).map_err(Rejection::invalid)?;

    if !job.args.entry.ends_with(".js") {
        return Err(Rejection::invalid(format!(
            "args.entry {:?} must end in .js",
            truncate_for_message(&job.args.entry)
        )));
    }
    if !inputs.iter().any(|i| i.name == job.args.entry) {
        return Err(Rejection::invalid(format!(
            "args.entry {:?} names none of the inputs",
            truncate_for_message(&job.args.entry)
        )));
    }

    Ok(ValidJob {
        job_id: job.job_id,
        subject: job.subject,
        project: job.project,
        tool: job.args.tool,
        entry: job.args.entry,
        input_json,
        inputs,
        net: job.net,
        wall_ms,
        mem_bytes,
        ttl_ms,
    })
}

/// No input may be both a file and a directory holding another input (`a` and `a/b`).
fn check_tree(inputs: &[ValidInput]) -> Result<(), String> {
    let files: HashSet<String> = inputs.iter().map(|i| i.name.to_ascii_lowercase()).collect();
    for input in inputs {
        let lower = input.name.to_ascii_lowercase();
        let mut prefix = String::new();
        let parts: Vec<&str> = lower.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            if files.contains(&prefix) {
                return Err(format!(
                    "input {:?} sits under another input's name; a name cannot be both a file and a folder",
                    input.name
                ));
            }
        }
    }
    Ok(())
}

/// The rules on an input's bytes: total and per-file size, text only, `.js` as UTF-8.
pub fn check_input_content(name: &str, bytes: &[u8]) -> Result<(), String> {
    if bytes.len() > MAX_INPUTS_TOTAL_BYTES {
        return Err(format!(
            "input {name:?} is {} bytes; all inputs together may hold at most 1 MiB",
            bytes.len()
        ));
    }
    // Node runs .mjs and .cjs (and any name `require` is given) as code too.
    let lower = name.to_ascii_lowercase();
    if [".js", ".mjs", ".cjs"].iter().any(|e| lower.ends_with(e)) && bytes.len() > MAX_JS_BYTES {
        return Err(format!(
            "input {name:?} is {} bytes; a .js input may be at most 64 KiB",
            bytes.len()
        ));
    }
    if std::str::from_utf8(bytes).is_err() {
        return Err(format!(
            "input {name:?} is not valid UTF-8 text; inputs are text, never binaries"
        ));
    }
    if bytes.contains(&0) {
        return Err(format!(
            "input {name:?} contains a NUL byte; inputs are text, never binaries"
        ));
    }
    Ok(())
}

fn truncate_for_message(s: &str) -> String {
    s.chars().take(80).collect()
}

#[cfg(test)]
mod tests;
