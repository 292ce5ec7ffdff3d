use super::*;

/// Real ClientHellos, captured from the clients named (connecting with the server name named).
const NODE20: &[u8] = include_bytes!("node20_openvibe.services.bin");
const NODE20_NO_SNI: &[u8] = include_bytes!("node20_no_sni.bin");
const OPENSSL3: &[u8] = include_bytes!("openssl3_api.openvibe.services.bin");
const CURL: &[u8] = include_bytes!("curl_www.openvibe.services.bin");

fn name(s: &str) -> Sniff {
    Sniff::Name(s.to_string())
}

fn refused(e: SniffError) -> Sniff {
    Sniff::Refused(e)
}

// ---- a ClientHello builder -----------------------------------------------------------------

fn ext(ext_type: u16, data: &[u8]) -> Vec<u8> {
    let mut out = ext_type.to_be_bytes().to_vec();
    out.extend_from_slice(&(data.len() as u16).to_be_bytes());
    out.extend_from_slice(data);
    out
}

/// server_name extension data with these (type, name) entries and a correct list length.
fn sni_data(entries: &[(u8, &[u8])]) -> Vec<u8> {
    let mut list = Vec::new();
    for (t, n) in entries {
        list.push(*t);
        list.extend_from_slice(&(n.len() as u16).to_be_bytes());
        list.extend_from_slice(n);
    }
    let mut out = (list.len() as u16).to_be_bytes().to_vec();
    out.extend(list);
    out
}

fn sni(host: &str) -> Vec<u8> {
    ext(0, &sni_data(&[(0, host.as_bytes())]))
}

/// A ClientHello body with these extensions (None: no extension block at all).
fn hello_body(exts: Option<&[Vec<u8>]>) -> Vec<u8> {
    let mut b = vec![0x03, 0x03];
    b.extend([0x11; 32]);
    b.push(32);
    b.extend([0x22; 32]);
    b.extend([0x00, 0x04, 0x13, 0x01, 0x13, 0x02]);
    b.extend([0x01, 0x00]);
    if let Some(exts) = exts {
        let block: Vec<u8> = exts.concat();
        b.extend((block.len() as u16).to_be_bytes());
        b.extend(block);
    }
    b
}

fn handshake(msg_type: u8, body: &[u8]) -> Vec<u8> {
    let len = body.len() as u32;
    let mut out = vec![msg_type, (len >> 16) as u8, (len >> 8) as u8, len as u8];
    out.extend_from_slice(body);
    out
}

/// `hs` in handshake records of at most `chunk` bytes each.
fn records(hs: &[u8], chunk: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in hs.chunks(chunk) {
        out.extend([22, 3, 1]);
        out.extend((piece.len() as u16).to_be_bytes());
        out.extend_from_slice(piece);
    }
    out
}

fn hello(exts: &[Vec<u8>]) -> Vec<u8> {
    records(&handshake(1, &hello_body(Some(exts))), 16384)
}

fn typical_exts(host: &str) -> Vec<Vec<u8>> {
    vec![
        ext(0x0a0a, &[]), // GREASE
        sni(host),
        ext(23, &[]),
        ext(0xff01, &[0]),
        ext(10, &[0, 4, 0, 0x1d, 0, 0x17]),
        ext(16, b"\x00\x0c\x02h2\x08http/1.1"),
        ext(43, &[4, 3, 4, 3, 3]),
        ext(51, &[0, 0]),
    ]
}

// ---- TLS -----------------------------------------------------------------------------------

#[test]
fn real_client_hellos_give_their_server_name() {
    assert_eq!(sniff(443, NODE20), name("openvibe.services"));
    assert_eq!(sniff(443, OPENSSL3), name("api.openvibe.services"));
    assert_eq!(sniff(443, CURL), name("www.openvibe.services"));
    // Node sends no SNI when it connects to an IP address.
    assert_eq!(sniff(443, NODE20_NO_SNI), Sniff::NoName);
}

#[test]
fn every_prefix_of_a_real_hello_needs_more() {
    for fixture in [NODE20, NODE20_NO_SNI, OPENSSL3, CURL] {
        for len in 0..fixture.len() {
            assert_eq!(tls_server_name(&fixture[..len]), Sniff::NeedMore, "{len}");
        }
    }
}

#[test]
fn bytes_after_the_hello_do_not_matter() {
    let mut more = NODE20.to_vec();
    more.extend([0x17, 0x03, 0x03, 0x00, 0x05, 1, 2, 3, 4, 5]);
    assert_eq!(sniff(443, &more), name("openvibe.services"));
    more.resize(100_000, 0xaa);
    assert_eq!(sniff(443, &more), name("openvibe.services"));
}

#[test]
fn a_hello_split_over_records_and_reads_is_reassembled() {
    let hs = handshake(1, &hello_body(Some(&typical_exts("api.openvibe.services"))));
    for chunk in [1, 2, 3, 4, 5, 7, 64, 100, hs.len() - 1, hs.len()] {
        let stream = records(&hs, chunk);
        assert_eq!(
            tls_server_name(&stream),
            name("api.openvibe.services"),
            "chunk {chunk}"
        );
        for len in 0..stream.len() {
            assert_eq!(
                tls_server_name(&stream[..len]),
                Sniff::NeedMore,
                "chunk {chunk}, {len}"
            );
        }
    }
}

#[test]
fn server_names_come_back_canonical() {
    for (sent, got) in [
        ("OpenVibe.Services", "openvibe.services"),
        ("openvibe.services.", "openvibe.services"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("127.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("::1", "::1"),
        ("evil.com", "evil.com"),
    ] {
        assert_eq!(tls_server_name(&hello(&[sni(sent)])), name(got), "{sent}");
    }
}

#[test]
fn server_names_that_are_no_host_are_refused() {
    let long = "a".repeat(256);
    for bad in [
        &b""[..],
        b"\xc3\xb6penvibe.services",
        b"openvibe.services\0.evil.com",
        b"openvibe.services evil",
        b"openvibe..services",
        b"user@openvibe.services",
        b"openvibe.services:443",
        b"999.1.1.1",
        b"*.openvibe.services",
        long.as_bytes(),
    ] {
        let h = hello(&[ext(0, &sni_data(&[(0, bad)]))]);
        assert_eq!(
            tls_server_name(&h),
            refused(SniffError::BadServerName),
            "{bad:?}"
        );
    }
}

#[test]
fn malformed_server_name_lists_are_refused() {
    let two = sni_data(&[(0, b"openvibe.services"), (0, b"evil.com")]);
    let other_type = sni_data(&[(1, b"openvibe.services")]);
    let mut long_list = sni_data(&[(0, b"openvibe.services")]);
    long_list[1] += 1;
    let mut short_list = sni_data(&[(0, b"openvibe.services")]);
    short_list[1] -= 1;
    let mut long_name = sni_data(&[(0, b"openvibe.services")]);
    long_name[4] += 1;
    let mut short_name = sni_data(&[(0, b"openvibe.services")]);
    short_name[4] -= 1;
    let mut trailing = sni_data(&[(0, b"openvibe.services")]);
    trailing.push(0);
    for (what, data) in [
        ("two names", two),
        ("type", other_type),
        ("list too long", long_list),
        ("list too short", short_list),
        ("name too long", long_name),
        ("name too short", short_name),
        ("trailing byte", trailing),
        ("empty extension", vec![]),
        ("one byte", vec![0]),
        ("empty list", vec![0, 0]),
    ] {
        let got = tls_server_name(&hello(&[ext(0, &data)]));
        assert!(
            matches!(got, Sniff::Refused(SniffError::MalformedTls(_))),
            "{what}: {got:?}"
        );
    }
}

#[test]
fn duplicate_extensions_are_refused() {
    let got = tls_server_name(&hello(&[sni("openvibe.services"), sni("evil.com")]));
    assert_eq!(got, refused(SniffError::DuplicateExtension(0)));
    let got = tls_server_name(&hello(&[
        sni("openvibe.services"),
        ext(10, &[0, 0]),
        ext(10, &[0, 0]),
    ]));
    assert_eq!(got, refused(SniffError::DuplicateExtension(10)));
}

#[test]
fn hellos_without_server_name() {
    assert_eq!(
        tls_server_name(&records(&handshake(1, &hello_body(None)), 16384)),
        Sniff::NoName
    );
    assert_eq!(tls_server_name(&hello(&[])), Sniff::NoName);
    assert_eq!(
        tls_server_name(&hello(&[ext(23, &[]), ext(43, &[2, 3, 4])])),
        Sniff::NoName
    );
}

#[test]
fn the_server_name_is_found_wherever_it_is_among_the_extensions() {
    let mut exts = typical_exts("x.openvibe.services");
    for _ in 0..exts.len() {
        exts.rotate_left(1);
        assert_eq!(tls_server_name(&hello(&exts)), name("x.openvibe.services"));
    }
    // After an extension whose body tls-parser would choke on (a key_share of garbage).
    let exts = vec![ext(51, &[0xff; 7]), ext(13, &[1]), sni("openvibe.services")];
    assert_eq!(tls_server_name(&hello(&exts)), name("openvibe.services"));
}

#[test]
fn malformed_hellos_are_refused() {
    let good = hello_body(Some(&[sni("openvibe.services")]));
    // Every length field of the body off by one either way, and every truncation of the body
    // inside a handshake message that claims the shorter length.
    for cut in 0..good.len() {
        let got = tls_server_name(&records(&handshake(1, &good[..cut]), 16384));
        assert!(
            matches!(
                got,
                Sniff::Refused(SniffError::MalformedTls(_)) | Sniff::NoName
            ),
            "cut {cut}: {got:?}"
        );
        assert_ne!(got, name("openvibe.services"), "cut {cut}");
    }
    let mut trailing = good.clone();
    trailing.push(0);
    assert_eq!(
        tls_server_name(&records(&handshake(1, &trailing), 16384)),
        refused(SniffError::MalformedTls("bytes after the extensions"))
    );
    let mut bad = good.clone();
    bad[0] = 2; // legacy_version 2.3
    assert_eq!(
        tls_server_name(&records(&handshake(1, &bad), 16384)),
        refused(SniffError::MalformedTls("version"))
    );
    let mut bad = good.clone();
    bad[34] = 33; // session id longer than 32
    assert_eq!(
        tls_server_name(&records(&handshake(1, &bad), 16384)),
        refused(SniffError::MalformedTls("session id"))
    );
    let mut bad = good.clone();
    bad[68] = 3; // odd cipher suites length
    assert_eq!(
        tls_server_name(&records(&handshake(1, &bad), 16384)),
        refused(SniffError::MalformedTls("cipher suites"))
    );
    let mut bad = good.clone();
    bad[67..69].copy_from_slice(&[0, 0]); // no cipher suites
    assert!(matches!(
        tls_server_name(&records(&handshake(1, &bad), 16384)),
        Sniff::Refused(_)
    ));
    let mut bad = good;
    bad[73] = 0; // no compression method
    assert!(matches!(
        tls_server_name(&records(&handshake(1, &bad), 16384)),
        Sniff::Refused(_)
    ));
}

#[test]
fn other_records_and_messages_are_refused() {
    let hs = handshake(1, &hello_body(Some(&[sni("openvibe.services")])));
    // A change_cipher_spec between two fragments of the hello.
    let mut stream = records(&hs[..10], 10);
    stream.extend([20, 3, 3, 0, 1, 1]);
    stream.extend(records(&hs[10..], 16384));
    assert_eq!(tls_server_name(&stream), refused(SniffError::NotTls));
    // Application data, alerts, SSL 2 hellos, HTTP on 443: refused from the first byte.
    for first in [
        &[23u8, 3, 3, 0, 1, 0][..],
        &[21, 3, 3, 0, 2, 2, 40],
        &[0x80, 0x2e, 1, 0, 2],
        b"GET / HTTP/1.1\r\n",
        b"G",
        b"\x00",
    ] {
        assert_eq!(
            tls_server_name(first),
            refused(SniffError::NotTls),
            "{first:?}"
        );
    }
    // Record version 2.x or 4.x.
    let mut v = records(&hs, 16384);
    v[1] = 2;
    assert_eq!(tls_server_name(&v), refused(SniffError::NotTls));
    // A ServerHello, a Certificate: not a ClientHello.
    for t in [2u8, 11, 0] {
        assert_eq!(
            tls_server_name(&records(&handshake(t, &hello_body(None)), 16384)),
            refused(SniffError::NotClientHello)
        );
    }
    // Record lengths 0 and 16385.
    assert_eq!(
        tls_server_name(&[22, 3, 1, 0, 0]),
        refused(SniffError::MalformedTls("record length"))
    );
    assert_eq!(
        tls_server_name(&[22, 3, 1, 0x40, 0x01]),
        refused(SniffError::MalformedTls("record length"))
    );
}

#[test]
fn hellos_over_16_kib_are_refused_as_soon_as_a_length_says_so() {
    // The largest hello that fits: 5 (record header) + 4 (handshake header) + body = 16 KiB.
    let fits = |body_len: usize| {
        let base = hello_body(Some(&[sni("openvibe.services"), ext(21, &[])]));
        let mut exts_pad = vec![0u8; body_len - base.len()];
        exts_pad.truncate(body_len - base.len());
        let body = hello_body(Some(&[sni("openvibe.services"), ext(21, &exts_pad)]));
        assert_eq!(body.len(), body_len);
        body
    };
    let body = fits(MAX_HEAD - 9);
    let stream = records(&handshake(1, &body), 16384);
    assert_eq!(stream.len(), MAX_HEAD);
    assert_eq!(tls_server_name(&stream), name("openvibe.services"));
    // One byte more: refused from the first record header and handshake header on.
    let body = fits(MAX_HEAD - 8);
    let stream = records(&handshake(1, &body), 16384);
    assert_eq!(tls_server_name(&stream[..9]), refused(SniffError::TooLarge));
    assert_eq!(tls_server_name(&stream), refused(SniffError::TooLarge));
    // Split in small records the headers add up: refused once they cross 16 KiB.
    let body = fits(MAX_HEAD - 200);
    let stream = records(&handshake(1, &body), 100);
    assert!(stream.len() > MAX_HEAD);
    assert_eq!(tls_server_name(&stream), refused(SniffError::TooLarge));
    // A 16 KiB record whose handshake claims 16 MiB.
    assert_eq!(
        tls_server_name(&[22, 3, 1, 0x40, 0x00, 1, 0xff, 0xff, 0xff]),
        refused(SniffError::TooLarge)
    );
}

/// xorshift64*, for the fuzz-like tests.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn mutated_and_random_hellos_never_panic() {
    // Every byte of a real hello set to a few values: never a panic; a changed byte of the
    // name itself never yields the original name.
    let name_at = NODE20
        .windows(17)
        .position(|w| w == b"openvibe.services")
        .unwrap();
    for i in 0..NODE20.len() {
        for b in [0u8, 1, 0x16, 0x7f, 0x80, 0xfe, 0xff, NODE20[i] ^ 1] {
            let mut m = NODE20.to_vec();
            m[i] = b;
            let got = tls_server_name(&m);
            if (name_at..name_at + 17).contains(&i) && b != NODE20[i] {
                assert_ne!(got, name("openvibe.services"), "{i} = {b}");
            }
        }
    }
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..20_000 {
        let len = (rng.next() % 600) as usize;
        let mut buf: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if len >= 9 {
            buf[..3].copy_from_slice(&[22, 3, 1]);
            buf[5] = 1;
        }
        let _ = tls_server_name(&buf);
    }
}

// ---- HTTP ----------------------------------------------------------------------------------

fn http(head: &str) -> Sniff {
    sniff(80, head.as_bytes())
}

#[test]
fn the_host_header_gives_the_name() {
    for (head, want) in [
        (
            "GET / HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            name("openvibe.services"),
        ),
        (
            "GET /x?y=1 HTTP/1.1\r\nhost: OpenVibe.Services.\r\nAccept: */*\r\n\r\n",
            name("openvibe.services"),
        ),
        (
            "GET / HTTP/1.1\r\nHOST:api.openvibe.services:80\r\n\r\n",
            name("api.openvibe.services"),
        ),
        (
            "GET / HTTP/1.1\r\nHost: openvibe.services:8080\r\n\r\n",
            name("openvibe.services"),
        ),
        (
            "GET / HTTP/1.1\r\nHost: openvibe.services:\r\n\r\n",
            name("openvibe.services"),
        ),
        (
            "GET / HTTP/1.1\r\nHost:   openvibe.services  \r\n\r\n",
            name("openvibe.services"),
        ),
        (
            "POST /api HTTP/1.1\r\nHost: openvibe.services\r\nContent-Length: 3\r\n\r\nabc",
            name("openvibe.services"),
        ),
        (
            "OPTIONS * HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            name("openvibe.services"),
        ),
        ("GET / HTTP/1.1\r\nHost: evil.com\r\n\r\n", name("evil.com")),
        // IP literals in every spelling come back canonical.
        (
            "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            name("127.0.0.1"),
        ),
        (
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n",
            name("127.0.0.1"),
        ),
        (
            "GET / HTTP/1.1\r\nHost: 2130706433\r\n\r\n",
            name("127.0.0.1"),
        ),
        (
            "GET / HTTP/1.1\r\nHost: 0x7f000001:80\r\n\r\n",
            name("127.0.0.1"),
        ),
        ("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", name("::1")),
        (
            "GET / HTTP/1.1\r\nHost: [::ffff:169.254.169.254]\r\n\r\n",
            name("::ffff:169.254.169.254"),
        ),
        // No Host at all.
        ("GET / HTTP/1.0\r\n\r\n", Sniff::NoName),
        ("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", Sniff::NoName),
    ] {
        assert_eq!(http(head), want, "{head:?}");
    }
}

#[test]
fn absolute_form_targets_must_name_the_same_host() {
    for (head, want) in [
        (
            "GET http://openvibe.services/x HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            name("openvibe.services"),
        ),
        (
            "GET HTTP://OpenVibe.Services:80/x HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            name("openvibe.services"),
        ),
        (
            "GET http://openvibe.services HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            name("openvibe.services"),
        ),
        (
            "GET http://openvibe.services/ HTTP/1.0\r\n\r\n",
            name("openvibe.services"),
        ),
        (
            "GET http://evil.com/ HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            refused(SniffError::TargetHostMismatch {
                target: "evil.com".into(),
                host: "openvibe.services".into(),
            }),
        ),
        (
            "GET http://127.0.0.1/ HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            refused(SniffError::TargetHostMismatch {
                target: "127.0.0.1".into(),
                host: "openvibe.services".into(),
            }),
        ),
        (
            "GET https://openvibe.services/ HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            refused(SniffError::BadTarget),
        ),
        (
            "GET ftp://openvibe.services/ HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            refused(SniffError::BadTarget),
        ),
        (
            "GET http://openvibe.services@evil.com/ HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            refused(SniffError::BadTarget),
        ),
        (
            "GET http://evil.com@openvibe.services/ HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            refused(SniffError::BadTarget),
        ),
        (
            "GET openvibe.services:80 HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            refused(SniffError::BadTarget),
        ),
        (
            "GET openvibe.services HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            refused(SniffError::BadTarget),
        ),
        (
            "GET http:/x HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
            refused(SniffError::BadTarget),
        ),
        (
            "CONNECT openvibe.services:443 HTTP/1.1\r\nHost: openvibe.services:443\r\n\r\n",
            refused(SniffError::Connect),
        ),
        (
            "connect openvibe.services:443 HTTP/1.1\r\nHost: openvibe.services:443\r\n\r\n",
            refused(SniffError::Connect),
        ),
    ] {
        assert_eq!(http(head), want, "{head:?}");
    }
}

#[test]
fn two_host_headers_are_refused() {
    for head in [
        "GET / HTTP/1.1\r\nHost: openvibe.services\r\nHost: evil.com\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: openvibe.services\r\nhost: openvibe.services\r\n\r\n",
        "GET / HTTP/1.1\r\nHOST: evil.com\r\nAccept: */*\r\nHost: openvibe.services\r\n\r\n",
    ] {
        assert_eq!(http(head), refused(SniffError::DuplicateHost), "{head:?}");
    }
}

#[test]
fn host_values_that_are_no_host_are_refused() {
    for value in [
        "",
        "user@openvibe.services",
        "openvibe.services@evil.com",
        "openvibe.services:99999",
        "openvibe.services:123456",
        "openvibe.services:80:80",
        "openvibe.services:http",
        "openvibe.services/evil",
        "openvibe.services?x",
        "%6fpenvibe.services",
        "open vibe.services",
        "*.openvibe.services",
        "999.1.1.1",
        "[::1",
        "::1",
        "[::1]x",
        "http://openvibe.services",
    ] {
        let head = format!("GET / HTTP/1.1\r\nHost: {value}\r\n\r\n");
        assert_eq!(http(&head), refused(SniffError::BadHost), "{value:?}");
    }
    // Non-ASCII bytes in the value.
    let head = b"GET / HTTP/1.1\r\nHost: \xc3\xb6penvibe.services\r\n\r\n";
    assert_eq!(sniff(80, head), refused(SniffError::BadHost));
}

#[test]
fn what_is_not_http_1_is_refused() {
    for head in [
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: openvibe.services\r\n  folded\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : openvibe.services\r\n\r\n",
        "GET / HTTP/3.0\r\nHost: openvibe.services\r\n\r\n",
        "\x16\x03\x01\x00\x05hello",
        "GET\0/ HTTP/1.1\r\n\r\n",
    ] {
        assert!(
            matches!(http(head), Sniff::Refused(SniffError::NotHttp(_))),
            "{head:?}: {:?}",
            http(head)
        );
    }
}

#[test]
fn partial_heads_need_more() {
    let head = "GET /index.html HTTP/1.1\r\nHost: openvibe.services\r\nAccept: */*\r\n\r\n";
    for len in 0..head.len() {
        assert_eq!(http(&head[..len]), Sniff::NeedMore, "{len}");
    }
    assert_eq!(http(head), name("openvibe.services"));
}

#[test]
fn heads_over_16_kib_are_refused() {
    // A head that ends exactly at 16 KiB is read; one byte longer is refused.
    let start = "GET / HTTP/1.1\r\nHost: openvibe.services\r\nX-Pad: ";
    let pad = MAX_HEAD - start.len() - 4;
    let head = format!("{start}{}\r\n\r\n", "a".repeat(pad));
    assert_eq!(head.len(), MAX_HEAD);
    assert_eq!(http(&head), name("openvibe.services"));
    let head = format!("{start}{}\r\n\r\n", "a".repeat(pad + 1));
    assert_eq!(http(&head[..MAX_HEAD - 1]), Sniff::NeedMore);
    assert_eq!(http(&head), refused(SniffError::TooLarge));
    assert_eq!(http(&"a".repeat(100_000)), refused(SniffError::TooLarge));
    let endless = format!("GET /{} HTTP/1.1", "a".repeat(MAX_HEAD));
    assert_eq!(http(&endless), refused(SniffError::TooLarge));
    // Too many headers.
    let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: a\r\n")).collect();
    let head = format!("GET / HTTP/1.1\r\nHost: openvibe.services\r\n{many}\r\n");
    assert_eq!(http(&head), refused(SniffError::TooManyHeaders));
}

#[test]
fn random_heads_never_panic() {
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    let alphabet = b"GET /HTTP1.:\r\n \t@[]%0x7fHost:openvibe.services\x00\xff";
    for _ in 0..20_000 {
        let len = (rng.next() % 120) as usize;
        let buf: Vec<u8> = (0..len)
            .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize])
            .collect();
        let _ = http_host(&buf);
        let mut framed = b"GET / HTTP/1.1\r\nHost: ".to_vec();
        framed.extend(&buf);
        framed.extend(b"\r\n\r\n");
        let _ = http_host(&framed);
    }
}

#[test]
fn other_ports_are_refused() {
    for port in [0, 22, 53, 8080, 8443] {
        assert_eq!(
            sniff(port, NODE20),
            refused(SniffError::UnsupportedPort(port))
        );
    }
    // TLS on port 80 is not HTTP.
    assert!(matches!(
        sniff(80, NODE20),
        Sniff::Refused(SniffError::NotHttp(_))
    ));
}

#[test]
fn refusal_replies() {
    assert_eq!(
        refusal_reply(443, RefusalCode::NameRefused, "x"),
        vec![0x15, 3, 3, 0, 2, 2, 49]
    );
    let reply = String::from_utf8(refusal_reply(
        80,
        RefusalCode::AddressRefused,
        "evil.com is not allowed\r\nSet-Cookie: x\"}",
    ))
    .unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"));
    assert!(head.contains(&format!("Content-Length: {}", body.len())));
    assert!(head.contains("\r\nX-Skill-Runner-Refused: address_refused\r\n"));
    assert!(!head.contains("Set-Cookie"));
    let json: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(json["error"]["code"], "address_refused");
    assert_eq!(
        json["error"]["message"],
        "openvibe-skill-runner refused this connection: evil.com is not allowed??Set-Cookie: x\"}"
    );
    // It parses as a response.
    let mut headers = [httparse::EMPTY_HEADER; 8];
    let mut resp = httparse::Response::new(&mut headers);
    assert!(resp.parse(reply.as_bytes()).unwrap().is_complete());
    assert_eq!(resp.code, Some(403));
    let bad_gateway = refusal_reply(80, RefusalCode::UpstreamUnreachable, "gone");
    assert!(bad_gateway.starts_with(b"HTTP/1.1 502 Bad Gateway\r\n"));
    assert!(refusal_reply(22, RefusalCode::Port, "x").is_empty());
    let long = refusal_reply(80, RefusalCode::BadRequest, &"é".repeat(1000));
    assert!(long.len() < 500);
}

#[test]
fn ambiguous_body_lengths_are_refused() {
    let ambiguous = |h: &str| matches!(http(h), Sniff::Refused(SniffError::AmbiguousLength(_)));
    for head in [
        "POST / HTTP/1.1\r\nHost: openvibe.services\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: openvibe.services\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: openvibe.services\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: openvibe.services\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: openvibe.services\r\nTransfer-Encoding: gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: openvibe.services\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: openvibe.services\r\nTransfer-Encoding: xchunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: openvibe.services\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
    ] {
        assert!(ambiguous(head), "{head:?}");
    }
    for head in [
        "POST / HTTP/1.1\r\nHost: openvibe.services\r\nContent-Length: 5\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: openvibe.services\r\nTransfer-Encoding: Chunked \r\n\r\n",
        "GET / HTTP/1.1\r\nHost: openvibe.services\r\n\r\n",
    ] {
        assert_eq!(http(head), name("openvibe.services"), "{head:?}");
    }
    // obs-fold and a space before the colon are no headers at all.
    for head in [
        "GET / HTTP/1.1\r\nHost: openvibe.services\r\nX-A: 1\r\n Host: evil.com\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : evil.com\r\n\r\n",
    ] {
        assert!(
            matches!(http(head), Sniff::Refused(SniffError::NotHttp(_))),
            "{head:?}"
        );
    }
}

#[test]
fn a_request_hyper_parsed_is_judged_by_the_same_rules() {
    let judge = |method: &str, target: &str, hosts: &[&str]| {
        let mut headers = http::HeaderMap::new();
        for h in hosts {
            headers.append(http::header::HOST, h.parse().unwrap());
        }
        request_host(&method.parse().unwrap(), &target.parse().unwrap(), &headers)
    };
    assert_eq!(
        judge("GET", "/x?y", &["API.openvibe.services:80"]),
        Ok(Some("api.openvibe.services".into()))
    );
    assert_eq!(judge("GET", "/", &[]), Ok(None));
    assert_eq!(
        judge("GET", "http://lan.example/x", &["openvibe.services"]),
        Err(SniffError::TargetHostMismatch {
            target: "lan.example".into(),
            host: "openvibe.services".into()
        })
    );
    assert_eq!(
        judge("GET", "http://openvibe.services/x", &[]),
        Ok(Some("openvibe.services".into()))
    );
    assert_eq!(
        judge("GET", "/", &["openvibe.services", "evil.com"]),
        Err(SniffError::DuplicateHost)
    );
    assert_eq!(
        judge("CONNECT", "openvibe.services:443", &["openvibe.services"]),
        Err(SniffError::Connect)
    );
    assert_eq!(
        judge("GET", "/", &["user@evil.com"]),
        Err(SniffError::BadHost)
    );
    assert_eq!(
        judge("GET", "/", &["0x7f000001"]),
        Ok(Some("127.0.0.1".into()))
    );
    assert_eq!(
        judge("OPTIONS", "*", &["openvibe.services"]),
        Ok(Some("openvibe.services".into()))
    );
}

#[test]
fn bare_lf_line_ends_are_read_like_servers_read_them() {
    // httparse accepts LF without CR (as RFC 9112 2.2 lets a recipient); the Host is still
    // the one header that counts, and two of them are still refused.
    assert_eq!(
        http("GET / HTTP/1.1\nHost: openvibe.services\n\n"),
        name("openvibe.services")
    );
    assert_eq!(
        http("GET / HTTP/1.1\nHost: openvibe.services\nHost: evil.com\n\n"),
        refused(SniffError::DuplicateHost)
    );
    // A bare CR is no line end.
    assert!(matches!(
        http("GET / HTTP/1.1\rHost: evil.com\r\n\r\n"),
        Sniff::Refused(SniffError::NotHttp(_))
    ));
}

#[test]
fn only_a_websocket_upgrade_is_served() {
    let upgrade = |h: &str| matches!(http(h), Sniff::Refused(SniffError::Upgrade(_)));
    let later = |h: &str| {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        req.parse(h.as_bytes()).expect("a head");
        let mut map = http::HeaderMap::new();
        for hd in req.headers.iter() {
            map.append(
                http::HeaderName::from_bytes(hd.name.as_bytes()).expect("name"),
                http::HeaderValue::from_bytes(hd.value).expect("value"),
            );
        }
        let uri: Uri = req.path.unwrap_or("/").parse().expect("uri");
        request_host(&http::Method::GET, &uri, &map)
    };
    let host = "GET / HTTP/1.1\r\nHost: openvibe.services\r\nConnection: Upgrade\r\n";
    for extra in [
        "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n",
        "Upgrade: h2c\r\n",
        "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n",
        "Upgrade: websocket, h2c\r\n",
        "Upgrade: h2c, websocket\r\n",
        "Upgrade: websocket\r\nUpgrade: h2c\r\n",
        "Upgrade: websocket\r\nUpgrade: websocket\r\n",
        "Upgrade: TLS/1.2\r\n",
        "Upgrade: \r\n",
    ] {
        let head = format!("{host}{extra}\r\n");
        assert!(upgrade(&head), "first request: {head:?}");
        assert!(
            matches!(later(&head), Err(SniffError::Upgrade(_))),
            "later request: {head:?}"
        );
    }
    for extra in ["Upgrade: websocket\r\n", "Upgrade: WebSocket \r\n", ""] {
        let head = format!("{host}{extra}\r\n");
        assert_eq!(http(&head), name("openvibe.services"), "{head:?}");
        assert_eq!(
            later(&head).ok().flatten().as_deref(),
            Some("openvibe.services"),
            "{head:?}"
        );
    }
}

/// An encrypted ClientHello is refused whatever its outer name: the inner one, which the
/// server goes by, could name any host behind the same front.
#[test]
fn an_encrypted_client_hello_is_refused() {
    for ech in [0xfe0d_u16, 0xffce] {
        for at_end in [true, false] {
            let mut exts = typical_exts("api.openvibe.services");
            let e = ext(ech, &[0, 1, 2, 3]);
            if at_end {
                exts.push(e);
            } else {
                exts.insert(0, e);
            }
            let hs = handshake(1, &hello_body(Some(&exts)));
            assert_eq!(
                tls_server_name(&records(&hs, hs.len())),
                Sniff::Refused(SniffError::EncryptedHello(ech)),
                "{ech:#x}"
            );
        }
    }
    // The same hello without it gives its name.
    let hs = handshake(1, &hello_body(Some(&typical_exts("api.openvibe.services"))));
    assert_eq!(
        tls_server_name(&records(&hs, hs.len())),
        name("api.openvibe.services")
    );
}
