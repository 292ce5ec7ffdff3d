//! Choosing v1 or v2 from what the host view shows, and placing the runner's parents. Pure
//! apart from what the chosen backend's placement does; the filesystem root is injectable
//! so tests run it against a fake tree.

use super::common::{parse_mountinfo, parse_self_cgroup, CgroupMount, HostView};
use super::{v1, v2, CgroupError, CgroupHost, Kernel};
use std::sync::Arc;

/// Choose the backend, place the runner's parents and build the host.
pub(crate) fn detect_at(
    view: &HostView<'_>,
    kernel: Arc<dyn Kernel>,
) -> Result<CgroupHost, CgroupError> {
    let mounts = parse_mountinfo(view.mountinfo);
    let self_cgroup = parse_self_cgroup(view.self_cgroup);
    let v1_mounts: Vec<&CgroupMount> = mounts.iter().filter(|m| !m.v2).collect();
    let v2_mount = mounts.iter().find(|m| m.v2);
    let v1_has = |c: &str| v1_mounts.iter().any(|m| m.has_controller(c));

    let backend: Arc<dyn super::Backend> = if v1_has("memory") || v1_has("pids") {
        Arc::new(v1::place(
            view,
            &v1_mounts,
            v2_mount,
            &self_cgroup,
            kernel.as_ref(),
        )?)
    } else if let Some(mount) = v2_mount {
        Arc::new(v2::place(view, mount, &self_cgroup, kernel.as_ref())?)
    } else if !v1_mounts.is_empty() {
        return Err(CgroupError::MissingController {
            controller: "memory",
            detail: "cgroup v1 hierarchies are mounted but none has the memory controller, \
                     and no cgroup2 filesystem is mounted"
                .to_owned(),
            fix: v1::mount_fix("memory"),
        });
    } else {
        return Err(CgroupError::NoCgroupFs);
    };
    tracing::debug!(describe = ?backend.describe(), "cgroups detected");
    Ok(CgroupHost::from_parts(backend, kernel))
}
