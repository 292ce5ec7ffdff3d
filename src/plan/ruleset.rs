//! The landlock ruleset of a job, decided here and only translated by `sandbox::landlock`:
//! which ABI it targets (the kernel's, capped at [`NEWEST_USED`]), which rights it handles
//! (every filesystem right of that ABI, TCP bind and connect from ABI 4, the abstract unix
//! socket and signal scopes from ABI 6), and which rights each path gets.
//!
//! The rights are this crate's own types (they cross to the init stage in the plan's JSON,
//! and the plan does not import the sandbox); `sandbox::landlock` maps each to the landlock
//! crate's, and its tests check that every ABI's set here is the crate's `from_all`.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The newest ABI whose rights this runner knows and has tested (6: signal and abstract
/// unix socket scoping). A newer kernel is used at this level.
pub const NEWEST_USED: u8 = 6;
/// The first ABI that handles TCP bind and connect.
pub const NET_SINCE: u8 = 4;
/// The first ABI that scopes abstract unix sockets and signals.
pub const SCOPES_SINCE: u8 = 6;

/// A filesystem right (`LANDLOCK_ACCESS_FS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsAccess {
    Execute,
    WriteFile,
    ReadFile,
    ReadDir,
    RemoveDir,
    RemoveFile,
    MakeChar,
    MakeDir,
    MakeReg,
    MakeSock,
    MakeFifo,
    MakeBlock,
    MakeSym,
    /// ABI 2: link or rename across directories.
    Refer,
    /// ABI 3.
    Truncate,
    /// ABI 5: ioctl on a device file.
    IoctlDev,
}

impl FsAccess {
    pub const ALL: [FsAccess; 16] = [
        FsAccess::Execute,
        FsAccess::WriteFile,
        FsAccess::ReadFile,
        FsAccess::ReadDir,
        FsAccess::RemoveDir,
        FsAccess::RemoveFile,
        FsAccess::MakeChar,
        FsAccess::MakeDir,
        FsAccess::MakeReg,
        FsAccess::MakeSock,
        FsAccess::MakeFifo,
        FsAccess::MakeBlock,
        FsAccess::MakeSym,
        FsAccess::Refer,
        FsAccess::Truncate,
        FsAccess::IoctlDev,
    ];

    /// The first ABI that has this right.
    pub fn since(self) -> u8 {
        match self {
            FsAccess::Refer => 2,
            FsAccess::Truncate => 3,
            FsAccess::IoctlDev => 5,
            _ => 1,
        }
    }
}

/// A network right (`LANDLOCK_ACCESS_NET_*`), from ABI [`NET_SINCE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetAccess {
    BindTcp,
    ConnectTcp,
}

/// A scope (`LANDLOCK_SCOPE_*`), from ABI [`SCOPES_SINCE`]: the job cannot reach what is
/// outside its own domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    AbstractUnixSocket,
    Signal,
}

/// Read a file.
pub const READ_FILE: &[FsAccess] = &[FsAccess::ReadFile];
/// Read a directory's whole tree.
pub const READ_DIR: &[FsAccess] = &[FsAccess::ReadFile, FsAccess::ReadDir];
/// Execute a file (Node and its loader only), and read it.
pub const EXECUTE: &[FsAccess] = &[FsAccess::Execute, FsAccess::ReadFile];
/// Write a device file (`/dev/null` only), and read it.
pub const WRITE_FILE: &[FsAccess] = &[FsAccess::WriteFile, FsAccess::ReadFile];

/// The rights one path (and, for a directory, everything below it) gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathRule {
    pub path: PathBuf,
    pub access: Vec<FsAccess>,
}

/// Landlock for one job, every choice made: the init stage translates it as it is, and
/// refuses to run when the running kernel's ABI is below [`LandlockPlan::abi`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockPlan {
    /// The ABI the ruleset is built for ([`target_abi`]).
    pub abi: u8,
    /// The filesystem rights the ruleset handles: denied everywhere no rule grants them.
    pub handled_fs: Vec<FsAccess>,
    /// The network rights it handles (none below ABI 4).
    pub handled_net: Vec<NetAccess>,
    /// The scopes it restricts (none below ABI 6).
    pub scopes: Vec<Scope>,
    /// The paths and what each may be used for.
    pub paths: Vec<PathRule>,
    /// TCP ports the job may connect to (none for `deny`, and none when the net rights are
    /// not handled: a port rule needs them).
    pub connect_tcp: Vec<u16>,
}

/// The ABI a ruleset is built for on a kernel of ABI `kernel`: the kernel's, capped at
/// [`NEWEST_USED`]; `None` when the kernel has no landlock.
pub fn target_abi(kernel: i32) -> Option<u8> {
    if kernel < 1 {
        None
    } else {
        Some(kernel.min(i32::from(NEWEST_USED)) as u8)
    }
}

/// Every filesystem right of `abi`.
pub fn handled_fs(abi: u8) -> Vec<FsAccess> {
    FsAccess::ALL
        .into_iter()
        .filter(|a| a.since() <= abi)
        .collect()
}

/// TCP bind and connect from ABI 4, nothing before.
pub fn handled_net(abi: u8) -> Vec<NetAccess> {
    if abi >= NET_SINCE {
        vec![NetAccess::BindTcp, NetAccess::ConnectTcp]
    } else {
        Vec::new()
    }
}

/// Abstract unix sockets and signals scoped from ABI 6, nothing before.
pub fn scopes(abi: u8) -> Vec<Scope> {
    if abi >= SCOPES_SINCE {
        vec![Scope::AbstractUnixSocket, Scope::Signal]
    } else {
        Vec::new()
    }
}

/// What a ruleset restricts on a kernel of ABI `kernel` (for `doctor`), read from the same
/// decisions a job's plan takes.
pub fn features(kernel: i32) -> Vec<&'static str> {
    let Some(abi) = target_abi(kernel) else {
        return Vec::new();
    };
    let mut f = vec!["filesystem"];
    if !handled_net(abi).is_empty() {
        f.push("tcp bind/connect");
    }
    if !scopes(abi).is_empty() {
        f.push("abstract unix socket and signal scoping");
    }
    f
}

/// The paths a job may use, by what for; [`rules`] gives each its rights.
#[derive(Debug, Default)]
pub struct Grants {
    /// Files that may be read.
    pub read_files: Vec<PathBuf>,
    /// Directories whose whole tree may be read.
    pub read_dirs: Vec<PathBuf>,
    /// Files that may be executed (and read): Node and its loader.
    pub exec_files: Vec<PathBuf>,
    /// Files that may be written (and read): `/dev/null`.
    pub write_files: Vec<PathBuf>,
}

/// One rule per path: a file to execute gets [`EXECUTE`], one to write [`WRITE_FILE`], any
/// other file [`READ_FILE`], a directory [`READ_DIR`]; in the order read files, executables
/// not read otherwise, written files not read otherwise, directories.
pub fn rules(g: &Grants) -> Vec<PathRule> {
    let rule = |path: &PathBuf, access: &[FsAccess]| PathRule {
        path: path.clone(),
        access: access.to_vec(),
    };
    let mut out = Vec::new();
    for p in &g.read_files {
        let access = if g.exec_files.contains(p) {
            EXECUTE
        } else if g.write_files.contains(p) {
            WRITE_FILE
        } else {
            READ_FILE
        };
        out.push(rule(p, access));
    }
    for p in &g.exec_files {
        if !g.read_files.contains(p) {
            out.push(rule(p, EXECUTE));
        }
    }
    for p in &g.write_files {
        if !g.read_files.contains(p) {
            out.push(rule(p, WRITE_FILE));
        }
    }
    for p in &g.read_dirs {
        out.push(rule(p, READ_DIR));
    }
    out
}

/// The ruleset for a kernel of ABI `kernel`: the grants' rules, and the ports (allowed only
/// where the ABI handles TCP connect); `None` when the kernel has no landlock.
pub fn decide(kernel: i32, grants: &Grants, connect_tcp: &[u16]) -> Option<LandlockPlan> {
    let abi = target_abi(kernel)?;
    let handled_net = handled_net(abi);
    let connect_tcp = if handled_net.contains(&NetAccess::ConnectTcp) {
        connect_tcp.to_vec()
    } else {
        Vec::new()
    };
    Some(LandlockPlan {
        abi,
        handled_fs: handled_fs(abi),
        handled_net,
        scopes: scopes(abi),
        paths: rules(grants),
        connect_tcp,
    })
}
