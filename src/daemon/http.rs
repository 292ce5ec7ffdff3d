//! The HTTP/1.1 API on the unix socket (hyper): routing, limits, errors.
//!
//! Every answer the daemon writes itself is JSON (the metrics aside); every error is
//! `{"error":{"code":"…","message":"…"}}` with a 4xx (or a 5xx for the runner's own
//! trouble). Requests are bounded in size and in time, so a client can neither make the
//! daemon buffer without end nor hold a worker.

use super::jobs::{Envelope, Jobs, LookupError, Submitted};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;

pub use super::body::{BodyBudget, HeldBody, BODY_BUDGET_BYTES, MAX_BODY_BYTES};
/// How long `DELETE` waits for the killed job's result before it answers.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

pub type Body = Full<Bytes>;

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorInner<'a>,
}

#[derive(Serialize)]
struct ErrorInner<'a> {
    code: &'a str,
    message: &'a str,
}

pub fn error(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    let body = serde_json::to_vec(&ErrorBody {
        error: ErrorInner { code, message },
    })
    .unwrap_or_else(|_| b"{\"error\":{\"code\":\"internal\",\"message\":\"\"}}".to_vec());
    json_bytes(status, body)
}

fn json_bytes(status: StatusCode, mut body: Vec<u8>) -> Response<Body> {
    body.push(b'\n');
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn json<T: Serialize>(status: StatusCode, v: &T) -> Response<Body> {
    match serde_json::to_vec(v) {
        Ok(b) => json_bytes(status, b),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            &format!("cannot serialize the answer: {e}"),
        ),
    }
}

fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        &format!("this path takes {allow}"),
    );
    r.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    r
}

/// The answer to a caller whose peer credentials are not admitted.
/// The answer to a caller the allow lists do not admit; its connection closes with it.
pub fn forbidden() -> Response<Body> {
    let mut r = error(
        StatusCode::FORBIDDEN,
        "forbidden",
        "this caller's uid and groups are not in daemon.allow_uids or daemon.allow_gids",
    );
    r.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

/// The answer on a connection of an admitted caller that came while every connection slot
/// was held.
pub fn connections_full(max: usize) -> Response<Body> {
    let mut r = error(
        StatusCode::SERVICE_UNAVAILABLE,
        "busy",
        &format!(
            "the daemon serves {max} connections at once and all are held; close idle ones \
             (or reuse them) and send the request again shortly"
        ),
    );
    r.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

/// `?wait=1` (also `true`/`yes`).
fn wants_wait(query: Option<&str>) -> Result<bool, String> {
    let Some(q) = query else { return Ok(false) };
    let mut wait = false;
    for pair in q.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "wait" => {
                wait = match v {
                    "1" | "true" | "yes" | "" => true,
                    "0" | "false" | "no" => false,
                    _ => return Err("wait is 1 or 0".into()),
                }
            }
            _ => return Err("the only query parameter is wait".into()),
        }
    }
    Ok(wait)
}

/// Requests other than `POST /v1/jobs` take no query (an empty one is none).
fn takes_no_query(query: Option<&str>) -> Result<(), String> {
    match query {
        Some(q) if q.split('&').any(|p| !p.is_empty()) => {
            Err("only POST /v1/jobs takes a query (?wait=1); send this request without one".into())
        }
        _ => Ok(()),
    }
}

async fn read_body(
    req: Request<Incoming>,
    timeout: Duration,
    budget: &BodyBudget,
) -> Result<HeldBody, Response<Body>> {
    let announced = match req.headers().get(CONTENT_LENGTH) {
        Some(len) => len.to_str().ok().and_then(|s| s.parse::<u64>().ok()),
        None => None,
    };
    if announced.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    read_within(req.into_body(), announced, timeout, budget).await
}

/// Reads `body` whole, at most `MAX_BODY_BYTES` within `timeout`, its bytes taken from
/// `budget` as they arrive (an announced length whole with the first ones). Past the budget the body is read to its end and dropped and
/// the answer is `503` `busy` (waiting for the budget could leave every reader holding
/// part of it for another's bytes).
async fn read_within<B>(
    body: B,
    announced: Option<u64>,
    timeout: Duration,
    budget: &BodyBudget,
) -> Result<HeldBody, Response<Body>>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let announced = announced
        .and_then(|n| usize::try_from(n).ok())
        .map(|n| n.min(MAX_BODY_BYTES));
    let mut body = Limited::new(body, MAX_BODY_BYTES);
    let mut bytes = Vec::new();
    let mut paid = 0usize;
    let mut held: Option<OwnedSemaphorePermit> = None;
    let mut over_budget = false;
    let read = async {
        while let Some(frame) = body.frame().await {
            let frame = frame?;
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            if data.is_empty() {
                continue;
            }
            if over_budget {
                continue; // read and dropped, so the answer reaches the caller
            }
            let need = bytes.len() + data.len();
            if need > paid {
                // With its first bytes an announced body pays for its whole length, which is
                // then reserved: the budget counts what the buffer holds, and a header alone
                // takes nothing.
                let to = need.max(announced.unwrap_or(0));
                let Some(more) = budget.take(to - paid) else {
                    over_budget = true;
                    bytes = Vec::new();
                    held = None;
                    continue;
                };
                match held.as_mut() {
                    Some(h) => h.merge(more),
                    None => held = Some(more),
                }
                if announced.is_some() {
                    bytes.reserve_exact(to - bytes.len());
                }
                paid = to;
            }
            bytes.extend_from_slice(&data);
        }
        Ok::<bool, Box<dyn std::error::Error + Send + Sync>>(!over_budget)
    };
    match tokio::time::timeout(timeout, read).await {
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            &format!("the body did not arrive within {} ms", timeout.as_millis()),
        )),
        Ok(Err(e)) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(too_large())
            } else {
                Err(error(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    &format!("cannot read the body: {e}"),
                ))
            }
        }
        Ok(Ok(false)) => Err(busy()),
        Ok(Ok(true)) => Ok(HeldBody::new(bytes, held)),
    }
}

/// Reads and drops the body of a request that has no use for one, at most
/// `MAX_BODY_BYTES` within `timeout`: closing a connection with unread bytes in it makes
/// the kernel reset it, and the caller would lose the answer. Whether the connection can
/// be kept (false: the body was too big or too slow, and the answer says `close`).
async fn discard_body(body: Incoming, timeout: Duration) -> bool {
    let mut body = Limited::new(body, MAX_BODY_BYTES);
    let drained = tokio::time::timeout(timeout, async {
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                return false;
            }
        }
        true
    })
    .await;
    matches!(drained, Ok(true))
}

fn busy() -> Response<Body> {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "busy",
        &format!(
            "the runner is reading other requests' bodies, {BODY_BUDGET_BYTES} bytes at most \
             at once; the job was not accepted: send it again shortly"
        ),
    )
}

fn too_large() -> Response<Body> {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        &format!("a request body is at most {MAX_BODY_BYTES} bytes"),
    )
}

/// Serves one request of an admitted caller.
pub async fn handle(jobs: Arc<Jobs>, req: Request<Incoming>) -> Response<Body> {
    let resp = route(&jobs, req).await;
    jobs.metrics.http(resp.status().as_u16());
    resp
}

async fn route(jobs: &Arc<Jobs>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    if method == Method::POST && matches!(path.as_str(), "/v1/jobs" | "/v1/jobs/") {
        return submit(jobs, req).await;
    }
    // A wrong path or method is answered as such (404, 405), query or none. No other
    // request takes a query: a caller that asks `GET /v1/jobs/{id}?wait=1` would take the
    // answer given at once for one that waited.
    let target = endpoint(&method, &path).and_then(|e| {
        takes_no_query(req.uri().query())
            .map(|()| e)
            .map_err(Refused::Query)
    });
    // No other request takes a body: whatever came is read and dropped, so the answer
    // reaches the caller and the connection stays usable.
    let whole = discard_body(req.into_body(), jobs.body_timeout).await;
    let mut r = respond(jobs, target).await;
    if !whole {
        r.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

/// What a request without a body asks for.
#[derive(Debug, PartialEq)]
enum Endpoint {
    Info,
    Metrics,
    Status(String),
    Cancel(String),
}

/// Why a request without a body is answered with an error before it reaches its endpoint.
#[derive(Debug, PartialEq)]
enum Refused {
    /// No such path.
    NotFound,
    /// The path's methods.
    Method(&'static str),
    /// A query where none is taken.
    Query(String),
}

impl Refused {
    fn answer(self) -> Response<Body> {
        match self {
            Refused::NotFound => error(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such path: the API is /v1/info, /v1/jobs, /v1/jobs/{id}, /metrics",
            ),
            Refused::Method(allowed) => method_not_allowed(allowed),
            Refused::Query(m) => error(StatusCode::BAD_REQUEST, "bad_request", &m),
        }
    }
}

/// The endpoint a method and path name, or why the API has none there.
fn endpoint(method: &Method, path: &str) -> Result<Endpoint, Refused> {
    match path {
        "/v1/info" => match *method {
            Method::GET => Ok(Endpoint::Info),
            _ => Err(Refused::Method("GET")),
        },
        "/metrics" => match *method {
            Method::GET => Ok(Endpoint::Metrics),
            _ => Err(Refused::Method("GET")),
        },
        "/v1/jobs" | "/v1/jobs/" => Err(Refused::Method("POST")),
        p => match p.strip_prefix("/v1/jobs/") {
            Some(raw) => {
                // Percent-decoded: most clients drop `.` and `..` as path segments, so
                // those ids (valid by the contract) are reachable only as `%2E`, `%2E%2E`.
                // Text that is not UTF-8 once decoded is no id.
                let id = percent_encoding::percent_decode_str(raw)
                    .decode_utf8()
                    .map(|id| id.into_owned())
                    .unwrap_or_default();
                match *method {
                    Method::GET => Ok(Endpoint::Status(id)),
                    Method::DELETE => Ok(Endpoint::Cancel(id)),
                    _ => Err(Refused::Method("GET, DELETE")),
                }
            }
            None => Err(Refused::NotFound),
        },
    }
}

/// The answer to a request without a body: its endpoint's, or why it has none.
async fn respond(jobs: &Arc<Jobs>, target: Result<Endpoint, Refused>) -> Response<Body> {
    match target {
        Ok(e) => answer(jobs, e).await,
        Err(refused) => refused.answer(),
    }
}

/// The answer to a request without a body (or whose body was dropped).
async fn answer(jobs: &Arc<Jobs>, endpoint: Endpoint) -> Response<Body> {
    match endpoint {
        Endpoint::Info => json(StatusCode::OK, &super::info(jobs)),
        Endpoint::Metrics => {
            // Off the async threads: the first look at the input cache measures its folder.
            let all = jobs.clone();
            let text = match tokio::task::spawn_blocking(move || all.metrics.render(&all.gauges()))
                .await
            {
                Ok(text) => text,
                Err(e) => {
                    return error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "internal",
                        &format!("cannot gather the metrics: {e}"),
                    )
                }
            };
            let mut r = Response::new(Full::new(Bytes::from(text)));
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        Endpoint::Status(id) => get_job(jobs, &id).await,
        Endpoint::Cancel(id) => cancel_job(jobs, &id).await,
    }
}

async fn submit(jobs: &Arc<Jobs>, req: Request<Incoming>) -> Response<Body> {
    let wait = match wants_wait(req.uri().query()) {
        Ok(w) => w,
        Err(e) => {
            // The body is read and dropped first, as for any request refused before its
            // body: the answer must reach the caller.
            let whole = discard_body(req.into_body(), jobs.body_timeout).await;
            let mut r = error(StatusCode::BAD_REQUEST, "bad_request", &e);
            if !whole {
                r.headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            return r;
        }
    };
    let body = match read_body(req, jobs.body_timeout, &jobs.body_budget).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    // Run whole even if the caller hangs up meanwhile; the body is released once the job
    // is decided, not held while a `?wait=1` waits for its end (each of up to 512
    // connections may have brought its request_max_bytes).
    let submitted = jobs.submit_whole(body).await;
    match submitted {
        Submitted::BadRequest(code, m) => error(StatusCode::BAD_REQUEST, code, &m),
        Submitted::Stopping => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the runner is stopping and takes no new job",
        ),
        Submitted::Busy(m) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            &format!("{m}; the job was not accepted: send it again shortly"),
        ),
        Submitted::JournalUnavailable(m) => journal_unavailable(&format!(
            "{m}; the job was not accepted: send it again later"
        )),
        Submitted::Internal(m) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", &m),
        Submitted::Done(r) => {
            if wait {
                json(StatusCode::OK, &*r)
            } else {
                json(StatusCode::OK, &Envelope::done(r))
            }
        }
        Submitted::State(h) => {
            if wait {
                match h.done().await {
                    Some(r) => json(StatusCode::OK, &*r),
                    // Only when the daemon stops with the result still unwritten.
                    None => journal_unavailable(
                        "the runner stopped before the journal took this job's result; after \
                         it starts again the job's answer is internal runner_restarted",
                    ),
                }
            } else {
                let st = h.state();
                let code = if matches!(st, super::jobs::JobState::Done(_)) {
                    StatusCode::OK
                } else {
                    StatusCode::ACCEPTED
                };
                json(code, &Envelope::of(&h.job_id, &st))
            }
        }
    }
}

/// 503 `journal_unavailable`: the runner cannot record a job's answer now.
fn journal_unavailable(message: &str) -> Response<Body> {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "journal_unavailable",
        message,
    )
}

fn bad_id(id: &str) -> Option<Response<Body>> {
    if crate::job::valid_job_id(id) {
        None
    } else {
        Some(error(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such job: a job id is 1-64 characters of [A-Za-z0-9_.-]",
        ))
    }
}

async fn get_job(jobs: &Arc<Jobs>, id: &str) -> Response<Body> {
    if let Some(r) = bad_id(id) {
        return r;
    }
    match jobs.lookup(id).await {
        Ok(Some(e)) => json(StatusCode::OK, &e),
        Ok(None) => error(StatusCode::NOT_FOUND, "not_found", "no such job"),
        Err(LookupError::Pruned(m)) => error(StatusCode::GONE, "result_pruned", &m),
        Err(LookupError::Journal(e)) => journal_unavailable(&format!(
            "cannot read the journal: {e}; the job's answer is kept: ask again later"
        )),
        Err(LookupError::Damaged(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", &e),
    }
}

async fn cancel_job(jobs: &Arc<Jobs>, id: &str) -> Response<Body> {
    if let Some(r) = bad_id(id) {
        return r;
    }
    if let Some(h) = jobs.cancel(id) {
        match tokio::time::timeout(CANCEL_WAIT, h.done()).await {
            Ok(Some(r)) => return json(StatusCode::OK, &Envelope::done(r)),
            // Its submission was still being checked, and was turned away (the journal
            // could not take it): no job, as below.
            Ok(None) => {}
            Err(_) => return json(StatusCode::ACCEPTED, &Envelope::of(id, &h.state())),
        }
    }
    // Not in memory: it ended already (the answer is its result) or never was.
    get_job(jobs, id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_parameter() {
        assert_eq!(wants_wait(None), Ok(false));
        assert_eq!(wants_wait(Some("wait=1")), Ok(true));
        assert_eq!(wants_wait(Some("wait=0")), Ok(false));
        assert_eq!(wants_wait(Some("wait=true&")), Ok(true));
        assert!(wants_wait(Some("wait=maybe")).is_err());
        assert!(wants_wait(Some("x=1")).is_err());
        assert_eq!(takes_no_query(None), Ok(()));
        assert_eq!(takes_no_query(Some("")), Ok(()));
        assert_eq!(takes_no_query(Some("&")), Ok(()));
        assert!(takes_no_query(Some("wait=1")).is_err());
        assert!(takes_no_query(Some("x")).is_err());
    }

    /// A body that arrives in the given frames.
    struct Frames(std::collections::VecDeque<Bytes>);

    impl hyper::body::Body for Frames {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
            std::task::Poll::Ready(self.0.pop_front().map(|b| Ok(hyper::body::Frame::data(b))))
        }
    }

    fn frames(sizes: &[usize]) -> Frames {
        Frames(sizes.iter().map(|&n| Bytes::from(vec![b'x'; n])).collect())
    }

    async fn code_of(r: Response<Body>) -> (u16, String) {
        let status = r.status().as_u16();
        let body = r.into_body().collect().await.map(|c| c.to_bytes());
        let v: serde_json::Value = serde_json::from_slice(&body.unwrap_or_default()).unwrap();
        (
            status,
            v["error"]["code"].as_str().unwrap_or_default().to_string(),
        )
    }

    const T: Duration = Duration::from_secs(5);

    /// The daemon's jobs with skills on and no engine: a job ends `runner_unavailable`.
    fn engineless() -> crate::daemon::jobs::tests::Daemon {
        let config = crate::config::Config::parse(&format!(
            "[worker]\nfunctions = [\"{}\"]",
            crate::job::ARTIFACT
        ))
        .unwrap();
        crate::daemon::jobs::tests::jobs_under(None, &config)
    }

    async fn get(d: &crate::daemon::jobs::tests::Daemon, path: &str) -> Response<Body> {
        respond(&d.jobs, endpoint(&Method::GET, path)).await
    }

    #[test]
    fn paths_and_methods_name_their_endpoint_or_their_error() {
        assert_eq!(
            endpoint(&Method::GET, "/v1/info").ok(),
            Some(Endpoint::Info)
        );
        assert_eq!(
            endpoint(&Method::GET, "/metrics").ok(),
            Some(Endpoint::Metrics)
        );
        assert_eq!(
            endpoint(&Method::DELETE, "/v1/jobs/a").ok(),
            Some(Endpoint::Cancel("a".into()))
        );
        assert_eq!(
            endpoint(&Method::GET, "/v1/jobs/%2E").ok(),
            Some(Endpoint::Status(".".into()))
        );
        for (method, path, code) in [
            (Method::PUT, "/v1/info", 405),
            (Method::DELETE, "/metrics", 405),
            (Method::GET, "/v1/jobs", 405),
            (Method::PATCH, "/v1/jobs/a", 405),
            (Method::GET, "/v2/info", 404),
            (Method::GET, "/v1/jobsx", 404),
        ] {
            match endpoint(&method, path) {
                Ok(e) => panic!("{method} {path} reached {e:?}"),
                Err(refused) => {
                    assert_eq!(refused.answer().status().as_u16(), code, "{method} {path}")
                }
            }
        }
    }

    #[tokio::test]
    async fn an_id_of_dots_is_reached_percent_encoded() {
        let d = engineless();
        // Without an engine the job ends at once (runner_unavailable), journaled.
        let s = d
            .jobs
            .submit(&crate::daemon::admit::tests::body(".."))
            .await;
        if let crate::daemon::jobs::Submitted::State(h) = s {
            tokio::time::timeout(T, h.done()).await.unwrap();
        }
        let got = get(&d, "/v1/jobs/%2E%2E").await;
        assert_eq!(got.status().as_u16(), 200);
        let body = got.into_body().collect().await.unwrap().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["job_id"], "..", "{v}");
        assert_eq!(
            code_of(get(&d, "/v1/jobs/%2e").await).await,
            (404, "not_found".to_string())
        );
        // Not UTF-8 once decoded, or outside the id's characters: no such job.
        for bad in ["/v1/jobs/%FF", "/v1/jobs/a%2Fb", "/v1/jobs/%2E%2E%00"] {
            assert_eq!(
                code_of(get(&d, bad).await).await,
                (404, "not_found".to_string()),
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn a_cancel_of_a_submission_turned_away_meanwhile_finds_no_job() {
        let d = engineless();
        // A first submission of "y" is being checked; the cancel waits for its end.
        let held = d.jobs.reserve("y").expect("the id is free");
        let cancel = {
            let jobs = d.jobs.clone();
            tokio::spawn(async move { code_of(cancel_job(&jobs, "y").await).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The journal would not take it: the submission is answered 503, nothing kept.
        d.jobs
            .forget("y", &held, crate::daemon::jobs::JobState::Pending);
        drop(held);
        let answered = tokio::time::timeout(T, cancel).await.unwrap().unwrap();
        assert_eq!(answered, (404, "not_found".to_string()));
    }

    #[tokio::test]
    async fn a_body_holds_its_bytes_of_the_budget_until_it_is_dropped() {
        let budget = BodyBudget::new(100);
        let body = read_within(frames(&[30, 0, 30]), Some(60), T, &budget)
            .await
            .map_err(|r| r.status())
            .unwrap();
        assert_eq!(body.bytes.len(), 60);
        assert_eq!(budget.held(), 60);
        drop(body);
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn past_the_budget_a_body_is_refused_busy_and_holds_nothing() {
        let budget = BodyBudget::new(100);
        let first = read_within(frames(&[80]), None, T, &budget).await;
        let first = first.map_err(|r| r.status()).unwrap();
        // Its first frame fits, its second does not: the whole body is read and dropped.
        let second = read_within(frames(&[10, 20, 5]), Some(35), T, &budget).await;
        match second {
            Ok(_) => panic!("a body past the budget was taken"),
            Err(r) => assert_eq!(code_of(r).await, (503, "busy".to_string())),
        }
        assert_eq!(budget.held(), 80, "the refused body still holds bytes");
        // An announced length is paid for whole with the first bytes: 30 of an announced
        // 40 do not fit the 20 left, though their first frame alone would.
        let announced = read_within(frames(&[10, 20]), Some(40), T, &budget).await;
        match announced {
            Ok(_) => panic!("an announced body past the budget was taken"),
            Err(r) => assert_eq!(code_of(r).await, (503, "busy".to_string())),
        }
        assert_eq!(budget.held(), 80);
        // Within what is left, a body is read.
        let small = read_within(frames(&[20]), None, T, &budget).await;
        assert_eq!(small.map(|b| b.bytes.len()).map_err(|r| r.status()), Ok(20));
        drop(first);
        let again = read_within(frames(&[10, 20, 5]), Some(35), T, &budget).await;
        assert_eq!(again.map(|b| b.bytes.len()).map_err(|r| r.status()), Ok(35));
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn a_body_over_the_largest_is_too_large_and_holds_nothing() {
        let budget = BodyBudget::new(BODY_BUDGET_BYTES);
        let mib = 1024 * 1024;
        let r = read_within(frames(&[4 * mib, 4 * mib, 1]), None, T, &budget).await;
        match r {
            Ok(_) => panic!("a body over MAX_BODY_BYTES was taken"),
            Err(r) => assert_eq!(code_of(r).await, (413, "payload_too_large".to_string())),
        }
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn error_body_shape() {
        let r = error(StatusCode::NOT_FOUND, "not_found", "no \"such\" job");
        assert_eq!(r.status(), 404);
        assert_eq!(r.headers()[CONTENT_TYPE], "application/json");
    }
}
