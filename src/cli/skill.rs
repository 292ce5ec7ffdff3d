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
    #[error("--{flag} {requested} is below the least a job may have ({min}); use {min} or more")]
    LimitTooLow {
        flag: &'static str,
        requested: u64,
        min: u64,
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
    // Opened once: the manifest and the files come from this one folder, even if its path
    // is made to lead elsewhere meanwhile.
    let root = folder::open_folder(dir).map_err(|source| SkillError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let manifest = manifest::load_manifest_at(std::os::fd::AsFd::as_fd(&root), dir)?;
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
        ("wall-ms", "wall_ms"),
        (1, WALL_MS_CAP),
    )?;
    let mem_bytes = narrowed(
        tool,
        req.mem_bytes,
        tool.declared_mem_bytes(),
        ("mem-bytes", "mem_bytes"),
        (MEM_BYTES_MIN, MEM_BYTES_CAP),
    )?;
    check_required_keys(tool, &req.input)?;

    let inputs = collect_inputs_from(std::os::fd::AsFd::as_fd(&root), dir)?;
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

/// The limit a run asked for with `--<flag>`, within the job's bounds `(min, cap)` and no
/// more than the tool declares in `limits.<field>`; the declared one when none was asked.
fn narrowed(
    tool: &ToolManifest,
    requested: Option<u64>,
    declared: u64,
    (flag, field): (&'static str, &'static str),
    (min, cap): (u64, u64),
) -> Result<u64, SkillError> {
    match requested {
        None => Ok(declared),
        Some(requested) if requested < min => Err(SkillError::LimitTooLow {
            flag,
            requested,
            min,
        }),
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

fn short(s: &str) -> String {
    s.chars().take(80).collect()
}

mod folder;
mod manifest;

use folder::collect_inputs_from;
pub use manifest::load_manifest;

#[cfg(test)]
mod tests;
