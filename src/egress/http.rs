//! Port 80 served as HTTP, request by request: after the first head has been judged and the
//! upstream connected (`egress::proxy`), the tool's connection is served by a hyper HTTP/1
//! server whose every request is judged again ([`sniff::request_host`] and
//! [`decide::target`], the same rules as the first) before it goes to the upstream over one
//! hyper client connection to the checked address. So a kept-alive or pipelined connection
//! cannot switch to another Host (domain fronting over plain HTTP), and the upstream only ever
//! reads heads hyper wrote itself, never the tool's bytes (no smuggling by ambiguous framing).
//!
//! Decisions:
//! - **A later request that is refused** gets the runner's refusal (`403`, the
//!   `X-Skill-Runner-Refused` header, a JSON body), is recorded as a refused attempt, and
//!   ends the connection (`Connection: close`): what the tool sends after it is not trusted.
//!   A head hyper cannot parse gets hyper's own `400` (`431` when too large), is recorded as
//!   a refused attempt (`bad_request`) when [`serve`] ends with hyper's parse error, and ends
//!   the connection the same way.
//! - **Bytes are counted at the upstream socket** ([`Metered`]): the job's budgets are granted
//!   before a byte is written upstream and as soon as one is read, and an unused grant is
//!   given back, so the budget is never exceeded.
//! - **Idle**: a connection with no request in flight is idle, and may be closed when the job
//!   is at its connection cap (`proxy`); a kept-alive connection idle for [`IDLE_KEEP_ALIVE`]
//!   is closed, like a server closes one.
//! - Upgrades (WebSocket over `ws://`): the `101` response is passed on and the two upgraded
//!   streams are joined in the connection's own task, the upstream side still metered; the
//!   connection is busy, never idle, while they are.
//! - The upstream closing ends the tool's connection once its current response is sent; a
//!   request that finds the upstream gone gets `502` with the code `upstream_unreachable`.
//! - Header case is kept both ways (hyper's `preserve_header_case`), and no `Date` is added.
//! - A request head is at most 16 KiB, as the first one (`sniff::MAX_HEAD`); a response head
//!   at most [`MAX_RESPONSE_HEAD`] (the buffer hyper reads it into is the runner's memory,
//!   outside the job's cgroup, once a connection); a larger one is `502`,
//!   `upstream_unreachable`.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::decide::{self, Attempt, RefusalCode};
use super::record::Flow;
use super::sniff::{self, MAX_HEAD, REFUSAL_HEADER};

/// The largest response head an upstream may send (hyper's own default is about 400 KiB,
/// which 64 connections of a job would hold 26 MB of).
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;
use crate::job::Net;

/// How long a kept-alive connection may wait for its next request head.
pub const IDLE_KEEP_ALIVE: Duration = Duration::from_secs(5);

type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// What a refused request is told, and why.
pub struct Refused {
    pub code: RefusalCode,
    pub why: String,
}

/// A judgment under way ([`Judge::judge`]).
pub type Judged<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Refused>> + Send + 'a>>;

/// The job's side of the connection: judging a request and recording its refusal.
pub trait Judge: Send + Sync + 'static {
    /// `Ok` when a request for `sniffed` may go on to the upstream the connection to `dest`
    /// was made for (a future: the Link's own networks may have to be read again first).
    fn judge<'a>(&'a self, net: Net, dest: SocketAddr, sniffed: Option<&'a str>) -> Judged<'a>;
    /// Records a refused request on the connection recorded as `host` (port 80).
    fn refused(&self, host: &str, refusal: &Refused);
}

/// When a proxied connection last became idle (none of its requests in flight), so that the
/// proxy can close the idlest one when the job is at its connection cap.
#[derive(Debug)]
pub struct Activity {
    origin: Instant,
    /// Milliseconds from `origin` when it last became idle; [`BUSY`] while it is not.
    idle_since: AtomicU64,
    in_flight: AtomicUsize,
}

const BUSY: u64 = u64::MAX;

impl Activity {
    /// A connection that is busy (it has not answered anything yet).
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            origin: Instant::now(),
            idle_since: AtomicU64::new(BUSY),
            in_flight: AtomicUsize::new(0),
        })
    }

    pub fn busy(&self) {
        self.idle_since.store(BUSY, Ordering::Relaxed);
    }

    pub fn idle(&self) {
        let ms = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(BUSY - 1);
        self.idle_since.store(ms, Ordering::Relaxed);
    }

    /// How long it has been idle, `None` while busy.
    pub fn idle_for(&self) -> Option<Duration> {
        let since = self.idle_since.load(Ordering::Relaxed);
        if since == BUSY {
            return None;
        }
        let now = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(BUSY - 1);
        Some(Duration::from_millis(now.saturating_sub(since)))
    }

    /// A request is in flight until the guard drops (its response body is done).
    fn request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.busy();
        InFlight(self.clone())
    }
}

struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.0.idle();
        }
    }
}

/// Serves the tool's connection (whose first `head` bytes were read already) as HTTP/1 to the
/// `upstream` connected for it, judging every request; returns when either side is done.
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    judge: Arc<dyn Judge>,
    net: Net,
    dest: SocketAddr,
    host: String,
    client: TcpStream,
    head: Vec<u8>,
    upstream: TcpStream,
    flow: Arc<Flow>,
    activity: Arc<Activity>,
) -> Result<(), hyper::Error> {
    let upstream = Metered {
        inner: upstream,
        flow,
    };
    let (sender, upstream_conn) = hyper::client::conn::http1::Builder::new()
        .preserve_header_case(true)
        .max_buf_size(MAX_RESPONSE_HEAD)
        .handshake::<_, Incoming>(TokioIo::new(upstream))
        .await?;
    let state = Arc::new(Connection {
        judge,
        net,
        dest,
        host,
        sender: tokio::sync::Mutex::new(sender),
        activity,
        upgraded: std::sync::Mutex::new(None),
    });
    let served = state.clone();
    let service = hyper::service::service_fn(move |req| {
        let state = state.clone();
        async move { Ok::<_, Infallible>(state.handle(req).await) }
    });
    let client = Replay {
        head,
        at: 0,
        inner: client,
    };
    let server = hyper::server::conn::http1::Builder::new()
        .preserve_header_case(true)
        .auto_date_header(false)
        // A tool may shut its side once its request is written and still read the answer.
        .half_close(true)
        .max_buf_size(MAX_HEAD.max(8192))
        .timer(TokioTimer::new())
        .header_read_timeout(IDLE_KEEP_ALIVE)
        .serve_connection(TokioIo::new(client), service)
        .with_upgrades();
    let upstream_conn = upstream_conn.with_upgrades();
    tokio::pin!(server, upstream_conn);
    let ended = tokio::select! {
        r = &mut server => r,
        _ = &mut upstream_conn => {
            // The upstream is gone (or upgraded): finish the response under way, take no
            // other request.
            server.as_mut().graceful_shutdown();
            server.await
        }
    };
    // A head hyper's own parser refused (ambiguous body length, a bad header, too large) was
    // answered by hyper itself and never reached `handle`: it is a refused request all the
    // same, recorded as one.
    if let Err(e) = &ended {
        if e.is_parse() {
            served.judge.refused(
                &served.host,
                &Refused {
                    code: RefusalCode::BadRequest,
                    why: format!("the request head cannot be read: {e}"),
                },
            );
        }
    }
    // An upgrade (101) hands both sockets over: join them here, in the connection's own
    // task, so the proxy's deadline and the job's end still bound them.
    let upgraded = served
        .upgraded
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some((from_client, from_upstream)) = upgraded {
        if let (Ok(client), Ok(upstream)) = tokio::join!(from_client, from_upstream) {
            // Busy while the tunnel lives: its `101` answered the request, but the bytes
            // it carries are no idle connection's, to be closed first at the job's cap.
            let _tunnel = served.activity.request();
            let mut client = TokioIo::new(client);
            let mut upstream = TokioIo::new(upstream);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        }
    }
    ended
}

struct Connection {
    judge: Arc<dyn Judge>,
    net: Net,
    dest: SocketAddr,
    /// What the record calls this connection.
    host: String,
    sender: tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Incoming>>,
    activity: Arc<Activity>,
    upgraded: std::sync::Mutex<Option<(hyper::upgrade::OnUpgrade, hyper::upgrade::OnUpgrade)>>,
}

impl Connection {
    async fn handle(&self, mut req: Request<Incoming>) -> Response<ProxyBody> {
        let in_flight = self.activity.request();
        let judged = match sniff::request_host(req.method(), req.uri(), req.headers()) {
            Ok(sniffed) => {
                self.judge
                    .judge(self.net, self.dest, sniffed.as_deref())
                    .await
            }
            Err(e) => Err(Refused {
                code: RefusalCode::BadRequest,
                why: e.to_string(),
            }),
        };
        if let Err(refused) = judged {
            self.judge.refused(&self.host, &refused);
            return refusal(refused.code, &refused.why);
        }
        let upgrade = req
            .headers()
            .contains_key(hyper::header::UPGRADE)
            .then(|| hyper::upgrade::on(&mut req));
        let mut sender = self.sender.lock().await;
        if sender.ready().await.is_err() {
            return refusal(
                RefusalCode::UpstreamUnreachable,
                "the upstream closed the connection",
            );
        }
        let mut response = match sender.send_request(req).await {
            Ok(r) => r,
            Err(e) => {
                return refusal(
                    RefusalCode::UpstreamUnreachable,
                    &format!("the upstream failed: {e}"),
                )
            }
        };
        drop(sender);
        if response.status() == hyper::StatusCode::SWITCHING_PROTOCOLS {
            if let Some(from_client) = upgrade {
                let from_upstream = hyper::upgrade::on(&mut response);
                *self.upgraded.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((from_client, from_upstream));
            }
        }
        // The request is in flight until its response body has been sent (or dropped).
        response.map(|body| {
            body.map_frame(move |frame| {
                let _ = &in_flight;
                frame
            })
            .boxed()
        })
    }
}

/// The runner's refusal as a response: the code's status, [`REFUSAL_HEADER`], the JSON body,
/// and `Connection: close`.
fn refusal(code: RefusalCode, why: &str) -> Response<ProxyBody> {
    let body = sniff::refusal_body(code, why);
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() =
        hyper::StatusCode::from_u16(code.status()).unwrap_or(hyper::StatusCode::FORBIDDEN);
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    if let Ok(name) = hyper::header::HeaderName::from_bytes(REFUSAL_HEADER.as_bytes()) {
        headers.insert(name, hyper::header::HeaderValue::from_static(code.as_str()));
    }
    headers.insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    response
}

/// The tool's socket, with the bytes already read from it (the first head) read again first.
struct Replay {
    head: Vec<u8>,
    at: usize,
    inner: TcpStream,
}

impl AsyncRead for Replay {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(rest) = this.head.get(this.at..).filter(|r| !r.is_empty()) {
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Replay {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The upstream socket, every byte granted by the job's budgets before it moves.
struct Metered {
    inner: TcpStream,
    flow: Arc<Flow>,
}

impl AsyncRead for Metered {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let n = buf.filled().len() - before;
        if n > 0 {
            let granted = self.flow.grant_in(n).map_err(io::Error::other)?;
            if granted < n {
                // Keep what the budget allows; the next read fails.
                buf.set_filled(before + granted);
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Metered {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Pin::new(&mut self.inner).poll_write(cx, buf);
        }
        let granted = self.flow.grant_out(buf.len()).map_err(io::Error::other)?;
        let written = Pin::new(&mut self.inner).poll_write(cx, &buf[..granted]);
        let used = match &written {
            Poll::Ready(Ok(n)) => *n,
            _ => 0,
        };
        self.flow.give_back_out(granted - used);
        written
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Judges a later request on a connection the way the first was judged, for a job.
pub fn judge_with(
    ctx: &decide::Context<'_>,
    net: Net,
    dest: SocketAddr,
    sniffed: Option<&str>,
) -> Result<(), Refused> {
    let attempt = Attempt { net, dest, sniffed };
    decide::target(ctx, &attempt)
        .map(|_| ())
        .map_err(|reason| Refused {
            code: reason.code(),
            why: reason.to_string(),
        })
}

#[cfg(test)]
mod tests;
