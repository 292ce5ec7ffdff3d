//! The `run` command's side of a skill folder: read its `skill.json` manifest (the part of
//! `actor.skill@2` the runner needs), then build the job a dispatcher would submit, with
//! every code file hashed and carried in the job itself.
//!
//! The rule from ADR-060 holds here too: the job runs with the tool's declared `net` and
//! `limits`. A request may narrow them; asking for more is an error, never a silent widening.

use crate::job::{
    self, Args, Bounds, Input, Job, Limits, Net, Reason, ARTIFACT, MAX_INPUTS,
    MAX_INPUTS_TOTAL_BYTES, MAX_JOB_ID_LEN, MAX_JS_BYTES, MAX_NAME_COMPONENTS, MEM_BYTES_CAP,
    MEM_BYTES_DEFAULT, MEM_BYTES_MIN, WALL_MS_CAP, WALL_MS_DEFAULT,
};
use crate::json_text::JsonText;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::fs;
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The manifest's file name, at the root of a skill folder.
pub const MANIFEST_FILE: &str = "skill.json";
/// A manifest larger than this is not a manifest.
pub const MANIFEST_MAX_BYTES: u64 = 1024 * 1024;
/// `actor.skill@2`: a sandbox skill has 1 to 5 tools.
pub const MAX_TOOLS: usize = 5;
/// `actor.skill@2`: the description the agent reads is at most 200 characters.
pub const MAX_DESCRIPTION_CHARS: usize = 200;

/// What the runner reads of an `actor.skill@2` document. The document has more fields
/// (instructions, requires, resources, …); they are accepted and ignored here.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Manifest {
    pub slug: String,
    pub version: String,
    pub runs: String,
    /// Defaulted so that a prompt skill is told it is one, not that `tools` is missing.
    #[serde(default)]
    pub tools: Vec<ToolManifest>,
}

/// One tool. Strict: an unknown field is an error, so a typo (`"nett"`) never weakens a policy.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolManifest {
    pub name: String,
    pub description: String,
    pub language: String,
    pub entry: String,
    /// A JSON Schema subset describing the input object.
    pub args: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<Net>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
}

impl ToolManifest {
    /// The tool's `net`, `deny` when it declares none.
    pub fn declared_net(&self) -> Net {
        self.net.unwrap_or_default()
    }

    /// The tool's `limits.wall_ms`, the default when it declares none.
    pub fn declared_wall_ms(&self) -> u64 {
        self.limits
            .as_ref()
            .and_then(|l| l.wall_ms)
            .unwrap_or(WALL_MS_DEFAULT)
    }

    /// The tool's `limits.mem_bytes`, the default when it declares none.
    pub fn declared_mem_bytes(&self) -> u64 {
        self.limits
            .as_ref()
            .and_then(|l| l.mem_bytes)
            .unwrap_or(MEM_BYTES_DEFAULT)
    }
}

/// What the person asked `run` for. `None` means "as the tool declares".
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub tool: String,
    /// The tool's input as the person wrote it; it reaches the tool as this text.
    pub input: JsonText,
    pub net: Option<Net>,
    pub wall_ms: Option<u64>,
    pub mem_bytes: Option<u64>,
}

/// Why a skill folder could not become a job. Each message names the file or field and
/// says what to change.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("cannot read {path}: {source}; check that it exists and that you may read it")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Manifest { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Folder { path: PathBuf, message: String },
    #[error(
        "{path} has no tool {tool:?}; its tools are: {available}. Pass one of them with --tool"
    )]
    UnknownTool {
        path: PathBuf,
        tool: String,
        available: String,
    },
    #[error(
        "--net {requested} is wider than tool {tool:?} declares ({declared}); the runner never \
         widens a tool's network. Run it with --net {declared} or narrower, or declare \
         \"net\": \"{requested}\" for the tool in skill.json"
    )]
    NetWider {
        tool: String,
        requested: &'static str,
        declared: &'static str,
    },
    #[error(
        "--{flag} {requested} is more than tool {tool:?} declares ({declared}); a run may lower \
         a tool's limits but not raise them. Use at most {declared}, or raise limits.{field} \
         for the tool in skill.json (the cap is {cap})"
    )]
    LimitWider {
        tool: String,
        flag: &'static str,
        field: &'static str,
        requested: u64,
        declared: u64,
        cap: u64,
    },
    #[error("the input does not fit tool {tool:?}: {message}")]
    Input { tool: String, message: String },
    #[error("the job built from {dir} breaks a rule of the runner ({reason}): {message}")]
    Job {
        dir: PathBuf,
        reason: Reason,
        message: String,
    },
}

/// Reads and checks `dir/skill.json`.
pub fn load_manifest(dir: &Path) -> Result<Manifest, SkillError> {
    let path = dir.join(MANIFEST_FILE);
    let text = read_regular_file(&path, MANIFEST_MAX_BYTES).map_err(|e| match e {
        ReadError::Io(source) if source.kind() == std::io::ErrorKind::NotFound => {
            SkillError::Manifest {
                path: path.clone(),
                message: format!(
                    "not found; a skill folder holds its manifest {MANIFEST_FILE} beside its code"
                ),
            }
        }
        other => other.into_skill_error(&path, "the manifest"),
    })?;
    let manifest: Manifest = serde_json::from_slice(&text).map_err(|e| SkillError::Manifest {
        path: path.clone(),
        message: format!("is not a valid actor.skill@2 manifest: {e}; fix the field it names"),
    })?;
    check_manifest(dir, &manifest).map_err(|message| SkillError::Manifest {
        path: path.clone(),
        message,
    })?;
    Ok(manifest)
}

/// Every rule on the manifest that the runner relies on, in words when one is broken.
fn check_manifest(dir: &Path, m: &Manifest) -> Result<(), String> {
    if m.slug.trim().is_empty() {
        return Err("\"slug\" is empty; give the skill its slug".into());
    }
    if m.version.trim().is_empty() {
        return Err("\"version\" is empty; give the skill its version".into());
    }
    if m.runs != "sandbox" {
        return Err(format!(
            "\"runs\" is {:?}; the runner runs only skills with \"runs\": \"sandbox\" \
             (a prompt skill has no code to run)",
            short(&m.runs)
        ));
    }
    if m.tools.is_empty() || m.tools.len() > MAX_TOOLS {
        return Err(format!(
            "\"tools\" has {} entries; a sandbox skill has 1 to {MAX_TOOLS}",
            m.tools.len()
        ));
    }
    let mut names = HashSet::new();
    for (i, tool) in m.tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        if !job::valid_tool_name(&tool.name) {
            return Err(format!(
                "{at}.name {:?} must match ^[a-z][a-z0-9_]{{0,31}}$ (lowercase letter first, \
                 then lowercase letters, digits or _, at most 32 in all)",
                short(&tool.name)
            ));
        }
        if !names.insert(tool.name.as_str()) {
            return Err(format!(
                "{at}.name {:?} is used by an earlier tool; tool names must be unique",
                tool.name
            ));
        }
        let at = format!("tool {:?}", tool.name);
        let chars = tool.description.chars().count();
        if tool.description.trim().is_empty() || chars > MAX_DESCRIPTION_CHARS {
            return Err(format!(
                "{at}: description has {chars} characters; write 1 to {MAX_DESCRIPTION_CHARS} \
                 (the agent reads it before it calls the tool)"
            ));
        }
        if tool.language != "javascript" {
            return Err(format!(
                "{at}: language is {:?}; \"javascript\" is the only language the runner runs",
                short(&tool.language)
            ));
        }
        check_entry(dir, &tool.entry).map_err(|e| format!("{at}: entry {:?} {e}", tool.entry))?;
        check_args_schema(&tool.args).map_err(|e| format!("{at}: args {e}"))?;
        if let Some(limits) = &tool.limits {
            check_limits(limits).map_err(|e| format!("{at}: {e}"))?;
        }
    }
    Ok(())
}

/// An entry is a relative `.js` path, laid out like any input, that is a regular file of the
/// folder reached without any symlink.
fn check_entry(dir: &Path, entry: &str) -> Result<(), String> {
    if !entry.ends_with(".js") {
        return Err("must name a .js file".into());
    }
    job::check_input_name(entry).map_err(|e| {
        format!(
            "is not a usable path ({e}); write it relative to the skill folder with '/', \
             like tools/count.js"
        )
    })?;
    if entry.split('/').any(|part| part.starts_with('.')) {
        return Err(
            "is inside a dot-file or dot-folder, which `run` does not send; move the file".into(),
        );
    }
    let mut path = dir.to_path_buf();
    let parts: Vec<&str> = entry.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        path.push(part);
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!(
                "does not exist in the skill folder ({} is missing); fix the path or add the file",
                path.display()
            ))
            }
            Err(e) => return Err(format!("cannot be checked: {}: {e}", path.display())),
        };
        let last = i + 1 == parts.len();
        if meta.file_type().is_symlink() {
            return Err(format!(
                "goes through the symlink {}; the runner sends only regular files, so copy \
                 the file into the skill folder",
                path.display()
            ));
        }
        if last && !meta.is_file() {
            return Err(format!("is not a regular file ({})", path.display()));
        }
        if !last && !meta.is_dir() {
            return Err(format!("needs {} to be a folder", path.display()));
        }
    }
    Ok(())
}

/// `args` is a JSON Schema for an object; `required`, when present, lists property names.
fn check_args_schema(args: &Value) -> Result<(), String> {
    let Some(schema) = args.as_object() else {
        return Err(
            "must be a JSON Schema object, like {\"type\": \"object\", \"properties\": {…}}".into(),
        );
    };
    if let Some(kind) = schema.get("type") {
        if kind != "object" {
            return Err(format!(
                "has \"type\": {kind}; a tool's input is an object, so use \"object\""
            ));
        }
    }
    if let Some(required) = schema.get("required") {
        let names_only = required
            .as_array()
            .is_some_and(|list| list.iter().all(Value::is_string));
        if !names_only {
            return Err("\"required\" must be an array of property names".into());
        }
    }
    Ok(())
}

fn check_limits(limits: &Limits) -> Result<(), String> {
    if let Some(wall_ms) = limits.wall_ms {
        if !(1..=WALL_MS_CAP).contains(&wall_ms) {
            return Err(format!(
                "limits.wall_ms {wall_ms} is outside 1..={WALL_MS_CAP}; declare at most {WALL_MS_CAP}"
            ));
        }
    }
    if let Some(mem_bytes) = limits.mem_bytes {
        if !(MEM_BYTES_MIN..=MEM_BYTES_CAP).contains(&mem_bytes) {
            return Err(format!(
                "limits.mem_bytes {mem_bytes} is outside {MEM_BYTES_MIN}..={MEM_BYTES_CAP} \
                 (16 MiB to 256 MiB)"
            ));
        }
    }
    Ok(())
}

/// Builds the job `run` submits: the tool's entry and every file of the folder as inputs
/// carried in the job, `net` and `limits` as the tool declares unless the request narrows them.
pub fn job_from_skill(dir: &Path, req: &RunRequest) -> Result<Job, SkillError> {
    let manifest = load_manifest(dir)?;
    let Some(tool) = manifest.tools.iter().find(|t| t.name == req.tool) else {
        return Err(SkillError::UnknownTool {
            path: dir.join(MANIFEST_FILE),
            tool: short(&req.tool),
            available: manifest
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };

    let declared_net = tool.declared_net();
    let net = req.net.unwrap_or(declared_net);
    if net_breadth(net) > net_breadth(declared_net) {
        return Err(SkillError::NetWider {
            tool: tool.name.clone(),
            requested: net.as_str(),
            declared: declared_net.as_str(),
        });
    }
    let wall_ms = narrowed(
        tool,
        req.wall_ms,
        tool.declared_wall_ms(),
        "wall-ms",
        "wall_ms",
        WALL_MS_CAP,
    )?;
    let mem_bytes = narrowed(
        tool,
        req.mem_bytes,
        tool.declared_mem_bytes(),
        "mem-bytes",
        "mem_bytes",
        MEM_BYTES_CAP,
    )?;
    check_required_keys(tool, &req.input)?;

    let inputs = collect_inputs(dir)?;
    let job = Job {
        job_id: job_id_for(&manifest.slug, unix_millis()),
        class: "function".into(),
        artifact: ARTIFACT.into(),
        subject: None,
        project: None,
        args: Args {
            tool: tool.name.clone(),
            entry: tool.entry.clone(),
            input: req.input.clone(),
        },
        inputs,
        net,
        limits: Limits {
            wall_ms: Some(wall_ms),
            mem_bytes: Some(mem_bytes),
        },
        ttl_ms: None,
    };
    // Every rule of the job that does not depend on the runner's configuration: the size of
    // the input is left to the engine, which knows the configured bound.
    let any_input_size = Bounds {
        max_input_json_bytes: usize::MAX,
    };
    job::validate(job.clone(), &any_input_size).map_err(|r| SkillError::Job {
        dir: dir.to_path_buf(),
        reason: r.reason,
        message: r.message,
    })?;
    Ok(job)
}

/// How far a mode reaches: each one reaches everything the ones before it reach.
fn net_breadth(net: Net) -> u8 {
    match net {
        Net::Deny => 0,
        Net::OpenvibeOnly => 1,
        Net::Public => 2,
    }
}

fn narrowed(
    tool: &ToolManifest,
    requested: Option<u64>,
    declared: u64,
    flag: &'static str,
    field: &'static str,
    cap: u64,
) -> Result<u64, SkillError> {
    match requested {
        None => Ok(declared),
        Some(requested) if requested <= declared => Ok(requested),
        Some(requested) => Err(SkillError::LimitWider {
            tool: tool.name.clone(),
            flag,
            field,
            requested,
            declared,
            cap,
        }),
    }
}

/// The one check `run` makes of the input against `args`: the keys `required` names are
/// there. Everything else is the tool's to judge.
fn check_required_keys(tool: &ToolManifest, input: &JsonText) -> Result<(), SkillError> {
    let required: Vec<&str> = tool
        .args
        .get("required")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if required.is_empty() {
        return Ok(());
    }
    let Some(keys) = input.object_keys() else {
        return Err(SkillError::Input {
            tool: tool.name.clone(),
            message: format!(
                "it takes an object holding {}; pass one with --input '{{…}}'",
                required.join(", ")
            ),
        });
    };
    let missing: Vec<&str> = required
        .into_iter()
        .filter(|key| !keys.iter().any(|k| k == key))
        .collect();
    if !missing.is_empty() {
        return Err(SkillError::Input {
            tool: tool.name.clone(),
            message: format!(
                "the input lacks {}, which args.required in skill.json asks for; add {} to --input",
                missing.join(", "),
                if missing.len() == 1 { "it" } else { "them" }
            ),
        });
    }
    Ok(())
}

/// `run-<slug>-<unix millis>`, within the job_id charset and length: any other character of
/// the slug becomes `-`, and the slug is shortened so the whole id fits.
pub fn job_id_for(slug: &str, unix_millis: u128) -> String {
    let suffix = format!("-{unix_millis}");
    let budget = MAX_JOB_ID_LEN.saturating_sub("run-".len() + suffix.len());
    let slug: String = slug
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(budget)
        .collect();
    let slug = if slug.is_empty() { "skill" } else { &slug };
    format!("run-{slug}{suffix}")
}

fn unix_millis() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// Every regular file of the folder but `skill.json` and dot-files/dot-folders, sorted by
/// name, each read, hashed and carried in base64.
fn collect_inputs(dir: &Path) -> Result<Vec<Input>, SkillError> {
    let mut files = Vec::new();
    walk(dir, "", 1, &mut files)?;
    files.sort_by(|a, b| a.0.cmp(&b.0));

    let mut inputs = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for (name, path, len) in files {
        total += len;
        if total > MAX_INPUTS_TOTAL_BYTES as u64 {
            return Err(SkillError::Folder {
                path: dir.to_path_buf(),
                message: format!(
                    "the files to send hold more than {MAX_INPUTS_TOTAL_BYTES} bytes (1 MiB) in \
                     all (reached at {name}); move what the tools do not need out of the folder \
                     or into a dot-folder"
                ),
            });
        }
        let bytes =
            read_regular_file(&path, len).map_err(|e| e.into_skill_error(&path, name.as_str()))?;
        job::check_input_content(&name, &bytes).map_err(|message| SkillError::Folder {
            path: path.clone(),
            message: format!("{message}; only text files up to these sizes can be sent"),
        })?;
        inputs.push(Input {
            sha256: hex::encode(Sha256::digest(&bytes)),
            content_base64: Some(base64::engine::general_purpose::STANDARD.encode(&bytes)),
            media_id: None,
            name,
        });
    }
    Ok(inputs)
}

/// Collects `(name, path, size)` of the files under `dir`; `prefix` is `dir`'s name relative
/// to the skill folder, `depth` the number of components a file here has.
fn walk(
    dir: &Path,
    prefix: &str,
    depth: usize,
    files: &mut Vec<(String, PathBuf, u64)>,
) -> Result<(), SkillError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SkillError::Io { path, source }
    };
    let mut entries = fs::read_dir(dir)
        .map_err(io(dir))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let Some(file_name) = entry.file_name().to_str().map(str::to_owned) else {
            return Err(SkillError::Folder {
                path,
                message: "the name is not UTF-8; rename it with [A-Za-z0-9._-]".into(),
            });
        };
        if file_name.starts_with('.') || (prefix.is_empty() && file_name == MANIFEST_FILE) {
            continue;
        }
        let name = if prefix.is_empty() {
            file_name
        } else {
            format!("{prefix}/{file_name}")
        };
        let meta = fs::symlink_metadata(&path).map_err(io(&path))?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            return Err(SkillError::Folder {
                path,
                message: "is a symlink; the runner sends only regular files, so replace it \
                          with a copy of the file (or rename it to start with '.' to leave it out)"
                    .into(),
            });
        }
        if kind.is_dir() {
            if depth >= MAX_NAME_COMPONENTS {
                return Err(SkillError::Folder {
                    path,
                    message: format!(
                        "is nested too deep; a file's path may have at most \
                         {MAX_NAME_COMPONENTS} components"
                    ),
                });
            }
            walk(&path, &name, depth + 1, files)?;
            continue;
        }
        if !kind.is_file() {
            return Err(SkillError::Folder {
                path,
                message: "is not a regular file (a socket, pipe or device); remove it from the \
                          skill folder"
                    .into(),
            });
        }
        job::check_input_name(&name).map_err(|e| SkillError::Folder {
            path: path.clone(),
            message: format!(
                "{e}; rename it (names use [A-Za-z0-9._-], at most 64 characters per part)"
            ),
        })?;
        let len = meta.len();
        let cap = if name.ends_with(".js") {
            MAX_JS_BYTES
        } else {
            MAX_INPUTS_TOTAL_BYTES
        };
        if len > cap as u64 {
            return Err(SkillError::Folder {
                path,
                message: format!(
                    "is {len} bytes; a {} may be at most {cap} bytes",
                    if cap == MAX_JS_BYTES {
                        ".js file"
                    } else {
                        "file"
                    }
                ),
            });
        }
        files.push((name, path, len));
        if files.len() > MAX_INPUTS {
            return Err(SkillError::Folder {
                path: dir.to_path_buf(),
                message: format!(
                    "the skill folder has more than {MAX_INPUTS} files to send; move what the \
                     tools do not need out of the folder or into a dot-folder"
                ),
            });
        }
    }
    Ok(())
}

enum ReadError {
    Io(std::io::Error),
    NotRegular,
    TooLarge(u64),
}

impl ReadError {
    fn into_skill_error(self, path: &Path, what: &str) -> SkillError {
        let path = path.to_path_buf();
        match self {
            ReadError::Io(source) => SkillError::Io { path, source },
            ReadError::NotRegular => SkillError::Folder {
                path,
                message: format!(
                    "{what} is not a regular file (a symlink or something else); replace it \
                     with the file itself"
                ),
            },
            ReadError::TooLarge(max) => SkillError::Folder {
                path,
                message: format!("{what} is larger than {max} bytes, or grew while being read"),
            },
        }
    }
}

/// Reads a regular file, never through a symlink, and never more than `max` bytes.
fn read_regular_file(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                ReadError::NotRegular
            } else {
                ReadError::Io(e)
            }
        })?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular);
    }
    let mut bytes = Vec::with_capacity(meta.len().min(max) as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge(max));
    }
    Ok(bytes)
}

fn short(s: &str) -> String {
    s.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::symlink;
    use tempfile::TempDir;

    const COUNT_JS: &str = "const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n\
                            process.stdout.write(JSON.stringify({ words: input.text.split(/\\s+/).length }));\n";

    fn count_tool() -> Value {
        json!({
            "name": "count_words",
            "description": "Counts the words of a text.",
            "language": "javascript",
            "entry": "tools/count.js",
            "args": {
                "type": "object",
                "properties": { "text": { "type": "string", "maxLength": 200 } },
                "required": ["text"]
            },
            "net": "deny",
            "limits": { "wall_ms": 5000, "mem_bytes": 67108864 }
        })
    }

    fn manifest_with(tools: Vec<Value>) -> Value {
        json!({
            "contract": "actor.skill@2",
            "slug": "word-tools",
            "version": "1.2.0",
            "runs": "sandbox",
            "instructions": "Use count_words to count words.",
            "requires": { "kinds": ["skill.run"] },
            "tools": tools
        })
    }

    /// A skill folder: `skill.json` and `tools/count.js`.
    fn skill_dir(manifest: &Value) -> TempDir {
        let dir = TempDir::new().expect("tempdir");
        write(&dir, "tools/count.js", COUNT_JS);
        write(&dir, "skill.json", &manifest.to_string());
        dir
    }

    fn good_dir() -> TempDir {
        skill_dir(&manifest_with(vec![count_tool()]))
    }

    fn write(dir: &TempDir, name: &str, text: &str) {
        let path = dir.path().join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(path, text).expect("write");
    }

    /// The good manifest with one field of its one tool changed.
    fn tool_with(key: &str, value: Value) -> Value {
        let mut tool = count_tool();
        tool[key] = value;
        manifest_with(vec![tool])
    }

    /// A value as JSON text, for a request's input.
    fn text(v: Value) -> JsonText {
        JsonText::parse(&v.to_string(), crate::json_text::DuplicateKeys::Refuse).expect("json")
    }

    fn request(tool: &str) -> RunRequest {
        RunRequest {
            tool: tool.into(),
            input: text(json!({ "text": "hello there" })),
            net: None,
            wall_ms: None,
            mem_bytes: None,
        }
    }

    #[track_caller]
    fn manifest_error(manifest: &Value, needle: &str) {
        let dir = skill_dir(manifest);
        match load_manifest(dir.path()) {
            Ok(_) => panic!("expected an error mentioning {needle:?}"),
            Err(e) => {
                let text = e.to_string();
                assert!(matches!(e, SkillError::Manifest { .. }), "{text}");
                assert!(text.contains(needle), "{text:?} should mention {needle:?}");
                assert!(text.contains("skill.json"), "{text:?} should name the file");
            }
        }
    }

    #[track_caller]
    fn build_error(dir: &TempDir, req: &RunRequest, needle: &str) -> SkillError {
        match job_from_skill(dir.path(), req) {
            Ok(job) => panic!("expected an error mentioning {needle:?}, got {job:?}"),
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains(needle), "{text:?} should mention {needle:?}");
                e
            }
        }
    }

    fn names(job: &Job) -> Vec<&str> {
        job.inputs.iter().map(|i| i.name.as_str()).collect()
    }

    // ---- a good folder ----------------------------------------------------------------

    #[test]
    fn a_good_folder_loads_and_ignores_unknown_top_level_fields() {
        let dir = good_dir();
        let m = load_manifest(dir.path()).expect("manifest");
        assert_eq!(m.slug, "word-tools");
        assert_eq!(m.version, "1.2.0");
        assert_eq!(m.tools.len(), 1);
        assert_eq!(m.tools[0].declared_net(), Net::Deny);
        assert_eq!(m.tools[0].declared_wall_ms(), 5000);
        assert_eq!(m.tools[0].declared_mem_bytes(), 67_108_864);
    }

    #[test]
    fn a_good_folder_builds_a_valid_job() {
        let dir = good_dir();
        let job = job_from_skill(dir.path(), &request("count_words")).expect("job");
        assert_eq!(job.class, "function");
        assert_eq!(job.artifact, ARTIFACT);
        assert_eq!(job.args.tool, "count_words");
        assert_eq!(job.args.entry, "tools/count.js");
        assert_eq!(job.args.input.as_str(), r#"{"text":"hello there"}"#);
        assert_eq!(job.net, Net::Deny);
        assert_eq!(job.limits.wall_ms, Some(5000));
        assert_eq!(job.limits.mem_bytes, Some(67_108_864));
        assert_eq!(job.ttl_ms, None);
        assert!(job.job_id.starts_with("run-word-tools-"), "{}", job.job_id);
        assert_eq!(names(&job), ["tools/count.js"]);
        let input = &job.inputs[0];
        assert_eq!(
            input.sha256,
            hex::encode(Sha256::digest(COUNT_JS.as_bytes()))
        );
        assert_eq!(input.sha256, input.sha256.to_lowercase());
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(input.content_base64.as_deref().expect("carried"))
            .expect("base64");
        assert_eq!(decoded, COUNT_JS.as_bytes());
        assert_eq!(input.media_id, None);

        let valid = job::validate(job.clone(), &Bounds::default()).expect("valid");
        assert_eq!(valid.input_json, br#"{"text":"hello there"}"#);
        // It survives the wire: serialized and parsed back as a dispatcher's job would be.
        let text = serde_json::to_vec(&job).expect("json");
        job::parse_job(&text, &Bounds::default()).expect("parses");
    }

    #[test]
    fn undeclared_net_and_limits_take_the_defaults() {
        let mut tool = count_tool();
        let object = tool.as_object_mut().expect("object");
        object.remove("net");
        object.remove("limits");
        let dir = skill_dir(&manifest_with(vec![tool]));
        let job = job_from_skill(dir.path(), &request("count_words")).expect("job");
        assert_eq!(job.net, Net::Deny);
        assert_eq!(job.limits.wall_ms, Some(WALL_MS_DEFAULT));
        assert_eq!(job.limits.mem_bytes, Some(MEM_BYTES_DEFAULT));
    }

    #[test]
    fn several_tools_pick_the_requested_one() {
        let mut second = count_tool();
        second["name"] = json!("fetch_page");
        second["entry"] = json!("tools/fetch.js");
        second["net"] = json!("public");
        let dir = skill_dir(&manifest_with(vec![count_tool(), second]));
        write(&dir, "tools/fetch.js", "process.stdout.write('1')\n");
        let job = job_from_skill(dir.path(), &request("fetch_page")).expect("job");
        assert_eq!(job.args.entry, "tools/fetch.js");
        assert_eq!(job.net, Net::Public);
        // Both code files travel: a tool may require the other's helpers.
        assert_eq!(names(&job), ["tools/count.js", "tools/fetch.js"]);
    }

    // ---- manifest errors --------------------------------------------------------------

    #[test]
    fn missing_manifest() {
        let dir = TempDir::new().expect("tempdir");
        let e = load_manifest(dir.path()).expect_err("no manifest");
        assert!(e.to_string().contains("skill.json"), "{e}");
        assert!(e.to_string().contains("not found"), "{e}");
    }

    #[test]
    fn manifest_that_is_not_json() {
        let dir = good_dir();
        write(&dir, "skill.json", "{ not json");
        let e = load_manifest(dir.path()).expect_err("bad json");
        assert!(e.to_string().contains("not a valid actor.skill@2"), "{e}");
    }

    #[test]
    fn manifest_that_is_a_symlink_is_refused() {
        let dir = good_dir();
        let elsewhere = TempDir::new().expect("tempdir");
        let target = elsewhere.path().join("skill.json");
        fs::write(&target, manifest_with(vec![count_tool()]).to_string()).expect("write");
        fs::remove_file(dir.path().join("skill.json")).expect("rm");
        symlink(&target, dir.path().join("skill.json")).expect("symlink");
        let e = load_manifest(dir.path()).expect_err("symlink");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn missing_top_level_fields() {
        for key in ["slug", "version", "runs"] {
            let mut m = manifest_with(vec![count_tool()]);
            m.as_object_mut().expect("object").remove(key);
            manifest_error(&m, key);
        }
        let mut m = manifest_with(vec![count_tool()]);
        m["slug"] = json!(" ");
        manifest_error(&m, "slug");
        let mut m = manifest_with(vec![count_tool()]);
        m["version"] = json!("");
        manifest_error(&m, "version");
    }

    #[test]
    fn runs_must_be_sandbox() {
        let mut m = manifest_with(vec![count_tool()]);
        m["runs"] = json!("prompt");
        manifest_error(&m, "\"runs\": \"sandbox\"");
        m.as_object_mut().expect("object").remove("tools");
        manifest_error(&m, "prompt skill");
    }

    #[test]
    fn one_to_five_tools() {
        manifest_error(&manifest_with(vec![]), "1 to 5");
        let tools: Vec<Value> = (0..6)
            .map(|i| {
                let mut t = count_tool();
                t["name"] = json!(format!("tool_{i}"));
                t
            })
            .collect();
        manifest_error(&manifest_with(tools.clone()), "1 to 5");
        let dir = skill_dir(&manifest_with(tools[..5].to_vec()));
        assert_eq!(load_manifest(dir.path()).expect("five").tools.len(), 5);
    }

    #[test]
    fn tool_names_follow_the_regex_and_are_unique() {
        for bad in ["", "Count", "1count", "count-words", &"a".repeat(33)] {
            manifest_error(&tool_with("name", json!(bad)), "tools[0].name");
        }
        let dir = skill_dir(&tool_with("name", json!("a".repeat(32))));
        load_manifest(dir.path()).expect("32 characters");
        manifest_error(&manifest_with(vec![count_tool(), count_tool()]), "unique");
    }

    #[test]
    fn description_of_1_to_200_characters() {
        let dir = skill_dir(&tool_with("description", json!("é".repeat(200))));
        load_manifest(dir.path()).expect("200 characters");
        manifest_error(
            &tool_with("description", json!("é".repeat(201))),
            "description",
        );
        manifest_error(&tool_with("description", json!("")), "description");
    }

    #[test]
    fn language_must_be_javascript() {
        for bad in ["python", "JavaScript", "typescript", ""] {
            manifest_error(&tool_with("language", json!(bad)), "\"javascript\"");
        }
    }

    #[test]
    fn entry_must_be_a_relative_js_file_of_the_folder() {
        manifest_error(
            &tool_with("entry", json!("tools/count.ts")),
            "must name a .js",
        );
        manifest_error(
            &tool_with("entry", json!("tools/missing.js")),
            "does not exist",
        );
        manifest_error(&tool_with("entry", json!("/tools/count.js")), "relative");
        manifest_error(&tool_with("entry", json!("./tools/count.js")), "relative");
        manifest_error(&tool_with("entry", json!("../count.js")), "relative");
        manifest_error(&tool_with("entry", json!("tools\\count.js")), "relative");
        manifest_error(&tool_with("entry", json!(".hidden/count.js")), "dot-");
        manifest_error(&tool_with("entry", json!("tools")), "must name a .js");
        // A folder named like a script is not a file.
        let dir = skill_dir(&tool_with("entry", json!("dir.js")));
        fs::create_dir(dir.path().join("dir.js")).expect("mkdir");
        let e = load_manifest(dir.path()).expect_err("a folder");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn entry_through_a_symlink_is_refused() {
        let dir = skill_dir(&tool_with("entry", json!("link.js")));
        symlink(
            dir.path().join("tools/count.js"),
            dir.path().join("link.js"),
        )
        .expect("symlink");
        let e = load_manifest(dir.path()).expect_err("symlinked entry");
        assert!(e.to_string().contains("symlink"), "{e}");

        let dir = skill_dir(&tool_with("entry", json!("lib/count.js")));
        symlink(dir.path().join("tools"), dir.path().join("lib")).expect("symlink");
        let e = load_manifest(dir.path()).expect_err("symlinked folder");
        assert!(e.to_string().contains("symlink"), "{e}");
    }

    #[test]
    fn unknown_fields_inside_a_tool_are_refused() {
        manifest_error(&tool_with("nett", json!("public")), "nett");
        manifest_error(&tool_with("limits", json!({ "wall": 5 })), "wall");
    }

    #[test]
    fn a_tool_needs_its_required_fields() {
        for key in ["name", "description", "language", "entry", "args"] {
            let mut tool = count_tool();
            tool.as_object_mut().expect("object").remove(key);
            manifest_error(&manifest_with(vec![tool]), key);
        }
    }

    #[test]
    fn net_must_be_a_valid_mode() {
        for good in ["deny", "openvibe-only", "public"] {
            let dir = skill_dir(&tool_with("net", json!(good)));
            load_manifest(dir.path()).expect(good);
        }
        for bad in ["allow", "Public", "openvibe_only", ""] {
            manifest_error(&tool_with("net", json!(bad)), "unknown variant");
        }
    }

    #[test]
    fn limits_within_the_caps() {
        for good in [
            json!({ "wall_ms": 1 }),
            json!({ "wall_ms": 30000 }),
            json!({ "mem_bytes": 16777216 }),
            json!({ "mem_bytes": 268435456u64 }),
            json!({}),
        ] {
            let dir = skill_dir(&tool_with("limits", good.clone()));
            load_manifest(dir.path()).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        manifest_error(&tool_with("limits", json!({ "wall_ms": 0 })), "wall_ms");
        manifest_error(&tool_with("limits", json!({ "wall_ms": 30001 })), "wall_ms");
        manifest_error(
            &tool_with("limits", json!({ "mem_bytes": 16777215 })),
            "mem_bytes",
        );
        manifest_error(
            &tool_with("limits", json!({ "mem_bytes": 268435457u64 })),
            "mem_bytes",
        );
    }

    #[test]
    fn args_must_be_an_object_schema() {
        manifest_error(&tool_with("args", json!("text")), "JSON Schema object");
        manifest_error(
            &tool_with("args", json!({ "type": "string" })),
            "\"object\"",
        );
        manifest_error(
            &tool_with("args", json!({ "required": "text" })),
            "required",
        );
        manifest_error(&tool_with("args", json!({ "required": [1] })), "required");
    }

    // ---- the request ------------------------------------------------------------------

    #[test]
    fn an_unknown_tool_lists_the_tools() {
        let dir = good_dir();
        let e = build_error(&dir, &request("count_lines"), "count_words");
        assert!(matches!(e, SkillError::UnknownTool { .. }));
        assert!(e.to_string().contains("count_lines"), "{e}");
    }

    #[test]
    fn net_widening_is_refused() {
        let dir = good_dir(); // declares deny
        for wider in [Net::OpenvibeOnly, Net::Public] {
            let mut req = request("count_words");
            req.net = Some(wider);
            let e = build_error(&dir, &req, "wider");
            assert!(matches!(e, SkillError::NetWider { .. }));
            assert!(e.to_string().contains(wider.as_str()), "{e}");
        }
        let dir = skill_dir(&tool_with("net", json!("openvibe-only")));
        let mut req = request("count_words");
        req.net = Some(Net::Public);
        build_error(&dir, &req, "wider");
    }

    #[test]
    fn net_narrowing_is_allowed() {
        let dir = skill_dir(&tool_with("net", json!("public")));
        for (asked, got) in [
            (None, Net::Public),
            (Some(Net::Public), Net::Public),
            (Some(Net::OpenvibeOnly), Net::OpenvibeOnly),
            (Some(Net::Deny), Net::Deny),
        ] {
            let mut req = request("count_words");
            req.net = asked;
            assert_eq!(job_from_skill(dir.path(), &req).expect("job").net, got);
        }
    }

    #[test]
    fn limits_may_be_lowered_not_raised() {
        let dir = good_dir(); // declares 5000 ms and 64 MiB
        let mut req = request("count_words");
        req.wall_ms = Some(100);
        req.mem_bytes = Some(33_554_432);
        let job = job_from_skill(dir.path(), &req).expect("job");
        assert_eq!(job.limits.wall_ms, Some(100));
        assert_eq!(job.limits.mem_bytes, Some(33_554_432));

        req.wall_ms = Some(5000);
        req.mem_bytes = Some(67_108_864);
        job_from_skill(dir.path(), &req).expect("equal to the declaration");

        let mut req = request("count_words");
        req.wall_ms = Some(5001);
        let e = build_error(&dir, &req, "--wall-ms 5001");
        assert!(matches!(e, SkillError::LimitWider { .. }));
        let mut req = request("count_words");
        req.mem_bytes = Some(67_108_865);
        build_error(&dir, &req, "limits.mem_bytes");
    }

    #[test]
    fn a_limit_below_the_minimum_is_the_runners_rejection() {
        let dir = good_dir();
        let mut req = request("count_words");
        req.wall_ms = Some(0);
        let e = build_error(&dir, &req, "wall_ms");
        assert!(matches!(e, SkillError::Job { .. }), "{e}");
    }

    #[test]
    fn required_input_keys_are_checked() {
        let dir = good_dir();
        let mut req = request("count_words");
        req.input = text(json!({}));
        build_error(&dir, &req, "lacks text");
        req.input = text(json!("hello"));
        build_error(&dir, &req, "takes an object");
        req.input = text(json!({ "text": 5 })); // the type is the tool's to judge
        job_from_skill(dir.path(), &req).expect("job");
        // A key is read unescaped, as the tool's JSON.parse reads it.
        let escaped = r#"{"\u0074ext":"hi"}"#;
        req.input =
            JsonText::parse(escaped, crate::json_text::DuplicateKeys::Refuse).expect("json");
        job_from_skill(dir.path(), &req).expect("job");
        // Without `required`, any input goes through.
        let dir = skill_dir(&tool_with("args", json!({ "type": "object" })));
        req.input = text(Value::Null);
        job_from_skill(dir.path(), &req).expect("job");
    }

    #[test]
    fn the_input_reaches_the_job_as_written() {
        let dir = good_dir();
        let mut req = request("count_words");
        let written = r#"{"zeta":2,"text":"\u00e9\/","id":1234567890123456789012,"n":-0}"#;
        req.input =
            JsonText::parse(written, crate::json_text::DuplicateKeys::Refuse).expect("json");
        let job = job_from_skill(dir.path(), &req).expect("job");
        let valid = job::validate(job.clone(), &Bounds::default()).expect("valid");
        assert_eq!(valid.input_json, written.as_bytes());
        // And through the job's text, as `run` hands it to the engine.
        let text = serde_json::to_vec(&job).expect("json");
        let parsed = job::parse_job(&text, &Bounds::default()).expect("parses");
        assert_eq!(parsed.input_json, written.as_bytes());
    }

    // ---- the folder -------------------------------------------------------------------

    #[test]
    fn nested_files_are_sent_sorted_with_slashes() {
        let dir = good_dir();
        write(&dir, "lib/text/split.js", "module.exports = 1;\n");
        write(&dir, "lib/a-b.js", "module.exports = 2;\n");
        write(&dir, "data/words.json", "[\"a\"]\n");
        write(&dir, "README.md", "# word tools\n");
        write(&dir, "lib/skill.json", "{}\n"); // only the root manifest stays home
        let job = job_from_skill(dir.path(), &request("count_words")).expect("job");
        assert_eq!(
            names(&job),
            [
                "README.md",
                "data/words.json",
                "lib/a-b.js",
                "lib/skill.json",
                "lib/text/split.js",
                "tools/count.js",
            ]
        );
        for input in &job.inputs {
            let bytes = fs::read(dir.path().join(&input.name)).expect("read");
            assert_eq!(
                input.sha256,
                hex::encode(Sha256::digest(&bytes)),
                "{}",
                input.name
            );
        }
        job::validate(job, &Bounds::default()).expect("valid");
    }

    #[test]
    fn dot_files_and_dot_folders_are_skipped() {
        let dir = good_dir();
        write(&dir, ".env", "SECRET=1\n");
        write(&dir, ".git/config", "[core]\n");
        write(&dir, "tools/.eslintrc.json", "{}\n");
        write(&dir, "tools/.cache/x.js", "1\n");
        let job = job_from_skill(dir.path(), &request("count_words")).expect("job");
        assert_eq!(names(&job), ["tools/count.js"]);
    }

    #[test]
    fn a_symlink_in_the_folder_is_an_error_naming_it() {
        let dir = good_dir();
        symlink("/etc/passwd", dir.path().join("tools/passwd")).expect("symlink");
        let e = build_error(&dir, &request("count_words"), "tools/passwd");
        assert!(e.to_string().contains("symlink"), "{e}");

        let dir = good_dir();
        symlink("/etc", dir.path().join("etc")).expect("symlink");
        build_error(&dir, &request("count_words"), "symlink");

        // A dangling one too.
        let dir = good_dir();
        symlink("/nowhere", dir.path().join("x.js")).expect("symlink");
        build_error(&dir, &request("count_words"), "x.js");
    }

    #[test]
    fn a_special_file_is_an_error_naming_it() {
        let dir = good_dir();
        let socket = dir.path().join("tools/agent.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
        let e = build_error(&dir, &request("count_words"), "agent.sock");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn file_rules_name_the_file() {
        let dir = good_dir();
        write(&dir, "lib/big.js", &"/".repeat(MAX_JS_BYTES + 1));
        build_error(&dir, &request("count_words"), "lib/big.js");

        let dir = good_dir();
        write(&dir, "lib/ok.js", &"/".repeat(MAX_JS_BYTES));
        job_from_skill(dir.path(), &request("count_words")).expect("64 KiB .js");

        let dir = good_dir();
        fs::write(dir.path().join("logo.png"), b"\x89PNG\r\n\x1a\n\0\0").expect("write");
        build_error(&dir, &request("count_words"), "logo.png");

        let dir = good_dir();
        write(&dir, "my notes.txt", "x");
        build_error(&dir, &request("count_words"), "my notes.txt");
    }

    #[test]
    fn too_many_or_too_large_files_are_refused() {
        let dir = good_dir();
        for i in 0..MAX_INPUTS {
            write(&dir, &format!("data/f{i:02}.txt"), "x");
        }
        build_error(&dir, &request("count_words"), "more than 64 files");

        let dir = good_dir();
        for i in 0..MAX_INPUTS - 1 {
            write(&dir, &format!("data/f{i:02}.txt"), "x");
        }
        let job = job_from_skill(dir.path(), &request("count_words")).expect("64 files");
        assert_eq!(job.inputs.len(), MAX_INPUTS);

        let dir = good_dir();
        write(&dir, "data/a.txt", &"a".repeat(600 * 1024));
        write(&dir, "data/b.txt", &"b".repeat(600 * 1024));
        build_error(&dir, &request("count_words"), "1 MiB");
    }

    #[test]
    fn folders_deeper_than_the_name_rule_are_refused() {
        let dir = good_dir();
        write(&dir, "a/b/c/d/e/f/g/h.txt", "8 components");
        job_from_skill(dir.path(), &request("count_words")).expect("8 components");
        write(&dir, "a/b/c/d/e/f/g/h/i.txt", "9 components");
        build_error(&dir, &request("count_words"), "too deep");
    }

    #[test]
    fn case_insensitive_duplicates_are_the_runners_rejection() {
        let dir = good_dir();
        write(&dir, "tools/Count.js", "1\n");
        let e = build_error(&dir, &request("count_words"), "twice");
        assert!(matches!(e, SkillError::Job { .. }), "{e}");
    }

    // ---- job ids ----------------------------------------------------------------------

    #[test]
    fn job_ids_are_sanitized_and_bounded() {
        assert_eq!(
            job_id_for("word-tools", 1_700_000_000_000),
            "run-word-tools-1700000000000"
        );
        assert_eq!(job_id_for("mes outils/é", 1), "run-mes-outils---1");
        assert_eq!(job_id_for("", 5), "run-skill-5");
        let long = job_id_for(&"s".repeat(200), 1_700_000_000_000);
        assert_eq!(long.len(), MAX_JOB_ID_LEN);
        assert!(job::valid_job_id(&long), "{long}");
        let huge = job_id_for(&"é".repeat(100), u128::MAX);
        assert!(job::valid_job_id(&huge), "{huge}");
    }

    // ---- the repository's test skills ------------------------------------------------

    /// An input that holds every key `required` names, with a value of the declared type.
    fn sample_input(args: &Value) -> Value {
        let mut object = serde_json::Map::new();
        let required = args.get("required").and_then(Value::as_array);
        for key in required.into_iter().flatten().filter_map(Value::as_str) {
            let kind = args
                .pointer(&format!("/properties/{key}/type"))
                .and_then(Value::as_str);
            let value = match kind {
                Some("number") | Some("integer") => json!(1),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                _ => json!("text"),
            };
            object.insert(key.to_string(), value);
        }
        Value::Object(object)
    }

    #[test]
    fn every_test_skill_builds_a_valid_job() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("test-skills");
        let Ok(entries) = fs::read_dir(&root) else {
            return;
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join(MANIFEST_FILE).is_file())
            .collect();
        dirs.sort();
        for dir in dirs {
            let manifest = load_manifest(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            for tool in &manifest.tools {
                let req = RunRequest {
                    tool: tool.name.clone(),
                    input: text(sample_input(&tool.args)),
                    net: None,
                    wall_ms: None,
                    mem_bytes: None,
                };
                let job = job_from_skill(&dir, &req)
                    .unwrap_or_else(|e| panic!("{} {}: {e}", dir.display(), tool.name));
                assert_eq!(job.net, tool.declared_net());
                job::validate(job, &Bounds::default())
                    .unwrap_or_else(|r| panic!("{} {}: {}", dir.display(), tool.name, r.message));
            }
        }
    }
}
