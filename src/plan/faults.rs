//! A fault (a test hook, `runner.fault_inject`) as the plan carries it: the one step's input
//! corrupted into one the kernel refuses, so the init stage, which applies a plan as it is,
//! meets the real call's own error.

use super::{ruleset, CgroupJoin, ExecGateStep, MountStep, PathRule, Plan, RootSteps, REPORT_FD};
use crate::bpf::{CompiledFilters, Instruction};
use crate::fault::Fault;

/// A seccomp program the kernel refuses: a jump past its end ([`Fault::Seccomp`]).
pub fn refused_seccomp_program() -> CompiledFilters {
    CompiledFilters {
        programs: vec![vec![
            Instruction {
                code: crate::bpf::BPF_JMP_JA,
                jt: 0,
                jf: 0,
                k: 1000,
            },
            Instruction {
                code: crate::bpf::BPF_RET_K,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_ALLOW,
            },
        ]],
    }
}

/// The largest number of supplementary groups the kernel takes (`NGROUPS_MAX`).
pub const NGROUPS_MAX: usize = 65_536;

/// Makes one step of a finished plan fail for real (a test hook, `runner.fault_inject`):
/// its input becomes one the kernel refuses, so the init stage, which applies the plan as
/// it is, meets the real call's own error; an init that swallowed it would run the tool.
/// An error when the plan does not have the step (the job or a layer left out skips it), so
/// a fault never silently tests nothing.
pub fn inject(plan: &mut Plan, fault: Fault) -> Result<(), String> {
    let absent = |why: &str| {
        Err(format!(
            "runner.fault_inject = \"{}\" would make a step fail that this job's plan does not have ({why}); inject it into a job that has the step, or inject another fault",
            fault.as_str()
        ))
    };
    match fault {
        // setns on the report pipe, which is no namespace (EINVAL).
        Fault::Netns => {
            match plan.join_netns {
                Some(_) => plan.join_netns = Some(REPORT_FD),
                None => return absent(
                    "it joins no network namespace: its net is deny, or net_namespace is left out",
                ),
            }
        }
        // v1: `0` written to each cgroup's folder instead of its file (EISDIR). v2: the
        // folder's `cgroup.procs` opened as the folder pid 1 is made in (ENOTDIR).
        Fault::Cgroup => match &mut plan.cgroup_join {
            CgroupJoin::Write { files } => {
                for file in files {
                    if let Some(dir) = file.parent() {
                        *file = dir.to_path_buf();
                    }
                }
            }
            CgroupJoin::CloneInto { dir } => *dir = dir.join("cgroup.procs"),
        },
        // unshare with a bit it does not know, an exit signal (EINVAL).
        Fault::Namespaces => plan.unshare |= libc::SIGCHLD,
        // A bind mount whose source does not exist (ENOENT), before every other mount.
        Fault::Mounts => {
            if plan.root_steps != RootSteps::Enter {
                return absent("it mounts nothing into a root: root is left out");
            }
            plan.mounts.insert(
                0,
                MountStep::BindFile {
                    source: plan.root.join("missing-source"),
                    target: "/missing-target".into(),
                },
            );
        }
        // More groups than the kernel allows (EINVAL).
        Fault::Capabilities => match &mut plan.privileges {
            Some(p) => p.groups = vec![p.gid; NGROUPS_MAX + 1],
            None => return absent("it keeps its privileges: privileges is left out"),
        },
        // A rule for a path the job's root lacks, which the ruleset cannot take.
        Fault::Landlock => match &mut plan.landlock {
            Some(l) => l.paths.push(PathRule {
                path: "/missing-by-fault".into(),
                access: ruleset::READ_DIR.to_vec(),
            }),
            None => return absent("landlock is left out"),
        },
        // The gate's listener sent over a descriptor already closed (EBADF).
        Fault::ExecGate => {
            if plan.exec_gate != ExecGateStep::HandOver {
                return absent("exec_gate is left out");
            }
            plan.exec_gate = ExecGateStep::HandOverClosedSocket;
        }
        // A program with a jump past its end (EINVAL).
        Fault::Seccomp => match &mut plan.seccomp {
            Some(s) => *s = refused_seccomp_program(),
            None => return absent("seccomp is left out"),
        },
    }
    plan.fault = Some(fault);
    Ok(())
}
