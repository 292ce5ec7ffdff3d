//! The Link's own addresses and networks, which no job may reach whatever its policy says:
//! read from the host's interfaces and its routing tables, and read again before a
//! job's next decision whenever the kernel has told of a change ([`OwnNetworks`]).

use ipnet::IpNet;
use netlink_packet_core::{
    NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket as NetlinkSocket, SocketAddr as NlAddr};
use std::io;
use std::net::IpAddr;
use std::os::fd::AsFd as _;
use std::sync::{Arc, Mutex};

/// The shortest routes taken for one of the Link's networks (IPv4, IPv6): a route wider
/// than these is a way to the internet (a VPN's `0.0.0.0/1` and `128.0.0.0/1`, which
/// stand in for its default route), not a network of the Link's.
const NARROWEST_WAY_OUT: (u8, u8) = (8, 16);
/// How long the kernel may take to answer the routes' dump (it answers at once; this only
/// bounds one that does not), and how many times a dump the routes changed under is read
/// again before the job is refused.
const DUMP_TIMEOUT_MS: u16 = 5000;
const DUMP_TRIES: usize = 3;

/// The Link's own addresses and networks, as configured in the runner's network namespace:
/// each interface's address and its network, the destination of every route of every
/// table but the ways out (the default routes and those wider than
/// [`NARROWEST_WAY_OUT`]), and every range the Link delivers to itself (its `local` and
/// `anycast` routes). A route says what a prefix alone may not: an address given
/// as a /128 (DHCPv6) or a /32 whose on-link network comes as a route of its own, a
/// network behind a gateway of the LAN, a VPN's internal ranges.
/// An error, never a shorter list: without them a job could reach the Link's own network.
pub fn own_networks() -> io::Result<Vec<IpNet>> {
    let mut nets = interface_networks()?;
    nets.extend(routed_networks()?);
    Ok(nets)
}

/// The kernel's multicast groups that tell of a change to what [`own_networks`] reads: the
/// links, and the addresses and routes of both families.
const CHANGES: [libc::c_uint; 5] = [
    libc::RTNLGRP_LINK,
    libc::RTNLGRP_IPV4_IFADDR,
    libc::RTNLGRP_IPV4_ROUTE,
    libc::RTNLGRP_IPV6_IFADDR,
    libc::RTNLGRP_IPV6_ROUTE,
];
/// Notices taken off the socket in one look: past them the networks are read again anyway,
/// and what is left is taken at the next look.
const NOTICES_A_LOOK: usize = 4096;

/// The Link's own networks, kept current for every decision of every job: read when first
/// asked for, and read again whenever the kernel has told of a change to a link, an
/// address or a route since they were. A network the Link gains during a job (a VPN come
/// up, a prefix delegated, a DHCP lease) is refused from the job's next decision on, not
/// only to the jobs started after it. The kernel queues its notice of a change before the
/// call that made it returns, so a look that finds no notice judges against networks read
/// after every change made before it; a notice lost to a full socket buffer is an error
/// the look also takes as a change. A look with no notice waiting costs one non-blocking
/// `recv`; the networks are read again (a dump of the routes, well under a millisecond on
/// a Link) at most once for all the notices waiting, by the first decision that finds
/// them, on a blocking thread, while the others wait for that read: what the reads cost
/// follows how often the host's networks change, not how many connections the jobs open.
pub struct OwnNetworks {
    watch: Mutex<Watch>,
}

struct Watch {
    /// Subscribed to [`CHANGES`], non-blocking, in the namespace it was opened in.
    notices: NetlinkSocket,
    /// That namespace (device and inode of `/proc/thread-self/ns/net`): the networks are
    /// read in the reading thread's, which must be the same.
    namespace: (u64, u64),
    /// The networks as last read, or `None` when the next look must read them.
    read: Option<Arc<[IpNet]>>,
}

impl OwnNetworks {
    /// Subscribes to the kernel's notices in the calling thread's network namespace, the
    /// one [`own_networks`] is read in; nothing is read yet.
    pub fn open() -> io::Result<OwnNetworks> {
        let mut notices = NetlinkSocket::new(NETLINK_ROUTE)?;
        notices.bind_auto()?;
        for group in CHANGES {
            notices.add_membership(group)?;
        }
        notices.set_non_blocking(true)?;
        Ok(OwnNetworks {
            watch: Mutex::new(Watch {
                notices,
                namespace: this_threads_namespace()?,
                read: None,
            }),
        })
    }

    /// The Link's own networks now: those read last, unless the kernel has told of a change
    /// since, in which case they are read again. An error, never an older list, when they
    /// cannot be: the decision that asked refuses its connection. Blocking (a dump of the
    /// routes) when they are read: on the async runtime, [`Self::current_async`].
    pub fn current(&self) -> io::Result<Arc<[IpNet]>> {
        let mut watch = self.watch.lock().unwrap_or_else(|p| p.into_inner());
        watch.take_notices()?;
        if let Some(read) = &watch.read {
            return Ok(read.clone());
        }
        // A thread moved into another namespace (a job's, where every address is local)
        // would read that one's networks: refused rather than read.
        if this_threads_namespace()? != watch.namespace {
            return Err(io::Error::other(
                "the host's networks were to be read from a thread in another network namespace than the runner's",
            ));
        }
        let read: Arc<[IpNet]> = own_networks()?.into();
        watch.read = Some(read.clone());
        Ok(read)
    }

    /// [`Self::current`] for a task of the async runtime: at once when nothing changed
    /// since the last read, else on a blocking thread (the read, or the wait for the read
    /// another decision started), so no worker of the runtime (nor the daemon's API on
    /// it) waits for a dump of the routes.
    pub async fn current_async(self: &Arc<Self>) -> io::Result<Arc<[IpNet]>> {
        // Busy means being read now: that read is waited for on a blocking thread too.
        if let Ok(mut watch) = self.watch.try_lock() {
            watch.take_notices()?;
            if let Some(read) = &watch.read {
                return Ok(read.clone());
            }
        }
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.current())
            .await
            .map_err(|e| io::Error::other(format!("the read of the host's networks failed: {e}")))?
    }
}

impl Watch {
    /// Takes the notices waiting: the networks read are forgotten when one told of a
    /// change, and also when they could not all be taken (the error), so a change already
    /// taken off the socket is never lost with the error.
    fn take_notices(&mut self) -> io::Result<()> {
        let changed = self.changed();
        if !matches!(changed, Ok(false)) {
            self.read = None;
        }
        changed.map(|_| ())
    }

    /// Takes every notice waiting (at most [`NOTICES_A_LOOK`]): whether any told of a change.
    fn changed(&mut self) -> io::Result<bool> {
        let mut changed = false;
        // Only that a notice came matters: the rest of a longer one is dropped unread.
        let mut datagram = [0u8; 256];
        for _ in 0..NOTICES_A_LOOK {
            match self
                .notices
                .recv(&mut &mut datagram[..], libc::MSG_DONTWAIT)
            {
                Ok(_) => changed = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(changed),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Notices were dropped: what they said is unknown, so something changed.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => changed = true,
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

/// The calling thread's network namespace: device and inode of its `/proc` link.
fn this_threads_namespace() -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata("/proc/thread-self/ns/net")?;
    Ok((meta.dev(), meta.ino()))
}

fn interface_networks() -> io::Result<Vec<IpNet>> {
    let mut nets = Vec::new();
    let addrs = nix::ifaddrs::getifaddrs().map_err(io::Error::from)?;
    for a in addrs {
        let Some(addr) = a.address.as_ref().and_then(ip_of) else {
            continue;
        };
        let prefix = a
            .netmask
            .as_ref()
            .and_then(ip_of)
            .map(|m| match m {
                IpAddr::V4(v4) => u32::from(v4).count_ones() as u8,
                IpAddr::V6(v6) => u128::from(v6).count_ones() as u8,
            })
            .unwrap_or(if addr.is_ipv4() { 32 } else { 128 });
        if let Ok(net) = IpNet::new(addr, prefix) {
            nets.push(net.trunc());
        }
        // The address itself as well, in case its network is wider than the prefix says.
        if let Ok(host) = IpNet::new(addr, if addr.is_ipv4() { 32 } else { 128 }) {
            nets.push(host);
        }
    }
    Ok(nets)
}

/// The destinations of the routes (every table's) that are not ways out.
fn routed_networks() -> io::Result<Vec<IpNet>> {
    for _ in 0..DUMP_TRIES {
        if let Some(routes) = dump_routes()? {
            return Ok(routes.iter().filter_map(network_of_route).collect());
        }
    }
    Err(io::Error::other(format!(
        "the routing table changed while it was read, {DUMP_TRIES} times in a row"
    )))
}

/// The network a route leads to, if it is one of the Link's: a unicast route of any table,
/// to a prefix at least as narrow as [`NARROWEST_WAY_OUT`]; or a range the Link takes as
/// its own (a `local` or `anycast` route of the local or the main table, whatever its
/// length): `ip route add local 2001:db8:5::/64 dev lo`, as proxies and anycast services
/// set up, delivers every address of the range to the Link itself, though no interface
/// holds one. A `local default` makes every address the Link's, and refuses all.
/// Unicast routes of every table, not the main one alone: a VPN or a second uplink routed
/// by policy (WireGuard's `wg-quick`, Tailscale's table 52, a VRF) keeps its networks in a
/// table of its own, and its default route there is a way out like the main table's. Local
/// routes of other tables are not the Link's: they serve only the packets a rule sends
/// there (a transparent proxy's `local default` in a table of marked packets).
fn network_of_route(route: &RouteMessage) -> Option<IpNet> {
    let table = route
        .attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(route.header.table));
    let main = table == u32::from(RouteHeader::RT_TABLE_MAIN);
    let local = table == u32::from(libc::RT_TABLE_LOCAL);
    let own = matches!(route.header.kind, RouteType::Local | RouteType::Anycast);
    let len = route.header.destination_prefix_length;
    let dst = route.attributes.iter().find_map(|a| match a {
        RouteAttribute::Destination(RouteAddress::Inet(v4)) => Some(IpAddr::V4(*v4)),
        RouteAttribute::Destination(RouteAddress::Inet6(v6)) => Some(IpAddr::V6(*v6)),
        _ => None,
    });
    if own && (main || local) {
        // A default route comes without a destination.
        let dst = match (dst, route.header.address_family) {
            (Some(dst), _) => dst,
            (None, AddressFamily::Inet) if len == 0 => IpAddr::from([0u8; 4]),
            (None, AddressFamily::Inet6) if len == 0 => IpAddr::from([0u8; 16]),
            (None, _) => return None,
        };
        return IpNet::new(dst, len).ok().map(|n| n.trunc());
    }
    if route.header.kind != RouteType::Unicast {
        return None;
    }
    let dst = dst?;
    let narrowest = match dst {
        IpAddr::V4(_) => NARROWEST_WAY_OUT.0,
        IpAddr::V6(_) => NARROWEST_WAY_OUT.1,
    };
    (len >= narrowest)
        .then(|| IpNet::new(dst, len).ok().map(|n| n.trunc()))
        .flatten()
}

/// Every route of the runner's network namespace (`ip route show table all`, both
/// families), or `None` when the kernel says the routes changed during the dump.
fn dump_routes() -> io::Result<Option<Vec<RouteMessage>>> {
    let mut socket = NetlinkSocket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&NlAddr::new(0, 0))?;
    let mut request = RouteMessage::default();
    request.header.address_family = AddressFamily::Unspec;
    let mut packet = NetlinkMessage::from(RouteNetlinkMessage::GetRoute(request));
    packet.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    packet.header.sequence_number = 1;
    packet.finalize();
    let mut buf = vec![0u8; packet.buffer_len()];
    packet.serialize(&mut buf);
    if socket.send(&buf, 0)? != buf.len() {
        return Err(io::Error::other("the routes' dump request was sent short"));
    }
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let mut routes = Vec::new();
    let mut interrupted = false;
    loop {
        let mut fds = [nix::poll::PollFd::new(
            socket.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(DUMP_TIMEOUT_MS)) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the kernel did not answer the routes' dump",
                ))
            }
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
        // A dump's datagrams are at most a page or two; MSG_TRUNC says a longer one's length.
        let mut datagram = Vec::with_capacity(64 * 1024);
        let len = match socket.recv(&mut datagram, libc::MSG_TRUNC) {
            Ok(len) => len,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if len > datagram.len() {
            return Err(bad(format!(
                "a routes' datagram of {len} bytes, more than expected"
            )));
        }
        if dump_datagram(&datagram, &mut routes, &mut interrupted)? {
            return Ok((!interrupted).then_some(routes));
        }
    }
}

/// Reads one datagram of the routes' dump into `routes`: whether the dump ended with it.
/// `interrupted` is set when the kernel says the routes changed during the dump. An error
/// the kernel sends (in an error message, or in the DONE of a dump it could not finish)
/// is an error, never the routes read so far.
fn dump_datagram(
    datagram: &[u8],
    routes: &mut Vec<RouteMessage>,
    interrupted: &mut bool,
) -> io::Result<bool> {
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let mut rest = datagram;
    while !rest.is_empty() {
        let message = NetlinkMessage::<RouteNetlinkMessage>::deserialize(rest)
            .map_err(|e| bad(format!("an undecodable route: {e}")))?;
        let length = message.header.length as usize;
        if length == 0 || length > rest.len() {
            return Err(bad(format!("a route message of length {length}")));
        }
        rest = rest.get((length + 3) & !3..).unwrap_or_default();
        if message.header.sequence_number != 1 {
            continue;
        }
        *interrupted |= message.header.flags & NLM_F_DUMP_INTR != 0;
        match message.payload {
            NetlinkPayload::Done(d) if d.code != 0 => {
                return Err(io::Error::from_raw_os_error(d.code.saturating_abs()))
            }
            NetlinkPayload::Done(_) => return Ok(true),
            NetlinkPayload::Error(e) => match e.code {
                Some(code) => {
                    return Err(io::Error::from_raw_os_error(code.get().saturating_abs()))
                }
                None => return Ok(true),
            },
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(route)) => {
                routes.push(route)
            }
            _ => {}
        }
    }
    Ok(false)
}

fn ip_of(s: &nix::sys::socket::SockaddrStorage) -> Option<IpAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(IpAddr::V4(v4.ip()));
    }
    s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn route(dst: &str, table: u8, kind: RouteType, gateway: bool) -> RouteMessage {
        let net: IpNet = dst.parse().unwrap();
        let mut r = RouteMessage::default();
        r.header.destination_prefix_length = net.prefix_len();
        r.header.table = table;
        r.header.kind = kind;
        let addr = |ip: IpAddr| match ip {
            IpAddr::V4(v4) => RouteAddress::Inet(v4),
            IpAddr::V6(v6) => RouteAddress::Inet6(v6),
        };
        r.header.address_family = if net.addr().is_ipv4() {
            AddressFamily::Inet
        } else {
            AddressFamily::Inet6
        };
        if net.prefix_len() > 0 {
            r.attributes
                .push(RouteAttribute::Destination(addr(net.addr())));
        }
        if gateway {
            r.attributes.push(RouteAttribute::Gateway(addr(net.addr())));
        }
        r
    }

    /// The routes that name one of the Link's networks: every unicast route of any table
    /// to a prefix of /8 (IPv4) or /16 (IPv6) or narrower, on-link or through a gateway,
    /// and every local or anycast route of the local and main tables. Not the default
    /// routes (of any table), a VPN's halves of the internet, other tables' local routes
    /// (a transparent proxy's), nor other kinds of route.
    #[test]
    fn the_links_networks_are_its_routes_but_the_ways_out() {
        let main = RouteHeader::RT_TABLE_MAIN;
        let taken = |r: RouteMessage| network_of_route(&r).map(|n| n.to_string());
        for (dst, gw) in [
            ("2001:db8:77::/64", false),
            ("93.184.215.0/24", false),
            ("10.8.0.0/16", true),
            ("44.0.0.0/8", true),
            ("2a01:4f8::/32", true),
            ("192.0.2.7/32", false),
        ] {
            assert_eq!(
                taken(route(dst, main, RouteType::Unicast, gw)).as_deref(),
                Some(dst)
            );
        }
        for (dst, table, kind) in [
            ("0.0.0.0/0", main, RouteType::Unicast),
            ("::/0", main, RouteType::Unicast),
            ("0.0.0.0/1", main, RouteType::Unicast),
            ("128.0.0.0/1", main, RouteType::Unicast),
            ("8000::/1", main, RouteType::Unicast),
            ("2000::/3", main, RouteType::Unicast),
            ("0.0.0.0/0", 52, RouteType::Unicast),
            ("::/0", 100, RouteType::Unicast),
            ("0.0.0.0/0", 100, RouteType::Local),
            ("93.184.215.0/24", 100, RouteType::Local),
            ("93.184.215.0/24", 255, RouteType::Broadcast),
            ("93.184.215.0/24", main, RouteType::Unreachable),
            ("93.184.215.0/24", main, RouteType::BlackHole),
        ] {
            assert_eq!(
                taken(route(dst, table, kind, false)),
                None,
                "{dst} {table} {kind:?}"
            );
        }
        // What the Link delivers to itself is its own at any length, a default included
        // (before, every local route was passed over: a range the Link takes on `lo` was
        // open to `public` jobs).
        for (dst, table, kind) in [
            ("93.184.216.0/24", 255, RouteType::Local),
            ("2001:db8:5::/64", 255, RouteType::Local),
            ("93.184.216.0/24", main, RouteType::Local),
            ("2a01:4f8:1::/64", 255, RouteType::Anycast),
            ("92.0.0.0/7", 255, RouteType::Local),
            ("0.0.0.0/0", 255, RouteType::Local),
            ("::/0", 255, RouteType::Local),
        ] {
            assert_eq!(
                taken(route(dst, table, kind, false)).as_deref(),
                Some(dst),
                "{dst} {table} {kind:?}"
            );
        }
        // A network routed by policy, in a table of its own (a VPN's internal range in
        // Tailscale's table 52 or wg-quick's 51820, a second uplink's network) is the Link's
        // as the main table's are; before, only the main table's routes were read. A table
        // past 255 comes as an attribute.
        for (dst, table) in [("93.184.215.0/24", 52), ("2a01:4f8:7::/48", 100)] {
            assert_eq!(
                taken(route(dst, table, RouteType::Unicast, true)).as_deref(),
                Some(dst),
                "{dst} {table}"
            );
        }
        let mut big = route("93.184.215.0/24", 252, RouteType::Unicast, false);
        big.attributes.push(RouteAttribute::Table(51820));
        assert_eq!(taken(big).as_deref(), Some("93.184.215.0/24"));
    }

    fn datagram(payloads: Vec<NetlinkPayload<RouteNetlinkMessage>>) -> Vec<u8> {
        let mut out = Vec::new();
        for payload in payloads {
            let mut m = NetlinkMessage::new(netlink_packet_core::NetlinkHeader::default(), payload);
            m.header.sequence_number = 1;
            m.finalize();
            let mut buf = vec![0u8; m.buffer_len()];
            m.serialize(&mut buf);
            buf.resize((buf.len() + 3) & !3, 0);
            out.extend(buf);
        }
        out
    }

    /// A dump the kernel ends with an error in its DONE (a route it could not fit, say) is
    /// an error, not the routes it sent before: without them a job could reach the Link's
    /// own network. Before, the DONE's code was not read.
    #[test]
    fn a_dump_ended_with_an_error_is_an_error_not_a_shorter_list() {
        let r = route(
            "93.184.215.0/24",
            RouteHeader::RT_TABLE_MAIN,
            RouteType::Unicast,
            false,
        );
        let new_route = || NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(r.clone()));
        let done = |code: i32| {
            let mut d = netlink_packet_core::DoneMessage::default();
            d.code = code;
            NetlinkPayload::Done(d)
        };
        let (mut routes, mut interrupted) = (Vec::new(), false);
        let failed = dump_datagram(
            &datagram(vec![new_route(), done(-libc::EMSGSIZE)]),
            &mut routes,
            &mut interrupted,
        );
        assert_eq!(
            failed.map_err(|e| e.raw_os_error()).err(),
            Some(Some(libc::EMSGSIZE))
        );
        let (mut routes, mut interrupted) = (Vec::new(), false);
        let more = dump_datagram(&datagram(vec![new_route()]), &mut routes, &mut interrupted);
        assert!(!more.expect("a datagram of routes"), "the dump goes on");
        let ended = dump_datagram(&datagram(vec![done(0)]), &mut routes, &mut interrupted);
        assert!(ended.expect("a whole dump"));
        assert_eq!((routes.len(), interrupted), (1, false));
    }

    /// The kernel's own answer: the main table of this namespace, as `ip` reads it.
    #[test]
    fn the_routes_dump_reads_what_ip_route_shows() {
        let Ok(out) = std::process::Command::new("ip")
            .args(["-j", "route", "show", "table", "main"])
            .output()
        else {
            crate::test_skips::skipped(
                "the_routes_dump_reads_what_ip_route_shows",
                "iproute2's ip is not installed",
            );
            return;
        };
        let listed: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        let dumped = dump_routes().unwrap().expect("a quiet routing table");
        let of_main = dumped
            .iter()
            .filter(|r| {
                r.header.table == RouteHeader::RT_TABLE_MAIN
                    && r.header.address_family == AddressFamily::Inet
            })
            .count();
        assert_eq!(of_main, listed.len(), "{listed:?}");
        let nets = own_networks().unwrap();
        for r in &listed {
            let dst = r["dst"].as_str().unwrap_or("default");
            if dst == "default" {
                continue;
            }
            let net: IpNet = if dst.contains('/') {
                dst.parse().unwrap()
            } else {
                format!("{dst}/32").parse().unwrap()
            };
            if net.prefix_len() >= 8 && r["type"].as_str().unwrap_or("unicast") == "unicast" {
                assert!(nets.contains(&net.trunc()), "{net} not among {nets:?}");
            }
        }
    }

    /// Runs `ip` with `args` in the calling thread's network namespace.
    fn ip(args: &[&str]) {
        let out = std::process::Command::new("ip")
            .args(args)
            .output()
            .expect("run ip");
        assert!(out.status.success(), "ip {args:?}: {out:?}");
    }

    /// Which of `ips` the host's own networks (this thread's namespace) hold: the same
    /// before and after a test that changed routes in a namespace of its own.
    pub(crate) fn host_holds(ips: &[[u8; 4]]) -> Vec<bool> {
        let nets = own_networks().expect("the host's networks");
        ips.iter()
            .map(|ip| nets.iter().any(|n| n.contains(&IpAddr::from(*ip))))
            .collect()
    }

    /// A network the Link gains after a job started is the job's to avoid from its next
    /// decision on: a route or an address added after a look is in the next look's
    /// networks, and one removed leaves them. Before, the networks were read once, when a
    /// job's egress started. In a network namespace of the test's own thread, where `ip`
    /// changes nothing of the host's.
    #[test]
    fn a_change_of_the_links_networks_is_in_the_next_look() {
        let name = "a_change_of_the_links_networks_is_in_the_next_look";
        if let Some(missing) = crate::sandbox::netns::missing_capabilities() {
            crate::test_skips::skipped(name, &missing);
            return;
        }
        if std::process::Command::new("ip").arg("-V").output().is_err() {
            crate::test_skips::skipped(name, "iproute2's ip is not installed");
            return;
        }
        let made = [[93, 184, 215, 14], [203, 0, 113, 9]];
        let host_before = host_holds(&made);
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
            ip(&["link", "set", "lo", "up"]);
            let own = OwnNetworks::open().expect("watch");
            let holds =
                |nets: &[IpNet], ip: [u8; 4]| nets.iter().any(|n| n.contains(&IpAddr::from(ip)));
            let first = own.current().expect("first look");
            assert!(!holds(&first, [93, 184, 215, 14]), "{first:?}");
            let again = own.current().expect("second look");
            assert!(
                Arc::ptr_eq(&first, &again),
                "nothing changed, nothing read again"
            );

            ip(&["route", "add", "local", "93.184.215.0/24", "dev", "lo"]);
            let routed = own.current().expect("look after the route");
            assert!(holds(&routed, [93, 184, 215, 14]), "{routed:?}");

            ip(&["addr", "add", "203.0.113.9/28", "dev", "lo"]);
            let addressed = own.current().expect("look after the address");
            assert!(holds(&addressed, [203, 0, 113, 9]), "{addressed:?}");

            ip(&["route", "del", "local", "93.184.215.0/24", "dev", "lo"]);
            let removed = own.current().expect("look after the removal");
            assert!(!holds(&removed, [93, 184, 215, 14]), "{removed:?}");
            assert!(holds(&removed, [203, 0, 113, 9]), "{removed:?}");
        })
        .join()
        .expect("the namespace's thread");
        assert_eq!(
            host_holds(&made),
            host_before,
            "the host's networks are as they were"
        );
    }

    /// The networks are read only from a thread of the namespace the watch was opened in:
    /// one moved into another (a job's, where every address is local) gets an error, not
    /// that namespace's networks.
    #[test]
    fn a_read_from_another_namespace_is_refused() {
        let name = "a_read_from_another_namespace_is_refused";
        if let Some(missing) = crate::sandbox::netns::missing_capabilities() {
            crate::test_skips::skipped(name, &missing);
            return;
        }
        let own = Arc::new(OwnNetworks::open().expect("watch"));
        let elsewhere = own.clone();
        let err = std::thread::spawn(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
            elsewhere.current().expect_err("read in another namespace")
        })
        .join()
        .expect("the namespace's thread");
        assert!(
            err.to_string().contains("another network namespace"),
            "{err}"
        );
        assert!(own.current().is_ok(), "read in its own namespace");
    }

    #[test]
    fn own_networks_hold_loopback() {
        let nets = own_networks().unwrap();
        assert!(
            nets.iter()
                .any(|n| n.contains(&IpAddr::from([127, 0, 0, 1]))),
            "{nets:?}"
        );
    }
}
