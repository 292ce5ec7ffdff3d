//! The runner's configuration file (TOML). Every key has a default, so a missing file
//! is a valid configuration with skills off.

use serde::Deserialize;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

pub const DEFAULT_CONFIG_PATH: &str = "/etc/openvibe-skill-runner/config.toml";
pub const DEFAULT_STATE_DIR: &str = "/var/lib/openvibe-skill-runner";

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub worker: Worker,
    #[serde(default)]
    pub runner: RunnerConfig,
    #[serde(default)]
    pub daemon: DaemonConfig,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Worker {
    /// The artifacts this Link runs; the runner takes jobs only while its own is listed.
    #[serde(default)]
    pub functions: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerConfig {
    /// Job directories, the input cache and (for the daemon) the journal.
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// The Node binary; empty means: the pinned runtime where the install script puts it.
    #[serde(default)]
    pub node: Option<PathBuf>,
    /// Run Node 20 (end of life, `--experimental-permission` only). Off unless set.
    #[serde(default)]
    pub allow_node20: bool,
    /// Where `seccomp.json` and `egress.toml` live; empty means
    /// `/etc/openvibe-skill-runner/policies/` where a file is there, else the built-in one.
    #[serde(default)]
    pub policies_dir: Option<PathBuf>,
    /// Where the hardening preload `harden.cjs` lives; empty means
    /// `/etc/openvibe-skill-runner/runtime/` where the file is there, else the built-in one.
    #[serde(default)]
    pub runtime_dir: Option<PathBuf>,
    /// The cgroup under which job cgroups are made; empty means detect (see sandbox::cgroup).
    #[serde(default)]
    pub cgroup_parent: Option<PathBuf>,
    /// Processes and threads one job may hold (Node itself uses about a dozen threads).
    #[serde(default = "default_pids_max")]
    pub pids_max: u64,
    /// Jobs run as uid/gid `sandbox_uid_base + n`, an id no account on the host uses, with
    /// n below `sandbox_uid_count`; no two live jobs on the host share one
    /// (`sandbox::uids`). The range must lie within 65536..=2147483646.
    #[serde(default = "default_uid_base")]
    pub sandbox_uid_base: u32,
    #[serde(default = "default_uid_count")]
    pub sandbox_uid_count: u32,
    /// The input cache's size bound in bytes (least recently used entries go first);
    /// 0 keeps nothing.
    #[serde(default = "default_cache_max_bytes")]
    pub cache_max_bytes: u64,
    /// The largest `args.input` accepted, serialized (SPEC.md: 256 KiB, configurable).
    #[serde(default = "default_max_input")]
    pub max_input_json_bytes: usize,
    /// Tests of failing closed only: make this sandbox step fail to apply ("cgroup",
    /// "namespaces", "mounts", "capabilities", "landlock", "seccomp"). It can only make
    /// jobs fail, never run them with less.
    #[serde(default)]
    pub fault_inject: Option<crate::fault::Fault>,
    /// Tests of failing closed only: treat these layers as absent on this host
    /// ("landlock", "seccomp", "namespaces", "cgroups").
    #[serde(default)]
    pub pretend_missing: Vec<crate::fault::MissingLayer>,
    /// The layer matrix only: run every job without these layers of the sandbox
    /// (`fault::Layer`). Like the two keys above, only a build with the `test-hooks`
    /// feature accepts it.
    #[serde(default)]
    pub omit_layers: Vec<crate::fault::Layer>,
    /// The hostile suites with warm sandboxes only: every job the engine runs by itself
    /// (`run-job`, `run`) first warms a sandbox of its shape and is handed over to it, as
    /// the daemon's pool would. Only a build with the `test-hooks` feature accepts it.
    #[serde(default)]
    pub warm_every_job: bool,
    /// Tests of pid 1's shed only: pid 1 waits this long at the moment the tool could
    /// first run beside it, which widens the moment in which it could still hold what it
    /// sheds: a warm sandbox's pid 1 right after it reports the hand-over (the tool then
    /// runs), a cold job's right after it forked the tool, before it sheds. Only a build
    /// with the `test-hooks` feature accepts it.
    #[serde(default)]
    pub hand_over_pause_ms: u32,
    /// Jobs the daemon runs at once; 0 means the number of CPU cores.
    #[serde(default)]
    pub max_jobs: usize,
    /// Jobs waiting behind the running ones; 0 means twice `max_jobs`, at least 16.
    #[serde(default)]
    pub queue_len: usize,
    /// The DNS servers the egress proxy asks for the names jobs may reach ("IP" or
    /// "IP:port", read into addresses when the file is loaded); empty means the host's
    /// `/etc/resolv.conf`.
    #[serde(default)]
    pub dns_servers: Vec<DnsServer>,
    /// The Media service (`GET <media_url>/<media_id>`); unset means no fetch.
    #[serde(default)]
    pub media_url: Option<String>,
    /// How long the Media fetches of one job may take together, in milliseconds.
    #[serde(default = "default_media_timeout_ms")]
    pub media_timeout_ms: u64,
}

/// The daemon's own settings (`serve`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfig {
    /// The unix socket of the HTTP API.
    #[serde(default = "default_socket")]
    pub socket: PathBuf,
    /// The group that owns the socket (a name or a number); unset means root's group.
    #[serde(default)]
    pub socket_group: Option<String>,
    /// Callers admitted by peer credentials besides root.
    #[serde(default)]
    pub allow_uids: Vec<u32>,
    #[serde(default)]
    pub allow_gids: Vec<u32>,
    /// How long the journal keeps finished jobs' results (a pruned job keeps its id and end).
    #[serde(default = "default_retention_days")]
    pub retention_days: u64,
    /// How long running jobs may finish after SIGTERM before they are killed.
    #[serde(default = "default_grace_ms")]
    pub shutdown_grace_ms: u64,
    /// JSON log lines instead of text.
    #[serde(default)]
    pub log_json: bool,
    /// How long a client may take to send a request's headers (also an idle connection, and
    /// an answer it leaves unread).
    #[serde(default = "default_header_timeout_ms")]
    pub header_timeout_ms: u64,
    /// How long a client may take to send a request's body.
    #[serde(default = "default_body_timeout_ms")]
    pub body_timeout_ms: u64,
    /// The sandboxes kept ready for the next jobs (`daemon::pool`).
    #[serde(default)]
    pub warm: WarmConfig,
}

/// `[daemon.warm]`: which sandboxes the daemon keeps ready, and for how long. A warm
/// sandbox is every layer of a `deny` job's sandbox made and Node started, waiting for a
/// job of its `mem_bytes`; it is never counted against `max_jobs` or the queue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarmConfig {
    /// Off: every job runs cold, as the CLI's do.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The shapes always kept (`net` is always `deny`: a job with egress gets its own
    /// namespace when it starts), each with how many wait ready.
    #[serde(default = "default_warm_shapes")]
    pub shapes: Vec<WarmShape>,
    /// Up to this many more shapes, one sandbox each, taken from what recent `deny` jobs
    /// asked for (a `mem_bytes` asked for at least twice among the last 32 jobs).
    #[serde(default = "default_warm_learn")]
    pub learn: usize,
    /// A sandbox that has waited this long is replaced by a fresh one.
    #[serde(default = "default_warm_max_age_ms")]
    pub max_age_ms: u64,
}

/// One `[[daemon.warm.shapes]]` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarmShape {
    pub mem_bytes: u64,
    pub count: usize,
}

/// More warm sandboxes than this for one shape is a typo, not a plan: each holds a Node.
pub const WARM_COUNT_MAX: usize = 16;

fn default_true() -> bool {
    true
}
fn default_warm_shapes() -> Vec<WarmShape> {
    vec![WarmShape {
        mem_bytes: crate::job::MEM_BYTES_DEFAULT,
        count: 2,
    }]
}
fn default_warm_learn() -> usize {
    2
}
fn default_warm_max_age_ms() -> u64 {
    600_000
}

impl Default for WarmConfig {
    fn default() -> Self {
        WarmConfig {
            enabled: true,
            shapes: default_warm_shapes(),
            learn: default_warm_learn(),
            max_age_ms: default_warm_max_age_ms(),
        }
    }
}

impl WarmConfig {
    /// The text as a configuration the runner can use: it parses and has no
    /// [`Config::problem`]. The CLI, the daemon (at its start and on reload) and `skills`
    /// all judge a file by this one test.
    pub fn usable(text: &str) -> Result<Config, String> {
        let config = Config::parse(text).map_err(|e| e.to_string())?;
        match config.problem() {
            Some(problem) => Err(problem),
            None => Ok(config),
        }
    }

    /// A value that parses but cannot be used, named with what to change.
    pub fn problem(&self) -> Option<String> {
        use crate::job::{MEM_BYTES_CAP, MEM_BYTES_MIN};
        for (i, s) in self.shapes.iter().enumerate() {
            // The pool adds up the counts of one shape: each entry's cap would not hold.
            if self.shapes[..i].iter().any(|t| t.mem_bytes == s.mem_bytes) {
                return Some(format!(
                    "daemon.warm.shapes: mem_bytes {} is given twice; give each shape once, with its whole count",
                    s.mem_bytes
                ));
            }
            if !(MEM_BYTES_MIN..=MEM_BYTES_CAP).contains(&s.mem_bytes) {
                return Some(format!(
                    "daemon.warm.shapes: mem_bytes {} is outside the jobs' range {MEM_BYTES_MIN}..={MEM_BYTES_CAP}; no job could use such a sandbox",
                    s.mem_bytes
                ));
            }
            if s.count > WARM_COUNT_MAX {
                return Some(format!(
                    "daemon.warm.shapes: count {} for mem_bytes {} is above {WARM_COUNT_MAX}; each warm sandbox holds a started Node (about 50 MB)",
                    s.count, s.mem_bytes
                ));
            }
        }
        if self.learn > WARM_COUNT_MAX {
            return Some(format!(
                "daemon.warm.learn: {} is above {WARM_COUNT_MAX}",
                self.learn
            ));
        }
        if self.max_age_ms < 1000 {
            return Some(format!(
                "daemon.warm.max_age_ms: {} is below 1000; a sandbox would be replaced before it could serve",
                self.max_age_ms
            ));
        }
        None
    }
}

pub const DEFAULT_SOCKET: &str = "/run/openvibe-link/skill-runner.sock";

fn default_socket() -> PathBuf {
    PathBuf::from(DEFAULT_SOCKET)
}
fn default_retention_days() -> u64 {
    7
}
fn default_grace_ms() -> u64 {
    30_000
}
/// The shortest `daemon.header_timeout_ms` and `daemon.body_timeout_ms`.
pub const MIN_REQUEST_TIMEOUT_MS: u64 = 100;

/// The gid of `group` (a name or a number), for `daemon.socket_group`.
pub fn resolve_group(group: &str) -> Result<u32, String> {
    if let Ok(n) = group.parse::<u32>() {
        return Ok(n);
    }
    match nix::unistd::Group::from_name(group) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        Ok(None) => Err(format!(
            "daemon.socket_group {group:?}: no such group on this host; create it (groupadd) \
             or name an existing group"
        )),
        Err(e) => Err(format!(
            "daemon.socket_group {group:?}: the group cannot be looked up: {e}"
        )),
    }
}

fn default_header_timeout_ms() -> u64 {
    10_000
}
fn default_body_timeout_ms() -> u64 {
    30_000
}
fn default_media_timeout_ms() -> u64 {
    10_000
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: default_socket(),
            socket_group: None,
            allow_uids: Vec::new(),
            allow_gids: Vec::new(),
            retention_days: default_retention_days(),
            shutdown_grace_ms: default_grace_ms(),
            log_json: false,
            header_timeout_ms: default_header_timeout_ms(),
            body_timeout_ms: default_body_timeout_ms(),
            warm: WarmConfig::default(),
        }
    }
}

fn default_state_dir() -> PathBuf {
    PathBuf::from(DEFAULT_STATE_DIR)
}
fn default_pids_max() -> u64 {
    64
}
fn default_uid_base() -> u32 {
    2_100_000_000
}
fn default_uid_count() -> u32 {
    65_536
}
fn default_cache_max_bytes() -> u64 {
    256 * 1024 * 1024
}
fn default_max_input() -> usize {
    crate::job::INPUT_JSON_DEFAULT_CAP
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            state_dir: default_state_dir(),
            node: None,
            allow_node20: false,
            policies_dir: None,
            runtime_dir: None,
            cgroup_parent: None,
            pids_max: default_pids_max(),
            sandbox_uid_base: default_uid_base(),
            sandbox_uid_count: default_uid_count(),
            cache_max_bytes: default_cache_max_bytes(),
            max_input_json_bytes: default_max_input(),
            fault_inject: None,
            pretend_missing: Vec::new(),
            omit_layers: Vec::new(),
            warm_every_job: false,
            hand_over_pause_ms: 0,
            max_jobs: 0,
            queue_len: 0,
            dns_servers: Vec::new(),
            media_url: None,
            media_timeout_ms: default_media_timeout_ms(),
        }
    }
}

/// One `runner.dns_servers` entry, an address from the moment the file is read: `IP`
/// (port 53) or `IP:port` (`[v6]:port`). A name or a typo is refused when the configuration
/// loads, with the key and an example.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct DnsServer(pub SocketAddr);

impl TryFrom<String> for DnsServer {
    type Error = String;

    fn try_from(text: String) -> Result<DnsServer, String> {
        DnsServer::parse(&text)
    }
}

impl DnsServer {
    pub fn parse(text: &str) -> Result<DnsServer, String> {
        let text = text.trim();
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(DnsServer(SocketAddr::new(ip, 53)));
        }
        text.parse::<SocketAddr>().map(DnsServer).map_err(|_| {
            format!("runner.dns_servers: {text:?} is not an IP address or IP:port (e.g. \"192.0.2.53\" or \"[2001:db8::53]:53\")")
        })
    }
}

impl fmt::Display for DnsServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The most a configuration file may hold: the documented one is about 6 KiB.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// A configuration file's text, read no further than [`MAX_CONFIG_BYTES`] (a file named by
/// mistake, `/dev/zero`, is refused, not read into memory).
pub fn read_text(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_CONFIG_BYTES} bytes; is it the configuration file?"),
        ));
    }
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

impl Config {
    /// Reads the file; a missing file at the default path is the default configuration,
    /// a missing file that was named explicitly is an error.
    pub fn load(path: Option<&Path>) -> anyhow::Result<Config> {
        let (path, explicit) = match path {
            Some(p) => (p.to_path_buf(), true),
            None => (PathBuf::from(DEFAULT_CONFIG_PATH), false),
        };
        match read_text(&path) {
            Ok(text) => Config::usable(&text)
                .map_err(|e| anyhow::anyhow!("configuration {}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                Ok(Config::default())
            }
            Err(e) => Err(anyhow::anyhow!(
                "cannot read the configuration {}: {e}",
                path.display()
            )),
        }
    }

    pub fn parse(text: &str) -> Result<Config, toml::de::Error> {
        toml::from_str(text)
    }

    /// The text as a configuration the runner can use: it parses and has no
    /// [`Config::problem`]. The CLI, the daemon (at its start and on reload) and `skills`
    /// all judge a file by this one test.
    pub fn usable(text: &str) -> Result<Config, String> {
        let config = Config::parse(text).map_err(|e| e.to_string())?;
        match config.problem() {
            Some(problem) => Err(problem),
            None => Ok(config),
        }
    }

    /// A value that parses but cannot be used, named with what to change.
    pub fn problem(&self) -> Option<String> {
        crate::sandbox::uids::range_problem(
            self.runner.sandbox_uid_base,
            self.runner.sandbox_uid_count,
        )
        .or_else(|| self.hooks_problem())
        .or_else(|| self.daemon.warm.problem())
        .or_else(|| self.input_bound_problem())
        .or_else(|| self.limits_problem())
        .or_else(|| self.socket_group_problem())
    }

    /// Limits that would fail every job or cut off every request, or that the host's uids
    /// cannot hold.
    pub fn limits_problem(&self) -> Option<String> {
        if self.runner.pids_max == 0 {
            return Some(format!(
                "runner.pids_max: 0 fails every job at its setup (a job needs its own process \
                 and Node's threads); leave it out for the default {}",
                default_pids_max()
            ));
        }
        if self.runner.max_jobs as u64 > u64::from(self.runner.sandbox_uid_count) {
            return Some(format!(
                "runner.max_jobs: {} is more than runner.sandbox_uid_count ({}), and each \
                 running job holds a uid of its own; lower max_jobs (0 means one per CPU core) \
                 or raise the count",
                self.runner.max_jobs, self.runner.sandbox_uid_count
            ));
        }
        for (key, ms, default) in [
            (
                "daemon.header_timeout_ms",
                self.daemon.header_timeout_ms,
                default_header_timeout_ms(),
            ),
            (
                "daemon.body_timeout_ms",
                self.daemon.body_timeout_ms,
                default_body_timeout_ms(),
            ),
        ] {
            if ms < MIN_REQUEST_TIMEOUT_MS {
                return Some(format!(
                    "{key}: {ms} ms would cut requests off before they arrive; use at least \
                     {MIN_REQUEST_TIMEOUT_MS}, or leave it out for the default {default}"
                ));
            }
        }
        None
    }

    /// A `daemon.socket_group` that names no group of this host: the daemon could not give
    /// its socket to it, and would not start.
    pub fn socket_group_problem(&self) -> Option<String> {
        let group = self.daemon.socket_group.as_deref()?;
        resolve_group(group).err()
    }

    /// Callers the allow lists name who cannot reach the socket at all: without a socket
    /// group (`grouped`: the socket in use was given `daemon.socket_group`) the socket is
    /// root's group's (mode 0660), so only root can connect, and anyone else is refused by
    /// the kernel before any 403. A warning, for the daemon's log at start and on reload.
    pub fn unreachable_callers(&self, grouped: bool) -> Option<String> {
        let others = self.daemon.allow_uids.iter().any(|&u| u != 0)
            || self.daemon.allow_gids.iter().any(|&g| g != 0);
        (others && !grouped).then(|| {
            "daemon.allow_uids or daemon.allow_gids name callers other than root, but \
             daemon.socket_group is not set: the socket is root's group's (mode 0660), so \
             they cannot connect at all; set daemon.socket_group to a group they are in"
                .to_string()
        })
    }

    /// `runner.max_input_json_bytes` outside what a job can carry.
    pub fn input_bound_problem(&self) -> Option<String> {
        use crate::job::{INPUT_JSON_MAX_CAP, MAX_JOB_TEXT_BYTES};
        let bound = self.runner.max_input_json_bytes;
        if bound == 0 {
            return Some(
                "runner.max_input_json_bytes: 0 refuses every job (even an input of null); \
                 leave it out for the default 262144"
                    .to_string(),
            );
        }
        (bound > INPUT_JSON_MAX_CAP).then(|| {
            format!(
                "runner.max_input_json_bytes: {bound} is above {INPUT_JSON_MAX_CAP}: a job's whole \
                 text (its inputs as base64 included) is at most {MAX_JOB_TEXT_BYTES} bytes, so \
                 a larger input could never arrive; use at most {INPUT_JSON_MAX_CAP}"
            )
        })
    }

    /// A test hook set in a build that does not honour it (`fault::hooks_problem`).
    pub fn hooks_problem(&self) -> Option<String> {
        crate::fault::hooks_problem(
            self.runner.fault_inject,
            &self.runner.pretend_missing,
            &self.runner.omit_layers,
            self.runner.warm_every_job,
            self.runner.hand_over_pause_ms,
        )
    }

    /// Jobs run at once: `runner.max_jobs`, or the number of CPU cores.
    pub fn max_jobs(&self) -> usize {
        if self.runner.max_jobs > 0 {
            self.runner.max_jobs
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }

    /// Jobs waiting at most: `runner.queue_len`, or twice [`Config::max_jobs`] and at
    /// least 16, so that a dispatcher with a few jobs in flight is not turned away on a
    /// host with few cores.
    pub fn queue_len(&self) -> usize {
        if self.runner.queue_len > 0 {
            self.runner.queue_len
        } else {
            (self.max_jobs() * 2).max(16)
        }
    }

    /// Whether `text` lists the runner's artifact in `worker.functions`, read from that key
    /// alone: a file with a problem elsewhere still tells that it turns the runner off, and
    /// so does a `worker` or `worker.functions` of another shape (when in doubt, off).
    /// None only when the text is not TOML at all.
    pub fn lists_artifact(text: &str) -> Option<bool> {
        let doc: toml::Table = toml::from_str(text).ok()?;
        let functions = doc
            .get("worker")
            .and_then(|w| w.as_table())
            .and_then(|w| w.get("functions"))
            .and_then(|f| f.as_array());
        Some(functions.is_some_and(|f| f.iter().any(|v| v.as_str() == Some(crate::job::ARTIFACT))))
    }

    pub fn skills_on(&self) -> bool {
        self.worker
            .functions
            .iter()
            .any(|f| f == crate::job::ARTIFACT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whether_a_file_lists_the_artifact_is_read_from_worker_functions_alone() {
        let a = crate::job::ARTIFACT;
        for (text, listed) in [
            (String::new(), Some(false)),
            ("[runner]\nmax_job = 2\n".into(), Some(false)),
            ("[worker]\n".into(), Some(false)),
            (
                format!("[worker]\nfunctions = [\"{a}\"]\n[runner]\nmax_job = 2\n"),
                Some(true),
            ),
            (
                "[worker]\nfunctions = [\"other@1\"]\nx = 1\n".into(),
                Some(false),
            ),
            (format!("[worker]\nfunctions = [\"{a}\", 1]\n"), Some(true)),
            ("[worker]\nfunctions = [1]\n".into(), Some(false)),
            ("[worker]\nfunctions = \"x\"\n".into(), Some(false)),
            ("worker = 3\n".into(), Some(false)),
            ("[worker\n".into(), None),
        ] {
            assert_eq!(Config::lists_artifact(&text), listed, "{text}");
        }
    }

    #[test]
    fn limits_that_fail_every_job_or_request_are_refused_with_their_key() {
        let refused = |text: &str, key: &str| {
            let e = Config::usable(text).expect_err(text);
            assert!(e.contains(key), "{text}: {e}");
        };
        refused("[runner]\npids_max = 0\n", "runner.pids_max");
        refused(
            "[runner]\nmax_jobs = 17\nsandbox_uid_count = 16\n",
            "runner.max_jobs",
        );
        refused(
            "[runner]\nmax_jobs = 2305843009213693952\n",
            "runner.max_jobs",
        );
        refused(
            "[daemon]\nheader_timeout_ms = 0\n",
            "daemon.header_timeout_ms",
        );
        refused("[daemon]\nbody_timeout_ms = 99\n", "daemon.body_timeout_ms");
        let shape = "[[daemon.warm.shapes]]\nmem_bytes = 134217728\ncount = 16\n";
        refused(
            &shape.repeat(2),
            "daemon.warm.shapes: mem_bytes 134217728 is given twice",
        );
        refused(
            &shape.replace("count = 16", "count = 17"),
            "daemon.warm.shapes: count 17",
        );
        refused(
            "[daemon]\nsocket_group = \"no-such-group-of-this-test\"\n",
            "daemon.socket_group",
        );
        for fine in [
            "[runner]\npids_max = 9\nmax_jobs = 16\nsandbox_uid_count = 16\n",
            "[daemon]\nheader_timeout_ms = 100\nbody_timeout_ms = 100\n",
            "[daemon]\nsocket_group = \"root\"\n",
            "[daemon]\nsocket_group = \"4242\"\n",
            "[[daemon.warm.shapes]]\nmem_bytes = 134217728\ncount = 16\n\
             [[daemon.warm.shapes]]\nmem_bytes = 67108864\ncount = 16\n",
        ] {
            assert!(
                Config::usable(fine).is_ok(),
                "{fine}: {:?}",
                Config::usable(fine).err()
            );
        }
    }

    #[test]
    fn allow_lists_without_a_socket_group_are_warned_of() {
        let c = |text: &str| Config::usable(text).expect(text);
        let lists = c("[daemon]\nallow_uids = [1001]\n");
        let warned = lists.unreachable_callers(false).expect("a warning");
        assert!(warned.contains("daemon.socket_group"), "{warned}");
        assert_eq!(lists.unreachable_callers(true), None);
        assert!(c("[daemon]\nallow_gids = [1001]\n")
            .unreachable_callers(false)
            .is_some());
        assert_eq!(
            c("[daemon]\nallow_uids = [0]\n").unreachable_callers(false),
            None
        );
        assert_eq!(Config::default().unreachable_callers(false), None);
    }

    #[test]
    fn an_input_bound_no_job_could_reach_is_refused_with_the_largest_that_works() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("config.toml");
        let load = |bound: usize| {
            std::fs::write(&path, format!("[runner]\nmax_input_json_bytes = {bound}\n"))
                .expect("write the configuration");
            Config::load(Some(&path))
        };
        let max = crate::job::INPUT_JSON_MAX_CAP;
        assert_eq!(
            load(max).expect("the largest").runner.max_input_json_bytes,
            max
        );
        let e = load(max + 1).expect_err("above").to_string();
        assert!(
            e.contains("runner.max_input_json_bytes") && e.contains(&format!("at most {max}")),
            "{e}"
        );
        assert!(load(0)
            .expect_err("zero")
            .to_string()
            .contains("refuses every job"));
    }

    #[test]
    fn dns_servers_are_addresses_from_the_moment_the_file_is_read() {
        let c = Config::parse(
            "[runner]\ndns_servers = [\"192.0.2.53\", \" 192.0.2.53:5353 \", \"2001:db8::53\", \"[2001:db8::53]:54\"]\n",
        )
        .unwrap();
        let want: Vec<SocketAddr> = [
            "192.0.2.53:53",
            "192.0.2.53:5353",
            "[2001:db8::53]:53",
            "[2001:db8::53]:54",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        let got: Vec<SocketAddr> = c.runner.dns_servers.iter().map(|d| d.0).collect();
        assert_eq!(got, want);
        for bad in ["", "dns.example", "192.0.2.53:", "1.2.3.4:99999"] {
            let e = Config::parse(&format!("[runner]\ndns_servers = [{bad:?}]\n"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("runner.dns_servers") && e.contains(bad.trim()),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn empty_file_is_default_and_off() {
        let c = Config::parse("").unwrap();
        assert!(!c.skills_on());
        assert_eq!(c.runner.pids_max, 64);
        assert_eq!(c.runner.state_dir, PathBuf::from(DEFAULT_STATE_DIR));
    }

    #[test]
    fn on_when_artifact_listed() {
        let c = Config::parse("[worker]\nfunctions = [\"openvibe-skill-runner@1.0.0\"]\n").unwrap();
        assert!(c.skills_on());
        let c = Config::parse("[worker]\nfunctions = [\"openvibe-codes@1.0.0\"]\n").unwrap();
        assert!(!c.skills_on());
    }

    #[test]
    fn a_uid_range_outside_the_safe_one_is_refused_at_load() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        for (text, says) in [
            ("[runner]\nsandbox_uid_base = 1000\n", "below 65536"),
            (
                "[runner]\nsandbox_uid_base = 4294967295\n",
                "above 2147483646",
            ),
            (
                "[runner]\nsandbox_uid_base = 2147483000\nsandbox_uid_count = 1000\n",
                "above 2147483646",
            ),
            (
                "[runner]\nsandbox_uid_count = 0\n",
                "sandbox_uid_count is 0",
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = Config::load(Some(&path)).unwrap_err().to_string();
            assert!(
                err.contains(says) && err.contains("config.toml"),
                "{text}: {err}"
            );
        }
        std::fs::write(&path, "[runner]\nsandbox_uid_base = 3000000\n").unwrap();
        let c = Config::load(Some(&path)).unwrap();
        assert_eq!(c.runner.sandbox_uid_count, 65_536);
    }

    /// The packaged build (no `test-hooks` feature) refuses every test hook when it reads
    /// the file; a test build reads them.
    #[test]
    fn test_hooks_are_read_only_by_a_test_build() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        for text in [
            "[runner]\nfault_inject = \"landlock\"\n",
            "[runner]\npretend_missing = [\"cgroups\"]\n",
            "[runner]\nomit_layers = [\"seccomp\"]\n",
            "[runner]\nhand_over_pause_ms = 100\n",
        ] {
            std::fs::write(&path, text).unwrap();
            let loaded = Config::load(Some(&path));
            if crate::fault::HOOKS {
                assert!(loaded.is_ok(), "{text}: {loaded:?}");
            } else {
                let err = loaded.unwrap_err().to_string();
                assert!(
                    err.contains("test hook") && err.contains("config.toml"),
                    "{text}: {err}"
                );
            }
        }
    }

    #[test]
    fn unknown_key_is_an_error() {
        assert!(Config::parse("[runner]\npid_max = 3\n").is_err());
    }

    #[test]
    fn a_file_larger_than_a_configuration_is_refused_unread() {
        let e = Config::load(Some(Path::new("/dev/zero"))).expect_err("refused");
        assert!(e.to_string().contains("larger than 1048576 bytes"), "{e}");
    }
}
