//! The Link's own addresses and networks, which no job may reach whatever its policy says:
//! read from the host's interfaces and its main routing table when a job's egress starts.

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
/// each interface's address and its network, and the destination of every route of the
/// main table but the ways out (the default routes and those wider than
/// [`NARROWEST_WAY_OUT`]). A route says what a prefix alone may not: an address given
/// as a /128 (DHCPv6) or a /32 whose on-link network comes as a route of its own, a
/// network behind a gateway of the LAN, a VPN's internal ranges.
/// An error, never a shorter list: without them a job could reach the Link's own network.
pub fn own_networks() -> io::Result<Vec<IpNet>> {
    let mut nets = interface_networks()?;
    nets.extend(routed_networks()?);
    Ok(nets)
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

/// The destinations of the main table's routes that are not ways out.
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

/// The network a route leads to, if it is one of the Link's: a unicast route of the main
/// table, to a prefix at least as narrow as [`NARROWEST_WAY_OUT`].
fn network_of_route(route: &RouteMessage) -> Option<IpNet> {
    let table = route
        .attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(route.header.table));
    if table != u32::from(RouteHeader::RT_TABLE_MAIN) || route.header.kind != RouteType::Unicast {
        return None;
    }
    let len = route.header.destination_prefix_length;
    let dst = route.attributes.iter().find_map(|a| match a {
        RouteAttribute::Destination(RouteAddress::Inet(v4)) => Some(IpAddr::V4(*v4)),
        RouteAttribute::Destination(RouteAddress::Inet6(v6)) => Some(IpAddr::V6(*v6)),
        _ => None,
    })?;
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
        let mut rest = datagram.as_slice();
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
            interrupted |= message.header.flags & NLM_F_DUMP_INTR != 0;
            match message.payload {
                NetlinkPayload::Done(_) => return Ok((!interrupted).then_some(routes)),
                NetlinkPayload::Error(e) => match e.code {
                    Some(code) => {
                        return Err(io::Error::from_raw_os_error(code.get().saturating_abs()))
                    }
                    None => return Ok((!interrupted).then_some(routes)),
                },
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(route)) => {
                    routes.push(route)
                }
                _ => {}
            }
        }
    }
}

fn ip_of(s: &nix::sys::socket::SockaddrStorage) -> Option<IpAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(IpAddr::V4(v4.ip()));
    }
    s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
}

#[cfg(test)]
mod tests {
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

    /// The routes that name one of the Link's networks: every unicast route of the main
    /// table to a prefix of /8 (IPv4) or /16 (IPv6) or narrower, on-link or through a
    /// gateway. Not the default routes, a VPN's halves of the internet, other tables'
    /// routes (policy routing, the local table), nor routes that are not unicast.
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
            ("93.184.215.0/24", 255, RouteType::Local),
            ("93.184.215.0/24", 100, RouteType::Unicast),
            ("93.184.215.0/24", main, RouteType::Unreachable),
            ("93.184.215.0/24", main, RouteType::BlackHole),
        ] {
            assert_eq!(
                taken(route(dst, table, kind, false)),
                None,
                "{dst} {table} {kind:?}"
            );
        }
        // A table past 255 comes as an attribute.
        let mut big = route("93.184.215.0/24", 252, RouteType::Unicast, false);
        big.attributes.push(RouteAttribute::Table(u32::from(main)));
        assert_eq!(taken(big).as_deref(), Some("93.184.215.0/24"));
        let mut other = route("93.184.215.0/24", main, RouteType::Unicast, false);
        other.attributes.push(RouteAttribute::Table(51820));
        assert_eq!(taken(other), None);
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
