//! The [`ValidPolicy`] compiled per net mode: one filter per non-allow action, then the
//! allow list behind its x32 guard (see the module above for why in that order), made by
//! seccompiler and joined into one program where [`join`] can.

use super::join::{join, Filter};
use super::policy::{applies_in, group_label, precedence, seccomp_action, syscall_number};
use super::policy::{CmpOp, SyscallGroup, ValidPolicy};
use super::SeccompError;
use crate::bpf::{x32_guard, CompiledFilters, Instruction};
use crate::job::Net;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// Compiles the groups that apply in `net`: the filters below, joined into one program
/// when [`join`] can (the shipped policy's always can), else the filters themselves in
/// installation order.
pub fn compile(policy: &ValidPolicy, net: Net) -> Result<CompiledFilters, SeccompError> {
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

/// The filters in installation order: one per non-allow action, then the allow list.
pub(super) fn compile_filters(policy: &ValidPolicy, net: Net) -> Result<Vec<Filter>, SeccompError> {
    let arch = target_arch()?;
    let default = seccomp_action(policy.default_action, policy.default_errno_ret);
    let mut allow = RuleSet::default();
    // Non-allow actions in order of first appearance: that is their installation order.
    let mut others: Vec<(SeccompAction, RuleSet)> = Vec::new();
    for (index, group) in policy.syscalls.iter().enumerate() {
        if !applies_in(group, net) {
            continue;
        }
        let action = seccomp_action(group.action, group.errno_ret);
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
        let program = filter_program(set, SeccompAction::Allow, action.clone(), arch, &name, net)?;
        filters.push(Filter { program, action });
    }
    let mut allow_list = x32_guard();
    allow_list.extend(filter_program(
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

fn filter_program(
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

fn action_label(action: &SeccompAction) -> String {
    match action {
        SeccompAction::Errno(n) => format!("errno {n}"),
        other => format!("{other:?}"),
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
