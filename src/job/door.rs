//! The one door from a job's bytes: [`admit`] turns the text a dispatcher (or a file, or the
//! daemon's request body) carried into a [`ValidJob`] or a [`Refusal`], which says what a
//! result for that text may echo (its [`JobHead`]) or that the text is no job at all.
//!
//! The text is read twice and never as a JSON value: once into its top-level fields as
//! unread text (the head and the shapes serde would otherwise bend), once into the typed
//! [`Job`], which refuses unknown fields and duplicate keys at every level. `args.input`
//! stays the exact text it was written in.

use super::{valid_job_id, valid_tool_name, validate, Bounds, Job, Net, Rejection, ValidJob};
use crate::json_text::Key;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// The fields a result echoes for a job that is turned away, read from its text without
/// judging the rest of it (and without parsing `args.input` into a value).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobHead {
    /// The submitted id when it is well formed, else empty: a malformed id is never
    /// echoed, so a result never carries attacker text in that field.
    pub job_id: String,
    /// The `net` asked for when it names a mode, else `deny`.
    pub net: Net,
    /// `args.tool` when it is a valid tool name, else empty.
    pub tool: String,
}

impl JobHead {
    /// The head of a job that passed: what [`read_head`] reads from its text.
    pub fn of(job: &ValidJob) -> JobHead {
        JobHead {
            job_id: job.job_id.clone(),
            net: job.net,
            tool: job.tool.clone(),
        }
    }
}

/// Why a request body is not a job at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAJob {
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("the body is not a JSON object (a job)")]
    NotObject,
}

/// A job's text that the door turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What a result for this text echoes, or why the text is no job at all (a caller
    /// that can refuse a request instead of answering a job, as the daemon does, says so).
    pub head: Result<JobHead, NotAJob>,
    /// The rule it broke: `invalid_job` or `limits_above_cap`.
    pub rejection: Rejection,
}

/// The job's top-level fields as unread text, each as first written. Other keys are
/// skipped here, and a key given twice is not an error here: the typed parse refuses
/// both, and the head still has the job's one id to answer under. Only an id given twice
/// leaves no id to trust.
#[derive(Default)]
struct Fields<'a> {
    job_id: Option<&'a RawValue>,
    /// `job_id` is given more than once: which one was meant is unknown.
    job_id_twice: bool,
    net: Option<&'a RawValue>,
    args: Option<&'a RawValue>,
    limits: Option<&'a RawValue>,
    inputs: Option<&'a RawValue>,
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Fields<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Fields<'de>, A::Error> {
                let mut fields = Fields::default();
                // Keys as serde reads them (escapes resolved), as the typed parse does, but
                // as bytes: another key with a lone surrogate (valid JSON) leaves the job its
                // id, and the typed parse refuses it with the job's `rejected` result.
                while let Some(Key(key)) = map.next_key::<Key>()? {
                    let slot = match key.as_slice() {
                        b"job_id" => &mut fields.job_id,
                        b"net" => &mut fields.net,
                        b"args" => &mut fields.args,
                        b"limits" => &mut fields.limits,
                        b"inputs" => &mut fields.inputs,
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            continue;
                        }
                    };
                    let value: &'de RawValue = map.next_value()?;
                    if slot.is_none() {
                        *slot = Some(value);
                    } else if key == b"job_id" {
                        fields.job_id_twice = true;
                    }
                }
                Ok(fields)
            }
        }
        d.deserialize_map(Visit)
    }
}

#[derive(Deserialize)]
struct ArgsFields<'a> {
    #[serde(borrow, default)]
    tool: Option<&'a RawValue>,
}

fn string_in(raw: Option<&RawValue>) -> Option<String> {
    raw.and_then(|r| serde_json::from_str::<String>(r.get()).ok())
}

/// The text as one JSON object's fields, or why it is no job.
fn read_fields(text: &[u8]) -> Result<Fields<'_>, Box<Refusal>> {
    let raw = object(text)?;
    serde_json::from_str::<Fields>(raw.get()).map_err(|e| {
        Box::new(Refusal {
            head: Err(NotAJob::NotJson(e.to_string())),
            rejection: Rejection::invalid(serde_message(&e)),
        })
    })
}

/// The text as one JSON object, checked whole and nothing of it built, or why it is no
/// job.
fn object(text: &[u8]) -> Result<&RawValue, Box<Refusal>> {
    let raw: &RawValue = serde_json::from_slice(text).map_err(|e| {
        Box::new(Refusal {
            head: Err(NotAJob::NotJson(e.to_string())),
            rejection: Rejection::invalid(serde_message(&e)),
        })
    })?;
    if !raw.get().starts_with('{') {
        return Err(Box::new(Refusal {
            head: Err(NotAJob::NotObject),
            rejection: Rejection::invalid("the job must be a JSON object"),
        }));
    }
    Ok(raw)
}

/// How the object's top-level `job_id` is written, for saying what is wrong with an id
/// that [`read_head`] left empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdText<'a> {
    /// No `job_id`, or the text is no JSON object.
    Missing,
    /// Written once: its text exactly as written (`null` included).
    Once(&'a str),
    /// Written more than once.
    Twice,
}

/// The object's top-level `job_id` as written: the other fields are skipped, also when one
/// is given twice, and nothing of them is built.
pub fn job_id_text(text: &[u8]) -> IdText<'_> {
    match read_fields(text) {
        Ok(f) if f.job_id_twice => IdText::Twice,
        Ok(Fields {
            job_id: Some(id), ..
        }) => IdText::Once(id.get()),
        _ => IdText::Missing,
    }
}

fn head_of(fields: &Fields) -> JobHead {
    let tool = fields
        .args
        .and_then(|a| serde_json::from_str::<ArgsFields>(a.get()).ok())
        .and_then(|a| string_in(a.tool));
    JobHead {
        job_id: string_in(fields.job_id)
            .filter(|id| valid_job_id(id) && !fields.job_id_twice)
            .unwrap_or_default(),
        net: string_in(fields.net)
            .and_then(|n| Net::parse(&n))
            .unwrap_or_default(),
        tool: tool.filter(|t| valid_tool_name(t)).unwrap_or_default(),
    }
}

/// What a result for this text echoes. Fields that cannot be read (a field of the wrong
/// type, an id given twice) are echoed as empty or `deny`: the job is rejected anyway.
pub fn read_head(text: &[u8]) -> Result<JobHead, NotAJob> {
    match read_fields(text) {
        Ok(fields) => Ok(head_of(&fields)),
        Err(refusal) => refusal.head,
    }
}

/// The one door: a job's text to a [`ValidJob`] under `bounds`, or the refusal a result
/// (or, for text that is no job, a refused request) is made from. Every rule of SPEC.md's
/// Job and Inputs sections that can be checked without fetched input bytes is applied
/// here; the typed parse refuses duplicate keys (which a JSON value would keep silently,
/// last one winning) at every level of the job, `args.input` included.
pub fn admit(text: &[u8], bounds: &Bounds) -> Result<ValidJob, Box<Refusal>> {
    let fields = read_fields(text)?;
    let head = head_of(&fields);
    let refused = |rejection: Rejection| {
        Box::new(Refusal {
            head: Ok(head.clone()),
            rejection,
        })
    };
    check_shapes(&fields).map_err(refused)?;
    let job: Job =
        serde_json::from_slice(text).map_err(|e| refused(Rejection::invalid(serde_message(&e))))?;
    validate(job, bounds).map_err(refused)
}

/// serde would read a struct from an array of its fields and an enum from a one-key
/// object: the job's objects must be objects, and `net` a string. Read from the text, so
/// that nothing in `args.input` is parsed into a value on the way.
fn check_shapes(fields: &Fields) -> Result<(), Rejection> {
    let starts = |field: Option<&RawValue>, c: char| field.is_none_or(|r| r.get().starts_with(c));
    for (key, field) in [("args", fields.args), ("limits", fields.limits)] {
        if !starts(field, '{') {
            return Err(Rejection::invalid(format!("{key} must be a JSON object")));
        }
    }
    if !starts(fields.net, '"') {
        return Err(Rejection::invalid(
            "net must be one of the strings deny, openvibe-only, public",
        ));
    }
    if let Some(inputs) = fields.inputs {
        // Counted before anything is built: a request's 8 MiB of empty inputs would
        // otherwise become millions of them in memory first.
        let mut de = serde_json::Deserializer::from_str(inputs.get());
        let items = serde::Deserializer::deserialize_seq(&mut de, InputItems)
            .map_err(|_| Rejection::invalid("inputs must be a JSON array"))?;
        match items {
            InputsSeen::Objects(n) if n > crate::job::MAX_INPUTS => {
                return Err(crate::job::too_many_inputs(n))
            }
            InputsSeen::Objects(_) => {}
            InputsSeen::NotAnObject => {
                return Err(Rejection::invalid("every input must be a JSON object"))
            }
        }
    }
    Ok(())
}

/// What [`InputItems`] saw of `inputs`: how many items (past the cap, merely counted), or
/// an item that is not an object.
enum InputsSeen {
    Objects(usize),
    NotAnObject,
}

/// Reads the items of `inputs` as raw text one at a time, keeping none.
struct InputItems;

impl<'de> serde::de::Visitor<'de> for InputItems {
    type Value = InputsSeen;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON array")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<InputsSeen, A::Error> {
        let mut n = 0;
        while let Some(item) = seq.next_element::<&RawValue>()? {
            if !item.get().starts_with('{') {
                return Ok(InputsSeen::NotAnObject);
            }
            n += 1;
            if n > crate::job::MAX_INPUTS {
                // Past the cap: only counted on (the whole array must still be read).
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    n += 1;
                }
            }
        }
        Ok(InputsSeen::Objects(n))
    }
}

/// Parse a job from an already parsed JSON value (tests and fuzzing build jobs this way).
/// A value has lost what its text said (duplicate keys, key order, number spelling), so
/// this writes it back to text and takes the one door every submitted job takes.
pub fn parse_job_value(raw: Value, bounds: &Bounds) -> Result<ValidJob, Rejection> {
    let text = serde_json::to_vec(&raw)
        .map_err(|e| Rejection::invalid(format!("the job cannot be written as JSON: {e}")))?;
    admit(&text, bounds).map_err(|r| r.rejection)
}

/// serde repeats unknown keys and bad values in full: bound the message and strip
/// control characters, so a rejection never carries a megabyte or a terminal escape.
fn serde_message(e: &serde_json::Error) -> String {
    let text: String = e
        .to_string()
        .chars()
        // Control and invisible or direction-changing characters (all non-ASCII here)
        // become '?': a message never spoofs text in a terminal or a log.
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                '?'
            }
        })
        .take(300)
        .collect();
    format!("the job is not valid: {text}")
}

#[cfg(test)]
mod tests;
