//! The effects of egress for one job: its network namespace with the runner's listeners, the
//! DNS responder and the proxy, all served by the runner's own tasks (nothing of the runner
//! runs inside the sandbox). The decisions are the pure modules' ([`super::dns`],
//! [`super::sniff`], [`super::decide`], [`super::record`]); this module reads, resolves,
//! connects and copies.
//!
//! One job's egress:
//! 1. [`Egress::start`] creates the namespace (`sandbox::netns`: `lo` up, a local route for
//!    every address, listeners on 80, 443 and 53 made before the tool starts, so there is no
//!    readiness race) and spawns the tasks that serve it;
//! 2. the init stage joins that namespace instead of making an empty one;
//! 3. [`JobEgress::finish`], after the job's processes are gone, stops every task, closes every
//!    socket (the namespace goes with its last reference) and returns the record.
//!
//! Decisions:
//! - **The runner resolves each allowed name itself, once per job**, with its upstream DNS
//!   servers (`runner.dns_servers`, else the host's `/etc/resolv.conf`), A and AAAA, never the
//!   hosts file, always as a fully qualified name (no search domains): when the tool looks it
//!   up (the DNS responder answers as the upstream did) or, failing that, when it connects.
//!   Every address must pass the policy when the tool connects, and the connection goes to
//!   the first one: the address checked is the address connected to. A failed lookup is not
//!   kept, so the next query asks again.
//! - **Every first request is read before anything is decided** (bounded: 16 KiB,
//!   [`SNIFF_TIME`]): a connection on 443 that is not a TLS ClientHello, or on 80 that is not an
//!   HTTP/1 request, is refused even to an IP literal under `public`. On 80 every later request
//!   is judged too (`egress::http`).
//! - **A refusal answers** (on 80 the code's status, the `X-Skill-Runner-Refused` header and a
//!   JSON body with the code; on 443 a TLS `access_denied` alert) and closes, so the tool fails
//!   at once with an error it can tell from a server's.
//! - **Bounded per job**: [`MAX_CONNECTIONS`] proxied connections at once — past that the one
//!   idle longest is closed for the new one, and only when none is idle is the new one refused
//!   (`connection_cap`) —, [`MAX_DNS_QUERIES`] answered queries (more are dropped), UDP
//!   queries of at most [`MAX_UDP_QUERY`] bytes, [`MAX_DNS_IN_FLIGHT`] of them at once,
//!   `dns.max_names` names resolved, and the policy's byte and time budgets
//!   (`egress::record`).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use ipnet::IpNet;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::{OnceCell, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::decide::{Context, RefusalCode};
use super::dns::{self, DnsEvent, NameTable, Resolution};
use super::host_networks::OwnNetworks;
use super::http::{self, Activity, Judge, Judged, Refused};
use super::nat64::{Lookup, Nat64, DISCOVERY_NAME};
use super::policy::EgressPolicy;
use super::record::{LookupOutcome, Recorder};
use super::resolver::{Built, Upstream, HOST_RESOLV_CONF};
use crate::config::DnsServer;
use crate::job::{EgressRecord, Net};
use crate::sandbox::netns;
use connection::serve_proxy;
use hickory_resolver::TokioResolver;
use listen::{serve_dns_tcp, serve_dns_udp};

/// Proxied connections one job may have open at once.
pub const MAX_CONNECTIONS: usize = 64;
/// DNS queries answered per job; later ones get no answer.
pub const MAX_DNS_QUERIES: u64 = 4096;
/// The largest DNS query taken over UDP; a longer datagram is dropped unread. Real queries
/// are a few dozen bytes (one question and at most an EDNS record).
pub const MAX_UDP_QUERY: usize = 4096;
/// UDP queries of one job being answered at once (each may wait for the upstream); past
/// that a datagram is dropped, as a busy server would, and the tool's resolver asks again.
pub const MAX_DNS_IN_FLIGHT: usize = 64;
/// How long the tool has to send its ClientHello or request head.
pub const SNIFF_TIME: Duration = Duration::from_secs(5);
/// How long the runner waits for its upstream DNS servers.
pub const RESOLVE_TIME: Duration = Duration::from_secs(5);
/// How long connecting to the upstream may take.
pub const CONNECT_TIME: Duration = Duration::from_secs(10);
/// How long a DNS-over-TCP connection may stay idle.
pub(super) const DNS_TCP_IDLE: Duration = Duration::from_secs(10);
/// How long `finish` lets connections the tool made before it ended be decided and recorded
/// (the tool is gone, so each sees end of file at once; only a slow upstream takes longer).
const DRAIN_GRACE: Duration = Duration::from_secs(1);
/// How long `finish` waits for the job's tasks to end once told to stop.
const STOP_GRACE: Duration = Duration::from_secs(2);
const COPY_BUF: usize = 16 * 1024;
/// Upstream lookups one job may have under way at once, at most; more wait (within
/// [`RESOLVE_TIME`]). Fewer where many jobs run at once ([`lookup_places`]).
pub const MAX_JOB_LOOKUPS: usize = 16;
/// Upstream lookups every job together may have under way at once: the resolver they share
/// is the Link's (its router's, its network's), which a job asking many names of a zone
/// whose servers never answer would otherwise fill for everyone.
pub const MAX_RUNNER_LOOKUPS: usize = 64;
/// The fewest upstream lookups a job may have under way at once while the runner's bound
/// ([`MOST_RUNNER_LOOKUPS`]) leaves room for it.
pub const MIN_JOB_LOOKUPS: usize = 4;
/// The most upstream lookups every job together may have under way, however many jobs run
/// at once: the bound on what the runner asks of the Link's resolver.
pub const MOST_RUNNER_LOOKUPS: usize = 256;

/// The upstream lookups every job together, and each job, may have under way at once when
/// up to `jobs_at_once` jobs run. Each job gets [`MAX_JOB_LOOKUPS`], or its share of
/// [`MAX_RUNNER_LOOKUPS`] where more than four jobs run (a few hostile jobs asking names
/// that never answer would otherwise hold every place and make the other jobs' lookups
/// wait out [`RESOLVE_TIME`] and fail), but not under [`MIN_JOB_LOOKUPS`]: past sixteen
/// jobs the runner's places grow to that floor for each, up to [`MOST_RUNNER_LOOKUPS`],
/// and past sixty-four jobs each gets its share of those, one at least. So whatever the
/// running jobs hold, each other job still finds its own share free (up to 256 jobs).
pub fn lookup_places(jobs_at_once: usize) -> (usize, usize) {
    let jobs = jobs_at_once.max(1);
    let job = (MAX_RUNNER_LOOKUPS / jobs).clamp(MIN_JOB_LOOKUPS, MAX_JOB_LOOKUPS);
    let runner = MAX_RUNNER_LOOKUPS
        .max(job.saturating_mul(jobs))
        .min(MOST_RUNNER_LOOKUPS);
    (runner, job.min(runner / jobs).max(1))
}

/// How long a listener rests after a failed accept.
pub(super) const ACCEPT_PAUSE: Duration = Duration::from_millis(50);
/// How long a new connection waits for the place of an idle one closed for it.
const ADMIT_TIME: Duration = Duration::from_secs(1);
/// How long a TLS connection must have been quiet since the upstream's last bytes before it
/// counts as idle (what is inside TLS cannot be seen; a pooled connection is quiet for
/// seconds, a response under way rarely pauses that long).
const TLS_IDLE: Duration = Duration::from_secs(1);

/// Egress for the whole runner: the policy and the upstream resolver.
pub struct Egress {
    policy: Arc<EgressPolicy>,
    upstream: Upstream,
    /// The runner's upstream lookups, shared by every job ([`lookup_places`]).
    lookups: Arc<Semaphore>,
    /// Each job's own share of them ([`lookup_places`]).
    job_lookups: usize,
    /// The Link's own networks, watched from the runner's start in its network namespace;
    /// the reason when they could not be, tried again at the next job with egress (which
    /// ends with the reason if it fails again).
    own: Mutex<Result<Arc<OwnNetworks>, String>>,
}

/// The watch of the Link's own networks, opened in the calling thread's network namespace.
fn watch_own_networks() -> Result<Arc<OwnNetworks>, String> {
    OwnNetworks::open().map(Arc::new).map_err(|e| {
        format!("cannot watch the host's addresses and routes for changes (a netlink socket of the route family): {e}")
    })
}

/// Why a job's egress could not start.
#[derive(Debug, thiserror::Error)]
pub enum JobEgressError {
    #[error("{0}")]
    Resolver(String),
    #[error("{0}")]
    Capabilities(String),
    #[error(transparent)]
    Namespace(#[from] netns::NetnsError),
    #[error("cannot serve the job's network namespace: {0}")]
    Serve(io::Error),
    #[error("cannot read the host's own addresses and routes, which say the networks no job may reach: {0}")]
    OwnAddresses(io::Error),
}

impl Egress {
    /// With `dns_servers` the resolver is built now; without, from the host's resolv.conf,
    /// now and again whenever that file changes. If it cannot be built, jobs that need egress
    /// end `internal` with the reason and `deny` jobs still run.
    pub fn new(policy: EgressPolicy, dns_servers: &[DnsServer]) -> Egress {
        if dns_servers.is_empty() {
            Egress::with_resolv_conf(policy, Path::new(HOST_RESOLV_CONF))
        } else {
            Egress {
                policy: Arc::new(policy),
                upstream: Upstream::fixed(
                    &dns_servers.iter().map(|d| d.0).collect::<Vec<SocketAddr>>(),
                ),
                lookups: Arc::new(Semaphore::new(MAX_RUNNER_LOOKUPS)),
                job_lookups: MAX_JOB_LOOKUPS,
                own: Mutex::new(watch_own_networks()),
            }
        }
    }

    /// Resolving with the servers of the resolv.conf at `path`.
    pub fn with_resolv_conf(policy: EgressPolicy, path: &Path) -> Egress {
        let egress = Egress {
            policy: Arc::new(policy),
            upstream: Upstream::system(path),
            lookups: Arc::new(Semaphore::new(MAX_RUNNER_LOOKUPS)),
            job_lookups: MAX_JOB_LOOKUPS,
            own: Mutex::new(watch_own_networks()),
        };
        let _ = egress.resolver();
        egress
    }

    /// For a runner that runs up to `jobs_at_once` jobs at once: the runner's upstream
    /// lookups, and each job's share of them ([`lookup_places`]).
    pub fn with_jobs_at_once(mut self, jobs_at_once: usize) -> Egress {
        let (runner, job) = lookup_places(jobs_at_once);
        self.lookups = Arc::new(Semaphore::new(runner));
        self.job_lookups = job;
        self
    }

    /// The same with both numbers given: `runner` upstream lookups for every job together,
    /// `job` for each job.
    #[cfg(test)]
    fn with_lookup_places(mut self, runner: usize, job: usize) -> Egress {
        self.lookups = Arc::new(Semaphore::new(runner));
        self.job_lookups = job;
        self
    }

    pub fn policy(&self) -> &EgressPolicy {
        &self.policy
    }

    /// The resolver for a job starting now.
    fn resolver(&self) -> Built {
        self.upstream.current()
    }

    /// Whether egress jobs can run, and if not why.
    pub fn problem(&self) -> Option<String> {
        netns::missing_capabilities()
            .or_else(|| self.own_watch().err())
            .or_else(|| self.resolver().err())
    }

    /// The watch of the Link's own networks, opened again if it could not be before (a
    /// passing shortage of descriptors must not refuse egress until a restart). Called
    /// from the runtime's threads, which stay in the runner's network namespace.
    fn own_watch(&self) -> Result<Arc<OwnNetworks>, String> {
        let mut own = self.own.lock().unwrap_or_else(|p| p.into_inner());
        if own.is_err() {
            *own = watch_own_networks();
        }
        own.clone()
    }

    /// Creates one job's network namespace and starts serving it. The clock of the job's
    /// egress budgets starts now.
    pub async fn start(&self, job_id: &str, net: Net) -> Result<JobEgress, JobEgressError> {
        if let Some(missing) = netns::missing_capabilities() {
            return Err(JobEgressError::Capabilities(missing));
        }
        let resolver = self.resolver().map_err(JobEgressError::Resolver)?;
        let own = self
            .own_watch()
            .map_err(|e| JobEgressError::OwnAddresses(io::Error::other(e)))?;
        // Read (or found current) now: a job whose start cannot read them does not start.
        own.current_async()
            .await
            .map_err(JobEgressError::OwnAddresses)?;
        // Only a `public` job may reach addresses outside the allow list's names.
        let nat64 = if super::nat64::asks(net) {
            let lookup = super::nat64::discover(&resolver).await;
            if let Lookup::Failed(why) = &lookup {
                tracing::info!(job_id = %job_id, error = %why, "egress: the NAT64 prefix lookup ({DISCOVERY_NAME}) failed; this job reaches IPv4 only");
            }
            Nat64::learned(&lookup)
        } else {
            Nat64::Known(Vec::new())
        };
        // A few milliseconds of netlink on a thread of its own: not on the runtime's workers.
        let ns = tokio::task::spawn_blocking(netns::create)
            .await
            .map_err(|e| JobEgressError::Serve(io::Error::other(e.to_string())))??;
        let recorder = Recorder::new(self.policy.budgets);
        let stop = CancellationToken::new();
        let closing = CancellationToken::new();
        let tracker = TaskTracker::new();
        let log = Arc::new(LogBudget::default());
        let job = Arc::new(ServedJob {
            job_id: job_id.to_string(),
            net,
            policy: self.policy.clone(),
            own,
            nat64,
            table: NameTable::new(self.policy.dns.max_names),
            recorder: recorder.clone(),
            resolver,
            stop: stop.clone(),
            closing: closing.clone(),
            tracker: tracker.clone(),
            connections: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            dns_queries: AtomicU64::new(0),
            dns_in_flight: Arc::new(Semaphore::new(MAX_DNS_IN_FLIGHT)),
            lookups: Semaphore::new(self.job_lookups),
            runner_lookups: self.lookups.clone(),
            names: Mutex::new(HashMap::new()),
            open: Mutex::new(OpenConnections::default()),
            log: log.clone(),
        });
        let http = TcpListener::from_std(ns.http).map_err(JobEgressError::Serve)?;
        let https = TcpListener::from_std(ns.https).map_err(JobEgressError::Serve)?;
        let dns_udp = UdpSocket::from_std(ns.dns_udp).map_err(JobEgressError::Serve)?;
        let dns_tcp = TcpListener::from_std(ns.dns_tcp).map_err(JobEgressError::Serve)?;
        tracker.spawn(serve_proxy(job.clone(), http, 80));
        tracker.spawn(serve_proxy(job.clone(), https, 443));
        tracker.spawn(serve_dns_udp(job.clone(), dns_udp));
        tracker.spawn(serve_dns_tcp(job, dns_tcp));
        Ok(JobEgress {
            netns: ns.netns,
            job_id: job_id.to_string(),
            log,
            recorder,
            stop,
            closing,
            tracker,
        })
    }
}

/// One job's running egress.
pub struct JobEgress {
    /// The job's network namespace, for the init stage to join.
    pub netns: OwnedFd,
    job_id: String,
    log: Arc<LogBudget>,
    recorder: Arc<Recorder>,
    stop: CancellationToken,
    closing: CancellationToken,
    tracker: TaskTracker,
}

impl JobEgress {
    /// Stops serving, closes every listener and connection, and returns the record. Call once
    /// the job's processes are gone: what the tool left in the listeners' queues is still
    /// taken, decided and recorded (briefly), so no attempt is missing from the record. The
    /// namespace descriptor closes when `self` drops, here.
    pub async fn finish(self) -> Vec<EgressRecord> {
        self.closing.cancel();
        self.tracker.close();
        if tokio::time::timeout(DRAIN_GRACE, self.tracker.wait())
            .await
            .is_err()
        {
            self.stop.cancel();
            if tokio::time::timeout(STOP_GRACE, self.tracker.wait())
                .await
                .is_err()
            {
                tracing::error!("egress tasks did not stop in time");
            }
        }
        let unlogged = self.log.unlogged();
        if unlogged > 0 {
            tracing::info!(job_id = %self.job_id, unlogged, "egress: attempts of this job not logged (its result's record holds them)");
        }
        self.recorder.records()
    }
}

impl Drop for JobEgress {
    fn drop(&mut self) {
        // Also on an early return or a cancelled future: no task outlives the job.
        self.stop.cancel();
    }
}

struct ServedJob {
    job_id: String,
    net: Net,
    policy: Arc<EgressPolicy>,
    /// The Link's own networks, current at each decision.
    own: Arc<OwnNetworks>,
    /// The NAT64 prefixes of the Link's network, found at a `public` job's start.
    nat64: Nat64,
    table: NameTable,
    recorder: Arc<Recorder>,
    resolver: Arc<TokioResolver>,
    /// Hard stop: every task ends now.
    stop: CancellationToken,
    /// The job ended: listeners take what is queued, then close.
    closing: CancellationToken,
    tracker: TaskTracker,
    connections: Arc<Semaphore>,
    dns_queries: AtomicU64,
    /// UDP queries being answered now ([`MAX_DNS_IN_FLIGHT`]).
    dns_in_flight: Arc<Semaphore>,
    /// Upstream lookups under way: this job's and every job's ([`lookup_places`]).
    lookups: Semaphore,
    runner_lookups: Arc<Semaphore>,
    /// What the upstream said about each name resolved in this job (at most
    /// `dns.max_names`), shared by the DNS responder and the proxy; a failure is not kept,
    /// but its name keeps its place.
    names: Mutex<HashMap<String, Arc<OnceCell<Resolution>>>>,
    /// The proxied connections open now, to close the idlest at the cap.
    open: Mutex<OpenConnections>,
    /// What this job may still write to the daemon's log.
    log: Arc<LogBudget>,
}

/// Log lines a job's egress may cause: [`LOG_LINES`], then one saying the rest are not
/// logged, and a count at the job's end. Every attempt is in the job's record anyway; the
/// log is the host's, and journald drops a service's lines past its rate limit, so a job
/// that opened thousands of connections would otherwise hide other jobs' errors.
#[derive(Default)]
pub(crate) struct LogBudget {
    used: AtomicU64,
}

/// Log lines one job's egress may write.
pub const LOG_LINES: u64 = 64;

impl LogBudget {
    /// Whether one more line may be logged for this job (the first past the budget logs
    /// that the rest are not).
    pub(crate) fn take(&self, job_id: &str) -> bool {
        let n = self.used.fetch_add(1, Ordering::Relaxed);
        if n == LOG_LINES {
            tracing::info!(job_id = %job_id, "egress: this job's further attempts are not logged (its result's record holds them)");
        }
        n < LOG_LINES
    }

    /// Lines not logged for the budget.
    pub(crate) fn unlogged(&self) -> u64 {
        self.used.load(Ordering::Relaxed).saturating_sub(LOG_LINES)
    }
}

#[derive(Default)]
struct OpenConnections {
    next: u64,
    by_id: HashMap<u64, OpenConnection>,
}

struct OpenConnection {
    activity: Arc<Activity>,
    close: CancellationToken,
    /// Idle at least this long before it may be closed.
    min_idle: Duration,
}

/// Takes a connection off the job's open list when its task ends.
struct Registered<'a> {
    job: &'a ServedJob,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.job.lock_open().by_id.remove(&self.id);
    }
}

impl Judge for ServedJob {
    fn judge<'a>(&'a self, net: Net, dest: SocketAddr, sniffed: Option<&'a str>) -> Judged<'a> {
        Box::pin(async move {
            let own = self.own_now().await?;
            http::judge_with(&self.context(&own), net, dest, sniffed)
        })
    }

    fn refused(&self, host: &str, refusal: &Refused) {
        if self.log.take(&self.job_id) {
            tracing::info!(job_id = %self.job_id, %host, port = 80, allowed = false, code = refusal.code.as_str(), reason = %refusal.why, "egress: request refused");
        }
        self.recorder.refused(host, 80);
    }
}

impl ServedJob {
    /// What a decision made now needs, with `own` as [`Self::own_now`] gave it.
    fn context<'a>(&'a self, own: &'a [IpNet]) -> Context<'a> {
        Context {
            policy: &self.policy,
            own,
            nat64: &self.nat64,
            table: &self.table,
        }
    }

    /// The Link's own networks for a decision made now ([`OwnNetworks::current`]), or the
    /// refusal of the connection or request when they cannot be read: no address is judged
    /// against networks that may be out of date.
    async fn own_now(&self) -> Result<Arc<[IpNet]>, Refused> {
        self.own.current_async().await.map_err(|e| {
            if self.log.take(&self.job_id) {
                tracing::warn!(job_id = %self.job_id, error = %e, "egress: the host's own networks cannot be read again after a change; the job's connections are refused until they can");
            }
            Refused {
                code: RefusalCode::AddressRefused,
                why: "the Link's own networks changed and could not be read again: no address is allowed until they can".to_string(),
            }
        })
    }

    /// Answers one DNS query, after resolving its name upstream when the job may reach it
    /// and it is not resolved yet, and records the name's lookup.
    async fn answer(&self, query: &[u8]) -> Option<Vec<u8>> {
        if self.dns_queries.fetch_add(1, Ordering::Relaxed) >= MAX_DNS_QUERIES {
            self.recorder.unanswered_query();
            return None;
        }
        let known = |name: &str| self.known(name);
        let mut reply = dns::respond(&self.policy, self.net, &self.table, query, &known);
        if let DnsEvent::Lookup { name } = &reply.event {
            let found = self.resolution(name).await;
            let known = |_: &str| Some(found.clone());
            reply = dns::respond(&self.policy, self.net, &self.table, query, &known);
        }
        self.record_lookup(&reply.event);
        reply.packet
    }

    fn record_lookup(&self, event: &DnsEvent) {
        let (name, allowed, outcome) = match event {
            DnsEvent::Answered { name, .. } => (name, true, LookupOutcome::Answered),
            DnsEvent::NoData { name, .. } => match self.known(name) {
                Some(Resolution::Addresses(_)) => (name, true, LookupOutcome::Answered),
                _ => (name, true, LookupOutcome::NoData),
            },
            DnsEvent::NxDomain { name } => (name, true, LookupOutcome::Nxdomain),
            DnsEvent::ServFail { name } => (name, true, LookupOutcome::Servfail),
            DnsEvent::Refused { name } => (name, false, LookupOutcome::Refused),
            DnsEvent::TableFull { name } => (name, false, LookupOutcome::Limit),
            DnsEvent::Lookup { .. }
            | DnsEvent::Unsupported
            | DnsEvent::Malformed
            | DnsEvent::Dropped => return,
        };
        if self.log.take(&self.job_id) {
            tracing::info!(job_id = %self.job_id, host = %name, port = 53, allowed, outcome = ?outcome, "egress: name looked up");
        }
        self.recorder.looked_up(name, allowed, outcome);
    }

    fn lock_open(&self) -> std::sync::MutexGuard<'_, OpenConnections> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts a new proxied connection on the open list: its activity, the token that closes
    /// it, and the guard that takes it off again.
    fn register(&self, port: u16) -> (Arc<Activity>, CancellationToken, Registered<'_>) {
        let activity = Activity::new();
        let close = CancellationToken::new();
        let min_idle = if port == 443 {
            TLS_IDLE
        } else {
            Duration::ZERO
        };
        let mut open = self.lock_open();
        let id = open.next;
        open.next += 1;
        open.by_id.insert(
            id,
            OpenConnection {
                activity: activity.clone(),
                close: close.clone(),
                min_idle,
            },
        );
        (activity, close, Registered { job: self, id })
    }

    /// Closes the connection idle longest, if one is idle; whether one was.
    fn close_idlest(&self) -> bool {
        let mut open = self.lock_open();
        let idlest = open
            .by_id
            .iter()
            .filter_map(|(id, c)| {
                let idle = c.activity.idle_for()?;
                (idle >= c.min_idle).then_some((idle, *id))
            })
            .max();
        let Some((idle, id)) = idlest else {
            return false;
        };
        if let Some(c) = open.by_id.remove(&id) {
            if self.log.take(&self.job_id) {
                tracing::info!(job_id = %self.job_id, idle_ms = idle.as_millis() as u64, "egress: closing an idle connection for a new one");
            }
            c.close.cancel();
        }
        true
    }

    fn lock_names(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<OnceCell<Resolution>>>> {
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What this job's lookup of `name` found, if it is done.
    fn known(&self, name: &str) -> Option<Resolution> {
        self.lock_names().get(name).and_then(|c| c.get().cloned())
    }

    /// Resolves `name` (canonical, allowed for the job) upstream once per job: concurrent
    /// callers share one lookup, later ones get its answer; a failure is not kept, so the next
    /// query asks again (the name still counts against `dns.max_names`).
    async fn resolution(&self, name: &str) -> Resolution {
        let cell = {
            let mut names = self.lock_names();
            match names.get(name) {
                Some(cell) => cell.clone(),
                None => {
                    if names.len() >= self.policy.dns.max_names {
                        return Resolution::Limit;
                    }
                    let cell = Arc::new(OnceCell::new());
                    names.insert(name.to_string(), cell.clone());
                    cell
                }
            }
        };
        let found = cell
            .get_or_init(|| connection::lookup(self, name))
            .await
            .clone();
        if found == Resolution::Failed {
            // Asked again next time, and still one of the job's names: the cap counts
            // every name sent upstream, so a nameserver that fails on purpose does not
            // take names past it.
            let mut names = self.lock_names();
            if names.get(name).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                names.insert(name.to_string(), Arc::new(OnceCell::new()));
            }
        }
        found
    }
}

mod connection;
mod listen;

#[cfg(test)]
mod tests;
