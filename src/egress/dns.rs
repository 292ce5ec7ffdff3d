//! The job's DNS responder, as a pure function from a query packet to the answer packet, and
//! the [`NameTable`] that maps the synthetic addresses it hands out back to names.
//!
//! Decisions:
//! - **Only names the job may reach are ever resolved upstream, and no query is forwarded.**
//!   A name the job's policy does not allow is NXDOMAIN at once and never leaves the runner
//!   (no DNS tunnel under `openvibe-only`). A name it allows is resolved by the runner itself
//!   (the proxy's resolver: A and AAAA, once per job, see [`Resolution`]) before the answer,
//!   so a tool sees a DNS failure as one: NXDOMAIN when the upstream says the name does not
//!   exist, SERVFAIL when it fails or does not answer in time, no data when the name has no
//!   address, and a synthetic address only when it has one. The tool never learns a real
//!   address; the proxy connects to the addresses found then, checked when it connects.
//! - **Synthetic pool 198.18.0.0/15** (RFC 2544 benchmarking): never a real destination on the
//!   internet and denied as a real destination by the address policy (the floor), so a
//!   synthetic address can never be confused with one the proxy would connect to; the same
//!   choice as the "fake-IP" DNS modes of common proxies. Addresses are handed out in order
//!   from 198.18.0.1; the same name (case-insensitively) keeps its address for the whole job;
//!   at most `dns.max_names` names (256 by default) per job, then REFUSED, so a tool cannot
//!   spray names to exhaust anything.
//! - **A only.** AAAA and every other type for an allowed name: NOERROR with no answer
//!   (NODATA), so clients use the A answer and have no IPv6 address to try for a name: the
//!   synthetic pool is IPv4. (The job's namespace routes IPv6 to the proxy as well, `local
//!   ::/0` in `sandbox::netns`, so an IPv6 literal is served and judged like an IPv4 one.)
//!   Non-IN class: REFUSED. Opcode other than QUERY: NOTIMP.
//! - **Strict shape**: exactly one question, no answer or authority records, at most one
//!   additional record (EDNS OPT) — checked on the header (hickory's `Header`) before the
//!   message is decoded, so a packet that claims 65535 records costs nothing. A query that
//!   does not decode gets FORMERR (when its 12-byte header is there and says "query");
//!   responses and shorter packets are dropped, never answered (no loops). No input panics
//!   (tests feed random, truncated and compression-loop packets).
//! - **EDNS**: a query with OPT gets OPT back (payload 1232, the DNS-flag-day value); EDNS
//!   version above 0 gets BADVERS. Answers are at most ~300 bytes (one question of at most
//!   255 bytes, one A record with a compressed name), so they never need truncation.
//! - **Case**: the question is echoed as asked (DNS 0x20 randomisation keeps working); names
//!   are compared and stored lowercase.
//! - Answers are authoritative (AA) with RA set; the TTL is `dns.ttl_seconds`.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Mutex, MutexGuard};

use hickory_proto::op::{Edns, Header, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};

use crate::egress::policy::{name_allowed, normalize_name, EgressPolicy};
use crate::job::Net;

/// The first address of the synthetic pool 198.18.0.0/15.
pub const POOL_BASE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 0);
/// The pool's size (a /15).
pub const POOL_SIZE: u32 = 1 << 17;
/// The EDNS payload size the responder advertises.
pub const EDNS_PAYLOAD: u16 = 1232;
/// Longest printable name kept in a [`DnsEvent`].
const EVENT_NAME_MAX: usize = 300;

/// The synthetic addresses of one job and the names they stand for.
///
/// Shared by the DNS responder and the proxy (`&self` methods, a `Mutex` inside).
#[derive(Debug)]
pub struct NameTable {
    capacity: usize,
    inner: Mutex<TableInner>,
}

#[derive(Debug, Default)]
struct TableInner {
    /// Index i stands for POOL_BASE + 1 + i.
    names: Vec<String>,
    index: HashMap<String, usize>,
}

/// The table already holds its maximum number of names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the job has looked up as many names as it may")]
pub struct TableFull;

impl NameTable {
    /// A table for at most `capacity` names (clamped to the pool: 131070).
    pub fn new(capacity: usize) -> NameTable {
        NameTable {
            capacity: capacity.min(POOL_SIZE as usize - 2),
            inner: Mutex::new(TableInner::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, TableInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The synthetic address of `name` (canonical: lowercase, no trailing dot), given out now
    /// if it has none yet.
    pub fn address_for(&self, name: &str) -> Result<Ipv4Addr, TableFull> {
        let mut table = self.lock();
        if let Some(&i) = table.index.get(name) {
            return Ok(Self::address_at(i));
        }
        if table.names.len() >= self.capacity {
            return Err(TableFull);
        }
        let i = table.names.len();
        table.names.push(name.to_string());
        table.index.insert(name.to_string(), i);
        Ok(Self::address_at(i))
    }

    /// The name a synthetic address stands for, if it was given out in this job.
    pub fn name_for(&self, addr: IpAddr) -> Option<String> {
        let index = Self::index_of(addr)?;
        self.lock().names.get(index).cloned()
    }

    /// Whether `addr` is in the synthetic pool (given out or not). IPv4-mapped IPv6 counts.
    pub fn is_synthetic(addr: IpAddr) -> bool {
        match addr.to_canonical() {
            IpAddr::V4(v4) => u32::from(v4).wrapping_sub(u32::from(POOL_BASE)) < POOL_SIZE,
            IpAddr::V6(_) => false,
        }
    }

    /// Names given out so far.
    pub fn len(&self) -> usize {
        self.lock().names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn address_at(index: usize) -> Ipv4Addr {
        // index < capacity <= POOL_SIZE - 2, so this stays inside the pool.
        Ipv4Addr::from(u32::from(POOL_BASE) + 1 + index as u32)
    }

    fn index_of(addr: IpAddr) -> Option<usize> {
        let IpAddr::V4(v4) = addr.to_canonical() else {
            return None;
        };
        let offset = u32::from(v4).checked_sub(u32::from(POOL_BASE) + 1)?;
        usize::try_from(offset).ok()
    }
}

/// What the runner's own resolver found for a name the job may reach (asked once per job;
/// the responder answers from it, the proxy connects to its addresses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The name's A and AAAA addresses (at least one).
    Addresses(Vec<IpAddr>),
    /// The name exists but has no A or AAAA record.
    NoRecords,
    /// The upstream says the name does not exist.
    NxDomain,
    /// The upstream failed, refused, or did not answer in time.
    Failed,
    /// The job has had as many names resolved as it may (`dns.max_names`).
    Limit,
}

/// What the responder did, for the job's record and log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsEvent {
    /// An allowed name's A query: its synthetic address.
    Answered { name: String, addr: Ipv4Addr },
    /// An allowed name with no A answer: another type (AAAA, TXT, ...), or a name without
    /// addresses. NOERROR, no answer.
    NoData { name: String, qtype: u16 },
    /// An allowed name the upstream says does not exist: NXDOMAIN.
    NxDomain { name: String },
    /// An allowed name the upstream failed to resolve: SERVFAIL.
    ServFail { name: String },
    /// An allowed name not resolved yet: no answer now; resolve it, then answer the same query
    /// again.
    Lookup { name: String },
    /// A name the policy does not allow (or that is no name: an IP literal, non-ASCII, ...):
    /// NXDOMAIN. Record it as a refused attempt (port 53).
    Refused { name: String },
    /// The job's table is full: REFUSED. Record it as a refused attempt.
    TableFull { name: String },
    /// Not a class-IN query of opcode QUERY: NOTIMP or REFUSED.
    Unsupported,
    /// A query that does not decode or has the wrong shape: FORMERR.
    Malformed,
    /// A response, or less than a header: no answer at all.
    Dropped,
}

/// The answer packet (none when the query is dropped) and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsReply {
    pub packet: Option<Vec<u8>>,
    pub event: DnsEvent,
}

/// Answer one query packet (UDP payload, or a TCP message without its length prefix) for a
/// job with this policy and `net`. `known` gives what the runner's resolver found for an
/// allowed name, or `None` when it has not been resolved yet ([`DnsEvent::Lookup`], no
/// packet: resolve it and call again). It is never called for a name the job may not reach.
pub fn respond(
    policy: &EgressPolicy,
    net: Net,
    table: &NameTable,
    query: &[u8],
    known: &dyn Fn(&str) -> Option<Resolution>,
) -> DnsReply {
    let dropped = DnsReply {
        packet: None,
        event: DnsEvent::Dropped,
    };
    let Ok(header) = Header::read(&mut BinDecoder::new(query)) else {
        return dropped;
    };
    if header.metadata.message_type != MessageType::Query {
        return dropped;
    }
    let id = header.metadata.id;
    let error = |op_code: OpCode, code: ResponseCode, event: DnsEvent| {
        let mut m = Message::error_msg(id, op_code, code);
        m.metadata.recursion_desired = header.metadata.recursion_desired;
        m.metadata.recursion_available = true;
        DnsReply {
            packet: m.to_vec().ok(),
            event,
        }
    };
    if header.metadata.op_code != OpCode::Query {
        return error(OpCode::Query, ResponseCode::NotImp, DnsEvent::Unsupported);
    }
    let c = header.counts;
    if c.queries != 1 || c.answers != 0 || c.authorities != 0 || c.additionals > 1 {
        return error(OpCode::Query, ResponseCode::FormErr, DnsEvent::Malformed);
    }
    // Bytes after the last record are refused: a query padded to 64 KiB would otherwise be
    // kept whole while its name is resolved.
    let mut decoder = BinDecoder::new(query);
    let Ok(request) = Message::read(&mut decoder) else {
        return error(OpCode::Query, ResponseCode::FormErr, DnsEvent::Malformed);
    };
    if !decoder.is_empty() {
        return error(OpCode::Query, ResponseCode::FormErr, DnsEvent::Malformed);
    }
    let Some(question) = request.queries.first().cloned() else {
        return error(OpCode::Query, ResponseCode::FormErr, DnsEvent::Malformed);
    };

    let mut response = Message::response(id, OpCode::Query);
    response.metadata.authoritative = true;
    response.metadata.recursion_desired = request.metadata.recursion_desired;
    response.metadata.recursion_available = true;
    response.add_query(question.clone());
    if let Some(edns) = &request.edns {
        let mut out = Edns::new();
        out.set_max_payload(EDNS_PAYLOAD);
        out.set_version(0);
        response.set_edns(out);
        if edns.version() > 0 {
            response.metadata.response_code = ResponseCode::BADVERS;
            return finish(response, DnsEvent::Malformed);
        }
    }

    if question.query_class() != DNSClass::IN {
        response.metadata.response_code = ResponseCode::Refused;
        return finish(response, DnsEvent::Unsupported);
    }

    let asked = printable(question.name());
    let canonical = name_string(question.name()).and_then(|n| normalize_name(&n));
    let name = match canonical {
        Some(n) if name_allowed(policy, net, &n) => n,
        _ => {
            response.metadata.response_code = ResponseCode::NXDomain;
            return finish(response, DnsEvent::Refused { name: asked });
        }
    };

    let qtype = u16::from(question.query_type());
    match known(&name) {
        None => {
            return DnsReply {
                packet: None,
                event: DnsEvent::Lookup { name },
            }
        }
        Some(Resolution::Addresses(_)) => {}
        Some(Resolution::NoRecords) => {
            return finish(response, DnsEvent::NoData { name, qtype });
        }
        Some(Resolution::NxDomain) => {
            response.metadata.response_code = ResponseCode::NXDomain;
            return finish(response, DnsEvent::NxDomain { name });
        }
        Some(Resolution::Failed) => {
            response.metadata.response_code = ResponseCode::ServFail;
            return finish(response, DnsEvent::ServFail { name });
        }
        Some(Resolution::Limit) => {
            response.metadata.response_code = ResponseCode::Refused;
            return finish(response, DnsEvent::TableFull { name });
        }
    }
    if question.query_type() != RecordType::A {
        return finish(response, DnsEvent::NoData { name, qtype });
    }
    match table.address_for(&name) {
        Ok(addr) => {
            let record = Record::from_rdata(
                question.name().clone(),
                policy.dns.ttl_seconds,
                RData::A(A(addr)),
            );
            response.add_answer(record);
            finish(response, DnsEvent::Answered { name, addr })
        }
        Err(TableFull) => {
            response.metadata.response_code = ResponseCode::Refused;
            finish(response, DnsEvent::TableFull { name })
        }
    }
}

fn finish(response: Message, event: DnsEvent) -> DnsReply {
    DnsReply {
        packet: response.to_vec().ok(),
        event,
    }
}

/// The name's labels joined by dots, when every byte is printable ASCII other than '.', so
/// that a label holding a dot ("a.b" as one label) can never pass for two labels.
fn name_string(name: &Name) -> Option<String> {
    let mut out = String::new();
    for label in name.iter() {
        if label.is_empty() || !label.iter().all(|b| b.is_ascii_graphic() && *b != b'.') {
            return None;
        }
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(std::str::from_utf8(label).ok()?);
    }
    if out.is_empty() {
        return None;
    }
    Some(out)
}

/// The name as asked, escaped and bounded, for the record and the log.
fn printable(name: &Name) -> String {
    let mut out = String::new();
    for (i, label) in name.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        for &b in label {
            if b.is_ascii_graphic() && b != b'.' && b != b'\\' {
                out.push(char::from(b).to_ascii_lowercase());
            } else {
                out.push_str(&format!("\\{b:03}"));
            }
        }
        if out.len() > EVENT_NAME_MAX {
            out.truncate(EVENT_NAME_MAX);
            out.push('…');
            return out;
        }
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// A DNS-over-TCP message taken from the front of a buffer (RFC 1035 4.2.2: a two-byte
/// big-endian length, then the message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpFrame<'a> {
    /// Not all of the next message is here yet.
    NeedMore,
    /// The next message, and how many bytes of the buffer it used (length prefix included).
    Message { message: &'a [u8], consumed: usize },
    /// A zero length: no DNS message is that short; close the connection.
    Invalid,
}

/// The next message framed in `buf`.
pub fn tcp_frame(buf: &[u8]) -> TcpFrame<'_> {
    let [hi, lo, rest @ ..] = buf else {
        return TcpFrame::NeedMore;
    };
    let len = usize::from(u16::from_be_bytes([*hi, *lo]));
    if len == 0 {
        return TcpFrame::Invalid;
    }
    match rest.get(..len) {
        Some(message) => TcpFrame::Message {
            message,
            consumed: 2 + len,
        },
        None => TcpFrame::NeedMore,
    }
}

/// `packet` with its two-byte length prefix; `None` when it is longer than 65535 bytes.
pub fn tcp_encode(packet: &[u8]) -> Option<Vec<u8>> {
    let len = u16::try_from(packet.len()).ok()?;
    let mut out = Vec::with_capacity(2 + packet.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(packet);
    Some(out)
}

#[cfg(test)]
mod tests;
