//! The hand-written part of the seccomp compiler: [`join`] makes one program of the filters
//! seccompiler made, answering every call as the kernel answers with them installed in
//! order. The riskiest code of the layer, so it refuses any program not of the shape it
//! relies on, and its own tests compare it with the filters it stands for.

use super::policy::precedence;
use crate::bpf::{
    x32_guard, Instruction, BPF_CLASS_MASK, BPF_JMP_JA, BPF_RET_CLASS, BPF_RET_K, MAX_PROGRAM_LEN,
};
use seccompiler::SeccompAction;

/// One filter as the kernel would run it if installed alone: it answers Allow, its own
/// action, or kills a call of another ABI.
pub(super) struct Filter {
    pub(super) program: Vec<Instruction>,
    pub(super) action: SeccompAction,
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
pub(super) fn join(filters: &[Filter]) -> Option<Vec<Instruction>> {
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

#[cfg(test)]
mod tests;
