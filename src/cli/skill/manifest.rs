//! `skill.json`: read within its size bound and checked (tools, entries, argument schemas,
//! limits) before anything is run.

use super::folder::{open_folder, read_file_at, ReadError};
use super::*;
use std::os::fd::{AsFd as _, BorrowedFd};

/// Reads and checks `dir/skill.json`.
pub fn load_manifest(dir: &Path) -> Result<Manifest, SkillError> {
    let root = open_folder(dir).map_err(|source| SkillError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    load_manifest_at(root.as_fd(), dir)
}

/// Reads and checks `skill.json` of the folder open as `root` (`dir` names it).
pub(super) fn load_manifest_at(root: BorrowedFd<'_>, dir: &Path) -> Result<Manifest, SkillError> {
    let path = dir.join(MANIFEST_FILE);
    let text = read_file_at(root, c"skill.json", MANIFEST_MAX_BYTES).map_err(|e| match e {
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
    shape_problem(&text).map_err(|message| SkillError::Manifest {
        path: path.clone(),
        message,
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

/// What the typed reading would let pass: a key given twice anywhere (readers disagree on
/// which one wins, so `"required"` twice in `args` could drop the check of required keys),
/// and an array where an object belongs (serde reads a struct from an array too, by
/// position).
fn shape_problem(text: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(text)
        .map_err(|e| format!("is not UTF-8 ({e}); save it as UTF-8 text"))?;
    if text.starts_with('\u{feff}') {
        // Said plainly rather than as "expected value at line 1 column 1".
        return Err("starts with a byte order mark; save it as UTF-8 without one".into());
    }
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("is not a valid actor.skill@2 manifest: {e}; fix the JSON there"))?;
    crate::json_text::JsonText::parse(text, crate::json_text::DuplicateKeys::Refuse)
        .map_err(|e| format!("is refused: {e}; give each key once"))?;
    let object = |v: &serde_json::Value, at: &str| -> Result<(), String> {
        if v.is_object() {
            Ok(())
        } else {
            Err(format!("{at} must be a JSON object"))
        }
    };
    object(&value, "the manifest")?;
    if let Some(tools) = value.get("tools").and_then(|t| t.as_array()) {
        for (i, tool) in tools.iter().enumerate() {
            object(tool, &format!("tools[{i}]"))?;
            // (`args` is a JSON value, checked as a schema object below.)
            if let Some(v) = tool.get("limits") {
                object(v, &format!("tools[{i}].limits"))?;
            }
        }
    }
    Ok(())
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
