//! Detection, placement, limits and stats against a fake cgroup tree in a tempdir: no root,
//! no real cgroup touched. `FakeKernel` plays the kernel's part (interface files appear on
//! mkdir, cgroup.procs moves a pid, subtree_control checks what is offered, rmdir refuses
//! a populated cgroup) and never signals anything.

use super::common::{parse_mountinfo, parse_self_cgroup, HostView};
use super::detect::detect_at;
use super::systemd::Systemd;
use super::*;
use std::collections::BTreeSet;
use std::sync::Mutex;

// ---- the fake kernel ------------------------------------------------------------------

#[derive(Debug)]
struct FakeKernel {
    /// `<tempdir>/sys/fs/cgroup`.
    cgroup_root: PathBuf,
    /// The cgroup2 mount, when the fake host is v2.
    v2_mount: Option<PathBuf>,
    swap_accounting: bool,
    /// What `swap_in_use` answers: the host's own /proc/swaps never decides a test.
    swapping: std::sync::atomic::AtomicBool,
    writes: Mutex<Vec<(PathBuf, String)>>,
    killed: Mutex<Vec<i32>>,
    /// The thread of each kill and each rmdir: blocking work must not run on an async
    /// worker.
    threads: Mutex<Vec<std::thread::ThreadId>>,
    /// A killed process leaves its cgroup only this long after the first SIGKILL, as a
    /// process that takes long to be scheduled on a loaded host does (`None`: at once).
    slow_death: Mutex<Option<(Duration, Option<std::time::Instant>)>>,
    /// A process that joins the first job cgroup rmdir is asked for, just before (one an
    /// init stage forked into it after the kill's sweep): the rmdir finds it busy.
    joins_before_rmdir: Mutex<Option<i32>>,
}

fn os_err(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

impl FakeKernel {
    fn is_v2(&self, path: &Path) -> bool {
        self.v2_mount.as_ref().is_some_and(|m| path.starts_with(m))
    }

    /// The root of the hierarchy `path` is in.
    fn hierarchy_root(&self, path: &Path) -> PathBuf {
        if let Some(mount) = self.v2_mount.as_ref().filter(|m| path.starts_with(m)) {
            return mount.clone();
        }
        let rest = path.strip_prefix(&self.cgroup_root).unwrap_or(path);
        match rest.components().next() {
            Some(first) => self.cgroup_root.join(first),
            None => self.cgroup_root.clone(),
        }
    }

    fn populate(&self, dir: &Path) -> io::Result<()> {
        let mut files: Vec<(&str, String)> = vec![("cgroup.procs", String::new())];
        if self.is_v2(dir) {
            let parent_control = dir
                .parent()
                .map(|p| fs::read_to_string(p.join("cgroup.subtree_control")).unwrap_or_default())
                .unwrap_or_default();
            let offered: Vec<&str> = parent_control.split_whitespace().collect();
            files.push(("cgroup.controllers", offered.join(" ")));
            files.push(("cgroup.subtree_control", String::new()));
            files.push(("cgroup.events", "populated 0\nfrozen 0\n".into()));
            files.push(("cgroup.freeze", "0".into()));
            files.push(("cgroup.kill", String::new()));
            files.push((
                "cpu.stat",
                "usage_usec 0\nuser_usec 0\nsystem_usec 0\n".into(),
            ));
            if offered.contains(&"memory") {
                files.push(("memory.max", "max".into()));
                files.push(("memory.current", "0".into()));
                files.push(("memory.peak", "0".into()));
                files.push((
                    "memory.events",
                    "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n".into(),
                ));
                files.push(("memory.oom.group", "0".into()));
                if self.swap_accounting {
                    files.push(("memory.swap.max", "max".into()));
                }
            }
            if offered.contains(&"pids") {
                files.push(("pids.max", "max".into()));
                files.push(("pids.events", "max 0\n".into()));
            }
        } else {
            let hierarchy = self.hierarchy_root(dir);
            let name = hierarchy
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            files.push(("tasks", String::new()));
            for controller in name.split(',') {
                match controller {
                    "memory" => {
                        files.push(("memory.limit_in_bytes", "9223372036854771712".into()));
                        files.push(("memory.max_usage_in_bytes", "0".into()));
                        files.push(("memory.usage_in_bytes", "0".into()));
                        files.push(("memory.failcnt", "0".into()));
                        files.push((
                            "memory.oom_control",
                            "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n".into(),
                        ));
                        files.push(("memory.swappiness", "60".into()));
                        if self.swap_accounting {
                            files.push((
                                "memory.memsw.limit_in_bytes",
                                "9223372036854771712".into(),
                            ));
                            files.push(("memory.memsw.failcnt", "0".into()));
                        }
                    }
                    "pids" => {
                        files.push(("pids.max", "max".into()));
                        files.push(("pids.events", "max 0\n".into()));
                    }
                    "cpuacct" => files.push(("cpuacct.usage", "0".into())),
                    "freezer" => files.push(("freezer.state", "THAWED".into())),
                    _ => {}
                }
            }
        }
        for (file, content) in files {
            fs::write(dir.join(file), content)?;
        }
        Ok(())
    }

    /// Every directory below `dir` (itself included).
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        out.push(dir.to_path_buf());
        if let Ok(entries) = fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    Self::walk(&entry.path(), out);
                }
            }
        }
    }

    fn remove_pid_everywhere(&self, hierarchy: &Path, pid: &str) -> io::Result<()> {
        let mut dirs = Vec::new();
        Self::walk(hierarchy, &mut dirs);
        for dir in dirs {
            let procs = dir.join("cgroup.procs");
            if let Ok(text) = fs::read_to_string(&procs) {
                let kept: String = text
                    .lines()
                    .filter(|line| line.trim() != pid)
                    .map(|line| format!("{line}\n"))
                    .collect();
                fs::write(&procs, kept)?;
            }
        }
        Ok(())
    }

    fn written(&self, path: &Path) -> Vec<String> {
        self.writes
            .lock()
            .map(|w| {
                w.iter()
                    .filter(|(p, _)| p == path)
                    .map(|(_, v)| v.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Kernel for FakeKernel {
    fn swap_in_use(&self) -> io::Result<bool> {
        Ok(self.swapping.load(std::sync::atomic::Ordering::SeqCst))
    }

    fn mkdir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)?;
        self.populate(path)
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        if let Ok(mut t) = self.threads.lock() {
            t.push(std::thread::current().id());
        }
        if !path.exists() {
            return Err(os_err(libc::ENOENT));
        }
        let late = self
            .joins_before_rmdir
            .lock()
            .ok()
            .and_then(|mut j| j.take());
        if let Some(pid) = late {
            self.write(&path.join("cgroup.procs"), &pid.to_string())?;
        }
        let has_children = fs::read_dir(path)?
            .flatten()
            .any(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false));
        let populated = !fs::read_to_string(path.join("cgroup.procs"))
            .unwrap_or_default()
            .trim()
            .is_empty();
        if has_children || populated {
            return Err(os_err(libc::EBUSY));
        }
        fs::remove_dir_all(path)
    }

    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        if !path.is_file() {
            return Err(os_err(libc::ENOENT));
        }
        if let Ok(mut writes) = self.writes.lock() {
            writes.push((path.to_path_buf(), value.to_owned()));
        }
        let dir = path.parent().unwrap_or(Path::new("/"));
        match path.file_name().and_then(|n| n.to_str()) {
            Some("cgroup.procs") => {
                let pid = value.trim();
                // v2's no-internal-process rule, from which the root is exempt.
                if self.is_v2(dir)
                    && self.v2_mount.as_deref() != Some(dir)
                    && !fs::read_to_string(dir.join("cgroup.subtree_control"))?
                        .trim()
                        .is_empty()
                {
                    return Err(os_err(libc::EBUSY));
                }
                self.remove_pid_everywhere(&self.hierarchy_root(dir), pid)?;
                let mut text = fs::read_to_string(path)?;
                text.push_str(pid);
                text.push('\n');
                fs::write(path, text)
            }
            Some("cgroup.subtree_control") => {
                let offered = fs::read_to_string(dir.join("cgroup.controllers"))?;
                let offered: Vec<&str> = offered.split_whitespace().collect();
                let current = fs::read_to_string(path)?;
                let mut enabled: Vec<String> =
                    current.split_whitespace().map(str::to_owned).collect();
                let procs = fs::read_to_string(dir.join("cgroup.procs"))?;
                let is_mount_root = self.v2_mount.as_deref() == Some(dir);
                for token in value.split_whitespace() {
                    let (add, name) = match token.split_at(1) {
                        ("+", name) => (true, name),
                        ("-", name) => (false, name),
                        _ => return Err(os_err(libc::EINVAL)),
                    };
                    if !offered.contains(&name) {
                        return Err(os_err(libc::EINVAL));
                    }
                    if add && !is_mount_root && !procs.trim().is_empty() {
                        return Err(os_err(libc::EBUSY));
                    }
                    enabled.retain(|c| c != name);
                    if add {
                        enabled.push(name.to_owned());
                    }
                }
                fs::write(path, enabled.join(" "))
            }
            _ => fs::write(path, value),
        }
    }

    fn kill_listed(&self, pid: i32, procs_files: &[PathBuf]) -> io::Result<()> {
        if let Ok(mut t) = self.threads.lock() {
            t.push(std::thread::current().id());
        }
        if let Ok(mut killed) = self.killed.lock() {
            killed.push(pid);
        }
        if let Ok(mut slow) = self.slow_death.lock() {
            if let Some((delay, first)) = slow.as_mut() {
                let first = *first.get_or_insert_with(std::time::Instant::now);
                if first.elapsed() < *delay {
                    return Ok(());
                }
            }
        }
        for file in procs_files {
            if let Some(dir) = file.parent() {
                self.remove_pid_everywhere(dir, &pid.to_string())?;
            }
        }
        Ok(())
    }
}

// ---- fake hosts -----------------------------------------------------------------------

const OWN_PID: i32 = 4242;

/// This workplace's layout: v1 controllers, a controller-less cgroup2 at unified/.
const HYBRID_MOUNTINFO: &str = "\
25 1 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

const HYBRID_SELF: &str = "\
9:name=systemd:/
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/workload/abc
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
";

const V2_MOUNTINFO: &str = "\
24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
27 24 0:25 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

/// systemd as init: cgroups it marked delegated, and the transient scopes it starts.
#[derive(Debug)]
struct FakeSystemd {
    cgroup_root: PathBuf,
    delegated: Mutex<BTreeSet<PathBuf>>,
    scopes: Mutex<Vec<String>>,
    /// Answer `start_scope` with this error, as an unreachable or refusing systemd would.
    refuse: Option<String>,
}

impl FakeSystemd {
    fn new(cgroup_root: &Path) -> FakeSystemd {
        FakeSystemd {
            cgroup_root: cgroup_root.to_path_buf(),
            delegated: Mutex::new(BTreeSet::new()),
            scopes: Mutex::new(Vec::new()),
            refuse: None,
        }
    }

    fn delegate(&self, dir: &Path) {
        self.delegated
            .lock()
            .expect("lock")
            .insert(dir.to_path_buf());
    }

    fn scopes(&self) -> Vec<String> {
        self.scopes.lock().expect("lock").clone()
    }
}

impl Systemd for FakeSystemd {
    fn marks_delegated(&self, dir: &Path) -> bool {
        self.delegated.lock().expect("lock").contains(dir)
    }

    /// What systemd does: enables every controller down to system.slice, makes the scope,
    /// moves the pid there (out of every other cgroup) and marks it delegated. Written
    /// straight to the tree, not through the runner's kernel, whose writes tests count.
    fn start_scope(&self, pid: i32) -> Result<(String, String), CgroupError> {
        if let Some(why) = &self.refuse {
            return Err(CgroupError::Placement {
                detail: why.clone(),
                fix: "test".to_owned(),
            });
        }
        let unit = format!("openvibe-skill-runner-{pid}.scope");
        let slice = self.cgroup_root.join("system.slice");
        let all = "cpu memory pids";
        fs::write(self.cgroup_root.join("cgroup.subtree_control"), all).expect("root");
        fs::create_dir_all(&slice).expect("slice");
        fs::write(slice.join("cgroup.controllers"), all).expect("slice controllers");
        fs::write(slice.join("cgroup.subtree_control"), all).expect("slice control");
        let scope = slice.join(&unit);
        fs::create_dir_all(&scope).expect("scope");
        fs::write(scope.join("cgroup.controllers"), all).expect("scope controllers");
        fs::write(scope.join("cgroup.subtree_control"), "").expect("scope control");
        let mut dirs = Vec::new();
        FakeKernel::walk(&self.cgroup_root, &mut dirs);
        for dir in dirs {
            if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
                let kept: String = parse_pids(&text)
                    .into_iter()
                    .filter(|p| *p != pid)
                    .map(|p| format!("{p}\n"))
                    .collect();
                fs::write(dir.join("cgroup.procs"), kept).expect("procs");
            }
        }
        fs::write(scope.join("cgroup.procs"), format!("{pid}\n")).expect("move");
        self.delegate(&scope);
        self.scopes.lock().expect("lock").push(unit.clone());
        Ok((unit.clone(), format!("/system.slice/{unit}")))
    }
}

struct FakeHost {
    dir: tempfile::TempDir,
    kernel: Arc<FakeKernel>,
    mountinfo: String,
    self_cgroup: String,
    systemd: Option<FakeSystemd>,
}

impl FakeHost {
    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn cg(&self, rel: &str) -> PathBuf {
        self.root().join("sys/fs/cgroup").join(rel)
    }

    fn detect(&self, parent_override: Option<&Path>) -> Result<CgroupHost, CgroupError> {
        let kernel: Arc<dyn Kernel> = self.kernel.clone();
        detect_at(
            &HostView {
                mountinfo: &self.mountinfo,
                self_cgroup: &self.self_cgroup,
                fs_root: self.root(),
                self_pid: OWN_PID,
                parent_override,
                systemd: self.systemd.as_ref().map(|s| s as &dyn Systemd),
            },
            kernel,
        )
    }

    fn new(mountinfo: &str, self_cgroup: &str, v2: bool, swap_accounting: bool) -> FakeHost {
        let dir = tempfile::tempdir().expect("tempdir");
        let cgroup_root = dir.path().join("sys/fs/cgroup");
        fs::create_dir_all(&cgroup_root).expect("mkdir");
        let kernel = Arc::new(FakeKernel {
            v2_mount: v2.then(|| cgroup_root.clone()),
            cgroup_root,
            swap_accounting,
            swapping: std::sync::atomic::AtomicBool::new(false),
            writes: Mutex::new(Vec::new()),
            killed: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
            slow_death: Mutex::new(None),
            joins_before_rmdir: Mutex::new(None),
        });
        FakeHost {
            dir,
            kernel,
            mountinfo: mountinfo.to_owned(),
            self_cgroup: self_cgroup.to_owned(),
            systemd: None,
        }
    }

    /// The hybrid workplace: every v1 hierarchy with its root files, and our own memory
    /// cgroup (made by the workplace, not by us) holding our pid.
    fn hybrid(swap_accounting: bool) -> FakeHost {
        Self::hybrid_with(HYBRID_MOUNTINFO, swap_accounting)
    }

    fn hybrid_with(mountinfo: &str, swap_accounting: bool) -> FakeHost {
        let host = FakeHost::new(mountinfo, HYBRID_SELF, false, swap_accounting);
        for mount in parse_mountinfo(mountinfo) {
            let dir = mount.dir(host.root());
            fs::create_dir_all(&dir).expect("mkdir hierarchy");
            if mount.v2 {
                fs::write(dir.join("cgroup.controllers"), "hugetlb").expect("write");
                fs::write(dir.join("cgroup.subtree_control"), "").expect("write");
                fs::write(dir.join("cgroup.procs"), "1\n").expect("write");
            } else {
                host.kernel.populate(&dir).expect("populate");
            }
        }
        let memory = host.cg("memory");
        if memory.exists() {
            let own = memory.join("workload/abc");
            fs::create_dir_all(&own).expect("mkdir own");
            host.kernel.populate(&own).expect("populate own");
            fs::write(own.join("cgroup.procs"), format!("{OWN_PID}\n")).expect("write");
        }
        host
    }

    /// Pure v2; the root offers `offered` and enables `enabled` for its children.
    fn v2(self_cgroup: &str, offered: &str, enabled: &str) -> FakeHost {
        Self::v2_swap(self_cgroup, offered, enabled, true)
    }

    /// As `v2`, with or without swap accounting (`memory.swap.max`).
    fn v2_swap(self_cgroup: &str, offered: &str, enabled: &str, swap_accounting: bool) -> FakeHost {
        let host = FakeHost::new(V2_MOUNTINFO, self_cgroup, true, swap_accounting);
        let root = host.cg("");
        fs::write(root.join("cgroup.controllers"), offered).expect("write");
        fs::write(root.join("cgroup.subtree_control"), enabled).expect("write");
        fs::write(root.join("cgroup.procs"), "1\n").expect("write");
        host
    }

    /// Pure v2 with the runner in `/system.slice/ov.service`, which offers `offered`
    /// and holds `procs`.
    fn v2_delegated(offered: &str, procs: &str) -> FakeHost {
        let host = Self::v2(
            "0::/system.slice/ov.service\n",
            "cpuset cpu io memory hugetlb pids rdma misc",
            "cpu memory pids",
        );
        let slice = host.cg("system.slice");
        host.kernel.mkdir(&slice).expect("mkdir slice");
        fs::write(slice.join("cgroup.subtree_control"), offered).expect("write");
        let service = slice.join("ov.service");
        host.kernel.mkdir(&service).expect("mkdir service");
        fs::write(service.join("cgroup.procs"), procs).expect("write");
        host.kernel.writes.lock().expect("lock").clear();
        host
    }
}

impl FakeHost {
    /// Pure v2 as a login shell or `sudo` sees it: the runner in a session scope beside a
    /// shell (pid 777); the root enables memory and pids for its children.
    fn v2_session() -> FakeHost {
        let host = Self::v2(
            "0::/user.slice/user-0.slice/session-1.scope\n",
            "cpuset cpu io memory hugetlb pids rdma misc",
            "cpu memory pids",
        );
        let scope = host.cg("user.slice/user-0.slice/session-1.scope");
        fs::create_dir_all(&scope).expect("mkdir scope");
        for dir in [
            host.cg("user.slice"),
            host.cg("user.slice/user-0.slice"),
            scope.clone(),
        ] {
            fs::write(dir.join("cgroup.controllers"), "cpu memory pids").expect("write");
            fs::write(dir.join("cgroup.subtree_control"), "").expect("write");
            fs::write(dir.join("cgroup.procs"), "").expect("write");
        }
        fs::write(scope.join("cgroup.procs"), format!("777\n{OWN_PID}\n")).expect("write");
        host
    }

    fn with_systemd(mut self) -> FakeHost {
        self.systemd = Some(FakeSystemd::new(&self.cg("")));
        self
    }

    fn systemd(&self) -> &FakeSystemd {
        self.systemd.as_ref().expect("a fake systemd")
    }
}

fn read(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .trim()
        .to_owned()
}

fn described(host: &CgroupHost, key: &str) -> String {
    host.describe()
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("describe has no {key:?}: {:?}", host.describe()))
}

fn limits(mem_bytes: u64, pids_max: u64) -> CgroupLimits {
    CgroupLimits {
        mem_bytes,
        pids_max,
    }
}

const MIB: u64 = 1024 * 1024;

// ---- parsing --------------------------------------------------------------------------

#[test]
fn mountinfo_keeps_only_cgroup_mounts_with_their_controllers() {
    let mounts = parse_mountinfo(HYBRID_MOUNTINFO);
    assert_eq!(mounts.len(), 10, "{mounts:?}");
    let memory = mounts
        .iter()
        .find(|m| m.has_controller("memory"))
        .expect("memory");
    assert_eq!(memory.mountpoint, Path::new("/sys/fs/cgroup/memory"));
    assert_eq!(memory.root, "/");
    assert!(!memory.has_controller("rw") || memory.options.contains(&"rw".to_owned()));
    let unified: Vec<_> = mounts.iter().filter(|m| m.v2).collect();
    assert_eq!(unified.len(), 1);
    assert_eq!(unified[0].mountpoint, Path::new("/sys/fs/cgroup/unified"));
    assert!(
        !unified[0].has_controller("memory"),
        "v2 mounts carry no v1 controllers"
    );
    let systemd = mounts
        .iter()
        .find(|m| m.mountpoint.ends_with("systemd"))
        .expect("systemd");
    assert!(systemd.has_controller("name=systemd") && !systemd.has_controller("memory"));
}

#[test]
fn mountinfo_handles_optional_fields_escapes_and_subtree_roots() {
    let text = "\
50 31 0:40 /docker/abc /sys/fs/cgroup/my\\040memory rw shared:5 master:1 - cgroup cgroup rw,memory,nosuid
51 31 0:41 / /weird rw - ext4 /dev/sda1 rw
52 31 0:42 / /bad
";
    let mounts = parse_mountinfo(text);
    assert_eq!(mounts.len(), 1, "{mounts:?}");
    let m = &mounts[0];
    assert_eq!(m.mountpoint, Path::new("/sys/fs/cgroup/my memory"));
    assert_eq!(m.root, "/docker/abc");
    assert!(m.has_controller("memory"));
    let root = Path::new("/fake");
    assert_eq!(
        m.dir_of_cgroup(root, "/docker/abc/x"),
        Some(PathBuf::from("/fake/sys/fs/cgroup/my memory/x"))
    );
    assert_eq!(
        m.dir_of_cgroup(root, "/docker/abc"),
        Some(PathBuf::from("/fake/sys/fs/cgroup/my memory/"))
    );
    assert_eq!(
        m.dir_of_cgroup(root, "/docker/abcd"),
        None,
        "prefix must end at a component"
    );
    assert_eq!(m.dir_of_cgroup(root, "/other"), None);
    assert_eq!(
        m.dir_of_cgroup(root, "/docker/abc/../x"),
        None,
        "no .. ever"
    );
}

#[test]
fn self_cgroup_lists_v1_hierarchies_and_the_v2_path() {
    let parsed = parse_self_cgroup("5:cpu,cpuacct:/a:b\n4:memory:/m\n1:name=systemd:/s\n0::/u\n");
    assert_eq!(parsed.v2.as_deref(), Some("/u"));
    assert_eq!(
        parsed.v1_path("cpuacct"),
        Some("/a:b"),
        "a ':' in a path is kept"
    );
    assert_eq!(parsed.v1_path("cpu"), Some("/a:b"));
    assert_eq!(parsed.v1_path("memory"), Some("/m"));
    assert_eq!(parsed.v1_path("pids"), None);
    let hybrid = parse_self_cgroup(HYBRID_SELF);
    assert_eq!(hybrid.v1_path("memory"), Some("/workload/abc"));
    assert_eq!(hybrid.v2.as_deref(), Some("/"));
}

#[test]
fn flat_keyed_files_parse_every_format() {
    let memory_events = "low 0\nhigh 2\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n";
    assert_eq!(keyed_value(memory_events, "max"), Some(7));
    assert_eq!(keyed_value(memory_events, "oom"), Some(1));
    assert_eq!(keyed_value(memory_events, "oom_kill"), Some(1));
    assert_eq!(keyed_value("max 3\n", "max"), Some(3));
    assert_eq!(
        keyed_value("max.imposed 3\n", "max"),
        None,
        "keys match whole"
    );
    let cpu_stat = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n";
    assert_eq!(keyed_value(cpu_stat, "usage_usec"), Some(1500));
    let oom_control = "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n";
    assert_eq!(keyed_value(oom_control, "oom_kill"), Some(4));
    assert_eq!(keyed_value(oom_control, "missing"), None);
    assert_eq!(keyed_value("max garbage\n", "max"), None);
    assert_eq!(parse_pids("12\n\n 13 \nx\n-1\n0\n"), vec![12, 13]);
}

// ---- detection and placement ----------------------------------------------------------

#[test]
fn hybrid_host_uses_v1_under_the_runners_own_cgroups() {
    let fake = FakeHost::hybrid(true);
    let host = fake.detect(None).expect("detect");
    assert_eq!(host.version(), CgroupVersion::V1);
    let memory_parent = fake.cg("memory/workload/abc/openvibe-skill-runner");
    let pids_parent = fake.cg("pids/openvibe-skill-runner");
    let cpuacct_parent = fake.cg("cpuacct/openvibe-skill-runner");
    let freezer_parent = fake.cg("freezer/openvibe-skill-runner");
    for dir in [
        &memory_parent,
        &pids_parent,
        &cpuacct_parent,
        &freezer_parent,
    ] {
        assert!(dir.is_dir(), "{} created", dir.display());
    }
    assert_eq!(described(&host, "version"), "v1");
    assert_eq!(
        described(&host, "memory"),
        memory_parent.display().to_string()
    );
    assert_eq!(described(&host, "pids"), pids_parent.display().to_string());
    assert_eq!(
        described(&host, "cpuacct"),
        cpuacct_parent.display().to_string()
    );
    assert!(described(&host, "layout").starts_with("hybrid"));
    assert!(described(&host, "swap accounting").starts_with("yes"));
    // Nothing outside our parents was written or created.
    assert!(fake.kernel.writes.lock().expect("lock").is_empty());
    assert!(
        !fake.cg("cpu/openvibe-skill-runner").exists(),
        "cpu is not used"
    );
    assert!(!fake.cg("unified/openvibe-skill-runner").exists());
    // A second detection (restart) reuses the parents.
    fake.detect(None).expect("detect again");
}

#[test]
fn v1_without_swap_accounting_says_so() {
    let fake = FakeHost::hybrid(false);
    let host = fake.detect(None).expect("detect");
    assert!(described(&host, "swap accounting").starts_with("no"));
}

#[test]
fn v1_missing_pids_is_an_error_naming_it_and_creates_nothing() {
    let mountinfo: String = HYBRID_MOUNTINFO
        .lines()
        .filter(|l| !l.ends_with("rw,pids"))
        .map(|l| format!("{l}\n"))
        .collect();
    let fake = FakeHost::hybrid_with(&mountinfo, true);
    let err = fake.detect(None).expect_err("must fail closed");
    let CgroupError::MissingController { controller, .. } = &err else {
        panic!("wrong error: {err}");
    };
    assert_eq!(*controller, "pids");
    let message = err.to_string();
    assert!(message.contains("mount -t cgroup -o pids"), "{message}");
    assert!(
        message.contains("cgroup2 mount at /sys/fs/cgroup/unified"),
        "{message}"
    );
    assert!(!fake
        .cg("memory/workload/abc/openvibe-skill-runner")
        .exists());
}

#[test]
fn v1_missing_memory_is_an_error_naming_it() {
    let mountinfo: String = HYBRID_MOUNTINFO
        .lines()
        .filter(|l| !l.ends_with("rw,memory"))
        .map(|l| format!("{l}\n"))
        .collect();
    let fake = FakeHost::hybrid_with(&mountinfo, true);
    let err = fake.detect(None).expect_err("must fail closed");
    assert!(
        matches!(
            err,
            CgroupError::MissingController {
                controller: "memory",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn v1_co_mounted_cpu_cpuacct_is_one_hierarchy() {
    let mountinfo = "\
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
";
    let mut fake = FakeHost::hybrid_with(mountinfo, true);
    fake.self_cgroup = "4:memory:/workload/abc\n3:pids:/\n2:cpu,cpuacct:/a\n".into();
    fs::create_dir_all(fake.cg("cpu,cpuacct/a")).expect("mkdir");
    let host = fake.detect(None).expect("detect");
    assert_eq!(
        described(&host, "cpuacct"),
        fake.cg("cpu,cpuacct/a/openvibe-skill-runner")
            .display()
            .to_string()
    );
    assert!(described(&host, "freezer").starts_with("not mounted"));
    let job = host.create_job("j", &limits(64 * MIB, 16)).expect("job");
    assert_eq!(job.paths().len(), 3, "{:?}", job.paths());
    assert!(fake
        .cg("cpu,cpuacct/a/openvibe-skill-runner/j/cpuacct.usage")
        .exists());
    // v1: the init stage joins by writing each hierarchy's `tasks`.
    assert_eq!(
        job.join(),
        crate::plan::CgroupJoin::Write {
            files: job.paths().iter().map(|d| d.join("tasks")).collect()
        }
    );
}

#[test]
fn pure_v2_in_the_root_cgroup_creates_the_parent_below_the_root() {
    let fake = FakeHost::v2(
        "0::/\n",
        "cpuset cpu io memory hugetlb pids",
        "cpu memory pids",
    );
    let host = fake.detect(None).expect("detect");
    assert_eq!(host.version(), CgroupVersion::V2);
    let parent = fake.cg("openvibe-skill-runner");
    let jobs = parent.join("jobs");
    assert_eq!(described(&host, "parent"), jobs.display().to_string());
    assert_eq!(described(&host, "controllers"), "memory pids cpu");
    assert!(described(&host, "placement").starts_with("own cgroup below the root"));
    for dir in [&parent, &jobs] {
        let control: BTreeSet<String> = read(&dir.join("cgroup.subtree_control"))
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        assert_eq!(
            control,
            ["cpu", "memory", "pids"].map(str::to_owned).into(),
            "enabled in {}, which we created",
            dir.display()
        );
    }
    // The root already enables what jobs need: it is not written; the runner stays put.
    let writes = fake.kernel.writes.lock().expect("lock").clone();
    assert!(
        writes.iter().all(|(p, _)| p.starts_with(&parent)),
        "{writes:?}"
    );
    assert!(!writes.iter().any(|(p, _)| p.ends_with("cgroup.procs")));
}

impl FakeHost {
    /// Pure v2 in a container with a cgroup namespace of its own: the runner sees itself in
    /// `/`, which is an ordinary cgroup (it has `cgroup.type`) holding `procs`, with no
    /// controller enabled for its children yet.
    fn v2_container(procs: &str) -> FakeHost {
        let host = Self::v2("0::/\n", "cpu io memory pids", "");
        let root = host.cg("");
        fs::write(root.join("cgroup.type"), "domain\n").expect("write");
        fs::write(root.join("cgroup.procs"), procs).expect("write");
        host
    }
}

/// A container with a cgroup namespace of its own and the host's cgroup2 mount bound in:
/// the runner sees itself in `/`, and the mount's root is above its namespace (`/../..`).
/// The mount's top is the host's root cgroup, not the runner's: refused, nothing written.
#[test]
fn pure_v2_mount_from_outside_the_cgroup_namespace_is_refused_untouched() {
    let mountinfo = "\
24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
27 24 0:25 /../.. /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
";
    let fake = FakeHost::new(mountinfo, "0::/\n", true, true);
    let root = fake.cg("");
    fs::write(root.join("cgroup.controllers"), "cpu io memory pids").expect("write");
    fs::write(root.join("cgroup.subtree_control"), "cpu memory pids").expect("write");
    fs::write(root.join("cgroup.procs"), "1\n").expect("write");
    let err = fake.detect(None).expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("/../..") && text.contains("mount -t cgroup2"),
        "{text}"
    );
    assert!(
        fake.kernel.writes.lock().expect("lock").is_empty(),
        "nothing written"
    );
    assert!(!fake.cg("openvibe-skill-runner").exists());
}

#[test]
fn pure_v2_in_a_containers_own_root_cgroup_moves_only_the_runner_into_supervisor() {
    let fake = FakeHost::v2_container(&format!("{OWN_PID}\n"));
    let host = fake.detect(None).expect("detect");
    let root = fake.cg("");
    let jobs = root.join("jobs");
    assert_eq!(described(&host, "parent"), jobs.display().to_string());
    assert!(
        described(&host, "placement").starts_with("delegated"),
        "{}",
        described(&host, "placement")
    );
    // The runner left the root first: only then may its children use controllers.
    let writes = fake.kernel.writes.lock().expect("lock").clone();
    let moved = writes
        .iter()
        .position(|(p, v)| p == &root.join("supervisor/cgroup.procs") && *v == OWN_PID.to_string());
    let enabled = writes
        .iter()
        .position(|(p, _)| p == &root.join("cgroup.subtree_control"));
    assert!(
        matches!((moved, enabled), (Some(m), Some(e)) if m < e),
        "{writes:?}"
    );
    let control = read(&root.join("cgroup.subtree_control"));
    assert!(
        control.contains("memory") && control.contains("pids"),
        "{control}"
    );
    assert!(
        !fake.cg("openvibe-skill-runner").exists(),
        "nothing below a root it cannot use as the host's"
    );
}

#[test]
fn pure_v2_in_a_containers_own_root_cgroup_shared_with_others_is_refused_with_the_fix() {
    let fake = FakeHost::v2_container(&format!("1\n{OWN_PID}\n"));
    let err = fake.detect(None).expect_err("must fail closed");
    match &err {
        CgroupError::Placement { detail, fix } => {
            assert!(
                detail.contains("cgroup namespace") && detail.contains("[1]"),
                "{detail}"
            );
            assert!(fix.contains("runner.cgroup_parent"), "{fix}");
        }
        other => panic!("{other:?}"),
    }
    let writes = fake.kernel.writes.lock().expect("lock").clone();
    assert!(writes.is_empty(), "nothing moved or enabled: {writes:?}");
}

#[test]
fn pure_v2_root_without_controllers_for_children_gets_them_without_systemd() {
    let fake = FakeHost::v2("0::/\n", "cpu memory pids", "");
    let host = fake.detect(None).expect("detect");
    assert_eq!(
        fake.kernel.written(&fake.cg("cgroup.subtree_control")),
        vec!["+memory +pids".to_owned()],
        "only what jobs need, only added"
    );
    let job = host.create_job("j", &limits(16 * MIB, 4)).expect("job");
    assert_eq!(job.paths(), [fake.cg("openvibe-skill-runner/jobs/j")]);
    assert_eq!(read(&job.paths()[0].join("pids.max")), "4");
    // v2: pid 1 is made in the job's one folder.
    assert_eq!(
        job.join(),
        crate::plan::CgroupJoin::CloneInto {
            dir: fake.cg("openvibe-skill-runner/jobs/j")
        }
    );
}

#[test]
fn pure_v2_root_without_pids_under_systemd_is_an_error_naming_the_fix() {
    let fake = FakeHost::v2("0::/\n", "cpu memory pids", "cpu memory").with_systemd();
    let err = fake.detect(None).expect_err("must fail closed");
    assert!(
        matches!(
            err,
            CgroupError::MissingController {
                controller: "pids",
                ..
            }
        ),
        "{err}"
    );
    let message = err.to_string();
    assert!(message.contains("DefaultTasksAccounting"), "{message}");
    assert!(fake.kernel.writes.lock().expect("lock").is_empty());
    assert!(
        !fake.cg("openvibe-skill-runner").exists(),
        "nothing created"
    );
}

#[test]
fn pure_v2_kernel_without_pids_is_an_error() {
    let fake = FakeHost::v2("0::/\n", "cpu memory", "cpu memory");
    let err = fake.detect(None).expect_err("must fail closed");
    assert!(
        err.to_string().contains("offers no pids controller"),
        "{err}"
    );
    assert!(!fake.cg("openvibe-skill-runner").exists());
}

#[test]
fn v2_without_controllers_is_an_error() {
    // A hybrid host whose v1 side lacks memory and pids: the controller-less cgroup2
    // mount cannot stand in.
    let mountinfo = "\
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    let fake = FakeHost::hybrid_with(mountinfo, true);
    let err = fake.detect(None).expect_err("must fail closed");
    assert!(
        matches!(
            err,
            CgroupError::MissingController {
                controller: "memory",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("offers no memory controller"),
        "{err}"
    );
}

#[test]
fn no_cgroup_mount_at_all_is_an_error() {
    let fake = FakeHost::new("25 1 0:23 / /sys rw - sysfs sysfs rw\n", "", false, false);
    let err = fake.detect(None).expect_err("must fail");
    assert!(matches!(err, CgroupError::NoCgroupFs), "{err}");
}

#[test]
fn v2_delegated_moves_only_the_runner_into_supervisor() {
    let fake = FakeHost::v2_delegated("cpu memory pids", &format!("{OWN_PID}\n"));
    let host = fake.detect(None).expect("detect");
    let service = fake.cg("system.slice/ov.service");
    let jobs = service.join("jobs");
    assert_eq!(described(&host, "parent"), jobs.display().to_string());
    assert!(described(&host, "placement").starts_with("delegated"));
    assert_eq!(
        read(&service.join("supervisor/cgroup.procs")),
        OWN_PID.to_string()
    );
    assert_eq!(read(&service.join("cgroup.procs")), "");
    assert_eq!(
        fake.kernel
            .written(&service.join("supervisor/cgroup.procs")),
        vec![OWN_PID.to_string()],
        "the runner moved itself and nothing else"
    );
    for dir in [&service, &jobs] {
        let control = read(&dir.join("cgroup.subtree_control"));
        assert!(
            control.contains("memory") && control.contains("pids"),
            "{}: {control}",
            dir.display()
        );
    }
    let job = host.create_job("j1", &limits(64 * MIB, 32)).expect("job");
    assert_eq!(job.paths(), [jobs.join("j1")]);
    assert_eq!(read(&jobs.join("j1/memory.max")), (64 * MIB).to_string());
}

#[test]
fn v2_delegated_second_detection_stays_in_supervisor() {
    let mut fake = FakeHost::v2_delegated("cpu memory pids", &format!("{OWN_PID}\n"));
    fake.detect(None).expect("first detect");
    // What /proc/self/cgroup says once the runner has moved itself.
    fake.self_cgroup = "0::/system.slice/ov.service/supervisor\n".into();
    fake.kernel.writes.lock().expect("lock").clear();
    let host = fake.detect(None).expect("second detect");
    let service = fake.cg("system.slice/ov.service");
    assert_eq!(
        described(&host, "parent"),
        service.join("jobs").display().to_string()
    );
    let writes = fake.kernel.writes.lock().expect("lock").clone();
    assert!(writes.is_empty(), "nothing moved or re-enabled: {writes:?}");
}

#[test]
fn v2_login_session_without_systemd_moves_only_the_runner_below_the_root() {
    let fake = FakeHost::v2_session();
    let host = fake.detect(None).expect("detect");
    let parent = fake.cg("openvibe-skill-runner");
    let leaf = parent.join(format!("supervisor-{OWN_PID}"));
    assert_eq!(
        described(&host, "parent"),
        parent.join("jobs").display().to_string()
    );
    let placement = described(&host, "placement");
    assert!(
        placement.starts_with("own cgroup below the root")
            && placement.contains(&format!("supervisor-{OWN_PID}")),
        "{placement}"
    );
    assert_eq!(read(&leaf.join("cgroup.procs")), OWN_PID.to_string());
    let session = fake.cg("user.slice/user-0.slice/session-1.scope");
    assert_eq!(
        read(&session.join("cgroup.procs")),
        "777",
        "the shell stays where it was"
    );
    let writes = fake.kernel.writes.lock().expect("lock").clone();
    assert!(
        writes.iter().all(|(p, _)| p.starts_with(&parent)),
        "only our own cgroups are written: {writes:?}"
    );
    let job = host.create_job("j", &limits(16 * MIB, 4)).expect("job");
    assert_eq!(job.paths(), [parent.join("jobs/j")]);
}

#[test]
fn v2_below_the_root_the_runner_goes_back_and_removes_its_leaf_at_exit() {
    let fake = FakeHost::v2_session();
    let host = fake.detect(None).expect("detect");
    let session = fake.cg("user.slice/user-0.slice/session-1.scope");
    let parent = fake.cg("openvibe-skill-runner");
    let leaf = parent.join(format!("supervisor-{OWN_PID}"));
    let recorded = host.backend.runner_leaf().expect("the runner moved itself");
    assert_eq!(recorded.leaf, leaf);
    assert_eq!(recorded.origin, session);
    super::v2::leave(fake.kernel.as_ref(), &recorded, OWN_PID).expect("leave");
    assert!(!leaf.exists(), "the runner's own leaf is removed");
    assert_eq!(
        read(&session.join("cgroup.procs"))
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["777", &OWN_PID.to_string()],
        "the runner is back where it came from, beside the shell"
    );
    assert!(parent.join("jobs").exists(), "the shared jobs parent stays");
    // The session gone meanwhile: the runner goes to the root cgroup instead.
    let host = fake.detect(None).expect("detect again");
    let recorded = host.backend.runner_leaf().expect("moved again");
    fs::remove_dir_all(&session).expect("session ends");
    super::v2::leave(fake.kernel.as_ref(), &recorded, OWN_PID).expect("leave");
    assert!(!recorded.leaf.exists());
    assert!(read(&fake.cg("").join("cgroup.procs"))
        .split_whitespace()
        .any(|p| p == OWN_PID.to_string()));
}

#[test]
fn v2_delegated_and_configured_placements_record_no_leaf_to_leave() {
    let fake = FakeHost::v2_delegated("cpu memory pids", &format!("{OWN_PID}\n"));
    let host = fake.detect(None).expect("detect");
    assert_eq!(host.backend.runner_leaf(), None);
}

#[test]
fn v2_below_the_root_a_second_detection_moves_nothing() {
    let mut fake = FakeHost::v2_session();
    fake.detect(None).expect("first detect");
    fake.self_cgroup = format!("0::/openvibe-skill-runner/supervisor-{OWN_PID}\n");
    fake.kernel.writes.lock().expect("lock").clear();
    let host = fake.detect(None).expect("second detect");
    assert_eq!(
        described(&host, "parent"),
        fake.cg("openvibe-skill-runner/jobs").display().to_string()
    );
    let writes = fake.kernel.writes.lock().expect("lock").clone();
    assert!(writes.is_empty(), "nothing moved or re-enabled: {writes:?}");
}

#[test]
fn v2_below_the_root_removes_empty_leaves_of_runners_gone_and_keeps_busy_ones() {
    let fake = FakeHost::v2_session();
    let parent = fake.cg("openvibe-skill-runner");
    fake.kernel.mkdir(&parent).expect("parent");
    fs::write(parent.join("cgroup.subtree_control"), "memory pids").expect("control");
    for (pid, procs) in [(1001, ""), (1002, "1002\n")] {
        let leaf = parent.join(format!("supervisor-{pid}"));
        fake.kernel.mkdir(&leaf).expect("leaf");
        fs::write(leaf.join("cgroup.procs"), procs).expect("procs");
    }
    fake.detect(None).expect("detect");
    assert!(!parent.join("supervisor-1001").exists(), "empty: removed");
    assert!(parent.join("supervisor-1002").exists(), "busy: kept");
}

/// A kernel whose `supervisor-*` leaf is removed right before the runner's move, as
/// another runner's cleanup of empty leaves does when it starts in that instant: `times`
/// times; and whose first `held` mkdirs of it find the name still held by a leaf on its
/// way out (EEXIST, no folder to see); `refused`: the move into it fails for good (EPERM).
#[derive(Debug)]
struct LeafTakenBeforeTheMove {
    kernel: Arc<FakeKernel>,
    times: Mutex<u32>,
    held: Mutex<u32>,
    refused: bool,
}

fn is_leaf(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(SUPERVISOR_LEAF_PREFIX))
}

impl Kernel for LeafTakenBeforeTheMove {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        let mut held = self.held.lock().expect("lock");
        if is_leaf(path) && *held > 0 && !path.exists() {
            *held -= 1;
            return Err(os_err(libc::EEXIST));
        }
        drop(held);
        self.kernel.mkdir(path)
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        self.kernel.rmdir(path)
    }
    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        let into_leaf = path.ends_with("cgroup.procs") && path.parent().is_some_and(is_leaf);
        let mut times = self.times.lock().expect("lock");
        if into_leaf && *times > 0 {
            *times -= 1;
            let leaf = path.parent().expect("leaf");
            self.kernel.rmdir(leaf).expect("the other runner's rmdir");
        }
        drop(times);
        if into_leaf && self.refused {
            return Err(os_err(libc::EPERM));
        }
        self.kernel.write(path, value)
    }
    fn kill_listed(&self, pid: i32, files: &[PathBuf]) -> io::Result<()> {
        self.kernel.kill_listed(pid, files)
    }
    fn swap_in_use(&self) -> io::Result<bool> {
        self.kernel.swap_in_use()
    }
}

fn detect_with_leaf_taken(
    fake: &FakeHost,
    times: u32,
    held: u32,
    refused: bool,
) -> Result<CgroupHost, CgroupError> {
    detect_at(
        &HostView {
            mountinfo: &fake.mountinfo,
            self_cgroup: &fake.self_cgroup,
            fs_root: fake.root(),
            self_pid: OWN_PID,
            parent_override: None,
            systemd: None,
        },
        Arc::new(LeafTakenBeforeTheMove {
            kernel: fake.kernel.clone(),
            times: Mutex::new(times),
            held: Mutex::new(held),
            refused,
        }),
    )
}

#[test]
fn v2_below_the_root_a_leaf_removed_before_the_move_is_made_again() {
    // Twice removed, and its name once still held: the runner still ends up in its
    // leaf, and only there.
    let fake = FakeHost::v2_session();
    let host = detect_with_leaf_taken(&fake, 2, 1, false).expect("detect");
    let parent = fake.cg("openvibe-skill-runner");
    let leaf = parent.join(format!("supervisor-{OWN_PID}"));
    assert_eq!(read(&leaf.join("cgroup.procs")), OWN_PID.to_string());
    assert!(described(&host, "placement").contains(&format!("supervisor-{OWN_PID}")));
    assert_eq!(
        read(&fake.cg("user.slice/user-0.slice/session-1.scope/cgroup.procs")),
        "777",
        "the shell stays where it was"
    );

    // Removed at every attempt: bounded, and the error names the file.
    let fake = FakeHost::v2_session();
    let err = detect_with_leaf_taken(&fake, u32::MAX, 0, false).expect_err("never in place");
    let text = err.to_string();
    assert!(
        text.contains(&format!("supervisor-{OWN_PID}/cgroup.procs")),
        "{text}"
    );
    // Its name held at every attempt: bounded too, and the error names the leaf.
    let fake = FakeHost::v2_session();
    let err = detect_with_leaf_taken(&fake, 0, u32::MAX, false).expect_err("never made");
    let text = err.to_string();
    assert!(text.contains(&format!("supervisor-{OWN_PID}")), "{text}");

    // A move the kernel refuses for good: no retry, and the empty leaf is not left.
    let fake = FakeHost::v2_session();
    let err = detect_with_leaf_taken(&fake, 0, 0, true).expect_err("refused");
    assert!(err.to_string().contains("move the runner into"), "{err}");
    let leaf = fake.cg(&format!("openvibe-skill-runner/supervisor-{OWN_PID}"));
    assert!(
        !leaf.exists(),
        "the leaf the runner never got into is removed"
    );
}

#[test]
fn v2_login_session_under_systemd_asks_for_a_delegated_scope() {
    let fake = FakeHost::v2_session().with_systemd();
    let host = fake.detect(None).expect("detect");
    let unit = format!("openvibe-skill-runner-{OWN_PID}.scope");
    assert_eq!(fake.systemd().scopes(), vec![unit.clone()]);
    let scope = fake.cg("system.slice").join(&unit);
    assert_eq!(
        described(&host, "parent"),
        scope.join("jobs").display().to_string()
    );
    let placement = described(&host, "placement");
    assert!(
        placement.starts_with("systemd transient scope") && placement.contains(&unit),
        "{placement}"
    );
    assert_eq!(
        read(&scope.join("supervisor/cgroup.procs")),
        OWN_PID.to_string()
    );
    assert_eq!(
        read(&fake.cg("user.slice/user-0.slice/session-1.scope/cgroup.procs")),
        "777"
    );
    let writes = fake.kernel.writes.lock().expect("lock").clone();
    assert!(
        writes.iter().all(|(p, _)| p.starts_with(&scope)),
        "the runner writes only inside its scope: {writes:?}"
    );
    assert!(!fake.cg("openvibe-skill-runner").exists());
}

#[test]
fn v2_service_with_delegate_under_systemd_needs_no_dbus() {
    let fake = FakeHost::v2_delegated("cpu memory pids", &format!("{OWN_PID}\n")).with_systemd();
    let service = fake.cg("system.slice/ov.service");
    fake.systemd().delegate(&service);
    let host = fake.detect(None).expect("detect");
    assert!(fake.systemd().scopes().is_empty(), "no scope asked for");
    assert_eq!(
        described(&host, "parent"),
        service.join("jobs").display().to_string()
    );
}

#[test]
fn v2_service_without_delegate_under_systemd_gets_a_scope() {
    // memory and pids offered (accounting on), but systemd did not delegate the cgroup:
    // writing below it would fight systemd.
    let fake = FakeHost::v2_delegated("cpu memory pids", &format!("{OWN_PID}\n")).with_systemd();
    let host = fake.detect(None).expect("detect");
    assert_eq!(fake.systemd().scopes().len(), 1);
    assert!(described(&host, "placement").starts_with("systemd transient scope"));
    assert!(!fake.cg("system.slice/ov.service/supervisor").exists());
}

#[test]
fn v2_systemd_refusing_a_scope_fails_closed_and_moves_nothing() {
    let mut fake = FakeHost::v2_session();
    let mut systemd = FakeSystemd::new(&fake.cg(""));
    systemd.refuse = Some("cannot reach systemd over D-Bus".to_owned());
    fake.systemd = Some(systemd);
    let err = fake.detect(None).expect_err("must fail closed");
    assert!(matches!(err, CgroupError::Placement { .. }), "{err}");
    assert!(err.to_string().contains("D-Bus"), "{err}");
    assert!(fake.kernel.writes.lock().expect("lock").is_empty());
    assert!(!fake.cg("openvibe-skill-runner").exists());
}

#[test]
fn configured_parent_overrides_detection_on_v2() {
    for configured in ["/sys/fs/cgroup/custom", "/custom"] {
        let fake = FakeHost::v2_delegated("cpu memory pids", &format!("{OWN_PID}\n"));
        let host = fake.detect(Some(Path::new(configured))).expect("detect");
        let parent = fake.cg("custom");
        assert_eq!(described(&host, "parent"), parent.display().to_string());
        assert_eq!(described(&host, "placement"), "configured parent");
        assert!(read(&parent.join("cgroup.subtree_control")).contains("memory"));
        assert!(
            !fake.cg("system.slice/ov.service/supervisor").exists(),
            "the runner is not moved when a parent is configured"
        );
        let job = host.create_job("j", &limits(16 * MIB, 4)).expect("job");
        assert_eq!(job.paths(), [parent.join("j")]);
    }
}

#[test]
fn configured_parent_overrides_detection_on_v1() {
    for configured in ["/sys/fs/cgroup/memory/ovr", "/ovr"] {
        let fake = FakeHost::hybrid(true);
        let host = fake.detect(Some(Path::new(configured))).expect("detect");
        assert_eq!(
            described(&host, "memory"),
            fake.cg("memory/ovr").display().to_string()
        );
        assert_eq!(
            described(&host, "pids"),
            fake.cg("pids/ovr").display().to_string()
        );
        assert!(!fake
            .cg("memory/workload/abc/openvibe-skill-runner")
            .exists());
    }
}

#[test]
fn configured_parent_must_be_a_clean_dedicated_cgroup() {
    for bad in ["relative/x", "/a/../b", "/sys/fs/cgroup", "/sys/fs/cgroup/"] {
        let fake = FakeHost::v2("0::/\n", "memory pids", "memory pids");
        let err = fake
            .detect(Some(Path::new(bad)))
            .expect_err("must be refused");
        assert!(matches!(err, CgroupError::Placement { .. }), "{bad}: {err}");
    }
    let fake = FakeHost::v2("0::/\n", "memory pids", "memory pids");
    let err = fake
        .detect(Some(Path::new("/missing/parent")))
        .expect_err("its parent must exist");
    assert!(err.to_string().contains("does not exist"), "{err}");
}

// ---- jobs -----------------------------------------------------------------------------

#[test]
fn v1_job_gets_its_limits_in_the_right_files() {
    let fake = FakeHost::hybrid(true);
    let host = fake.detect(None).expect("detect");
    let job = host.create_job("job_1", &limits(32 * MIB, 8)).expect("job");
    let memory = fake.cg("memory/workload/abc/openvibe-skill-runner/job_1");
    let pids = fake.cg("pids/openvibe-skill-runner/job_1");
    assert_eq!(
        read(&memory.join("memory.limit_in_bytes")),
        (32 * MIB).to_string()
    );
    assert_eq!(
        read(&memory.join("memory.memsw.limit_in_bytes")),
        (32 * MIB).to_string()
    );
    assert_eq!(read(&memory.join("memory.swappiness")), "0");
    assert_eq!(read(&pids.join("pids.max")), "8");
    let mut paths = job.paths().to_vec();
    paths.sort();
    let mut expected = vec![
        memory,
        pids,
        fake.cg("cpuacct/openvibe-skill-runner/job_1"),
        fake.cg("freezer/openvibe-skill-runner/job_1"),
    ];
    expected.sort();
    assert_eq!(paths, expected);
    // memsw after limit_in_bytes: the kernel refuses memsw below the memory limit.
    let writes = fake.kernel.writes.lock().expect("lock").clone();
    let position = |name: &str| writes.iter().position(|(p, _)| p.ends_with(name));
    assert!(position("memory.limit_in_bytes") < position("memory.memsw.limit_in_bytes"));
}

#[test]
fn v1_job_without_swap_accounting_writes_no_memsw() {
    let fake = FakeHost::hybrid(false);
    let host = fake.detect(None).expect("detect");
    let _job = host.create_job("j", &limits(32 * MIB, 8)).expect("job");
    let memory = fake.cg("memory/workload/abc/openvibe-skill-runner/j");
    assert_eq!(
        read(&memory.join("memory.limit_in_bytes")),
        (32 * MIB).to_string()
    );
    assert!(!memory.join("memory.memsw.limit_in_bytes").exists());
}

#[test]
fn without_swap_accounting_a_job_is_refused_while_the_host_swaps_and_nothing_is_left() {
    let v1 = FakeHost::hybrid(false);
    let v2 = FakeHost::v2_swap("0::/\n", "cpu memory pids", "cpu memory pids", false);
    for (fake, job_dir) in [
        (&v1, "memory/workload/abc/openvibe-skill-runner/j"),
        (&v2, "openvibe-skill-runner/jobs/j"),
    ] {
        let host = fake.detect(None).expect("detect");
        fake.kernel
            .swapping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(host.swap_problem().is_some(), "doctor says so");
        let err = host
            .create_job("j", &limits(32 * MIB, 8))
            .expect_err("no swap limit while the host swaps");
        assert!(matches!(err, CgroupError::NoSwapLimit { .. }), "{err}");
        assert!(err.to_string().contains("swapoff"), "{err}");
        assert!(!fake.cg(job_dir).exists(), "{job_dir} left behind");
        // Without swap on the host the same job runs, its memory limit written.
        fake.kernel
            .swapping
            .store(false, std::sync::atomic::Ordering::SeqCst);
        assert!(host.swap_problem().is_none());
        let _job = host.create_job("j", &limits(32 * MIB, 8)).expect("job");
        assert!(fake.cg(job_dir).exists());
    }
    // With swap accounting, swap on the host is no problem.
    let fake = FakeHost::hybrid(true);
    let host = fake.detect(None).expect("detect");
    fake.kernel
        .swapping
        .store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(host.swap_problem().is_none());
    let _job = host.create_job("j", &limits(32 * MIB, 8)).expect("job");
}

#[test]
fn swaps_are_listed_below_the_header() {
    let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
    assert!(!crate::sandbox::cgroup::swaps_listed(""));
    assert!(!crate::sandbox::cgroup::swaps_listed(header));
    let file = format!("{header}/swapfile  file  1048572  0  -2\n");
    assert!(crate::sandbox::cgroup::swaps_listed(&file));
}

#[test]
fn v2_job_gets_its_limits_in_the_right_files() {
    let fake = FakeHost::v2("0::/\n", "cpu memory pids", "cpu memory pids");
    let host = fake.detect(None).expect("detect");
    let job = host
        .create_job("job.2", &limits(128 * MIB, 64))
        .expect("job");
    let dir = fake.cg("openvibe-skill-runner/jobs/job.2");
    assert_eq!(job.paths(), std::slice::from_ref(&dir));
    assert_eq!(read(&dir.join("memory.max")), (128 * MIB).to_string());
    assert_eq!(read(&dir.join("memory.swap.max")), "0");
    assert_eq!(read(&dir.join("memory.oom.group")), "1");
    assert_eq!(read(&dir.join("pids.max")), "64");
    assert!(described(&host, "swap accounting").starts_with("yes"));
    assert_eq!(described(&host, "cgroup.kill"), "yes");
}

#[test]
fn job_names_and_limits_are_checked() {
    let fake = FakeHost::hybrid(true);
    let host = fake.detect(None).expect("detect");
    let longest = "a".repeat(MAX_NAME_LEN);
    host.create_job(&longest, &limits(MIB, 1))
        .expect("a name of the longest length is taken");
    let long = "a".repeat(MAX_NAME_LEN + 1);
    for bad in ["", ".", "..", "a/b", "a b", "ä", "../x", long.as_str()] {
        let err = host
            .create_job(bad, &limits(MIB, 1))
            .expect_err("bad name must be refused");
        assert!(
            matches!(err, CgroupError::InvalidName { .. }),
            "{bad:?}: {err}"
        );
    }
    for bad in [limits(0, 1), limits(MIB, 0), limits(u64::MAX, 1)] {
        let err = host.create_job("ok", &bad).expect_err("bad limits");
        assert!(matches!(err, CgroupError::InvalidLimits { .. }), "{err}");
    }
    assert!(
        host.leftovers().expect("leftovers").is_empty(),
        "nothing made"
    );
}

#[test]
fn an_existing_job_cgroup_is_never_reused_nor_removed() {
    let fake = FakeHost::hybrid(true);
    let host = fake.detect(None).expect("detect");
    let first = host.create_job("same", &limits(MIB, 1)).expect("job");
    let err = host
        .create_job("same", &limits(MIB, 1))
        .expect_err("exists");
    assert!(matches!(err, CgroupError::JobExists { .. }), "{err}");
    assert!(
        first.paths().iter().all(|p| p.is_dir()),
        "the failed attempt left the first job alone"
    );
    // Only the pids hierarchy has it (a crash between two mkdirs): still refused, and
    // the stray one is not removed by the refusal.
    let stray = fake.cg("pids/openvibe-skill-runner/stray");
    fake.kernel.mkdir(&stray).expect("mkdir");
    let err = host
        .create_job("stray", &limits(MIB, 1))
        .expect_err("exists");
    assert!(matches!(err, CgroupError::JobExists { .. }), "{err}");
    assert!(stray.is_dir());
    assert!(!fake
        .cg("memory/workload/abc/openvibe-skill-runner/stray")
        .exists());
}

#[test]
fn a_failed_limit_write_removes_what_was_created() {
    let fake = FakeHost::hybrid(true);
    let host = fake.detect(None).expect("detect");
    // The kernel would refuse this value; here a missing pids.max stands in for it.
    let pids_parent = fake.cg("pids/openvibe-skill-runner");
    let real = Arc::clone(&fake.kernel);
    #[derive(Debug)]
    struct NoPidsMax(Arc<FakeKernel>);
    impl Kernel for NoPidsMax {
        fn mkdir(&self, path: &Path) -> io::Result<()> {
            self.0.mkdir(path)?;
            let _ = fs::remove_file(path.join("pids.max"));
            Ok(())
        }
        fn rmdir(&self, path: &Path) -> io::Result<()> {
            self.0.rmdir(path)
        }
        fn write(&self, path: &Path, value: &str) -> io::Result<()> {
            self.0.write(path, value)
        }
        fn kill_listed(&self, pid: i32, files: &[PathBuf]) -> io::Result<()> {
            self.0.kill_listed(pid, files)
        }
        fn swap_in_use(&self) -> io::Result<bool> {
            self.0.swap_in_use()
        }
    }
    let broken = CgroupHost::from_parts(host.backend.clone(), Arc::new(NoPidsMax(real)));
    let err = broken
        .create_job("half", &limits(MIB, 4))
        .expect_err("limit write fails");
    let message = err.to_string();
    assert!(message.contains("pids.max"), "{message}");
    assert!(!pids_parent.join("half").exists());
    assert!(host.leftovers().expect("leftovers").is_empty());
}

#[test]
fn add_process_kill_all_and_remove_touch_only_the_job() {
    let fake = FakeHost::hybrid(true);
    let host = fake.detect(None).expect("detect");
    let job = host.create_job("k", &limits(32 * MIB, 8)).expect("job");
    // Far above pid_max: even a real kill could not hit anyone.
    let pid = 1 << 30;
    job.add_process(pid).expect("add");
    for dir in job.paths() {
        assert_eq!(
            read(&dir.join("cgroup.procs")),
            pid.to_string(),
            "{}",
            dir.display()
        );
    }
    assert_eq!(job.pids().expect("pids"), vec![pid]);
    assert!(matches!(
        job.add_process(0),
        Err(CgroupError::InvalidPid { pid: 0 })
    ));
    assert!(matches!(
        job.add_process(-5),
        Err(CgroupError::InvalidPid { pid: -5 })
    ));
    job.kill_all().expect("kill_all");
    assert_eq!(*fake.kernel.killed.lock().expect("lock"), vec![pid]);
    assert!(job.pids().expect("pids").is_empty());
    // The freezer was used and left thawed.
    let freezer = fake.cg("freezer/openvibe-skill-runner/k/freezer.state");
    assert_eq!(
        fake.kernel.written(&freezer),
        vec!["FROZEN".to_owned(), "THAWED".to_owned()]
    );
    assert_eq!(host.leftovers().expect("leftovers").len(), 4);
    job.remove().expect("remove");
    assert!(host.leftovers().expect("leftovers").is_empty());
    // Our own cgroup still holds us.
    assert_eq!(
        read(&fake.cg("memory/workload/abc/cgroup.procs")),
        OWN_PID.to_string()
    );
}

#[test]
fn v2_kill_all_writes_cgroup_kill_then_kills_the_rest() {
    let fake = FakeHost::v2("0::/\n", "memory pids", "memory pids");
    let host = fake.detect(None).expect("detect");
    let job = host.create_job("k", &limits(32 * MIB, 8)).expect("job");
    job.add_process(1 << 30).expect("add");
    job.kill_all().expect("kill_all");
    let dir = fake.cg("openvibe-skill-runner/jobs/k");
    assert_eq!(
        fake.kernel.written(&dir.join("cgroup.kill")),
        vec!["1".to_owned()]
    );
    assert_eq!(*fake.kernel.killed.lock().expect("lock"), vec![1 << 30]);
    assert_eq!(
        fake.kernel.written(&dir.join("cgroup.freeze")),
        vec!["1".to_owned(), "0".to_owned()]
    );
}

/// A process that joins a job's cgroup after the kill's sweep (an init stage still forking
/// pid 1 into it) is killed too, and the cgroup removed: it was left running with nothing
/// to end it, the cgroup reported busy.
#[test]
fn a_process_that_joins_after_the_kill_is_killed_and_the_cgroup_removed() {
    for fake in [
        FakeHost::hybrid(true),
        FakeHost::v2("0::/\n", "memory pids", "memory pids"),
    ] {
        let host = fake.detect(None).expect("detect");
        let job = host.create_job("late", &limits(32 * MIB, 8)).expect("job");
        let dirs = job.paths().to_vec();
        // Far above pid_max: even a real kill could not hit anyone.
        *fake.kernel.joins_before_rmdir.lock().expect("lock") = Some(1 << 30);
        job.remove().expect("removed");
        assert_eq!(*fake.kernel.killed.lock().expect("lock"), vec![1 << 30]);
        assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
    }
}

/// A job whose processes die only `delay` after the first SIGKILL (the fake's slow death).
fn slowly_dying_job(fake: &FakeHost, host: &CgroupHost, name: &str, delay: Duration) -> JobCgroup {
    *fake.kernel.slow_death.lock().expect("lock") = Some((delay, None));
    let job = host.create_job(name, &limits(32 * MIB, 8)).expect("job");
    // Far above pid_max: even a real kill could not hit anyone.
    job.add_process(1 << 30).expect("add");
    job
}

#[test]
fn processes_that_die_after_a_second_and_a_half_are_killed_and_the_cgroup_removed() {
    for fake in [
        FakeHost::hybrid(true),
        FakeHost::v2("0::/\n", "memory pids", "memory pids"),
    ] {
        let host = fake.detect(None).expect("detect");
        let job = slowly_dying_job(&fake, &host, "slow", Duration::from_millis(1500));
        let started = std::time::Instant::now();
        job.kill_all()
            .expect("a kill that takes 1.5 s is within the bound");
        assert!(started.elapsed() >= Duration::from_millis(1500));
        assert!(job.pids().expect("pids").is_empty());
        job.remove().expect("remove");
        assert!(host.leftovers().expect("leftovers").is_empty());

        // The same through a removal alone, as the engine's last step does it.
        let job = slowly_dying_job(&fake, &host, "slow-remove", Duration::from_millis(1500));
        job.remove().expect("remove");
        assert!(host.leftovers().expect("leftovers").is_empty());
    }
}

#[test]
fn processes_that_outlast_the_kill_bound_are_removed_once_gone() {
    let fake = FakeHost::v2("0::/\n", "memory pids", "memory pids");
    let host = fake.detect(None).expect("detect");
    let job = slowly_dying_job(
        &fake,
        &host,
        "late",
        KILL_TIMEOUT + Duration::from_millis(500),
    );
    let started = std::time::Instant::now();
    let err = job.remove().expect_err("the kill outlasts its bound");
    assert!(matches!(err, CgroupError::KillTimeout { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("removes the cgroup once they are gone"),
        "{err}"
    );
    // Still there while its process lives; removed, by the late removal, once it is gone.
    let gone = wait_until(KILL_TIMEOUT * 2, || {
        host.leftovers().is_ok_and(|left| left.is_empty())
    });
    assert!(
        gone,
        "the job cgroup is left behind: {:?}",
        host.leftovers()
    );
    assert!(started.elapsed() >= KILL_TIMEOUT + Duration::from_millis(500));
}

#[test]
fn dropping_a_job_removes_its_cgroups() {
    let fake = FakeHost::v2("0::/\n", "memory pids", "memory pids");
    let host = fake.detect(None).expect("detect");
    {
        let job = host.create_job("dropped", &limits(MIB, 2)).expect("job");
        job.add_process(1 << 30).expect("add");
    }
    assert!(host.leftovers().expect("leftovers").is_empty());
    assert!(
        fake.cg("openvibe-skill-runner").is_dir(),
        "the parent stays"
    );
}

/// The threads the fake kernel was called on since the last look.
fn threads(fake: &FakeHost) -> Vec<std::thread::ThreadId> {
    std::mem::take(&mut *fake.kernel.threads.lock().expect("lock"))
}

#[test]
fn inside_the_async_runtime_killing_and_removing_run_off_its_worker() {
    let fake = FakeHost::v2("0::/\n", "memory pids", "memory pids");
    let host = fake.detect(None).expect("detect");
    // One worker: the test's own thread.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let worker = std::thread::current().id();
    let job = host.create_job("a", &limits(MIB, 2)).expect("job");
    job.add_process(1 << 30).expect("add");
    rt.block_on(job.kill_all_blocking()).expect("kill_all");
    let seen = threads(&fake);
    assert!(!seen.is_empty() && !seen.contains(&worker), "{seen:?}");
    rt.block_on(job.remove_blocking()).expect("remove");
    let seen = threads(&fake);
    assert!(!seen.is_empty() && !seen.contains(&worker), "{seen:?}");
    assert!(host.leftovers().expect("leftovers").is_empty());

    // A drop on the worker hands the removal to a blocking thread.
    let job = host.create_job("b", &limits(MIB, 2)).expect("job");
    job.add_process(1 << 30).expect("add");
    rt.block_on(async move { drop(job) });
    drop(rt); // waits for the blocking threads
    let seen = threads(&fake);
    assert!(!seen.is_empty() && !seen.contains(&worker), "{seen:?}");
    assert!(host.leftovers().expect("leftovers").is_empty());

    // Outside a runtime there is no worker to spare: the drop removes right here.
    let job = host.create_job("c", &limits(MIB, 2)).expect("job");
    drop(job);
    assert!(threads(&fake).iter().all(|t| *t == worker));
    assert!(host.leftovers().expect("leftovers").is_empty());
}

#[test]
fn leftovers_can_be_reopened_and_removed() {
    let fake = FakeHost::hybrid(true);
    let host = fake.detect(None).expect("detect");
    let job = host.create_job("old", &limits(MIB, 2)).expect("job");
    let paths = job.paths().to_vec();
    std::mem::forget(job); // a crash: nothing removed
    let mut left = host.leftovers().expect("leftovers");
    left.sort();
    let mut expected = paths.clone();
    expected.sort();
    assert_eq!(left, expected);
    assert!(matches!(
        host.open_job("nope"),
        Err(CgroupError::NoSuchJob { .. })
    ));
    host.open_job("old")
        .expect("open")
        .remove()
        .expect("remove");
    assert!(host.leftovers().expect("leftovers").is_empty());
}

#[test]
fn v1_stats_read_every_counter() {
    let fake = FakeHost::hybrid(true);
    let host = fake.detect(None).expect("detect");
    let job = host.create_job("s", &limits(32 * MIB, 8)).expect("job");
    assert_eq!(
        job.stats(),
        CgroupStats::default(),
        "a fresh job hit nothing"
    );
    let memory = fake.cg("memory/workload/abc/openvibe-skill-runner/s");
    fs::write(memory.join("memory.max_usage_in_bytes"), "33554432\n").expect("w");
    fs::write(memory.join("memory.failcnt"), "12\n").expect("w");
    fs::write(
        memory.join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
    )
    .expect("w");
    fs::write(
        fake.cg("pids/openvibe-skill-runner/s/pids.events"),
        "max 3\n",
    )
    .expect("w");
    fs::write(
        fake.cg("cpuacct/openvibe-skill-runner/s/cpuacct.usage"),
        "123456789\n",
    )
    .expect("w");
    assert_eq!(
        job.stats(),
        CgroupStats {
            cpu_ns: 123_456_789,
            mem_peak_bytes: 32 * MIB,
            memory_limit_hit: true,
            oom_killed: true,
            pids_limit_hit: true,
        }
    );
    // failcnt alone (reclaim kept it under the limit): hit, not killed.
    fs::write(
        memory.join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
    )
    .expect("w");
    let stats = job.stats();
    assert!(stats.memory_limit_hit && !stats.oom_killed);
    // An OOM kill with the peak at the limit and no failure counted (Linux 6.18's v1 counts
    // none): the job's cap.
    fs::write(memory.join("memory.failcnt"), "0\n").expect("w");
    fs::write(
        memory.join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
    )
    .expect("w");
    let stats = job.stats();
    assert!(stats.memory_limit_hit && stats.oom_killed, "{stats:?}");
    // Far below it (the host's OOM killer): killed, the job's cap not reached.
    fs::write(
        memory.join("memory.max_usage_in_bytes"),
        (16 * MIB).to_string(),
    )
    .expect("w");
    let stats = job.stats();
    assert!(!stats.memory_limit_hit && stats.oom_killed, "{stats:?}");
    // Missing files read as zero.
    for file in [
        "memory.max_usage_in_bytes",
        "memory.failcnt",
        "memory.oom_control",
    ] {
        fs::remove_file(memory.join(file)).expect("rm");
    }
    fs::write(memory.join("memory.memsw.failcnt"), "1").expect("w");
    let stats = job.stats();
    assert_eq!(stats.mem_peak_bytes, 0);
    assert!(stats.memory_limit_hit, "memsw.failcnt counts too");
}

#[test]
fn v2_stats_read_every_counter() {
    let fake = FakeHost::v2("0::/\n", "cpu memory pids", "cpu memory pids");
    let host = fake.detect(None).expect("detect");
    let job = host.create_job("s", &limits(32 * MIB, 8)).expect("job");
    assert_eq!(job.stats(), CgroupStats::default());
    let dir = fake.cg("openvibe-skill-runner/jobs/s");
    fs::write(
        dir.join("cpu.stat"),
        "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n",
    )
    .expect("w");
    fs::write(dir.join("memory.peak"), "4096\n").expect("w");
    fs::write(
        dir.join("memory.events"),
        "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 1\n",
    )
    .expect("w");
    fs::write(dir.join("pids.events"), "max 2\n").expect("w");
    assert_eq!(
        job.stats(),
        CgroupStats {
            cpu_ns: 1_500_000,
            mem_peak_bytes: 4096,
            memory_limit_hit: true,
            oom_killed: true,
            pids_limit_hit: true,
        }
    );
    // oom_kill alone (the host's OOM killer): killed, the job's cap not reached.
    fs::write(
        dir.join("memory.events"),
        "low 0\nhigh 0\nmax 0\noom 0\noom_kill 1\n",
    )
    .expect("w");
    let stats = job.stats();
    assert!(!stats.memory_limit_hit && stats.oom_killed, "{stats:?}");
    // The same with the peak at memory.max: the job's cap.
    fs::write(dir.join("memory.peak"), (32 * MIB).to_string()).expect("w");
    assert!(job.stats().memory_limit_hit);
    fs::write(dir.join("memory.peak"), "4096\n").expect("w");
    // max alone: hit, not killed. No memory.peak (kernel < 5.19): memory.current.
    fs::write(
        dir.join("memory.events"),
        "low 0\nhigh 0\nmax 5\noom 0\noom_kill 0\n",
    )
    .expect("w");
    fs::remove_file(dir.join("memory.peak")).expect("rm");
    fs::write(dir.join("memory.current"), "2048\n").expect("w");
    let stats = job.stats();
    assert!(stats.memory_limit_hit && !stats.oom_killed);
    assert_eq!(stats.mem_peak_bytes, 2048);
}

/// A v2 kernel without `memory.peak` (before 5.19): the runner samples `memory.current`
/// while the job runs, so the peak of a job killed at its memory is not the nothing its
/// cgroup holds after the kill. Where the kernel keeps the peak there is no sampler.
#[tokio::test]
async fn without_memory_peak_the_runner_samples_the_jobs_memory() {
    let fake = FakeHost::v2("0::/\n", "cpu memory pids", "cpu memory pids");
    let host = fake.detect(None).expect("detect");
    let job = host.create_job("p", &limits(256 * MIB, 8)).expect("job");
    assert!(job.sample_memory().is_none(), "memory.peak is there");
    let dir = fake.cg("openvibe-skill-runner/jobs/p");
    fs::remove_file(dir.join("memory.peak")).expect("rm");
    let sampler = job.sample_memory().expect("a sampler without memory.peak");
    fs::write(dir.join("memory.current"), (100 * MIB).to_string()).expect("w");
    let started = std::time::Instant::now();
    while sampler.peak() < 100 * MIB && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(PEAK_SAMPLE).await;
    }
    // Killed: the cgroup holds nearly nothing; the sampled peak stays.
    fs::write(dir.join("memory.current"), "4096").expect("w");
    tokio::time::sleep(PEAK_SAMPLE * 3).await;
    assert_eq!(job.stats().mem_peak_bytes, 4096);
    assert_eq!(sampler.peak(), 100 * MIB);
    // v1 keeps its peak (memory.max_usage_in_bytes): no sampler.
    let v1 = FakeHost::hybrid(true);
    let v1_host = v1.detect(None).expect("detect");
    let v1_job = v1_host.create_job("p", &limits(32 * MIB, 8)).expect("job");
    assert!(v1_job.sample_memory().is_none());
}

#[test]
fn errors_name_the_file_and_what_to_do() {
    let err = io_error(
        "write",
        Path::new("/sys/fs/cgroup/x/memory.max"),
        io::Error::from_raw_os_error(libc::EACCES),
    );
    let message = err.to_string();
    assert!(message.contains("/sys/fs/cgroup/x/memory.max"), "{message}");
    assert!(message.contains("Delegate=yes"), "{message}");
    let err = io_error(
        "enable controllers in",
        Path::new("/x/cgroup.subtree_control"),
        io::Error::from_raw_os_error(libc::EBUSY),
    );
    assert!(err.to_string().contains("holds processes"), "{err}");
}

/// The version choice tests and detection share: v1 only where a v1 hierarchy can hold a
/// job's limits, v2 where a cgroup2 filesystem is mounted, nothing otherwise.
#[test]
fn version_for_follows_where_the_limits_live() {
    use super::{parse_mountinfo, version_for};
    let v2 = "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
    let v1_memory = "31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
    let v1_pids = "32 25 0:28 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
    let v1_freezer = "33 25 0:29 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n";
    let of = |text: &str| version_for(&parse_mountinfo(text));
    assert_eq!(of(v2), Some(CgroupVersion::V2));
    assert_eq!(of(&format!("{v2}{v1_memory}")), Some(CgroupVersion::V1));
    assert_eq!(of(&format!("{v1_pids}{v2}")), Some(CgroupVersion::V1));
    assert_eq!(of(&format!("{v1_freezer}{v2}")), Some(CgroupVersion::V2));
    assert_eq!(of(v1_freezer), None);
    assert_eq!(of("22 1 0:21 / /proc rw - proc proc rw\n"), None);
}

/// The one rule both backends use for "the job reached its own memory limit": a failure
/// the kernel counted, or a peak within a charge batch of the limit; no limit, no peak or a
/// peak well under the limit is not reaching it.
#[test]
fn the_memory_limit_counts_as_reached_by_a_failure_or_a_peak_at_it() {
    let limit = Some(32 * MIB);
    assert!(memory_limit_reached(1, 0, None), "a counted failure alone");
    assert!(memory_limit_reached(1, 4096, limit));
    assert!(
        memory_limit_reached(0, 32 * MIB, limit),
        "the peak at the limit"
    );
    assert!(
        memory_limit_reached(0, 32 * MIB - AT_THE_LIMIT, limit),
        "within one charge batch of it"
    );
    assert!(!memory_limit_reached(0, 32 * MIB - AT_THE_LIMIT - 1, limit));
    assert!(!memory_limit_reached(0, 4096, limit));
    assert!(
        !memory_limit_reached(0, 0, Some(0)),
        "nothing measured is not the limit"
    );
    assert!(
        !memory_limit_reached(0, u64::MAX, None),
        "`max` is no limit"
    );
    assert!(
        memory_limit_reached(0, u64::MAX, Some(u64::MAX)),
        "no overflow at the top"
    );
}
