//! The job's listeners: taking their connections until the job ends (then what is still
//! queued), and the DNS responder's two transports, UDP and TCP, each query answered on a
//! task of its own by the job's responder.

use super::{ServedJob, ACCEPT_PAUSE, DNS_TCP_IDLE, MAX_UDP_QUERY};
use crate::egress::dns::{self, TcpFrame};
use nix::sys::socket::{
    recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags, SockaddrStorage,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

pub(super) async fn serve_dns_udp(job: Arc<ServedJob>, socket: UdpSocket) {
    let socket = Arc::new(socket);
    // One byte more than a query may have: a datagram that fills it was longer (the kernel
    // cuts it to the buffer) and is dropped.
    let mut buf = vec![0u8; MAX_UDP_QUERY + 1];
    loop {
        let (n, asked) = tokio::select! {
            _ = job.stop.cancelled() => return,
            _ = job.closing.cancelled() => {
                // Queries still queued are recorded; nobody is left to answer.
                while let Ok((n, _)) =
                    socket.try_io(Interest::READABLE, || recv_query(&socket, &mut buf))
                {
                    let Some((query, permit)) = take_query(&job, &buf, n) else {
                        continue;
                    };
                    let j = job.clone();
                    job.tracker.spawn(async move {
                        tokio::select! {
                            _ = j.stop.cancelled() => {}
                            _ = j.answer(&query) => {}
                        }
                        drop(permit);
                    });
                }
                return;
            }
            r = socket.async_io(Interest::READABLE, || recv_query(&socket, &mut buf)) => match r {
                Ok(x) => x,
                Err(_) => {
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
        };
        let Some((query, permit)) = take_query(&job, &buf, n) else {
            continue;
        };
        // Each query on a task of its own: one waiting for the upstream holds up no other.
        let (j, s) = (job.clone(), socket.clone());
        job.tracker.spawn(async move {
            tokio::select! {
                _ = j.stop.cancelled() => {}
                reply = j.answer(&query) => {
                    if let Some(packet) = reply {
                        let _ = s
                            .async_io(Interest::WRITABLE, || send_reply(&s, &packet, &asked))
                            .await;
                    }
                }
            }
            drop(permit);
        });
    }
}

/// Who sent a query, and the IPv6 address they sent it to, which the answer must leave
/// from (see `netns::EgressNamespace::dns_udp`); none for an IPv4 query, which the kernel
/// answers from the right address by itself.
struct Asked {
    from: SocketAddr,
    to: Option<libc::in6_pktinfo>,
}

/// One datagram into `buf`, without waiting (`WouldBlock` when none is queued).
fn recv_query(socket: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, Asked)> {
    let mut iov = [IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!(libc::in6_pktinfo);
    let msg = recvmsg::<SockaddrStorage>(
        socket.as_raw_fd(),
        &mut iov,
        Some(space.as_mut_slice()),
        MsgFlags::MSG_DONTWAIT,
    )?;
    let to = msg.cmsgs()?.find_map(|c| match c {
        ControlMessageOwned::Ipv6PacketInfo(info)
            if std::net::Ipv6Addr::from(info.ipi6_addr.s6_addr)
                .to_ipv4_mapped()
                .is_none() =>
        {
            Some(info)
        }
        _ => None,
    });
    let from = msg
        .address
        .as_ref()
        .and_then(|a| match (a.as_sockaddr_in6(), a.as_sockaddr_in()) {
            (Some(v6), _) => Some(SocketAddr::V6(SocketAddrV6::from(*v6))),
            (None, Some(v4)) => Some(SocketAddr::V4(SocketAddrV4::from(*v4))),
            (None, None) => None,
        })
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no sender address"))?;
    Ok((msg.bytes, Asked { from, to }))
}

/// The answer to `asked`, from the address it was sent to, without waiting.
fn send_reply(socket: &UdpSocket, packet: &[u8], asked: &Asked) -> io::Result<usize> {
    let info;
    let cmsgs: &[ControlMessage] = match &asked.to {
        Some(to) => {
            info = [ControlMessage::Ipv6PacketInfo(to)];
            &info
        }
        None => &[],
    };
    Ok(sendmsg(
        socket.as_raw_fd(),
        &[IoSlice::new(packet)],
        cmsgs,
        MsgFlags::MSG_DONTWAIT,
        Some(&SockaddrStorage::from(asked.from)),
    )?)
}

/// The datagram of `n` bytes in `buf` as a query to answer, with its place among those in
/// flight; none (dropped unanswered, and counted in the job's record) when it is longer
/// than [`MAX_UDP_QUERY`] or [`MAX_DNS_IN_FLIGHT`] are being answered.
fn take_query(
    job: &ServedJob,
    buf: &[u8],
    n: usize,
) -> Option<(Vec<u8>, tokio::sync::OwnedSemaphorePermit)> {
    let taken = (n <= MAX_UDP_QUERY)
        .then(|| job.dns_in_flight.clone().try_acquire_owned().ok())
        .flatten()
        .and_then(|permit| Some((buf.get(..n)?.to_vec(), permit)));
    if taken.is_none() {
        job.recorder.unanswered_query();
    }
    taken
}

/// The connections still queued on a listener, taken without waiting.
fn drain_queue(listener: &TcpListener) -> Vec<TcpStream> {
    let mut taken = Vec::new();
    let fd = listener.as_raw_fd();
    loop {
        match nix::sys::socket::accept4(
            fd,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC | nix::sys::socket::SockFlag::SOCK_NONBLOCK,
        ) {
            Ok(raw) => {
                // SAFETY: accept4 just returned this descriptor; nothing else owns it.
                let std = unsafe { std::net::TcpStream::from_raw_fd(raw) };
                if let Ok(s) = TcpStream::from_std(std) {
                    taken.push(s);
                }
            }
            Err(nix::errno::Errno::EINTR) | Err(nix::errno::Errno::ECONNABORTED) => continue,
            Err(_) => return taken,
        }
    }
}

/// Takes the listener's connections until the job ends (then what is still queued) and
/// hands each to `handle`. After an accept error (descriptors exhausted, say) it waits a
/// moment rather than spinning.
pub(super) async fn accept_loop<F, Fut>(job: Arc<ServedJob>, listener: TcpListener, handle: F)
where
    F: Fn(Arc<ServedJob>, TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        let conns = tokio::select! {
            _ = job.stop.cancelled() => return,
            _ = job.closing.cancelled() => drain_queue(&listener),
            r = listener.accept() => match r {
                Ok((c, _)) => vec![c],
                Err(_) => {
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
        };
        for conn in conns {
            handle(job.clone(), conn).await;
        }
        if job.closing.is_cancelled() {
            return;
        }
    }
}

pub(super) async fn serve_dns_tcp(job: Arc<ServedJob>, listener: TcpListener) {
    accept_loop(job, listener, |job, conn| async move {
        let Ok(permit) = job.connections.clone().try_acquire_owned() else {
            job.recorder.unanswered_query();
            return;
        };
        let j = job.clone();
        job.tracker.spawn(async move {
            tokio::select! {
                _ = j.stop.cancelled() => {}
                _ = dns_tcp_connection(&j, conn) => {}
            }
            drop(permit);
        });
    })
    .await
}

async fn dns_tcp_connection(job: &ServedJob, mut conn: TcpStream) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 4096];
    loop {
        loop {
            match dns::tcp_frame(&buf) {
                TcpFrame::NeedMore => break,
                TcpFrame::Invalid => return,
                TcpFrame::Message { message, consumed } => {
                    let reply = job.answer(message).await.and_then(|p| dns::tcp_encode(&p));
                    buf.drain(..consumed);
                    match reply {
                        Some(bytes) => {
                            if conn.write_all(&bytes).await.is_err() {
                                return;
                            }
                        }
                        None => return,
                    }
                }
            }
        }
        let n = match tokio::time::timeout(DNS_TCP_IDLE, conn.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => return,
        };
        buf.extend_from_slice(&chunk[..n]);
    }
}
