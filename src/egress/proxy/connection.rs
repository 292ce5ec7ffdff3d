//! One proxied connection of a job, from accept to close: admitted among the job's
//! [`MAX_CONNECTIONS`] (the idlest closed for a new one), its first bytes read and judged
//! (`decide`), the name resolved once per job, connected to exactly the address checked,
//! then served (HTTP on 80 request by request, `egress::http`; bytes copied both ways on
//! 443) within the flow's budgets; or refused with a reply the tool can tell from a
//! server's.

use super::listen::accept_loop;
use super::{
    ServedJob, ADMIT_TIME, CONNECT_TIME, COPY_BUF, MAX_CONNECTIONS, RESOLVE_TIME, SNIFF_TIME,
};
use crate::egress::decide::{self, Attempt, Decision, RefusalCode, Target};
use crate::egress::dns::Resolution;
use crate::egress::http::{self, Activity, Judge, Refused};
use crate::egress::record::Flow;
use crate::egress::sniff::{self, Sniff, MAX_HEAD};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub(super) async fn serve_proxy(job: Arc<ServedJob>, listener: TcpListener, port: u16) {
    accept_loop(job, listener, |job, conn| async move {
        accept_one(&job, conn, port).await
    })
    .await
}

async fn accept_one(job: &Arc<ServedJob>, conn: TcpStream, port: u16) {
    let dest = match conn.local_addr() {
        Ok(a) => SocketAddr::new(a.ip().to_canonical(), a.port()),
        Err(_) => return,
    };
    let j = job.clone();
    job.tracker.spawn(async move {
        let Some(permit) = admit(&j).await else {
            let host = decide::record_host(&j.table, dest);
            let why = format!("more than {MAX_CONNECTIONS} connections at once, none of them idle");
            refuse(
                &j,
                conn,
                &host,
                port,
                RefusalCode::ConnectionCap,
                &why,
                &why,
            )
            .await;
            return;
        };
        let (activity, close, _open) = j.register(port);
        tokio::select! {
            _ = j.stop.cancelled() => {}
            _ = close.cancelled() => {}
            _ = proxy_connection(&j, conn, dest, &activity) => {}
        }
        drop(permit);
    });
}

/// A place among the job's [`MAX_CONNECTIONS`]: at once when one is free, else after closing
/// the connection idle longest (a client's pool keeps connections it no longer uses; closing
/// one is what any server does); `None` when every connection is in use.
async fn admit(job: &ServedJob) -> Option<tokio::sync::OwnedSemaphorePermit> {
    if let Ok(permit) = job.connections.clone().try_acquire_owned() {
        return Some(permit);
    }
    let deadline = tokio::time::Instant::now() + ADMIT_TIME;
    while job.close_idlest() {
        let wait = tokio::time::timeout_at(deadline, job.connections.clone().acquire_owned());
        match wait.await {
            Ok(Ok(permit)) => return Some(permit),
            Ok(Err(_)) => return None,
            // The one closed was taken by another new connection: close the next.
            Err(_) if tokio::time::Instant::now() < deadline => continue,
            Err(_) => return None,
        }
    }
    None
}

/// Records a refusal, logs `why`, tells the tool `told`, and closes.
async fn refuse(
    job: &ServedJob,
    mut conn: TcpStream,
    host: &str,
    port: u16,
    code: RefusalCode,
    why: &str,
    told: &str,
) {
    if job.log.take(&job.job_id) {
        tracing::info!(job_id = %job.job_id, %host, port, allowed = false, code = code.as_str(), reason = %why, "egress: connection refused");
    }
    job.recorder.refused(host, port);
    let reply = sniff::refusal_reply(port, code, told);
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = conn.write_all(&reply).await;
        let _ = conn.shutdown().await;
    })
    .await;
}

/// Refuses a connection whose decision could not be made ([`ServedJob::own_now`]),
/// recorded under the host it was asked for.
async fn refuse_unjudged(job: &ServedJob, conn: TcpStream, dest: SocketAddr, refused: Refused) {
    let host = decide::record_host(&job.table, dest);
    let why = &refused.why;
    refuse(job, conn, &host, dest.port(), refused.code, why, why).await
}

/// Reads the first bytes until they say what the connection is for.
async fn read_head(conn: &mut TcpStream, port: u16) -> (Vec<u8>, Sniff) {
    let mut head = Vec::with_capacity(2048);
    let mut chunk = vec![0u8; 4096];
    let read = tokio::time::timeout(SNIFF_TIME, async {
        loop {
            let room = MAX_HEAD.saturating_sub(head.len()).min(chunk.len());
            if room == 0 {
                return sniff::sniff(port, &head);
            }
            match conn.read(&mut chunk[..room]).await {
                Ok(0) | Err(_) => return Sniff::NeedMore,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
            match sniff::sniff(port, &head) {
                Sniff::NeedMore => continue,
                s => return s,
            }
        }
    })
    .await;
    let s = read.unwrap_or(Sniff::NeedMore);
    (head, s)
}

async fn proxy_connection(
    job: &Arc<ServedJob>,
    mut conn: TcpStream,
    dest: SocketAddr,
    activity: &Arc<Activity>,
) {
    let port = dest.port();
    let (head, sniffed) = read_head(&mut conn, port).await;
    let sniffed = match sniffed {
        Sniff::Name(n) => Some(n),
        Sniff::NoName => None,
        Sniff::Refused(e) => {
            let host = decide::record_host(&job.table, dest);
            let why = e.to_string();
            return refuse(job, conn, &host, port, RefusalCode::BadRequest, &why, &why).await;
        }
        Sniff::NeedMore => {
            let host = decide::record_host(&job.table, dest);
            let why = "no complete TLS ClientHello or HTTP request head arrived in time";
            return refuse(job, conn, &host, port, RefusalCode::BadRequest, why, why).await;
        }
    };
    let attempt = Attempt {
        net: job.net,
        dest,
        sniffed: sniffed.as_deref(),
    };
    let own = match job.own_now().await {
        Ok(own) => own,
        Err(refused) => return refuse_unjudged(job, conn, dest, refused).await,
    };
    let resolved: Vec<IpAddr> = match decide::target(&job.context(&own), &attempt) {
        Err(reason) => {
            let host = decide::record_host(&job.table, dest);
            // Before any lookup: nothing the tool was not given is in `why`.
            let why = reason.to_string();
            return refuse(job, conn, &host, port, reason.code(), &why, &why).await;
        }
        Ok(Target::Literal(_)) => Vec::new(),
        Ok(Target::Name(name)) => match job.resolution(&name).await {
            Resolution::Addresses(addrs) => addrs,
            _ => Vec::new(),
        },
    };
    // Read again if they changed while the name was looked up (which may take seconds).
    let own = match job.own_now().await {
        Ok(own) => own,
        Err(refused) => return refuse_unjudged(job, conn, dest, refused).await,
    };
    match decide::decide(&job.context(&own), &attempt, &resolved) {
        Decision::Deny { host, reason } => {
            let for_name = crate::egress::dns::NameTable::is_synthetic(dest.ip());
            let (why, told) = (reason.to_string(), reason.told(&host, for_name));
            refuse(job, conn, &host, port, reason.code(), &why, &told).await
        }
        Decision::Allow { connect_to, host } => {
            let flow = match job.recorder.open(&host, port) {
                Ok(f) => Arc::new(f),
                Err(e) => {
                    // `open` has recorded the refusal.
                    if job.log.take(&job.job_id) {
                        tracing::info!(job_id = %job.job_id, %host, port, allowed = false, code = RefusalCode::Budget.as_str(), reason = %e, "egress: connection refused");
                    }
                    let reply = sniff::refusal_reply(port, RefusalCode::Budget, &e.to_string());
                    let _ = conn.write_all(&reply).await;
                    return;
                }
            };
            if job.log.take(&job.job_id) {
                tracing::info!(job_id = %job.job_id, %host, port, to = %connect_to, allowed = true, "egress: connection allowed");
            }
            let deadline = tokio::time::Instant::from_std(flow.deadline());
            let served = tokio::time::timeout_at(deadline, async {
                let upstream = match connect(connect_to, &flow).await {
                    Ok(u) => u,
                    Err(e) => {
                        if port == 80 {
                            let why = format!("cannot connect to {host}: {e}");
                            let reply =
                                sniff::refusal_reply(port, RefusalCode::UpstreamUnreachable, &why);
                            let _ = conn.write_all(&reply).await;
                        }
                        return Err(e);
                    }
                };
                if port == 80 {
                    let judge: Arc<dyn Judge> = job.clone();
                    let (net, flow) = (job.net, flow.clone());
                    let conn_host = host.clone();
                    http::serve(
                        judge,
                        net,
                        dest,
                        conn_host,
                        conn,
                        head,
                        upstream,
                        flow,
                        activity.clone(),
                    )
                    .await
                    .map_err(io::Error::other)
                } else {
                    forward(conn, upstream, &head, &flow, activity).await
                }
            })
            .await;
            let ended = match served {
                Ok(r) => r,
                Err(_) => Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the connection's egress time is over",
                )),
            };
            if let Err(e) = ended {
                if job.log.take(&job.job_id) {
                    tracing::info!(job_id = %job.job_id, %host, port, error = %e, "egress: connection ended");
                }
            }
        }
    }
}

/// One upstream lookup of `name` (A and AAAA, fully qualified, bounded by [`RESOLVE_TIME`],
/// its wait for a place among the lookups under way included).
pub(super) async fn lookup(job: &ServedJob, name: &str) -> Resolution {
    let fqdn = format!("{name}.");
    let asked = async {
        // The job's own places first: a job waiting for its own never holds one of the
        // runner's.
        let _job = job.lookups.acquire().await;
        let _runner = job.runner_lookups.acquire().await;
        job.resolver.lookup_ip(fqdn.as_str()).await
    };
    match tokio::time::timeout(RESOLVE_TIME, asked).await {
        Ok(Ok(lookup)) => {
            let mut chain = Vec::new();
            for r in lookup.as_lookup().answers() {
                chain.push(r.name.to_ascii());
                if let hickory_proto::rr::RData::CNAME(target) = &r.data {
                    chain.push(target.0.to_ascii());
                }
            }
            if let Some(through) =
                decide::chain_refused(&job.policy, chain.iter().map(String::as_str))
            {
                if job.log.take(&job.job_id) {
                    tracing::info!(job_id = %job.job_id, host = %name, %through, "egress: the upstream's answer passes through a name never looked up; answered NXDOMAIN");
                }
                return Resolution::NxDomain;
            }
            let addrs = addresses_kept(lookup.iter());
            if addrs.is_empty() {
                Resolution::NoRecords
            } else {
                Resolution::Addresses(addrs)
            }
        }
        Ok(Err(e)) if e.is_nx_domain() => Resolution::NxDomain,
        Ok(Err(e)) if e.is_no_records_found() => Resolution::NoRecords,
        Ok(Err(e)) => {
            if job.log.take(&job.job_id) {
                tracing::info!(job_id = %job.job_id, host = %name, error = %e, "egress: upstream lookup failed");
            }
            Resolution::Failed
        }
        Err(_) => {
            if job.log.take(&job.job_id) {
                tracing::info!(job_id = %job.job_id, host = %name, "egress: upstream lookup timed out");
            }
            Resolution::Failed
        }
    }
}

/// The most addresses kept for one name. An upstream the tool chooses (its own domain's
/// nameserver, under `public`) may answer thousands over TCP, for each of the job's names,
/// held in the daemon outside the job's cgroup. The job is only ever connected to one of
/// the addresses kept, each checked; one past them is never reached.
pub(super) const MAX_ADDRESSES: usize = 32;

/// A name's addresses as kept: in the upstream's order, each once, at most
/// [`MAX_ADDRESSES`].
pub(super) fn addresses_kept(all: impl Iterator<Item = IpAddr>) -> Vec<IpAddr> {
    let mut kept: Vec<IpAddr> = Vec::new();
    for ip in all {
        if kept.len() == MAX_ADDRESSES {
            break;
        }
        if !kept.contains(&ip) {
            kept.push(ip);
        }
    }
    kept
}

/// Connects to exactly `to`, within the connection's time.
async fn connect(to: SocketAddr, flow: &Flow) -> io::Result<TcpStream> {
    let connect_time = CONNECT_TIME.min(flow.remaining());
    let upstream = tokio::time::timeout(connect_time, TcpStream::connect(to))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connecting upstream timed out"))??;
    let _ = upstream.set_nodelay(true);
    Ok(upstream)
}

/// Sends the head (a ClientHello) and copies both ways within the flow's budgets.
async fn forward(
    client: TcpStream,
    mut upstream: TcpStream,
    head: &[u8],
    flow: &Flow,
    activity: &Activity,
) -> io::Result<()> {
    let _ = client.set_nodelay(true);
    let granted = flow.grant_out(head.len()).map_err(io::Error::other)?;
    upstream.write_all(&head[..granted]).await?;
    if granted < head.len() {
        return Err(io::Error::other("the job's egress byte budget is spent"));
    }
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    tokio::try_join!(
        pump(cr, uw, flow, true, activity),
        pump(ur, cw, flow, false, activity)
    )
    .map(|_| ())
}

/// Copies one direction until end of file, then half-closes the other side. What is inside
/// TLS is not seen, so the tool's bytes mark the connection busy and the upstream's mark it
/// idle from then on (a pooled connection's last bytes are its last response).
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    flow: &Flow,
    outbound: bool,
    activity: &Activity,
) -> io::Result<()> {
    let mut buf = vec![0u8; COPY_BUF];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            let _ = to.shutdown().await;
            return Ok(());
        }
        let granted = if outbound {
            activity.busy();
            flow.grant_out(n)
        } else {
            flow.grant_in(n)
        }
        .map_err(io::Error::other)?;
        to.write_all(&buf[..granted]).await?;
        if !outbound {
            activity.idle();
        }
        if granted < n {
            return Err(io::Error::other("the job's egress byte budget is spent"));
        }
    }
}
