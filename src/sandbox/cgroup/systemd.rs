//! Where systemd is PID 1 it owns the cgroup tree: a process may create cgroups only below
//! one that systemd delegated to it. A runner started from a login shell or `sudo` sits in a
//! session scope beside other processes, where cgroup v2 allows it no controllers of its
//! own. Like the container runtimes' systemd cgroup driver, the runner then asks systemd
//! over D-Bus for a transient scope that holds only its own process, with `Delegate=yes`,
//! and places its jobs below it. systemd removes the scope once its last process is gone.

use super::CgroupError;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// What placement needs from systemd, behind a trait so the fake tree can stand in.
pub(crate) trait Systemd: std::fmt::Debug {
    /// systemd marked `dir` as delegated (the `trusted.delegate` or `user.delegate`
    /// extended attribute it sets on the cgroup of a unit with `Delegate=yes`).
    fn marks_delegated(&self, dir: &Path) -> bool;
    /// Start a transient scope with `Delegate=yes` holding the runner itself (`pid`, as
    /// the runner sees it, names the scope) and return the scope's unit name and the
    /// cgroup path the process is in once it moved.
    fn start_scope(&self, pid: i32) -> Result<(String, String), CgroupError>;
}

/// systemd is running as the init system: the directory `sd_booted()` checks.
pub(crate) fn booted(fs_root: &Path) -> bool {
    fs_root.join("run/systemd/system").is_dir()
}

/// The real systemd, reached over the system bus. Not over its private socket
/// (`/run/systemd/private`): there systemd names itself as the sender of its messages with a
/// well-known name where the D-Bus specification wants a unique one, and zbus rejects such a
/// message (its connection stops answering). The container runtimes' systemd drivers use the
/// system bus too.
#[derive(Debug)]
pub(crate) struct HostSystemd;

const SYSTEM_BUS_SOCKET: &str = "/run/dbus/system_bus_socket";
/// How long systemd may take to start the scope and move the runner into it.
const MOVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to systemd and its answer may take.
const DBUS_TIMEOUT: Duration = Duration::from_secs(10);

fn dbus_error(detail: String) -> CgroupError {
    CgroupError::Placement {
        detail,
        fix: "run the runner as root with the system bus running (dbus or dbus-broker: it \
              asks systemd over it for a cgroup of its own), or run it as a systemd service \
              with Delegate=yes (packaging/openvibe-skill-runner.service), or configure \
              runner.cgroup_parent"
            .to_owned(),
    }
}

fn connect() -> Result<zbus::blocking::Connection, CgroupError> {
    zbus::blocking::Connection::system().map_err(|err| {
        let socket = if Path::new(SYSTEM_BUS_SOCKET).exists() {
            format!("{SYSTEM_BUS_SOCKET} exists")
        } else {
            format!("{SYSTEM_BUS_SOCKET} does not exist: is dbus running?")
        };
        dbus_error(format!(
            "cannot reach systemd over the system bus ({socket}): {err}"
        ))
    })
}

/// The `0::` path of this process's cgroup.
fn own_v2_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_owned)
}

fn xattr_is_one(dir: &Path, name: &str) -> bool {
    let (Ok(path), Ok(name)) = (CString::new(dir.as_os_str().as_bytes()), CString::new(name))
    else {
        return false;
    };
    let mut value = [0u8; 8];
    // SAFETY: both strings are NUL-terminated and live across the call; the kernel writes
    // at most `value.len()` bytes into `value`, which we own.
    let n = unsafe {
        libc::getxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_mut_ptr().cast(),
            value.len(),
        )
    };
    usize::try_from(n)
        .ok()
        .and_then(|n| value.get(..n))
        .is_some_and(|v| v == b"1")
}

impl Systemd for HostSystemd {
    fn marks_delegated(&self, dir: &Path) -> bool {
        xattr_is_one(dir, "trusted.delegate") || xattr_is_one(dir, "user.delegate")
    }

    fn start_scope(&self, pid: i32) -> Result<(String, String), CgroupError> {
        // D-Bus calls have no deadline of their own: a systemd that does not answer must
        // fail placement (and so every job), never hang the runner.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("systemd-scope".into())
            .spawn(move || {
                let _ = tx.send(start_scope_now(pid));
            })
            .map_err(|e| dbus_error(format!("cannot start a thread to ask systemd: {e}")))?;
        rx.recv_timeout(DBUS_TIMEOUT + MOVE_TIMEOUT)
            .unwrap_or_else(|_| {
                Err(dbus_error(format!(
                    "systemd did not answer the request for a transient scope within {} s",
                    (DBUS_TIMEOUT + MOVE_TIMEOUT).as_secs()
                )))
            })
    }
}

fn start_scope_now(pid: i32) -> Result<(String, String), CgroupError> {
    {
        let conn = connect()?;
        let mut last_error = String::new();
        // A scope of an earlier runner with this pid may linger (a job cgroup that could
        // not be removed keeps it), and runners in containers share pids (each may be
        // pid 1 of its own): after the plain name, a few drawn at random.
        for attempt in 0..4u32 {
            let unit = if attempt == 0 {
                format!("openvibe-skill-runner-{pid}.scope")
            } else {
                format!(
                    "openvibe-skill-runner-{pid}-{:08x}.scope",
                    crate::sandbox::random_u32()
                )
            };
            let description = format!("openvibe-skill-runner (pid {pid}) and its jobs");
            let properties: Vec<(&str, zbus::zvariant::Value<'_>)> = vec![
                ("Description", description.as_str().into()),
                // 0: the sender of this request, as systemd sees it. The runner's own
                // pid is the number in its pid namespace, which in a container is
                // another process's in systemd's (a process the runner did not start).
                ("PIDs", vec![0u32].into()),
                ("Delegate", true.into()),
                ("CollectMode", "inactive-or-failed".into()),
            ];
            let aux: Vec<(&str, Vec<(&str, zbus::zvariant::Value<'_>)>)> = Vec::new();
            let reply = conn.call_method(
                Some("org.freedesktop.systemd1"),
                "/org/freedesktop/systemd1",
                Some("org.freedesktop.systemd1.Manager"),
                "StartTransientUnit",
                &(unit.as_str(), "fail", properties, aux),
            );
            match reply {
                Ok(_) => {
                    let started = Instant::now();
                    loop {
                        if let Some(path) = own_v2_cgroup() {
                            if path.ends_with(&format!("/{unit}")) {
                                return Ok((unit, path));
                            }
                        }
                        if started.elapsed() >= MOVE_TIMEOUT {
                            return Err(dbus_error(format!(
                                "systemd accepted the transient scope {unit} but did not \
                                 move the runner into it within {} s",
                                MOVE_TIMEOUT.as_secs()
                            )));
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                Err(zbus::Error::MethodError(name, message, _))
                    if name.as_str() == "org.freedesktop.systemd1.UnitExists" =>
                {
                    last_error = format!("{unit} exists: {}", message.unwrap_or_default());
                }
                Err(err) => {
                    return Err(dbus_error(format!(
                        "systemd refused a transient scope {unit} with Delegate=yes for the \
                         runner: {err}"
                    )))
                }
            }
        }
        Err(dbus_error(format!(
            "no free name for the runner's transient scope ({last_error})"
        )))
    }
}
