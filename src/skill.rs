//! The `run` command's side of a skill folder: read its `skill.json` manifest (the part of
//! `actor.skill@2` the runner needs), then build the job a dispatcher would submit, with
//! every code file hashed and carried in the job itself.
//!
//! The rule from ADR-060 holds here too: the job runs with the tool's declared `net` and
//! `limits`. A request may narrow them; asking for more is an error, never a silent widening.

use crate::job::{
    self, Args, Bounds, Input, Job, Limits, Net, Reason, ValidJob, ARTIFACT, MAX_INPUTS,
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

/// The job `run` runs, checked once by the job's rules ([`job::validate`]): the tool's entry
/// and every file of the folder as inputs carried in the job, `net` and `limits` as the
/// tool declares unless the request narrows them. The configured bound on the input's size
/// is the engine's to apply ([`crate::engine::Engine::run_built`]).
pub fn valid_job_from_skill(dir: &Path, req: &RunRequest) -> Result<ValidJob, SkillError> {
    let job = job_from_folder(dir, req)?;
    checked(dir, job)
}

/// The same job as a dispatcher would submit it (to send it to a daemon), checked by the
/// same rules.
pub fn job_from_skill(dir: &Path, req: &RunRequest) -> Result<Job, SkillError> {
    let job = job_from_folder(dir, req)?;
    checked(dir, job.clone())?;
    Ok(job)
}

/// Every rule of the job that does not depend on the runner's configuration: the size of
/// the input is left to the engine, which knows the configured bound.
fn checked(dir: &Path, job: Job) -> Result<ValidJob, SkillError> {
    let any_input_size = Bounds {
        max_input_json_bytes: usize::MAX,
    };
    job::validate(job, &any_input_size).map_err(|r| SkillError::Job {
        dir: dir.to_path_buf(),
        reason: r.reason,
        message: r.message,
    })
}

fn job_from_folder(dir: &Path, req: &RunRequest) -> Result<Job, SkillError> {
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
    Ok(Job {
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
    })
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
mod tests;
