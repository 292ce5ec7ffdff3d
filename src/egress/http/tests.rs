//! Unit tests of `src/egress/http.rs`, over loopback sockets: a tool, the proxy's
//! [`serve`], and an upstream HTTP server.

use super::*;

use std::sync::Mutex;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::egress::record::{Budgets, Recorder};

/// A job that allows every request and records refusals as the proxy's job does.
struct TestJudge {
    recorder: Arc<Recorder>,
    codes: Mutex<Vec<RefusalCode>>,
}

impl Judge for TestJudge {
    fn judge<'a>(&'a self, _net: Net, _dest: SocketAddr, _sniffed: Option<&'a str>) -> Judged<'a> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn refused(&self, host: &str, refusal: &Refused) {
        self.codes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(refusal.code);
        self.recorder.refused(host, 80);
    }
}

/// An upstream that answers every request `200 ok` and counts them.
async fn upstream() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let served = Arc::new(AtomicUsize::new(0));
    let counted = served.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let counted = counted.clone();
            let service = hyper::service::service_fn(move |_req: Request<Incoming>| {
                counted.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok")))) }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(socket), service),
            );
        }
    });
    (addr, served)
}

/// One connection the proxy serves: the tool's end of it, the job's record and judge, and
/// the task running [`serve`].
struct Proxied {
    recorder: Arc<Recorder>,
    judge: Arc<TestJudge>,
    tool: TcpStream,
    serving: tokio::task::JoinHandle<Result<(), hyper::Error>>,
}

/// Connects a tool to the proxy's [`serve`] for a `public` job's flow to `example.com:80`
/// at `upstream_addr`, `first` being the head the proxy already read (and judged).
async fn proxied(upstream_addr: SocketAddr, first: &[u8], activity: Arc<Activity>) -> Proxied {
    let recorder = Recorder::new(Budgets::default());
    let flow = Arc::new(recorder.open("example.com", 80).expect("flow"));
    let judge = Arc::new(TestJudge {
        recorder: recorder.clone(),
        codes: Mutex::new(Vec::new()),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let tool = TcpStream::connect(listener.local_addr().expect("addr"))
        .await
        .expect("connect");
    let (client, _) = listener.accept().await.expect("accept");
    let upstream = TcpStream::connect(upstream_addr).await.expect("upstream");
    let serving = tokio::spawn(serve(
        judge.clone(),
        Net::Public,
        "198.18.0.3:80".parse().expect("dest"),
        "example.com".into(),
        client,
        first.to_vec(),
        upstream,
        flow,
        activity,
    ));
    Proxied {
        recorder,
        judge,
        tool,
        serving,
    }
}

/// Reads one response whose body is `Content-Length` bytes (at most 4 KiB in all).
async fn read_response(tool: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tool.read(&mut buf).await.expect("read");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                return text;
            }
        }
        assert!(n > 0 && got.len() < 4096, "no whole response: {text:?}");
    }
}

/// An upstream that answers its first request with a head holding a header of `size`
/// bytes, then closes.
async fn upstream_with_head_of(size: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let answer = format!(
            "HTTP/1.1 200 OK\r\nX-Big: {}\r\nContent-Length: 2\r\n\r\nok",
            "a".repeat(size)
        );
        let _ = socket.write_all(answer.as_bytes()).await;
    });
    addr
}

/// A response head over [`MAX_RESPONSE_HEAD`] is not buffered up to hyper's own bound: the
/// tool is told `502`; one below it passes whole.
#[tokio::test]
async fn a_response_head_over_its_bound_is_refused() {
    for (size, passes) in [
        (MAX_RESPONSE_HEAD / 2, true),
        (MAX_RESPONSE_HEAD * 2, false),
    ] {
        let Proxied { mut tool, .. } = proxied(
            upstream_with_head_of(size).await,
            b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
            Activity::new(),
        )
        .await;
        let mut got = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        // The whole answer, or its status line and no more than one more read.
        let read = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match tool.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
                if got.ends_with(b"\r\n\r\nok") || got.len() > 4 * MAX_RESPONSE_HEAD {
                    break;
                }
                if !passes && got.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
        })
        .await;
        assert!(read.is_ok(), "no answer for a head of {size} bytes");
        let text = String::from_utf8_lossy(&got);
        let status = text.lines().next().unwrap_or_default();
        if passes {
            assert_eq!(status, "HTTP/1.1 200 OK", "a head of {size} bytes");
            assert!(got.ends_with(b"\r\n\r\nok") && got.len() > size, "{status}");
        } else {
            assert!(
                status.starts_with("HTTP/1.1 502"),
                "a head of {size}: {status}"
            );
        }
    }
}

/// A later request on a kept-alive connection that hyper's parser refuses (a body length
/// two parsers could read differently) gets hyper's `400` and is recorded as one refused
/// attempt on the connection, after the allowed one the connection itself is.
#[tokio::test]
async fn a_later_head_hyper_refuses_is_recorded_as_refused() {
    for bad in [
        "Transfer-Encoding: gzip\r\n",
        "Content-Length: 1\r\nContent-Length: 2\r\n",
    ] {
        let (upstream_addr, served) = upstream().await;
        let Proxied {
            recorder,
            judge,
            mut tool,
            serving,
        } = proxied(
            upstream_addr,
            b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
            Activity::new(),
        )
        .await;
        let answer = read_response(&mut tool).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
        tool.write_all(format!("POST / HTTP/1.1\r\nHost: example.com\r\n{bad}\r\nx").as_bytes())
            .await
            .expect("write");
        let mut rest = Vec::new();
        tool.read_to_end(&mut rest).await.expect("read");
        let rest = String::from_utf8_lossy(&rest);
        assert!(rest.starts_with("HTTP/1.1 400"), "{bad:?}: {rest:?}");
        let ended = tokio::time::timeout(Duration::from_secs(5), serving)
            .await
            .expect("serve ends")
            .expect("serve's task");
        assert!(
            ended.as_ref().is_err_and(|e| e.is_parse()),
            "{bad:?}: {ended:?}"
        );
        assert_eq!(served.load(Ordering::SeqCst), 1, "only the first went on");
        let records = recorder.records();
        let seen: Vec<(&str, u16, bool)> = records
            .iter()
            .map(|r| (r.host.as_str(), r.port, r.allowed))
            .collect();
        assert_eq!(
            seen,
            [("example.com", 80, true), ("example.com", 80, false)],
            "{bad:?}"
        );
        let codes = judge.codes.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(codes.as_slice(), [RefusalCode::BadRequest], "{bad:?}");
    }
}

/// An upgraded connection (a WebSocket's `101`) is busy while its tunnel carries bytes,
/// not idle once the `101` is sent: at the job's connection cap the idlest connection is
/// closed, and that must not be a live tunnel. Idle again once the tunnel ends.
#[tokio::test]
async fn an_upgraded_connection_is_busy_while_its_tunnel_lives() {
    // An upstream that answers the upgrade, then echoes.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let upstream_addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        let _ = socket
            .write_all(
                b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            )
            .await;
        let (mut r, mut w) = socket.split();
        let _ = tokio::io::copy(&mut r, &mut w).await;
    });
    let activity = Activity::new();
    let Proxied {
        mut tool, serving, ..
    } = proxied(
        upstream_addr,
        b"GET /ws HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        activity.clone(),
    )
    .await;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(b"\r\n\r\n") {
        let n = tool.read(&mut buf).await.expect("read the 101");
        assert!(n > 0, "no 101: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 101"),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    for round in 0..3 {
        tool.write_all(b"ping").await.expect("write");
        let mut echo = [0u8; 4];
        tool.read_exact(&mut echo).await.expect("the echo");
        assert_eq!(&echo, b"ping");
        assert_eq!(
            activity.idle_for(),
            None,
            "round {round}: the tunnel counts as idle"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(tool);
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("serve ends with the tunnel")
        .expect("serve's task")
        .expect("served");
    assert!(activity.idle_for().is_some(), "idle once the tunnel ended");
}
