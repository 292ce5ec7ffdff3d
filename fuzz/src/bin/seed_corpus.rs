//! Writes the seed corpora from the repository's test skills (scripts/fuzz runs it):
//!
//! - `skill_manifest/`: every `test-skills/*/skill.json` as it is;
//! - `job_parser/`: for every test skill and tool, the job `run` would submit
//!   (`skill::job_from_skill`), with the smallest input among the tool's cases in `cases.json`
//!   (the required keys, each `null`, when that is over 4 KiB)
//!   and without the large files (over 6 KiB) the tool does not start from;
//! - `input_names/`: the input names of those jobs.
//!
//! Usage: seed-corpus <test-skills folder> <corpus folder>

use openvibe_skill_runner::json_text::{DuplicateKeys, JsonText};
use openvibe_skill_runner::cli::skill::{self, RunRequest};
use serde_json::{Map, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// An input whose base64 is longer than this (6 KiB of bytes) is left out of a seed job.
const LARGE_B64: usize = 8 * 1024;
/// A case input longer than this, serialized, is replaced by the required keys, each `null`.
const LARGE_INPUT: usize = 4 * 1024;

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [skills, out] = args.as_slice() else {
        eprintln!("usage: seed-corpus <test-skills folder> <corpus folder>");
        return ExitCode::from(2);
    };
    match run(skills, out) {
        Ok((manifests, jobs, names)) => {
            println!(
                "seed corpus in {}: {manifests} manifests, {jobs} jobs, {names} input names",
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("seed-corpus: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(skills: &Path, out: &Path) -> Result<(usize, usize, usize), String> {
    let dirs = ["skill_manifest", "job_parser", "input_names"].map(|d| out.join(d));
    for dir in &dirs {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let [manifest_dir, job_dir, name_dir] = &dirs;
    let mut folders: Vec<PathBuf> = fs::read_dir(skills)
        .map_err(|e| format!("cannot read {}: {e}", skills.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(skill::MANIFEST_FILE).is_file())
        .collect();
    folders.sort();

    let (mut manifests, mut jobs, mut names) = (0, 0, std::collections::BTreeSet::new());
    for folder in &folders {
        let slug = folder
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("skill")
            .to_string();
        let text = fs::read(folder.join(skill::MANIFEST_FILE))
            .map_err(|e| format!("cannot read {}'s manifest: {e}", folder.display()))?;
        write(&manifest_dir.join(format!("{slug}.json")), &text)?;
        manifests += 1;

        let manifest = match skill::load_manifest(folder) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("seed-corpus: skipping the jobs of {slug}: {e}");
                continue;
            }
        };
        let cases = read_cases(folder);
        for tool in &manifest.tools {
            // The smallest input among the tool's cases: seeds stay small, so fuzzing is fast.
            let input = cases
                .iter()
                .filter(|c| c.get("tool").and_then(Value::as_str) == Some(tool.name.as_str()))
                .filter_map(|c| c.get("input"))
                .min_by_key(|input| input.to_string().len())
                .filter(|input| input.to_string().len() <= LARGE_INPUT)
                .cloned()
                .unwrap_or_else(|| required_keys(&tool.args));
            let Ok(input) = JsonText::parse(&input.to_string(), DuplicateKeys::Refuse) else {
                continue;
            };
            let req = RunRequest {
                tool: tool.name.clone(),
                input,
                net: None,
                wall_ms: None,
                mem_bytes: None,
            };
            let mut job = match skill::job_from_skill(folder, &req) {
                Ok(job) => job,
                Err(e) => {
                    eprintln!("seed-corpus: skipping {slug}/{}: {e}", tool.name);
                    continue;
                }
            };
            // Large files other than the entry (a big cases.json) only slow the fuzzer down.
            job.inputs.retain(|i| {
                i.name == job.args.entry
                    || i.content_base64
                        .as_ref()
                        .is_none_or(|b| b.len() <= LARGE_B64)
            });
            for input in &job.inputs {
                names.insert(input.name.clone());
            }
            let text = serde_json::to_vec(&job).map_err(|e| format!("{slug}: {e}"))?;
            write(&job_dir.join(format!("{slug}--{}.json", tool.name)), &text)?;
            jobs += 1;
        }
    }
    for (i, name) in names.iter().enumerate() {
        write(&name_dir.join(format!("name-{i:03}")), name.as_bytes())?;
    }
    Ok((manifests, jobs, names.len()))
}

/// The skill's `cases.json`, when it has one that parses as an array; else none.
fn read_cases(folder: &Path) -> Vec<Value> {
    fs::read(folder.join("cases.json"))
        .ok()
        .and_then(|text| serde_json::from_slice::<Vec<Value>>(&text).ok())
        .unwrap_or_default()
}

/// An object with every key the schema's `required` names, each `null`.
fn required_keys(schema: &Value) -> Value {
    let mut input = Map::new();
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for key in required.iter().filter_map(Value::as_str) {
            input.insert(key.to_string(), Value::Null);
        }
    }
    Value::Object(input)
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
