//! The compatibility suite: widely used pure-JavaScript npm packages nobody here wrote, run
//! as skills by the runner and compared, as exact text, with plain pinned Node running the
//! same file on the same input (`integration/compat/packages.toml` says which and why).
//!
//! The packages are fetched here, at test time, with `npm pack NAME@VERSION` and checked
//! against their pinned sha256 before anything of them is used; the tarballs are cached in
//! `.compat-cache/`. A registry that cannot be reached fails the suite: it never skips.
//! These are published libraries, not hostile test skills, so running them with plain
//! Node is the comparison the suite exists for.

use crate::common::*;
use crate::exact::RawResult;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pins {
    package: Vec<Package>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Package {
    name: String,
    version: String,
    sha256: String,
    files: Vec<String>,
    skill: String,
    expect: Expect,
    input: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Expect {
    Same,
    Codegen,
}

/// V8's words when `--disallow-code-generation-from-strings` refuses `eval` or `Function`.
const CODEGEN_REFUSED: &str = "EvalError: Code generation from strings disallowed";

fn compat_dir() -> PathBuf {
    repo().join("integration/compat")
}

fn pins() -> Pins {
    let path = compat_dir().join("packages.toml");
    let text = std::fs::read_to_string(&path).expect("packages.toml");
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The package's tarball, from the cache or the registry, its sha256 checked either way.
fn tarball(p: &Package) -> PathBuf {
    let cache = repo().join(".compat-cache");
    std::fs::create_dir_all(&cache).expect("create .compat-cache");
    let file = cache.join(format!("{}-{}.tgz", p.name, p.version));
    if let Ok(bytes) = std::fs::read(&file) {
        if sha(&bytes) == p.sha256 {
            return file;
        }
        std::fs::remove_file(&file).expect("remove a cached tarball that does not match");
    }
    let fetch = tempfile::Builder::new()
        .prefix("fetch-")
        .tempdir_in(&cache)
        .expect("temp dir");
    let spec = format!("{}@{}", p.name, p.version);
    let out = Command::new("npm")
        .args(["pack", &spec, "--ignore-scripts", "--loglevel=error"])
        .current_dir(fetch.path())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run npm to fetch {spec}: {e}; install npm"));
    assert!(
        out.status.success(),
        "npm pack {spec} failed ({}): {}\nThe compatibility suite fetches its packages from the \
         npm registry at test time; make the registry reachable (it never skips).",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let packed = fetch.path().join(format!("{}-{}.tgz", p.name, p.version));
    let bytes = std::fs::read(&packed)
        .unwrap_or_else(|e| panic!("npm pack {spec} gave no {}: {e}", packed.display()));
    let got = sha(&bytes);
    assert_eq!(
        got, p.sha256,
        "the tarball of {spec} does not match its pinned sha256; nothing of it is used"
    );
    std::fs::rename(&packed, &file).expect("cache the tarball");
    file
}

/// The skill folder: skill.json and tool.js from `integration/compat/<skill>`, and the
/// package's files under `vendor/<name>/`.
fn skill_folder(p: &Package, tarball: &Path) -> tempfile::TempDir {
    let unpacked = tempfile::Builder::new()
        .prefix("ovsr-compat-pkg-")
        .tempdir()
        .expect("temp dir");
    let out = Command::new("tar")
        .args(["-xzf"])
        .arg(tarball)
        .args(["-C"])
        .arg(unpacked.path())
        .args(["--no-same-owner", "--no-same-permissions"])
        .output()
        .expect("run tar");
    assert!(out.status.success(), "tar: {out:?}");
    // npm packs into `package/`, some packages into a folder of their own.
    let tops: Vec<PathBuf> = std::fs::read_dir(unpacked.path())
        .expect("unpacked")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(tops.len(), 1, "{} has one top folder", p.name);
    let top = &tops[0];

    let skill = tempfile::Builder::new()
        .prefix("ovsr-compat-")
        .tempdir()
        .expect("temp dir");
    let own = compat_dir().join(&p.skill);
    for name in ["skill.json", "tool.js"] {
        std::fs::copy(own.join(name), skill.path().join(name)).expect("copy the skill");
    }
    let vendor = skill.path().join("vendor").join(&p.name);
    for file in &p.files {
        let from = top.join(file);
        if let Some(folder) = file.strip_suffix('/') {
            copy_tree(&from, &vendor.join(folder));
        } else {
            let to = vendor.join(file);
            std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
            std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("{} has no {file}: {e}", p.name));
        }
    }
    skill
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.expect("entry");
        let path = entry.path();
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).expect("copy");
        }
    }
}

/// Plain pinned Node on the same file and input: `node [flags] tool.js < input`, in the
/// folder, with an empty environment (as the runner gives).
fn plain_node(skill: &Path, flags: &[&str], input: &str) -> std::process::Output {
    use std::io::Write as _;
    let mut child = Command::new(openvibe_skill_runner::runtime::PINNED_PATH)
        .args(flags)
        .arg("tool.js")
        .current_dir(skill)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write the input");
    child.wait_with_output().expect("node")
}

fn tool_name(skill: &Path) -> String {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(skill.join("skill.json")).expect("skill.json"))
            .expect("json");
    manifest["tools"][0]["name"]
        .as_str()
        .expect("a tool")
        .to_string()
}

/// One package: `None` when it behaves as `expect` says, else what differed.
fn check(p: &Package, state: &State) -> Option<String> {
    let tarball = tarball(p);
    let skill = skill_folder(p, &tarball);
    let input = p.input.trim();
    let input_file = state.path().join(format!("{}.input.json", p.name));
    std::fs::write(&input_file, input).expect("input file");

    let out = runner_in(state.path())
        .arg("run")
        .arg(skill.path())
        .arg("--tool")
        .arg(tool_name(skill.path()))
        .arg("--input")
        .arg(format!("@{}", input_file.display()))
        .arg("--json")
        .output()
        .expect("run the runner");
    state.assert_clean();
    let result = RawResult::parse(&out.stdout);
    let plain = plain_node(skill.path(), &[], input);
    let what = format!("{}@{}", p.name, p.version);
    if !plain.status.success() {
        return Some(format!(
            "{what}: plain Node failed: {}",
            String::from_utf8_lossy(&plain.stderr)
        ));
    }
    let plain_text = String::from_utf8_lossy(&plain.stdout).trim().to_string();
    match p.expect {
        Expect::Same => {
            let got = result.output.as_ref().map(|o| o.get().to_string());
            if result.status != "ok" || got.as_deref() != Some(plain_text.as_str()) {
                return Some(format!(
                    "{what}: the runner gave {}/{:?} ({:?})\n  output:     {got:?}\n  plain Node: {plain_text:?}",
                    result.status, result.reason, result.message
                ));
            }
        }
        Expect::Codegen => {
            if (result.status.as_str(), result.reason.as_deref()) != ("error", Some("exit"))
                || !result.stderr.contains(CODEGEN_REFUSED)
            {
                return Some(format!(
                    "{what}: expected error/exit with {CODEGEN_REFUSED:?}, the runner gave {}/{:?}: {}",
                    result.status, result.reason, result.stderr
                ));
            }
            // The one flag is the reason: plain Node given only it fails the same way.
            let flagged = plain_node(
                skill.path(),
                &["--disallow-code-generation-from-strings"],
                input,
            );
            let flagged_err = String::from_utf8_lossy(&flagged.stderr);
            if flagged.status.success() || !flagged_err.contains(CODEGEN_REFUSED) {
                return Some(format!(
                    "{what}: plain Node with --disallow-code-generation-from-strings did not \
                     fail with {CODEGEN_REFUSED:?}: {flagged_err}"
                ));
            }
        }
    }
    None
}

#[test]
fn npm_packages_give_the_same_text_as_plain_node() {
    require_host();
    let _h = shared();
    let pins = pins();
    let state = State::new();
    let failures: Vec<String> = pins
        .package
        .iter()
        .filter_map(|p| check(p, &state))
        .collect();
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
    assert_host_clean("run-compat-");
}
