//! The decision for one connection the proxy accepted in a job's network namespace: connect it
//! (to exactly which address) or refuse it (why). Pure: the effects (getsockname, sniffing,
//! resolving, connecting) belong to the proxy.
//!
//! The proxy's sequence, and where each function fits:
//! 1. accept; `dest` = getsockname() of the accepted socket (the address the tool asked for);
//! 2. read the first bytes until `egress::sniff` answers (bounded bytes and time);
//! 3. [`target`]: what to resolve, if anything — called before resolving, so a connection
//!    that is refused anyway causes no lookup at all;
//! 4. resolve the name (an effect: hickory-resolver or the system resolver), once;
//! 5. [`decide`] with the resolved addresses: `Allow { connect_to }` — connect to exactly
//!    that address, never to a name, never re-resolving — or `Deny { reason }`;
//! 6. record the attempt (`egress::record`) under [`Decision::host`].
//!
//! Decisions:
//! - `deny`: everything refused. A port outside the policy's `ports`: refused.
//! - **Synthetic destination** (198.18.0.0/15): it must be one the job's DNS answer gave out
//!   (else refused: the tool guessed), the name it stands for must still be allowed for `net`,
//!   and the SNI (443) or Host (80) must be present and equal that name (no SNI/Host, or
//!   another name — domain fronting — refused). Under both `openvibe-only` and `public`.
//! - **IP-literal destination** (anything else): refused under `openvibe-only`; under `public`
//!   allowed only if `address_allowed`, and then connected to as is. The SNI/Host is not
//!   compared then (a TLS client sends no SNI for an IP, and the connection goes to the
//!   checked address whatever the client claims).
//! - **Resolved addresses** (for a synthetic destination): all of them must pass
//!   `address_allowed` — if any one is denied the whole name is refused, because a name that
//!   resolves to an internal address alongside public ones is a rebinding attempt or a split
//!   horizon, and either way not a public host. The first address is used (IPv4-mapped IPv6
//!   turned into IPv4). No address at all: refused. The port connected to is `dest`'s port.
//! - `openvibe-only` applies the same address checks to OpenVibe's names: a Link whose DNS
//!   sends `openvibe.services` to a private address (split horizon, a hostile network) does not
//!   get its LAN reached.
//! - **NAT64** (`public`): an IPv6 address in the network's own NAT64 prefix is judged by the
//!   IPv4 address it carries. When the prefix could not be learned at the job's start
//!   (`egress::nat64`), IPv6 is not used: an IPv6 literal is refused, and a name's IPv6
//!   addresses are left out (it is reached over IPv4, or refused if it has none).

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use crate::egress::dns::NameTable;
use crate::egress::nat64::Nat64;
use crate::egress::policy::{
    address_allowed, connect_form, name_allowed, DenyReason, EgressPolicy,
};
use crate::job::Net;

/// What the decision needs besides the connection: the policy, the Link's own networks, and
/// the job's synthetic names.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub policy: &'a EgressPolicy,
    pub own: &'a [IpNet],
    /// The NAT64 prefixes of the Link's network (`egress::nat64`; asked for `public`).
    pub nat64: &'a Nat64,
    pub table: &'a NameTable,
}

/// One accepted connection, as seen before the upstream exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt<'a> {
    pub net: Net,
    /// The address and port the tool connected to (getsockname of the accepted socket).
    pub dest: SocketAddr,
    /// The TLS server name or HTTP host the tool sent (canonical, as `egress::sniff` gives
    /// it), or `None` when it sent none.
    pub sniffed: Option<&'a str>,
}

/// What the proxy must resolve before deciding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Resolve this name (then call [`decide`] with its addresses).
    Name(String),
    /// Nothing to resolve: an IP literal (call [`decide`] with no addresses).
    Literal(IpAddr),
}

/// Why a connection is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The job's `net` is `deny`.
    NetDenied,
    /// The port is not in the policy's `ports`.
    Port(u16),
    /// A synthetic address this job's DNS did not give out.
    UnknownSynthetic(IpAddr),
    /// The name is not allowed for the job's `net`.
    Name(String),
    /// `openvibe-only` reaches names only, never an IP literal.
    IpLiteral(IpAddr),
    /// The client sent no SNI / Host, but the connection is for a name.
    NoSniffedName { expected: String },
    /// The client's SNI / Host names another host than the connection is for.
    NameMismatch { expected: String, sniffed: String },
    /// The name resolved to no address.
    NoAddress(String),
    /// The IP literal, or one of the name's addresses, is denied.
    Address { ip: IpAddr, reason: DenyReason },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NetDenied => write!(f, "the job's net is deny"),
            Refusal::Port(p) => write!(f, "port {p} is not allowed (only 443 and 80)"),
            Refusal::UnknownSynthetic(ip) => {
                write!(f, "{ip} was not given out by the job's DNS")
            }
            Refusal::Name(n) => write!(f, "{n} is not allowed for this job"),
            Refusal::IpLiteral(ip) => {
                write!(f, "{ip}: an IP literal is not allowed under openvibe-only")
            }
            Refusal::NoSniffedName { expected } => {
                write!(f, "no TLS server name or Host header (expected {expected})")
            }
            Refusal::NameMismatch { expected, sniffed } => write!(
                f,
                "the TLS server name or Host header says {sniffed}, the connection is for {expected}"
            ),
            Refusal::NoAddress(n) => write!(f, "{n} has no address"),
            Refusal::Address { ip, reason } => write!(f, "{ip} is denied: {reason}"),
        }
    }
}

/// The machine code of a refusal, which a tool reads on port 80 in the
/// `X-Skill-Runner-Refused` header and in the body (`{"error":{"code":…}}`). One name per
/// kind of refusal, stable: the README lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalCode {
    /// The job's `net` does not allow this (never reached in practice: `deny` has no proxy).
    NetDenied,
    /// A port the proxy does not serve.
    Port,
    /// The name is not allowed for the job's `net`.
    NameRefused,
    /// A synthetic address the job's DNS did not give out (a guessed address).
    UnknownAddress,
    /// An IP literal under `openvibe-only`.
    IpLiteral,
    /// The Host (or SNI) is missing or names another host than the connection is for.
    HostMismatch,
    /// The name has no address upstream.
    NoAddress,
    /// The IP literal, or an address of the name, is in a denied range.
    AddressRefused,
    /// A request the proxy cannot judge: malformed, ambiguous framing, CONNECT, two Hosts…
    BadRequest,
    /// The job has as many connections open as it may, none of them idle.
    ConnectionCap,
    /// The job's egress bytes or time are spent.
    Budget,
    /// The upstream could not be reached or closed the connection (answered `502`).
    UpstreamUnreachable,
}

impl RefusalCode {
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalCode::NetDenied => "net_denied",
            RefusalCode::Port => "port",
            RefusalCode::NameRefused => "name_refused",
            RefusalCode::UnknownAddress => "unknown_address",
            RefusalCode::IpLiteral => "ip_literal",
            RefusalCode::HostMismatch => "host_mismatch",
            RefusalCode::NoAddress => "no_address",
            RefusalCode::AddressRefused => "address_refused",
            RefusalCode::BadRequest => "bad_request",
            RefusalCode::ConnectionCap => "connection_cap",
            RefusalCode::Budget => "budget",
            RefusalCode::UpstreamUnreachable => "upstream_unreachable",
        }
    }

    /// The HTTP status a refusal on port 80 carries: `502` when the upstream failed, else
    /// `403`.
    pub fn status(self) -> u16 {
        match self {
            RefusalCode::UpstreamUnreachable => 502,
            _ => 403,
        }
    }
}

impl Refusal {
    /// What the tool is told of this refusal (the log gets the whole of it), `host` being
    /// what the record names. When the connection was for a name (`for_name`: to one of
    /// the job's synthetic addresses), an address refused is the upstream's answer for
    /// that name, which stays with the runner: the job's DNS gives the tool synthetic
    /// addresses only, so it is told neither the address nor the range it fell in (which
    /// would map a LAN's or a split-horizon zone's names to their addresses for it). An IP
    /// literal of the Link's own networks is told as such, without the network
    /// ([`DenyReason::told`]).
    pub fn told(&self, host: &str, for_name: bool) -> String {
        match self {
            Refusal::Address { .. } if for_name => {
                format!("{host} resolves to an address this job may not reach")
            }
            Refusal::Address { ip, reason } => format!("{ip} is denied: {}", reason.told()),
            _ => self.to_string(),
        }
    }

    pub fn code(&self) -> RefusalCode {
        match self {
            Refusal::NetDenied => RefusalCode::NetDenied,
            Refusal::Port(_) => RefusalCode::Port,
            Refusal::UnknownSynthetic(_) => RefusalCode::UnknownAddress,
            Refusal::Name(_) => RefusalCode::NameRefused,
            Refusal::IpLiteral(_) => RefusalCode::IpLiteral,
            Refusal::NoSniffedName { .. } | Refusal::NameMismatch { .. } => {
                RefusalCode::HostMismatch
            }
            Refusal::NoAddress(_) => RefusalCode::NoAddress,
            Refusal::Address { .. } => RefusalCode::AddressRefused,
        }
    }
}

/// The outcome for one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Connect to exactly this address; `host` is what the record says.
    Allow {
        connect_to: SocketAddr,
        host: String,
    },
    /// Refuse; `host` is what the record says.
    Deny { host: String, reason: Refusal },
}

impl Decision {
    /// The host to record: the name, or the IP literal's text.
    pub fn host(&self) -> &str {
        match self {
            Decision::Allow { host, .. } | Decision::Deny { host, .. } => host,
        }
    }

    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allow { .. })
    }
}

/// The host a connection is recorded under before anything is decided: the synthetic
/// address's name if it has one, else the destination address.
pub fn record_host(table: &NameTable, dest: SocketAddr) -> String {
    let ip = dest.ip().to_canonical();
    if NameTable::is_synthetic(ip) {
        if let Some(name) = table.name_for(ip) {
            return name;
        }
    }
    ip.to_string()
}

/// The first name in an upstream answer's chain (the owner of each record, and each
/// CNAME's target) that no job may look up: a single-label name or one under a
/// never-resolved suffix, under any `net`. Such an answer is taken as NXDOMAIN: a name the
/// tool may ask for, aliased to `intranet.corp` or `printer.lan`, would otherwise reach
/// (or, refused, confirm) a host the policy says is never looked up. A CNAME from an
/// allowed name to any other public name (a CDN's) passes.
pub fn chain_refused<'a>(
    policy: &EgressPolicy,
    names: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    names
        .into_iter()
        .find(|n| !name_allowed(policy, Net::Public, n))
        .map(|n| n.trim_end_matches('.').to_string())
}

/// Step 3: what to resolve for this connection, or why it is refused already.
pub fn target(ctx: &Context<'_>, attempt: &Attempt<'_>) -> Result<Target, Refusal> {
    if attempt.net == Net::Deny {
        return Err(Refusal::NetDenied);
    }
    let port = attempt.dest.port();
    if !ctx.policy.port_allowed(port) {
        return Err(Refusal::Port(port));
    }
    let ip = attempt.dest.ip().to_canonical();
    if NameTable::is_synthetic(ip) {
        let Some(name) = ctx.table.name_for(ip) else {
            return Err(Refusal::UnknownSynthetic(ip));
        };
        if !name_allowed(ctx.policy, attempt.net, &name) {
            return Err(Refusal::Name(name));
        }
        return match attempt.sniffed {
            None => Err(Refusal::NoSniffedName { expected: name }),
            Some(s) if s != name => Err(Refusal::NameMismatch {
                expected: name,
                sniffed: s.to_string(),
            }),
            Some(_) => Ok(Target::Name(name)),
        };
    }
    match attempt.net {
        Net::Public => match address_checked(ctx, ip) {
            Ok(()) => Ok(Target::Literal(ip)),
            Err(reason) => Err(Refusal::Address { ip, reason }),
        },
        _ => Err(Refusal::IpLiteral(ip)),
    }
}

/// Step 5: the decision, given the addresses the name resolved to (ignored for an IP
/// literal). Repeats [`target`]'s checks, so it is safe to call alone.
pub fn decide(ctx: &Context<'_>, attempt: &Attempt<'_>, resolved: &[IpAddr]) -> Decision {
    let host = record_host(ctx.table, attempt.dest);
    let deny = |host: String, reason: Refusal| Decision::Deny { host, reason };
    let port = attempt.dest.port();
    match target(ctx, attempt) {
        Err(reason) => deny(host, reason),
        Ok(Target::Literal(ip)) => Decision::Allow {
            connect_to: SocketAddr::new(connect_form(ip), port),
            host,
        },
        Ok(Target::Name(name)) => {
            // With the network's NAT64 prefix unknown its IPv6 addresses are left out, and
            // the name is reached over IPv4 if it has an IPv4 address.
            let mut usable = Vec::with_capacity(resolved.len());
            let mut left_out = None;
            for &ip in resolved {
                match address_checked(ctx, ip) {
                    Ok(()) => usable.push(ip),
                    Err(DenyReason::Nat64Unknown) => {
                        left_out.get_or_insert(ip);
                    }
                    Err(reason) => return deny(name, Refusal::Address { ip, reason }),
                }
            }
            match (usable.first(), left_out) {
                (Some(&ip), _) => Decision::Allow {
                    connect_to: SocketAddr::new(connect_form(ip), port),
                    host: name,
                },
                (None, Some(ip)) => deny(
                    name,
                    Refusal::Address {
                        ip,
                        reason: DenyReason::Nat64Unknown,
                    },
                ),
                (None, None) => deny(name.clone(), Refusal::NoAddress(name)),
            }
        }
    }
}

/// [`address_allowed`] with the job's NAT64 view: an IPv6 address (other than IPv4-mapped)
/// is refused when the network's NAT64 prefix is unknown, since it might be in that prefix
/// and reach a private IPv4 address through the gateway.
fn address_checked(ctx: &Context<'_>, ip: IpAddr) -> Result<(), DenyReason> {
    address_allowed(ctx.policy, ip, ctx.own, ctx.nat64.prefixes())?;
    match (ctx.nat64, ip.to_canonical()) {
        (Nat64::Unknown, IpAddr::V6(_)) => Err(DenyReason::Nat64Unknown),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
