//! The unix socket: binding it safely, admitting callers by their peer credentials, and
//! serving each connection with hyper's HTTP/1.1 server.

use super::http;
use super::jobs::Jobs;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future as _;
use std::io;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The name's start of the folders [`private_folder`] makes; the pid that made one follows.
const BIND_FOLDER: &str = ".openvibe-skill-runner-bind.";

/// A new folder in `dir` that only this user may enter, for the socket to be made in.
fn private_folder(dir: &Path) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt as _;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let private = dir.join(format!("{BIND_FOLDER}{}.{n}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(|e| {
            format!(
                "cannot make a folder for the socket in {}: {e}",
                dir.display()
            )
        })?;
    Ok(private)
}

/// Removes the folders [`private_folder`] left in `dir` when the daemon that made them died
/// between its bind and the move (their pid is gone): each holds at most the socket it
/// made. Only this user's own folders are touched, nothing is followed, and a folder whose
/// daemon lives (or whose pid was taken again) is left alone.
fn remove_dead_bind_folders(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = nix::unistd::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(BIND_FOLDER))
            .and_then(|rest| rest.split_once('.'))
            .and_then(|(pid, n)| n.parse::<u64>().ok().and(pid.parse::<u32>().ok()))
            .filter(|&pid| pid > 0)
        else {
            continue;
        };
        let alive = super::recovery::alive(pid);
        let path = entry.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me);
        if alive || !ours {
            continue;
        }
        let _ = std::fs::remove_file(path.join("socket"));
        match std::fs::remove_dir(&path) {
            Ok(()) => {
                tracing::info!(folder = %path.display(), "removed a dead daemon's bind folder")
            }
            Err(e) => {
                tracing::warn!(folder = %path.display(), error = %e, "cannot remove a dead daemon's bind folder")
            }
        }
    }
}

/// Binds the socket: its directory is made if missing; a socket file nothing listens on
/// (a crashed daemon's) is replaced; anything else at the path is an error. Mode 0660,
/// owned by root and `group` when given.
pub fn bind(path: &Path, group: Option<&str>) -> Result<(UnixListener, SocketFile), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the socket directory {}: {e}", dir.display()))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => {
                return Err(format!(
                    "another daemon is listening on {}; give this one --socket",
                    path.display()
                ))
            }
            Err(_) => {
                tracing::info!(socket = %path.display(), "removing a stale socket");
                std::fs::remove_file(path).map_err(|e| {
                    format!("cannot remove the stale socket {}: {e}", path.display())
                })?;
            }
        },
        Ok(_) => {
            return Err(format!(
                "{} exists and is not a socket; not touching it",
                path.display()
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot inspect {}: {e}", path.display())),
    }
    // The socket is made in a folder of its own that only this user may enter, given its
    // final mode (0660) and group there, checked, and only then moved into place, never over
    // anything: nobody can connect before its mode says who may, nothing after the bind
    // follows a link another user put in its place, and the process's umask, which its other
    // threads make files under meanwhile, is never changed.
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let private = private_folder(dir)?;
    let staged = private.join("socket");
    let made = UnixListener::bind(&staged)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))
        .and_then(|listener| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o660)).map_err(
                |e| format!("cannot set the mode of the socket {}: {e}", path.display()),
            )?;
            let gid = match group {
                None => None,
                Some(g) => Some(crate::config::resolve_group(g)?),
            };
            let made = give_group(&staged, gid)?;
            nix::fcntl::renameat2(
                nix::fcntl::AT_FDCWD,
                &staged,
                nix::fcntl::AT_FDCWD,
                path,
                nix::fcntl::RenameFlags::RENAME_NOREPLACE,
            )
            .map_err(|e| format!("cannot put the socket in place at {}: {e}", path.display()))?;
            Ok((listener, made))
        });
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&private);
    let (listener, made) = made?;
    let file = SocketFile {
        path: path.to_path_buf(),
        made,
    };
    if let Some(problem) = crate::state_dir::socket_problem(path) {
        // Not left for the next start to find: it is this process's, if still there.
        file.remove();
        return Err(problem);
    }
    // Only in a folder now known to be changed by this user alone: elsewhere another user
    // could swap a dead daemon's folder for a link between the check and the removal.
    remove_dead_bind_folders(dir);
    Ok((listener, file))
}

/// After the bind: gives the socket at `path` to `gid` (when given) without following a
/// symlink, and checks that what is there is the socket as it should be: a socket (not a
/// symlink put in its place), mode 0660, of `gid`. Its identity (device, inode) when it is.
fn give_group(path: &Path, gid: Option<u32>) -> Result<(u64, u64), String> {
    if let Some(gid) = gid {
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            path,
            None,
            Some(nix::unistd::Gid::from_raw(gid)),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|e| format!("cannot give {} to group {gid}: {e}", path.display()))?;
    }
    let m = std::fs::symlink_metadata(path).map_err(|e| {
        format!(
            "cannot inspect the socket just made at {}: {e}",
            path.display()
        )
    })?;
    let dir = path.parent().unwrap_or(path).display();
    if !m.file_type().is_socket() {
        return Err(format!(
            "{} was replaced by something else right after the daemon made its socket there; \
             check who may write to {dir}",
            path.display()
        ));
    }
    if m.mode() & 0o777 != 0o660 {
        return Err(format!(
            "the socket {} was made with mode {:o}, not 0660 (a default ACL on {dir}?); \
             remove it so that the socket's mode alone says who may connect",
            path.display(),
            m.mode() & 0o777
        ));
    }
    if let Some(gid) = gid.filter(|&g| m.gid() != g) {
        return Err(format!(
            "the socket {} belongs to group {}, not {gid}, right after the daemon gave it; \
             check who may write to {dir}",
            path.display(),
            m.gid()
        ));
    }
    Ok((m.dev(), m.ino()))
}

/// The socket file a daemon made, known by its identity: at its end the daemon removes the
/// file only while it is still that one. One removed meanwhile (by an operator, a cleaner of
/// `/run`) may have been replaced by another daemon's socket, which stays.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    made: (u64, u64),
}

impl SocketFile {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the socket, if it is still the one this process made.
    pub fn remove(&self) {
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if m.file_type().is_socket() && (m.dev(), m.ino()) == self.made {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// The caller at the other end of a connection, as the kernel saw it at connect time.
#[derive(Debug, Clone)]
pub struct Peer {
    pub uid: u32,
    pub gid: u32,
    pub pid: Option<i32>,
    pub groups: Vec<u32>,
}

/// SO_PEERCRED and SO_PEERGROUPS of the connection.
pub fn peer(stream: &UnixStream) -> std::io::Result<Peer> {
    let cred = stream.peer_cred()?;
    Ok(Peer {
        uid: cred.uid(),
        gid: cred.gid(),
        pid: cred.pid(),
        groups: peer_groups(stream.as_raw_fd()).unwrap_or_default(),
    })
}

fn peer_groups(fd: i32) -> std::io::Result<Vec<u32>> {
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut len = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: the buffer holds `len` bytes; the kernel writes at most that many and
        // says how many it needs when they do not fit (ERANGE).
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let n = len as usize / std::mem::size_of::<libc::gid_t>();
        if r == 0 {
            groups.truncate(n);
            return Ok(groups);
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ERANGE) && n > groups.len() && n <= 65536 {
            groups.resize(n, 0);
            continue;
        }
        return Err(err);
    }
}

/// Root always; others when their uid, gid or a supplementary group is allowed.
pub fn admitted(p: &Peer, allow_uids: &[u32], allow_gids: &[u32]) -> bool {
    p.uid == 0
        || allow_uids.contains(&p.uid)
        || allow_gids.contains(&p.gid)
        || p.groups.iter().any(|g| allow_gids.contains(g))
}

/// Connections of callers the allow lists do not admit, served at once (their first
/// request is answered 403) beside the `max_connections` of the callers they do: a caller
/// turned away must not hold the slots of those let in.
const OUTSIDER_CONNECTIONS: usize = 8;
/// How long an outsider's connection may take to send its request's head.
const OUTSIDER_HEADER_TIMEOUT: Duration = Duration::from_secs(1);
/// Connections kept for root beyond `max_connections`: the operator (`curl`, a health
/// check) still reaches a daemon whose slots an admitted caller holds.
const ROOT_CONNECTIONS: usize = 8;
/// Connections of admitted callers that came while every slot was held, answered `503`
/// at once (with an outsider's header timeout); more are closed unanswered.
const TURNED_AWAY_CONNECTIONS: usize = 8;

/// How a connection is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Door {
    /// Its requests are answered (a caller the allow lists do not admit gets 403).
    Open,
    /// Every one of the slots (this many) was held when it came: its request is answered
    /// 503 `busy`.
    Full(usize),
}

/// Whether `peer` (none: its credentials could not be read) is an outsider now, and how
/// long its connection may take to send a request's head.
fn connection_terms(peer: Option<&Peer>, jobs: &Jobs) -> (bool, Duration) {
    let s = jobs.settings();
    let outsider = !peer.is_some_and(|p| admitted(p, &s.allow_uids, &s.allow_gids));
    let header_timeout = if outsider {
        OUTSIDER_HEADER_TIMEOUT.min(jobs.header_timeout)
    } else {
        jobs.header_timeout
    };
    (outsider, header_timeout)
}

pub async fn accept_loop(
    listener: UnixListener,
    jobs: Arc<Jobs>,
    stop: CancellationToken,
    close_connections: CancellationToken,
    conns: TaskTracker,
    max_connections: usize,
) {
    let slots = Arc::new(Semaphore::new(max_connections));
    let root_slots = Arc::new(Semaphore::new(ROOT_CONNECTIONS));
    let outsiders = Arc::new(Semaphore::new(OUTSIDER_CONNECTIONS));
    let turned_away = Arc::new(Semaphore::new(TURNED_AWAY_CONNECTIONS));
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // EMFILE and the like: wait a little rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let peer = peer(&stream)
            .map_err(|e| tracing::warn!(error = %e, "connection refused: no peer credentials"))
            .ok();
        let (outsider, mut header_timeout) = connection_terms(peer.as_ref(), &jobs);
        // Never waited for: a full house would stop the loop, and root's connection with
        // every other, behind the callers that hold the slots.
        let (permit, door) = if outsider {
            match outsiders.clone().try_acquire_owned() {
                Ok(p) => (p, Door::Open),
                Err(_) => {
                    // Turned away already too often at once: closed unanswered.
                    jobs.metrics.forbidden();
                    continue;
                }
            }
        } else {
            let root = peer.as_ref().is_some_and(|p| p.uid == 0);
            let taken = slots.clone().try_acquire_owned().or_else(|e| match root {
                true => root_slots.clone().try_acquire_owned(),
                false => Err(e),
            });
            match taken {
                Ok(p) => (p, Door::Open),
                Err(_) => {
                    jobs.metrics.turned_away();
                    match turned_away.clone().try_acquire_owned() {
                        Ok(p) => {
                            header_timeout = OUTSIDER_HEADER_TIMEOUT.min(header_timeout);
                            (p, Door::Full(max_connections))
                        }
                        Err(_) => continue,
                    }
                }
            }
        };
        let jobs = jobs.clone();
        let close = close_connections.clone();
        conns.spawn(async move {
            serve_peer(stream, peer, jobs, close, header_timeout, door).await;
            drop(permit);
        });
    }
}

/// Serves one connection of this caller. The caller is checked at each request against
/// the allow lists of that moment: a reload that takes a caller off them turns its open
/// connections away too, not only its next ones. A refused request is answered 403 and
/// its connection closed.
async fn serve_peer<S>(
    stream: S,
    peer: Option<Peer>,
    jobs: Arc<Jobs>,
    close: CancellationToken,
    header_timeout: Duration,
    door: Door,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| {
        let jobs = jobs.clone();
        let peer = peer.clone();
        async move {
            let allowed = peer.as_ref().is_some_and(|p| {
                let s = jobs.settings();
                admitted(p, &s.allow_uids, &s.allow_gids)
            });
            if let (true, Door::Full(max)) = (allowed, door) {
                jobs.metrics.http(503);
                return Ok(http::connections_full(max));
            }
            if allowed {
                return Ok::<_, Infallible>(http::handle(jobs, req).await);
            }
            if let Some(p) = &peer {
                tracing::warn!(
                    uid = p.uid,
                    gid = p.gid,
                    pid = p.pid.unwrap_or(0),
                    "connection refused: caller not in daemon.allow_uids or daemon.allow_gids"
                );
            }
            jobs.metrics.forbidden();
            jobs.metrics.http(403);
            Ok(http::forbidden())
        }
    });
    // A caller that stops reading its answers is given as long to take a byte of them as
    // to send a request's head.
    let stream = WriteDeadline::new(stream, header_timeout);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(64 * 1024)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        }
        _ = close.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(2), conn).await;
        }
    }
}

/// A connection whose answers must keep moving: a write or flush that could not go on for
/// `limit` (the caller stopped reading, and the socket's buffers are full) fails with
/// `TimedOut`, which ends hyper's connection and frees its slot. Any byte written starts
/// the wait again, so a slow reader is not cut off, only one that takes nothing.
struct WriteDeadline<S> {
    inner: S,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S, limit: Duration) -> WriteDeadline<S> {
        WriteDeadline {
            inner,
            limit,
            stalled: None,
        }
    }

    /// What a write step's `polled` outcome becomes: progress ends the wait, a blocked step
    /// starts it (or goes on with it) and fails once it has lasted `limit`.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let limit = self.limit;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the caller took no byte of its answer for {} ms",
                    limit.as_millis()
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn p(uid: u32, gid: u32, groups: &[u32]) -> Peer {
        Peer {
            uid,
            gid,
            pid: None,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn admission() {
        assert!(admitted(&p(0, 0, &[]), &[], &[]));
        assert!(!admitted(&p(1000, 1000, &[]), &[], &[]));
        assert!(admitted(&p(1000, 1000, &[]), &[1000], &[]));
        assert!(admitted(&p(1000, 1000, &[]), &[], &[1000]));
        assert!(admitted(&p(1000, 1000, &[27, 998]), &[], &[998]));
        assert!(!admitted(&p(1000, 1000, &[27]), &[1001], &[998]));
    }

    /// A caller the allow lists do not admit gets a second to send its request and its own
    /// few connections: one that connects and sends nothing held a slot of the admitted
    /// callers' for the whole header timeout, so a loop of them shut the API.
    #[tokio::test]
    async fn an_outsider_that_sends_nothing_is_let_go_within_a_second() {
        let config = crate::config::Config::parse(
            "[daemon]\nallow_uids = [65533]\nheader_timeout_ms = 60000\n",
        )
        .unwrap();
        let d = super::super::jobs::tests::jobs_under(None, &config);
        let jobs = d.jobs.clone();
        assert_eq!(jobs.header_timeout, Duration::from_secs(60));
        let outsider = p(65532, 65534, &[]);
        assert_eq!(
            connection_terms(Some(&outsider), &jobs),
            (true, OUTSIDER_HEADER_TIMEOUT)
        );
        assert!(connection_terms(None, &jobs).0, "no credentials");
        let member = p(65533, 65534, &[]);
        assert_eq!(
            connection_terms(Some(&member), &jobs),
            (false, Duration::from_secs(60))
        );
        let (_client, server) = UnixStream::pair().unwrap();
        let (_, timeout) = connection_terms(Some(&outsider), &jobs);
        let served = serve_peer(
            server,
            Some(outsider),
            jobs,
            CancellationToken::new(),
            timeout,
            Door::Open,
        );
        tokio::time::timeout(Duration::from_secs(10), served)
            .await
            .expect("let go long before the 60 s header timeout");
    }

    /// An admitted caller that sends requests and never reads their answers (pipelined, or
    /// one answer larger than the socket holds) is cut off once no byte of an answer could be
    /// written for `header_timeout_ms`: before, hyper waited on the write for good, and the
    /// caller held its connection slot as long as it liked.
    #[tokio::test]
    async fn a_caller_that_stops_reading_its_answers_is_cut_off() {
        use tokio::io::AsyncWriteExt as _;
        let config = crate::config::Config::parse("[daemon]\nheader_timeout_ms = 500\n").unwrap();
        let d = super::super::jobs::tests::jobs_under(None, &config);
        let jobs = d.jobs.clone();
        let (mut client, server) = UnixStream::pair().unwrap();
        let served = tokio::spawn(serve_peer(
            server,
            Some(p(0, 0, &[])),
            jobs.clone(),
            CancellationToken::new(),
            jobs.header_timeout,
            Door::Open,
        ));
        // Far more answers than the socket's buffers hold (each /v1/info is about a KiB),
        // sent as fast as the daemon reads them; the client never reads.
        let sending = tokio::spawn(async move {
            let req = b"GET /v1/info HTTP/1.1\r\nhost: x\r\n\r\n";
            for _ in 0..5000 {
                if client.write_all(req).await.is_err() {
                    break;
                }
            }
            client
        });
        let ended = tokio::time::timeout(Duration::from_secs(10), served).await;
        sending.abort();
        ended
            .expect("the connection ends soon after its answers stop being read")
            .unwrap();
    }

    #[tokio::test]
    async fn a_reload_that_takes_a_caller_off_the_allow_list_turns_its_open_connection_away() {
        use http_body_util::{BodyExt as _, Empty};
        let config = crate::config::Config::parse("[daemon]\nallow_uids = [65533]\n").unwrap();
        let d = super::super::jobs::tests::jobs_under(None, &config);
        let jobs = d.jobs.clone();
        let (client, server) = UnixStream::pair().unwrap();
        let caller = p(65533, 65534, &[]);
        let served = tokio::spawn(serve_peer(
            server,
            Some(caller),
            jobs.clone(),
            CancellationToken::new(),
            jobs.header_timeout,
            Door::Open,
        ));
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(client))
            .await
            .unwrap();
        let conn = tokio::spawn(conn);
        let get = || {
            hyper::Request::get("/v1/jobs/nothing-here")
                .header("host", "localhost")
                .body(Empty::<bytes::Bytes>::new())
                .unwrap()
        };
        let r = sender.send_request(get()).await.unwrap();
        assert_eq!(r.status(), 404, "an allowed caller is answered");
        r.into_body().collect().await.unwrap();

        // The reload: the same settings a changed configuration file brings.
        jobs.settings.write().unwrap().allow_uids.clear();
        let r = sender.send_request(get()).await.unwrap();
        assert_eq!(r.status(), 403, "the open connection is checked again");
        let body = r.into_body().collect().await.unwrap().to_bytes();
        assert!(String::from_utf8_lossy(&body).contains("\"forbidden\""));
        // And closed: the server's side ends, and nothing more is sent on it.
        tokio::time::timeout(Duration::from_secs(5), served)
            .await
            .expect("the connection is closed after the 403")
            .unwrap();
        assert!(sender.send_request(get()).await.is_err());
        let _ = conn.await;
    }

    /// A caller that sends a whole job and hangs up at once (an HTTP client that timed out,
    /// a scheduler that restarted) drops its request's handler while the daemon checks the
    /// id in the journal. The submission still runs to its end: every such job is decided
    /// (here `runner_unavailable`: no engine), nothing keeps its place, and the id sent
    /// again is answered at once. Before, the id stayed reserved for good (a resubmission
    /// waited forever, GET said `queued`) and a job accepted in the journal never ran.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_caller_that_hangs_up_mid_submission_leaves_no_id_half_taken() {
        use tokio::io::AsyncWriteExt as _;
        let config = crate::config::Config::parse(&format!(
            "[worker]\nfunctions = [\"{}\"]\n[runner]\nmax_jobs = 1\nqueue_len = 1\n",
            crate::job::ARTIFACT
        ))
        .unwrap();
        let d = super::super::jobs::tests::jobs_under(None, &config);
        let jobs = d.jobs.clone();
        let ids: Vec<String> = (0..20).map(|i| format!("gone-{i}")).collect();
        for id in &ids {
            let body = crate::daemon::admit::tests::body(id);
            let (mut client, server) = UnixStream::pair().unwrap();
            let served = tokio::spawn(serve_peer(
                server,
                Some(p(0, 0, &[])),
                jobs.clone(),
                CancellationToken::new(),
                jobs.header_timeout,
                Door::Open,
            ));
            let mut req = format!(
                "POST /v1/jobs HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            req.extend_from_slice(&body);
            client.write_all(&req).await.unwrap();
            client.shutdown().await.unwrap();
            drop(client);
            let _ = tokio::time::timeout(Duration::from_secs(2), served).await;
        }
        // Each hang-up came before the daemon took the job (nothing of it is left) or after
        // (the job is decided): never half-way.
        let send = |id: &str| {
            let body = crate::daemon::admit::tests::body(id);
            let jobs = jobs.clone();
            async move {
                let sent = tokio::time::timeout(Duration::from_secs(2), jobs.submit(&body)).await;
                match sent {
                    Ok(super::super::jobs::Submitted::Done(r)) => r,
                    Ok(super::super::jobs::Submitted::State(h)) => {
                        h.done().await.expect("the job ends")
                    }
                    Ok(_) => panic!("sent again, an error"),
                    Err(_) => panic!("sent again, not answered within 2 s"),
                }
            }
        };
        for id in &ids {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            let held = loop {
                let envelope = jobs.lookup(id).await.ok().flatten();
                match envelope.as_ref().map(|e| e.state) {
                    None => break None,
                    Some("done") => break envelope.and_then(|e| e.result),
                    state => assert!(
                        tokio::time::Instant::now() < deadline,
                        "{id} is still {state:?} 5 s after its caller hung up"
                    ),
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            // Decided: sent again, the same answer. Not taken: sent again, it is taken
            // now, and that answer stays. Never a second run of a decided id.
            let again = send(id).await;
            if let Some(held) = held {
                assert_eq!(*again, *held, "{id}: one answer");
            }
            assert_eq!(*send(id).await, *again, "{id}: one answer");
        }
        let rows: u64 = jobs
            .journal()
            .census()
            .unwrap()
            .iter()
            .map(|(_, _, n)| n)
            .sum();
        assert_eq!(rows, ids.len() as u64, "one journal row for each id");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while jobs.load() != (0, 0) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "places still held: {:?}",
                jobs.load()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_stale_socket_is_replaced_a_live_one_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("run/s.sock");
        let l = bind(&path, None).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        assert!(bind(&path, None).is_err(), "something listens");
        drop(l);
        let _l = bind(&path, None).unwrap();
        let file = tmp.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        assert!(bind(&file, None).is_err());
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
    }

    #[tokio::test]
    async fn a_dead_daemons_bind_folder_is_removed_a_live_ones_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.sock");
        // A pid that has ended: a child of this test, reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let dead_folder = tmp.path().join(format!("{BIND_FOLDER}{dead}.0"));
        std::fs::create_dir(&dead_folder).unwrap();
        let _stale = std::os::unix::net::UnixListener::bind(dead_folder.join("socket")).unwrap();
        let live_folder = tmp
            .path()
            .join(format!("{BIND_FOLDER}{}.999999", std::process::id()));
        std::fs::create_dir(&live_folder).unwrap();
        let other = tmp.path().join(format!("{BIND_FOLDER}{dead}"));
        std::fs::create_dir(&other).unwrap();
        let _l = bind(&path, None).unwrap();
        assert!(!dead_folder.exists(), "the dead daemon's folder is removed");
        assert!(live_folder.exists(), "a live daemon's folder is left");
        assert!(other.exists(), "a folder of another name is left");
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
    }

    #[tokio::test]
    async fn only_the_socket_this_daemon_made_is_removed_at_its_end() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.sock");
        let (_first, first) = bind(&path, None).unwrap();
        // Removed meanwhile (an operator, a cleaner), and another daemon's bound there.
        std::fs::remove_file(&path).unwrap();
        let (_second, second) = bind(&path, None).unwrap();
        first.remove();
        assert!(
            std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket()),
            "the other daemon's socket stays"
        );
        UnixStream::connect(&path)
            .await
            .expect("the other daemon is still reached");
        second.remove();
        assert!(!path.exists(), "its own socket is removed");
    }

    #[test]
    fn a_symlink_in_the_sockets_place_is_neither_followed_nor_taken_for_it() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("secret");
        std::fs::write(&target, "x").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = tmp.path().join("s.sock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let before = std::fs::metadata(&target).unwrap();
        // What bind does after its bind, had the symlink been put in the socket's place.
        let err = give_group(&link, Some(4242)).unwrap_err();
        assert!(err.contains("replaced"), "{err}");
        let after = std::fs::metadata(&target).unwrap();
        assert_eq!(
            (after.gid(), after.mode()),
            (before.gid(), before.mode()),
            "the symlink's target is untouched"
        );
    }

    /// A socket folder another user may change is refused, and no socket is left in it:
    /// that user could rename a socket of their own over the daemon's and answer its
    /// callers. A sticky one, or one only root may change, is fine.
    #[tokio::test]
    async fn a_socket_folder_another_user_may_change_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("s.sock");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        // A dead daemon's bind folder there is not touched either: the folder is not trusted.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let dead_folder = dir.join(format!("{BIND_FOLDER}{dead}.0"));
        std::fs::create_dir(&dead_folder).unwrap();
        let err = bind(&path, None).unwrap_err();
        assert!(
            err.contains(&dir.display().to_string()) && err.contains("not sticky"),
            "{err}"
        );
        assert!(!path.exists(), "no socket left behind");
        assert!(
            dead_folder.exists(),
            "nothing removed in a folder others may change"
        );
        std::fs::remove_dir(&dead_folder).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        drop(bind(&path, None).expect("a sticky folder"));
        std::fs::remove_file(&path).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        if nix::unistd::geteuid().is_root() {
            nix::unistd::chown(&dir, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
            let err = bind(&path, None).unwrap_err();
            assert!(err.contains("belongs to uid 65534"), "{err}");
            assert!(!path.exists(), "no socket left behind");
        }
    }

    #[tokio::test]
    async fn the_socket_is_made_0660_and_given_its_group() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.sock");
        let _l = bind(&path, Some("4243")).unwrap();
        let m = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!((m.mode() & 0o777, m.gid()), (0o660, 4243));
    }

    #[tokio::test]
    async fn peer_credentials_of_a_connection() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.sock");
        let (l, _) = bind(&path, None).unwrap();
        let c = UnixStream::connect(&path).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        let p = peer(&s).unwrap();
        assert_eq!(p.uid, nix::unistd::geteuid().as_raw());
        assert_eq!(p.pid, Some(std::process::id() as i32));
        drop(c);
    }

    /// Every slot held: an admitted caller's next connection is answered 503 `busy` at once
    /// (the accept loop never waits for a slot, which stopped it for every caller, root
    /// included), root still gets in on slots of its own, and a freed slot serves the
    /// caller again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_house_turns_callers_away_with_503_and_keeps_room_for_root() {
        use http_body_util::{BodyExt as _, Empty};
        use std::os::unix::process::CommandExt as _;
        if !nix::unistd::geteuid().is_root() {
            crate::test_skips::skipped(
                "a_full_house_turns_callers_away_with_503_and_keeps_room_for_root",
                "a caller of another uid needs root to start",
            );
            return;
        }
        let config = crate::config::Config::parse(
            "[daemon]\nallow_uids = [65533]\nheader_timeout_ms = 60000\n",
        )
        .unwrap();
        let d = super::super::jobs::tests::jobs_under(None, &config);
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let sock = tmp.path().join("api.sock");
        let listener = UnixListener::bind(&sock).unwrap();
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
        let (stop, close, conns) = (
            CancellationToken::new(),
            CancellationToken::new(),
            TaskTracker::new(),
        );
        let accepting = tokio::spawn(accept_loop(
            listener,
            d.jobs.clone(),
            stop.clone(),
            close.clone(),
            conns.clone(),
            2,
        ));
        // A connection of this process (root), answered once and then held open.
        let held = || async {
            let stream = UnixStream::connect(&sock).await.unwrap();
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .unwrap();
            let conn = tokio::spawn(conn);
            let info = hyper::Request::get("/v1/info")
                .header("host", "localhost")
                .body(Empty::<bytes::Bytes>::new())
                .unwrap();
            let r = tokio::time::timeout(Duration::from_secs(5), sender.send_request(info))
                .await
                .expect("answered within 5 s")
                .unwrap();
            let status = r.status();
            r.into_body().collect().await.unwrap();
            (status, sender, conn)
        };
        // The caller of uid 65533, allowed by the configuration.
        let caller = || {
            let sock = sock.clone();
            tokio::task::spawn_blocking(move || {
                let out = std::process::Command::new("curl")
                    .args(["-s", "-o", "-", "-w", "\n%{http_code}", "--max-time", "5"])
                    .arg("--unix-socket")
                    .arg(&sock)
                    .arg("http://localhost/v1/info")
                    .uid(65533)
                    .gid(65534)
                    .output()
                    .expect("curl runs");
                String::from_utf8_lossy(&out.stdout).into_owned()
            })
        };
        let first = held().await;
        let second = held().await;
        assert_eq!((first.0.as_u16(), second.0.as_u16()), (200, 200));
        let turned = caller().await.unwrap();
        assert!(turned.ends_with("\n503"), "{turned}");
        assert!(turned.contains("\"busy\""), "{turned}");
        let root = held().await;
        assert_eq!(root.0, 200, "root is served on a slot of its own");
        let m = d.jobs.metrics.render(&d.jobs.gauges());
        assert!(
            m.contains("openvibe_skill_runner_connections_turned_away_total 1"),
            "{m}"
        );
        // A slot freed: the caller is served again.
        drop(first);
        let started = std::time::Instant::now();
        loop {
            let out = caller().await.unwrap();
            if out.ends_with("\n200") {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(5), "{out}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop((second, root));
        stop.cancel();
        close.cancel();
        accepting.await.unwrap();
        conns.close();
        tokio::time::timeout(Duration::from_secs(10), conns.wait())
            .await
            .expect("every connection closed");
    }
}
