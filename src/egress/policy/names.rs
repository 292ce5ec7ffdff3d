//! What is a host name and what an IP literal, in every spelling a tool might use: pure text,
//! no policy (the module above says why each rule is what it is).

use super::{MAX_LABEL_LEN, MAX_NAME_LEN};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The canonical form of a host name: lowercase ASCII, no trailing dot, labels of
/// `[a-z0-9_-]`, 1–63 bytes each, 253 at most in all, and not an IP literal in any spelling
/// (see [`looks_like_ip`]). `None` when `host` is not such a name.
pub fn normalize_name(host: &str) -> Option<String> {
    let h = host.strip_suffix('.').unwrap_or(host);
    if h.is_empty() || h.len() > MAX_NAME_LEN {
        return None;
    }
    for label in h.split('.') {
        if label.is_empty() || label.len() > MAX_LABEL_LEN {
            return None;
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return None;
        }
    }
    if looks_like_ip(h) {
        return None;
    }
    Some(h.to_ascii_lowercase())
}

/// `name` is `suffix` or ends with `.suffix` (both already canonical).
pub(super) fn within(name: &str, suffix: &str) -> bool {
    name == suffix
        || (name.len() > suffix.len()
            && name.ends_with(suffix)
            && name.as_bytes()[name.len() - suffix.len() - 1] == b'.')
}

/// Whether `host` is meant as an IP address, valid or not: anything with a `:` (IPv6, with or
/// without brackets or zone), or whose last label (after one trailing dot) is all decimal
/// digits or `0x` followed by hex digits — the rule WHATWG's URL parser uses to decide that a
/// host is IPv4 ("ends in a number").
pub fn looks_like_ip(host: &str) -> bool {
    if host.contains(':') || host.starts_with('[') {
        return true;
    }
    let h = host.strip_suffix('.').unwrap_or(host);
    let last = h.rsplit('.').next().unwrap_or("");
    if last.is_empty() {
        return false;
    }
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    match last.strip_prefix("0x").or_else(|| last.strip_prefix("0X")) {
        Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => false,
    }
}

/// The address `host` names when read as an IP literal in any spelling an attacker might use,
/// or `None` when it is not a valid one:
/// - IPv6, bare or in brackets, with an optional zone id (`fe80::1%eth0`, `[fe80::1%25eth0]`),
///   including the dotted tail (`::ffff:127.0.0.1`);
/// - IPv4 as `inet_aton(3)` and WHATWG read it: one to four parts, each decimal, `0x` hex or
///   `0`-prefixed octal, the last part filling the remaining bytes (`127.1` = 127.0.0.1,
///   `2130706433`, `0x7f000001`, `0177.0.0.1`, `0x7f.1`), one trailing dot allowed.
pub fn parse_ip_literal(host: &str) -> Option<IpAddr> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']')?;
        return parse_ipv6_with_zone(inner)
            .map(IpAddr::V6)
            .or_else(|| parse_ipv4_any(inner).map(IpAddr::V4));
    }
    if host.contains(':') {
        return parse_ipv6_with_zone(host).map(IpAddr::V6);
    }
    parse_ipv4_any(host).map(IpAddr::V4)
}

fn parse_ipv6_with_zone(s: &str) -> Option<Ipv6Addr> {
    let (addr, zone) = match s.split_once('%') {
        Some((a, z)) => (a, Some(z)),
        None => (s, None),
    };
    if let Some(z) = zone {
        // "%25" is the URL-encoded "%" (RFC 6874); the zone itself must be non-empty.
        let z = z.strip_prefix("25").filter(|r| !r.is_empty()).unwrap_or(z);
        if z.is_empty() || !z.bytes().all(|b| b.is_ascii_graphic()) {
            return None;
        }
    }
    addr.parse::<Ipv6Addr>().ok()
}

fn parse_ipv4_any(s: &str) -> Option<Ipv4Addr> {
    let s = s.strip_suffix('.').unwrap_or(s);
    if s.is_empty() {
        return None;
    }
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut numbers = Vec::with_capacity(parts.len());
    for p in &parts {
        numbers.push(parse_ipv4_number(p)?);
    }
    let (last, init) = numbers.split_last()?;
    if init.iter().any(|&n| n > 255) {
        return None;
    }
    let room = 8 * (5 - numbers.len() as u32);
    if room < 64 && *last >= 1u64 << room {
        return None;
    }
    let mut value: u64 = *last;
    for (i, n) in init.iter().enumerate() {
        value += n << (8 * (3 - i as u32));
    }
    Some(Ipv4Addr::from(u32::try_from(value).ok()?))
}

/// One part of a numeric IPv4 host: decimal, `0x` hex (possibly empty, = 0) or octal.
fn parse_ipv4_number(p: &str) -> Option<u64> {
    if p.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
        (h, 16)
    } else if p.len() > 1 && p.starts_with('0') {
        (&p[1..], 8)
    } else {
        (p, 10)
    };
    if digits.is_empty() {
        return Some(0);
    }
    if !digits.bytes().all(|b| (b as char).is_digit(radix)) {
        return None;
    }
    // Leading zeros cannot overflow; anything longer than 32 significant bits is invalid.
    let trimmed = digits.trim_start_matches('0');
    if trimmed.len() > 11 {
        return None;
    }
    if trimmed.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(trimmed, radix).ok()
}
