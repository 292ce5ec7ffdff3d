//! Classic BPF for seccomp as the kernel takes it, and the form the plan carries it in:
//! [`CompiledFilters`], each program one base64 string of its raw `struct sock_filter`
//! array. A leaf of the crate: the plan imports it without the sandbox, and the policy's
//! compiler (`sandbox::seccomp`) and the exec gate (`sandbox::exec_gate`) share its
//! opcodes and offsets.

use seccompiler::BpfProgram;
use serde::{Deserialize, Serialize};

/// The kernel's limit on one classic-BPF program (BPF_MAXINSNS).
pub const MAX_PROGRAM_LEN: usize = 4096;
/// The kernel's limit on all filters of a process together, counting 4 per filter
/// (MAX_INSNS_PER_PATH).
pub const MAX_TOTAL_LEN: usize = 32768;

pub const BPF_LD_W_ABS: u16 = 0x20;
pub const BPF_JMP_JEQ_K: u16 = 0x15;
pub const BPF_JMP_JGE_K: u16 = 0x35;
pub const BPF_RET_K: u16 = 0x06;
pub const BPF_JMP_JA: u16 = 0x05;
pub const BPF_CLASS_MASK: u16 = 0x07;
pub const BPF_RET_CLASS: u16 = 0x06;
/// Offsets in `struct seccomp_data`: the system call's number and its audit arch.
pub const SECCOMP_DATA_NR: u32 = 0;
pub const SECCOMP_DATA_ARCH: u32 = 4;
/// `AUDIT_ARCH_X86_64`: the arch every number here is for.
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

/// x32 system calls are x86_64 calls with this bit set in their number.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// One instruction as the kernel's `struct sock_filter`, for programs written by hand.
pub const fn sock_filter(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Why the programs a plan carries cannot be installed. Each message says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error("the plan carries no seccomp filter; refusing to run Node without one (compile the policy into the plan)")]
    NoFilter,
    #[error("seccomp program {index} in the plan is malformed: {problem}; the plan must carry programs made by seccomp::compile")]
    BadProgram { index: usize, problem: String },
}

/// Kills any x32 call (nr >= 0x40000000, same audit arch as x86_64) before anything else
/// looks at it; seccompiler's own arch check kills i386 and every other ABI.
pub fn x32_guard() -> Vec<Instruction> {
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

/// The compiled filters for one net mode, in installation order. In the plan each program
/// is one base64 string of its raw `struct sock_filter` array (8 bytes an instruction, see
/// [`Instruction::to_bytes`]), checked on decoding: a whole number of instructions, 1 to
/// [`MAX_PROGRAM_LEN`]. An empty list is never valid: `seccomp::install` refuses it.
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
    use super::{program_from_bytes, program_to_bytes, Instruction, ProgramError};
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
                    |problem: String| A::Error::custom(ProgramError::BadProgram { index, problem });
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
    pub fn to_bpf_programs(&self) -> Result<Vec<BpfProgram>, ProgramError> {
        if self.programs.is_empty() {
            return Err(ProgramError::NoFilter);
        }
        let mut total = 0;
        for (index, program) in self.programs.iter().enumerate() {
            if program.is_empty() || program.len() > MAX_PROGRAM_LEN {
                return Err(ProgramError::BadProgram {
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
            return Err(ProgramError::BadProgram {
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
