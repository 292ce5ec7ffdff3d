//! The egress policy (`policies/egress.toml`) and the pure checks made with it: which names a
//! job may look up and reach, which addresses the proxy may connect to, and what counts as an
//! IP literal.
//!
//! Decisions:
//! - **Names are ASCII only.** A host is lowercased, one trailing dot is dropped, and it must be
//!   1–253 bytes of labels of 1–63 bytes from `[a-z0-9_-]`. Anything else (Unicode / IDN in
//!   U-label form, `%`, `@`, spaces, NUL, empty labels) is not a name and is refused: IDNs are
//!   reached through their punycode (`xn--`) form, which is compared like any other ASCII.
//! - **Label-boundary matching.** An allow entry matches itself and its subdomains:
//!   `host == entry || host.ends_with("." + entry)`. So `evilopenvibe.services` and
//!   `openvibe.services.evil.com` do not match `openvibe.services`.
//! - **IP literals are never names.** [`parse_ip_literal`] recognises every spelling the C
//!   library or a URL parser would turn into an address (dotted, decimal `2130706433`, hex
//!   `0x7f000001`, octal `0177.0.0.1`, short `127.1`, bracketed IPv6, zone ids); and
//!   [`looks_like_ip`] also catches the invalid ones (`999.1.1.1`, `0x1.0xzz`...), whose last
//!   label is numeric, as WHATWG's URL host parser does. Such a host is refused as a name under
//!   every mode; under `public` the proxy judges the address the tool actually connected to.
//! - **Addresses**: the Link's own networks first, then the `[[deny]]` ranges in file order
//!   (first match gives the reason), then a built-in floor no policy file can remove
//!   ([`FLOOR`]), then the embedded-IPv4 forms, which are judged by their IPv4 address (the
//!   file's, then the built-in [`FLOOR_EMBEDDED`]: IPv4-mapped `::ffff:0:0/96`, NAT64
//!   `64:ff9b::/96` and 6to4 `2002::/16`; Teredo `2001::/32`, whose IPv4 is obfuscated, is a
//!   denied range of the floor), and last, with `ipv6_global_unicast_only`, any IPv6 outside
//!   `2000::/3`.
//! - **Documentation ranges** (192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32,
//!   3fff::/20) **are denied**: they are never routed on the internet, so a connection there can
//!   only reach something on the Link's side; no legitimate tool needs them.
//! - **The synthetic pool 198.18.0.0/15** (benchmarking, RFC 2544) is denied as a real
//!   destination (in the floor), so a synthetic address can never be mistaken for a real one.
//! - **The Link's own addresses** are given as networks (`IpNet`), address and prefix length
//!   of each interface: under IPv6 the Link's on-link neighbours have global addresses, which
//!   RFC 1918 does not cover, so the whole on-link prefix is denied, not just the address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::Duration;

use ipnet::{IpNet, Ipv6Net};
use serde::Deserialize;

use crate::egress::record::Budgets;
use crate::job::Net;

mod names;
use names::within;
pub use names::{looks_like_ip, normalize_name, parse_ip_literal};

/// The policy shipped in `policies/egress.toml`.
pub const SHIPPED_TOML: &str = include_str!("../../policies/egress.toml");

/// The ports the proxy can serve: 443 (TLS, SNI checked) and 80 (HTTP/1, Host checked).
pub const SUPPORTED_PORTS: [u16; 2] = [443, 80];

/// The synthetic addresses the DNS responder hands out (see `egress::dns`).
pub const SYNTHETIC_POOL: &str = "198.18.0.0/15";

/// Denied whatever the policy file says: (range, reason). Everything SPEC says `public` may
/// never reach is here, with the cloud platform addresses outside those ranges (Azure's
/// 168.63.129.16, which guest agents keep for root, and the proxy connects as root; Oracle
/// Cloud Classic's 192.0.0.192) and Teredo, whose IPv4 address cannot be judged, so an
/// operator's file that leaves out its `[[deny]]` list (or a range of it) opens nothing SPEC
/// forbids: the file can add ranges, never remove these.
pub const FLOOR: &[(&str, &str)] = &[
    ("0.0.0.0/8", "unspecified / this network (built in)"),
    ("10.0.0.0/8", "private network, RFC 1918 (built in)"),
    (
        "100.64.0.0/10",
        "shared address space (CGNAT, RFC 6598; cloud metadata 100.100.100.200), built in",
    ),
    ("127.0.0.0/8", "loopback (built in)"),
    (
        "168.63.129.16/32",
        "Azure platform address (WireServer: goal state, extension settings, certificates), built in",
    ),
    (
        "169.254.0.0/16",
        "link-local, cloud metadata 169.254.169.254 (built in)",
    ),
    ("172.16.0.0/12", "private network, RFC 1918 (built in)"),
    (
        "192.0.0.0/24",
        "IETF protocol assignments, RFC 6890 (Oracle Cloud Classic metadata 192.0.0.192), built in",
    ),
    ("192.168.0.0/16", "private network, RFC 1918 (built in)"),
    ("224.0.0.0/4", "multicast (built in)"),
    ("240.0.0.0/4", "reserved and limited broadcast (built in)"),
    (
        SYNTHETIC_POOL,
        "the runner's synthetic DNS addresses (built in)",
    ),
    ("::/128", "unspecified (built in)"),
    ("::1/128", "loopback (built in)"),
    ("::/96", "IPv4-compatible IPv6, deprecated (built in)"),
    ("64:ff9b:1::/48", "local-use NAT64, RFC 8215 (built in)"),
    (
        "2001::/32",
        "Teredo, RFC 4380: tunnels to an embedded, obfuscated IPv4 address (built in)",
    ),
    (
        "fc00::/7",
        "unique local, the IPv6 private networks (built in)",
    ),
    ("fe80::/10", "link-local (built in)"),
    ("fec0::/10", "site-local, deprecated (built in)"),
    ("ff00::/8", "multicast (built in)"),
];

/// The built-in embedded-IPv4 forms, judged by the IPv4 address they carry: (prefix, offset
/// of the IPv4 address in bits, reason). IPv4-mapped IPv6, NAT64's well-known prefix and
/// 6to4: without them a file could let `64:ff9b::a00:1` reach 10.0.0.1 through a NAT64
/// gateway.
pub const FLOOR_EMBEDDED: &[(&str, u8, &str)] = &[
    ("::ffff:0:0/96", 96, "IPv4-mapped IPv6 (built in)"),
    ("64:ff9b::/96", 96, "NAT64, RFC 6052 (built in)"),
    ("2002::/16", 16, "6to4, RFC 3056 (built in)"),
];

/// Longest name (RFC 1035, without the trailing dot).
pub const MAX_NAME_LEN: usize = 253;
/// Longest label.
pub const MAX_LABEL_LEN: usize = 63;

/// A denied address range and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeniedRange {
    pub range: IpNet,
    pub reason: String,
}

/// An IPv6 prefix whose addresses carry an IPv4 address at `ipv4_offset` (bits). An
/// address that would cross bits 64 to 71 (an offset from 33 to 63) is split around them,
/// as RFC 6052 lays it out for NAT64 prefixes of 40, 48 and 56 bits: those bits are its
/// "u" octet, and the address goes on at bit 72. No offset starts inside them (the file's
/// reader refuses 64 to 71; a /64 prefix's address starts at 72).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedIpv4 {
    pub prefix: Ipv6Net,
    pub ipv4_offset: u8,
    pub reason: String,
}

impl EmbeddedIpv4 {
    /// The IPv4 address inside `ip`, if `ip` is in this prefix.
    pub fn extract(&self, ip: Ipv6Addr) -> Option<Ipv4Addr> {
        if !self.prefix.contains(&ip) {
            return None;
        }
        let bits = u128::from(ip);
        let offset = u32::from(self.ipv4_offset);
        let mask = |n: u32| (1u128 << n) - 1;
        let v4 = if offset > 32 && offset < 64 {
            // RFC 6052: the bits before the u octet, then the rest from bit 72.
            let before = 64 - offset;
            let after = 32 - before;
            let high = (bits >> 64) & mask(before);
            let low = (bits >> (128 - 72 - after)) & mask(after);
            (high << after) | low
        } else {
            bits >> (128 - 32 - offset)
        };
        Some(Ipv4Addr::from(v4 as u32))
    }
}

/// A name suffix never looked up under `public`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeniedSuffix {
    pub suffix: String,
    pub reason: String,
}

/// The DNS responder's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DnsSettings {
    /// Names one job may have answered; then REFUSED.
    pub max_names: usize,
    pub ttl_seconds: u32,
}

/// The validated policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressPolicy {
    pub ports: Vec<u16>,
    pub ipv6_global_unicast_only: bool,
    /// `openvibe-only`: each entry and its subdomains (lowercase ASCII, no trailing dot).
    pub allow: Vec<String>,
    /// `public`: suffixes never looked up.
    pub public_deny_suffixes: Vec<DeniedSuffix>,
    /// The file's ranges in order, then [`FLOOR`].
    pub deny: Vec<DeniedRange>,
    /// The file's embedded forms, then [`FLOOR_EMBEDDED`].
    pub embedded: Vec<EmbeddedIpv4>,
    pub dns: DnsSettings,
    pub budgets: Budgets,
}

/// Why the policy file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read the egress policy {path}: {source}; install policies/egress.toml there or point the runner's policies_dir at it")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the egress policy is not valid TOML for its format: {0}")]
    Toml(String),
    #[error("the egress policy is invalid: {0}")]
    Invalid(String),
}

/// Why an address is denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DenyReason {
    /// In a denied range (the policy file's or the built-in floor).
    Range { range: IpNet, reason: String },
    /// One of the Link's own addresses or on-link networks.
    OwnAddress { network: IpNet },
    /// IPv6 outside 2000::/3 (global unicast) that carries no IPv4 address.
    NotGlobalUnicast,
    /// IPv6 in a `public` job whose network's NAT64 prefix could not be learned
    /// (`egress::nat64`): it might carry a private IPv4 address.
    Nat64Unknown,
    /// An IPv6 form carrying a denied IPv4 address.
    Embedded {
        form: String,
        ipv4: Ipv4Addr,
        inner: Box<DenyReason>,
    },
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DenyReason::Range { range, reason } => write!(f, "{reason} ({range})"),
            DenyReason::OwnAddress { network } => {
                write!(f, "the Link's own address or network ({network})")
            }
            DenyReason::NotGlobalUnicast => write!(f, "IPv6 outside global unicast 2000::/3"),
            DenyReason::Nat64Unknown => write!(
                f,
                "IPv6, and this network's NAT64 prefix is unknown (its resolver did not answer ipv4only.arpa at the job's start), so the address might reach a private IPv4 one through the gateway; this job reaches IPv4 only"
            ),
            DenyReason::Embedded { form, ipv4, inner } => {
                write!(f, "{form} of {ipv4}: {inner}")
            }
        }
    }
}

impl DenyReason {
    /// What a tool is told of this reason: all of it, but of the Link's own networks only
    /// that the address is one of them, never the network's prefix or length (the log
    /// keeps them). The refusal itself tells the tool that one address is the Link's; the
    /// whole network would map the Link's subnet for it.
    pub fn told(&self) -> String {
        match self {
            DenyReason::OwnAddress { .. } => "the Link's own address or network".into(),
            DenyReason::Embedded { form, ipv4, inner } => {
                format!("{form} of {ipv4}: {}", inner.told())
            }
            other => other.to_string(),
        }
    }
}

// ---- the file ------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    ports: Vec<u16>,
    ipv6_global_unicast_only: bool,
    openvibe_only: OpenvibeOnlyFile,
    public: PublicFile,
    dns: DnsFile,
    budget: BudgetFile,
    #[serde(default)]
    deny: Vec<RangeFile>,
    #[serde(default)]
    embedded_ipv4: Vec<EmbeddedFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenvibeOnlyFile {
    allow: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PublicFile {
    #[serde(default)]
    deny_suffixes: Vec<SuffixFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuffixFile {
    suffix: String,
    reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DnsFile {
    max_names: usize,
    ttl_seconds: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetFile {
    max_records: usize,
    bytes_out: u64,
    bytes_in: u64,
    job_seconds: u64,
    connection_seconds: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeFile {
    range: IpNet,
    reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EmbeddedFile {
    prefix: Ipv6Net,
    ipv4_offset: u8,
    reason: String,
}

/// Most synthetic names a job can have: the /15 less its first and last address.
pub const MAX_NAMES_CAP: usize = (1 << 17) - 2;

impl EgressPolicy {
    /// The policy shipped with the runner.
    pub fn shipped() -> EgressPolicy {
        // The shipped file is tested (tests::the_shipped_policy_loads).
        EgressPolicy::from_toml_str(SHIPPED_TOML).expect("policies/egress.toml is valid")
    }

    /// Read `egress.toml` from a file.
    pub fn load(path: &Path) -> Result<EgressPolicy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        EgressPolicy::from_toml_str(&text)
    }

    /// Parse and validate the policy's text.
    pub fn from_toml_str(text: &str) -> Result<EgressPolicy, PolicyError> {
        let file: File = toml::from_str(text).map_err(|e| PolicyError::Toml(e.to_string()))?;
        let invalid = |m: String| Err(PolicyError::Invalid(m));
        if file.version != 1 {
            return invalid(format!("version {} (this runner reads 1)", file.version));
        }
        if file.ports.is_empty() {
            return invalid("ports is empty".into());
        }
        for (i, p) in file.ports.iter().enumerate() {
            if !SUPPORTED_PORTS.contains(p) {
                return invalid(format!("port {p}: the proxy serves only 443 and 80"));
            }
            if file.ports[..i].contains(p) {
                return invalid(format!("port {p} is listed twice"));
            }
        }
        let mut allow = Vec::new();
        for entry in &file.openvibe_only.allow {
            let Some(name) = normalize_name(entry) else {
                return invalid(format!("allow entry {entry:?} is not an ASCII host name"));
            };
            if name != *entry {
                return invalid(format!(
                    "allow entry {entry:?}: write it lowercase without a trailing dot"
                ));
            }
            if !name.contains('.') {
                return invalid(format!(
                    "allow entry {entry:?}: a whole top-level domain cannot be allowed"
                ));
            }
            allow.push(name);
        }
        let mut public_deny_suffixes = Vec::new();
        for s in file.public.deny_suffixes {
            match normalize_name(&s.suffix) {
                Some(n) if n == s.suffix => {}
                _ => {
                    return invalid(format!(
                        "deny suffix {:?} is not a lowercase ASCII name",
                        s.suffix
                    ))
                }
            }
            if s.reason.trim().is_empty() {
                return invalid(format!("deny suffix {:?} has no reason", s.suffix));
            }
            public_deny_suffixes.push(DeniedSuffix {
                suffix: s.suffix,
                reason: s.reason,
            });
        }
        let mut deny = Vec::new();
        for r in file.deny {
            if r.range != r.range.trunc() {
                return invalid(format!(
                    "deny range {} has host bits set (write {})",
                    r.range,
                    r.range.trunc()
                ));
            }
            if r.reason.trim().is_empty() {
                return invalid(format!("deny range {} has no reason", r.range));
            }
            deny.push(DeniedRange {
                range: r.range,
                reason: r.reason,
            });
        }
        for (range, reason) in FLOOR {
            deny.push(DeniedRange {
                range: range.parse().expect("FLOOR ranges parse"),
                reason: (*reason).to_string(),
            });
        }
        let mut embedded = Vec::new();
        for e in file.embedded_ipv4 {
            if e.prefix != e.prefix.trunc() {
                return invalid(format!("embedded prefix {} has host bits set", e.prefix));
            }
            if e.ipv4_offset > 96 || e.ipv4_offset < e.prefix.prefix_len() {
                return invalid(format!(
                    "embedded prefix {}: ipv4_offset {} must be within {}..=96",
                    e.prefix,
                    e.ipv4_offset,
                    e.prefix.prefix_len()
                ));
            }
            if (64..72).contains(&e.ipv4_offset) {
                // RFC 6052 keeps these bits (the "u" octet) zero: a /64 NAT64 prefix carries
                // its IPv4 address from bit 72, and read from 64 a gateway's translation
                // would be judged by another address.
                return invalid(format!(
                    "embedded prefix {}: ipv4_offset {} starts inside bits 64 to 71, which \
                     RFC 6052 keeps zero; for a NAT64 prefix of 64 bits write ipv4_offset = 72",
                    e.prefix, e.ipv4_offset
                ));
            }
            if e.reason.trim().is_empty() {
                return invalid(format!("embedded prefix {} has no reason", e.prefix));
            }
            embedded.push(EmbeddedIpv4 {
                prefix: e.prefix,
                ipv4_offset: e.ipv4_offset,
                reason: e.reason,
            });
        }
        for (prefix, ipv4_offset, reason) in FLOOR_EMBEDDED {
            embedded.push(EmbeddedIpv4 {
                prefix: prefix.parse().expect("FLOOR_EMBEDDED prefixes parse"),
                ipv4_offset: *ipv4_offset,
                reason: (*reason).to_string(),
            });
        }
        if file.dns.max_names == 0 || file.dns.max_names > MAX_NAMES_CAP {
            return invalid(format!(
                "dns.max_names {} must be within 1..={MAX_NAMES_CAP}",
                file.dns.max_names
            ));
        }
        let b = file.budget;
        if b.max_records == 0 {
            return invalid("budget.max_records must be at least 1".into());
        }
        if b.job_seconds == 0 || b.connection_seconds == 0 {
            return invalid("budget times must be at least one second".into());
        }
        Ok(EgressPolicy {
            ports: file.ports,
            ipv6_global_unicast_only: file.ipv6_global_unicast_only,
            allow,
            public_deny_suffixes,
            deny,
            embedded,
            dns: DnsSettings {
                max_names: file.dns.max_names,
                ttl_seconds: file.dns.ttl_seconds,
            },
            budgets: Budgets {
                max_records: b.max_records,
                bytes_out: b.bytes_out,
                bytes_in: b.bytes_in,
                job_time: Duration::from_secs(b.job_seconds),
                connection_time: Duration::from_secs(b.connection_seconds),
            },
        })
    }

    /// Whether the proxy serves this port.
    pub fn port_allowed(&self, port: u16) -> bool {
        self.ports.contains(&port)
    }
}

// ---- names (what is a name and what an IP literal: names.rs) -------------------------------

/// Whether `host` may be looked up and reached under `net`.
///
/// `deny`: never. `openvibe-only`: an allow entry or a subdomain of one. `public`: any name of
/// two labels or more outside the denied suffixes. Never an IP literal, never non-ASCII.
pub fn name_allowed(policy: &EgressPolicy, net: Net, host: &str) -> bool {
    let Some(name) = normalize_name(host) else {
        return false;
    };
    match net {
        Net::Deny => false,
        Net::OpenvibeOnly => policy.allow.iter().any(|a| within(&name, a)),
        Net::Public => {
            name.contains('.')
                && !policy
                    .public_deny_suffixes
                    .iter()
                    .any(|s| within(&name, &s.suffix))
        }
    }
}

// ---- addresses -----------------------------------------------------------------------------

/// Whether the proxy may connect to `ip`. `own` is the Link's own addresses with the prefix
/// length of their networks (a bare address is a /32 or /128); `nat64`, the NAT64 prefixes
/// of the Link's network (`egress::nat64`), judged as the policy's embedded forms are.
pub fn address_allowed(
    policy: &EgressPolicy,
    ip: IpAddr,
    own: &[IpNet],
    nat64: &[EmbeddedIpv4],
) -> Result<(), DenyReason> {
    if let Some(network) = own.iter().find(|n| n.contains(&ip)) {
        return Err(DenyReason::OwnAddress { network: *network });
    }
    if let Some(r) = policy.deny.iter().find(|r| r.range.contains(&ip)) {
        return Err(DenyReason::Range {
            range: r.range,
            reason: r.reason.clone(),
        });
    }
    let IpAddr::V6(v6) = ip else {
        return Ok(());
    };
    // Every form the address is in, not the first alone: a network's NAT64 prefix found in
    // two layouts (or inside a form of the file) carries another IPv4 address in each, and
    // a gateway may translate by either.
    let mut carried = false;
    for e in policy.embedded.iter().chain(nat64) {
        if let Some(v4) = e.extract(v6) {
            carried = true;
            address_allowed(policy, IpAddr::V4(v4), own, nat64).map_err(|inner| {
                DenyReason::Embedded {
                    form: e.reason.clone(),
                    ipv4: v4,
                    inner: Box::new(inner),
                }
            })?;
        }
    }
    if carried {
        return Ok(());
    }
    if policy.ipv6_global_unicast_only && (v6.segments()[0] & 0xe000) != 0x2000 {
        return Err(DenyReason::NotGlobalUnicast);
    }
    Ok(())
}

/// The address to connect to for an allowed `ip`: IPv4-mapped IPv6 becomes the IPv4 address
/// (so the proxy never relies on a dual-stack socket); everything else is unchanged.
pub fn connect_form(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

#[cfg(test)]
mod tests;
