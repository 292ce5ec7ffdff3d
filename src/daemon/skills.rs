//! `skills on|off|status`: the runner's own artifact in `worker.functions`.
//!
//! The file is edited with `toml_edit`, so every comment, every other key and their order
//! stay as the operator wrote them. `on` creates a missing file from the documented
//! defaults (the same text the package installs). The edited text must still be a valid
//! configuration before it replaces the old file, atomically.

use crate::config::Config;
use crate::job::ARTIFACT;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use toml_edit::{Array, DocumentMut, Item, Table, Value};

/// The default configuration, every key documented (installed as the package's config).
pub const DEFAULT_CONFIG_TEXT: &str = include_str!("../../packaging/config.toml");

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Action {
    /// Take jobs: add the runner's artifact to worker.functions.
    On,
    /// Take no new jobs: remove it (jobs already queued or running still run).
    Off,
    /// Print on or off.
    Status,
}

#[derive(Debug, thiserror::Error)]
pub enum SkillsError {
    #[error("cannot read {path}: {err}")]
    Read { path: String, err: std::io::Error },
    #[error("cannot write {path}: {err}")]
    Write { path: String, err: std::io::Error },
    #[error("{path} is not valid TOML: {err}")]
    Syntax { path: String, err: String },
    #[error("{path}: {what}")]
    Shape { path: String, what: String },
    #[error(
        "{path} would not be a valid configuration after the change: {err}; fix the file first"
    )]
    Invalid { path: String, err: String },
}

/// Whether the configuration file turns the runner on; a missing file is off, and so is
/// one that does not list the artifact, whatever else is wrong with it (the daemon then
/// turns off too).
pub fn status(path: &Path) -> Result<bool, SkillsError> {
    match read(path)? {
        None => Ok(false),
        Some(text) if Config::lists_artifact(&text) == Some(false) => Ok(false),
        Some(text) => {
            Config::usable(&text)
                .map(|c| c.skills_on())
                .map_err(|err| SkillsError::Invalid {
                    path: path.display().to_string(),
                    err,
                })
        }
    }
}

/// Turns the runner on or off in the file; returns whether the file changed.
pub fn set(path: &Path, on: bool) -> Result<bool, SkillsError> {
    let text = match read(path)? {
        Some(t) => t,
        // Off is the default: nothing to write.
        None if !on => return Ok(false),
        None => DEFAULT_CONFIG_TEXT.to_string(),
    };
    let new = edit(&text, on).map_err(|e| match e {
        EditError::Syntax(err) => SkillsError::Syntax {
            path: path.display().to_string(),
            err,
        },
        EditError::Shape(what) => SkillsError::Shape {
            path: path.display().to_string(),
            what,
        },
    })?;
    // Off must always be possible: a file that no longer lists the artifact turns the
    // daemon off even with a problem elsewhere (which `cli` reports). On needs it whole.
    let problem = Config::usable(&new).err();
    if let Some(err) = problem.filter(|_| on || Config::lists_artifact(&new) != Some(false)) {
        return Err(SkillsError::Invalid {
            path: path.display().to_string(),
            err,
        });
    }
    if path.exists() && new == text {
        return Ok(false);
    }
    write_atomically(path, &new).map_err(|err| SkillsError::Write {
        path: path.display().to_string(),
        err,
    })?;
    Ok(true)
}

fn read(path: &Path) -> Result<Option<String>, SkillsError> {
    match crate::config::read_text(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(SkillsError::Read {
            path: path.display().to_string(),
            err,
        }),
    }
}

#[derive(Debug)]
enum EditError {
    Syntax(String),
    Shape(String),
}

/// The text with the artifact added to (or removed from) `worker.functions`.
fn edit(text: &str, on: bool) -> Result<String, EditError> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| EditError::Syntax(e.to_string()))?;
    if !on && doc.get("worker").is_none() {
        return Ok(text.to_string());
    }
    let worker = doc
        .entry("worker")
        .or_insert_with(|| Item::Table(Table::new()));
    let worker = worker
        .as_table_like_mut()
        .ok_or_else(|| EditError::Shape("`worker` is not a table".into()))?;
    if worker.get("functions").is_none() {
        if !on {
            return Ok(doc.to_string());
        }
        worker.insert("functions", Item::Value(Value::Array(Array::new())));
    }
    let functions = worker
        .get_mut("functions")
        .and_then(Item::as_array_mut)
        .ok_or_else(|| EditError::Shape("`worker.functions` is not an array of strings".into()))?;
    // Off takes the artifact out of any list (and keeps the rest as it is); on needs a list
    // of strings.
    if on && functions.iter().any(|v| v.as_str().is_none()) {
        return Err(EditError::Shape(
            "`worker.functions` is not an array of strings".into(),
        ));
    }
    let listed = functions.iter().any(|v| v.as_str() == Some(ARTIFACT));
    if on && !listed {
        functions.push(ARTIFACT);
    } else if !on && listed {
        functions.retain(|v| v.as_str() != Some(ARTIFACT));
        if functions.is_empty() {
            // `[ "x" ]` minus "x" keeps the inner blanks; an empty list reads `[]`.
            functions.set_trailing("");
            functions.set_trailing_comma(false);
        }
    }
    Ok(doc.to_string())
}

/// Replaces the file in one rename, keeping its mode (0644 for a new one), owner and group.
/// A link is followed: the file it leads to is the one replaced, the link stays.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let linked = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let path = if linked {
        std::fs::canonicalize(path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "{} is a link to a file that cannot be reached ({e}); edit the file it \
                     should lead to, or replace the link with the configuration itself",
                    path.display()
                ),
            )
        })?
    } else {
        path.to_path_buf()
    };
    let path = path.as_path();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let old = std::fs::metadata(path).ok();
    let mode = old
        .as_ref()
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o644);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config.toml".into());
    let (tmp, mut f) = create_beside(&dir, &name)?;
    let result = (|| {
        if let Some(m) = &old {
            // Its group may be how others read it (`skills status` as a Link's user).
            std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()))?;
        }
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        // Ours: made by `create_beside`, never another writer's.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Makes a new file `.<name>.<random>.tmp` in `dir` for `write_atomically`. A name drawn
/// at random, never one taken: a file already there (left by a writer that was killed, or
/// another writer's now, perhaps of the same pid in another pid namespace) is not ours to
/// write or remove.
fn create_beside(dir: &Path, name: &str) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    let mut tries = 0;
    loop {
        let tmp = dir.join(format!(".{name}.{:08x}.tmp", crate::sandbox::random_u32()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// The `skills` subcommand: prints `on` or `off` (the state after the action).
pub fn cli(config: Option<&Path>, action: Action) -> std::process::ExitCode {
    let path = config.unwrap_or(Path::new(crate::config::DEFAULT_CONFIG_PATH));
    let r = match action {
        Action::Status => status(path),
        Action::On => set(path, true).map(|_| true),
        Action::Off => set(path, false).map(|_| false),
    };
    if let (Ok(false), Ok(Some(text))) = (&r, read(path)) {
        if let Err(problem) = Config::usable(&text) {
            eprintln!(
                "openvibe-skill-runner: warning: {}: {problem}; the runner is off, fix the file before `skills on`",
                path.display()
            );
        }
    }
    match r {
        Ok(on) => crate::cli::write_stdout(if on { "on\n" } else { "off\n" }),
        Err(e) => {
            eprintln!("openvibe-skill-runner: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_text_is_valid_and_off() {
        let c = Config::parse(DEFAULT_CONFIG_TEXT).unwrap();
        assert!(!c.skills_on());
    }

    /// Every documented key, uncommented, is a key the runner knows, with the value the
    /// comment gives as the default (where the default is not a host-dependent path).
    #[test]
    fn every_documented_key_is_real() {
        let mut text = String::new();
        let mut keys = 0;
        for line in DEFAULT_CONFIG_TEXT.lines() {
            let uncommented = line.strip_prefix("# ").unwrap_or(line);
            let looks_like_key = uncommented
                .split_once(" = ")
                .is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            if line.starts_with("# ") && looks_like_key {
                keys += 1;
                text.push_str(uncommented);
            } else if line.starts_with('#') {
                continue;
            } else {
                text.push_str(line);
            }
            text.push('\n');
        }
        assert!(keys >= 18, "found only {keys} documented keys");
        let c = Config::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let d = Config::default();
        assert_eq!(c.runner.state_dir, d.runner.state_dir);
        assert_eq!(c.runner.pids_max, d.runner.pids_max);
        assert_eq!(c.runner.sandbox_uid_base, d.runner.sandbox_uid_base);
        assert_eq!(c.runner.max_input_json_bytes, d.runner.max_input_json_bytes);
        assert_eq!(c.runner.max_jobs, d.runner.max_jobs);
        assert_eq!(c.runner.queue_len, d.runner.queue_len);
        assert_eq!(c.runner.media_timeout_ms, d.runner.media_timeout_ms);
        assert_eq!(c.daemon.socket, d.daemon.socket);
        assert_eq!(c.daemon.retention_days, d.daemon.retention_days);
        assert_eq!(c.daemon.shutdown_grace_ms, d.daemon.shutdown_grace_ms);
        assert_eq!(c.daemon.log_json, d.daemon.log_json);
        assert_eq!(c.daemon.header_timeout_ms, d.daemon.header_timeout_ms);
        assert_eq!(c.daemon.body_timeout_ms, d.daemon.body_timeout_ms);
        assert_eq!(c.runner.allow_node20, d.runner.allow_node20);
    }

    #[test]
    fn on_creates_the_documented_file_and_off_keeps_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("etc/config.toml");
        assert!(!status(&path).unwrap());
        assert!(
            !set(&path, false).unwrap(),
            "off on a missing file writes nothing"
        );
        assert!(!path.exists());
        assert!(set(&path, true).unwrap());
        assert!(status(&path).unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("# pids_max = 64"), "comments kept");
        assert!(
            text.contains("functions = [\"openvibe-skill-runner@1.0.0\"]"),
            "{text}"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        assert!(!set(&path, true).unwrap(), "on twice changes nothing");
        assert!(set(&path, false).unwrap());
        assert!(!status(&path).unwrap());
        let off = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            off, DEFAULT_CONFIG_TEXT,
            "on then off is the file it started as"
        );
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left: {leftovers:?}");
    }

    #[test]
    fn comments_and_other_keys_and_other_artifacts_are_kept() {
        let text = "# my runner\n[runner] # inline\npids_max = 32 # fewer\n\n[worker]\n# what this Link runs\nfunctions = [\"openvibe-codes@1.0.0\"] # trailing\n";
        let on = edit(text, true).unwrap();
        assert_eq!(
            on,
            "# my runner\n[runner] # inline\npids_max = 32 # fewer\n\n[worker]\n# what this Link runs\nfunctions = [\"openvibe-codes@1.0.0\", \"openvibe-skill-runner@1.0.0\"] # trailing\n"
        );
        let c = Config::parse(&on).unwrap();
        assert!(c.skills_on());
        assert_eq!(c.runner.pids_max, 32);
        let off = edit(&on, false).unwrap();
        assert_eq!(off, text);
    }

    #[test]
    fn a_file_without_worker_gets_one() {
        let on = edit("[runner]\npids_max = 10\n", true).unwrap();
        let c = Config::parse(&on).unwrap();
        assert!(c.skills_on());
        assert_eq!(c.runner.pids_max, 10);
        assert_eq!(
            edit("[runner]\npids_max = 10\n", false).unwrap(),
            "[runner]\npids_max = 10\n"
        );
        // Dotted keys at the top level are a table too.
        let on = edit("worker.functions = []\n", true).unwrap();
        assert!(Config::parse(&on).unwrap().skills_on(), "{on}");
        let off = edit(&on, false).unwrap();
        assert!(!Config::parse(&off).unwrap().skills_on(), "{off}");
    }

    #[test]
    fn odd_files_are_refused_not_mangled() {
        assert!(matches!(edit("[worker\n", true), Err(EditError::Syntax(_))));
        assert!(matches!(
            edit("worker = 3\n", true),
            Err(EditError::Shape(_))
        ));
        assert!(matches!(
            edit("[worker]\nfunctions = \"x\"\n", true),
            Err(EditError::Shape(_))
        ));
        assert!(matches!(
            edit("[worker]\nfunctions = [1]\n", true),
            Err(EditError::Shape(_))
        ));
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        std::fs::write(&path, "[runner]\npid_max = 3\n").unwrap();
        assert!(matches!(set(&path, true), Err(SkillsError::Invalid { .. })));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "[runner]\npid_max = 3\n"
        );
    }

    #[test]
    fn a_file_the_daemon_would_refuse_is_not_turned_on() {
        // It parses, but its uid range is empty: the daemon keeps its previous
        // configuration, so `skills on` must not say `on`.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        let text = "[runner]\nsandbox_uid_count = 0\n";
        std::fs::write(&path, text).unwrap();
        let e = set(&path, true).expect_err("refused");
        assert!(e.to_string().contains("sandbox_uid_count is 0"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "left alone");
        assert!(
            !status(&path).expect("a file that lists no artifact is off, whatever else"),
            "off"
        );
        let listed = format!("[worker]\nfunctions = [\"{ARTIFACT}\"]\n{text}");
        std::fs::write(&path, &listed).unwrap();
        let e = status(&path).expect_err("no status from an unusable file that lists it");
        assert!(e.to_string().contains("fix the file first"), "{e}");
    }

    #[test]
    fn the_owner_and_group_are_kept_and_a_link_leads_to_the_file_edited() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("managed.toml");
        std::fs::write(&real, "").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
        if let Err(e) = nix::unistd::chown(&real, None, Some(nix::unistd::Gid::from_raw(65534))) {
            crate::test_skips::skipped(
                "the_owner_and_group_are_kept_and_a_link_leads_to_the_file_edited",
                &format!("giving a file to group 65534 needs root: {e}"),
            );
            return;
        }
        let link = tmp.path().join("config.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(set(&link, true).unwrap());
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "the link stays a link"
        );
        assert!(status(&real).unwrap(), "the file it leads to was edited");
        use std::os::unix::fs::MetadataExt as _;
        let m = std::fs::metadata(&real).unwrap();
        assert_eq!((m.gid(), m.permissions().mode() & 0o777), (65534, 0o640));
        // A link that leads nowhere is an error, and stays as it was.
        let dangling = tmp.path().join("dangling.toml");
        std::os::unix::fs::symlink(tmp.path().join("gone.toml"), &dangling).unwrap();
        assert!(set(&dangling, true).is_err());
        assert!(std::fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(!tmp.path().join("gone.toml").exists());
    }

    #[test]
    fn another_writers_temporary_file_is_neither_in_the_way_nor_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        // Named as a writer of this pid would name it (one killed before its rename, or one
        // of the same pid in another pid namespace).
        let theirs = tmp
            .path()
            .join(format!(".config.toml.{}.tmp", std::process::id()));
        std::fs::write(&theirs, "theirs").unwrap();
        assert!(set(&path, true).unwrap(), "on works beside it");
        assert!(status(&path).unwrap());
        assert!(set(&path, false).unwrap(), "off works beside it");
        assert!(!status(&path).unwrap());
        assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "theirs");
        let mut left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let theirs_name = theirs.file_name().unwrap().to_string_lossy().into_owned();
        let mut expected = vec!["config.toml".to_string(), theirs_name];
        expected.sort();
        assert_eq!(left, expected, "none of ours left");
    }

    #[test]
    fn the_file_mode_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        std::fs::write(&path, "").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(set(&path, true).unwrap());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        assert!(status(&path).unwrap());
    }

    /// Off is always possible: a file with a problem elsewhere (a misspelt key) loses the
    /// artifact and reads off; on stays refused until the file is mended.
    #[test]
    fn off_works_on_a_file_with_a_problem_elsewhere_and_on_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        let bad =
            format!("[worker]\nfunctions = [\"{ARTIFACT}\", \"other@1\"]\n[runner]\npid_max = 3\n");
        std::fs::write(&path, &bad).unwrap();
        assert!(
            matches!(status(&path), Err(SkillsError::Invalid { .. })),
            "listed, but not a usable file: cannot tell"
        );
        assert!(set(&path, false).unwrap());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "[worker]\nfunctions = [ \"other@1\"]\n[runner]\npid_max = 3\n"
        );
        assert!(!status(&path).unwrap());
        assert!(!set(&path, false).unwrap(), "off again changes nothing");
        assert!(matches!(set(&path, true), Err(SkillsError::Invalid { .. })));
        assert!(!status(&path).unwrap());
        // A list holding something other than a name: off takes the artifact out all the
        // same, and the daemon reads the file as off.
        let odd = format!("[worker]\nfunctions = [\"{ARTIFACT}\", 1]\n");
        std::fs::write(&path, &odd).unwrap();
        assert!(set(&path, false).unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(Config::lists_artifact(&text), Some(false), "{text}");
        assert!(!status(&path).unwrap());
    }
}
