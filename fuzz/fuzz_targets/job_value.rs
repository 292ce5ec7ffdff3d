//! Structured jobs: `arbitrary` builds a job field by field, mostly from values near the
//! rules' edges (names that almost traverse, sizes either side of a cap, hashes of the right
//! and the wrong length), as a `serde_json::Value`. `parse_job_value` must not panic, must
//! hold every invariant on what it accepts, and must agree with the second reading of
//! SPEC.md in `openvibe_skill_runner_fuzz::reference_verdict` on accept versus reject.
#![no_main]

use arbitrary::Arbitrary;
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use openvibe_skill_runner::job::{parse_job_value, Bounds};
use openvibe_skill_runner_fuzz::{check_outcome, reference_verdict, STRICT_SHAPES};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

#[derive(Arbitrary, Debug)]
struct FuzzJob {
    job_id: Text,
    class: Pick<Text>,
    artifact: Pick<Text>,
    subject: Option<Text>,
    project: Option<Text>,
    tool: Text,
    entry: Entry,
    input: FuzzValue,
    inputs: Vec<FuzzInput>,
    net: Option<NetChoice>,
    limits: Option<FuzzLimits>,
    ttl_ms: Option<Num>,
    /// A field SPEC.md does not know, at some level.
    unknown: Option<(Level, Text)>,
    /// Mostly objects; now and then `args` (or the whole job) as an array, or `net` as a
    /// one-key object: shapes serde also reads (see `STRICT_SHAPES`).
    shape: u8,
}

/// Either the field's one good value or anything.
#[derive(Arbitrary, Debug)]
enum Pick<T> {
    Good,
    Other(T),
    Missing,
}

#[derive(Arbitrary, Debug, Clone)]
enum Text {
    Word(u8),
    Repeat(u8, u16),
    Raw(String),
    Null,
    Number(i64),
}

const WORDS: &[&str] = &[
    "a",
    "job_1",
    "count_words",
    "fuzz-1.x",
    "x",
    "A",
    "ab_c9",
    "",
    ".",
    "..",
    "main.js",
    "lib",
    "tools",
    "index.js",
    "a.mjs",
    "b.cjs",
    "data.json",
    "README",
    "..js",
    "-",
    "Main.JS",
    "x\u{0}y",
    "x\ny",
    "\u{202e}",
    "é",
    "ǅ",
    "ı",
    "K",
    "tool_",
    "_a",
    "9a",
    "med_1",
    "med:2",
    "openvibe-skill-runner@1.0.0",
    "function",
    "deny",
    "public",
    "openvibe-only",
    "Deny",
    " deny",
    "\u{7f}",
    "\u{85}",
    "con",
    "a b",
];

impl Text {
    fn value(&self) -> Value {
        match self {
            Text::Word(i) => Value::String(word(*i).to_string()),
            Text::Repeat(c, n) => {
                let c = ['a', 'Z', '9', '.', '_', '-', '/', '\u{7f}', 'é'][*c as usize % 9];
                Value::String(std::iter::repeat_n(c, *n as usize % 300).collect())
            }
            Text::Raw(s) => Value::String(s.clone()),
            Text::Null => Value::Null,
            Text::Number(n) => json!(n),
        }
    }
}

fn word(i: u8) -> &'static str {
    WORDS[i as usize % WORDS.len()]
}

#[derive(Arbitrary, Debug)]
enum Entry {
    /// The name of the n-th input (most jobs).
    Input(u8),
    /// The name of the n-th input with its case changed.
    InputUpper(u8),
    Name(Name),
    Missing,
}

#[derive(Arbitrary, Debug, Clone)]
enum Part {
    Word(u8),
    Dot,
    DotDot,
    Empty,
    Long(u8),
    Raw(String),
}

#[derive(Arbitrary, Debug, Clone)]
struct Name {
    parts: Vec<Part>,
    suffix: Suffix,
    leading_slash: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Suffix {
    None,
    Js,
    JsUpper,
    Mjs,
    Json,
}

impl Name {
    fn text(&self) -> String {
        let mut s = String::new();
        if self.leading_slash {
            s.push('/');
        }
        for (i, part) in self.parts.iter().take(10).enumerate() {
            if i > 0 {
                s.push('/');
            }
            match part {
                Part::Word(w) => {
                    s.push_str(["a", "lib", "x_1", "B-2", "v1.0", "é"][*w as usize % 6])
                }
                Part::Dot => s.push('.'),
                Part::DotDot => s.push_str(".."),
                Part::Empty => {}
                Part::Long(n) => s.push_str(&"k".repeat(60 + *n as usize % 8)),
                Part::Raw(r) => s.push_str(r),
            }
        }
        s.push_str(match self.suffix {
            Suffix::None => "",
            Suffix::Js => ".js",
            Suffix::JsUpper => ".JS",
            Suffix::Mjs => ".mjs",
            Suffix::Json => ".json",
        });
        s
    }
}

#[derive(Arbitrary, Debug)]
enum InputName {
    Built(Name),
    /// Another input's name, maybe with its case changed, maybe as a folder of it.
    Copy(u8, bool, bool),
    Raw(Text),
}

#[derive(Arbitrary, Debug)]
struct FuzzInput {
    name: InputName,
    media_id: Option<Text>,
    sha256: Sha,
    content: Content,
    unknown: bool,
}

#[derive(Arbitrary, Debug)]
enum Sha {
    OfContent,
    Zero,
    Upper,
    Short,
    Raw(Text),
    Missing,
}

#[derive(Arbitrary, Debug)]
enum Content {
    None,
    Text(String),
    Bytes(Vec<u8>),
    /// `len` bytes of one byte value: sizes either side of 64 KiB and 1 MiB.
    Sized {
        around: SizeMark,
        delta: i8,
        byte: u8,
    },
    /// Not base64, or base64 with a flaw.
    Bad(BadBase64, String),
    Null,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum SizeMark {
    Small,
    Kib1,
    Kib16,
    Js,
    Kib100,
    Half,
    Total,
    Kib4,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum BadBase64 {
    Raw,
    NoPadding,
    UrlSafe,
    Whitespace,
}

#[derive(Arbitrary, Debug)]
enum NetChoice {
    Deny,
    OpenvibeOnly,
    Public,
    Tagged(u8),
    Other(Text),
}

#[derive(Arbitrary, Debug)]
struct FuzzLimits {
    wall_ms: Option<Num>,
    mem_bytes: Option<Num>,
    null: bool,
}

/// Numbers near the edges of every bound, or anything.
#[derive(Arbitrary, Debug)]
enum Num {
    Near(Edge, i8),
    Any(u64),
    Negative(i64),
    Float(f64),
    Text(Text),
    Null,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Edge {
    Zero,
    WallCap,
    MemMin,
    MemCap,
    TtlCap,
    Max,
}

impl Num {
    fn value(&self) -> Value {
        match self {
            Num::Near(edge, delta) => {
                let base: i128 = match edge {
                    Edge::Zero => 0,
                    Edge::WallCap => 30_000,
                    Edge::MemMin => 16 * 1024 * 1024,
                    Edge::MemCap => 268_435_456,
                    Edge::TtlCap => 86_400_000,
                    Edge::Max => u64::MAX as i128,
                };
                let n = base + *delta as i128 % 3;
                if n < 0 {
                    json!(n as i64)
                } else if n > u64::MAX as i128 {
                    json!(u64::MAX)
                } else {
                    json!(n as u64)
                }
            }
            Num::Any(n) => json!(n),
            Num::Negative(n) => json!(-(n.unsigned_abs().max(1) as i128) as i64),
            Num::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Num::Text(t) => t.value(),
            Num::Null => Value::Null,
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Level {
    Job,
    Args,
    Input,
    Limits,
}

#[derive(Debug, Clone, Copy)]
enum Shape {
    Objects,
    ArgsArray,
    JobArray,
    NetTagged,
}

impl Shape {
    fn of(byte: u8) -> Shape {
        match byte % 16 {
            13 => Shape::ArgsArray,
            14 => Shape::JobArray,
            15 => Shape::NetTagged,
            _ => Shape::Objects,
        }
    }
}

/// Any JSON value, nesting bounded.
#[derive(Arbitrary, Debug)]
enum FuzzValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Big(u8, u32),
    Array(Vec<FuzzValue>),
    Object(Vec<(String, FuzzValue)>),
}

impl FuzzValue {
    /// The value; `big` says whether the one string near the 256 KiB bound is still to come
    /// (one per job is enough, and each costs as much as the rest of the run).
    fn value(&self, depth: usize, big: &mut bool) -> Value {
        if depth > 24 {
            return Value::Null;
        }
        match self {
            FuzzValue::Null => Value::Null,
            FuzzValue::Bool(b) => json!(b),
            FuzzValue::Int(i) => json!(i),
            FuzzValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
            }
            FuzzValue::Str(s) => json!(s),
            // A string whose serialized size lands either side of the 256 KiB bound.
            FuzzValue::Big(c, n) if *big => {
                *big = false;
                let len = 256 * 1024 - 8 + (*n as usize % 16);
                Value::String(String::from_utf8(vec![b'a' + c % 26; len]).expect("ASCII"))
            }
            FuzzValue::Big(c, _) => json!(c),
            FuzzValue::Array(items) => {
                Value::Array(items.iter().map(|v| v.value(depth + 1, big)).collect())
            }
            FuzzValue::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), v.value(depth + 1, big)))
                    .collect(),
            ),
        }
    }
}

const MIB: usize = 1024 * 1024;

/// The bytes an input carries. Past `budget` (a little over the 1 MiB all inputs may hold),
/// a large size becomes a small one: one input over the bound is enough to test it, and ten
/// would only slow every run down.
fn content_bytes(content: &Content, budget: &mut usize) -> Option<Vec<u8>> {
    let bytes = match content {
        Content::Text(s) => Some(s.as_bytes().to_vec()),
        Content::Bytes(b) => Some(b.clone()),
        Content::Sized {
            around,
            delta,
            byte,
        } => {
            let base = match around {
                SizeMark::Small => 16,
                SizeMark::Kib1 => 1024,
                SizeMark::Kib4 => 4 * 1024,
                SizeMark::Kib16 => 16 * 1024,
                SizeMark::Js => 64 * 1024,
                SizeMark::Kib100 => 100 * 1024,
                SizeMark::Half => MIB / 2,
                SizeMark::Total => MIB,
            };
            let len = (base as i64 + *delta as i64 % 4).max(0) as usize;
            let len = if len > *budget { 16 } else { len };
            Some(vec![*byte; len])
        }
        _ => None,
    };
    if let Some(b) = &bytes {
        *budget = budget.saturating_sub(b.len());
    }
    bytes
}

fn build(f: &FuzzJob) -> Value {
    let mut names: Vec<String> = Vec::new();
    let mut inputs = Vec::new();
    let mut budget = MIB + MIB / 4;
    for input in f.inputs.iter().take(70) {
        let name = match &input.name {
            InputName::Built(n) => Value::String(n.text()),
            InputName::Copy(i, upper, folder) => {
                let mut n = if names.is_empty() {
                    "main.js".to_string()
                } else {
                    names[*i as usize % names.len()].clone()
                };
                if *upper {
                    n = n.to_ascii_uppercase();
                }
                if *folder {
                    n.push_str("/inner.js");
                }
                Value::String(n)
            }
            InputName::Raw(t) => t.value(),
        };
        names.push(name.as_str().unwrap_or_default().to_string());
        let bytes = content_bytes(&input.content, &mut budget);
        let mut obj = Map::new();
        obj.insert("name".into(), name);
        if let Some(id) = &input.media_id {
            obj.insert("media_id".into(), id.value());
        }
        let engine = base64::engine::general_purpose::STANDARD;
        match (&input.content, &bytes) {
            (_, Some(b)) => {
                obj.insert("content_base64".into(), json!(engine.encode(b)));
            }
            (Content::Bad(kind, s), None) => {
                let text = match kind {
                    BadBase64::Raw => s.clone(),
                    BadBase64::NoPadding => {
                        base64::engine::general_purpose::STANDARD_NO_PAD.encode(s.as_bytes())
                    }
                    BadBase64::UrlSafe => {
                        base64::engine::general_purpose::URL_SAFE.encode(s.as_bytes())
                    }
                    BadBase64::Whitespace => format!("{} ", engine.encode(s.as_bytes())),
                };
                obj.insert("content_base64".into(), json!(text));
            }
            (Content::Null, None) => {
                obj.insert("content_base64".into(), Value::Null);
            }
            _ => {}
        }
        // The parser does not check a digest against the bytes (that is the engine's `integrity`
        // step), so a large input gets a well-formed stand-in: hashing a megabyte under ASan
        // costs more than the rest of the run.
        let digest = match bytes.as_deref().unwrap_or_default() {
            b if b.len() <= 64 * 1024 => hex(&Sha256::digest(b)),
            _ => "5a".repeat(32),
        };
        let sha = match &input.sha256 {
            Sha::OfContent => Some(json!(digest)),
            Sha::Zero => Some(json!("0".repeat(64))),
            Sha::Upper => Some(json!(digest.to_ascii_uppercase())),
            Sha::Short => Some(json!(digest[..63])),
            Sha::Raw(t) => Some(t.value()),
            Sha::Missing => None,
        };
        if let Some(sha) = sha {
            obj.insert("sha256".into(), sha);
        }
        if input.unknown {
            obj.insert("nmae".into(), json!("x"));
        }
        inputs.push(Value::Object(obj));
    }

    let entry = match &f.entry {
        Entry::Input(i) if !names.is_empty() => Some(json!(names[*i as usize % names.len()])),
        Entry::InputUpper(i) if !names.is_empty() => {
            Some(json!(names[*i as usize % names.len()].to_ascii_uppercase()))
        }
        Entry::Name(n) => Some(json!(n.text())),
        Entry::Missing => None,
        _ => Some(json!("main.js")),
    };

    let mut args = Map::new();
    args.insert("tool".into(), f.tool.value());
    if let Some(entry) = entry {
        args.insert("entry".into(), entry);
    }
    args.insert("input".into(), f.input.value(0, &mut true));

    let mut job = Map::new();
    job.insert("job_id".into(), f.job_id.value());
    for (key, pick, good) in [
        ("class", &f.class, "function"),
        ("artifact", &f.artifact, "openvibe-skill-runner@1.0.0"),
    ] {
        match pick {
            Pick::Good => {
                job.insert(key.into(), json!(good));
            }
            Pick::Other(t) => {
                job.insert(key.into(), t.value());
            }
            Pick::Missing => {}
        }
    }
    if let Some(s) = &f.subject {
        job.insert("subject".into(), s.value());
    }
    if let Some(p) = &f.project {
        job.insert("project".into(), p.value());
    }
    job.insert("inputs".into(), Value::Array(inputs));
    if let Some(net) = &f.net {
        let v = match net {
            NetChoice::Deny => json!("deny"),
            NetChoice::OpenvibeOnly => json!("openvibe-only"),
            NetChoice::Public => json!("public"),
            NetChoice::Tagged(i) => {
                json!({ ["deny", "openvibe-only", "public"][*i as usize % 3]: null })
            }
            NetChoice::Other(t) => t.value(),
        };
        job.insert("net".into(), v);
    }
    if let Some(limits) = &f.limits {
        if limits.null {
            job.insert("limits".into(), Value::Null);
        } else {
            let mut l = Map::new();
            if let Some(w) = &limits.wall_ms {
                l.insert("wall_ms".into(), w.value());
            }
            if let Some(m) = &limits.mem_bytes {
                l.insert("mem_bytes".into(), m.value());
            }
            if matches!(f.unknown, Some((Level::Limits, _))) {
                l.insert("cpu_ms".into(), json!(1));
            }
            job.insert("limits".into(), Value::Object(l));
        }
    }
    if let Some(ttl) = &f.ttl_ms {
        job.insert("ttl_ms".into(), ttl.value());
    }
    match &f.unknown {
        Some((Level::Job, t)) => {
            job.insert("nett".into(), t.value());
        }
        Some((Level::Args, t)) => {
            args.insert("env".into(), t.value());
        }
        Some((Level::Input, t)) => {
            if let Some(Value::Object(first)) = job
                .get_mut("inputs")
                .and_then(Value::as_array_mut)
                .and_then(|a| a.first_mut())
            {
                first.insert("mode".into(), t.value());
            }
        }
        _ => {}
    }

    let shape = Shape::of(f.shape);
    match shape {
        Shape::ArgsArray => {
            let fields =
                ["tool", "entry", "input"].map(|k| args.get(k).cloned().unwrap_or(Value::Null));
            job.insert("args".into(), Value::Array(fields.to_vec()));
        }
        _ => {
            job.insert("args".into(), Value::Object(args));
        }
    }
    if let (Shape::NetTagged, Some(Value::String(n))) = (shape, job.get("net").cloned()) {
        job.insert("net".into(), json!({ n: null }));
    }
    if let Shape::JobArray = shape {
        let order = [
            "job_id", "class", "artifact", "subject", "project", "args", "inputs", "net", "limits",
            "ttl_ms",
        ];
        return Value::Array(
            order
                .iter()
                .map(|k| job.get(*k).cloned().unwrap_or(Value::Null))
                .collect(),
        );
    }
    Value::Object(job)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fuzz_target!(|f: FuzzJob| {
    let raw = build(&f);
    let bounds = Bounds::default();
    let expected = reference_verdict(&raw, &bounds);
    let outcome = parse_job_value(raw, &bounds);
    let accepted = check_outcome(&outcome, &bounds);
    let other_shape = !matches!(Shape::of(f.shape), Shape::Objects)
        || matches!(f.net, Some(NetChoice::Tagged(_)));
    if !STRICT_SHAPES && other_shape {
        // Accepted or not, the invariants above hold; agreement with SPEC.md is not asked.
        return;
    }
    if accepted != expected.is_ok() {
        let shown = serde_json::to_string(&build(&f)).expect("serializes");
        let shown: String = shown.chars().take(2000).collect();
        panic!(
            "the parser and SPEC.md disagree:\n parser: {:?}\n spec:   {expected:?}\n job: {shown}",
            outcome.as_ref().map(|j| &j.job_id)
        );
    }
});
