//! The runner's own files: the seccomp policy, the egress policy and the hardening preload.
//!
//! The defaults are part of the binary, so a runner copied anywhere works. A file overrides
//! its default when it is in the configured folder (`runner.policies_dir` for the policies,
//! `runner.runtime_dir` for the preload; a configured folder must hold the file) or, with
//! nothing configured, in the package's configuration folder
//! (`/etc/openvibe-skill-runner/policies/`, `/etc/openvibe-skill-runner/runtime/`).
//! `doctor` says which was used.

use crate::config::Config;
use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

/// `policies/seccomp.json` of the source tree this binary was built from.
pub const SECCOMP_JSON: &str = include_str!("../policies/seccomp.json");
/// `policies/egress.toml` of the source tree this binary was built from.
pub const EGRESS_TOML: &str = crate::egress::policy::SHIPPED_TOML;
/// `runtime/harden.cjs` of the source tree this binary was built from.
pub const HARDEN_CJS: &[u8] = include_bytes!("../runtime/harden.cjs");

/// Where an operator puts policy files that override the built-in ones.
pub const ETC_POLICIES: &str = "/etc/openvibe-skill-runner/policies";
/// Where an operator puts a preload that overrides the built-in one.
pub const ETC_RUNTIME: &str = "/etc/openvibe-skill-runner/runtime";

/// Where a file came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    BuiltIn,
    File(PathBuf),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::BuiltIn => f.write_str("built in"),
            Source::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// One of the runner's files and where it came from.
#[derive(Debug, Clone)]
pub struct Asset {
    pub name: &'static str,
    pub bytes: Cow<'static, [u8]>,
    pub source: Source,
}

impl Asset {
    /// The file as UTF-8 text, or an error naming where it came from.
    pub fn text(&self) -> Result<&str, String> {
        std::str::from_utf8(&self.bytes)
            .map_err(|e| format!("{} ({}) is not UTF-8: {e}", self.name, self.source))
    }
}

fn find(
    name: &'static str,
    configured: Option<&Path>,
    setting: &str,
    etc: &Path,
    built_in: &'static [u8],
) -> Result<Asset, String> {
    let read = |path: PathBuf| {
        std::fs::read(&path)
            .map(|bytes| Asset {
                name,
                bytes: Cow::Owned(bytes),
                source: Source::File(path.clone()),
            })
            .map_err(|e| (path, e))
    };
    // A file another user may change would let that user loosen every job's sandbox.
    // A configured folder must hold the file, so there the way back to the built-in file is
    // removing the setting, not the file; both when the setting names the package's folder,
    // which is searched without it.
    let way_back = match configured {
        Some(dir) if same_folder(dir, etc) => {
            format!("or remove {setting} and the file to use the built-in {name}")
        }
        Some(_) => format!("or remove {setting} to use the built-in {name}"),
        None => format!("or remove it to use the built-in {name}"),
    };
    let trusted = |asset: Asset| {
        let Source::File(path) = &asset.source else {
            return Ok(asset);
        };
        let me = nix::unistd::geteuid().as_raw();
        match crate::state_dir::file_problem(path, me, &format!("the {name} override")) {
            None => Ok(asset),
            Some(problem) => Err(format!("{problem}; {way_back}")),
        }
    };
    if let Some(dir) = configured {
        return read(dir.join(name))
            .map_err(|(path, e)| {
                // No file to remove: the setting alone is the way back.
                let way_back = match e.kind() {
                    std::io::ErrorKind::NotFound => {
                        format!("or remove {setting} to use the built-in {name}")
                    }
                    _ => way_back.clone(),
                };
                format!(
                    "{setting} is {} but {} cannot be read ({e}): put the file there, {way_back}",
                    dir.display(),
                    path.display()
                )
            })
            .and_then(trusted);
    }
    let path = etc.join(name);
    match read(path) {
        Ok(asset) => trusted(asset),
        Err((_, e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(Asset {
            name,
            bytes: Cow::Borrowed(built_in),
            source: Source::BuiltIn,
        }),
        Err((path, e)) => Err(format!(
            "the override {} cannot be read ({e}): fix its permissions, or remove it to use \
             the built-in {name}",
            path.display()
        )),
    }
}

/// Whether `a` and `b` name one folder (as written, or once resolved).
fn same_folder(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(a), Ok(b)) if a == b
        )
}

/// The seccomp policy (`seccomp.json`).
pub fn seccomp_policy(config: &Config) -> Result<Asset, String> {
    find(
        "seccomp.json",
        config.runner.policies_dir.as_deref(),
        "runner.policies_dir",
        Path::new(ETC_POLICIES),
        SECCOMP_JSON.as_bytes(),
    )
}

/// The egress policy (`egress.toml`).
pub fn egress_policy(config: &Config) -> Result<Asset, String> {
    find(
        "egress.toml",
        config.runner.policies_dir.as_deref(),
        "runner.policies_dir",
        Path::new(ETC_POLICIES),
        EGRESS_TOML.as_bytes(),
    )
}

/// The hardening preload (`harden.cjs`).
pub fn preload(config: &Config) -> Result<Asset, String> {
    find(
        "harden.cjs",
        config.runner.runtime_dir.as_deref(),
        "runner.runtime_dir",
        Path::new(ETC_RUNTIME),
        HARDEN_CJS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_anywhere_is_the_built_in_file() {
        let etc = tempfile::tempdir().expect("tempdir");
        let a = find("x.json", None, "s", etc.path(), b"built").expect("found");
        assert_eq!(a.source, Source::BuiltIn);
        assert_eq!(&*a.bytes, b"built");
        assert_eq!(a.source.to_string(), "built in");
    }

    #[test]
    fn a_file_in_the_etc_folder_overrides_the_built_in_one() {
        let etc = tempfile::tempdir().expect("tempdir");
        std::fs::write(etc.path().join("x.json"), b"mine").expect("write");
        let a = find("x.json", None, "s", etc.path(), b"built").expect("found");
        assert_eq!(a.source, Source::File(etc.path().join("x.json")));
        assert_eq!(&*a.bytes, b"mine");
    }

    #[test]
    fn a_configured_folder_wins_and_must_hold_the_file() {
        let etc = tempfile::tempdir().expect("tempdir");
        std::fs::write(etc.path().join("x.json"), b"etc").expect("write");
        let dir = tempfile::tempdir().expect("tempdir");
        let err = find("x.json", Some(dir.path()), "runner.x", etc.path(), b"built")
            .expect_err("configured but missing");
        assert!(
            err.contains("runner.x")
                && err.contains("x.json")
                && err.ends_with("or remove runner.x to use the built-in x.json"),
            "{err}"
        );
        // The package's own folder named, and no file there: the setting alone is the way
        // back (there is no file to remove).
        let empty = tempfile::tempdir().expect("tempdir");
        let err = find(
            "x.json",
            Some(empty.path()),
            "runner.x",
            empty.path(),
            b"built",
        )
        .expect_err("configured but missing");
        assert!(
            err.ends_with("put the file there, or remove runner.x to use the built-in x.json"),
            "{err}"
        );
        std::fs::write(dir.path().join("x.json"), b"configured").expect("write");
        let a = find("x.json", Some(dir.path()), "runner.x", etc.path(), b"built").expect("ok");
        assert_eq!(&*a.bytes, b"configured");
    }

    #[test]
    fn an_unreadable_override_is_an_error_not_a_silent_default() {
        let etc = tempfile::tempdir().expect("tempdir");
        // A directory where the file should be: reading it fails with something other
        // than "not found".
        std::fs::create_dir(etc.path().join("x.json")).expect("mkdir");
        let err = find("x.json", None, "s", etc.path(), b"built").expect_err("must fail");
        assert!(err.contains("override"), "{err}");
    }

    #[test]
    fn an_override_others_may_change_is_refused_not_used() {
        use std::os::unix::fs::PermissionsExt as _;
        let chmod = |p: &Path, mode| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod")
        };
        let etc = tempfile::tempdir().expect("tempdir");
        let dir = etc.path().join("policies");
        std::fs::create_dir(&dir).expect("mkdir");
        chmod(etc.path(), 0o755);
        chmod(&dir, 0o755);
        let file = dir.join("x.json");
        std::fs::write(&file, b"loosened").expect("write");
        let elsewhere = etc.path().join("package");
        // The way back to the built-in file: remove the setting when one names the folder
        // (it must hold the file), the file itself otherwise, and both when the setting
        // names the package's folder (found without it, the file would be refused again).
        for (configured, package, way_back) in [
            (None, &dir, "or remove it to use the built-in x.json"),
            (
                Some(dir.as_path()),
                &elsewhere,
                "or remove runner.x to use the built-in x.json",
            ),
            (
                Some(dir.as_path()),
                &dir,
                "or remove runner.x and the file to use the built-in x.json",
            ),
        ] {
            let search = || find("x.json", configured, "runner.x", package, b"built");
            chmod(&file, 0o646);
            let err = search().expect_err("a file others may write");
            assert!(
                err.contains("(mode 646)") && err.ends_with(way_back),
                "{err}"
            );
            chmod(&file, 0o644);
            chmod(&dir, 0o777);
            let err = search().expect_err("a folder others may write");
            assert!(
                err.contains("(mode 777) and is not sticky") && err.ends_with(way_back),
                "{err}"
            );
            chmod(&dir, 0o755);
            assert_eq!(&*search().expect("root's file").bytes, b"loosened");
        }
    }

    #[test]
    fn the_built_in_files_are_the_trees() {
        assert!(SECCOMP_JSON.contains("\"defaultAction\""));
        assert!(EGRESS_TOML.contains("version"));
        assert!(std::str::from_utf8(HARDEN_CJS).is_ok_and(|t| t.contains("use strict")));
    }
}
