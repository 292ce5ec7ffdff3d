//! The Node runtime: where it is, which version, which flags it understands, which files
//! it needs to start, and whether it is the pinned binary.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The supported runtime (SPEC.md, Runtime).
pub const PINNED_VERSION: &str = "v24.22.3";
pub const PINNED_SHA256: &str = "a7ec1b37e6ff9d187e4198c5b6df9a4eb1c74dd31804fb3bac55cc4ceca1ac01";
/// Where `scripts/install-node` and the Debian package put it.
pub const PINNED_PATH: &str = "/opt/openvibe-skill-runner/node-v24.22.3/bin/node";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Runtime {
    pub node: PathBuf,
    pub version: String,
    pub major: u32,
    pub minor: u32,
    pub sha256: String,
    /// The binary is the pinned one, byte for byte.
    pub pinned: bool,
    /// The shared objects Node loads (as the dynamic loader names them) and the loader.
    pub libraries: Vec<PathBuf>,
    /// The ELF interpreter among `libraries`: it must be executable in the sandbox.
    pub loader: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("no Node runtime at {0}: run scripts/install-node (or set runner.node in the configuration)")]
    Missing(PathBuf),
    #[error("cannot run {path} --version: {err}")]
    Version { path: PathBuf, err: String },
    #[error("Node {version} at {path} is not supported: Node 24 LTS is (22.13 or later is accepted; 20 only with runner.allow_node20 = true)")]
    Unsupported { path: PathBuf, version: String },
    #[error("Node at {path} says it is {PINNED_VERSION} but its sha256 is {found}, not the pinned {PINNED_SHA256}: reinstall it with scripts/install-node")]
    Tampered { path: PathBuf, found: String },
    #[error("Node at {path} is not run: {why} (the runner runs it outside the sandbox to learn its version and libraries; scripts/install-node installs it where only root may change it)")]
    Untrusted { path: PathBuf, why: String },
    #[error("cannot list the libraries of {path}: {err}")]
    Libraries { path: PathBuf, err: String },
    #[error("cannot read {path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
}

impl Runtime {
    /// The permission flag this version understands (24 rejects the old one, 20 the new one).
    pub fn permission_flag(&self) -> &'static str {
        if self.major >= 22 {
            "--permission"
        } else {
            "--experimental-permission"
        }
    }

    /// What the preload cannot close on this version (README, Runtime hardening), if
    /// anything. Accepted versions before Node 22.15 and 23.5 have no synchronous module
    /// hooks, through which the preload refuses every module URL but `node:` and `/skill`.
    pub fn hardening_gap(&self) -> Option<&'static str> {
        let hooks = self.major >= 24
            || (self.major == 23 && self.minor >= 5)
            || (self.major == 22 && self.minor >= 15);
        (!hooks).then_some(
            "this Node has no synchronous module hooks (module.registerHooks, from Node 22.15 \
             and 23.5): a tool's import('data:...') runs code that is in none of its scanned \
             files; use the pinned Node 24 (scripts/install-node) or 22.15 or later",
        )
    }

    /// The read grant for the skill directory in this version's syntax.
    pub fn fs_read_grant(&self, dir: &str) -> String {
        if self.major >= 22 {
            format!("--allow-fs-read={dir}/")
        } else {
            format!("--allow-fs-read={dir}/*")
        }
    }
}

/// Parses `v24.22.3` into (24, 22).
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let v = text.trim().strip_prefix('v')?;
    let mut parts = v.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    parts.next()?.parse::<u32>().ok()?;
    Some((major, minor))
}

/// Whether a version may run jobs under this configuration.
pub fn version_supported(major: u32, minor: u32, allow_node20: bool) -> bool {
    major >= 24 || (major == 22 && minor >= 13) || major == 23 || (major == 20 && allow_node20)
}

/// Parses `ldd` output into the paths of the objects it resolved.
pub fn parse_ldd(text: &str) -> (Vec<PathBuf>, Option<PathBuf>) {
    let mut libs = Vec::new();
    let mut loader = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some((_, rest)) = line.split_once("=>") {
            let path = rest.trim().split(' ').next().unwrap_or("");
            if path.starts_with('/') {
                libs.push(PathBuf::from(path));
            }
        } else if line.starts_with('/') {
            let path = line.split(' ').next().unwrap_or("");
            libs.push(PathBuf::from(path));
            loader = Some(PathBuf::from(path));
        }
    }
    (libs, loader)
}

fn sha256_file(path: &Path) -> Result<String, RuntimeError> {
    let mut f = std::fs::File::open(path).map_err(|err| RuntimeError::Io {
        path: path.into(),
        err,
    })?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|err| RuntimeError::Io {
            path: path.into(),
            err,
        })?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// What identifies a file's bytes cheaply: a cached verification is reused while it holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

fn identity(path: &Path) -> Result<Identity, RuntimeError> {
    let m = std::fs::metadata(path).map_err(|err| RuntimeError::Io {
        path: path.into(),
        err,
    })?;
    Ok(Identity {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
        ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
    })
}

#[derive(Serialize, Deserialize)]
struct CacheRecord {
    identity: Identity,
    runtime: Runtime,
}

/// Finds the Node to use, in order: the configured path, the pinned install.
pub fn locate(configured: Option<&Path>) -> PathBuf {
    match configured {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from(PINNED_PATH),
    }
}

/// Inspects the runtime once: version, hash, libraries. The result is cached in
/// `cache_file` keyed by the binary's inode, size and times, so each job does not hash
/// a 120 MB file again; any change to the binary invalidates the record.
pub fn inspect(
    node: &Path,
    allow_node20: bool,
    cache_file: Option<&Path>,
) -> Result<Runtime, RuntimeError> {
    if !node.is_file() {
        return Err(RuntimeError::Missing(node.to_path_buf()));
    }
    let node = std::fs::canonicalize(node).map_err(|err| RuntimeError::Io {
        path: node.into(),
        err,
    })?;
    // Before it is run, and before a record of an earlier run is believed.
    trusted(&node, nix::unistd::geteuid().as_raw())?;
    let id = identity(&node)?;
    if let Some(cache) = cache_file {
        if let Ok(text) = read_no_follow(cache) {
            if let Ok(rec) = serde_json::from_slice::<CacheRecord>(&text) {
                if rec.identity == id && rec.runtime.node == node {
                    check_supported(&rec.runtime, allow_node20)?;
                    return Ok(rec.runtime);
                }
            }
        }
    }
    let out = Command::new(&node)
        .arg("--version")
        .env_clear()
        .output()
        .map_err(|e| RuntimeError::Version {
            path: node.clone(),
            err: e.to_string(),
        })?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let (major, minor) = parse_version(&version).ok_or_else(|| RuntimeError::Version {
        path: node.clone(),
        err: format!("unexpected answer {version:?}"),
    })?;
    let sha256 = sha256_file(&node)?;
    let pinned = sha256 == PINNED_SHA256;
    let ldd = Command::new("ldd")
        .arg(&node)
        .env_clear()
        .output()
        .map_err(|e| RuntimeError::Libraries {
            path: node.clone(),
            err: e.to_string(),
        })?;
    if !ldd.status.success() {
        return Err(RuntimeError::Libraries {
            path: node.clone(),
            err: String::from_utf8_lossy(&ldd.stderr).into_owned(),
        });
    }
    let (libraries, loader) = parse_ldd(&String::from_utf8_lossy(&ldd.stdout));
    let runtime = Runtime {
        node: node.clone(),
        version,
        major,
        minor,
        sha256,
        pinned,
        libraries,
        loader,
    };
    check_supported(&runtime, allow_node20)?;
    if let Some(cache) = cache_file {
        let rec = CacheRecord {
            identity: id,
            runtime: runtime.clone(),
        };
        if let Ok(text) = serde_json::to_vec(&rec) {
            write_record(cache, &text);
        }
    }
    Ok(runtime)
}

/// Whether only root or `me` may change the Node at `node` (the runner runs it).
fn trusted(node: &Path, me: u32) -> Result<(), RuntimeError> {
    match crate::state_dir::file_problem(node, me, "the Node runtime") {
        None => Ok(()),
        Some(why) => Err(RuntimeError::Untrusted {
            path: node.to_path_buf(),
            why,
        }),
    }
}

/// The record's bytes, never through a link ([`crate::state_dir::open_file`]).
fn read_no_follow(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    crate::state_dir::open_file(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes the record through a new file of a name of its own (never an existing file, never
/// through a link; two runners writing at once each write whole files), then renames it
/// over `cache`. Best effort: a failure costs one more inspection later.
fn write_record(cache: &Path, text: &[u8]) {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    // Unique enough: a name taken already (create_new) only skips this write.
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = cache.with_file_name(format!(
        ".runtime.{}.{}.{nanos:08x}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o644)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text));
    if written.is_err() || std::fs::rename(&tmp, cache).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

fn check_supported(rt: &Runtime, allow_node20: bool) -> Result<(), RuntimeError> {
    if rt.version == PINNED_VERSION && !rt.pinned {
        return Err(RuntimeError::Tampered {
            path: rt.node.clone(),
            found: rt.sha256.clone(),
        });
    }
    if !version_supported(rt.major, rt.minor, allow_node20) {
        return Err(RuntimeError::Unsupported {
            path: rt.node.clone(),
            version: rt.version.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_never_written_or_read_through_a_link() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "kept\n").expect("write");
        let cache = dir.path().join("runtime.json");
        // The name the record was once written through, and the record itself, as links.
        std::os::unix::fs::symlink(&victim, dir.path().join("runtime.tmp")).expect("link");
        std::os::unix::fs::symlink(&victim, &cache).expect("link");
        assert!(read_no_follow(&cache).is_err(), "a link is not read");
        write_record(&cache, b"{}");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "kept\n");
        assert_eq!(read_no_follow(&cache).expect("the record"), b"{}");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp") && n != "runtime.tmp")
            .collect();
        assert!(left.is_empty(), "no temporary file left: {left:?}");
    }

    /// A stand-in Node that says it is the pinned version and leaves a mark when it runs.
    fn marking_node(dir: &Path, mode: u32) -> (PathBuf, PathBuf) {
        use std::os::unix::fs::PermissionsExt as _;
        let node = dir.join("node");
        let mark = dir.join("ran");
        std::fs::write(
            &node,
            format!(
                "#!/bin/sh\necho ran > '{}'\necho {PINNED_VERSION}\n",
                mark.display()
            ),
        )
        .expect("write");
        std::fs::set_permissions(&node, std::fs::Permissions::from_mode(mode)).expect("chmod");
        (node, mark)
    }

    fn chmod(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn a_node_others_may_change_is_never_run() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("mkdir");
        chmod(dir.path(), 0o755);
        chmod(&bin, 0o755);
        let (node, mark) = marking_node(&bin, 0o757);
        let e = inspect(&node, false, None).expect_err("refused");
        assert!(matches!(e, RuntimeError::Untrusted { .. }), "{e}");
        assert!(e.to_string().contains("(mode 757)"), "{e}");
        assert!(!mark.exists(), "a file others may write was run");

        chmod(&node, 0o755);
        chmod(&bin, 0o777);
        let e = inspect(&node, false, None).expect_err("refused");
        assert!(
            e.to_string().contains("(mode 777) and is not sticky"),
            "{e}"
        );
        assert!(
            !mark.exists(),
            "a file in a folder others may write was run"
        );

        // A sticky folder (as /tmp is) is enough: no one else may replace what is in it.
        chmod(&bin, 0o1777);
        // (A shell script: ldd then refuses it, which is not this test's matter.)
        let e = inspect(&node, false, None).expect_err("not a Node");
        assert!(!matches!(e, RuntimeError::Untrusted { .. }), "{e}");
        assert!(mark.exists(), "a file only its owner may change is run");
    }

    #[test]
    fn a_node_of_another_user_is_refused_and_so_is_its_folder() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().expect("a temporary folder");
        chmod(dir.path(), 0o755);
        let (node, _) = marking_node(dir.path(), 0o755);
        let mine = std::fs::metadata(&node).expect("stat").uid();
        // As root, the file is given to another user; otherwise the runner is another user.
        let me = if mine == 0 {
            std::os::unix::fs::chown(&node, Some(65534), None).expect("chown");
            0
        } else {
            mine + 1
        };
        let real = std::fs::canonicalize(&node).expect("resolve");
        let e = trusted(&real, me).expect_err("refused");
        assert!(e.to_string().contains("belongs to uid"), "{e}");
        if mine == 0 {
            std::os::unix::fs::chown(&node, Some(0), None).expect("chown");
            std::os::unix::fs::chown(dir.path(), Some(65534), None).expect("chown");
            let e = trusted(&real, me).expect_err("refused");
            assert!(e.to_string().contains("on the way to"), "{e}");
            std::os::unix::fs::chown(dir.path(), Some(0), None).expect("chown");
        }
        trusted(&real, if mine == 0 { 0 } else { mine }).expect("its own user's file");
    }

    #[test]
    fn versions_without_synchronous_module_hooks_are_named_a_gap() {
        let at = |major, minor| Runtime {
            node: PathBuf::from("/node"),
            version: format!("v{major}.{minor}.0"),
            major,
            minor,
            sha256: String::new(),
            pinned: false,
            libraries: Vec::new(),
            loader: None,
        };
        for (major, minor) in [(20, 20), (22, 13), (22, 14), (23, 0), (23, 4)] {
            assert!(
                at(major, minor).hardening_gap().is_some(),
                "{major}.{minor}"
            );
        }
        for (major, minor) in [(22, 15), (23, 5), (24, 0), (25, 1)] {
            assert!(
                at(major, minor).hardening_gap().is_none(),
                "{major}.{minor}"
            );
        }
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("v24.22.3\n"), Some((24, 22)));
        assert_eq!(parse_version("24.22.3"), None);
        assert_eq!(parse_version("v24.x.3"), None);
        assert!(version_supported(24, 0, false));
        assert!(version_supported(22, 13, false));
        assert!(!version_supported(22, 12, false));
        assert!(!version_supported(20, 20, false));
        assert!(version_supported(20, 20, true));
        assert!(!version_supported(18, 0, true));
    }

    #[test]
    fn ldd_output() {
        let text = "\tlinux-vdso.so.1 (0x00007fff)\n\tlibdl.so.2 => /lib/x86_64-linux-gnu/libdl.so.2 (0x1)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x2)\n\t/lib64/ld-linux-x86-64.so.2 (0x3)\n\tlibfoo.so => not found\n";
        let (libs, loader) = parse_ldd(text);
        assert_eq!(
            libs,
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libdl.so.2"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert_eq!(loader, Some(PathBuf::from("/lib64/ld-linux-x86-64.so.2")));
    }

    #[test]
    fn flags_follow_the_version() {
        let mut rt = Runtime {
            node: "/n".into(),
            version: "v24.22.3".into(),
            major: 24,
            minor: 22,
            sha256: String::new(),
            pinned: true,
            libraries: vec![],
            loader: None,
        };
        assert_eq!(rt.permission_flag(), "--permission");
        assert_eq!(rt.fs_read_grant("/skill"), "--allow-fs-read=/skill/");
        rt.major = 20;
        assert_eq!(rt.permission_flag(), "--experimental-permission");
        assert_eq!(rt.fs_read_grant("/skill"), "--allow-fs-read=/skill/*");
    }

    #[test]
    fn a_tampered_pinned_version_is_refused() {
        let rt = Runtime {
            node: "/n".into(),
            version: PINNED_VERSION.into(),
            major: 24,
            minor: 22,
            sha256: "00".into(),
            pinned: false,
            libraries: vec![],
            loader: None,
        };
        assert!(matches!(
            check_supported(&rt, false),
            Err(RuntimeError::Tampered { .. })
        ));
    }
}
