//! Job -> Plan: every decision about the sandbox of one job, made in pure code.
//!
//! The init stage (`sandbox::init`) applies a plan with nothing left to decide: which
//! namespaces, which files appear in the job's root, which landlock rights at which ABI
//! (`ruleset`), which seccomp programs, which uid, which Node flags; a layer the layer
//! matrix leaves out is a step the plan does not have, and an injected fault is the step's
//! input corrupted in the plan ([`inject`]). Tests check the plan, not the kernel.

mod faults;
mod real_use;
pub mod ruleset;

pub use self::faults::{inject, refused_seccomp_program, NGROUPS_MAX};
use crate::bpf::CompiledFilters;
use crate::fault::{Fault, Layer};
use crate::job::{Net, ValidJob};
use crate::runtime::Runtime;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where the job's inputs appear inside the sandbox, and its working directory.
pub const SKILL_DIR: &str = "/skill";
/// Device nodes Node may open (getrandom is the normal path; these are fallbacks).
pub const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"];
/// Where the runner's hardening preload appears inside the sandbox.
pub const PRELOAD: &str = "/runtime/harden.cjs";
/// Node's main script in the job: a link to `/skill/<entry>` laid with the skill's files
/// (Node resolves it to the entry before running it). One name for every job, so a warm
/// sandbox, started before its job's entry is known, runs Node exactly as a cold one.
pub const MAIN_LINK: &str = "/runtime/main";
/// The loader's cache: without it the loader still finds the libraries, only slower.
pub const LD_CACHE: &str = "/etc/ld.so.cache";
/// The job's resolver inside its namespace: any address reaches the runner's DNS responder
/// (every destination is local there), but the answer to a query comes from the address the
/// kernel picks for the reply, 127.0.0.1, and glibc's resolver accepts only an answer from
/// the address it asked.
pub const JOB_RESOLV_CONF_TEXT: &str = "nameserver 127.0.0.1\noptions timeout:2 attempts:2\n";
/// The job's hosts file: only its own loopback names.
pub const JOB_HOSTS_TEXT: &str = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n";
/// The TCP port of the DNS responder (DNS over TCP, for long answers).
pub const DNS_PORT: u16 = 53;
/// Room in the job's root tmpfs besides the skill's files and the preload: mount points.
pub const ROOT_TMPFS_SLACK: u64 = 1024 * 1024;
/// Bytes of the tool's memory reserved for Node itself outside the V8 heap.
const HEAP_FRACTION_NUM: u64 = 1;
const HEAP_FRACTION_DEN: u64 = 2;
const MIB: u64 = 1024 * 1024;
/// Open files per process.
pub const NOFILE: u64 = 256;
/// The core-dump limit: 1, not 0. The kernel ignores the limit when core_pattern is a pipe
/// (systemd-coredump, apport), except 1, which it reads as "no dump" (fs/coredump.c); 1
/// byte is also below any file core's minimum. Seccomp keeps the tool from changing it.
pub const CORE_BYTES: u64 = 1;
/// The largest file the tool may write: none (its only writable file is /dev/null).
pub const FSIZE_BYTES: u64 = 0;
/// The host's OpenSSL configuration, which Node reads at start when it is there: only
/// where the layer matrix leaves the job's root out (its own root has none).
pub const HOST_OPENSSL_CONF: &str = "/etc/ssl/openssl.cnf";
/// The memory cgroup's limit when the layer matrix leaves the limit out
/// (`Layer::MemoryLimit`): no longer the job's, only a safety net for the test host, far
/// above every bomb's own bound and far below a machine's memory.
pub const OMITTED_MEM_BYTES: u64 = 4 * 1024 * MIB;
/// The pids cgroup's limit when the layer matrix leaves it out (`Layer::PidsLimit`).
pub const OMITTED_PIDS_MAX: u64 = 16_384;
/// The descriptor the init stage writes its reports to (set up by the runner).
pub const REPORT_FD: i32 = 3;
/// The descriptor of the network namespace the runner made and serves for a job with
/// egress (set up by the runner).
pub const NETNS_FD: i32 = 4;
/// The descriptor a warm sandbox's pid 1 reads its job's files from at the hand-over
/// (`Start::Warm`); `sandbox::exec_gate::GATE_FD`'s neighbour, never open in the tool.
pub const WARM_FD: i32 = 6;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MountStep {
    /// A host file at the same path inside, read-only, nosuid, nodev.
    BindFile { source: PathBuf, target: PathBuf },
    /// A host device node, read-only mount, nosuid, noexec (dev allowed on this mount only).
    Device { source: PathBuf, target: PathBuf },
    /// A fresh procfs of the job's pid namespace, nosuid, nodev, noexec.
    Proc { target: PathBuf },
}

/// A file the init stage writes into the job's own root before sealing it read-only.
/// Writing rather than bind-mounting keeps host paths out of the job's mountinfo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanFile {
    /// Relative to its directory (`/skill` or `/runtime`).
    pub name: String,
    #[serde(with = "base64_bytes")]
    pub bytes: Vec<u8>,
}

mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

pub use self::ruleset::{FsAccess, LandlockPlan, NetAccess, PathRule, Scope};

/// How far the init stage builds the job's root (its steps 2 to 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RootSteps {
    /// Every job in real use: the mounts made private, a tmpfs of `root_bytes` on `root`,
    /// the files written into it, `mounts` applied, `pivot_root` into it, the host's tree
    /// detached, the root sealed read-only.
    Enter,
    /// The private tmpfs and the files in it, nothing more: the job sees the host's tree
    /// (the layer matrix leaves [`Layer::Root`] out).
    TmpfsOnly,
    /// Nothing mounted (no mount namespace of its own: never mount in the host's): the
    /// files are written into the host's folder `root` (the layer matrix leaves
    /// [`Layer::MountNamespace`] out).
    FilesOnly,
}

impl RootSteps {
    /// Whether the init stage mounts anything (only ever in the job's mount namespace).
    pub fn mounts(self) -> bool {
        self != RootSteps::FilesOnly
    }
}

/// Step 8: the identity the job takes after every capability is dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Privileges {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups: none.
    pub groups: Vec<u32>,
}

/// Step 11a: what the init stage does with the exec gate's socket ([`NETNS_FD`]'s
/// neighbour, `sandbox::exec_gate::GATE_FD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecGateStep {
    /// Every job in real use: install the gate's filter, hand its listener to the runner,
    /// close the socket.
    HandOver,
    /// No gate: close the socket; the runner's gate thread sees it close and answers
    /// nothing (the layer matrix leaves [`Layer::ExecGate`] out).
    CloseSocket,
    /// Close the socket, then hand the listener over it, which the kernel refuses (`EBADF`):
    /// [`Fault::ExecGate`].
    HandOverClosedSocket,
}

/// How the tool's own files reach its root, and how Node gets to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// A cold job: the files and [`MAIN_LINK`] are laid with the root; the preload waits at
    /// its gate for the runner's go byte on stdin, which comes right before the input.
    Gated,
    /// A warm sandbox: the root has an empty `/skill`; pid 1 lays the job's files and
    /// [`MAIN_LINK`] from [`WARM_FD`] at the hand-over ([`HandOver`]); then the go byte.
    Warm,
    /// No preload, or no root of its own to lay the link in (the layer matrix, a
    /// compromised Node): no gate, the files are laid with the root and Node's main is
    /// `/skill/<entry>` itself.
    Direct,
}

/// The one byte the runner writes on the tool's stdin, before the input, to open the
/// preload's gate ([`Start::Gated`] and [`Start::Warm`]).
pub const GO_BYTE: u8 = b'\n';

/// What a warm sandbox's pid 1 is given at the hand-over, on [`WARM_FD`]: the job's
/// verified files, its entry (the target of [`MAIN_LINK`]), the size its root would
/// have had cold, so that the root's tmpfs reads the same, and the runner's nice value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandOver {
    pub skill_files: Vec<PlanFile>,
    pub entry: String,
    pub root_bytes: u64,
    /// The nice value the job runs at: the runner's own, which a cold job inherits (the
    /// sandbox waited at a higher one).
    pub nice: i32,
}

/// How the init stage puts the job into its cgroups before it forks anything of the job.
/// Either way it checks the job is listed in each before going on, and a plan that names
/// no cgroup is refused: a job never runs outside its limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum CgroupJoin {
    /// cgroup v1: the init stage writes `0` (the calling thread) to each file, one `tasks`
    /// per hierarchy, and so joins each by itself. A single thread's move skips the
    /// kernel's global threadgroup lock.
    Write { files: Vec<PathBuf> },
    /// cgroup v2: pid 1 of the job is made inside this directory (`clone3` with
    /// `CLONE_INTO_CGROUP`, Linux 5.7), and unshares the cgroup namespace there. Moving a
    /// process (a write to `cgroup.procs`) takes the global threadgroup lock and waits an
    /// RCU grace period, 7 to 13 ms a job; a process made in the cgroup waits for nothing.
    /// The init stage before it stays in the runner's cgroup and only waits. Where clone3
    /// is refused as a call (ENOSYS or EPERM: a container's seccomp profile), pid 1 is
    /// forked and moves itself in through `cgroup.procs` first, paying that wait.
    CloneInto { dir: PathBuf },
}

/// How a job gets a time namespace: setting one's clocks takes CAP_SYS_TIME in the user
/// namespace that owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeNamespace {
    /// The kernel has none, or the runner can set no time namespace's clocks: the job's
    /// monotonic and boot clocks count from the host's boot.
    None,
    /// The init stage makes it and sets its clocks: the runner holds CAP_SYS_TIME.
    Own,
    /// The runner lacks CAP_SYS_TIME (systemd's `ProtectClock=`): a helper of the init
    /// stage makes a user namespace, where it holds CAP_SYS_TIME, and in it the time
    /// namespace, sets its clocks and exits; the init stage joins that time namespace
    /// (CAP_SYS_ADMIN over the helper's user namespace) before pid 1 is forked. The job's
    /// processes stay in the host's user namespace.
    InUserNamespace,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub job_id: String,
    /// How the job's processes come into the job's cgroups, first of all (host paths).
    pub cgroup_join: CgroupJoin,
    /// The descriptor of a network namespace to join before anything else: the one the
    /// runner made and serves for a job with egress ([`NETNS_FD`]); `None` for `deny`,
    /// whose new, empty one comes with `unshare`.
    pub join_netns: Option<i32>,
    /// The `CLONE_NEW*` flags of the init stage's `unshare(2)`: mount, pid, net (a `deny`
    /// job's, not one joined), ipc, uts, time (where the kernel has it), and cgroup when
    /// the init stage is the job's first process in its cgroup (v1, [`CgroupJoin::Write`]).
    pub unshare: i32,
    /// The flags pid 1 unshares once it has checked it is in the job's cgroup: the cgroup
    /// namespace on v2 ([`CgroupJoin::CloneInto`]), where pid 1 is the job's first process
    /// there. A cgroup namespace is rooted at its maker's cgroup, so it is made inside.
    pub pid_one_unshare: i32,
    /// Whether the init stage joins a time namespace a helper of its own made inside a
    /// user namespace ([`TimeNamespace::InUserNamespace`]); a time namespace the init
    /// stage makes itself is `CLONE_NEWTIME` in `unshare`.
    pub borrowed_time_namespace: bool,
    /// Host path of an empty directory the job's root tmpfs is mounted on.
    pub root: PathBuf,
    /// Size of that tmpfs: the files below and room for mount points.
    pub root_bytes: u64,
    /// How far the job's root is built.
    pub root_steps: RootSteps,
    /// The skill's verified inputs, laid out read-only under `/skill` (none in a warm
    /// sandbox: they come at the hand-over).
    pub skill_files: Vec<PlanFile>,
    /// How the files reach the root and Node its entry.
    pub start: Start,
    /// The job's entry, the target of [`MAIN_LINK`] under `/skill` (`None`: no link, for
    /// [`Start::Direct`], or a warm sandbox's, laid at the hand-over).
    pub main_link: Option<String>,
    /// The runner's hardening preload, written at `/runtime/harden.cjs`.
    pub preload: PlanFile,
    /// Files written under `/etc`: the runner's `resolv.conf` and `hosts` for a job with
    /// egress; none for `deny`.
    pub etc_files: Vec<PlanFile>,
    /// Mounts into the job's root, in order (applied only when `root_steps` enters it).
    pub mounts: Vec<MountStep>,
    pub hostname: String,
    pub cwd: PathBuf,
    /// The program executed (inside path) and its full argv.
    pub exe: PathBuf,
    pub argv: Vec<String>,
    /// The whole environment of the tool: `K=V` entries, set on purpose only.
    pub env: Vec<String>,
    /// Open files per process.
    pub nofile: u64,
    /// `RLIMIT_CORE` ([`CORE_BYTES`]).
    pub core_bytes: u64,
    /// `RLIMIT_FSIZE` ([`FSIZE_BYTES`]).
    pub fsize_bytes: u64,
    /// Every capability dropped and this identity taken; `None` only where the layer
    /// matrix leaves [`Layer::Privileges`] out (the job keeps root).
    pub privileges: Option<Privileges>,
    /// The landlock ruleset; `None` only where the layer matrix leaves it out.
    pub landlock: Option<LandlockPlan>,
    pub exec_gate: ExecGateStep,
    /// The job's net mode's seccomp programs, in installation order; in the JSON each is
    /// one base64 string of its raw `sock_filter` bytes (`bpf::CompiledFilters`). `None`
    /// only where the layer matrix leaves seccomp out.
    pub seccomp: Option<CompiledFilters>,
    pub net: Net,
    /// The fault injected ([`inject`]), for the record only: the steps above already carry
    /// it, and the init stage never reads this.
    pub fault: Option<Fault>,
    /// Layers left out (the layer matrix, test-only), with what each implies
    /// ([`with_implied`]), sorted; empty in real use. For the record only, like `fault`.
    pub omit: Vec<Layer>,
    /// A test hook, 0 in real use: pid 1 waits this long before it sets its parent-death
    /// signal, which widens the moment in which a runner killed would leave it behind
    /// (`integration/cgroup.rs` proves pid 1 follows it all the same).
    pub pid_one_pause_ms: u32,
    /// A test hook, 0 in real use: pid 1 of a warm sandbox waits this long right after it
    /// reports the hand-over, while the tool runs (`integration/warm.rs` proves it holds
    /// nothing by then); a cold job's, right after it forked the tool and before it sheds
    /// its privileges (`integration/warm.rs` proves the tool has not started by then).
    pub hand_over_pause_ms: u32,
}

impl Plan {
    /// Whether the plan leaves `layer` out (for the record and tests: the steps already
    /// say it, and the init stage never asks).
    pub fn omits(&self, layer: Layer) -> bool {
        self.omit.contains(&layer)
    }
}

/// The layers left out, with those they imply: no mount namespace means no root of the
/// job's own (the init never mounts in the host's namespace), and no root means no preload
/// (it confines loading to `/skill`, which only the job's root has); sorted, once each.
pub fn with_implied(omit: &[Layer]) -> Vec<Layer> {
    let mut all = omit.to_vec();
    if all.contains(&Layer::MountNamespace) {
        all.push(Layer::Root);
    }
    if all.contains(&Layer::Root) {
        all.push(Layer::Preload);
    }
    all.sort_unstable();
    all.dedup();
    all
}

/// The memory and pids limits of a job's cgroup: the job's own and the configured pids
/// limit, or the test host's safety nets where the layer matrix leaves a limit out.
pub fn cgroup_limits(mem_bytes: u64, pids_max: u64, omit: &[Layer]) -> (u64, u64) {
    (
        if omit.contains(&Layer::MemoryLimit) {
            OMITTED_MEM_BYTES.max(mem_bytes)
        } else {
            mem_bytes
        },
        if omit.contains(&Layer::PidsLimit) {
            OMITTED_PIDS_MAX.max(pids_max)
        } else {
            pids_max
        },
    )
}

/// Everything a plan is made from: the job, and what the engine found or made for it on
/// the host. The plan decides the rest.
pub struct PlanInputs<'a> {
    pub job: &'a ValidJob,
    pub runtime: &'a Runtime,
    pub paths: &'a JobPaths,
    /// The job's verified files, by name.
    pub files: &'a [(String, Vec<u8>)],
    /// The runner's hardening preload as loaded.
    pub preload: &'a [u8],
    /// The compiled seccomp programs of a net mode (or why they cannot be had); the plan
    /// picks the job's.
    pub seccomp: &'a dyn Fn(Net) -> Result<&'a CompiledFilters, String>,
    /// How the job's processes come into the job's cgroups (host paths).
    pub cgroup_join: CgroupJoin,
    /// The uid leased for this job, unique on the host while it runs.
    pub uid: u32,
    /// The ports the egress policy serves (used when `net` is not `deny`).
    pub egress_ports: &'a [u16],
    /// Whether a host file exists (optional files are mounted only when they do).
    pub existing: &'a dyn Fn(&Path) -> bool,
    /// The kernel's landlock ABI, detected once when the runner started (0: none).
    pub landlock_abi: i32,
    /// How the job gets a time namespace whose clocks start near zero, if it does.
    pub time_namespace: TimeNamespace,
    /// A step to make fail (configuration `fault_inject`, tests of failing closed): the plan
    /// carries that step's input corrupted ([`inject`]).
    pub fault: Option<Fault>,
    /// Node's own hardening flags (permission model, no code from strings, the preload);
    /// false only for tests that prove what the OS layers hold without them.
    pub node_hardening: bool,
    /// Layers to leave out (configuration `omit_layers`, the layer matrix); empty in real use.
    pub omit: &'a [Layer],
    /// A warm sandbox: `files` is empty and the job (made up for its shape) has no entry
    /// yet; the files come at the hand-over. Only with the whole sandbox.
    pub warm: bool,
}

/// What the engine knows about one job's place on the host.
#[derive(Debug, Clone)]
pub struct JobPaths {
    /// The empty directory for the root.
    pub root: PathBuf,
}

/// The V8 old-space ceiling for a memory limit: half of it, at least 8 MiB, so that V8
/// reports its own exhaustion before the kernel has to kill the job.
pub fn heap_mib(mem_bytes: u64) -> u64 {
    (mem_bytes / MIB * HEAP_FRACTION_NUM / HEAP_FRACTION_DEN).max(8)
}

/// The preload as the job gets it: the runner's file and one last line that gives it the
/// job's memory limit, which it reports as the machine's memory (`os.totalmem()`).
pub fn job_preload(preload: &[u8], mem_bytes: u64) -> Vec<u8> {
    let mut bytes = preload.to_vec();
    if !bytes.ends_with(b"\n") {
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(format!("jobMemBytes = {mem_bytes};\n").as_bytes());
    bytes
}

/// The line the plan adds after [`job_preload`]'s when the preload has its gate
/// ([`Start::Gated`], [`Start::Warm`]): Node waits there, every layer and the preload's
/// hardening in place, for the runner's go byte.
pub const GATE_LINE: &str = "waitAtGate();\n";

/// Node's argv for a job: the runtime's own flags, the hardening preload, the main script
/// ([`MAIN_LINK`], which leads to the entry).
pub fn node_argv(job: &ValidJob, rt: &Runtime) -> Vec<String> {
    node_argv_at(
        job,
        rt,
        Path::new(SKILL_DIR),
        Path::new(PRELOAD),
        Start::Gated,
    )
}

/// [`node_argv`] with the skill folder and the preload where the job sees them (elsewhere
/// only when the layer matrix leaves the job's root out), and the main script `start`
/// gives: [`MAIN_LINK`], or without the preload's gate the entry itself.
fn node_argv_at(
    job: &ValidJob,
    rt: &Runtime,
    skill: &Path,
    preload: &Path,
    start: Start,
) -> Vec<String> {
    let main = match start {
        Start::Direct => format!("{}/{}", skill.display(), job.entry),
        Start::Gated | Start::Warm => MAIN_LINK.to_string(),
    };
    let (skill, preload) = (skill.display(), preload.display());
    vec![
        rt.node.display().to_string(),
        rt.permission_flag().to_string(),
        rt.fs_read_grant(&skill.to_string()),
        format!("--allow-fs-read={preload}"),
        "--disallow-code-generation-from-strings".to_string(),
        format!("--max-old-space-size={}", heap_mib(job.mem_bytes)),
        format!("--require={preload}"),
        main,
    ]
}

/// Whether `arg` of [`node_argv`] loads the hardening preload.
pub fn is_preload_flag(arg: &str) -> bool {
    arg == "--require" || arg.starts_with("--require=")
}

/// Whether `arg` of [`node_argv`] is one of the flags by which Node hardens itself (the
/// permission model and its grants, no code from strings, the preload), as opposed to the
/// binary, its heap ceiling and the entry.
pub fn is_node_hardening_flag(arg: &str) -> bool {
    [
        "--permission",
        "--experimental-permission",
        "--allow-fs-read",
        "--disallow-code-generation-from-strings",
        "--require",
    ]
    .iter()
    .any(|flag| arg == *flag || arg.starts_with(&format!("{flag}=")))
}

/// The pure transformation; an error when the job's net mode has no seccomp program (the
/// policy did not compile for it), or when a build without the `test-hooks` feature is
/// asked to inject a fault or leave a layer out (the configuration refuses that first; the
/// plan refuses it again, so no path around the configuration runs a job with less).
pub fn build(inputs: PlanInputs<'_>) -> Result<Plan, String> {
    if let Some(problem) = crate::fault::hooks_problem(inputs.fault, &[], inputs.omit, false, 0) {
        return Err(problem);
    }
    let PlanInputs {
        job,
        runtime: rt,
        paths,
        files,
        preload,
        seccomp,
        cgroup_join,
        uid,
        egress_ports,
        existing,
        landlock_abi,
        time_namespace,
        fault,
        node_hardening,
        omit,
        warm,
    } = inputs;
    let mut omit = omit.to_vec();
    if !node_hardening {
        omit.extend([Layer::NodePermission, Layer::Preload]);
    }
    let omit = with_implied(&omit);
    let leaves_out = |layer: Layer| omit.contains(&layer);
    let no_root = leaves_out(Layer::Root);
    // Where the job sees a path of its root: there, or (no root of its own) under the
    // job's root folder on the host's tree.
    let inside = |p: &str| -> PathBuf {
        if no_root {
            paths.root.join(p.trim_start_matches('/'))
        } else {
            PathBuf::from(p)
        }
    };
    // The job's own mode's programs, never another's.
    let filters = seccomp(job.net)?.clone();
    let mut mounts = Vec::new();
    let mut grants = ruleset::Grants {
        exec_files: vec![rt.node.clone()],
        ..ruleset::Grants::default()
    };

    mounts.push(MountStep::BindFile {
        source: rt.node.clone(),
        target: rt.node.clone(),
    });
    grants.read_files.push(rt.node.clone());
    for lib in &rt.libraries {
        if lib == &rt.node {
            continue;
        }
        mounts.push(MountStep::BindFile {
            source: lib.clone(),
            target: lib.clone(),
        });
        grants.read_files.push(lib.clone());
    }
    if let Some(loader) = &rt.loader {
        grants.exec_files.push(loader.clone());
    }
    if existing(Path::new(LD_CACHE)) {
        mounts.push(MountStep::BindFile {
            source: LD_CACHE.into(),
            target: LD_CACHE.into(),
        });
        grants.read_files.push(LD_CACHE.into());
    }
    for dev in DEVICES {
        if existing(Path::new(dev)) {
            mounts.push(MountStep::Device {
                source: (*dev).into(),
                target: (*dev).into(),
            });
            grants.read_files.push((*dev).into());
        }
    }
    if existing(Path::new("/dev/null")) {
        grants.write_files.push("/dev/null".into());
    }
    grants.read_files.push(inside(PRELOAD));
    if no_root && existing(Path::new(HOST_OPENSSL_CONF)) {
        // Without a root of its own Node finds the host's OpenSSL configuration, and stops
        // on EACCES where its own root gives ENOENT.
        grants.read_files.push(HOST_OPENSSL_CONF.into());
    }
    let egress = job.net != Net::Deny;
    let (etc_files, connect_tcp) = if egress {
        for name in ["resolv.conf", "hosts"] {
            grants.read_files.push(inside("/etc").join(name));
        }
        let mut ports: Vec<u16> = egress_ports.to_vec();
        ports.push(DNS_PORT);
        ports.sort_unstable();
        ports.dedup();
        (
            vec![
                PlanFile {
                    name: "resolv.conf".into(),
                    bytes: JOB_RESOLV_CONF_TEXT.as_bytes().to_vec(),
                },
                PlanFile {
                    name: "hosts".into(),
                    bytes: JOB_HOSTS_TEXT.as_bytes().to_vec(),
                },
            ],
            ports,
        )
    } else {
        (Vec::new(), Vec::new())
    };
    mounts.push(MountStep::Proc {
        target: "/proc".into(),
    });
    if no_root {
        // The job sees the host's tree: nothing to mount into a root it does not get.
        mounts.clear();
    }
    grants.read_dirs = vec![inside(SKILL_DIR), "/proc".into()];
    let landlock = if leaves_out(Layer::Landlock) {
        None
    } else {
        Some(ruleset::decide(landlock_abi, &grants, &connect_tcp).ok_or_else(|| {
            format!(
                "landlock is unavailable on this kernel (ABI {landlock_abi}), and no job runs without it: boot a kernel with CONFIG_SECURITY_LANDLOCK=y and landlock in lsm="
            )
        })?)
    };

    // Namespaces: a job with egress joins the one the runner serves; a `deny` job gets a
    // new, empty one; the layer matrix may leave the mount, pid or net namespace out.
    let join_netns = (egress && !leaves_out(Layer::NetNamespace)).then_some(NETNS_FD);
    let mut unshare = libc::CLONE_NEWIPC | libc::CLONE_NEWUTS | libc::CLONE_NEWCGROUP;
    // A time namespace where the kernel has them: its monotonic and boot clocks are set to
    // start near zero before pid 1 enters it, so `process.hrtime` and `/proc/uptime` do
    // not tell the job how long the host has been up.
    if time_namespace == TimeNamespace::Own {
        unshare |= libc::CLONE_NEWTIME;
    }
    let borrowed_time_namespace = time_namespace == TimeNamespace::InUserNamespace;
    for (layer, flag, new) in [
        (Layer::MountNamespace, libc::CLONE_NEWNS, true),
        (Layer::PidNamespace, libc::CLONE_NEWPID, true),
        (Layer::NetNamespace, libc::CLONE_NEWNET, !egress),
    ] {
        if new && !leaves_out(layer) {
            unshare |= flag;
        }
    }
    // The cgroup namespace is made by the job's first process in its cgroup: the init
    // stage, which joins by itself on v1; pid 1, made inside on v2.
    let pid_one_unshare = match &cgroup_join {
        CgroupJoin::Write { .. } => 0,
        CgroupJoin::CloneInto { .. } => unshare & libc::CLONE_NEWCGROUP,
    };
    unshare &= !pid_one_unshare;
    let root_steps = if leaves_out(Layer::MountNamespace) {
        RootSteps::FilesOnly
    } else if no_root {
        RootSteps::TmpfsOnly
    } else {
        RootSteps::Enter
    };

    let skill_files: Vec<PlanFile> = files
        .iter()
        .map(|(name, bytes)| PlanFile {
            name: name.clone(),
            bytes: bytes.clone(),
        })
        .collect();
    // The gate is the preload's, and its link is laid in a root the job enters.
    let start = if leaves_out(Layer::Preload) || root_steps != RootSteps::Enter {
        Start::Direct
    } else if warm {
        Start::Warm
    } else {
        Start::Gated
    };
    if warm && (!omit.is_empty() || fault.is_some() || root_steps != RootSteps::Enter) {
        return Err(
            "a warm sandbox is made only with the whole sandbox (no layer left out, no fault injected)"
                .into(),
        );
    }
    let mut preload = job_preload(preload, job.mem_bytes);
    if start != Start::Direct {
        preload.extend_from_slice(GATE_LINE.as_bytes());
    }
    let payload: u64 = files.iter().map(|(_, b)| b.len() as u64).sum::<u64>()
        + etc_files.iter().map(|f| f.bytes.len() as u64).sum::<u64>()
        + preload.len() as u64;
    let mut plan = Plan {
        job_id: job.job_id.clone(),
        cgroup_join,
        join_netns,
        unshare,
        pid_one_unshare,
        borrowed_time_namespace,
        root: paths.root.clone(),
        root_bytes: ROOT_TMPFS_SLACK + payload,
        root_steps,
        skill_files,
        start,
        main_link: (start == Start::Gated).then(|| job.entry.clone()),
        preload: PlanFile {
            name: "harden.cjs".into(),
            bytes: preload,
        },
        etc_files,
        mounts,
        hostname: "skill".to_string(),
        cwd: inside(SKILL_DIR),
        exe: rt.node.clone(),
        argv: node_argv_at(job, rt, &inside(SKILL_DIR), &inside(PRELOAD), start)
            .into_iter()
            .filter(|a| {
                let permission = is_node_hardening_flag(a) && !is_preload_flag(a);
                !(permission && leaves_out(Layer::NodePermission)
                    || is_preload_flag(a) && leaves_out(Layer::Preload))
            })
            .collect(),
        env: Vec::new(),
        nofile: NOFILE,
        core_bytes: CORE_BYTES,
        fsize_bytes: FSIZE_BYTES,
        privileges: (!leaves_out(Layer::Privileges)).then(|| Privileges {
            uid,
            gid: uid,
            groups: Vec::new(),
        }),
        landlock,
        exec_gate: if leaves_out(Layer::ExecGate) {
            ExecGateStep::CloseSocket
        } else {
            ExecGateStep::HandOver
        },
        seccomp: (!leaves_out(Layer::Seccomp)).then_some(filters),
        net: job.net,
        fault: None,
        omit,
        pid_one_pause_ms: 0,
        hand_over_pause_ms: 0,
    };
    if let Some(fault) = fault {
        inject(&mut plan, fault)?;
    }
    Ok(plan)
}

#[cfg(test)]
mod tests;
