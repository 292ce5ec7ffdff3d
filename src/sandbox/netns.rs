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

/// The UDP socket also gets IP(V6)_FREEBIND: an IPv6 client's source address is `::1`
/// (source selection only knows lo's address), so an answer sent plainly with `send_to`
/// leaves from `::1` and a connected client drops it. The responder must answer from
/// the address asked (IPV6_RECVPKTINFO, then IPV6_PKTINFO on the reply), and the kernel
/// accepts a PKTINFO source that is no interface's address only with FREEBIND. (IPv4 needs
/// none of this: a `local` route makes the source the destination itself.)
fn udp_socket(family: Family, port: u16) -> io::Result<UdpSocket> {
    let socket = bound_socket(family, port, Type::DGRAM)?;
    match family {
        Family::DualStack => socket.set_freebind_v6(true)?,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{IpAddr, SocketAddrV6, TcpStream};
    use std::os::fd::{AsRawFd, FromRawFd, RawFd};
    use std::os::unix::fs::MetadataExt;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    /// The tests run one at a time: test 5 looks for a namespace's inode in the whole
    /// process, and an inode number freed by one test could be reused by another's
    /// namespace.
    static SERIAL: Mutex<()> = Mutex::new(());

    /// (device, inode) of a namespace.
    type NsId = (u64, u64);

    fn thread_netns() -> NsId {
        let m = std::fs::metadata("/proc/thread-self/ns/net").expect("stat own netns");
        (m.dev(), m.ino())
    }

    fn fd_id(fd: impl AsFd) -> NsId {
        let st = nix::sys::stat::fstat(fd).expect("fstat");
        (st.st_dev, st.st_ino)
    }

    fn host_local_routes() -> String {
        let mut all = String::new();
        for args in [
            &["route", "show", "table", "local"][..],
            &["-6", "route", "show", "table", "local"][..],
        ] {
            let out = std::process::Command::new("ip")
                .args(args)
                .output()
                .expect("run ip");
            all.push_str(&String::from_utf8_lossy(&out.stdout));
            all.push_str(&String::from_utf8_lossy(&out.stderr));
        }
        all
    }

    /// Creates the namespace and checks that neither the test thread nor the host's local
    /// routes changed. The checks around the whole test are in [`Guard`].
    struct Guard {
        _serial: std::sync::MutexGuard<'static, ()>,
        ns_before: NsId,
        routes_before: String,
    }

    impl Guard {
        fn new() -> Guard {
            let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
            Guard {
                _serial: serial,
                ns_before: thread_netns(),
                routes_before: host_local_routes(),
            }
        }

        fn create(&self) -> EgressNamespace {
            let ns = create().unwrap_or_else(|e| panic!("create the egress namespace: {e}"));
            assert_eq!(
                thread_netns(),
                self.ns_before,
                "the test thread changed namespace"
            );
            assert_ne!(fd_id(&ns.netns), self.ns_before, "no new namespace");
            ns
        }
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            if std::thread::panicking() {
                return;
            }
            assert_eq!(
                thread_netns(),
                self.ns_before,
                "the test thread changed namespace"
            );
            assert_eq!(
                host_local_routes(),
                self.routes_before,
                "the host's local routes changed"
            );
        }
    }

    /// Runs `f` on a thread that has joined `netns`.
    fn inside<T: Send>(netns: &OwnedFd, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                nix::sched::setns(netns, CloneFlags::CLONE_NEWNET).expect("setns");
                f()
            })
            .join()
            .expect("thread inside the namespace")
        })
    }

    fn accept_within(l: &TcpListener, timeout: Duration) -> io::Result<TcpStream> {
        let deadline = Instant::now() + timeout;
        loop {
            match l.accept() {
                Ok((s, _)) => return Ok(s),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn canonical(a: SocketAddr) -> SocketAddr {
        SocketAddr::new(a.ip().to_canonical(), a.port())
    }

    fn dual_stack(ns: &EgressNamespace) -> bool {
        ns.http.local_addr().expect("local_addr").is_ipv6()
    }

    #[test]
    fn tcp_to_any_address_lands_on_the_listener_with_the_dialed_address() {
        let guard = Guard::new();
        let ns = guard.create();
        assert!(
            dual_stack(&ns),
            "this host has IPv6: expected a dual-stack [::] listener"
        );
        for l in [&ns.http, &ns.https, &ns.dns_tcp] {
            let addr = l.local_addr().expect("local_addr");
            assert!(addr.ip().is_unspecified(), "{addr} is not a wildcard");
        }

        let mut targets: Vec<SocketAddr> = vec![
            "1.2.3.4:80".parse().expect("addr"),
            "203.0.113.9:443".parse().expect("addr"),
            "127.0.0.1:443".parse().expect("addr"),
            "9.9.9.9:53".parse().expect("addr"),
        ];
        if dual_stack(&ns) {
            targets.push("[2001:db8::7]:80".parse().expect("addr"));
            targets.push("[::1]:443".parse().expect("addr"));
        }
        for target in targets {
            let listener = match target.port() {
                80 => &ns.http,
                443 => &ns.https,
                _ => &ns.dns_tcp,
            };
            let mut client = inside(&ns.netns, || {
                TcpStream::connect_timeout(&target, Duration::from_secs(1))
            })
            .unwrap_or_else(|e| panic!("connect to {target} from inside: {e}"));
            let mut server = accept_within(listener, Duration::from_secs(1))
                .unwrap_or_else(|e| panic!("accept for {target}: {e}"));
            let local = server.local_addr().expect("local_addr");
            assert_eq!(
                canonical(local),
                target,
                "getsockname() of the accepted socket"
            );
            assert_eq!(
                canonical(server.peer_addr().expect("peer_addr")),
                canonical(client.local_addr().expect("client local_addr"))
            );
            server.set_nonblocking(false).expect("blocking");
            client.write_all(b"x").expect("write");
            let mut byte = [0u8; 1];
            server
                .set_read_timeout(Some(Duration::from_secs(1)))
                .expect("timeout");
            server.read_exact(&mut byte).expect("read");
            assert_eq!(&byte, b"x");
        }
    }

    /// A UDP client inside the namespace, connected to `target` (as resolvers are: it
    /// takes answers only from the address it asked), that has sent `query`.
    fn udp_client(netns: &OwnedFd, target: SocketAddr) -> UdpSocket {
        let client = inside(netns, || {
            let any: SocketAddr = if target.is_ipv4() {
                (Ipv4Addr::UNSPECIFIED, 0).into()
            } else {
                (Ipv6Addr::UNSPECIFIED, 0).into()
            };
            let c = UdpSocket::bind(any)?;
            c.connect(target)?;
            c.send(b"query")?;
            io::Result::Ok(c)
        })
        .unwrap_or_else(|e| panic!("send to {target} from inside: {e}"));
        client
            .set_read_timeout(Some(Duration::from_secs(1)))
            .expect("timeout");
        client
    }

    fn wait_readable(sock: &UdpSocket) {
        let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
        let n = nix::poll::poll(&mut fds, PollTimeout::from(1000u16)).expect("poll");
        assert_eq!(n, 1, "nothing arrived on dns_udp within a second");
    }

    #[test]
    fn udp_dns_is_received_and_answered() {
        let guard = Guard::new();
        let ns = guard.create();
        let target: SocketAddr = "9.9.9.9:53".parse().expect("addr");
        let client = udp_client(&ns.netns, target);

        wait_readable(&ns.dns_udp);
        let mut buf = [0u8; 64];
        let (n, from) = ns.dns_udp.recv_from(&mut buf).expect("dns_udp receives");
        assert_eq!(&buf[..n], b"query");
        assert_eq!(
            canonical(from),
            client.local_addr().expect("client local_addr"),
            "the sender"
        );

        ns.dns_udp
            .send_to(b"answer", from)
            .expect("send the answer");
        let n = client.recv(&mut buf).expect("the answer arrives");
        assert_eq!(&buf[..n], b"answer");
    }

    /// What a responder on `dns_udp` must do for IPv6 (see [`EgressNamespace::dns_udp`]):
    /// learn the address asked with IPV6_RECVPKTINFO and answer from it with IPV6_PKTINFO,
    /// which FREEBIND allows. Works the same for IPv4-mapped queries.
    #[test]
    fn udp_answers_from_the_asked_address_with_pktinfo() {
        let guard = Guard::new();
        let ns = guard.create();
        if !dual_stack(&ns) {
            return;
        }
        set_recv_pktinfo(&ns.dns_udp);
        for target in ["[2001:db8::53]:53", "9.9.9.9:53"] {
            let target: SocketAddr = target.parse().expect("addr");
            let client = udp_client(&ns.netns, target);
            wait_readable(&ns.dns_udp);
            let (query, from, asked) = recv_with_pktinfo(&ns.dns_udp);
            assert_eq!(query, b"query");
            assert_eq!(
                IpAddr::V6(asked).to_canonical(),
                target.ip(),
                "IPV6_PKTINFO"
            );
            assert_eq!(
                canonical(SocketAddr::V6(from)),
                client.local_addr().expect("client local_addr"),
                "the sender"
            );
            send_with_pktinfo(&ns.dns_udp, b"answer", from, asked);
            let mut buf = [0u8; 64];
            let n = client
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("no answer from {target}: {e}"));
            assert_eq!(&buf[..n], b"answer");
        }
    }

    fn set_recv_pktinfo(sock: &UdpSocket) {
        let on: libc::c_int = 1;
        // SAFETY: `on` outlives the call and its size is passed; the fd is open (borrowed).
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_IPV6,
                libc::IPV6_RECVPKTINFO,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "IPV6_RECVPKTINFO: {}", io::Error::last_os_error());
    }

    /// Room for one cmsg, aligned for `cmsghdr`.
    #[repr(C, align(8))]
    struct CmsgBuf([u8; 128]);

    /// One datagram, its sender and the address it was sent to.
    fn recv_with_pktinfo(sock: &UdpSocket) -> (Vec<u8>, SocketAddrV6, Ipv6Addr) {
        let mut data = [0u8; 512];
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        // SAFETY: all-zero is a valid sockaddr_in6 and msghdr (plain C structs).
        let mut name: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        let mut cbuf = CmsgBuf([0; 128]);
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut name as *mut libc::sockaddr_in6).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.0.as_mut_ptr().cast();
        msg.msg_controllen = cbuf.0.len();
        // SAFETY: every pointer in `msg` points to a live buffer of the length given.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
        assert!(n >= 0, "recvmsg: {}", io::Error::last_os_error());
        let mut asked = None;
        // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR/NXTHDR stay within
        // msg_controllen, and the data of an IPV6_PKTINFO cmsg is an in6_pktinfo (read
        // unaligned).
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::IPPROTO_IPV6 && (*c).cmsg_type == libc::IPV6_PKTINFO {
                    let info: libc::in6_pktinfo =
                        std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    asked = Some(Ipv6Addr::from(info.ipi6_addr.s6_addr));
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let from = SocketAddrV6::new(
            Ipv6Addr::from(name.sin6_addr.s6_addr),
            u16::from_be(name.sin6_port),
            name.sin6_flowinfo,
            name.sin6_scope_id,
        );
        (
            data[..n as usize].to_vec(),
            from,
            asked.expect("an IPV6_PKTINFO cmsg"),
        )
    }

    /// Sends `data` to `to` from the source address `source`.
    fn send_with_pktinfo(sock: &UdpSocket, data: &[u8], to: SocketAddrV6, source: Ipv6Addr) {
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        // SAFETY: all-zero is a valid sockaddr_in6 and msghdr (plain C structs).
        let mut name: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        name.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        name.sin6_port = to.port().to_be();
        name.sin6_addr.s6_addr = to.ip().octets();
        name.sin6_scope_id = to.scope_id();
        let info = libc::in6_pktinfo {
            ipi6_addr: libc::in6_addr {
                s6_addr: source.octets(),
            },
            ipi6_ifindex: 0,
        };
        let mut cbuf = CmsgBuf([0; 128]);
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut name as *mut libc::sockaddr_in6).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.0.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a size.
        msg.msg_controllen =
            unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::in6_pktinfo>() as u32) } as usize;
        assert!(msg.msg_controllen <= cbuf.0.len());
        // SAFETY: msg_control points to `cbuf`, aligned and large enough for one cmsg
        // carrying an in6_pktinfo (checked above); sendmsg only reads the buffers, which
        // live across the call.
        let n = unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            assert!(!c.is_null());
            (*c).cmsg_level = libc::IPPROTO_IPV6;
            (*c).cmsg_type = libc::IPV6_PKTINFO;
            (*c).cmsg_len =
                libc::CMSG_LEN(std::mem::size_of::<libc::in6_pktinfo>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast(), info);
            libc::sendmsg(sock.as_raw_fd(), &msg, 0)
        };
        assert_eq!(
            n,
            data.len() as isize,
            "sendmsg with IPV6_PKTINFO {source}: {}",
            io::Error::last_os_error()
        );
    }

    #[test]
    fn a_port_nobody_listens_on_is_refused_at_once() {
        let guard = Guard::new();
        let ns = guard.create();
        let mut targets: Vec<SocketAddr> = vec!["8.8.8.8:22".parse().expect("addr")];
        if dual_stack(&ns) {
            targets.push("[2001:4860:4860::8888]:22".parse().expect("addr"));
        }
        for target in targets {
            let started = Instant::now();
            let result = inside(&ns.netns, || {
                TcpStream::connect_timeout(&target, Duration::from_secs(1))
            });
            let took = started.elapsed();
            match result {
                Err(e) => assert_eq!(
                    e.raw_os_error(),
                    Some(libc::ECONNREFUSED),
                    "connect to {target}: {e}"
                ),
                Ok(_) => panic!("connect to {target} succeeded"),
            }
            assert!(took < Duration::from_millis(500), "refusal took {took:?}");
        }
    }

    #[test]
    fn the_listeners_are_not_reachable_from_the_host() {
        let guard = Guard::new();
        let ns = guard.create();
        // The test thread is in the host's namespace (Guard checks it). The host may
        // have listeners of its own on these ports: only ours must see nothing.
        for target in ["127.0.0.1:80", "127.0.0.1:443", "127.0.0.1:53", "[::1]:80"] {
            let target: SocketAddr = target.parse().expect("addr");
            let _ = TcpStream::connect_timeout(&target, Duration::from_millis(200));
        }
        if let Ok(udp) = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)) {
            let _ = udp.send_to(b"", (Ipv4Addr::LOCALHOST, 53));
        }
        std::thread::sleep(Duration::from_millis(20));
        for (name, l) in [
            ("http", &ns.http),
            ("https", &ns.https),
            ("dns_tcp", &ns.dns_tcp),
        ] {
            match l.accept() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{name}: {e}"),
                Ok((_, peer)) => panic!("{name} accepted {peer} from the host"),
            }
        }
        let mut buf = [0u8; 16];
        match ns.dns_udp.recv_from(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("dns_udp: {e}"),
            Ok((_, peer)) => panic!("dns_udp received from {peer} on the host"),
        }
    }

    /// The threads of this process that are in the namespace with inode `ino`.
    fn tasks_in(ino: u64) -> Vec<String> {
        let want = format!("net:[{ino}]");
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return vec![];
        };
        tasks
            .flatten()
            .filter(|t| {
                std::fs::read_link(t.path().join("ns/net"))
                    .is_ok_and(|l| l.to_string_lossy() == want)
            })
            .map(|t| t.file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// The fds of this process that are the namespace `id`, or a socket in it.
    fn fds_in(id: NsId) -> Vec<RawFd> {
        let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
            return vec![];
        };
        let mut found = vec![];
        for entry in fds.flatten() {
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<RawFd>().ok())
            else {
                continue;
            };
            let Ok(meta) = std::fs::metadata(entry.path()) else {
                continue;
            };
            if (meta.dev(), meta.ino()) == id {
                found.push(fd);
                continue;
            }
            if meta.mode() & libc::S_IFMT != libc::S_IFSOCK {
                continue;
            }
            // SAFETY: SIOCGSKNS takes no argument; on an fd closed meanwhile it only fails.
            let ns = unsafe { libc::ioctl(fd, libc::SIOCGSKNS as _) };
            if ns < 0 {
                continue;
            }
            // SAFETY: `ns` is a new fd the kernel just returned to us; nothing else owns it.
            let ns = unsafe { OwnedFd::from_raw_fd(ns) };
            if fd_id(&ns) == id {
                found.push(fd);
            }
        }
        found
    }

    #[test]
    fn dropping_releases_the_namespace() {
        let guard = Guard::new();
        let ns = guard.create();
        let id = fd_id(&ns.netns);
        // Some use first: a connection inside, accepted.
        let client = inside(&ns.netns, || {
            TcpStream::connect_timeout(
                &"192.0.2.1:443".parse().expect("addr"),
                Duration::from_secs(1),
            )
        })
        .expect("connect inside");
        let server = accept_within(&ns.https, Duration::from_secs(1)).expect("accept");

        let held = fds_in(id);
        for fd in [
            ns.netns.as_raw_fd(),
            ns.http.as_raw_fd(),
            ns.https.as_raw_fd(),
            ns.dns_udp.as_raw_fd(),
            ns.dns_tcp.as_raw_fd(),
            client.as_raw_fd(),
            server.as_raw_fd(),
        ] {
            assert!(
                held.contains(&fd),
                "fd {fd} not seen in the namespace: {held:?}"
            );
        }

        drop((ns, client, server));
        // A joined thread may still hold its namespace for a moment: in do_exit() the
        // kernel wakes the joiner (clear_child_tid, in exit_mm) before it drops the
        // thread's namespaces (exit_task_namespaces). Not seen here, but allowed for.
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            let tasks = tasks_in(id.1);
            let fds = fds_in(id);
            if tasks.is_empty() && fds.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the namespace is still referenced: threads {tasks:?}, fds {fds:?}"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn errors_say_what_failed() {
        let e = NetnsError::NetlinkRejected {
            step: "add the route `local ::/0 dev lo table local`",
            source: io::Error::from_raw_os_error(libc::EPERM),
            hint: "",
        };
        let text = e.to_string();
        assert!(text.contains("local ::/0"), "{text}");
        assert!(text.contains("CAP_NET_ADMIN"), "{text}");
    }
}
