//! What a plan in real use has, read from its steps: the init stage of a build without
//! the `test-hooks` feature refuses a plan short of it, so a step a plan lost by mistake
//! fails the job instead of running it with less.
//!
//! The steps are the init stage's own, the OS layers. Node's permission model and the
//! preload are Node's flags, not steps, and are not part of it: a shipped engine can run
//! the test-only Node without its hardening (`Engine::with_node_hardening(false)`), which
//! the exec gate's JavaScript test does in the VM guests, whose binary has no test hooks.

use super::{CgroupJoin, ExecGateStep, Plan, RootSteps};
use crate::fault::Layer;

impl Plan {
    /// What this plan lacks of every layer a job in real use gets, read from its steps
    /// (not from `omit` or `fault`): empty for every plan [`build`] makes outside the
    /// layer matrix and the fault tests. The init stage of a build without the
    /// `test-hooks` feature refuses a plan with anything here, so a step a plan lost by
    /// mistake fails the job instead of running it with less.
    pub fn short_of_real_use(&self) -> Vec<&'static str> {
        let mut short = Vec::new();
        let has = |flag: i32| (self.unshare | self.pid_one_unshare) & flag == flag;
        // A cgroup namespace is rooted at its maker's cgroup: on v2 the init stage is
        // outside the job's (pid 1 is made inside), so one it made would show the job
        // the runner's cgroup path.
        let cgroup_ns_inside = match self.cgroup_join {
            CgroupJoin::Write { .. } => true,
            CgroupJoin::CloneInto { .. } => self.unshare & libc::CLONE_NEWCGROUP == 0,
        };
        let net_ns = has(libc::CLONE_NEWNET) || self.join_netns.is_some();
        for (ok, what) in [
            (has(libc::CLONE_NEWNS), "a mount namespace"),
            (has(libc::CLONE_NEWPID), "a pid namespace"),
            (net_ns, "a network namespace"),
            (
                has(libc::CLONE_NEWIPC | libc::CLONE_NEWUTS | libc::CLONE_NEWCGROUP),
                "ipc, uts and cgroup namespaces",
            ),
            (
                cgroup_ns_inside,
                "a cgroup namespace made inside the job's cgroup",
            ),
            (self.root_steps == RootSteps::Enter, "the job's own root"),
            (
                self.privileges.as_ref().is_some_and(|p| {
                    let sandbox_id = |id: u32| u64::from(id) >= crate::sandbox::uids::MIN_UID;
                    p.groups.is_empty() && sandbox_id(p.uid) && sandbox_id(p.gid)
                }),
                "an unprivileged identity without groups",
            ),
            (self.landlock.is_some(), "landlock"),
            (self.exec_gate == ExecGateStep::HandOver, "the exec gate"),
            (self.seccomp.is_some(), "seccomp"),
            (
                self.fault.is_none()
                    && self.pid_one_pause_ms == 0
                    && self.hand_over_pause_ms == 0
                    && self
                        .omit
                        .iter()
                        .all(|l| matches!(l, Layer::NodePermission | Layer::Preload)),
                "no test hook",
            ),
        ] {
            if !ok {
                short.push(what);
            }
        }
        short
    }

    /// Why the init stage refuses this plan: one short of real use ([`Self::short_of_real_use`])
    /// in a build without the test hooks (`hooks` false). `None`: it runs.
    pub fn refused_without_hooks(&self, hooks: bool) -> Option<String> {
        let short = self.short_of_real_use();
        (!hooks && !short.is_empty()).then(|| {
            format!(
                "the plan lacks {}, which only a test build (feature test-hooks) runs; refusing",
                short.join(", ")
            )
        })
    }
}
