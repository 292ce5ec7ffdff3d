//! The joined program against the filters it stands for: every call answered as the
//! kernel answers with the separate filters installed, and programs of another shape left
//! alone.

use super::*;
use crate::bpf::{CompiledFilters, AUDIT_ARCH_X86_64};
use crate::job::Net;
use crate::sandbox::seccomp::tests::{
    call, errno_filter, evaluate, name_of, separate_filters, shipped, tie_filters, with_group,
    Call, AUDIT_ARCH_I386, ENOSYS_RET, EPERM_RET, NETS,
};
use crate::sandbox::seccomp::{compile, parse_policy, syscall_number, CmpOp, ValidPolicy};

/// A small deterministic generator (xorshift64*), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[(self.next() % from.len() as u64) as usize]
    }
}

/// Argument values near every boundary the policy draws: each value and expected masked
/// value, one off, with bits above 32 set, with each single mask bit flipped, and the
/// extremes.
fn interesting_values(policy: &ValidPolicy) -> Vec<u64> {
    let mut values = vec![0, 1, u64::MAX, u64::from(u32::MAX), 1 << 32, 1 << 63];
    for group in &policy.syscalls {
        for arg in &group.args {
            for v in [arg.value, arg.value_two] {
                values.extend([v, v.wrapping_add(1), v.wrapping_sub(1), v | 1 << 32, !v]);
            }
            if arg.op == CmpOp::MaskedEq {
                values.push(arg.value_two | !arg.value);
                for bit in 0..64 {
                    if arg.value & (1 << bit) != 0 {
                        values.push(arg.value_two ^ (1 << bit));
                    }
                }
            }
        }
    }
    values.sort_unstable();
    values.dedup();
    values
}

/// Every system call number, x32 and out-of-range numbers, both audit arches, and for the
/// calls a conditional group names, every interesting value in every argument: the joined
/// program answers each exactly as the kernel answers with the separate filters installed.
#[track_caller]
fn assert_joined_answers_as_separate(policy: &ValidPolicy, net: Net) {
    let separate = separate_filters(policy, net);
    let joined = match compile(policy, net) {
        Ok(f) => f,
        Err(e) => panic!("compile: {e}"),
    };
    assert_eq!(joined.programs.len(), 1, "joined");
    let check = |c: &Call| {
        let (want, got) = (evaluate(&separate, c), evaluate(&joined, c));
        assert_eq!(
            name_of(got),
            name_of(want),
            "nr {:#x} arch {:#x} args {:x?} in {}",
            c.nr,
            c.arch,
            c.args,
            net.as_str()
        );
    };
    let values = interesting_values(policy);
    let conditional: Vec<i64> = policy
        .syscalls
        .iter()
        .filter(|g| !g.args.is_empty())
        .flat_map(|g| g.names.iter().filter_map(|n| syscall_number(n)))
        .collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut numbers: Vec<i64> = (0..=480).collect();
    numbers.extend((0..=560).map(|nr| 0x4000_0000 | nr));
    numbers.extend([-1, 0x3fff_ffff, 0x7fff_ffff, 0x8000_0000, 1000, 4096]);
    for &nr in &numbers {
        for arch in [AUDIT_ARCH_X86_64, AUDIT_ARCH_I386] {
            let mut c = call(nr, &[]);
            c.arch = arch;
            check(&c);
            for _ in 0..4 {
                c.args = [0; 6].map(|_| rng.next());
                check(&c);
            }
        }
        if conditional.contains(&nr) {
            for index in 0..6 {
                for &v in &values {
                    let mut args = [0u64; 6];
                    args[index] = v;
                    check(&call(nr, &args));
                    check(&call(nr, &[v; 6]));
                }
            }
            for _ in 0..2000 {
                let args = [0; 6].map(|_| rng.pick(&values));
                check(&call(nr, &args));
            }
        }
    }
}

#[test]
fn the_joined_program_answers_every_call_as_the_separate_filters_do() {
    for net in NETS {
        assert_joined_answers_as_separate(&shipped(), net);
    }
}

/// The order is the kernel's for any mix of actions: a kill, a trap, two errnos as strict
/// as the default, a log; and a call several filters answer.
#[test]
fn the_joined_program_keeps_the_kernels_order_between_actions() {
    let text = with_group(
        r#"{"names":["read","write","getpid","ioctl"],"action":"SCMP_ACT_ALLOW"},
           {"names":["getppid"],"action":"SCMP_ACT_ERRNO","errnoRet":38},
           {"names":["write"],"action":"SCMP_ACT_TRAP","args":[{"index":0,"value":2,"op":"SCMP_CMP_EQ"}]},
           {"names":["write"],"action":"SCMP_ACT_ERRNO","errnoRet":9,"args":[{"index":0,"value":3,"op":"SCMP_CMP_GE"}]},
           {"names":["write"],"action":"SCMP_ACT_KILL_PROCESS","args":[{"index":0,"value":7,"op":"SCMP_CMP_EQ"}]},
           {"names":["ioctl"],"action":"SCMP_ACT_KILL_THREAD","args":[{"index":1,"value":4294967295,"valueTwo":21522,"op":"SCMP_CMP_MASKED_EQ"}]},
           {"names":["ioctl"],"action":"SCMP_ACT_ERRNO","args":[{"index":1,"value":255,"valueTwo":18,"op":"SCMP_CMP_MASKED_EQ"}]},
           {"names":["getpid"],"action":"SCMP_ACT_LOG","args":[{"index":0,"value":1,"op":"SCMP_CMP_EQ"}]},
           {"names":["ptrace"],"action":"SCMP_ACT_ERRNO"}"#,
    );
    let policy = match parse_policy(&text) {
        Ok(p) => p,
        Err(e) => panic!("mixed policy refused: {e}"),
    };
    // errno 38, trap, errno 9, kill-process, kill-thread, errno 1, log; the allow list
    assert_eq!(separate_filters(&policy, Net::Deny).programs.len(), 8);
    assert_joined_answers_as_separate(&policy, Net::Deny);
    let joined = compile(&policy, Net::Deny).unwrap_or_default();
    let eval = |nr, args: &[u64]| name_of(evaluate(&joined, &call(nr, args)));
    assert_eq!(eval(libc::SYS_write, &[7]), "kill-process");
    assert_eq!(eval(libc::SYS_write, &[2]), "0x30000");
    assert_eq!(eval(libc::SYS_write, &[3]), "errno 9");
    assert_eq!(eval(libc::SYS_write, &[1]), "allow");
    assert_eq!(eval(libc::SYS_ioctl, &[0, 0x5412]), "0x0");
    assert_eq!(eval(libc::SYS_ioctl, &[0, 0x5512]), "errno 1");
    assert_eq!(eval(libc::SYS_getppid, &[]), "errno 38");
    assert_eq!(
        eval(libc::SYS_getpid, &[1]),
        format!("{:#x}", 0x7ffc_0000u32)
    );
    assert_eq!(eval(libc::SYS_ptrace, &[]), "errno 1");
    assert_eq!(eval(libc::SYS_close, &[]), "errno 1");
}

/// Two errno filters of the same strictness: the joined program asks the newest first.
#[test]
fn the_joined_program_gives_a_tie_to_the_newest_filter() {
    for eperm_first in [true, false] {
        let filters = tie_filters(eperm_first);
        let answers = [libc::ENOSYS as u32, libc::EPERM as u32];
        let (older, newer) = if eperm_first {
            (answers[1], answers[0])
        } else {
            (answers[0], answers[1])
        };
        let as_filters = |errno: u32, program: &Vec<Instruction>| Filter {
            program: program.clone(),
            action: SeccompAction::Errno(errno),
        };
        let parts = [
            as_filters(older, &filters.programs[0]),
            as_filters(newer, &filters.programs[1]),
        ];
        let joined = join(&parts).map(|p| CompiledFilters { programs: vec![p] });
        let getppid = call(libc::SYS_getppid, &[]);
        assert_eq!(
            joined.map(|j| evaluate(&j, &getppid)),
            Some(evaluate(&filters, &getppid))
        );
    }
}

/// What the joined program relies on is checked, not assumed: a program that returns
/// another value, or returns the accumulator, is left as a filter of its own.
#[test]
fn programs_of_another_shape_are_not_joined() {
    let eperm = errno_filter(libc::SYS_getppid, libc::EPERM as u32);
    let allow_list = |k: u32, code: u16| {
        let mut p = x32_guard();
        p.push(Instruction {
            code,
            jt: 0,
            jf: 0,
            k,
        });
        p
    };
    let joinable = [
        Filter {
            program: eperm.clone(),
            action: SeccompAction::Errno(libc::EPERM as u32),
        },
        Filter {
            program: allow_list(EPERM_RET, BPF_RET_K),
            action: SeccompAction::Errno(libc::EPERM as u32),
        },
    ];
    assert!(join(&joinable).is_some());
    for (k, code) in [(ENOSYS_RET, BPF_RET_K), (EPERM_RET, 0x16)] {
        let parts = [
            Filter {
                program: eperm.clone(),
                action: SeccompAction::Errno(libc::EPERM as u32),
            },
            Filter {
                program: allow_list(k, code),
                action: SeccompAction::Errno(libc::EPERM as u32),
            },
        ];
        assert!(join(&parts).is_none(), "k {k:#x} code {code:#x}");
    }
    // One filter is left as it is; so is a join longer than one program may be.
    assert!(join(&joinable[..1]).is_none());
    let long = Filter {
        program: vec![
            Instruction {
                code: BPF_RET_K,
                jt: 0,
                jf: 0,
                k: EPERM_RET,
            };
            MAX_PROGRAM_LEN
        ],
        action: SeccompAction::Errno(libc::EPERM as u32),
    };
    let short = Filter {
        program: eperm,
        action: SeccompAction::Errno(libc::EPERM as u32),
    };
    assert!(join(&[short, long]).is_none());
}
