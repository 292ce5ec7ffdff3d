use super::*;
use hickory_proto::op::Query;

/// Every allowed name resolves upstream (the runner's lookup) to one public address.
fn resolved(_: &str) -> Option<Resolution> {
    Some(Resolution::Addresses(vec![IpAddr::from([192, 0, 2, 10])]))
}

fn policy() -> EgressPolicy {
    EgressPolicy::shipped()
}

fn table() -> NameTable {
    NameTable::new(policy().dns.max_names)
}

fn query_msg(name: &str, qtype: RecordType) -> Message {
    let mut m = Message::new(0xbeef, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m
}

fn query(name: &str, qtype: RecordType) -> Vec<u8> {
    query_msg(name, qtype).to_vec().unwrap()
}

fn answer(reply: &DnsReply) -> Message {
    Message::from_vec(reply.packet.as_ref().expect("an answer packet")).unwrap()
}

fn a_addrs(m: &Message) -> Vec<Ipv4Addr> {
    m.answers
        .iter()
        .map(|r| match r.data {
            RData::A(A(a)) => a,
            ref other => panic!("not an A record: {other:?}"),
        })
        .collect()
}

/// A query packet built by hand: header, then `qname` bytes as given, then type A class IN.
fn raw_query(counts: [u16; 4], qname: &[u8]) -> Vec<u8> {
    let mut p = vec![0x12, 0x34, 0x01, 0x00];
    for c in counts {
        p.extend_from_slice(&c.to_be_bytes());
    }
    p.extend_from_slice(qname);
    p.extend_from_slice(&[0, 1, 0, 1]);
    p
}

fn wire_name(labels: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in labels {
        out.push(l.len() as u8);
        out.extend_from_slice(l);
    }
    out.push(0);
    out
}

#[test]
fn an_allowed_name_gets_a_synthetic_address_that_maps_back() {
    let (p, t) = (policy(), table());
    let reply = respond(
        &p,
        Net::OpenvibeOnly,
        &t,
        &query("openvibe.services.", RecordType::A),
        &resolved,
    );
    assert_eq!(
        reply.event,
        DnsEvent::Answered {
            name: "openvibe.services".into(),
            addr: Ipv4Addr::new(198, 18, 0, 1)
        }
    );
    let m = answer(&reply);
    assert_eq!(m.metadata.id, 0xbeef);
    assert_eq!(m.metadata.message_type, MessageType::Response);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.metadata.authoritative);
    assert!(m.metadata.recursion_desired);
    assert!(m.metadata.recursion_available);
    assert_eq!(
        m.queries,
        query_msg("openvibe.services.", RecordType::A).queries
    );
    assert_eq!(a_addrs(&m), vec![Ipv4Addr::new(198, 18, 0, 1)]);
    assert_eq!(m.answers[0].ttl, 300);
    assert_eq!(
        m.answers[0].name,
        Name::from_ascii("openvibe.services.").unwrap()
    );
    assert_eq!(
        t.name_for(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)))
            .as_deref(),
        Some("openvibe.services")
    );
    // The IPv4-mapped form of the same address maps back too.
    assert_eq!(
        t.name_for("::ffff:198.18.0.1".parse().unwrap()).as_deref(),
        Some("openvibe.services")
    );
}

#[test]
fn the_same_name_keeps_its_address_and_others_get_the_next() {
    let (p, t) = (policy(), table());
    let ask = |name: &str| {
        a_addrs(&answer(&respond(
            &p,
            Net::OpenvibeOnly,
            &t,
            &query(name, RecordType::A),
            &resolved,
        )))
    };
    let first = ask("api.openvibe.services");
    assert_eq!(first, vec![Ipv4Addr::new(198, 18, 0, 1)]);
    assert_eq!(ask("API.OpenVibe.Services."), first);
    assert_eq!(ask("api.openvibe.services"), first);
    assert_eq!(
        ask("cdn.openvibe.services"),
        vec![Ipv4Addr::new(198, 18, 0, 2)]
    );
    assert_eq!(ask("api.openvibe.services"), first);
    assert_eq!(t.len(), 2);
    assert_eq!(t.name_for(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 3))), None);
    assert_eq!(t.name_for(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 0))), None);
    assert_eq!(t.name_for(IpAddr::V4(Ipv4Addr::new(8, 8, 8, 8))), None);
}

#[test]
fn dns_0x20_case_is_echoed() {
    let (p, t) = (policy(), table());
    let m = answer(&respond(
        &p,
        Net::OpenvibeOnly,
        &t,
        &query("oPeNvIbE.SeRvIcEs.", RecordType::A),
        &resolved,
    ));
    assert_eq!(m.queries[0].name().to_ascii(), "oPeNvIbE.SeRvIcEs.");
    assert_eq!(m.answers[0].name.to_ascii(), "oPeNvIbE.SeRvIcEs.");
}

#[test]
fn aaaa_and_other_types_of_an_allowed_name_get_no_data() {
    let (p, t) = (policy(), table());
    for qtype in [
        RecordType::AAAA,
        RecordType::TXT,
        RecordType::MX,
        RecordType::CNAME,
        RecordType::NS,
        RecordType::SOA,
        RecordType::HTTPS,
        RecordType::SVCB,
        RecordType::ANY,
        RecordType::PTR,
        RecordType::SRV,
        RecordType::Unknown(4242),
    ] {
        let reply = respond(
            &p,
            Net::OpenvibeOnly,
            &t,
            &query("openvibe.services", qtype),
            &resolved,
        );
        assert_eq!(
            reply.event,
            DnsEvent::NoData {
                name: "openvibe.services".into(),
                qtype: u16::from(qtype)
            },
            "{qtype}"
        );
        let m = answer(&reply);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{qtype}");
        assert!(m.answers.is_empty() && m.authorities.is_empty(), "{qtype}");
    }
    // No type other than A takes a slot in the table.
    assert_eq!(t.len(), 0);
}

#[test]
fn every_other_name_is_nxdomain_and_takes_no_slot() {
    let (p, t) = (policy(), table());
    for name in [
        "evil.com",
        "evilopenvibe.services",
        "openvibe.services.evil.com",
        "openvibe.services.evil.com.",
        "services",
        "localhost",
        "127.0.0.1",
        "2130706433",
        "0x7f000001",
        "127.1",
        "1.0.0.127.in-addr.arpa",
        "metadata.google.internal",
        "exfil-c2VjcmV0.attacker.example.com",
        ".",
    ] {
        for qtype in [RecordType::A, RecordType::AAAA, RecordType::TXT] {
            let reply = respond(&p, Net::OpenvibeOnly, &t, &query(name, qtype), &resolved);
            assert!(
                matches!(reply.event, DnsEvent::Refused { .. }),
                "{name} {qtype}: {:?}",
                reply.event
            );
            let m = answer(&reply);
            assert_eq!(m.metadata.response_code, ResponseCode::NXDomain, "{name}");
            assert!(m.answers.is_empty(), "{name}");
            assert_eq!(m.queries.len(), 1, "{name}");
        }
    }
    assert_eq!(t.len(), 0);
    let reply = respond(
        &p,
        Net::OpenvibeOnly,
        &t,
        &query("Evil.COM", RecordType::A),
        &resolved,
    );
    assert_eq!(
        reply.event,
        DnsEvent::Refused {
            name: "evil.com".into()
        }
    );
}

#[test]
fn public_answers_any_public_name_and_deny_answers_none() {
    let p = policy();
    let t = table();
    for name in ["example.com", "openvibe.services", "127.0.0.1.nip.io"] {
        let reply = respond(&p, Net::Public, &t, &query(name, RecordType::A), &resolved);
        assert!(matches!(reply.event, DnsEvent::Answered { .. }), "{name}");
        // The tool only ever learns a synthetic address, never a real one.
        for a in a_addrs(&answer(&reply)) {
            assert!(NameTable::is_synthetic(IpAddr::V4(a)), "{name}: {a}");
        }
    }
    for name in [
        "localhost",
        "printer.local",
        "metadata.google.internal",
        "wpad",
        "127.0.0.1",
    ] {
        let reply = respond(&p, Net::Public, &t, &query(name, RecordType::A), &resolved);
        assert!(matches!(reply.event, DnsEvent::Refused { .. }), "{name}");
    }
    let t = table();
    for name in ["openvibe.services", "example.com"] {
        let reply = respond(&p, Net::Deny, &t, &query(name, RecordType::A), &resolved);
        assert_eq!(
            answer(&reply).metadata.response_code,
            ResponseCode::NXDomain
        );
    }
    assert!(t.is_empty());
}

#[test]
fn a_full_table_answers_refused_but_keeps_the_names_it_has() {
    let p = policy();
    let t = NameTable::new(2);
    for name in ["a.openvibe.services", "b.openvibe.services"] {
        let reply = respond(
            &p,
            Net::OpenvibeOnly,
            &t,
            &query(name, RecordType::A),
            &resolved,
        );
        assert!(matches!(reply.event, DnsEvent::Answered { .. }));
    }
    let reply = respond(
        &p,
        Net::OpenvibeOnly,
        &t,
        &query("c.openvibe.services", RecordType::A),
        &resolved,
    );
    assert_eq!(
        reply.event,
        DnsEvent::TableFull {
            name: "c.openvibe.services".into()
        }
    );
    let m = answer(&reply);
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    assert!(m.answers.is_empty());
    let reply = respond(
        &p,
        Net::OpenvibeOnly,
        &t,
        &query("a.openvibe.services", RecordType::A),
        &resolved,
    );
    assert_eq!(a_addrs(&answer(&reply)), vec![Ipv4Addr::new(198, 18, 0, 1)]);
    assert_eq!(t.len(), 2);
}

#[test]
fn the_default_table_holds_256_names() {
    let (p, t) = (policy(), table());
    for i in 0..256 {
        let reply = respond(
            &p,
            Net::Public,
            &t,
            &query(&format!("n{i}.example.com"), RecordType::A),
            &resolved,
        );
        let DnsEvent::Answered { addr, .. } = reply.event else {
            panic!("{i}: {:?}", reply.event)
        };
        assert_eq!(u32::from(addr), u32::from(POOL_BASE) + 1 + i);
    }
    let reply = respond(
        &p,
        Net::Public,
        &t,
        &query("n256.example.com", RecordType::A),
        &resolved,
    );
    assert!(matches!(reply.event, DnsEvent::TableFull { .. }));
    assert_eq!(
        t.name_for(IpAddr::V4(Ipv4Addr::new(198, 18, 1, 0)))
            .as_deref(),
        Some("n255.example.com")
    );
}

#[test]
fn the_table_is_clamped_to_the_pool_and_stays_inside_it() {
    let t = NameTable::new(usize::MAX);
    assert_eq!(t.capacity, POOL_SIZE as usize - 2);
    assert!(NameTable::is_synthetic(IpAddr::V4(Ipv4Addr::new(
        198, 18, 0, 0
    ))));
    assert!(NameTable::is_synthetic(IpAddr::V4(Ipv4Addr::new(
        198, 19, 255, 255
    ))));
    assert!(!NameTable::is_synthetic(IpAddr::V4(Ipv4Addr::new(
        198, 20, 0, 0
    ))));
    assert!(!NameTable::is_synthetic(IpAddr::V4(Ipv4Addr::new(
        198, 17, 255, 255
    ))));
    assert!(NameTable::is_synthetic(
        "::ffff:198.18.0.1".parse().unwrap()
    ));
    assert!(!NameTable::is_synthetic("64:ff9b::c612:1".parse().unwrap()));
    let last = NameTable::address_at(POOL_SIZE as usize - 3);
    assert_eq!(last, Ipv4Addr::new(198, 19, 255, 254));
}

#[test]
fn a_label_holding_a_dot_or_odd_bytes_is_no_name() {
    let (p, t) = (policy(), table());
    for labels in [
        vec![&b"evil.openvibe"[..], b"services"],
        vec![&b"openvibe.services"[..]],
        vec![&b"api\0"[..], b"openvibe", b"services"],
        vec![&b"api openvibe"[..], b"services"],
        vec![&b"\xc3\xb6penvibe"[..], b"services"],
        vec![&b"api%2e"[..], b"openvibe", b"services"],
    ] {
        let packet = raw_query([1, 0, 0, 0], &wire_name(&labels));
        let reply = respond(&p, Net::OpenvibeOnly, &t, &packet, &resolved);
        assert!(
            matches!(reply.event, DnsEvent::Refused { .. }),
            "{labels:?}: {:?}",
            reply.event
        );
        assert_eq!(
            answer(&reply).metadata.response_code,
            ResponseCode::NXDomain
        );
    }
    // The event shows odd bytes escaped.
    let packet = raw_query([1, 0, 0, 0], &wire_name(&[b"a.b\0", b"com"]));
    assert_eq!(
        respond(&p, Net::Public, &t, &packet, &resolved).event,
        DnsEvent::Refused {
            name: "a\\046b\\000.com".into()
        }
    );
    assert!(t.is_empty());
}

#[test]
fn edns_is_answered_with_edns_and_unknown_versions_get_badvers() {
    let (p, t) = (policy(), table());
    let mut m = query_msg("openvibe.services", RecordType::A);
    let mut edns = Edns::new();
    edns.set_max_payload(4096);
    m.set_edns(edns.clone());
    let reply = answer(&respond(
        &p,
        Net::OpenvibeOnly,
        &t,
        &m.to_vec().unwrap(),
        &resolved,
    ));
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert_eq!(reply.edns.as_ref().unwrap().max_payload(), EDNS_PAYLOAD);
    assert_eq!(a_addrs(&reply).len(), 1);

    edns.set_version(1);
    m.set_edns(edns);
    let reply = respond(&p, Net::OpenvibeOnly, &t, &m.to_vec().unwrap(), &resolved);
    assert_eq!(reply.event, DnsEvent::Malformed);
    let reply = answer(&reply);
    // 16 is both BADVERS and BADSIG (RFC 6891 / 2845); the decoder names it BADSIG.
    assert_eq!(u16::from(reply.metadata.response_code), 16);
    assert_eq!(reply.edns.as_ref().unwrap().version(), 0);
    assert!(reply.answers.is_empty());
}

#[test]
fn other_classes_and_opcodes_are_not_served() {
    let (p, t) = (policy(), table());
    let mut m = query_msg("openvibe.services", RecordType::A);
    m.queries[0].set_query_class(DNSClass::CH);
    let reply = respond(&p, Net::OpenvibeOnly, &t, &m.to_vec().unwrap(), &resolved);
    assert_eq!(reply.event, DnsEvent::Unsupported);
    assert_eq!(answer(&reply).metadata.response_code, ResponseCode::Refused);

    for op in [OpCode::Status, OpCode::Notify, OpCode::Update] {
        let mut m = query_msg("openvibe.services", RecordType::A);
        m.metadata.op_code = op;
        let reply = respond(&p, Net::OpenvibeOnly, &t, &m.to_vec().unwrap(), &resolved);
        assert_eq!(reply.event, DnsEvent::Unsupported, "{op:?}");
        let a = answer(&reply);
        assert_eq!(a.metadata.response_code, ResponseCode::NotImp);
        assert_eq!(a.metadata.id, 0xbeef);
    }
    assert!(t.is_empty());
}

#[test]
fn responses_and_short_packets_are_dropped() {
    let (p, t) = (policy(), table());
    let mut m = query_msg("openvibe.services", RecordType::A);
    m.metadata.message_type = MessageType::Response;
    let reply = respond(&p, Net::OpenvibeOnly, &t, &m.to_vec().unwrap(), &resolved);
    assert_eq!(
        reply,
        DnsReply {
            packet: None,
            event: DnsEvent::Dropped
        }
    );
    for len in 0..12 {
        let reply = respond(
            &p,
            Net::OpenvibeOnly,
            &t,
            &query("openvibe.services", RecordType::A)[..len],
            &resolved,
        );
        assert_eq!(reply.packet, None, "{len}");
    }
}

#[test]
fn the_wrong_shape_is_formerr() {
    let (p, t) = (policy(), table());
    let name = wire_name(&[b"openvibe", b"services"]);
    for counts in [
        [0, 0, 0, 0],
        [2, 0, 0, 0],
        [1, 1, 0, 0],
        [1, 0, 1, 0],
        [1, 0, 0, 2],
        [65535, 65535, 65535, 65535],
    ] {
        let reply = respond(
            &p,
            Net::OpenvibeOnly,
            &t,
            &raw_query(counts, &name),
            &resolved,
        );
        assert_eq!(reply.event, DnsEvent::Malformed, "{counts:?}");
        let m = answer(&reply);
        assert_eq!(
            m.metadata.response_code,
            ResponseCode::FormErr,
            "{counts:?}"
        );
        assert_eq!(m.metadata.id, 0x1234);
    }
    // Two questions, built properly.
    let mut m = query_msg("openvibe.services", RecordType::A);
    m.add_query(Query::query(
        Name::from_ascii("evil.com").unwrap(),
        RecordType::A,
    ));
    let reply = respond(&p, Net::OpenvibeOnly, &t, &m.to_vec().unwrap(), &resolved);
    assert_eq!(reply.event, DnsEvent::Malformed);
    assert!(t.is_empty());
}

#[test]
fn compression_loops_and_bad_pointers_are_formerr() {
    let (p, t) = (policy(), table());
    let qnames: Vec<Vec<u8>> = vec![
        vec![0xc0, 0x0c],                      // points at itself
        vec![3, b'a', b'b', b'c', 0xc0, 0x0c], // points back at its own start
        vec![0xc0, 0x0e, 0xc0, 0x0c],          // two pointers pointing at each other
        vec![0xc0, 0xff],                      // past the end
        vec![0xc3, 0xff],                      // far past the end
        vec![0x40, 0x00],                      // extended label type
        vec![0x80, 0x00],                      // reserved label type
        vec![63],                              // a label longer than the packet
        vec![],                                // nothing at all
    ];
    for qname in qnames {
        let packet = raw_query([1, 0, 0, 0], &qname);
        let reply = respond(&p, Net::OpenvibeOnly, &t, &packet, &resolved);
        assert_eq!(reply.event, DnsEvent::Malformed, "{qname:?}");
        assert_eq!(answer(&reply).metadata.response_code, ResponseCode::FormErr);
    }
    // A name longer than 255 bytes in the wire format.
    let long: Vec<&[u8]> = vec![&[b'a'; 63][..]; 5];
    let reply = respond(
        &p,
        Net::Public,
        &t,
        &raw_query([1, 0, 0, 0], &wire_name(&long)),
        &resolved,
    );
    assert_eq!(reply.event, DnsEvent::Malformed);
    assert!(t.is_empty());
}

#[test]
fn answers_fit_in_512_bytes_even_for_the_longest_name() {
    let (p, t) = (policy(), table());
    let label63 = "a".repeat(63);
    let name = format!("{label63}.{label63}.{label63}.{}.", "b".repeat(61));
    let reply = respond(&p, Net::Public, &t, &query(&name, RecordType::A), &resolved);
    assert!(matches!(reply.event, DnsEvent::Answered { .. }));
    assert!(
        reply.packet.as_ref().unwrap().len() <= 512,
        "{}",
        reply.packet.unwrap().len()
    );
    // And the event for an oversized refused name is bounded.
    let mut m = query_msg(&name, RecordType::A);
    let evil =
        Name::from_ascii(format!("{label63}.{label63}.{label63}.{}.", "c".repeat(61))).unwrap();
    m.queries[0].set_name(evil);
    let reply = respond(&p, Net::OpenvibeOnly, &t, &m.to_vec().unwrap(), &resolved);
    let DnsEvent::Refused { name } = reply.event else {
        panic!()
    };
    assert!(name.len() <= EVENT_NAME_MAX + 3);
}

/// A small deterministic generator for the fuzz-like tests (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Whatever the input, the responder returns; when it answers, the answer decodes, echoes the
/// id, and gives out only synthetic addresses for allowed names.
fn check_any(p: &EgressPolicy, net: Net, t: &NameTable, packet: &[u8]) {
    let reply = respond(p, net, t, packet, &resolved);
    if let Some(bytes) = &reply.packet {
        let m = Message::from_vec(bytes).expect("our own answers decode");
        assert_eq!(m.metadata.id, u16::from_be_bytes([packet[0], packet[1]]));
        assert_eq!(m.metadata.message_type, MessageType::Response);
        assert!(bytes.len() <= 512);
        for a in a_addrs(&m) {
            assert!(NameTable::is_synthetic(IpAddr::V4(a)));
        }
    }
    if let DnsEvent::Answered { name, .. } = &reply.event {
        assert!(name_allowed(p, net, name));
    }
}

#[test]
fn random_packets_never_panic() {
    let (p, t) = (policy(), NameTable::new(100_000));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let len = (rng.next() % 80) as usize;
        let mut packet = rng.bytes(len);
        // Half of them get a plausible header, so the decoder is exercised past it.
        if len >= 12 && rng.next().is_multiple_of(2) {
            packet[2] &= 0x07; // QR=0, opcode 0
            packet[4..12].copy_from_slice(&[0, 1, 0, 0, 0, 0, 0, (rng.next() % 2) as u8]);
        }
        check_any(&p, Net::Public, &t, &packet);
        check_any(&p, Net::OpenvibeOnly, &t, &packet);
    }
}

#[test]
fn every_truncation_and_byte_mutation_of_real_queries_is_handled() {
    let (p, t) = (policy(), NameTable::new(100_000));
    let mut with_edns = query_msg("api.openvibe.services", RecordType::A);
    with_edns.set_edns(Edns::new());
    let seeds = [
        query("api.openvibe.services", RecordType::A),
        query("evil.com", RecordType::AAAA),
        with_edns.to_vec().unwrap(),
    ];
    for seed in &seeds {
        for len in 0..=seed.len() {
            check_any(&p, Net::OpenvibeOnly, &t, &seed[..len]);
        }
        for i in 0..seed.len() {
            for b in 0..=255u8 {
                let mut packet = seed.clone();
                packet[i] = b;
                check_any(&p, Net::OpenvibeOnly, &t, &packet);
            }
        }
        // Trailing garbage after a valid query.
        let mut packet = seed.clone();
        packet.extend_from_slice(&[0xc0, 0x0c, 0xff, 0xff]);
        check_any(&p, Net::OpenvibeOnly, &t, &packet);
    }
    // A maximal UDP payload of garbage behind a query header.
    let mut big = query("openvibe.services", RecordType::A);
    big.resize(65_535, 0xc0);
    check_any(&p, Net::OpenvibeOnly, &t, &big);
}

#[test]
fn tcp_framing() {
    assert_eq!(tcp_frame(&[]), TcpFrame::NeedMore);
    assert_eq!(tcp_frame(&[0]), TcpFrame::NeedMore);
    assert_eq!(tcp_frame(&[0, 0]), TcpFrame::Invalid);
    assert_eq!(tcp_frame(&[0, 3, 1, 2]), TcpFrame::NeedMore);
    assert_eq!(
        tcp_frame(&[0, 3, 1, 2, 3]),
        TcpFrame::Message {
            message: &[1, 2, 3],
            consumed: 5
        }
    );
    // Two pipelined messages: the first, then the rest after `consumed`.
    let q = query("openvibe.services", RecordType::A);
    let mut stream = tcp_encode(&q).unwrap();
    stream.extend(tcp_encode(&q).unwrap());
    let TcpFrame::Message { message, consumed } = tcp_frame(&stream) else {
        panic!()
    };
    assert_eq!(message, &q[..]);
    assert_eq!(
        tcp_frame(&stream[consumed..]),
        TcpFrame::Message {
            message: &q,
            consumed
        }
    );
    // A length prefix of 65535 with less behind it waits.
    assert_eq!(tcp_frame(&[0xff, 0xff, 0]), TcpFrame::NeedMore);
    assert_eq!(tcp_encode(&vec![0; 65_535]).unwrap().len(), 65_537);
    assert_eq!(tcp_encode(&vec![0; 65_536]), None);
    assert_eq!(tcp_encode(&[7]).unwrap(), vec![0, 1, 7]);
    // End to end: a framed query gets a framed answer.
    let (p, t) = (policy(), table());
    let reply = respond(&p, Net::OpenvibeOnly, &t, message, &resolved);
    let framed = tcp_encode(reply.packet.as_ref().unwrap()).unwrap();
    let TcpFrame::Message { message, .. } = tcp_frame(&framed) else {
        panic!()
    };
    assert_eq!(
        a_addrs(&Message::from_vec(message).unwrap()),
        vec![Ipv4Addr::new(198, 18, 0, 1)]
    );
}

#[test]
fn the_table_is_shared_across_threads() {
    let t = std::sync::Arc::new(NameTable::new(1000));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let t = std::sync::Arc::clone(&t);
            std::thread::spawn(move || {
                (0..100)
                    .map(|i| t.address_for(&format!("n{i}.example.com")).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let results: Vec<Vec<Ipv4Addr>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    // Every thread saw the same address for the same name, and 100 names were given out.
    assert!(results.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(t.len(), 100);
    for (i, addr) in results[0].iter().enumerate() {
        assert_eq!(
            t.name_for(IpAddr::V4(*addr)),
            Some(format!("n{i}.example.com"))
        );
    }
}

#[test]
fn the_pool_is_the_one_the_policy_denies() {
    let pool: ipnet::Ipv4Net = crate::egress::policy::SYNTHETIC_POOL.parse().unwrap();
    assert_eq!(pool.network(), POOL_BASE);
    assert_eq!(1u32 << (32 - pool.prefix_len()), POOL_SIZE);
    // Every address the table can give out is denied as a real destination.
    let p = policy();
    for a in [
        NameTable::address_at(0),
        NameTable::address_at(POOL_SIZE as usize - 3),
    ] {
        assert!(crate::egress::policy::address_allowed(&p, IpAddr::V4(a), &[], &[]).is_err());
    }
}

#[test]
fn an_allowed_name_is_answered_as_the_upstream_found_it() {
    let p = policy();
    let rcode = |reply: &DnsReply| answer(reply).metadata.response_code;
    for (found, code, qtypes) in [
        (Resolution::NxDomain, ResponseCode::NXDomain, "nx"),
        (Resolution::Failed, ResponseCode::ServFail, "fail"),
        (Resolution::Limit, ResponseCode::Refused, "limit"),
        (Resolution::NoRecords, ResponseCode::NoError, "nodata"),
    ] {
        for qtype in [RecordType::A, RecordType::AAAA, RecordType::TXT] {
            let t = table();
            let known = |_: &str| Some(found.clone());
            let reply = respond(
                &p,
                Net::Public,
                &t,
                &query("Typo.Example.ORG", qtype),
                &known,
            );
            assert_eq!(rcode(&reply), code, "{qtypes} {qtype:?}");
            assert!(answer(&reply).answers.is_empty(), "{qtypes} {qtype:?}");
            let name = "typo.example.org".to_string();
            let expected = match found {
                Resolution::NxDomain => DnsEvent::NxDomain { name },
                Resolution::Failed => DnsEvent::ServFail { name },
                Resolution::Limit => DnsEvent::TableFull { name },
                _ => DnsEvent::NoData {
                    name,
                    qtype: u16::from(qtype),
                },
            };
            assert_eq!(reply.event, expected);
            assert!(t.is_empty(), "no synthetic address for {qtypes}");
        }
    }
}

#[test]
fn an_allowed_name_not_resolved_yet_asks_for_a_lookup_and_nothing_else() {
    let p = policy();
    let t = table();
    let reply = respond(
        &p,
        Net::OpenvibeOnly,
        &t,
        &query("API.openvibe.services.", RecordType::A),
        &|_| None,
    );
    assert_eq!(
        reply,
        DnsReply {
            packet: None,
            event: DnsEvent::Lookup {
                name: "api.openvibe.services".into()
            }
        }
    );
    assert!(t.is_empty());
}

#[test]
fn a_name_the_job_may_not_reach_is_never_resolved() {
    let p = policy();
    let t = table();
    let asked = std::cell::RefCell::new(Vec::new());
    let known = |name: &str| {
        asked.borrow_mut().push(name.to_string());
        None
    };
    for (net, name) in [
        (Net::OpenvibeOnly, "pub.example.org"),
        (Net::OpenvibeOnly, "evilopenvibe.services"),
        (Net::Public, "metadata.google.internal"),
        (Net::Public, "router.lan"),
        (Net::Public, "single"),
        (Net::Deny, "api.openvibe.services"),
    ] {
        for qtype in [RecordType::A, RecordType::AAAA, RecordType::TXT] {
            let reply = respond(&p, net, &t, &query(name, qtype), &known);
            assert_eq!(
                answer(&reply).metadata.response_code,
                ResponseCode::NXDomain,
                "{net:?} {name}"
            );
            assert!(matches!(reply.event, DnsEvent::Refused { .. }));
        }
    }
    assert!(asked.borrow().is_empty(), "{:?}", asked.borrow());
}

/// A well-formed query with bytes after its last record is FORMERR, never a lookup: padded
/// to 64 KiB, each such datagram would be kept whole while its name is resolved.
#[test]
fn bytes_after_the_last_record_are_malformed() {
    let (p, t) = (policy(), table());
    let mut padded = query("api.openvibe.services", RecordType::A);
    padded.extend(std::iter::repeat_n(0u8, 60_000));
    let reply = respond(&p, Net::OpenvibeOnly, &t, &padded, &resolved);
    assert_eq!(reply.event, DnsEvent::Malformed);
    assert_eq!(answer(&reply).metadata.response_code, ResponseCode::FormErr);
    assert!(t.is_empty());
    // One byte is enough; the same query without it is a lookup.
    let mut one = query("api.openvibe.services", RecordType::A);
    one.push(0);
    let reply = respond(&p, Net::OpenvibeOnly, &t, &one, &|_| None);
    assert_eq!(reply.event, DnsEvent::Malformed);
    let reply = respond(
        &p,
        Net::OpenvibeOnly,
        &t,
        &query("api.openvibe.services", RecordType::A),
        &|_| None,
    );
    assert!(
        matches!(reply.event, DnsEvent::Lookup { .. }),
        "{:?}",
        reply.event
    );
}
