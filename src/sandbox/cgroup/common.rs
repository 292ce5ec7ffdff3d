//! What v1, v2 and detection share: the host as the runner reads it (`/proc/self/mountinfo`
//! and `/proc/self/cgroup`, under an injectable filesystem root), the configured parent as
//! a cgroup path, and making a parent. v1 and v2 import this, never each other.

use super::systemd::Systemd;
use super::{io_error, CgroupError, Kernel};
use std::path::{Component, Path, PathBuf};

/// What detection looks at. On a real host `fs_root` is `/`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostView<'a> {
    pub mountinfo: &'a str,
    pub self_cgroup: &'a str,
    /// Prefix of every mount point (a tempdir in tests).
    pub fs_root: &'a Path,
    /// The runner's own pid (the one process it may move into `supervisor` on v2).
    pub self_pid: i32,
    pub parent_override: Option<&'a Path>,
    /// systemd, when it is the init system (it then owns the cgroup tree).
    pub systemd: Option<&'a dyn Systemd>,
}

/// One cgroup or cgroup2 mount from mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    pub v2: bool,
    /// The cgroup path of the mount's root (`/` unless a subtree is bind-mounted).
    pub root: String,
    /// Where it is mounted, as the host sees it.
    pub mountpoint: PathBuf,
    /// Super options: the controllers of a v1 hierarchy (and rw, name=…, …).
    pub options: Vec<String>,
}

impl CgroupMount {
    pub fn has_controller(&self, controller: &str) -> bool {
        !self.v2 && self.options.iter().any(|o| o == controller)
    }

    /// The mount point under `fs_root`.
    pub fn dir(&self, fs_root: &Path) -> PathBuf {
        under_root(fs_root, &self.mountpoint)
    }

    /// The directory of cgroup `path` (as `/proc/self/cgroup` writes it) in this mount, when
    /// the mount shows it.
    pub fn dir_of_cgroup(&self, fs_root: &Path, path: &str) -> Option<PathBuf> {
        if !is_clean_absolute(path) {
            return None;
        }
        let rel = if self.root == "/" {
            path
        } else if path == self.root {
            ""
        } else {
            path.strip_prefix(self.root.as_str())
                .filter(|rest| rest.starts_with('/'))?
        };
        Some(self.dir(fs_root).join(rel.trim_start_matches('/')))
    }
}

/// `fs_root` joined with an absolute host path.
pub(crate) fn under_root(fs_root: &Path, path: &Path) -> PathBuf {
    fs_root.join(path.strip_prefix("/").unwrap_or(path))
}

fn is_clean_absolute(path: &str) -> bool {
    let path = Path::new(path);
    path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

/// The cgroup and cgroup2 mounts of a mountinfo text; other lines are skipped.
/// The cgroup hierarchies a mountinfo text lists, in its order.
pub fn parse_mountinfo(text: &str) -> Vec<CgroupMount> {
    text.lines().filter_map(parse_mountinfo_line).collect()
}

fn parse_mountinfo_line(line: &str) -> Option<CgroupMount> {
    // id parent major:minor root mountpoint options [optional…] - fstype source superoptions
    let fields: Vec<&str> = line.split_whitespace().collect();
    let sep = fields.iter().skip(6).position(|f| *f == "-")? + 6;
    let fstype = *fields.get(sep + 1)?;
    let v2 = match fstype {
        "cgroup2" => true,
        "cgroup" => false,
        _ => return None,
    };
    Some(CgroupMount {
        v2,
        root: unescape(fields.get(3)?),
        mountpoint: PathBuf::from(unescape(fields.get(4)?)),
        options: fields
            .get(sep + 3)
            .map(|o| o.split(',').map(str::to_owned).collect())
            .unwrap_or_default(),
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
fn unescape(field: &str) -> String {
    String::from_utf8_lossy(&unescape_bytes(field)).into_owned()
}

/// A mount point of mountinfo as the bytes it names (no lossy UTF-8: a path compared with
/// a real one must keep every byte).
pub(crate) fn unescape_path(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt as _;
    PathBuf::from(std::ffi::OsString::from_vec(unescape_bytes(field)))
}

fn unescape_bytes(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let digits = &bytes[i + 1..i + 4];
            if digits.iter().all(|b| (b'0'..=b'7').contains(b)) {
                let value = digits
                    .iter()
                    .fold(0u16, |acc, b| acc * 8 + u16::from(b - b'0'));
                if let Ok(byte) = u8::try_from(value) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// `/proc/self/cgroup`: the v2 path (`0::/path`) and each v1 hierarchy's controllers and path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SelfCgroup {
    pub v2: Option<String>,
    pub v1: Vec<(Vec<String>, String)>,
}

impl SelfCgroup {
    /// The runner's cgroup path in the v1 hierarchy holding `controller`.
    pub fn v1_path(&self, controller: &str) -> Option<&str> {
        self.v1
            .iter()
            .find(|(controllers, _)| controllers.iter().any(|c| c == controller))
            .map(|(_, path)| path.as_str())
    }
}

pub(crate) fn parse_self_cgroup(text: &str) -> SelfCgroup {
    let mut parsed = SelfCgroup::default();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            parsed.v2 = Some(path.to_owned());
        } else {
            parsed.v1.push((
                controllers.split(',').map(str::to_owned).collect(),
                path.to_owned(),
            ));
        }
    }
    parsed
}

/// The configured parent as a cgroup path: a path under one of `mounts` loses the mount
/// point (`/sys/fs/cgroup/memory/x` -> `/x`); anything else is already a cgroup path.
pub(crate) fn override_cgroup_path(
    configured: &Path,
    mounts: &[&CgroupMount],
) -> Result<String, CgroupError> {
    let bad = |why: &str| CgroupError::Placement {
        detail: format!(
            "the configured parent cgroup {} {why}",
            configured.display()
        ),
        fix: "configure an absolute path such as /sys/fs/cgroup/openvibe or /openvibe, \
              naming a dedicated cgroup"
            .to_owned(),
    };
    let text = configured.to_str().ok_or_else(|| bad("is not UTF-8"))?;
    if !is_clean_absolute(text) {
        return Err(bad("is not an absolute path without `.` or `..`"));
    }
    // Under the deepest matching mount point, the shortest remainder.
    let under_mount = mounts
        .iter()
        .filter_map(|m| configured.strip_prefix(&m.mountpoint).ok())
        .min_by_key(|rest| rest.as_os_str().len());
    let cgroup_path = match under_mount {
        Some(rest) => format!("/{}", rest.to_str().unwrap_or_default()),
        None => text.to_owned(),
    };
    let cgroup_path = cgroup_path.trim_end_matches('/').to_owned();
    if cgroup_path.is_empty() {
        return Err(bad("is a root cgroup"));
    }
    Ok(cgroup_path)
}

/// mkdir a parent the runner owns; one that exists already is the runner's from before.
pub(crate) fn create_parent(kernel: &dyn Kernel, dir: &Path) -> Result<(), CgroupError> {
    mkdir_or_existing(kernel, dir).map_err(|err| io_error("create", dir, err))
}

/// mkdir, where a folder already there is as good as a new one (the kernel's error kept,
/// for a caller that decides by it).
pub(crate) fn mkdir_or_existing(kernel: &dyn Kernel, dir: &Path) -> std::io::Result<()> {
    match kernel.mkdir(dir) {
        Err(err) if err.raw_os_error() == Some(libc::EEXIST) && dir.is_dir() => Ok(()),
        made => made,
    }
}
