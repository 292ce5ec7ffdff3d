//! The egress test network, built per test with iproute2 and removed in `Drop` (also on panic).
//! Three network namespaces, `<prefix>-link`, `-up` and `-lan`, joined by two veth pairs whose
//! ends are created inside them (nothing ever appears on the host's):
//!
//! - **LINK**, where the runner under test runs: `100.127.0.1/32` on the veth to UP with a
//!   route to `203.0.113.0/24`; `10.77.0.1/24` on the veth to LAN with a route to
//!   `169.254.169.254/32`; `lo`. Sinks: HTTP on `127.0.0.1:80` (`"link-loopback"`),
//!   `100.127.0.1:80` and `10.77.0.1:80` (`"link-own"`); TCP 22, 443, 8080; UDP 53, 123, 9999;
//!   ICMP and ICMPv6 echo.
//! - **UP**, the public internet: `203.0.113.10/24` runs HTTP :80 and HTTPS :443 (Node,
//!   `upstream.js`), `203.0.113.53/24` the DNS upstream (UDP and TCP 53, `dns.rs`); a route back
//!   to `100.127.0.1`. Sinks: TCP 22, 25, 853, 8080, 8443; UDP `203.0.113.10:53` and 9, 123,
//!   443, 5353, 9999; ICMP and ICMPv6 echo.
//! - **LAN**, a private host that also holds the cloud metadata address: `10.77.0.2/24` and
//!   `169.254.169.254/32`. Sinks: HTTP :80 (`"lan"`); TCP 22, 443, 8080; UDP 53, 123, 9999;
//!   ICMP and ICMPv6 echo.
//!
//! LINK's upstream-facing address is a /32 (CGNAT, denied anyway) with a route to the upstream
//! /24, so the Link's own networks (every address of LINK with its prefix) do not contain the
//! upstream hosts, while the LAN's /24 and loopback are the Link's own. Everything in LAN and
//! LINK, and every port of UP but 80/443 (and DNS on 53, which only the runner may ask), is a
//! *sink*: it counts every connection, datagram and ICMP echo request it gets, and the
//! HTTP sinks answer with a body naming themselves. A test asserts the sinks got nothing.
//!
//! The upstream HTTP(S) server is Node (`upstream.js`) with a certificate made now with the
//! `openssl` CLI; the DNS upstream (`dns.rs`) and the sinks are threads of the test process that
//! entered the namespace (`setns` is per thread). The runner under test runs in LINK through
//! `nsenter --net` (not `ip netns exec`, which remounts /sys and hides the cgroup mounts).

use super::dns::{self as updns, DnsLog};
use crate::common::*;
use nix::poll::{poll, PollFd, PollFlags};
use nix::sched::CloneFlags;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const UPSTREAM_IP: &str = "203.0.113.10";
pub const DNS_IP: &str = "203.0.113.53";
pub const LAN_IP: &str = "10.77.0.2";
pub const METADATA_IP: &str = "169.254.169.254";
pub const LINK_UP_IP: &str = "100.127.0.1";
pub const LINK_LAN_IP: &str = "10.77.0.1";
/// A network of the Link's with public addresses (a company's LAN) that its own address
/// does not show: the Link holds `ROUTED_LINK_IP` as a /32 (as DHCPv6 gives a /128) and
/// reaches the network by a route of its own, on the LAN's side.
pub const ROUTED_NET: &str = "93.184.215.0/24";
pub const ROUTED_LINK_IP: &str = "93.184.215.1";
pub const ROUTED_LAN_IP: &str = "93.184.215.2";
/// A range the Link takes as its own on `lo` (a `local` route, as proxies and anycast
/// services set up): no interface holds an address in it, and the Link answers them all.
pub const ANYIP_NET: &str = "93.184.216.0/24";
pub const ANYIP_IP: &str = "93.184.216.7";
pub const NODE: &str = openvibe_skill_runner::runtime::PINNED_PATH;

/// Every name on the upstream's certificate: the allowed ones and the ones that resolve to
/// internal addresses too, so that a proxy that wrongly let one through would show a real
/// handshake with the upstream, not a certificate error that hides the leak.
pub const CERT_NAMES: &[&str] = &[
    "api.openvibe.services",
    "www.openvibe.services",
    "pub.upstream.net",
    "evil.upstream.net",
    "rebind.upstream.net",
    "lan.upstream.net",
    "meta.upstream.net",
    "loop.upstream.net",
    "mixed.upstream.net",
    "mapped.upstream.net",
    "nsp.upstream.net",
    "nsp-meta.upstream.net",
];

/// How the message of every refusal the runner sends on port 80 starts (in its JSON body).
pub const REFUSAL: &str = "openvibe-skill-runner refused this connection:";

static FIXTURES: AtomicU32 = AtomicU32::new(0);

/// One test's network, its peers and a runner configuration pointing at them.
pub struct EgressNet {
    /// `ovsr-<pid>-<n>`: every namespace of this fixture starts with it.
    pub prefix: String,
    pub link: String,
    pub up: String,
    pub lan: String,
    /// Job ids are `<job_prefix>-<k>` (for `assert_host_clean`).
    pub job_prefix: String,
    veth_prefix: String,
    namespaces: Vec<String>,
    inodes: Vec<u64>,
    pub dir: tempfile::TempDir,
    pub state: State,
    pub config: PathBuf,
    /// The upstream certificate (self-signed), PEM: the `ca` a tool passes to trust it.
    pub ca: String,
    pub dns: Arc<DnsLog>,
    hits: Arc<Mutex<BTreeMap<String, u64>>>,
    upstream: Option<Child>,
    upstream_log: Arc<Mutex<Vec<Value>>>,
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    jobs: AtomicU32,
    done: bool,
}

/// What must be the same before and after a job: nothing added on the host or in LINK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    root_links: BTreeSet<String>,
    netns: BTreeSet<String>,
    link_links: BTreeSet<String>,
    link_sockets: BTreeSet<String>,
}

impl EgressNet {
    /// Builds the network and starts every peer. Fails (never skips) when a tool is missing.
    pub fn new(job_prefix: &str) -> EgressNet {
        require_host();
        require_tools();
        remove_stale_namespaces();
        let pid = std::process::id();
        let n = FIXTURES.fetch_add(1, Ordering::SeqCst);
        let prefix = format!("ovsr-{pid}-{n}");
        let dir = tempfile::Builder::new()
            .prefix("ovsr-egress-")
            .tempdir()
            .expect("fixture temp dir");
        let mut net = EgressNet {
            link: format!("{prefix}-link"),
            up: format!("{prefix}-up"),
            lan: format!("{prefix}-lan"),
            prefix,
            job_prefix: job_prefix.to_string(),
            veth_prefix: format!("ov{pid:x}x{n:x}"),
            namespaces: Vec::new(),
            inodes: Vec::new(),
            config: dir.path().join("config.toml"),
            dir,
            state: State::new(),
            ca: String::new(),
            dns: Arc::new(DnsLog::default()),
            hits: Arc::new(Mutex::new(BTreeMap::new())),
            upstream: None,
            upstream_log: Arc::new(Mutex::new(Vec::new())),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Arc::new(Mutex::new(Vec::new())),
            jobs: AtomicU32::new(0),
            done: false,
        };
        net.build_network();
        net.write_certificate();
        net.write_configuration();
        net.start_sinks_and_dns();
        net.start_upstream();
        net
    }

    fn build_network(&mut self) {
        for ns in [self.link.clone(), self.up.clone(), self.lan.clone()] {
            run(&["ip", "netns", "add", &ns]);
            self.namespaces.push(ns.clone());
            let ino = fs::metadata(ns_path(&ns))
                .expect("stat the namespace")
                .ino();
            self.inodes.push(ino);
        }
        let (link, up, lan) = (self.link.as_str(), self.up.as_str(), self.lan.as_str());
        let v = &self.veth_prefix;
        // Both ends are created inside the namespaces: nothing ever exists on the host's.
        ip(
            link,
            &format!("link add {v}lu type veth peer name {v}ul netns {up}"),
        );
        ip(
            link,
            &format!("link add {v}ln type veth peer name {v}nl netns {lan}"),
        );
        for ns in [link, up, lan] {
            ip(ns, "link set lo up");
        }
        // LINK: a /32 towards the upstream, which is its default route (the internet); the
        // LAN's /24; a /32 in the routed network and the route to it; metadata.
        ip(link, &format!("addr add {LINK_UP_IP}/32 dev {v}lu"));
        ip(link, &format!("link set {v}lu up"));
        ip(link, &format!("route add default dev {v}lu"));
        ip(link, &format!("addr add {LINK_LAN_IP}/24 dev {v}ln"));
        ip(link, &format!("addr add {ROUTED_LINK_IP}/32 dev {v}ln"));
        ip(link, &format!("link set {v}ln up"));
        ip(link, &format!("route add {ROUTED_NET} dev {v}ln"));
        ip(link, &format!("route add {METADATA_IP}/32 dev {v}ln"));
        ip(link, &format!("route add local {ANYIP_NET} dev lo"));
        // UP: the public host and the DNS upstream, and the way back to LINK.
        ip(up, &format!("addr add {UPSTREAM_IP}/24 dev {v}ul"));
        ip(up, &format!("addr add {DNS_IP}/24 dev {v}ul"));
        ip(up, &format!("link set {v}ul up"));
        ip(up, &format!("route add {LINK_UP_IP}/32 dev {v}ul"));
        // LAN: a private host that also holds the cloud metadata address.
        ip(lan, &format!("addr add {LAN_IP}/24 dev {v}nl"));
        ip(lan, &format!("addr add {ROUTED_LAN_IP}/24 dev {v}nl"));
        ip(lan, &format!("addr add {METADATA_IP}/32 dev {v}nl"));
        ip(lan, &format!("link set {v}nl up"));
    }

    fn write_certificate(&mut self) {
        let san: Vec<String> = CERT_NAMES
            .iter()
            .map(|n| format!("DNS:{n}"))
            .chain([format!("IP:{UPSTREAM_IP}")])
            .collect();
        let d = self.dir.path();
        run(&[
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &d.join("key.pem").display().to_string(),
            "-out",
            &d.join("cert.pem").display().to_string(),
            "-days",
            "2",
            "-subj",
            "/CN=ovsr-egress-upstream",
            "-addext",
            &format!("subjectAltName={}", san.join(",")),
        ]);
        self.ca = fs::read_to_string(d.join("cert.pem")).expect("read the certificate");
        assert!(self.ca.starts_with("-----BEGIN CERTIFICATE-----"));
    }

    fn write_configuration(&mut self) {
        let policies = self.dir.path().join("policies");
        fs::create_dir(&policies).expect("policies dir");
        fs::copy(
            repo().join("policies/seccomp.json"),
            policies.join("seccomp.json"),
        )
        .expect("copy seccomp.json");
        let shipped =
            fs::read_to_string(repo().join("policies/egress.toml")).expect("read egress.toml");
        fs::write(policies.join("egress.toml"), test_egress_policy(&shipped))
            .expect("write egress.toml");
        let config = format!(
            "[runner]\npolicies_dir = {}\ndns_servers = [\"{DNS_IP}\"]\n",
            toml_string(&policies.display().to_string())
        );
        fs::write(&self.config, hermetic(&config)).expect("write config.toml");
    }

    fn start_sinks_and_dns(&mut self) {
        let mut sinks: Vec<Sink> = Vec::new();
        sinks.extend(in_netns(&self.link, || {
            let mut s = vec![
                Sink::tcp("link", "127.0.0.1:80", Some("link-loopback")),
                Sink::tcp("link", &format!("{LINK_UP_IP}:80"), Some("link-own")),
                Sink::tcp("link", &format!("{LINK_LAN_IP}:80"), Some("link-own")),
                Sink::tcp("link", &format!("{ANYIP_IP}:80"), Some("link-own")),
            ];
            for p in [22, 443, 8080] {
                s.push(Sink::tcp("link", &format!("0.0.0.0:{p}"), None));
            }
            for p in [53, 123, 9999] {
                s.push(Sink::udp("link", &format!("0.0.0.0:{p}")));
            }
            s.push(Sink::icmp("link", false));
            s.push(Sink::icmp("link", true));
            s
        }));
        sinks.extend(in_netns(&self.lan, || {
            let mut s = vec![Sink::tcp("lan", "0.0.0.0:80", Some("lan"))];
            for p in [22, 443, 8080] {
                s.push(Sink::tcp("lan", &format!("0.0.0.0:{p}"), None));
            }
            for p in [53, 123, 9999] {
                s.push(Sink::udp("lan", &format!("0.0.0.0:{p}")));
            }
            s.push(Sink::icmp("lan", false));
            s.push(Sink::icmp("lan", true));
            s
        }));
        sinks.extend(in_netns(&self.up, || {
            let mut s = Vec::new();
            for p in [22, 25, 853, 8080, 8443] {
                s.push(Sink::tcp("up", &format!("0.0.0.0:{p}"), None));
            }
            for p in [9, 123, 443, 5353, 9999] {
                s.push(Sink::udp("up", &format!("0.0.0.0:{p}")));
            }
            s.push(Sink::icmp("up", false));
            s.push(Sink::icmp("up", true));
            s.push(Sink::udp("up", &format!("{UPSTREAM_IP}:53")));
            // The DNS upstream itself: not a sink, it answers. Bound to its own address, so
            // that its answers come from the address asked (a resolver drops others).
            let udp = UdpSocket::bind((DNS_IP, 53)).expect("bind the DNS upstream (udp)");
            udp.set_nonblocking(true).expect("nonblocking");
            let tcp = TcpListener::bind((DNS_IP, 53)).expect("bind the DNS upstream (tcp)");
            tcp.set_nonblocking(true).expect("nonblocking");
            s.push(Sink {
                ns: "up",
                label: None,
                sock: SinkSock::DnsUdp(udp),
            });
            s.push(Sink {
                ns: "up",
                label: None,
                sock: SinkSock::DnsTcp(tcp),
            });
            s
        }));
        let ctx = SinkContext {
            hits: self.hits.clone(),
            dns: self.dns.clone(),
            stop: self.stop.clone(),
            threads: self.threads.clone(),
        };
        let handle = std::thread::spawn(move || serve_sinks(sinks, ctx));
        self.threads.lock().expect("threads").push(handle);
    }

    fn start_upstream(&mut self) {
        let script = self.dir.path().join("upstream.js");
        fs::write(&script, include_str!("upstream.js")).expect("write upstream.js");
        let err_path = self.dir.path().join("upstream.stderr");
        let mut child = Command::new("nsenter")
            .arg(format!("--net={}", ns_path(&self.up).display()))
            .arg("--")
            .arg(NODE)
            .arg(&script)
            .arg(self.dir.path())
            .arg(UPSTREAM_IP)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(&err_path).expect("upstream stderr file"))
            .spawn()
            .expect("start the upstream server");
        let stdout = child.stdout.take().expect("upstream stdout");
        self.upstream = Some(child);
        let (tx, rx) = std::sync::mpsc::channel();
        let log = self.upstream_log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line == "ready" {
                    let _ = tx.send(());
                } else if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    log.lock().unwrap_or_else(|p| p.into_inner()).push(v);
                }
            }
        });
        self.threads.lock().expect("threads").push(reader);
        if rx.recv_timeout(Duration::from_secs(15)).is_err() {
            panic!(
                "the upstream server did not start: {}",
                fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
    }

    // ---- running jobs ---------------------------------------------------------------------

    /// The job `run` would build from `test-skills/<skill>` for `tool`, with this `net` and
    /// input, and an id `<job_prefix>-<k>`.
    pub fn skill_job(&self, skill: &str, tool: &str, net: &str, input: Value) -> Value {
        use base64::Engine as _;
        let dir = repo().join("test-skills").join(skill);
        let manifest: Value =
            serde_json::from_slice(&fs::read(dir.join("skill.json")).expect("read skill.json"))
                .expect("skill.json is JSON");
        let entry = manifest["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .find(|t| t["name"] == tool)
            .unwrap_or_else(|| panic!("{skill} has no tool {tool}"))["entry"]
            .as_str()
            .expect("entry")
            .to_string();
        let mut files = Vec::new();
        collect_files(&dir, &dir, &mut files);
        files.sort();
        let inputs: Vec<Value> = files
            .iter()
            .map(|(name, bytes)| {
                json!({
                    "name": name,
                    "media_id": "med_test",
                    "sha256": sha(bytes),
                    "content_base64": base64::engine::general_purpose::STANDARD.encode(bytes),
                })
            })
            .collect();
        let k = self.jobs.fetch_add(1, Ordering::SeqCst);
        json!({
            "job_id": format!("{}-{k}", self.job_prefix),
            "class": "function",
            "artifact": "openvibe-skill-runner@1.0.0",
            "args": {"tool": tool, "entry": entry, "input": input},
            "inputs": inputs,
            "net": net,
            "limits": {"wall_ms": 20000, "mem_bytes": 134217728}
        })
    }

    /// Runs a tool of a test skill in LINK; returns the result. The job must end `ok` with
    /// its `net` echoed: every hostile tool reports rather than fails.
    pub fn run(&self, skill: &str, tool: &str, net: &str, input: Value) -> Value {
        let r = self.run_job(&self.skill_job(skill, tool, net, input));
        assert_status(&r, "ok", None);
        assert_eq!(r["net"], net, "{r}");
        assert!(r["egress"].is_array(), "{r}");
        r
    }

    /// Runs `run-job -` in LINK with the fixture's configuration; returns the result, after
    /// checking that nothing of the job is left: no job directory or mount (State), no
    /// namespace, link or listener added on the host or in LINK.
    pub fn run_job(&self, job: &Value) -> Value {
        let before = self.snapshot();
        let mut child = Command::new("nsenter")
            .arg(format!("--net={}", ns_path(&self.link).display()))
            .arg("--")
            .arg(BIN)
            .arg("--config")
            .arg(&self.config)
            .arg("--state-dir")
            .arg(self.state.path())
            .arg("run-job")
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the runner in LINK");
        let pid = child.id();
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(&serde_json::to_vec(job).expect("job json"))
            .expect("write the job");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let out = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(out) => out.expect("wait for the runner"),
            Err(_) => {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                panic!("the runner did not end within 60 s (killed)");
            }
        };
        assert_eq!(
            out.status.code(),
            Some(0),
            "run-job exits 0 whenever it printed a result; stdout: {}; stderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let result = parse_result(&out.stdout);
        self.settle_upstream_log();
        self.state.assert_clean();
        let after = self.snapshot();
        assert_same(&before, &after);
        result
    }

    // ---- what the peers saw -----------------------------------------------------------------

    /// The upstream logs a request before it answers, but the line reaches the log through a
    /// pipe and a thread: wait until the log stops growing (at most a second).
    fn settle_upstream_log(&self) {
        let len = || {
            self.upstream_log
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .len()
        };
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut last = len();
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(30));
            let now = len();
            if now == last {
                break;
            }
            last = now;
        }
    }

    /// Every request the upstream HTTP(S) server got, in order.
    pub fn upstream_requests(&self) -> Vec<Value> {
        self.upstream_log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// What every sink got: "<ns> <proto> <local address> from <peer>" -> count.
    pub fn hits(&self) -> BTreeMap<String, u64> {
        self.hits.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn reset_hits(&self) {
        self.hits.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// No sink (LAN, metadata, the Link's loopback and own addresses, other ports and UDP of
    /// the upstream, ICMP anywhere) got anything.
    pub fn assert_no_hits(&self) {
        // A packet in flight reaches its sink within the poll interval.
        std::thread::sleep(Duration::from_millis(120));
        let hits = self.hits();
        assert!(
            hits.is_empty(),
            "a place no job may reach was reached: {hits:#?}"
        );
    }

    /// Runs `f` on a thread inside LINK (as the runner's proxy would connect).
    pub fn in_link<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        in_netns(&self.link, f)
    }

    pub fn snapshot(&self) -> Snapshot {
        let link = self.link.clone();
        Snapshot {
            root_links: ours_or_no_suites(link_names(&["ip", "-o", "link", "show"])),
            netns: ours_or_no_suites(netns_names()),
            link_links: link_names(&["ip", "-n", &self.link, "-o", "link", "show"]),
            link_sockets: in_netns(&link, local_sockets),
        }
    }

    // ---- the end ------------------------------------------------------------------------------

    /// Asserts that no sink was reached, removes everything, and asserts nothing is left: no
    /// namespace of the fixture by name, no process or thread in any of them (a namespace,
    /// and the veths in it, lives as long as something holds it), no veth on the host.
    pub fn finish(mut self) {
        self.assert_no_hits();
        let problems = self.stop_peers();
        assert!(problems.is_empty(), "stopping the peers: {problems:?}");
        // While the namespaces are still mounted, so their inode numbers are theirs alone
        // (a namespace made once one is freed gets its number: a job of a test beside).
        let mut holders = namespace_holders(&self.inodes);
        let deadline = Instant::now() + Duration::from_secs(3);
        while !holders.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            holders = namespace_holders(&self.inodes);
        }
        assert!(
            holders.is_empty(),
            "tasks still in the fixture's namespaces: {holders:?}"
        );
        let problems = self.teardown();
        assert!(problems.is_empty(), "tearing down: {problems:?}");
        let names: Vec<String> = netns_names()
            .into_iter()
            .filter(|n| n.starts_with(&format!("{}-", self.prefix)))
            .collect();
        assert!(names.is_empty(), "namespaces left: {names:?}");
        let veths: Vec<String> = link_names(&["ip", "-o", "link", "show"])
            .into_iter()
            .filter(|n| n.starts_with(&self.veth_prefix))
            .collect();
        assert!(veths.is_empty(), "veths left on the host: {veths:?}");
    }

    fn teardown(&mut self) -> Vec<String> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        let mut problems = self.stop_peers();
        for ns in self.namespaces.iter().rev() {
            let out = Command::new("ip").args(["netns", "del", ns]).output();
            match out {
                Ok(o) if o.status.success() => {}
                Ok(o) => problems.push(format!(
                    "ip netns del {ns}: {}",
                    String::from_utf8_lossy(&o.stderr)
                )),
                Err(e) => problems.push(format!("ip netns del {ns}: {e}")),
            }
        }
        self.namespaces.clear();
        problems
    }

    /// Stops the upstream and every thread of the fixture (again: nothing left to stop).
    fn stop_peers(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        self.stop.store(true, Ordering::SeqCst);
        if let Some(mut child) = self.upstream.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        loop {
            let batch: Vec<JoinHandle<()>> =
                std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
            if batch.is_empty() {
                break;
            }
            for t in batch {
                if t.join().is_err() {
                    problems.push("a fixture thread panicked".to_string());
                }
            }
        }
        problems
    }
}

impl Drop for EgressNet {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

// ---- the sinks and the DNS upstream ---------------------------------------------------------

enum SinkSock {
    Tcp(TcpListener),
    Udp(UdpSocket),
    Icmp { fd: OwnedFd, v6: bool },
    DnsUdp(UdpSocket),
    DnsTcp(TcpListener),
}

struct Sink {
    ns: &'static str,
    /// HTTP sinks answer `{"server":"<label>"}`.
    label: Option<&'static str>,
    sock: SinkSock,
}

impl Sink {
    fn tcp(ns: &'static str, addr: &str, label: Option<&'static str>) -> Sink {
        let l =
            TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind sink {ns} tcp {addr}: {e}"));
        l.set_nonblocking(true).expect("nonblocking");
        Sink {
            ns,
            label,
            sock: SinkSock::Tcp(l),
        }
    }

    fn udp(ns: &'static str, addr: &str) -> Sink {
        let s = UdpSocket::bind(addr).unwrap_or_else(|e| panic!("bind sink {ns} udp {addr}: {e}"));
        s.set_nonblocking(true).expect("nonblocking");
        Sink {
            ns,
            label: None,
            sock: SinkSock::Udp(s),
        }
    }

    /// A raw ICMP (or ICMPv6) socket: it sees every ICMP packet the namespace receives.
    fn icmp(ns: &'static str, v6: bool) -> Sink {
        let (domain, proto) = if v6 {
            (libc::AF_INET6, libc::IPPROTO_ICMPV6)
        } else {
            (libc::AF_INET, libc::IPPROTO_ICMP)
        };
        // SAFETY: socket(2) with constant arguments; the descriptor is owned at once.
        let fd = unsafe {
            libc::socket(
                domain,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                proto,
            )
        };
        assert!(
            fd >= 0,
            "raw ICMP socket in {ns}: {}",
            std::io::Error::last_os_error()
        );
        Sink {
            ns,
            label: None,
            // SAFETY: fd is a fresh descriptor nothing else owns.
            sock: SinkSock::Icmp {
                fd: unsafe { OwnedFd::from_raw_fd(fd) },
                v6,
            },
        }
    }

    fn fd(&self) -> BorrowedFd<'_> {
        match &self.sock {
            SinkSock::Tcp(l) | SinkSock::DnsTcp(l) => l.as_fd(),
            SinkSock::Udp(s) | SinkSock::DnsUdp(s) => s.as_fd(),
            SinkSock::Icmp { fd, .. } => fd.as_fd(),
        }
    }
}

struct SinkContext {
    hits: Arc<Mutex<BTreeMap<String, u64>>>,
    dns: Arc<DnsLog>,
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl SinkContext {
    fn hit(&self, key: String) {
        *self
            .hits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_insert(0) += 1;
    }

    fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        let t = std::thread::spawn(f);
        self.threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(t);
    }
}

fn serve_sinks(sinks: Vec<Sink>, ctx: SinkContext) {
    while !ctx.stop.load(Ordering::SeqCst) {
        let ready: Vec<usize> = {
            let mut fds: Vec<PollFd> = sinks
                .iter()
                .map(|s| PollFd::new(s.fd(), PollFlags::POLLIN))
                .collect();
            if poll(&mut fds, 50u16).unwrap_or(0) <= 0 {
                continue;
            }
            fds.iter()
                .enumerate()
                .filter(|(_, f)| f.revents().is_some_and(|r| !r.is_empty()))
                .map(|(i, _)| i)
                .collect()
        };
        for i in ready {
            serve_one(&sinks[i], &ctx);
        }
    }
}

fn serve_one(sink: &Sink, ctx: &SinkContext) {
    let ns = sink.ns;
    match &sink.sock {
        SinkSock::Tcp(l) => {
            while let Ok((stream, peer)) = l.accept() {
                let local = stream
                    .local_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                ctx.hit(format!("{ns} tcp {local} from {}", peer.ip()));
                if let Some(label) = sink.label {
                    ctx.spawn(move || answer_http(stream, label));
                }
            }
        }
        SinkSock::Udp(s) => {
            let mut buf = [0u8; 2048];
            let local = s.local_addr().map(|a| a.to_string()).unwrap_or_default();
            while let Ok((_, peer)) = s.recv_from(&mut buf) {
                ctx.hit(format!("{ns} udp {local} from {}", peer.ip()));
            }
        }
        SinkSock::Icmp { fd, v6 } => {
            let mut buf = [0u8; 2048];
            loop {
                // SAFETY: recv into a buffer of the given length on a descriptor we own.
                let n = unsafe {
                    libc::recv(
                        fd.as_raw_fd(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if n <= 0 {
                    break;
                }
                let packet = &buf[..n as usize];
                if *v6 {
                    if packet.first() == Some(&128) {
                        ctx.hit(format!("{ns} icmpv6 echo-request"));
                    }
                } else if let Some(&vihl) = packet.first() {
                    let ihl = usize::from(vihl & 0x0f) * 4;
                    if packet.get(ihl) == Some(&8) && packet.len() >= 20 {
                        let src = Ipv4Addr::new(packet[12], packet[13], packet[14], packet[15]);
                        ctx.hit(format!("{ns} icmp echo-request from {src}"));
                    }
                }
            }
        }
        SinkSock::DnsUdp(s) => {
            let mut buf = [0u8; 4096];
            while let Ok((n, peer)) = s.recv_from(&mut buf) {
                if let Some(answer) = updns::respond(&ctx.dns, &buf[..n]) {
                    let _ = s.send_to(&answer, peer);
                }
            }
        }
        SinkSock::DnsTcp(l) => {
            while let Ok((stream, _)) = l.accept() {
                let dns = ctx.dns.clone();
                ctx.spawn(move || answer_dns_tcp(stream, &dns));
            }
        }
    }
}

fn answer_http(mut stream: TcpStream, label: &str) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") && got.len() < 8192 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let body = format!("{{\"server\":\"{label}\"}}");
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn answer_dns_tcp(mut stream: TcpStream, dns: &DnsLog) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    loop {
        let mut len = [0u8; 2];
        if stream.read_exact(&mut len).is_err() {
            return;
        }
        let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
        if stream.read_exact(&mut msg).is_err() {
            return;
        }
        let Some(answer) = updns::respond(dns, &msg) else {
            return;
        };
        let mut framed = (answer.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&answer);
        if stream.write_all(&framed).is_err() {
            return;
        }
    }
}

// ---- helpers for tests that check the fixture itself (run inside LINK with `in_link`) -------

/// One DNS question over UDP to `server:53`: the response code and the addresses.
pub fn dns_ask(
    server: &str,
    name: &str,
    qtype: hickory_proto::rr::RecordType,
) -> (hickory_proto::op::ResponseCode, Vec<IpAddr>) {
    let s = UdpSocket::bind("0.0.0.0:0").expect("bind");
    s.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    // Connected, as a resolver's socket is: an answer from another address is dropped.
    s.connect((server, 53)).expect("connect");
    s.send(&updns::query(0x5151, name, qtype))
        .expect("send a query");
    let mut buf = [0u8; 4096];
    let n = s.recv(&mut buf).expect("an answer from the DNS upstream");
    updns::parse_answer(&buf[..n])
}

/// The same over TCP.
pub fn dns_ask_tcp(
    server: &str,
    name: &str,
    qtype: hickory_proto::rr::RecordType,
) -> (hickory_proto::op::ResponseCode, Vec<IpAddr>) {
    let mut s = TcpStream::connect_timeout(
        &SocketAddr::new(server.parse().expect("ip"), 53),
        Duration::from_secs(2),
    )
    .expect("connect to the DNS upstream over TCP");
    s.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let q = updns::query(0x5252, name, qtype);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    s.write_all(&framed).expect("send");
    let mut len = [0u8; 2];
    s.read_exact(&mut len).expect("length");
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut msg).expect("answer");
    updns::parse_answer(&msg)
}

/// A plain HTTP/1.1 GET to `addr:80` with this Host; the status and the body.
pub fn http_get(addr: &str, host: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(
        &SocketAddr::new(addr.parse().expect("ip"), 80),
        Duration::from_secs(2),
    )
    .unwrap_or_else(|e| panic!("connect to {addr}:80: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// One ICMP echo request to `dst` from a raw socket (the namespace of the calling thread).
pub fn send_icmp_echo(dst: Ipv4Addr) {
    // SAFETY: socket(2) with constant arguments; owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::IPPROTO_ICMP,
        )
    };
    assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
    // SAFETY: fd is fresh and owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut packet = [8u8, 0, 0, 0, 0x4f, 0x56, 0, 1, b'o', b'v', b's', b'r'];
    let mut sum: u32 = 0;
    for pair in packet.chunks(2) {
        sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let check = !(sum as u16);
    packet[2..4].copy_from_slice(&check.to_be_bytes());
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(dst).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sendto with a valid buffer and a sockaddr_in of the size given.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            packet.as_ptr().cast(),
            packet.len(),
            0,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(
        n,
        packet.len() as isize,
        "send an ICMP echo: {}",
        std::io::Error::last_os_error()
    );
}

/// Runs the pinned Node on `script` inside namespace `ns` (with `nsenter --net`), the script's
/// stdout parsed as JSON.
pub fn node_in(ns: &str, script: &str, args: &[&str]) -> Value {
    let out = Command::new("nsenter")
        .arg(format!("--net={}", ns_path(ns).display()))
        .arg("--")
        .arg(NODE)
        .arg("-e")
        .arg(script)
        .args(args)
        .output()
        .expect("run node in the namespace");
    assert!(
        out.status.success(),
        "node in {ns} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "node in {ns} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

// ---- the policy the runner under test gets ----------------------------------------------------

/// The shipped `policies/egress.toml` with its `[[deny]] 203.0.113.0/24` entry removed, so that
/// the test network's upstream counts as public; everything else as shipped. Asserts that the
/// edit happened and was the only change.
pub fn test_egress_policy(shipped: &str) -> String {
    const RANGE: &str = "range = \"203.0.113.0/24\"";
    let lines: Vec<&str> = shipped.lines().collect();
    let at: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim() == RANGE)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        at.len(),
        1,
        "policies/egress.toml must deny 203.0.113.0/24 in exactly one [[deny]] entry (the \
         egress tests use that range as their 'public internet' and remove the entry)"
    );
    let i = at[0];
    assert!(
        i > 0 && lines[i - 1].trim() == "[[deny]]",
        "the 203.0.113.0/24 range must open its [[deny]] entry"
    );
    assert!(
        lines
            .get(i + 1)
            .is_some_and(|l| l.trim_start().starts_with("reason =")),
        "the 203.0.113.0/24 entry must be range + reason"
    );
    let mut kept: Vec<&str> = lines[..i - 1].to_vec();
    kept.extend_from_slice(&lines[i + 2..]);
    let edited = kept.join("\n") + "\n";

    let before: toml::Table = toml::from_str(shipped).expect("the shipped egress.toml parses");
    let after: toml::Table = toml::from_str(&edited).expect("the edited egress.toml parses");
    let ranges = |t: &toml::Table| -> Vec<String> {
        t["deny"]
            .as_array()
            .expect("[[deny]]")
            .iter()
            .map(|d| d["range"].as_str().expect("range").to_string())
            .collect()
    };
    let mut expected = ranges(&before);
    expected.retain(|r| r != "203.0.113.0/24");
    assert_eq!(ranges(&after), expected, "only the one entry is gone");
    assert_eq!(ranges(&before).len(), expected.len() + 1);
    for (k, v) in &before {
        if k != "deny" {
            assert_eq!(after.get(k), Some(v), "{k} is unchanged");
        }
    }
    assert!(
        !edited.contains("203.0.113."),
        "no other mention of the range"
    );
    edited
}

// ---- small helpers ----------------------------------------------------------------------------

pub fn ns_path(ns: &str) -> PathBuf {
    Path::new("/run/netns").join(ns)
}

/// Runs `f` on a new thread that first entered network namespace `ns`.
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = ns_path(ns);
    std::thread::spawn(move || {
        let file = File::open(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        nix::sched::setns(file.as_fd(), CloneFlags::CLONE_NEWNET)
            .unwrap_or_else(|e| panic!("setns into {}: {e}", path.display()));
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

fn require_tools() {
    for (tool, package) in [
        ("ip", "iproute2"),
        ("openssl", "openssl"),
        ("nsenter", "util-linux"),
    ] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false)
            || ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
                .iter()
                .any(|d| Path::new(d).join(tool).is_file());
        assert!(
            found,
            "the egress tests need `{tool}` (Debian package {package}) and fail rather than skip: \
             run scripts/setup, or apt-get install {package}"
        );
    }
}

/// `ip -n <ns> <args>`, the arguments split on spaces.
fn ip(ns: &str, args: &str) {
    let mut all = vec!["ip", "-n", ns];
    all.extend(args.split_whitespace());
    run(&all);
}

fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("run {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn output(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("run {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn netns_names() -> BTreeSet<String> {
    output(&["ip", "netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Host-wide names without those another test process's fixture made (`ovsr-<pid>-…`
/// namespaces, `ov<pid in hex>x…` veths): a suite running beside this one on the host
/// makes and removes its own meanwhile.
fn ours_or_no_suites(names: BTreeSet<String>) -> BTreeSet<String> {
    let me = std::process::id();
    let pid_in = |name: &str| -> Option<u32> {
        fixture_pid(name).or_else(|| {
            let hex = name.strip_prefix("ov")?.split_once('x')?.0;
            u32::from_str_radix(hex, 16).ok()
        })
    };
    names
        .into_iter()
        .filter(|n| pid_in(n).is_none_or(|pid| pid == me))
        .collect()
}

/// The test process that made a fixture's namespace `ovsr-<pid>-…`.
fn fixture_pid(netns: &str) -> Option<u32> {
    netns.strip_prefix("ovsr-")?.split('-').next()?.parse().ok()
}

fn link_names(cmd: &[&str]) -> BTreeSet<String> {
    output(cmd)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

/// Listening TCP and bound UDP sockets of the calling thread's network namespace.
fn local_sockets() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for proto in ["tcp", "tcp6", "udp", "udp6"] {
        let text = fs::read_to_string(format!("/proc/thread-self/net/{proto}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 4 {
                continue;
            }
            // tcp: only listeners (state 0A); udp: every bound socket.
            if proto.starts_with("tcp") && f[3] != "0A" {
                continue;
            }
            out.insert(format!("{proto} {}", f[1]));
        }
    }
    out
}

fn assert_same(before: &Snapshot, after: &Snapshot) {
    let diff = |what: &str, a: &BTreeSet<String>, b: &BTreeSet<String>| -> Option<String> {
        let added: Vec<_> = b.difference(a).collect();
        let removed: Vec<_> = a.difference(b).collect();
        (!added.is_empty() || !removed.is_empty())
            .then(|| format!("{what}: added {added:?}, removed {removed:?}"))
    };
    let problems: Vec<String> = [
        diff("host links", &before.root_links, &after.root_links),
        diff("named namespaces", &before.netns, &after.netns),
        diff("LINK's links", &before.link_links, &after.link_links),
        diff("LINK's sockets", &before.link_sockets, &after.link_sockets),
    ]
    .into_iter()
    .flatten()
    .collect();
    assert!(
        problems.is_empty(),
        "the job left something behind: {problems:?}"
    );
}

/// Tasks (pid/tid) whose network namespace is one of `inodes`.
fn namespace_holders(inodes: &[u64]) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return found;
    };
    for p in procs.filter_map(Result::ok) {
        let name = p.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(tasks) = fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.filter_map(Result::ok) {
            let Ok(meta) = fs::metadata(t.path().join("ns/net")) else {
                continue;
            };
            if inodes.contains(&meta.ino()) {
                found.push(format!("{name}/{}", t.file_name().to_string_lossy()));
            }
        }
    }
    found
}

/// Namespaces of an earlier run of this suite whose process is gone (killed mid-test) and
/// which no process holds: a pid this process cannot see may belong to a run in another
/// pid namespace sharing `/run/netns`, whose namespaces its processes are in.
fn remove_stale_namespaces() {
    for ns in netns_names() {
        let Some(pid) = fixture_pid(&ns) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let Ok(meta) = fs::metadata(format!("/run/netns/{ns}")) else {
            continue;
        };
        if namespace_holders(&[meta.ino()]).is_empty() {
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        }
    }
}

fn collect_files(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for e in fs::read_dir(dir)
        .expect("read skill dir")
        .filter_map(Result::ok)
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = e.path();
        if path.is_dir() {
            collect_files(root, &path, out);
        } else if !(dir == root && name == "skill.json") {
            let rel = path
                .strip_prefix(root)
                .expect("inside the skill")
                .to_string_lossy()
                .into_owned();
            out.push((rel, fs::read(&path).expect("read a skill file")));
        }
    }
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}
