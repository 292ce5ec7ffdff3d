//! The Link's own addresses and networks, which no job may reach whatever its policy says:
//! read from the host's interfaces when a job's egress starts.

use ipnet::IpNet;
use std::io;
use std::net::IpAddr;

/// The Link's own addresses and networks, as configured in the runner's network namespace.
/// An error, never a shorter list: without them a job could reach the Link's own network.
pub fn own_networks() -> io::Result<Vec<IpNet>> {
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

fn ip_of(s: &nix::sys::socket::SockaddrStorage) -> Option<IpAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(IpAddr::V4(v4.ip()));
    }
    s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
