//! Landlock: read-only access to what Node needs and `/skill`, execute of Node only, no
//! write anywhere but /dev/null; TCP bind/connect and scoping of abstract unix sockets
//! and signals where the kernel's ABI has them. The ruleset must report itself fully
//! enforced for the ABI we ask for, or the job does not run.

use crate::plan::LandlockPlan;
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

/// The newest ABI whose rights this runner knows and has tested (6: signal and abstract
/// unix socket scoping). Newer kernels are used at this level.
const NEWEST_USED: i32 = 6;

#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("landlock is not available on this kernel (ABI {0}); boot with landlock in the lsm= list (CONFIG_SECURITY_LANDLOCK=y)")]
    Unavailable(i32),
    #[error("landlock ruleset: {0}")]
    Ruleset(String),
    #[error("landlock rule for {path}: {err}")]
    Rule { path: String, err: String },
    #[error("landlock ruleset was only {0:?}, not fully enforced; refusing to run")]
    NotFullyEnforced(String),
}

/// The kernel's landlock ABI version, 0 when absent or disabled.
pub fn kernel_abi() -> i32 {
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag
    // only returns the ABI version; it reads and writes no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    if v < 0 {
        0
    } else {
        v as i32
    }
}

/// The ABI the ruleset is built for: the kernel's, capped at what this runner knows.
pub fn target_abi(kernel: i32) -> Option<ABI> {
    if kernel < 1 {
        None
    } else {
        Some(ABI::from(kernel.min(NEWEST_USED)))
    }
}

/// What the ruleset will restrict for a kernel ABI (for `doctor`).
pub fn features(kernel: i32) -> Vec<&'static str> {
    let mut f = Vec::new();
    if kernel >= 1 {
        f.push("filesystem");
    }
    if kernel >= 4 {
        f.push("tcp bind/connect");
    }
    if kernel >= 6 {
        f.push("abstract unix socket and signal scoping");
    }
    f
}

/// Builds the ruleset and restricts the calling thread (before exec: Node inherits it).
/// `no_new_privs` must already be set.
pub fn apply(plan: &LandlockPlan) -> Result<(), LandlockError> {
    let kernel = kernel_abi();
    let abi = target_abi(kernel).ok_or(LandlockError::Unavailable(kernel))?;
    let rs = |e: landlock::RulesetError| LandlockError::Ruleset(e.to_string());

    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(rs)?;
    if kernel >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(rs)?;
    }
    if kernel >= 6 {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(rs)?;
    }
    let mut created = ruleset.create().map_err(rs)?;

    let file_read: BitFlags<AccessFs> = AccessFs::ReadFile.into();
    let dir_read: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::ReadDir;
    let exec: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::Execute;
    let write: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::WriteFile;

    let mut rules: Vec<(&std::path::Path, BitFlags<AccessFs>)> = Vec::new();
    for p in &plan.read_files {
        let access = if plan.exec_files.contains(p) {
            exec
        } else if plan.write_files.contains(p) {
            write
        } else {
            file_read
        };
        rules.push((p, access));
    }
    for p in &plan.exec_files {
        if !plan.read_files.contains(p) {
            rules.push((p, exec));
        }
    }
    for p in &plan.write_files {
        if !plan.read_files.contains(p) {
            rules.push((p, write));
        }
    }
    for p in &plan.read_dirs {
        rules.push((p, dir_read));
    }
    for (path, access) in rules {
        let fd = PathFd::new(path).map_err(|e| LandlockError::Rule {
            path: path.display().to_string(),
            err: e.to_string(),
        })?;
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| LandlockError::Rule {
                path: path.display().to_string(),
                err: e.to_string(),
            })?;
    }
    if kernel >= 4 {
        for port in &plan.connect_tcp {
            created = created
                .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                .map_err(rs)?;
        }
    }
    let status = created.restrict_self().map_err(rs)?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(LandlockError::NotFullyEnforced(format!(
            "{:?}",
            status.ruleset
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_is_capped_and_absence_detected() {
        assert!(target_abi(0).is_none());
        assert_eq!(target_abi(1), Some(ABI::V1));
        assert_eq!(target_abi(7), Some(ABI::V6));
        assert_eq!(features(3), vec!["filesystem"]);
        assert_eq!(features(7).len(), 3);
    }
}
