//! The network namespace of one job whose egress goes through the runner's proxy.
//!
//! [`create`] makes a fresh network namespace in which every destination address is
//! local: `lo` is up and table `local` holds `local 0.0.0.0/0 dev lo` and
//! `local ::/0 dev lo`. A connection from inside to any address and port lands on a
//! wildcard listener of the same namespace, and `getsockname()` of the accepted socket is
//! the address the client dialed, which is what the proxy needs to know where the job
//! meant to go. A port nobody listens on answers at once with a reset (`ECONNREFUSED`);
//! nothing inside the namespace reaches any other network.
//!
//! The namespace is made on a short-lived thread of its own (`unshare(CLONE_NEWNET)` acts
//! on the calling thread only), so the caller, which may be a tokio worker, never changes
//! namespace. What the thread hands back keeps the namespace alive: the open
//! `/proc/thread-self/ns/net` that the init stage `setns()`es into, and the sockets, which
//! stay in the namespace they were created in.

use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};

use netlink_packet_core::{
    NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkFlags, LinkMessage};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket as NetlinkSocket, SocketAddr as NlAddr};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sched::CloneFlags;
use socket2::{Domain, Socket, Type};

/// The backlog of each listener.
const BACKLOG: i32 = 128;
/// The routing table `local` (RT_TABLE_LOCAL).
const RT_TABLE_LOCAL: u8 = 255;
/// How long to wait for the kernel's answer to one rtnetlink request (it answers before
/// `send` returns; this only bounds a kernel that does not).
const NETLINK_TIMEOUT_MS: u16 = 5000;
/// Enough for any answer to the requests made here (an ACK, or an error echoing the
/// request).
const NETLINK_RECV_BUF: usize = 16 * 1024;

/// The listening sockets of one job's egress, created inside its network namespace.
#[derive(Debug)]
pub struct EgressNamespace {
    /// The namespace itself (an open /proc/thread-self/ns/net of the creating thread); the init stage setns()es into it.
    pub netns: OwnedFd,
    /// Wildcard, port 80 (dual-stack `[::]` when the host has IPv6, else `0.0.0.0`).
    pub http: TcpListener,
    /// Wildcard, port 443.
    pub https: TcpListener,
    /// Wildcard, port 53, with IP(V6)_FREEBIND set. A wildcard UDP socket must answer an
    /// IPv6 query with IPV6_PKTINFO naming the address the query was sent to (learnt with
    /// IPV6_RECVPKTINFO): a plain `send_to` answers from `::1`, which a connected client
    /// ignores. IPv4 queries (also IPv4-mapped ones) are answered right either way.
    pub dns_udp: UdpSocket,
    /// Wildcard, port 53.
    pub dns_tcp: TcpListener,
}

/// A step of [`create`] that failed, said so that an operator knows what to change.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("could not start the thread that creates the job's network namespace: {0}; the runner is out of threads or memory (lower runner.max_jobs, or raise the service's TasksMax/memory limits)")]
    Thread(#[source] io::Error),
    #[error("the thread that creates the job's network namespace panicked; this is a bug in the runner, report it with the runner's log")]
    ThreadPanicked,
    #[error("unshare(CLONE_NEWNET) failed: {0}; the runner must run as root with CAP_SYS_ADMIN on a kernel with network namespaces (CONFIG_NET_NS=y), and its service must not forbid them (systemd RestrictNamespaces=)")]
    Unshare(#[source] nix::errno::Errno),
    #[error("the loopback interface `lo` is missing from the job's new network namespace: {0}; the kernel creates it in every namespace, so check the kernel")]
    Loopback(#[source] io::Error),
    #[error("could not open an rtnetlink socket in the job's network namespace: {0}; the runner needs CAP_NET_ADMIN and a kernel with CONFIG_NETLINK/rtnetlink")]
    NetlinkSocket(#[source] io::Error),
    #[error("could not {step} in the job's network namespace: talking to the kernel over rtnetlink failed: {source}; check that the runner has CAP_NET_ADMIN and that its seccomp/AppArmor profile allows netlink sockets")]
    NetlinkIo {
        step: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("could not {step} in the job's network namespace: the kernel refused: {source}; the runner needs CAP_NET_ADMIN (run it as root){hint}")]
    NetlinkRejected {
        step: &'static str,
        #[source]
        source: io::Error,
        hint: &'static str,
    },
    #[error("could not {step} in the job's network namespace: the kernel's rtnetlink answer was unexpected ({detail}); this is a bug in the runner or an unsupported kernel, report it with `openvibe-skill-runner doctor`")]
    NetlinkAnswer { step: &'static str, detail: String },
    #[error("could not create the {what} socket in the job's network namespace: {source}; the runner needs root, and the kernel must allow binding low ports in a new namespace (net.ipv4.ip_unprivileged_port_start is per namespace)")]
    Socket {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("could not open /proc/thread-self/ns/net: {0}; /proc must be mounted in the runner's mount namespace (Linux 3.17 or later)")]
    OpenNetns(#[source] io::Error),
}

/// The capabilities a job's network namespace needs of the runner: `lo` and its routes
/// (CAP_NET_ADMIN), the DNS responder and the proxy on 53, 80 and 443 (CAP_NET_BIND_SERVICE).
pub const NEEDED_CAPS: [caps::Capability; 2] = [
    caps::Capability::CAP_NET_ADMIN,
    caps::Capability::CAP_NET_BIND_SERVICE,
];

/// Why this process cannot make a job's network namespace, when a capability it needs is not
/// in its effective set (a service unit's `CapabilityBoundingSet` without them): egress jobs
/// are then refused with this reason before any is tried, and `/v1/info` lists `deny` alone.
pub fn missing_capabilities() -> Option<String> {
    missing_of(|c| caps::has_cap(None, caps::CapSet::Effective, c).unwrap_or(false))
}

fn missing_of(has: impl Fn(caps::Capability) -> bool) -> Option<String> {
    let missing: Vec<String> = NEEDED_CAPS
        .into_iter()
        .filter(|c| !has(*c))
        .map(|c| c.to_string())
        .collect();
    if missing.is_empty() {
        return None;
    }
    Some(format!(
        "the runner lacks {}, which each openvibe-only or public job's network namespace needs \
         (loopback and its routes; DNS and the proxy on ports 53, 80 and 443): run it as root \
         with them; a systemd unit must list them in CapabilityBoundingSet (the packaged unit \
         does)",
        missing.join(" and ")
    ))
}

/// Creates the network namespace of one job and its four wildcard sockets (see the module
/// documentation). Blocks for a few milliseconds (a thread is spawned and joined): call it
/// from `spawn_blocking` in async code. The calling thread's namespace never changes.
pub fn create() -> Result<EgressNamespace, NetnsError> {
    let handle = std::thread::Builder::new()
        .name("netns-create".into())
        .spawn(build_in_new_namespace)
        .map_err(NetnsError::Thread)?;
    handle.join().map_err(|_| NetnsError::ThreadPanicked)?
}

/// Which wildcard the sockets bind: dual-stack IPv6, or IPv4 when the host has no IPv6.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    DualStack,
    V4Only,
}

/// Runs on the dedicated thread: this thread alone moves to the new namespace, and ends
/// after returning.
fn build_in_new_namespace() -> Result<EgressNamespace, NetnsError> {
    nix::sched::unshare(CloneFlags::CLONE_NEWNET).map_err(NetnsError::Unshare)?;

    let lo = loopback_index()?;
    let mut rtnl = Rtnl::open()?;
    rtnl.link_up(lo)?;
    rtnl.add_local_default(lo, IpFamily::V4)?;

    // The first socket decides the family: IPv6 dual-stack unless the kernel has none.
    let (family, http) = match tcp_listener(Family::DualStack, 80) {
        Ok(l) => (Family::DualStack, l),
        Err(e) if ipv6_unavailable(&e) => {
            let l = tcp_listener(Family::V4Only, 80).map_err(socket_error("HTTP (TCP port 80)"))?;
            (Family::V4Only, l)
        }
        Err(e) => return Err(socket_error("HTTP (TCP port 80)")(e)),
    };
    if family == Family::DualStack {
        rtnl.add_local_default(lo, IpFamily::V6)?;
    }
    drop(rtnl);

    let https = tcp_listener(family, 443).map_err(socket_error("HTTPS (TCP port 443)"))?;
    let dns_udp = udp_socket(family, 53).map_err(socket_error("DNS (UDP port 53)"))?;
    let dns_tcp = tcp_listener(family, 53).map_err(socket_error("DNS (TCP port 53)"))?;

    // std opens with O_RDONLY | O_CLOEXEC.
    let netns = File::open("/proc/thread-self/ns/net").map_err(NetnsError::OpenNetns)?;

    Ok(EgressNamespace {
        netns: OwnedFd::from(netns),
        http,
        https,
        dns_udp,
        dns_tcp,
    })
}

fn socket_error(what: &'static str) -> impl Fn(io::Error) -> NetnsError {
    move |source| NetnsError::Socket { what, source }
}

/// IPv6 is off in this kernel (`ipv6.disable=1`: no AF_INET6) or has no usable address.
fn ipv6_unavailable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAFNOSUPPORT) | Some(libc::EADDRNOTAVAIL) | Some(libc::EPROTONOSUPPORT)
    )
}

fn wildcard(family: Family, port: u16) -> (Domain, SocketAddr) {
    match family {
        Family::DualStack => (
            Domain::IPV6,
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)),
        ),
        Family::V4Only => (
            Domain::IPV4,
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)),
        ),
    }
}

/// A CLOEXEC, non-blocking socket bound to the wildcard of `family` (IPV6_V6ONLY off).
fn bound_socket(family: Family, port: u16, ty: Type) -> io::Result<Socket> {
    let (domain, addr) = wildcard(family, port);
    let socket = Socket::new(domain, ty.nonblocking().cloexec(), None)?;
    if family == Family::DualStack {
        socket.set_only_v6(false)?;
    }
    socket.bind(&addr.into())?;
    Ok(socket)
}

fn tcp_listener(family: Family, port: u16) -> io::Result<TcpListener> {
    let socket = bound_socket(family, port, Type::STREAM)?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

/// The UDP socket also gets IP(V6)_FREEBIND and IPV6_RECVPKTINFO: an IPv6 client's source
/// address is `::1` (source selection only knows lo's address), so an answer sent plainly
/// with `send_to` leaves from `::1` and a connected client drops it. The responder answers
/// from the address asked (learnt from IPV6_PKTINFO on the query, named the same way on
/// the reply), and the kernel accepts a PKTINFO source that is no interface's address
/// only with FREEBIND. (IPv4 needs
/// none of this: a `local` route makes the source the destination itself.)
fn udp_socket(family: Family, port: u16) -> io::Result<UdpSocket> {
    let socket = bound_socket(family, port, Type::DGRAM)?;
    match family {
        Family::DualStack => {
            socket.set_freebind_v6(true)?;
            nix::sys::socket::setsockopt(
                &socket,
                nix::sys::socket::sockopt::Ipv6RecvPacketInfo,
                &true,
            )?;
        }
        Family::V4Only => socket.set_freebind_v4(true)?,
    }
    Ok(socket.into())
}

/// The index of `lo` in the calling thread's network namespace.
fn loopback_index() -> Result<u32, NetnsError> {
    // SAFETY: the argument is a NUL-terminated string literal; if_nametoindex only reads it.
    let index = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
    if index == 0 {
        return Err(NetnsError::Loopback(io::Error::last_os_error()));
    }
    Ok(index)
}

#[derive(Clone, Copy)]
enum IpFamily {
    V4,
    V6,
}

/// A synchronous rtnetlink socket of the calling thread's network namespace.
struct Rtnl {
    socket: NetlinkSocket,
    seq: u32,
}

impl Rtnl {
    fn open() -> Result<Rtnl, NetnsError> {
        let mut socket = NetlinkSocket::new(NETLINK_ROUTE).map_err(NetnsError::NetlinkSocket)?;
        socket.bind_auto().map_err(NetnsError::NetlinkSocket)?;
        socket
            .connect(&NlAddr::new(0, 0))
            .map_err(NetnsError::NetlinkSocket)?;
        Ok(Rtnl { socket, seq: 0 })
    }

    /// `ip link set lo up`.
    fn link_up(&mut self, index: u32) -> Result<(), NetnsError> {
        let mut link = LinkMessage::default();
        link.header.interface_family = AddressFamily::Unspec;
        link.header.index = index;
        link.header.flags = LinkFlags::Up;
        link.header.change_mask = LinkFlags::Up;
        self.request(
            "bring the loopback interface up (RTM_NEWLINK lo IFF_UP)",
            "",
            RouteNetlinkMessage::NewLink(link),
            0,
        )
    }

    /// `ip route add local 0.0.0.0/0 dev lo table local`, or
    /// `ip -6 route add local ::/0 dev lo table local`.
    fn add_local_default(&mut self, lo: u32, family: IpFamily) -> Result<(), NetnsError> {
        let mut route = RouteMessage::default();
        route.header.address_family = match family {
            IpFamily::V4 => AddressFamily::Inet,
            IpFamily::V6 => AddressFamily::Inet6,
        };
        route.header.destination_prefix_length = 0;
        route.header.table = RT_TABLE_LOCAL;
        route.header.protocol = RouteProtocol::Boot;
        route.header.scope = RouteScope::Host;
        route.header.kind = RouteType::Local;
        route
            .attributes
            .push(RouteAttribute::Destination(match family {
                IpFamily::V4 => RouteAddress::Inet(Ipv4Addr::UNSPECIFIED),
                IpFamily::V6 => RouteAddress::Inet6(Ipv6Addr::UNSPECIFIED),
            }));
        route.attributes.push(RouteAttribute::Oif(lo));
        let (step, hint) = match family {
            IpFamily::V4 => ("add the route `local 0.0.0.0/0 dev lo table local`", ""),
            IpFamily::V6 => (
                "add the route `local ::/0 dev lo table local`",
                ", and IPv6 must not be disabled by sysctl (net.ipv6.conf.*.disable_ipv6)",
            ),
        };
        self.request(
            step,
            hint,
            RouteNetlinkMessage::NewRoute(route),
            NLM_F_CREATE | NLM_F_EXCL,
        )
    }

    /// Sends one request with NLM_F_ACK and waits for its answer: Ok on the ACK, the
    /// kernel's error on an NLMSG_ERROR carrying one.
    fn request(
        &mut self,
        step: &'static str,
        hint: &'static str,
        message: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<(), NetnsError> {
        let io_error = |source| NetnsError::NetlinkIo { step, source };
        let answer_error = |detail: String| NetnsError::NetlinkAnswer { step, detail };

        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut packet = NetlinkMessage::from(message);
        packet.header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        packet.header.sequence_number = seq;
        packet.finalize();
        let mut buf = vec![0u8; packet.buffer_len()];
        packet.serialize(&mut buf);
        let sent = self.socket.send(&buf, 0).map_err(io_error)?;
        if sent != buf.len() {
            return Err(answer_error(format!("sent {sent} of {} bytes", buf.len())));
        }

        loop {
            let mut fds = [PollFd::new(self.socket.as_fd(), PollFlags::POLLIN)];
            match nix::poll::poll(&mut fds, PollTimeout::from(NETLINK_TIMEOUT_MS)) {
                Ok(0) => {
                    return Err(answer_error(format!(
                        "no answer within {NETLINK_TIMEOUT_MS} ms"
                    )))
                }
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(io_error(e.into())),
            }
            let mut datagram = Vec::with_capacity(NETLINK_RECV_BUF);
            // MSG_TRUNC: the return value is the datagram's real length, even if longer.
            let len = match self.socket.recv(&mut datagram, libc::MSG_TRUNC) {
                Ok(len) => len,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_error(e)),
            };
            if len > datagram.len() {
                return Err(answer_error(format!(
                    "an answer of {len} bytes, more than the {} expected",
                    datagram.len()
                )));
            }

            // One datagram may carry several messages; ours is the one with our sequence.
            let mut rest = datagram.as_slice();
            while !rest.is_empty() {
                let answer = NetlinkMessage::<RouteNetlinkMessage>::deserialize(rest)
                    .map_err(|e| answer_error(format!("undecodable: {e}")))?;
                let length = answer.header.length as usize;
                if length == 0 || length > rest.len() {
                    return Err(answer_error(format!("a message length of {length}")));
                }
                rest = rest.get(align4(length)..).unwrap_or_default();
                if answer.header.sequence_number != seq {
                    continue;
                }
                let kind = answer.header.message_type;
                return match answer.payload {
                    NetlinkPayload::Error(e) => match e.code {
                        None => Ok(()),
                        Some(code) => Err(NetnsError::NetlinkRejected {
                            step,
                            source: io::Error::from_raw_os_error(code.get().saturating_abs()),
                            hint,
                        }),
                    },
                    _ => Err(answer_error(format!(
                        "message type {kind} instead of an acknowledgement"
                    ))),
                };
            }
        }
    }
}

fn align4(len: usize) -> usize {
    len.saturating_add(3) & !3
}

/// Unit tests that make namespaces take turns: one looks for a namespace's inode in the
/// whole test process, and the inode number of a namespace freed is the next one made
/// (the kernel hands out the lowest free), by whichever test makes it.
#[cfg(test)]
pub(crate) fn test_namespaces_one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
