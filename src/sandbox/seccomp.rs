//! Seccomp, the last layer the init applies before it becomes Node.
//!
//! The policy is data: `policies/seccomp.json`, an OCI runtime-spec (Docker) seccomp profile
//! with a reason per group. `policy` parses and checks it into a [`ValidPolicy`]; `compile`
//! compiles that per net mode into classic-BPF programs and `join` joins them (pure; the plan
//! carries them to the init in the wire form of `crate::bpf`, each as base64 of its raw
//! instructions); this module installs them (the one effect, the init's last step before
//! execve).
//!
//! From groups to filters (seccompiler gives each filter one match action):
//! 1. every action other than allow (e.g. ERRNO(ENOSYS), ERRNO(EPERM)) makes one filter:
//!    match that action, mismatch Allow; installed first, in order of first appearance;
//! 2. the `SCMP_ACT_ALLOW` groups make the allow-list filter: match Allow, mismatch
//!    `defaultAction`, with a guard in front that kills any x32 system call. It is installed
//!    last because it refuses prctl(PR_SET_NO_NEW_PRIVS) and seccomp(2), which installing
//!    another filter after it would need.
//!
//! The kernel runs every filter and keeps the strictest action; between equally strict ones
//! (two ERRNOs) the most recently installed filter's answer wins (seccomp(2)). A group whose
//! action is as strict as the default but answers differently (ENOSYS for `clone3` against
//! the default EPERM) is therefore also put in the allow list: there the call meets Allow,
//! which ERRNO beats whatever the order. Stricter groups (TIOCSTI) need no such help. So each
//! group's action applies to the calls it matches, and the default to the rest, as in OCI.
//!
//! Last, [`join`] makes one program of the filters that answers every call as the kernel
//! answers with them installed in that order: the init installs one filter, and the kernel
//! runs one program a call. Filters it cannot join stay separate, in that order.
//!
//! Extension to the OCI format (see `policy`): `"openvibe_net"` on a group limits it to
//! those net modes.

use seccompiler::BpfProgram;
use std::path::PathBuf;

mod compile;
mod join;
mod policy;
#[cfg(test)]
mod tests;

pub use crate::bpf::{
    program_from_bytes, program_to_bytes, CompiledFilters, Instruction, ProgramError,
    INSTRUCTION_BYTES, MAX_PROGRAM_LEN,
};
pub use compile::compile;
pub use policy::{
    load_policy, parse_policy, syscall_number, Action, Arch, ArgCondition, CmpOp, SeccompPolicy,
    SyscallGroup, ValidPolicy,
};

/// Why a policy could not be loaded, compiled or installed. Each message says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("cannot read the seccomp policy {}: {source}; install policies/seccomp.json there or point the runner's policies_dir at it", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the seccomp policy is not a valid OCI seccomp profile: {source} (only the documented fields are accepted, so a typo cannot weaken the filter)")]
    Parse {
        #[source]
        source: serde_json::Error,
    },
    #[error("{group}: `{name}` is not an x86_64 system call this build knows; fix the spelling or remove it")]
    UnknownSyscall { group: String, name: String },
    #[error("{location}: {problem}")]
    Invalid { location: String, problem: String },
    #[error("seccomp filters are built for x86_64 only; this runner was built for {arch}")]
    UnsupportedArch { arch: &'static str },
    #[error("compiling the seccomp {filter} filter for net mode {net} failed: {reason}; shorten the policy")]
    Compile {
        filter: String,
        net: &'static str,
        reason: String,
    },
    /// The plan's programs: none, or not of a shape the kernel takes.
    #[error(transparent)]
    Program(#[from] ProgramError),
    #[error("installing seccomp filter {} of {count} failed: {source}; the kernel needs CONFIG_SECCOMP_FILTER=y, and no filter installed earlier may forbid prctl(PR_SET_NO_NEW_PRIVS) or seccomp(2)", .index + 1)]
    Install {
        index: usize,
        count: usize,
        #[source]
        source: seccompiler::Error,
    },
}

/// Installs the filters on every thread of the calling process, in order. The init calls it
/// as its last step before execve; it sets no_new_privs (seccompiler does) and cannot be
/// undone. After the allow list nothing more can be installed: it refuses seccomp(2).
pub fn install(filters: &CompiledFilters) -> Result<(), SeccompError> {
    install_programs(&filters.to_bpf_programs()?)
}

/// [`install`] for programs already converted: it allocates nothing, so it may run between
/// fork and exec.
pub fn install_programs(programs: &[BpfProgram]) -> Result<(), SeccompError> {
    if programs.is_empty() {
        return Err(ProgramError::NoFilter.into());
    }
    let count = programs.len();
    for (index, program) in programs.iter().enumerate() {
        // TSYNC: a stray helper thread cannot stay unfiltered.
        seccompiler::apply_filter_all_threads(program).map_err(|source| SeccompError::Install {
            index,
            count,
            source,
        })?;
    }
    Ok(())
}
