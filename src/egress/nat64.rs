//! The NAT64 prefixes of the Link's own network, found as RFC 7050 says: a DNS64 answers
//! the AAAA question for `ipv4only.arpa` (whose only addresses are two well-known IPv4
//! ones) with those addresses inside its NAT64 prefix. A network may use a prefix of its
//! own instead of the well-known `64:ff9b::/96`; an address in it reaches, through the
//! gateway, the IPv4 address it carries, which may be a private or link-local one. A
//! `public` job's addresses in each prefix found are judged by that IPv4 address, as the
//! policy's own embedded forms are.

use super::policy::EmbeddedIpv4;
use crate::job::Net;
use hickory_proto::rr::RData;
use hickory_resolver::TokioResolver;
use ipnet::Ipv6Net;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// The name a DNS64 answers with its prefix (RFC 7050), fully qualified.
pub const DISCOVERY_NAME: &str = "ipv4only.arpa.";

/// The addresses of `ipv4only.arpa` (RFC 7050).
const WELL_KNOWN: [Ipv4Addr; 2] = [Ipv4Addr::new(192, 0, 0, 170), Ipv4Addr::new(192, 0, 0, 171)];

/// RFC 6052's prefix lengths, each with the bit where its IPv4 address starts (a /64's
/// after the u octet; the shorter ones' are split around it, see
/// [`EmbeddedIpv4::extract`]).
const FORMS: [(u8, u8); 6] = [(32, 32), (40, 40), (48, 48), (56, 56), (64, 72), (96, 96)];

/// How long a `public` job's start waits for the answer.
pub const DISCOVERY_TIME: Duration = Duration::from_millis(1500);

/// The NAT64 prefixes that `answers` (the AAAA of [`DISCOVERY_NAME`]) show: every form in
/// which an answer carries a well-known address. RFC 7050 leaves the choice among several
/// forms to the host; for addresses to judge by the IPv4 address they carry, each one is
/// kept.
pub fn prefixes_of(answers: &[Ipv6Addr]) -> Vec<EmbeddedIpv4> {
    let mut out: Vec<EmbeddedIpv4> = Vec::new();
    for &answer in answers {
        for (len, ipv4_offset) in FORMS {
            let Ok(prefix) = Ipv6Net::new(answer, len).map(|n| n.trunc()) else {
                continue;
            };
            let form = EmbeddedIpv4 {
                prefix,
                ipv4_offset,
                reason: format!(
                    "NAT64 prefix of this network ({DISCOVERY_NAME} answered inside it, RFC 7050)"
                ),
            };
            let carries_well_known = form
                .extract(answer)
                .is_some_and(|v4| WELL_KNOWN.contains(&v4));
            let known = out
                .iter()
                .any(|e| e.prefix == form.prefix && e.ipv4_offset == form.ipv4_offset);
            if carries_well_known && !known {
                out.push(form);
            }
        }
    }
    out
}

/// What a `public` job's start learned of the network's NAT64 prefixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nat64 {
    /// The resolver answered: these prefixes (none when the network has no DNS64, or for a
    /// job that did not ask).
    Known(Vec<EmbeddedIpv4>),
    /// The resolver failed or did not answer within [`DISCOVERY_TIME`]. Any IPv6 address
    /// might then be in a prefix of the network's own and reach a private IPv4 address
    /// through the gateway, so the job reaches IPv4 only (`egress::decide`).
    Unknown,
}

impl Nat64 {
    /// The prefixes to judge IPv6 addresses by (none when [`Nat64::Unknown`]).
    pub fn prefixes(&self) -> &[EmbeddedIpv4] {
        match self {
            Nat64::Known(p) => p,
            Nat64::Unknown => &[],
        }
    }
}

/// What the lookup of [`DISCOVERY_NAME`] came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Its AAAA answers.
    Answered(Vec<Ipv6Addr>),
    /// A definite "no such record" (NXDOMAIN, or NOERROR without AAAA): no DNS64.
    NoRecord,
    /// Anything else (SERVFAIL, REFUSED, no answer within [`DISCOVERY_TIME`]), and why.
    Failed(String),
}

/// Whether a job on `net` asks for the prefixes: only a `public` job may reach addresses
/// outside the allow list's names, which are what the prefixes judge.
pub fn asks(net: Net) -> bool {
    net == Net::Public
}

impl Nat64 {
    /// What a job learned from `lookup`: an answer or a definite "no such record" is
    /// known, anything else leaves the prefixes unknown (and the job on IPv4). So does an
    /// answer with an address that carries neither well-known address in any of RFC
    /// 6052's forms: the network synthesises addresses in a layout the runner cannot
    /// read, and an IPv6 address of the job's might reach a private IPv4 one through it.
    pub fn learned(lookup: &Lookup) -> Nat64 {
        match lookup {
            Lookup::Answered(answers) if answers.iter().any(|a| prefixes_of(&[*a]).is_empty()) => {
                Nat64::Unknown
            }
            Lookup::Answered(answers) => Nat64::Known(prefixes_of(answers)),
            Lookup::NoRecord => Nat64::Known(Vec::new()),
            Lookup::Failed(_) => Nat64::Unknown,
        }
    }
}

/// Asks `resolver` (the runner's own, which the job's lookups go to) for the AAAA of
/// [`DISCOVERY_NAME`], within [`DISCOVERY_TIME`].
pub async fn discover(resolver: &TokioResolver) -> Lookup {
    match tokio::time::timeout(DISCOVERY_TIME, resolver.ipv6_lookup(DISCOVERY_NAME)).await {
        Ok(Ok(lookup)) => Lookup::Answered(
            lookup
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::AAAA(a) => Some(a.0),
                    _ => None,
                })
                .collect(),
        ),
        Ok(Err(e)) if e.is_nx_domain() || e.is_no_records_found() => Lookup::NoRecord,
        Ok(Err(e)) => Lookup::Failed(e.to_string()),
        Err(_) => Lookup::Failed(format!("no answer within {DISCOVERY_TIME:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn each_rfc_6052_form_is_found_and_carries_what_it_embeds() {
        // RFC 6052 section 2.4's examples of 192.0.2.33, with the well-known addresses
        // in their place.
        let cases = [
            (
                "2001:db8:c000:aa::",
                "2001:db8::/32",
                "2001:db8:a4d:2::",
                [10, 77, 0, 2],
            ),
            (
                "2001:db8:1c0:0:aa::",
                "2001:db8:100::/40",
                "2001:db8:10a:4d00:2::",
                [10, 77, 0, 2],
            ),
            (
                "2001:db8:122:c000:0:aa00::",
                "2001:db8:122::/48",
                "2001:db8:122:a9fe:a9:fe00::",
                [169, 254, 169, 254],
            ),
            (
                "2001:db8:122:3c0:0:aa::",
                "2001:db8:122:300::/56",
                "2001:db8:122:37f:0:1::",
                [127, 0, 0, 1],
            ),
            (
                "2001:db8:122:344:c0:0:aa00:0",
                "2001:db8:122:344::/64",
                "2001:db8:122:344:ac:1001::",
                [172, 16, 1, 0],
            ),
            (
                "2001:db8:122:344::c000:ab",
                "2001:db8:122:344::/96",
                "2001:db8:122:344::c0a8:101",
                [192, 168, 1, 1],
            ),
        ];
        for (answer, prefix, other, carried) in cases {
            let found = prefixes_of(&[v6(answer)]);
            assert_eq!(found.len(), 1, "{answer}: {found:?}");
            assert_eq!(found[0].prefix.to_string(), prefix, "{answer}");
            assert_eq!(
                found[0].extract(v6(other)),
                Some(Ipv4Addr::from(carried)),
                "{other} in {prefix}"
            );
        }
    }

    #[test]
    fn an_answer_without_a_well_known_address_shows_no_prefix() {
        assert!(prefixes_of(&[]).is_empty());
        assert!(prefixes_of(&[v6("2001:db8::1"), v6("2001:db8:122:344::c000:ac")]).is_empty());
        // Both well-known addresses in one prefix: one form.
        let both = prefixes_of(&[v6("2a0d:64::c000:aa"), v6("2a0d:64::c000:ab")]);
        assert_eq!(both.len(), 1, "{both:?}");
    }

    #[test]
    fn only_a_public_job_asks_and_only_a_failed_lookup_leaves_the_prefixes_unknown() {
        assert!(asks(Net::Public));
        assert!(!asks(Net::Deny));
        assert!(!asks(Net::OpenvibeOnly));
        let answered = Nat64::learned(&Lookup::Answered(vec![v6("64:ff9b::c000:aa")]));
        assert_eq!(
            answered
                .prefixes()
                .iter()
                .map(|e| e.prefix.to_string())
                .collect::<Vec<_>>(),
            ["64:ff9b::/96"]
        );
        assert_eq!(Nat64::learned(&Lookup::NoRecord), Nat64::Known(Vec::new()));
        assert_eq!(
            Nat64::learned(&Lookup::Answered(Vec::new())),
            Nat64::Known(Vec::new()),
            "NOERROR with no address in it is no DNS64"
        );
        assert_eq!(
            Nat64::learned(&Lookup::Failed("SERVFAIL".into())),
            Nat64::Unknown
        );
        // An address of a layout the runner cannot read (no well-known address in any
        // RFC 6052 form, alone or beside one it can): before, no prefix and IPv6 open.
        for answers in [
            vec![v6("2001:db8::1")],
            vec![v6("2001:db8:122:344::c000:ac")],
            vec![v6("64:ff9b::c000:aa"), v6("2001:db8::1")],
        ] {
            assert_eq!(
                Nat64::learned(&Lookup::Answered(answers.clone())),
                Nat64::Unknown,
                "{answers:?}"
            );
        }
    }
}
