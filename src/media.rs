//! Inputs from the Media service: `GET <media_url>/<media_id>` for an input that carries no
//! bytes and is not in the cache.
//!
//! The answer is bounded in size (the 1 MiB all inputs may hold together) and in time
//! (`runner.media_timeout_ms`, connection to last byte), hashed in memory, and handed to
//! `inputs::gather` only when it matches the input's sha256; `gather` verifies it once
//! more and keeps it in the content-addressed cache once every input of the job passed.
//! Nothing is written for bytes that do not match, nor for a job that ends `integrity`. The job's `subject` and `project` go along as `X-OV-Subject` and `X-OV-Project`,
//! so the Media service can check that the job may read what it names.

use crate::config::Config;
use crate::inputs::{Fetched, InputError};
use crate::job::{ValidJob, MAX_INPUTS_TOTAL_BYTES};
use std::time::Duration;

/// Redirects Media may answer with, each to its own origin.
const MAX_REDIRECTS: usize = 3;

/// The client and where Media is; built once per engine.
#[derive(Debug, Clone)]
pub struct Media {
    base: String,
    client: reqwest::Client,
    timeout: Duration,
    max_bytes: usize,
}

impl Media {
    /// None when no `runner.media_url` is configured.
    pub fn from_config(config: &Config) -> Result<Option<Media>, String> {
        let Some(url) = config
            .runner
            .media_url
            .as_deref()
            .filter(|u| !u.trim().is_empty())
        else {
            return Ok(None);
        };
        Media::new(
            url,
            Duration::from_millis(config.runner.media_timeout_ms.max(1)),
            MAX_INPUTS_TOTAL_BYTES,
        )
        .map(Some)
    }

    pub fn new(url: &str, timeout: Duration, max_bytes: usize) -> Result<Media, String> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| format!("runner.media_url {url:?} is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "https" | "http") {
            return Err(format!("runner.media_url {url:?} is not http(s)"));
        }
        // Redirects only within Media's own origin (scheme, host, port), three at most: one
        // elsewhere would take the job's subject and project there, as plain http perhaps,
        // and tell the job how another host answered. A proxy in the runner's environment
        // (HTTPS_PROXY, NO_PROXY) is the operator's, and used.
        let origin = parsed.origin();
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
            } else if attempt.url().origin() != origin {
                attempt.error(
                    "Media redirected to another origin (scheme, host or port) than \
                     runner.media_url's, which the runner does not follow: it would take the \
                     job's subject and project there; point runner.media_url at the origin \
                     that serves the bytes",
                )
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder()
            .connect_timeout(timeout)
            .timeout(timeout)
            .redirect(redirects)
            .user_agent(concat!("openvibe-skill-runner/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the Media client: {e}"))?;
        Ok(Media {
            base: url.trim_end_matches('/').to_string(),
            client,
            timeout,
            max_bytes,
        })
    }

    /// Fetches every input the job carries no bytes for and `found` (what the cache held
    /// for the job, [`crate::inputs::cached`]) lacks, and returns `found` with the verified
    /// bytes added. An input without a `media_id` is left to `inputs::gather`, which
    /// reports it missing.
    pub async fn fetch_missing(
        &self,
        job: &ValidJob,
        found: Fetched,
    ) -> Result<Fetched, InputError> {
        // What the job already holds (carried, or found in the cache) counts against the
        // bound all its inputs share: only what is left of it is fetched, and with nothing
        // left Media is not asked at all.
        let held = crate::inputs::held_bytes(job, &found);
        let mut budget = self.max_bytes.saturating_sub(held);
        let mut fetched = found;
        // One deadline for the job's inputs together: a job of many inputs from a slow
        // Media holds its slot for `media_timeout_ms` at most, not that for each input.
        let deadline = tokio::time::Instant::now() + self.timeout;
        for input in &job.inputs {
            if input.content.is_some() || fetched.contains_key(&input.sha256) {
                continue;
            }
            let Some(media_id) = input.media_id.as_deref() else {
                continue;
            };
            // What the job carries and the cache holds already breaks the inputs' bound:
            // the job is `rejected` for it, as it is without Media (`inputs::gather`), not
            // told its bytes are missing.
            if held > self.max_bytes {
                return Err(InputError::Content(format!(
                    "inputs hold more than {} bytes in all (those carried and cached already \
                     hold {held}); {media_id} was not fetched",
                    self.max_bytes
                )));
            }
            let bytes = self
                .fetch(media_id, budget, job, deadline)
                .await
                .map_err(|detail| InputError::Unavailable {
                    name: input.name.clone(),
                    detail,
                })?;
            crate::inputs::verify(input, &bytes)?;
            budget -= bytes.len();
            fetched.insert(input.sha256, bytes);
        }
        Ok(fetched)
    }

    /// The body of `GET <base>/<media_id>`, at most `limit` bytes, by `deadline`.
    async fn fetch(
        &self,
        media_id: &str,
        limit: usize,
        job: &ValidJob,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<u8>, String> {
        if media_id == "." || media_id == ".." || media_id.contains('/') {
            return Err(format!(
                "media_id {media_id:?} is not a name Media can serve"
            ));
        }
        let url = format!("{}/{media_id}", self.base);
        let mut req = self.client.get(&url);
        for (header, value) in [
            ("X-OV-Subject", &job.subject),
            ("X-OV-Project", &job.project),
        ] {
            if let Some(v) = value.as_deref() {
                if let Ok(v) = reqwest::header::HeaderValue::from_str(v) {
                    req = req.header(header, v);
                }
            }
        }
        let work = async {
            let mut resp = req
                .send()
                .await
                .map_err(|e| format!("Media did not answer: {}", error_chain(&e.without_url())))?;
            if !resp.status().is_success() {
                return Err(format!("Media answered {} for {media_id}", resp.status()));
            }
            if resp.content_length().is_some_and(|n| n > limit as u64) {
                return Err(format!(
                    "Media announced {} bytes for {media_id}; the inputs may hold {limit} more",
                    resp.content_length().unwrap_or(0)
                ));
            }
            let mut body = Vec::new();
            while let Some(chunk) = resp.chunk().await.map_err(|e| {
                format!(
                    "Media's answer broke off: {}",
                    error_chain(&e.without_url())
                )
            })? {
                if body.len() + chunk.len() > limit {
                    return Err(format!(
                        "Media sent more than {limit} bytes for {media_id}, the room left for inputs"
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(body)
        };
        // The client's own timeout bounds one request; this one the job's inputs together,
        // a stalled body included.
        match tokio::time::timeout_at(deadline, work).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "Media did not deliver {media_id} within runner.media_timeout_ms ({} ms for \
                 all of the job's inputs)",
                self.timeout.as_millis()
            )),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::{sha256, Cache};
    use crate::job::{Bounds, Net};
    use bytes::Bytes;
    use http_body_util::Full;
    use hyper::body::Frame;
    use hyper::{Request, Response};
    use std::convert::Infallible;
    use std::net::SocketAddr;

    const GOOD: &[u8] = b"process.stdout.write('1')";

    /// A local Media: `/good`, `/other` (different bytes), `/moved` (a redirect to `/good`),
    /// `/away-<port>` (a redirect to `/good` at that port), `/big` (2 MiB announced),
    /// `/stream` (2 MiB, no length), `/silent` (never answers), `/slow-*` (its own path,
    /// after 400 ms), `/missing` (404).
    async fn server() -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(
                        |req: Request<hyper::body::Incoming>| async move {
                            let path = req.uri().path().to_string();
                            type B = http_body_util::combinators::BoxBody<Bytes, Infallible>;
                            use http_body_util::BodyExt;
                            let full = |b: Vec<u8>| -> B { Full::new(Bytes::from(b)).boxed() };
                            let resp: Response<B> = match path.as_str() {
                                "/media/good" => {
                                    assert_eq!(req.headers()["x-ov-subject"], "person_1");
                                    Response::new(full(GOOD.to_vec()))
                                }
                                "/media/other" => Response::new(full(b"process.exit(3)".to_vec())),
                                "/media/moved" => {
                                    let mut r = Response::new(full(Vec::new()));
                                    *r.status_mut() = hyper::StatusCode::FOUND;
                                    r.headers_mut()
                                        .insert("location", "/media/good".parse().unwrap());
                                    r
                                }
                                away if away.starts_with("/media/away-") => {
                                    let port = away.trim_start_matches("/media/away-");
                                    let mut r = Response::new(full(Vec::new()));
                                    *r.status_mut() = hyper::StatusCode::FOUND;
                                    let to = format!("http://127.0.0.1:{port}/media/good");
                                    r.headers_mut().insert("location", to.parse().unwrap());
                                    r
                                }
                                "/media/big" => Response::new(full(vec![b'x'; 2 << 20])),
                                "/media/stream" => Response::new(Chunks(64).boxed()),
                                slow if slow.starts_with("/media/slow-") => {
                                    tokio::time::sleep(Duration::from_millis(400)).await;
                                    Response::new(full(slow.as_bytes().to_vec()))
                                }
                                "/media/silent" => {
                                    tokio::time::sleep(Duration::from_secs(30)).await;
                                    Response::new(full(Vec::new()))
                                }
                                _ => {
                                    let mut r = Response::new(full(b"no".to_vec()));
                                    *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                                    r
                                }
                            };
                            Ok::<_, Infallible>(resp)
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        addr
    }

    /// A body of `n` chunks of 32 KiB with no announced length (sent chunked).
    struct Chunks(usize);

    impl hyper::body::Body for Chunks {
        type Data = Bytes;
        type Error = Infallible;
        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            if self.0 == 0 {
                return std::task::Poll::Ready(None);
            }
            self.0 -= 1;
            std::task::Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b'y'; 32 << 10])))))
        }
    }

    fn job_with(media_id: &str, bytes: &[u8]) -> ValidJob {
        let v = serde_json::json!({
            "job_id": "media-test",
            "class": "function",
            "artifact": crate::job::ARTIFACT,
            "subject": "person_1",
            "args": {"tool": "probe", "entry": "t.js", "input": {}},
            "inputs": [{"name": "t.js", "media_id": media_id, "sha256": hex::encode(sha256(bytes))}],
            "net": Net::Deny.as_str(),
        });
        crate::job::parse_job_value(v, &Bounds::default()).unwrap()
    }

    /// A job of an input carried inline (`carried` bytes), one it names by its sha256
    /// alone (`named`: for the cache to hold), and `good` from Media.
    fn job_carrying(carried: usize, named: &[u8]) -> ValidJob {
        use base64::Engine as _;
        let inline = vec![b' '; carried];
        let v = serde_json::json!({
            "job_id": "media-budget",
            "class": "function",
            "artifact": crate::job::ARTIFACT,
            "subject": "person_1",
            "args": {"tool": "probe", "entry": "t.js", "input": {}},
            "inputs": [
                {"name": "carried.txt", "sha256": hex::encode(sha256(&inline)),
                 "content_base64": base64::engine::general_purpose::STANDARD.encode(&inline)},
                {"name": "named.txt", "sha256": hex::encode(sha256(named))},
                {"name": "t.js", "media_id": "good", "sha256": hex::encode(sha256(GOOD))},
            ],
            "net": Net::Deny.as_str(),
        });
        crate::job::parse_job_value(v, &Bounds::default()).unwrap()
    }

    #[tokio::test]
    async fn what_the_job_carries_or_the_cache_holds_counts_against_what_is_fetched() {
        let addr = server().await;
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path().join("cache"), 4 << 20);
        let media = Media::new(
            &format!("http://{addr}/media/"),
            Duration::from_secs(5),
            1 << 20,
        )
        .unwrap();
        let named = vec![b'n'; 600 << 10];
        cache.put(&sha256(&named), &named);
        // Room for the whole of `good`: fetched.
        let job = job_carrying((1 << 20) - named.len() - GOOD.len(), &named);
        let fetched = media
            .fetch_missing(&job, crate::inputs::cached(&job, &cache))
            .await
            .unwrap();
        assert_eq!(fetched.get(&sha256(GOOD)).map(Vec::as_slice), Some(GOOD));
        // Ten bytes of room: refused on the length Media announces.
        let job = job_carrying((1 << 20) - named.len() - 10, &named);
        match media
            .fetch_missing(&job, crate::inputs::cached(&job, &cache))
            .await
        {
            Err(InputError::Unavailable { name, detail }) => {
                assert_eq!(name, "t.js");
                assert!(detail.contains("may hold 10 more"), "{detail}");
            }
            other => panic!(
                "expected the fetch refused, got {:?}",
                other.map(|f| f.len())
            ),
        }
        // Over the bound already: Media is not asked (nothing listens on this one).
        let dead = Media::new("http://127.0.0.1:9/", Duration::from_millis(300), 1 << 20).unwrap();
        let job = job_carrying(600 << 10, &named);
        match dead
            .fetch_missing(&job, crate::inputs::cached(&job, &cache))
            .await
        {
            Err(InputError::Content(detail)) => {
                assert!(
                    detail.contains("already hold 1228800") && detail.contains("not fetched"),
                    "{detail}"
                );
            }
            other => panic!("expected no fetch, got {:?}", other.map(|f| f.len())),
        }
    }

    #[tokio::test]
    async fn fetches_verifies_and_caches() {
        let addr = server().await;
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path().join("cache"), 1 << 20);
        let media = Media::new(
            &format!("http://{addr}/media/"),
            Duration::from_secs(5),
            1 << 20,
        )
        .unwrap();

        let job = job_with("good", GOOD);
        let fetched = media
            .fetch_missing(&job, crate::inputs::cached(&job, &cache))
            .await
            .unwrap();
        assert_eq!(fetched.get(&sha256(GOOD)).map(Vec::as_slice), Some(GOOD));
        assert!(
            cache.get(&sha256(GOOD)).is_none(),
            "not cached before resolve"
        );
        crate::inputs::gather(&job, &cache, &fetched).unwrap();
        assert_eq!(cache.get(&sha256(GOOD)).unwrap(), GOOD);
        // Cached now: no second request is needed (a dead server would do).
        let dead = Media::new("http://127.0.0.1:9/", Duration::from_millis(300), 1 << 20).unwrap();
        dead.fetch_missing(&job, crate::inputs::cached(&job, &cache))
            .await
            .unwrap();

        let job = job_with("other", GOOD);
        let e = media.fetch_missing(&job, Fetched::new()).await.unwrap_err();
        assert!(matches!(e, InputError::Mismatch { .. }), "{e}");
        assert!(
            !tmp.path().join("c2").exists()
                || std::fs::read_dir(tmp.path().join("c2"))
                    .unwrap()
                    .next()
                    .is_none()
        );

        for id in ["big", "stream"] {
            let e = media
                .fetch_missing(&job_with(id, id.as_bytes()), Fetched::new())
                .await
                .unwrap_err();
            assert!(
                matches!(&e, InputError::Unavailable { detail, .. } if detail.contains("bytes")),
                "{id}: {e}"
            );
        }
        let e = media
            .fetch_missing(&job_with("missing", b"m"), Fetched::new())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("404"), "{e}");
        // `..` as a media id never reaches the fetch: the job's validation refuses it.
    }

    #[tokio::test]
    async fn redirects_are_followed_within_medias_origin_only() {
        let addr = server().await;
        let media = Media::new(
            &format!("http://{addr}/media/"),
            Duration::from_secs(5),
            1 << 20,
        )
        .unwrap();
        let fetched = media
            .fetch_missing(&job_with("moved", GOOD), Fetched::new())
            .await
            .expect("a redirect within Media's origin is followed");
        assert_eq!(fetched.get(&sha256(GOOD)).map(Vec::as_slice), Some(GOOD));
        // Another origin (here another port): not followed, never reached.
        let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = elsewhere.local_addr().unwrap().port();
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = hits.clone();
        let listening = tokio::spawn(async move {
            while elsewhere.accept().await.is_ok() {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let e = media
            .fetch_missing(&job_with(&format!("away-{port}"), GOOD), Fetched::new())
            .await
            .unwrap_err();
        assert!(
            matches!(&e, InputError::Unavailable { detail, .. } if detail.contains("another origin")),
            "{e}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
        listening.abort();
    }

    /// A URL may carry credentials (`user:password@`, a signed query): a failure's message,
    /// which goes into the job's result, never shows it.
    #[tokio::test]
    async fn a_failure_does_not_show_medias_url() {
        let media = Media::new(
            "http://reader:s3cret@127.0.0.1:9/media/",
            Duration::from_millis(500),
            1 << 20,
        )
        .unwrap();
        let e = media
            .fetch_missing(&job_with("good", GOOD), Fetched::new())
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("Media did not answer"), "{text}");
        // Neither the credentials nor the rest of the URL (a signed query would be one).
        assert!(
            !text.contains("s3cret") && !text.contains("reader"),
            "{text}"
        );
        assert!(!text.contains("/media/good"), "{text}");
    }

    #[tokio::test]
    async fn a_silent_server_costs_the_timeout_and_no_more() {
        let addr = server().await;
        let media = Media::new(
            &format!("http://{addr}/media"),
            Duration::from_millis(400),
            1 << 20,
        )
        .unwrap();
        let t = std::time::Instant::now();
        let e = media
            .fetch_missing(&job_with("silent", GOOD), Fetched::new())
            .await
            .unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        assert!(matches!(e, InputError::Unavailable { .. }), "{e}");
        // Nobody listening at all.
        let closed = Media::new("http://127.0.0.1:9", Duration::from_millis(400), 1 << 20).unwrap();
        let e = closed
            .fetch_missing(&job_with("x", GOOD), Fetched::new())
            .await
            .unwrap_err();
        assert!(matches!(e, InputError::Unavailable { .. }), "{e}");
    }

    /// `media_timeout_ms` bounds the job's inputs together: three inputs of 400 ms each
    /// do not fit in 1000 ms, though each alone would (with room for a slow machine).
    #[tokio::test]
    async fn the_timeout_is_the_jobs_not_each_inputs() {
        let addr = server().await;
        let media = Media::new(
            &format!("http://{addr}/media"),
            Duration::from_millis(1000),
            1 << 20,
        )
        .unwrap();
        let slow_job = |n: usize| {
            let inputs: Vec<_> = (0..n)
                .map(|i| {
                    let id = format!("slow-{i}");
                    serde_json::json!({"name": format!("f{i}.js"), "media_id": id,
                        "sha256": hex::encode(sha256(format!("/media/{id}").as_bytes()))})
                })
                .collect();
            let v = serde_json::json!({
                "job_id": format!("media-slow-{n}"), "class": "function",
                "artifact": crate::job::ARTIFACT,
                "args": {"tool": "probe", "entry": "f0.js", "input": {}},
                "inputs": inputs, "net": Net::Deny.as_str(),
            });
            crate::job::parse_job_value(v, &Bounds::default()).unwrap()
        };
        let one = media.fetch_missing(&slow_job(1), Fetched::new()).await;
        assert_eq!(one.unwrap().len(), 1, "one alone fits");
        let e = media
            .fetch_missing(&slow_job(3), Fetched::new())
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("media_timeout_ms (1000 ms for all"),
            "{e}"
        );
    }

    #[test]
    fn configuration() {
        let mut c = Config::default();
        assert!(Media::from_config(&c).unwrap().is_none());
        c.runner.media_url = Some("ftp://x".into());
        assert!(Media::from_config(&c).is_err());
        c.runner.media_url = Some("https://media.example/v1/media".into());
        assert!(Media::from_config(&c).unwrap().is_some());
    }
}
