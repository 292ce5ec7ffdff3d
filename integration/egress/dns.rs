//! The test DNS upstream: what the runner under test is configured to ask (`runner.dns_servers`)
//! when its proxy resolves a name. It answers from a fixed table (the "public internet" of the
//! test network) and logs every question, so a test can say which names reached it and how
//! often: a name a job was refused must never appear here (no DNS exfiltration).
//!
//! It runs on threads of the test process that entered the upstream namespace (UDP and TCP 53).

use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME};
use hickory_proto::rr::{RData, Record, RecordType};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The name a DNS64 answers with its NAT64 prefix (RFC 7050).
pub const NAT64_DISCOVERY: &str = "ipv4only.arpa";
/// This network's own NAT64 prefix (not the well-known 64:ff9b::/96), as its DNS64 shows it.
pub const NAT64_PREFIX: [u16; 6] = [0x2a0d, 0x64, 0, 0, 0, 0];

/// An address in the NAT64 prefix that reaches `v4` through the gateway.
pub fn nat64(v4: [u8; 4]) -> IpAddr {
    let [a, b, c, d, e, f] = NAT64_PREFIX;
    let hi = u16::from_be_bytes([v4[0], v4[1]]);
    let lo = u16::from_be_bytes([v4[2], v4[3]]);
    IpAddr::V6(Ipv6Addr::new(a, b, c, d, e, f, hi, lo))
}

/// The public test host every "public" name resolves to.
pub const UPSTREAM: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 10);

/// One question the upstream was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Lowercase, without the trailing dot.
    pub name: String,
    pub qtype: RecordType,
}

/// Every question asked, in order, and the packets that were no question at all.
#[derive(Debug, Default)]
pub struct DnsLog {
    questions: Mutex<Vec<Question>>,
    garbage: Mutex<u64>,
    /// The runner's own questions for its network's NAT64 prefix (RFC 7050), kept apart:
    /// the other counts are of what jobs asked.
    discoveries: Mutex<u64>,
    /// Whether the prefix question gets SERVFAIL (a DNS64 that is down for a moment).
    discovery_fails: AtomicBool,
}

impl DnsLog {
    pub fn questions(&self) -> Vec<Question> {
        self.questions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Questions (of any type) for exactly this name (case-insensitive, trailing dot ignored).
    pub fn count(&self, name: &str) -> usize {
        let name = canonical(name);
        self.count_where(|q| q.name == name)
    }

    /// Questions of this type for this name.
    pub fn count_type(&self, name: &str, qtype: RecordType) -> usize {
        let name = canonical(name);
        self.count_where(|q| q.name == name && q.qtype == qtype)
    }

    pub fn count_where(&self, f: impl Fn(&Question) -> bool) -> usize {
        self.questions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|q| f(q))
            .count()
    }

    /// Every question asked so far.
    pub fn total(&self) -> usize {
        self.count_where(|_| true)
    }

    /// How often the runner asked for its network's NAT64 prefix (`ipv4only.arpa` AAAA).
    pub fn discoveries(&self) -> u64 {
        *self.discoveries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// From now on, the runner's question for its network's NAT64 prefix gets SERVFAIL.
    pub fn fail_discovery(&self) {
        self.discovery_fails.store(true, Ordering::SeqCst);
    }

    /// Packets that did not decode as a DNS query.
    pub fn garbage(&self) -> u64 {
        *self.garbage.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn note(&self, q: Question) -> usize {
        let mut all = self.questions.lock().unwrap_or_else(|p| p.into_inner());
        let before = all
            .iter()
            .filter(|x| x.name == q.name && x.qtype == q.qtype)
            .count();
        all.push(q);
        before
    }
}

pub fn canonical(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The table. `earlier` is how many questions of this type for this name came before this
/// one (the rebinding name answers differently after the first). `Err` is the response code.
pub fn table(
    name: &str,
    qtype: RecordType,
    earlier: usize,
) -> Result<(Vec<IpAddr>, u32), ResponseCode> {
    let v4 = |a: [u8; 4]| IpAddr::V4(Ipv4Addr::from(a));
    let (a, aaaa, ttl): (Vec<IpAddr>, Vec<IpAddr>, u32) = match name {
        "api.openvibe.services"
        | "www.openvibe.services"
        | "pub.upstream.net"
        | "evil.upstream.net" => (vec![IpAddr::V4(UPSTREAM)], vec![], 30),
        "lan.upstream.net" => (vec![v4([10, 77, 0, 2])], vec![], 30),
        "corp.upstream.net" => (vec![v4([93, 184, 215, 2])], vec![], 30),
        "meta.upstream.net" => (vec![v4([169, 254, 169, 254])], vec![], 30),
        "loop.upstream.net" => (vec![v4([127, 0, 0, 1])], vec![], 30),
        "mixed.upstream.net" => (vec![IpAddr::V4(UPSTREAM), v4([10, 77, 0, 2])], vec![], 30),
        "mapped.upstream.net" => (
            vec![],
            vec![IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped())],
            30,
        ),
        // A DNS64 with a prefix of its own: ipv4only.arpa (192.0.0.170 and .171) inside
        // it, and a name that exists only as IPv6 and reaches the LAN through it.
        NAT64_DISCOVERY => (
            vec![v4([192, 0, 0, 170]), v4([192, 0, 0, 171])],
            vec![nat64([192, 0, 0, 170]), nat64([192, 0, 0, 171])],
            30,
        ),
        "nsp.upstream.net" => (vec![], vec![nat64([10, 77, 0, 2])], 30),
        "nsp-meta.upstream.net" => (vec![], vec![nat64([169, 254, 169, 254])], 30),
        // The public host over IPv4, and over IPv6 an address in the NAT64 prefix.
        "dual.upstream.net" => (vec![IpAddr::V4(UPSTREAM)], vec![nat64([10, 77, 0, 2])], 30),
        "rebind.upstream.net" if earlier == 0 || qtype != RecordType::A => {
            (vec![IpAddr::V4(UPSTREAM)], vec![], 0)
        }
        "rebind.upstream.net" => (vec![v4([127, 0, 0, 1])], vec![], 0),
        // A name that exists without an address, and one whose server is broken.
        "noaddr.upstream.net" => (vec![], vec![], 30),
        // What the aliases below lead to: a public CDN's edge, and a host of the company's
        // network that happens to have an address the policy lets through.
        "edge.upstream.net" | "intranet.corp" => (vec![IpAddr::V4(UPSTREAM)], vec![], 30),
        "fail.upstream.net" => return Err(ResponseCode::ServFail),
        _ => return Err(ResponseCode::NXDomain),
    };
    Ok(match qtype {
        RecordType::A => (a, ttl),
        RecordType::AAAA => (aaaa, ttl),
        _ => (vec![], ttl),
    })
}

/// The name the table aliases `name` to (a CNAME), answered as a recursive resolver does:
/// the CNAME, then the target's records (or the target's own error).
pub fn alias(name: &str) -> Option<&'static str> {
    match name {
        "cdn.openvibe.services" | "alias-pub.upstream.net" => Some("edge.upstream.net"),
        "alias-corp.upstream.net" | "alias.openvibe.services" => Some("intranet.corp"),
        _ => None,
    }
}

/// The answer to one packet (UDP payload or TCP message without its length), or `None` for a
/// packet that is no query.
pub fn respond(log: &DnsLog, packet: &[u8]) -> Option<Vec<u8>> {
    let Ok(query) = Message::from_vec(packet) else {
        *log.garbage.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        return None;
    };
    if query.metadata.message_type != MessageType::Query {
        *log.garbage.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        return None;
    }
    let mut response = Message::response(query.metadata.id, OpCode::Query);
    response.metadata.recursion_desired = query.metadata.recursion_desired;
    response.metadata.recursion_available = true;
    if query.edns.is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(1232);
        response.set_edns(edns);
    }
    let Some(question) = query.queries.first().cloned() else {
        response.metadata.response_code = ResponseCode::FormErr;
        return response.to_vec().ok();
    };
    response.add_query(question.clone());
    let name = canonical(&question.name().to_ascii());
    let qtype = question.query_type();
    let earlier = if name == NAT64_DISCOVERY && qtype == RecordType::AAAA {
        *log.discoveries.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        if log.discovery_fails.load(Ordering::SeqCst) {
            response.metadata.response_code = ResponseCode::ServFail;
            return response.to_vec().ok();
        }
        0
    } else {
        log.note(Question {
            name: name.clone(),
            qtype,
        })
    };
    let (owner, name) = match alias(&name) {
        Some(target) => {
            let to = hickory_proto::rr::Name::from_ascii(format!("{target}.")).expect("a name");
            let cname = RData::CNAME(CNAME(to.clone()));
            response.add_answer(Record::from_rdata(question.name().clone(), 30, cname));
            (to, target.to_string())
        }
        None => (question.name().clone(), name),
    };
    match table(&name, qtype, earlier) {
        Err(code) => response.metadata.response_code = code,
        Ok((addresses, ttl)) => {
            for addr in addresses {
                let rdata = match addr {
                    IpAddr::V4(v4) => RData::A(A(v4)),
                    IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
                };
                response.add_answer(Record::from_rdata(owner.clone(), ttl, rdata));
            }
        }
    }
    response.to_vec().ok()
}

/// A query for `name` of `qtype`, for the fixture's own checks.
pub fn query(id: u16, name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(hickory_proto::op::Query::query(
        hickory_proto::rr::Name::from_ascii(name).expect("a test name"),
        qtype,
    ));
    m.to_vec().expect("encode a query")
}

/// The response code and the addresses of an answer, for the fixture's own checks.
pub fn parse_answer(packet: &[u8]) -> (ResponseCode, Vec<IpAddr>) {
    let m = Message::from_vec(packet).expect("the test upstream answers in DNS");
    let addrs = m
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect();
    (m.metadata.response_code, addrs)
}

/// `::ffff:127.0.0.1`, as the table gives it for the mapped name.
pub fn mapped_loopback() -> Ipv6Addr {
    Ipv4Addr::LOCALHOST.to_ipv6_mapped()
}
