//! Landlock: the plan's ruleset (`plan::ruleset`: its ABI, the rights it handles, each
//! path's rights, the TCP ports) translated into the landlock crate's calls, nothing
//! decided here. The running kernel's ABI must be at least the plan's, and the ruleset must
//! report itself fully enforced, or the job does not run.

use crate::plan::ruleset::{FsAccess, LandlockPlan, NetAccess, Scope as PlanScope};
use landlock::{
    AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("landlock is not available on this kernel (ABI {0}); boot with landlock in the lsm= list (CONFIG_SECURITY_LANDLOCK=y)")]
    Unavailable(i32),
    #[error("the plan's landlock ruleset is for ABI {plan}, and this kernel has ABI {kernel}: refusing to run with less; the runner detects the ABI when it starts, so restart it on this kernel")]
    BelowPlan { plan: u8, kernel: i32 },
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

fn fs(access: &[FsAccess]) -> BitFlags<AccessFs> {
    access
        .iter()
        .map(|a| match a {
            FsAccess::Execute => AccessFs::Execute,
            FsAccess::WriteFile => AccessFs::WriteFile,
            FsAccess::ReadFile => AccessFs::ReadFile,
            FsAccess::ReadDir => AccessFs::ReadDir,
            FsAccess::RemoveDir => AccessFs::RemoveDir,
            FsAccess::RemoveFile => AccessFs::RemoveFile,
            FsAccess::MakeChar => AccessFs::MakeChar,
            FsAccess::MakeDir => AccessFs::MakeDir,
            FsAccess::MakeReg => AccessFs::MakeReg,
            FsAccess::MakeSock => AccessFs::MakeSock,
            FsAccess::MakeFifo => AccessFs::MakeFifo,
            FsAccess::MakeBlock => AccessFs::MakeBlock,
            FsAccess::MakeSym => AccessFs::MakeSym,
            FsAccess::Refer => AccessFs::Refer,
            FsAccess::Truncate => AccessFs::Truncate,
            FsAccess::IoctlDev => AccessFs::IoctlDev,
        })
        .collect()
}

fn net(access: &[NetAccess]) -> BitFlags<AccessNet> {
    access
        .iter()
        .map(|a| match a {
            NetAccess::BindTcp => AccessNet::BindTcp,
            NetAccess::ConnectTcp => AccessNet::ConnectTcp,
        })
        .collect()
}

fn scopes(scopes: &[PlanScope]) -> BitFlags<Scope> {
    scopes
        .iter()
        .map(|s| match s {
            PlanScope::AbstractUnixSocket => Scope::AbstractUnixSocket,
            PlanScope::Signal => Scope::Signal,
        })
        .collect()
}

/// Builds the plan's ruleset and restricts the calling thread (before exec: Node inherits
/// it). `no_new_privs` must already be set.
pub fn apply(plan: &LandlockPlan) -> Result<(), LandlockError> {
    let kernel = kernel_abi();
    if kernel < 1 {
        return Err(LandlockError::Unavailable(kernel));
    }
    if plan.abi < 1 || kernel < i32::from(plan.abi) {
        return Err(LandlockError::BelowPlan {
            plan: plan.abi,
            kernel,
        });
    }
    if plan.handled_fs.is_empty() {
        return Err(LandlockError::Ruleset(
            "the plan's ruleset handles no filesystem right, which would restrict nothing; refusing to run (plan::ruleset decides the rights)".into(),
        ));
    }
    let rs = |e: landlock::RulesetError| LandlockError::Ruleset(e.to_string());

    // Every right asked for must be there: a kernel without one is an error, not a
    // ruleset quietly weaker than the plan.
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(fs(&plan.handled_fs))
        .map_err(rs)?;
    if !plan.handled_net.is_empty() {
        ruleset = ruleset.handle_access(net(&plan.handled_net)).map_err(rs)?;
    }
    if !plan.scopes.is_empty() {
        ruleset = ruleset.scope(scopes(&plan.scopes)).map_err(rs)?;
    }
    let mut created = ruleset.create().map_err(rs)?;
    for rule in &plan.paths {
        let failed = |err: String| LandlockError::Rule {
            path: rule.path.display().to_string(),
            err,
        };
        let fd = PathFd::new(&rule.path).map_err(|e| failed(e.to_string()))?;
        created = created
            .add_rule(PathBeneath::new(fd, fs(&rule.access)))
            .map_err(|e| failed(e.to_string()))?;
    }
    for port in &plan.connect_tcp {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(rs)?;
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
    use crate::plan::ruleset;
    use landlock::{Access, ABI};

    /// The plan's rights per ABI are the landlock crate's own sets for that ABI, so the
    /// plan's typed rights lose nothing in translation.
    #[test]
    fn the_plans_rights_per_abi_are_the_crates() {
        for abi in 1..=ruleset::NEWEST_USED {
            let crate_abi = ABI::from(i32::from(abi));
            assert_eq!(
                fs(&ruleset::handled_fs(abi)),
                AccessFs::from_all(crate_abi),
                "ABI {abi}"
            );
            assert_eq!(
                net(&ruleset::handled_net(abi)),
                AccessNet::from_all(crate_abi),
                "ABI {abi}"
            );
            assert_eq!(
                scopes(&ruleset::scopes(abi)),
                Scope::from_all(crate_abi),
                "ABI {abi}"
            );
        }
        // Every right of ours maps to a different right of the crate's.
        let all: Vec<FsAccess> = FsAccess::ALL.to_vec();
        assert_eq!(fs(&all).iter().count(), all.len());
        assert_eq!(fs(ruleset::EXECUTE), AccessFs::Execute | AccessFs::ReadFile);
        assert_eq!(
            fs(ruleset::WRITE_FILE),
            AccessFs::WriteFile | AccessFs::ReadFile
        );
    }

    /// A plan for a newer ABI than the running kernel's, or for none, or handling no right,
    /// is refused before any ruleset is made (so this test restricts nothing of its own
    /// process): a job never runs under less than its plan.
    #[test]
    fn a_plan_the_kernel_cannot_hold_is_refused_before_anything_is_restricted() {
        let kernel = kernel_abi();
        let plan = |abi: u8, handled_fs: Vec<FsAccess>| LandlockPlan {
            abi,
            handled_fs,
            handled_net: vec![],
            scopes: vec![],
            paths: vec![],
            connect_tcp: vec![],
        };
        let above = u8::try_from(kernel + 1).unwrap_or(u8::MAX);
        for abi in [above, 0] {
            let e = apply(&plan(abi, ruleset::handled_fs(1)))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            let expected = if kernel < 1 {
                "not available"
            } else {
                "this kernel has ABI"
            };
            assert!(e.contains(expected), "ABI {abi} on {kernel}: {e}");
        }
        if kernel >= 1 {
            let e = apply(&plan(1, vec![]))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains("handles no filesystem right"), "{e}");
        }
    }
}
