//! Choosing v1 or v2 from what the host view shows, and placing the runner's parents. Pure
//! apart from what the chosen backend's placement does; the filesystem root is injectable
//! so tests run it against a fake tree.

use super::common::{parse_mountinfo, parse_self_cgroup, CgroupMount, HostView};
use super::{v1, v2, CgroupError, CgroupHost, CgroupVersion, Kernel};
use std::sync::Arc;

/// The interface the runner uses on a host with `mounts`: v1 where a v1 hierarchy has the
/// memory or pids controller (a hybrid host's limits live there), else v2 where a cgroup2
/// filesystem is mounted; nothing when neither can hold a job's limits. Pure: the tests
/// that expect one version's behaviour ask it too.
pub fn version_for(mounts: &[CgroupMount]) -> Option<CgroupVersion> {
    let v1_has = |c: &str| mounts.iter().any(|m| m.has_controller(c));
    if v1_has("memory") || v1_has("pids") {
        Some(CgroupVersion::V1)
    } else if mounts.iter().any(|m| m.v2) {
        Some(CgroupVersion::V2)
    } else {
        None
    }
}

/// Choose the backend, place the runner's parents and build the host.
pub(crate) fn detect_at(
    view: &HostView<'_>,
    kernel: Arc<dyn Kernel>,
) -> Result<CgroupHost, CgroupError> {
    let mounts = parse_mountinfo(view.mountinfo);
    let self_cgroup = parse_self_cgroup(view.self_cgroup);
    let v1_mounts: Vec<&CgroupMount> = mounts.iter().filter(|m| !m.v2).collect();
    let v2_mount = mounts.iter().find(|m| m.v2);

    let backend: Arc<dyn super::Backend> = match (version_for(&mounts), v2_mount) {
        (Some(CgroupVersion::V1), _) => Arc::new(v1::place(
            view,
            &v1_mounts,
            v2_mount,
            &self_cgroup,
            kernel.as_ref(),
        )?),
        (Some(CgroupVersion::V2), Some(mount)) => {
            Arc::new(v2::place(view, mount, &self_cgroup, kernel.as_ref())?)
        }
        _ if !v1_mounts.is_empty() => {
            return Err(CgroupError::MissingController {
                controller: "memory",
                detail: "cgroup v1 hierarchies are mounted but none has the memory controller, \
                     and no cgroup2 filesystem is mounted"
                    .to_owned(),
                fix: v1::mount_fix("memory"),
            })
        }
        _ => return Err(CgroupError::NoCgroupFs),
    };
    tracing::debug!(describe = ?backend.describe(), "cgroups detected");
    Ok(CgroupHost::from_parts(backend, kernel))
}
