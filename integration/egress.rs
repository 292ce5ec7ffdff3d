//! Egress per `net` (SPEC.md, "Egress per net"; issue 4), end to end: the runner runs in a
//! network namespace of its own (LINK) with a LAN, a loopback service and an upstream "public
//! internet" with its own DNS server, all built per test by `fixture::EgressNet`. Benign tools
//! (test-skills/net-egress) must reach allowed hosts over HTTP and TLS; hostile ones
//! (test-skills/net-egress-hostile) try every route out under each mode. Every test asserts
//! the exact outcome of each attempt, the result's `egress` record, what the upstream and its
//! DNS server saw, that no place a job may not reach was reached (the sinks count every
//! connection, datagram and ICMP echo), and that nothing is left behind.
//!
//! Run alone: `cargo test --release --test integration egress -- --test-threads=1` (as root).

mod dns;
mod fixture;

use crate::common::*;
use fixture::*;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use serde_json::{json, Value};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

const SKILL: &str = "net-egress";
const HOSTILE: &str = "net-egress-hostile";
const TLS_DENIED: &str = "ERR_SSL_TLSV1_ALERT_ACCESS_DENIED";
/// How a connection to a port without a proxy fails: at once, whichever layer answers.
const FAST_FAILURES: &[&str] = &[
    "ECONNREFUSED",
    "EACCES",
    "EPERM",
    "ENETUNREACH",
    "EHOSTUNREACH",
    "EADDRNOTAVAIL",
    "ECONNRESET",
    "EINVAL",
];

// ---- the record ---------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
struct Rec {
    host: String,
    port: u64,
    allowed: bool,
    bytes_out: u64,
    bytes_in: u64,
    /// A lookup's outcome (port 53 only).
    dns: Option<String>,
}

fn records(r: &Value) -> Vec<Rec> {
    r["egress"]
        .as_array()
        .unwrap_or_else(|| panic!("the result has an egress list: {r}"))
        .iter()
        .map(|e| Rec {
            host: e["host"]
                .as_str()
                .expect("egress host")
                .trim_end_matches('.')
                .to_ascii_lowercase(),
            port: e["port"].as_u64().expect("egress port"),
            allowed: e["allowed"].as_bool().expect("egress allowed"),
            bytes_out: e["bytes_out"].as_u64().expect("egress bytes_out"),
            bytes_in: e["bytes_in"].as_u64().expect("egress bytes_in"),
            dns: e["dns"].as_str().map(str::to_string),
        })
        .collect()
}

fn has(r: &Value, host: &str, port: u64, allowed: bool) -> bool {
    let host = host.to_ascii_lowercase();
    records(r)
        .iter()
        .any(|x| x.host == host && x.port == port && x.allowed == allowed)
}

fn assert_has(r: &Value, host: &str, port: u64, allowed: bool) {
    assert!(
        has(r, host, port, allowed),
        "the egress record lacks {{host: {host}, port: {port}, allowed: {allowed}}}: {:#}",
        r["egress"]
    );
}

/// An allowed attempt to host:port that moved bytes both ways.
fn assert_allowed_with_bytes(r: &Value, host: &str, port: u64) {
    let host = host.to_ascii_lowercase();
    assert!(
        records(r).iter().any(|x| x.host == host
            && x.port == port
            && x.allowed
            && x.bytes_out > 0
            && x.bytes_in > 0),
        "no allowed record with bytes both ways for {host}:{port}: {:#}",
        r["egress"]
    );
}

/// Every allowed connection is one of `pairs` (nothing else was let through). Lookups
/// (port 53) are checked by [`assert_lookup`].
fn assert_allowed_only(r: &Value, pairs: &[(&str, u64)]) {
    let extra: Vec<Rec> = records(r)
        .into_iter()
        .filter(|x| {
            x.port != 53 && x.allowed && !pairs.iter().any(|(h, p)| x.host == *h && x.port == *p)
        })
        .collect();
    assert!(
        extra.is_empty(),
        "allowed beyond {pairs:?}: {extra:?}\nthe whole record: {:#}",
        r["egress"]
    );
}

/// The lookup of `name` is recorded exactly once, with this outcome.
fn assert_lookup(r: &Value, name: &str, allowed: bool, outcome: &str) {
    let name = name.to_ascii_lowercase();
    let found: Vec<Rec> = records(r)
        .into_iter()
        .filter(|x| x.port == 53 && x.host == name)
        .collect();
    let expected = Rec {
        host: name.clone(),
        port: 53,
        allowed,
        bytes_out: 0,
        bytes_in: 0,
        dns: Some(outcome.to_string()),
    };
    assert_eq!(
        found,
        vec![expected],
        "the lookup of {name} is recorded once: {:#}",
        r["egress"]
    );
}

fn assert_no_refusals(r: &Value) {
    let refused: Vec<Rec> = records(r).into_iter().filter(|x| !x.allowed).collect();
    assert!(refused.is_empty(), "refused attempts in {refused:?}");
}

/// Only ports the proxy and the DNS responder serve are ever recorded.
fn assert_record_ports(r: &Value) {
    let other: Vec<Rec> = records(r)
        .into_iter()
        .filter(|x| ![53, 80, 443].contains(&x.port))
        .collect();
    assert!(other.is_empty(), "recorded on other ports: {other:?}");
}

// ---- one attempt's outcome ----------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// 200 from the upstream test host, no error.
    Upstream,
    /// The runner's 403 with its refusal body.
    Refused,
    /// The runner's TLS access_denied alert.
    TlsDenied,
    /// The runner's DNS said NXDOMAIN.
    NotFound,
    /// No server answered it (an error, the runner's refusal, a broken exchange).
    NotReached,
    /// A connection to a port without a proxy: refused at once.
    ConnFails,
    /// Only: not the LAN, metadata or the Link (a corner the contract leaves open).
    NoSecret,
    /// Under deny: an error, no status at all.
    Errors,
}

fn servers_of(a: &Value) -> Vec<String> {
    if let Some(list) = a["servers"].as_array() {
        return list
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect();
    }
    let body = a["body"].as_str().unwrap_or("");
    body.match_indices("\"server\":\"")
        .map(|(i, m)| {
            body[i + m.len()..]
                .split('"')
                .next()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// The runner's refusal on port 80, as a program sees it: the `X-Skill-Runner-Refused`
/// header (the tools report its value as `refused`) and, when the body was kept, the same code
/// in its JSON.
fn refused_of(a: &Value) -> bool {
    let Some(code) = a["refused"].as_str() else {
        return false;
    };
    match a["body"].as_str() {
        Some(body) if !body.is_empty() => refusal_body_code(body).as_deref() == Some(code),
        _ => true,
    }
}

/// The code in a refusal's JSON body, when its message is the runner's.
fn refusal_body_code(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    let message = v["error"]["message"].as_str()?;
    if !message.starts_with(REFUSAL) {
        return None;
    }
    v["error"]["code"].as_str().map(str::to_string)
}

/// The runner's TLS access_denied alert, as Node reports it: its own code, or EPROTO with
/// OpenSSL's reason in the message when the alert arrives while the request is being written
/// (`https.get`, or any write before the handshake ends).
fn tls_denied(a: &Value) -> bool {
    let message = a["message"].as_str().unwrap_or("");
    match a["error"].as_str() {
        Some(TLS_DENIED) => true,
        Some("EPROTO") => message.contains("alert access denied"),
        _ => false,
    }
}

fn check(a: &Value, e: Expect) -> Result<(), String> {
    let servers = servers_of(a);
    if servers.iter().any(|s| s != "upstream") {
        return Err(format!("REACHED {servers:?}"));
    }
    let status = a["status"].as_u64();
    let error = a["error"].as_str();
    let ok = match e {
        Expect::Upstream => status == Some(200) && servers == ["upstream"] && error.is_none(),
        Expect::Refused => status == Some(403) && refused_of(a) && servers.is_empty(),
        Expect::TlsDenied => status.is_none() && tls_denied(a) && servers.is_empty(),
        Expect::NotFound => status.is_none() && error == Some("ENOTFOUND"),
        Expect::NotReached => servers.is_empty() && status.is_none_or(|s| s >= 400),
        Expect::ConnFails => {
            status.is_none()
                && a["connected"] != json!(true)
                && error.is_some_and(|e| FAST_FAILURES.contains(&e))
                && a["ms"].as_u64().is_none_or(|ms| ms < 1000)
        }
        Expect::NoSecret => true,
        Expect::Errors => status.is_none() && error.is_some() && servers.is_empty(),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("expected {e:?}"))
    }
}

/// Checks every attempt of `list` (each with an "id" or "url") against `expect`, and fails
/// once with all the mismatches.
fn check_all(what: &str, list: &Value, expect: impl Fn(&str) -> Expect) {
    let items = list
        .as_array()
        .unwrap_or_else(|| panic!("{what}: not a list: {list}"));
    assert!(!items.is_empty(), "{what}: no attempts");
    let mut bad = Vec::new();
    for a in items {
        let id = a["id"].as_str().or(a["url"].as_str()).unwrap_or("?");
        if let Err(e) = check(a, expect(id)) {
            bad.push(format!("  {id}: {e}, got {a}"));
        }
    }
    assert!(
        bad.is_empty(),
        "{what}: {} of {} attempts wrong:\n{}",
        bad.len(),
        items.len(),
        bad.join("\n")
    );
}

fn synthetic(addr: &str) -> bool {
    addr.parse::<Ipv4Addr>()
        .is_ok_and(|a| (u32::from(a) >> 17) == (u32::from(Ipv4Addr::new(198, 18, 0, 0)) >> 17))
}

/// Requests that reached the upstream came from the Link's address (through the runner).
fn assert_upstream_from_link(net: &EgressNet) {
    for req in net.upstream_requests() {
        let remote = req["remote"].as_str().unwrap_or("");
        assert!(
            remote == LINK_UP_IP || remote == format!("::ffff:{LINK_UP_IP}"),
            "the upstream was reached from {remote}, not through the Link: {req}"
        );
    }
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn redirect(from: &str, to: &str) -> String {
    format!("{from}/redirect?to={}", enc(to))
}

fn end(net: EgressNet) {
    let prefix = net.job_prefix.clone();
    net.finish();
    assert_host_clean(&prefix);
}

// ---- the fixture alone ----------------------------------------------------------------------------

/// The network, its DNS upstream, the upstream HTTP(S) server and the sinks work, without the
/// runner: so a failure elsewhere is the runner's, and a leak would be seen.
#[test]
fn fixture_network_and_peers_work_without_the_runner() {
    let _h = exclusive();
    let net = EgressNet::new("egress-fixture");

    for skill in [SKILL, HOSTILE] {
        openvibe_skill_runner::cli::skill::load_manifest(&repo().join("test-skills").join(skill))
            .unwrap_or_else(|e| panic!("{skill}: {e}"));
    }
    let policy = std::fs::read_to_string(net.dir.path().join("policies/egress.toml"))
        .expect("the test policy");
    assert!(!policy.contains("203.0.113.0/24") && policy.contains("10.0.0.0/8"));
    assert!(net.dir.path().join("policies/seccomp.json").is_file());
    let config = std::fs::read_to_string(&net.config).expect("config");
    assert!(
        config.contains("dns_servers = [\"203.0.113.53\"]"),
        "{config}"
    );

    // The DNS upstream, asked from LINK as the runner will ask it.
    let answers = net.in_link(|| {
        use RecordType::{A, AAAA};
        vec![
            ("api", dns_ask(DNS_IP, "api.openvibe.services", A)),
            ("pub", dns_ask(DNS_IP, "PUB.upstream.net.", A)),
            ("pub6", dns_ask(DNS_IP, "pub.upstream.net", AAAA)),
            ("lan", dns_ask(DNS_IP, "lan.upstream.net", A)),
            ("meta", dns_ask(DNS_IP, "meta.upstream.net", A)),
            ("loop", dns_ask(DNS_IP, "loop.upstream.net", A)),
            ("mixed", dns_ask(DNS_IP, "mixed.upstream.net", A)),
            ("mapped", dns_ask(DNS_IP, "mapped.upstream.net", A)),
            ("mapped6", dns_ask(DNS_IP, "mapped.upstream.net", AAAA)),
            ("rebind1", dns_ask(DNS_IP, "rebind.upstream.net", A)),
            ("rebind2", dns_ask(DNS_IP, "rebind.upstream.net", A)),
            ("nx", dns_ask(DNS_IP, "nothing.upstream.net", A)),
            ("tcp", dns_ask_tcp(DNS_IP, "evil.upstream.net", A)),
        ]
    });
    let up = IpAddr::from([203, 0, 113, 10]);
    let v4 = |a: [u8; 4]| IpAddr::from(a);
    let expected: Vec<(&str, (ResponseCode, Vec<IpAddr>))> = vec![
        ("api", (ResponseCode::NoError, vec![up])),
        ("pub", (ResponseCode::NoError, vec![up])),
        ("pub6", (ResponseCode::NoError, vec![])),
        ("lan", (ResponseCode::NoError, vec![v4([10, 77, 0, 2])])),
        (
            "meta",
            (ResponseCode::NoError, vec![v4([169, 254, 169, 254])]),
        ),
        ("loop", (ResponseCode::NoError, vec![v4([127, 0, 0, 1])])),
        (
            "mixed",
            (ResponseCode::NoError, vec![up, v4([10, 77, 0, 2])]),
        ),
        ("mapped", (ResponseCode::NoError, vec![])),
        (
            "mapped6",
            (
                ResponseCode::NoError,
                vec![IpAddr::V6(dns::mapped_loopback())],
            ),
        ),
        ("rebind1", (ResponseCode::NoError, vec![up])),
        ("rebind2", (ResponseCode::NoError, vec![v4([127, 0, 0, 1])])),
        ("nx", (ResponseCode::NXDomain, vec![])),
        ("tcp", (ResponseCode::NoError, vec![up])),
    ];
    assert_eq!(answers, expected);
    assert_eq!(net.dns.count("pub.upstream.net"), 2);
    assert_eq!(net.dns.count_type("rebind.upstream.net", RecordType::A), 2);
    assert_eq!(net.dns.total(), 13);
    assert_eq!(net.dns.garbage(), 0);

    // The upstream over HTTP, from LINK, and its redirect.
    let (status, body) = net.in_link(|| http_get(UPSTREAM_IP, "pub.upstream.net", "/x?y=1"));
    assert_eq!(status, 200, "{body}");
    let seen: Value = serde_json::from_str(&body).expect("upstream body");
    assert_eq!(seen["server"], "upstream");
    assert_eq!(seen["host"], "pub.upstream.net");
    assert_eq!(seen["path"], "/x?y=1");
    assert_eq!(seen["tls"], false);
    assert_eq!(seen["remote"], LINK_UP_IP);
    let (status, _) = net.in_link(|| {
        http_get(
            UPSTREAM_IP,
            "pub.upstream.net",
            "/redirect?to=http%3A%2F%2Flan.upstream.net%2F",
        )
    });
    assert_eq!(status, 302);

    // The upstream over TLS with the test certificate, for every name on it, checked
    // strictly with the CA a tool will be given.
    let script = r#"
        const https = require('node:https');
        const ca = require('node:fs').readFileSync(process.argv[1], 'utf8');
        const names = process.argv.slice(2);
        Promise.all(names.map((name) => new Promise((resolve) => {
          https.get({ host: '203.0.113.10', servername: name, headers: { host: name }, ca, agent: false, path: '/tls' }, (res) => {
            let body = ''; res.on('data', (c) => { body += c; });
            res.on('end', () => resolve({ name, status: res.statusCode, seen: JSON.parse(body) }));
          }).on('error', (e) => resolve({ name, error: e.code }));
        }))).then((r) => process.stdout.write(JSON.stringify(r)));
    "#;
    let ca_path = net.dir.path().join("cert.pem").display().to_string();
    let mut args = vec![ca_path.as_str()];
    args.extend_from_slice(CERT_NAMES);
    let tls = node_in(&net.link, script, &args);
    for t in tls.as_array().expect("list") {
        let name = t["name"].as_str().expect("name");
        assert_eq!(t["status"], 200, "{t}");
        assert_eq!(t["seen"]["sni"], name, "{t}");
        assert_eq!(t["seen"]["tls"], true, "{t}");
    }
    assert_eq!(net.upstream_requests().len(), 2 + CERT_NAMES.len());
    assert_upstream_from_link(&net);

    // The places no job may reach answer when reached from the Link, and say who they are,
    // so a leak would show in a tool's output and in the sinks' counts.
    net.assert_no_hits();
    let bodies = net.in_link(|| {
        let got = vec![
            http_get(LAN_IP, "lan.upstream.net", "/").1,
            http_get(METADATA_IP, "169.254.169.254", "/latest/meta-data/").1,
            http_get("127.0.0.1", "localhost", "/").1,
            http_get(LINK_UP_IP, "x", "/").1,
        ];
        let s = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp");
        s.send_to(b"x", (LAN_IP, 9999)).expect("udp to the LAN");
        s.send_to(b"x", ("127.0.0.1", 9999))
            .expect("udp to loopback");
        s.send_to(b"x", (UPSTREAM_IP, 9999))
            .expect("udp to the upstream");
        let _ = std::net::TcpStream::connect((UPSTREAM_IP, 8080)).expect("tcp 8080 upstream");
        send_icmp_echo(LAN_IP.parse().expect("ip"));
        got
    });
    assert_eq!(
        bodies,
        [
            "{\"server\":\"lan\"}",
            "{\"server\":\"lan\"}",
            "{\"server\":\"link-loopback\"}",
            "{\"server\":\"link-own\"}"
        ]
    );
    let expected_hits: std::collections::BTreeMap<String, u64> = [
        "lan tcp 10.77.0.2:80 from 10.77.0.1",
        "lan tcp 169.254.169.254:80 from 10.77.0.1",
        "link tcp 127.0.0.1:80 from 127.0.0.1",
        "link tcp 100.127.0.1:80 from 100.127.0.1",
        "lan udp 0.0.0.0:9999 from 10.77.0.1",
        "link udp 0.0.0.0:9999 from 127.0.0.1",
        "up udp 0.0.0.0:9999 from 100.127.0.1",
        "up tcp 203.0.113.10:8080 from 100.127.0.1",
        "lan icmp echo-request from 10.77.0.1",
    ]
    .into_iter()
    .map(|k| (k.to_string(), 1))
    .collect();
    wait_for(Duration::from_secs(2), || {
        net.hits().len() >= expected_hits.len()
    });
    assert_eq!(net.hits(), expected_hits);
    net.reset_hits();
    assert_eq!(net.snapshot(), net.snapshot());

    // Dropping a fixture (as on a panic) removes it too.
    let other = EgressNet::new("egress-fixture-drop");
    let prefix = format!("{}-", other.prefix);
    drop(other);
    let left: Vec<String> = netns_names()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "left by drop: {left:?}");

    end(net);
}

// ---- allowed hosts --------------------------------------------------------------------------------

/// A benign tool reaches allowed names over HTTP and over TLS (its own certificate check,
/// against the upstream's real certificate: no interception), under `openvibe-only` (OpenVibe's
/// names) and `public` (any public name); the record names each with bytes both ways; its DNS
/// sees synthetic addresses, never the real one.
#[test]
fn allowed_names_work_over_http_and_tls_under_openvibe_only_and_public() {
    let _h = exclusive();
    let net = EgressNet::new("egress-allowed");
    let mut expected_requests = 0;
    for (mode, names) in [
        ("openvibe-only", vec!["api.openvibe.services"]),
        ("public", vec!["api.openvibe.services", "pub.upstream.net"]),
    ] {
        let mut requests = Vec::new();
        for n in &names {
            requests.push(json!({"url": format!("http://{n}/hello?mode={mode}")}));
            requests.push(json!({"url": format!("https://{n}/hello?mode={mode}")}));
        }
        expected_requests += requests.len();
        let r = net.run(
            SKILL,
            "get",
            mode,
            json!({"ca": net.ca, "requests": requests}),
        );
        let results = &r["output"]["results"];
        check_all(&format!("{mode} get"), results, |_| Expect::Upstream);
        for res in results.as_array().expect("results") {
            let url = res["url"].as_str().expect("url");
            let seen: Value = serde_json::from_str(res["body"].as_str().expect("body"))
                .unwrap_or_else(|e| panic!("{url}: {e}"));
            let tls = url.starts_with("https:");
            let name = url.split('/').nth(2).expect("host");
            assert_eq!(seen["host"], name, "{url}: {seen}");
            assert_eq!(seen["path"], format!("/hello?mode={mode}"), "{url}: {seen}");
            assert_eq!(seen["tls"], tls, "{url}: {seen}");
            if tls {
                assert_eq!(seen["sni"], name, "{url}: {seen}");
            }
        }
        let mut pairs = Vec::new();
        for n in &names {
            assert_allowed_with_bytes(&r, n, 80);
            assert_allowed_with_bytes(&r, n, 443);
            pairs.push((*n, 80));
            pairs.push((*n, 443));
        }
        assert_allowed_only(&r, &pairs);
        assert_no_refusals(&r);
        assert_record_ports(&r);

        for method in ["lookup", "resolve4"] {
            let l = net.run(
                SKILL,
                "lookup",
                mode,
                json!({"names": names, "method": method}),
            );
            for res in l["output"]["results"].as_array().expect("results") {
                let addrs = res["addresses"].as_array().expect("addresses");
                assert!(
                    !addrs.is_empty() && addrs.iter().all(|a| synthetic(a.as_str().unwrap_or(""))),
                    "{mode} {method}: an allowed name gets synthetic addresses (198.18.0.0/15) \
                     only: {res}"
                );
            }
            assert_no_refusals(&l);
            assert_allowed_only(&l, &[]);
            for n in &names {
                assert_lookup(&l, n, true, "answered");
            }
        }
    }
    assert_eq!(net.upstream_requests().len(), expected_requests);
    assert_upstream_from_link(&net);
    assert!(net.dns.count("api.openvibe.services") >= 2);
    end(net);
}

// ---- refused by name --------------------------------------------------------------------------------

/// Under `openvibe-only` every other name is NXDOMAIN at the job's DNS (ENOTFOUND), is recorded
/// (port 53, refused), and is never asked of the upstream: no DNS exfiltration.
#[test]
fn openvibe_only_refuses_other_names_by_dns_and_never_forwards_them() {
    let _h = exclusive();
    let net = EgressNet::new("egress-names");
    let names = [
        "pub.upstream.net",
        "lan.upstream.net",
        "evilopenvibe.services",
        "openvibe.services.evil.upstream.net",
        "api.openvibe.services.upstream.net",
        "metadata.google.internal",
    ];
    for method in ["lookup", "resolve4"] {
        let r = net.run(
            SKILL,
            "lookup",
            "openvibe-only",
            json!({"names": names, "method": method}),
        );
        for res in r["output"]["results"].as_array().expect("results") {
            assert_eq!(res["error"], "ENOTFOUND", "{method}: {res}");
            assert_eq!(res["addresses"], json!([]), "{method}: {res}");
        }
        for n in names {
            assert_lookup(&r, n, false, "refused");
        }
        assert_allowed_only(&r, &[]);
        assert_record_ports(&r);
    }
    let r = net.run(
        SKILL,
        "get",
        "openvibe-only",
        json!({"ca": net.ca, "requests": [
            {"url": "http://pub.upstream.net/"},
            {"url": "https://lan.upstream.net/"},
            {"url": "http://evilopenvibe.services/"},
        ]}),
    );
    check_all("get", &r["output"]["results"], |_| Expect::NotFound);
    assert_has(&r, "pub.upstream.net", 53, false);
    assert_has(&r, "lan.upstream.net", 53, false);
    assert_allowed_only(&r, &[]);

    let asked: Vec<String> = net
        .dns
        .questions()
        .into_iter()
        .map(|q| q.name)
        .filter(|n| n != "openvibe.services" && !n.ends_with(".openvibe.services"))
        .collect();
    assert!(
        asked.is_empty(),
        "refused names reached the upstream DNS: {asked:?}"
    );
    assert!(net.upstream_requests().is_empty());
    end(net);
}

// ---- DNS failures ---------------------------------------------------------------------------------

/// A name the job may reach is answered as the upstream answers it, at once: a name that does
/// not exist is NXDOMAIN (`ENOTFOUND`, not a 403 after seconds), a broken upstream SERVFAIL,
/// a name without an address no data, and only a name with an address gets a synthetic one.
/// A name the job may not reach is still NXDOMAIN without a word upstream. Each name's lookup
/// is recorded once (not once per A and AAAA query) with its outcome.
#[test]
fn dns_failures_look_like_dns_failures_and_each_lookup_is_recorded_once() {
    let _h = exclusive();
    let net = EgressNet::new("egress-dnsfail");
    let names = [
        "pub.upstream.net",
        "nothing.upstream.net",
        "fail.upstream.net",
        "noaddr.upstream.net",
    ];
    for method in ["lookup", "resolve4"] {
        let r = net.run(
            SKILL,
            "lookup",
            "public",
            json!({"names": names, "method": method}),
        );
        let results = r["output"]["results"].as_array().expect("results").clone();
        let by = |n: &str| {
            results
                .iter()
                .find(|x| x["name"] == n)
                .cloned()
                .unwrap_or_else(|| panic!("{n} in {results:?}"))
        };
        let control = by("pub.upstream.net");
        let addrs = control["addresses"].as_array().expect("addresses");
        assert!(
            !addrs.is_empty() && addrs.iter().all(|a| synthetic(a.as_str().unwrap_or(""))),
            "{method}: {control}"
        );
        let nx = by("nothing.upstream.net");
        assert_eq!(nx["error"], "ENOTFOUND", "{method}: {nx}");
        assert!(
            nx["ms"].as_u64().is_some_and(|ms| ms < 1000),
            "{method}: {nx}"
        );
        let fail = by("fail.upstream.net");
        let fail_codes: &[&str] = if method == "lookup" {
            &["EAI_AGAIN"]
        } else {
            &["ESERVFAIL"]
        };
        assert!(
            fail["error"]
                .as_str()
                .is_some_and(|e| fail_codes.contains(&e)),
            "{method}: {fail}"
        );
        let nodata = by("noaddr.upstream.net");
        assert!(
            nodata["addresses"] == json!([])
                && ["ENOTFOUND", "ENODATA"].contains(&nodata["error"].as_str().unwrap_or("")),
            "{method}: {nodata}"
        );
        assert_lookup(&r, "pub.upstream.net", true, "answered");
        assert_lookup(&r, "nothing.upstream.net", true, "nxdomain");
        assert_lookup(&r, "fail.upstream.net", true, "servfail");
        assert_lookup(&r, "noaddr.upstream.net", true, "no_data");
        assert_allowed_only(&r, &[]);
        assert_record_ports(&r);
    }

    // A tool that fetches a name that does not exist gets ENOTFOUND, over HTTP and TLS.
    let r = net.run(
        SKILL,
        "get",
        "public",
        json!({"ca": net.ca, "requests": [
            {"url": "http://nothing.upstream.net/"},
            {"url": "https://nothing.upstream.net/"},
        ]}),
    );
    check_all(
        "get a name that does not exist",
        &r["output"]["results"],
        |_| Expect::NotFound,
    );
    assert_lookup(&r, "nothing.upstream.net", true, "nxdomain");
    assert_allowed_only(&r, &[]);

    // openvibe-only: an OpenVibe name that does not exist is NXDOMAIN from the upstream;
    // another name is refused once, and never asked upstream.
    let before = net.dns.total();
    let r = net.run(
        SKILL,
        "lookup",
        "openvibe-only",
        json!({"names": ["nothing.openvibe.services", "pub.upstream.net", "api.openvibe.services"]}),
    );
    for res in r["output"]["results"].as_array().expect("results") {
        if res["name"] == "api.openvibe.services" {
            assert!(res["error"].is_null(), "{res}");
        } else {
            assert_eq!(res["error"], "ENOTFOUND", "{res}");
        }
    }
    assert_lookup(&r, "nothing.openvibe.services", true, "nxdomain");
    assert_lookup(&r, "pub.upstream.net", false, "refused");
    assert_lookup(&r, "api.openvibe.services", true, "answered");
    let asked: Vec<String> = net.dns.questions()[before..]
        .iter()
        .map(|q| q.name.clone())
        .collect();
    assert!(
        asked.iter().all(|n| n.ends_with(".openvibe.services")),
        "only OpenVibe names reach the upstream: {asked:?}"
    );
    // Each name is resolved once per job, whatever the tool's resolver asked.
    assert_eq!(
        net.dns
            .count_type("nothing.openvibe.services", RecordType::A),
        1
    );
    assert!(net.upstream_requests().is_empty());
    end(net);
}

// ---- IP literals ----------------------------------------------------------------------------------

fn literal_expect(mode: &str, id: &str) -> Expect {
    if mode == "deny" {
        return Expect::Errors;
    }
    if id.contains("203.0.113.10") {
        return if mode == "public" {
            Expect::Upstream
        } else if id.starts_with("https:") {
            Expect::TlsDenied
        } else {
            Expect::Refused
        };
    }
    if id.starts_with("tcp ") {
        return Expect::Refused;
    }
    let host = id.split('/').nth(2).unwrap_or("");
    if ["[fe80::1]", "224.0.0.1", "255.255.255.255"].contains(&host) {
        // A link-local address without a scope, multicast, broadcast: the kernel refuses the
        // connect itself (EINVAL); nothing may answer either way.
        return Expect::NotReached;
    }
    // Everything else lands on the proxy (every IPv4 and IPv6 destination is local to the
    // job's namespace; 0.0.0.0 means this host), which refuses it.
    if id.starts_with("https:") {
        Expect::TlsDenied
    } else {
        Expect::Refused
    }
}

/// IP literals in every spelling: refused under `openvibe-only` (even a public address), and
/// under `public` refused for loopback, the LAN, metadata and the Link's own addresses while
/// the public test host passes over HTTP and TLS.
#[test]
fn ip_literals_are_refused_in_every_spelling_and_only_a_public_address_passes_under_public() {
    let _h = exclusive();
    let net = EgressNet::new("egress-literals");
    for mode in ["openvibe-only", "public"] {
        let before = net.upstream_requests().len();
        let r = net.run(HOSTILE, "literals", mode, json!({"ca": net.ca}));
        check_all(
            &format!("{mode} literals"),
            &r["output"]["attempts"],
            |id| literal_expect(mode, id),
        );
        for ip in [
            "127.0.0.1",
            "127.0.0.2",
            "10.77.0.2",
            "169.254.169.254",
            "100.127.0.1",
            "10.77.0.1",
        ] {
            assert_has(&r, ip, 80, false);
        }
        for ip in ["127.0.0.1", "10.77.0.2", "169.254.169.254", "100.127.0.1"] {
            assert_has(&r, ip, 443, false);
        }
        if mode == "public" {
            assert_allowed_with_bytes(&r, UPSTREAM_IP, 80);
            assert_allowed_with_bytes(&r, UPSTREAM_IP, 443);
            assert_allowed_only(&r, &[(UPSTREAM_IP, 80), (UPSTREAM_IP, 443)]);
            let new = &net.upstream_requests()[before..];
            assert_eq!(new.len(), 2, "{new:?}");
            assert!(new.iter().all(|q| q["path"] == "/literal"), "{new:?}");
        } else {
            assert_has(&r, UPSTREAM_IP, 80, false);
            assert_has(&r, UPSTREAM_IP, 443, false);
            assert_allowed_only(&r, &[]);
            assert_eq!(net.upstream_requests().len(), before);
        }
        assert_record_ports(&r);
    }
    assert_upstream_from_link(&net);
    assert_eq!(net.dns.total(), 0, "{:?}", net.dns.questions());
    end(net);
}

// ---- redirects --------------------------------------------------------------------------------------

/// A redirect from an allowed host to a refused one fails at the second hop, whatever form the
/// target takes (another name, an internal name, an IP literal, metadata), over HTTP and TLS;
/// a redirect to an allowed place works (the control).
#[test]
fn redirects_to_refused_destinations_fail() {
    let _h = exclusive();
    let net = EgressNet::new("egress-redirect");
    let api = "http://api.openvibe.services";
    let api_tls = "https://api.openvibe.services";
    let cases: Vec<(&str, Vec<(String, Expect)>)> = vec![
        (
            "openvibe-only",
            vec![
                (redirect(api, "http://pub.upstream.net/"), Expect::NotFound),
                (redirect(api, "http://10.77.0.2/"), Expect::Refused),
                (
                    redirect(api, "http://169.254.169.254/latest/meta-data/"),
                    Expect::Refused,
                ),
                (redirect(api, "http://2130706433/"), Expect::Refused),
                (
                    redirect(api_tls, "https://lan.upstream.net/"),
                    Expect::NotFound,
                ),
                (
                    redirect(api, "http://api.openvibe.services/final"),
                    Expect::Upstream,
                ),
            ],
        ),
        (
            "public",
            vec![
                (redirect(api, "http://lan.upstream.net/"), Expect::Refused),
                (
                    redirect(api, "http://meta.upstream.net/latest/meta-data/"),
                    Expect::Refused,
                ),
                (redirect(api, "http://127.0.0.1/"), Expect::Refused),
                (
                    redirect(api_tls, "https://mixed.upstream.net/"),
                    Expect::TlsDenied,
                ),
                (
                    redirect(api, "http://metadata.google.internal/"),
                    Expect::NotFound,
                ),
                (
                    redirect(api, "http://pub.upstream.net/final"),
                    Expect::Upstream,
                ),
            ],
        ),
    ];
    for (mode, list) in cases {
        let requests: Vec<Value> = list
            .iter()
            .map(|(url, _)| json!({"url": url, "follow": 3}))
            .collect();
        let r = net.run(
            SKILL,
            "get",
            mode,
            json!({"ca": net.ca, "requests": requests}),
        );
        let results = &r["output"]["results"];
        check_all(&format!("{mode} redirects"), results, |url| {
            list.iter()
                .find(|(u, _)| u == url)
                .map(|(_, e)| *e)
                .unwrap_or(Expect::NoSecret)
        });
        for res in results.as_array().expect("results") {
            assert_eq!(
                res["hops"][0]["status"], 302,
                "the first hop redirects: {res}"
            );
            assert_eq!(res["hops"].as_array().map(Vec::len), Some(2), "{res}");
        }
        if mode == "openvibe-only" {
            assert_has(&r, "pub.upstream.net", 53, false);
            assert_has(&r, "lan.upstream.net", 53, false);
            assert_has(&r, "10.77.0.2", 80, false);
            assert_has(&r, "169.254.169.254", 80, false);
            assert_has(&r, "127.0.0.1", 80, false);
            assert_allowed_only(
                &r,
                &[
                    ("api.openvibe.services", 80),
                    ("api.openvibe.services", 443),
                ],
            );
            // Refused by name: never asked of the upstream.
            assert_eq!(net.dns.count("pub.upstream.net"), 0);
            assert_eq!(net.dns.count("lan.upstream.net"), 0);
        } else {
            assert_has(&r, "lan.upstream.net", 80, false);
            assert_has(&r, "meta.upstream.net", 80, false);
            assert_has(&r, "127.0.0.1", 80, false);
            assert_has(&r, "mixed.upstream.net", 443, false);
            assert_has(&r, "metadata.google.internal", 53, false);
            assert_allowed_with_bytes(&r, "pub.upstream.net", 80);
            assert_allowed_only(
                &r,
                &[
                    ("api.openvibe.services", 80),
                    ("api.openvibe.services", 443),
                    ("pub.upstream.net", 80),
                ],
            );
        }
        assert_record_ports(&r);
    }
    assert!(net.dns.count("pub.upstream.net") >= 1, "the public control");
    assert_eq!(net.dns.count("metadata.google.internal"), 0);
    assert_upstream_from_link(&net);
    end(net);
}

// ---- Host and SNI -----------------------------------------------------------------------------------

fn trick_expect(id: &str) -> Expect {
    match id {
        "guess_first_synthetic" | "guess_far_synthetic" => Expect::Refused,
        "guess_synthetic_tls" => Expect::TlsDenied,
        "host_ok" | "sni_ok" | "sni_ok_host_lan" => Expect::Upstream,
        "host_lan_name"
        | "host_lan_ip"
        | "host_metadata_ip"
        | "host_loopback"
        | "host_loopback_decimal"
        | "host_other"
        | "host_suffix_trick"
        | "host_prefix_trick"
        | "host_missing" => Expect::Refused,
        "sni_lan_name" | "sni_other" | "sni_missing" => Expect::TlsDenied,
        "plain_http_on_443" | "tls_on_80" => Expect::NotReached,
        "other_port_8080" | "other_port_22" => Expect::ConnFails,
        // Two Host headers, an absolute-form target, a pipelined second request for another
        // host: the contract does not say refuse or pass; the proxy connects to the checked
        // address either way, so nothing but the upstream may answer.
        _ => Expect::NoSecret,
    }
}

/// A connection made for an allowed name must say that name: another Host (LAN, metadata,
/// loopback, another allowed name: domain fronting), none, an SNI of another name or none, a
/// guessed synthetic address: all refused, recorded under the name, and nothing but the
/// checked upstream address is ever connected to (what is said inside TLS reaches only it).
#[test]
fn host_and_sni_mismatches_are_refused() {
    let _h = exclusive();
    let net = EgressNet::new("egress-tricks");
    for (mode, allowed, other) in [
        (
            "openvibe-only",
            "api.openvibe.services",
            "www.openvibe.services",
        ),
        ("public", "pub.upstream.net", "evil.upstream.net"),
    ] {
        let before = net.upstream_requests().len();
        let r = net.run(
            HOSTILE,
            "tricks",
            mode,
            json!({"allowed": allowed, "other": other, "ca": net.ca}),
        );
        let out = &r["output"];
        let addr = out["allowed_address"].as_str().unwrap_or("");
        assert!(synthetic(addr), "{mode}: {out}");
        check_all(&format!("{mode} tricks"), &out["attempts"], trick_expect);
        assert_has(&r, allowed, 80, true);
        assert_has(&r, allowed, 443, true);
        assert_has(&r, allowed, 80, false);
        assert_has(&r, allowed, 443, false);
        assert_allowed_only(&r, &[(allowed, 80), (allowed, 443)]);
        assert_record_ports(&r);
        for q in &net.upstream_requests()[before..] {
            if q["tls"] == true {
                assert_eq!(q["sni"], allowed, "a mismatched SNI got through: {q}");
            }
        }
        assert_eq!(net.dns.count(other), 0, "{mode}: {other} was resolved");
    }
    assert_eq!(net.dns.count("lan.upstream.net"), 0);
    assert_upstream_from_link(&net);
    end(net);
}

// ---- every request on a connection ------------------------------------------------------------

/// Plain HTTP keeps a connection open for more requests: each one is judged, not only the
/// first. A later or pipelined request for another host (another allowed name, the LAN's, none,
/// an absolute-form target) is refused with the runner's code and ends the connection; a
/// request smuggled inside another by an ambiguous body length never reaches the upstream as a
/// request; obs-fold and a bare CR end the connection with a 400; an upgrade to anything but a
/// WebSocket (h2c, whose requests could name any host once the sockets are joined) is refused
/// though the upstream would answer it 101. Three requests for the right host on one
/// connection all work (the control).
#[test]
fn every_request_on_a_kept_alive_connection_is_checked() {
    let _h = exclusive();
    let net = EgressNet::new("egress-fronting");
    for (mode, allowed, other) in [
        (
            "openvibe-only",
            "api.openvibe.services",
            "www.openvibe.services",
        ),
        ("public", "pub.upstream.net", "evil.upstream.net"),
    ] {
        let before = net.upstream_requests().len();
        let r = net.run(
            HOSTILE,
            "fronting",
            mode,
            json!({"allowed": allowed, "other": other}),
        );
        let cases = r["output"]["cases"].as_array().expect("cases").clone();
        let case = |id: &str| {
            cases
                .iter()
                .find(|c| c["id"] == id)
                .cloned()
                .unwrap_or_else(|| panic!("{mode}: no case {id}: {}", r["output"]))
        };
        let mut bad = Vec::new();
        let mut expect = |id: &str, statuses: Value, refusals: Value, closed: bool| {
            let c = case(id);
            let upstream_only = c["servers"]
                .as_array()
                .is_some_and(|s| s.iter().all(|x| x == "upstream"));
            if c["statuses"] != statuses
                || c["refusals"] != refusals
                || (closed && c["closed"] != true)
                || !upstream_only
            {
                bad.push(format!(
                    "  {id}: expected {statuses} {refusals} closed={closed}, got {c}"
                ));
            }
        };
        expect("keep_alive_ok", json!([200, 200, 200]), json!([]), false);
        for id in [
            "keep_alive_other",
            "keep_alive_lan",
            "keep_alive_no_host",
            "pipelined_other",
        ] {
            expect(id, json!([200, 403]), json!(["host_mismatch"]), true);
        }
        expect(
            "keep_alive_absolute",
            json!([200, 403]),
            json!(["bad_request"]),
            true,
        );
        expect("smuggle_first", json!([403]), json!(["bad_request"]), true);
        expect("smuggle_second", json!([200, 200]), json!([]), true);
        expect("upgrade_ok", json!([101]), json!([]), false);
        expect(
            "upgrade_other",
            json!([200, 403]),
            json!(["host_mismatch"]),
            true,
        );
        expect(
            "upgrade_h2c_first",
            json!([403]),
            json!(["bad_request"]),
            true,
        );
        expect(
            "upgrade_h2c_second",
            json!([200, 403]),
            json!(["bad_request"]),
            true,
        );
        expect("obs_fold_second", json!([200, 400]), json!([]), true);
        expect("bare_cr_second", json!([200, 400]), json!([]), true);
        if case("upgrade_ok")["echoed"] != true {
            bad.push(format!(
                "  upgrade_ok: the upgraded tunnel did not carry bytes both ways: {}",
                case("upgrade_ok")
            ));
        }
        assert!(bad.is_empty(), "{mode}:\n{}", bad.join("\n"));

        let reached: Vec<Value> = net.upstream_requests()[before..].to_vec();
        let paths: Vec<&str> = reached.iter().filter_map(|q| q["path"].as_str()).collect();
        for q in &reached {
            assert_eq!(
                q["host"], allowed,
                "{mode}: another host reached the upstream: {q}"
            );
            let path = q["path"].as_str().unwrap_or("");
            assert!(
                ["/ka1", "/ka2", "/ka3", "/first", "/pipe1", "/front", "/ws"].contains(&path),
                "{mode}: a request that should have been stopped reached the upstream: {q}"
            );
        }
        for p in ["/ka1", "/ka2", "/ka3"] {
            assert_eq!(
                paths.iter().filter(|x| **x == p).count(),
                1,
                "{mode}: {paths:?}"
            );
        }
        assert_has(&r, allowed, 80, true);
        assert_has(&r, allowed, 80, false);
        assert_allowed_only(&r, &[(allowed, 80)]);
        assert_record_ports(&r);
        assert_eq!(net.dns.count(other), 0, "{mode}: {other} was resolved");
    }
    assert_eq!(net.dns.count("lan.upstream.net"), 0);
    assert_upstream_from_link(&net);
    end(net);
}

// ---- the Link's networks ----------------------------------------------------------------------

/// A network the Link reaches by a route of its own, which its address's prefix does not
/// show (an address given as a /32, or a DHCPv6 /128 whose /64 comes as a route), is the
/// Link's all the same: under `public` neither an address in it nor a name resolving into
/// it is reached, and nothing there is hit, while the internet (the default route) is.
/// Before, only the interfaces' prefixes were read, and such a LAN with public
/// addresses was open to every `public` job. A range the Link takes as its own on `lo`
/// (a `local` route) is its own too: before, a job reached the Link's own service there.
#[test]
fn a_network_the_link_routes_to_is_its_own() {
    let _h = exclusive();
    let net = EgressNet::new("egress-routed");
    let requests = json!([
        {"url": format!("http://{ROUTED_LAN_IP}/")},
        {"url": "http://corp.upstream.net/"},
        {"url": format!("http://{ANYIP_IP}/")},
        {"url": "http://pub.upstream.net/control"},
    ]);
    let r = net.run(
        SKILL,
        "get",
        "public",
        json!({"ca": net.ca, "requests": requests}),
    );
    let results = r["output"]["results"].as_array().expect("results").clone();
    for res in &results[..3] {
        assert_eq!(
            (&res["status"], &res["refused"]),
            (&json!(403), &json!("address_refused")),
            "{res}"
        );
    }
    assert_eq!(results[3]["status"], 200, "{}", results[3]);
    let hit: Vec<String> = net
        .hits()
        .into_keys()
        .filter(|k| k.contains(ROUTED_LAN_IP) || k.contains(ANYIP_IP))
        .collect();
    assert!(
        hit.is_empty(),
        "the Link's own networks were reached: {hit:?}"
    );
    assert_has(&r, ROUTED_LAN_IP, 80, false);
    assert_has(&r, ANYIP_IP, 80, false);
    assert_has(&r, "corp.upstream.net", 80, false);
    assert_allowed_only(&r, &[("pub.upstream.net", 80)]);
    assert_upstream_from_link(&net);
    end(net);
}

// ---- aliases ------------------------------------------------------------------------------------

/// A name the job may reach, aliased (CNAME) to a name no job may look up (`intranet.corp`),
/// is NXDOMAIN, under either `net`, and the host behind it is never reached, though its
/// address would pass: before, the alias reached it, and the never-resolved suffixes meant
/// nothing to a tool with a domain of its own. An alias to a public name (a CDN's edge)
/// works, under `openvibe-only` too.
#[test]
fn an_alias_to_a_name_never_looked_up_reaches_nothing() {
    let _h = exclusive();
    let net = EgressNet::new("egress-alias");
    for (mode, hidden, cdn) in [
        (
            "public",
            "alias-corp.upstream.net",
            "alias-pub.upstream.net",
        ),
        (
            "openvibe-only",
            "alias.openvibe.services",
            "cdn.openvibe.services",
        ),
    ] {
        let before = net.upstream_requests().len();
        let requests = json!([
            {"url": format!("http://{hidden}/hidden")},
            {"url": format!("http://{cdn}/cdn")},
        ]);
        let r = net.run(
            SKILL,
            "get",
            mode,
            json!({"ca": net.ca, "requests": requests}),
        );
        let results = r["output"]["results"].as_array().expect("results").clone();
        assert_eq!(results[0]["error"], "ENOTFOUND", "{mode}: {}", results[0]);
        assert_eq!(results[1]["status"], 200, "{mode}: {}", results[1]);
        let new = &net.upstream_requests()[before..];
        let paths: Vec<&str> = new.iter().filter_map(|q| q["path"].as_str()).collect();
        assert_eq!(paths, ["/cdn"], "{mode}: what reached the upstream");
        assert!(has(&r, cdn, 80, true), "{mode}: {:#}", r["egress"]);
        assert_allowed_only(&r, &[(cdn, 80)]);
        assert_record_ports(&r);
    }
    assert_upstream_from_link(&net);
    end(net);
}

// ---- refusals a program can recognise --------------------------------------------------------

/// Every refusal on port 80 carries the `X-Skill-Runner-Refused` header with a code, and the
/// same code in a JSON body, so a tool can tell the runner's refusal from a server's 403: a
/// refused address, an IP literal under `openvibe-only`, a guessed synthetic address, a Host
/// for another name. A real 403 from the upstream has no such header.
#[test]
fn refusals_are_recognisable_by_a_program() {
    let _h = exclusive();
    let net = EgressNet::new("egress-codes");
    let cases: Vec<(&str, &str, Option<&str>)> = vec![
        (
            "public",
            "http://lan.upstream.net/",
            Some("address_refused"),
        ),
        (
            "public",
            "http://meta.upstream.net/",
            Some("address_refused"),
        ),
        ("public", "http://127.0.0.1/", Some("address_refused")),
        ("public", "http://10.77.0.2/", Some("address_refused")),
        ("public", "http://198.18.0.200/", Some("unknown_address")),
        ("public", "http://pub.upstream.net/control", None),
        ("openvibe-only", "http://203.0.113.10/", Some("ip_literal")),
        (
            "openvibe-only",
            "http://169.254.169.254/",
            Some("ip_literal"),
        ),
        (
            "openvibe-only",
            "http://api.openvibe.services/control",
            None,
        ),
    ];
    for mode in ["public", "openvibe-only"] {
        let mine: Vec<&(&str, &str, Option<&str>)> =
            cases.iter().filter(|(m, _, _)| *m == mode).collect();
        let mut requests: Vec<Value> = mine.iter().map(|(_, u, _)| json!({"url": u})).collect();
        // A Host for another name than the connection is for.
        let (allowed, other) = if mode == "public" {
            ("pub.upstream.net", "evil.upstream.net")
        } else {
            ("api.openvibe.services", "www.openvibe.services")
        };
        requests
            .push(json!({"url": format!("http://{allowed}/fronted"), "headers": {"host": other}}));
        let r = net.run(
            SKILL,
            "get",
            mode,
            json!({"ca": net.ca, "requests": requests}),
        );
        let results = r["output"]["results"].as_array().expect("results").clone();
        let mut bad = Vec::new();
        for (i, res) in results.iter().enumerate() {
            let expected = mine.get(i).map(|c| c.2).unwrap_or(Some("host_mismatch"));
            let fine = match expected {
                Some(code) => {
                    res["status"] == 403
                        && res["refused"] == code
                        && res["body"].as_str().and_then(refusal_body_code).as_deref() == Some(code)
                }
                None => res["status"] == 200 && res["refused"].is_null(),
            };
            if !fine {
                bad.push(format!("  expected {expected:?}: {res}"));
            }
            // A name's refused address is the runner's to know, not the tool's.
            let body = res["body"].as_str().unwrap_or("");
            let url = mine.get(i).map(|c| c.1).unwrap_or("");
            if url.contains(".upstream.net")
                && ["10.77.0.2", "169.254"].iter().any(|a| body.contains(a))
            {
                bad.push(format!("  told the address {url} resolves to: {body}"));
            }
        }
        assert!(bad.is_empty(), "{mode}:\n{}", bad.join("\n"));
        assert_record_ports(&r);
    }
    end(net);
}

/// A client's pool keeps connections open after their requests: 50 `fetch` calls at once to
/// one host, then 30 to another, are 80 connections, past the job's 64. The runner closes
/// idle ones for the new ones instead of refusing them: all 80 get the upstream's answer.
#[test]
fn idle_pooled_connections_are_closed_for_new_ones_at_the_cap() {
    let _h = exclusive();
    let net = EgressNet::new("egress-pool");
    let mut urls: Vec<String> = (0..50)
        .map(|i| format!("http://api.openvibe.services/a{i}"))
        .collect();
    urls.extend((0..30).map(|i| format!("http://pub.upstream.net/b{i}")));
    let r = net.run(SKILL, "fetch", "public", json!({"urls": urls, "batch": 50}));
    let results = r["output"]["results"].as_array().expect("results");
    assert_eq!(results.len(), 80, "{r}");
    let failed: Vec<&Value> = results
        .iter()
        .filter(|x| x["status"] != 200 || !x["refused"].is_null())
        .collect();
    assert!(
        failed.is_empty(),
        "{} of 80 failed: {failed:?}",
        failed.len()
    );
    assert_eq!(net.upstream_requests().len(), 80);
    assert_allowed_only(
        &r,
        &[("api.openvibe.services", 80), ("pub.upstream.net", 80)],
    );
    assert_no_refusals(&r);
    end(net);
}

// ---- public: internal addresses by name --------------------------------------------------------

/// One `public` job that GETs every URL of `list`, each checked against its expectation
/// (`what` names the list in a failure); the job's result.
fn get_public(net: &EgressNet, what: &str, list: &[(&str, Expect)]) -> Value {
    let requests: Vec<Value> = list.iter().map(|(u, _)| json!({"url": u})).collect();
    let r = net.run(
        SKILL,
        "get",
        "public",
        json!({"ca": net.ca, "requests": requests}),
    );
    check_all(what, &r["output"]["results"], |url| {
        list.iter()
            .find(|(u, _)| *u == url)
            .map(|(_, e)| *e)
            .unwrap_or(Expect::NoSecret)
    });
    r
}

/// Under `public`, names that resolve to the LAN, metadata, loopback, to a public and a private
/// address at once, or only to IPv4-mapped loopback are refused at connect time (the proxy's
/// own lookup decides), over HTTP and TLS; names under a denied suffix are refused by DNS and
/// never forwarded; other ports are refused at once; a public name in the same job works.
#[test]
fn public_refuses_names_that_resolve_to_internal_addresses() {
    let _h = exclusive();
    let net = EgressNet::new("egress-internal");
    let list: Vec<(&str, Expect)> = vec![
        ("http://lan.upstream.net/", Expect::Refused),
        ("https://lan.upstream.net/", Expect::TlsDenied),
        (
            "http://meta.upstream.net/latest/meta-data/",
            Expect::Refused,
        ),
        ("https://meta.upstream.net/", Expect::TlsDenied),
        ("http://loop.upstream.net/", Expect::Refused),
        ("http://mixed.upstream.net/", Expect::Refused),
        ("https://mixed.upstream.net/", Expect::TlsDenied),
        ("http://mapped.upstream.net/", Expect::Refused),
        (
            "http://metadata.google.internal/computeMetadata/v1/",
            Expect::NotFound,
        ),
        ("http://router.lan/", Expect::NotFound),
        ("http://localhost/", Expect::NotReached),
        ("http://pub.upstream.net:8080/", Expect::NotReached),
        ("http://pub.upstream.net/control", Expect::Upstream),
    ];
    let r = get_public(&net, "public internal names", &list);
    for (host, port) in [
        ("lan.upstream.net", 80),
        ("lan.upstream.net", 443),
        ("meta.upstream.net", 80),
        ("meta.upstream.net", 443),
        ("loop.upstream.net", 80),
        ("mixed.upstream.net", 80),
        ("mixed.upstream.net", 443),
        ("mapped.upstream.net", 80),
        ("metadata.google.internal", 53),
        ("router.lan", 53),
    ] {
        assert_has(&r, host, port, false);
    }
    assert_allowed_with_bytes(&r, "pub.upstream.net", 80);
    assert_allowed_only(&r, &[("pub.upstream.net", 80)]);
    assert_record_ports(&r);
    // The refusals were decided on the addresses the proxy's own lookup gave...
    for name in [
        "lan.upstream.net",
        "meta.upstream.net",
        "loop.upstream.net",
        "mixed.upstream.net",
        "mapped.upstream.net",
    ] {
        assert!(net.dns.count(name) >= 1, "{name} was never resolved");
    }
    // ... and names under a denied suffix were never forwarded.
    assert_eq!(net.dns.count("metadata.google.internal"), 0);
    assert_eq!(net.dns.count("router.lan"), 0);
    let reached: Vec<Value> = net.upstream_requests();
    assert_eq!(
        reached.len(),
        1,
        "only the control reached the upstream: {reached:?}"
    );
    assert_upstream_from_link(&net);
    end(net);
}

/// The LAN and the metadata address through the network's own NAT64 prefix, by name (the
/// names resolve only into the prefix) and written out: each one refused under `public`.
fn nat64_lan_attempts() -> Vec<(String, Expect)> {
    vec![
        ("http://nsp.upstream.net/".into(), Expect::Refused),
        (
            "http://nsp-meta.upstream.net/latest/meta-data/".into(),
            Expect::Refused,
        ),
        (
            format!("http://[{}]/", dns::nat64([10, 77, 0, 2])),
            Expect::Refused,
        ),
        (
            format!(
                "http://[{}]/latest/meta-data/",
                dns::nat64([169, 254, 169, 254])
            ),
            Expect::Refused,
        ),
    ]
}

/// Under `public`, on a network whose DNS64 uses a NAT64 prefix of its own (not the
/// well-known 64:ff9b::/96): the runner finds the prefix as RFC 7050 says (`ipv4only.arpa`),
/// and an address in it, by name or written out, is judged by the IPv4 address it carries:
/// the LAN and the metadata address through the gateway are refused as their IPv4 addresses
/// are, before any connection. An `openvibe-only` job never asks for the prefix.
#[test]
fn public_refuses_the_lan_through_the_networks_own_nat64_prefix() {
    let _h = exclusive();
    let net = EgressNet::new("egress-nat64");
    let lan = nat64_lan_attempts();
    let mut list: Vec<(&str, Expect)> = lan.iter().map(|(u, e)| (u.as_str(), *e)).collect();
    list.extend([
        ("https://nsp.upstream.net/", Expect::TlsDenied),
        ("http://pub.upstream.net/control", Expect::Upstream),
    ]);
    let r = get_public(&net, "public through NAT64", &list);
    for (host, port) in [
        ("nsp.upstream.net", 80),
        ("nsp.upstream.net", 443),
        ("nsp-meta.upstream.net", 80),
    ] {
        assert_has(&r, host, port, false);
    }
    assert_allowed_only(&r, &[("pub.upstream.net", 80)]);
    assert!(
        net.dns.discoveries() >= 1,
        "the runner never asked for the prefix"
    );
    let reached: Vec<Value> = net.upstream_requests();
    assert_eq!(
        reached.len(),
        1,
        "only the control reached the upstream: {reached:?}"
    );

    let before = net.dns.discoveries();
    let r = net.run(
        SKILL,
        "get",
        "openvibe-only",
        json!({"ca": net.ca, "requests": [{"url": "http://api.openvibe.services/"}]}),
    );
    assert_allowed_only(&r, &[("api.openvibe.services", 80)]);
    assert_eq!(
        net.dns.discoveries(),
        before,
        "only a public job asks for the prefix"
    );
    assert_upstream_from_link(&net);
    end(net);
}

/// Under `public`, when the network's resolver does not answer the question for its NAT64
/// prefix (SERVFAIL at the job's start), any IPv6 address might be in that prefix and reach
/// the LAN through the gateway: the job reaches IPv4 only. The prefix's addresses, by name
/// or written out, are refused before any connection; a name with an IPv4 address as well
/// is reached over IPv4.
#[test]
fn public_reaches_ipv4_only_when_the_nat64_prefix_is_unknown() {
    let _h = exclusive();
    let net = EgressNet::new("egress-nat64-unknown");
    net.dns.fail_discovery();
    let lan = nat64_lan_attempts();
    let mut list: Vec<(&str, Expect)> = lan.iter().map(|(u, e)| (u.as_str(), *e)).collect();
    list.extend([
        ("http://dual.upstream.net/dual", Expect::Upstream),
        ("http://pub.upstream.net/control", Expect::Upstream),
    ]);
    let r = get_public(&net, "public, NAT64 prefix unknown", &list);
    assert!(
        net.dns.discoveries() >= 1,
        "the runner never asked for the prefix"
    );
    assert_has(&r, "nsp.upstream.net", 80, false);
    assert_has(&r, "nsp-meta.upstream.net", 80, false);
    assert_allowed_only(&r, &[("dual.upstream.net", 80), ("pub.upstream.net", 80)]);
    let reached: Vec<Value> = net.upstream_requests();
    assert_eq!(
        reached.len(),
        2,
        "only the two IPv4 requests reached the upstream: {reached:?}"
    );
    assert_upstream_from_link(&net);
    end(net);
}

// ---- rebinding ----------------------------------------------------------------------------------------

/// A name that resolves to the public host first and to loopback afterwards (TTL 0): the first
/// connection works; a later one, after a new lookup by the proxy, is refused or still goes to
/// the address checked, never to the Link's loopback; a new job only gets the refusal.
#[test]
fn dns_rebinding_never_reaches_the_link() {
    let _h = exclusive();
    let net = EgressNet::new("egress-rebind");
    let r = net.run(
        SKILL,
        "get",
        "public",
        json!({"ca": net.ca, "requests": [
            {"url": "http://rebind.upstream.net/first"},
            {"url": "http://rebind.upstream.net/second"},
            {"url": "https://rebind.upstream.net/third"},
            {"url": "http://rebind.upstream.net/fourth"},
        ]}),
    );
    let results = r["output"]["results"].as_array().expect("results").clone();
    check(&results[0], Expect::Upstream)
        .unwrap_or_else(|e| panic!("the first connection: {e}: {}", results[0]));
    let mut refused_later = 0;
    for res in &results[1..] {
        let tls = res["url"].as_str().unwrap_or("").starts_with("https:");
        let refusal = if tls {
            Expect::TlsDenied
        } else {
            Expect::Refused
        };
        if check(res, refusal).is_ok() {
            refused_later += 1;
        } else {
            check(res, Expect::Upstream).unwrap_or_else(|e| {
                panic!("a later connection is refused or reaches the upstream: {e}: {res}")
            });
        }
    }
    let a_queries = net.dns.count_type("rebind.upstream.net", RecordType::A);
    assert!(a_queries >= 1);
    if a_queries >= 2 {
        assert!(
            refused_later >= 1,
            "the proxy resolved again ({a_queries} A queries; every answer after the first is \
             127.0.0.1) yet refused nothing: {results:?}"
        );
    }
    assert_allowed_with_bytes(&r, "rebind.upstream.net", 80);
    assert_allowed_only(
        &r,
        &[("rebind.upstream.net", 80), ("rebind.upstream.net", 443)],
    );

    // A new job: the upstream now only says 127.0.0.1.
    let r = net.run(
        SKILL,
        "get",
        "public",
        json!({"ca": net.ca, "requests": [
            {"url": "http://rebind.upstream.net/again"},
            {"url": "https://rebind.upstream.net/again"},
        ]}),
    );
    check_all("rebound", &r["output"]["results"], |u| {
        if u.starts_with("https:") {
            Expect::TlsDenied
        } else {
            Expect::Refused
        }
    });
    assert_has(&r, "rebind.upstream.net", 80, false);
    assert_has(&r, "rebind.upstream.net", 443, false);
    assert_allowed_only(&r, &[]);
    assert!(net
        .upstream_requests()
        .iter()
        .all(|q| q["path"] != "/again"));
    assert_upstream_from_link(&net);
    end(net);
}

// ---- UDP, ICMP, other ports ---------------------------------------------------------------------------

fn check_side_routes(mode: &str, out: &Value) {
    let mut bad = Vec::new();
    for u in out["udp"].as_array().expect("udp") {
        let id = u["id"].as_str().unwrap_or("?");
        if u["reply"] != true {
            continue;
        }
        let to_53 = id.ends_with(" 53");
        let addrs: Vec<&str> = u["dns"]["addresses"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        // A DNS query may be answered, by the runner's own responder only (every address in
        // the job's namespace is the job's own): synthetic addresses under public, nothing
        // otherwise. No other datagram gets any reply.
        let fine = to_53
            && mode != "deny"
            && if mode == "public" {
                addrs.iter().all(|a| synthetic(a))
            } else {
                addrs.is_empty() && u["dns"]["rcode"] == 3
            };
        if !fine {
            bad.push(format!("  {id}: {u}"));
        }
    }
    for t in out["tcp"].as_array().expect("tcp") {
        if let Err(e) = check(t, Expect::ConnFails) {
            bad.push(format!("  {}: {e}: {t}", t["id"]));
        }
    }
    for d in out["dns"].as_array().expect("dns") {
        let addrs: Vec<&str> = d["addresses"]
            .as_array()
            .or(d["dns"]["addresses"].as_array())
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let fine = if mode == "public" {
            addrs.iter().all(|a| synthetic(a))
        } else {
            addrs.is_empty()
        };
        if !fine {
            bad.push(format!("  {}: {d}", d["id"]));
        }
    }
    if out["icmp"]["created"] != false {
        bad.push(format!("  icmp: {}", out["icmp"]));
    }
    assert!(
        bad.is_empty(),
        "{mode}: side routes got out:\n{}",
        bad.join("\n")
    );
}

/// UDP to every host and port (DNS to the tool's own servers included), TCP to ports other than
/// 80/443, and ICMP reach nothing in any mode: no sink in the LAN, the Link or the upstream
/// counts a packet, no reply but the runner's own DNS answer comes back, the upstream DNS
/// never hears the probe name, and nothing but port-53 refusals is recorded.
#[test]
fn udp_icmp_and_other_ports_reach_nothing_in_every_mode() {
    let _h = exclusive();
    let net = EgressNet::new("egress-side");
    for mode in ["deny", "openvibe-only", "public"] {
        let probe = format!("udp-probe-{mode}.upstream.net");
        let r = net.run(HOSTILE, "side_routes", mode, json!({"probe_name": probe}));
        check_side_routes(mode, &r["output"]);
        assert_allowed_only(&r, &[]);
        assert_record_ports(&r);
        match mode {
            "deny" => assert_eq!(r["egress"], json!([]), "{r}"),
            "openvibe-only" => assert_has(&r, &probe, 53, false),
            _ => {}
        }
        if mode == "public" {
            // The probe name is one the job may reach: the runner looked it up itself, once
            // (its A and AAAA); none of the tool's own queries went out.
            assert_lookup(&r, &probe, true, "nxdomain");
            assert_eq!(net.dns.count_type(&probe, RecordType::A), 1, "{probe}");
            assert_eq!(net.dns.count(&probe), 2, "{probe}");
        } else {
            assert_eq!(net.dns.count(&probe), 0, "{probe} reached the upstream DNS");
        }
        net.assert_no_hits();
    }
    assert_eq!(net.dns.total(), 2, "{:?}", net.dns.questions());
    assert!(net.upstream_requests().is_empty());
    end(net);
}

// ---- DNS tunnels --------------------------------------------------------------------------------------

/// Random data as labels under an attacker's domain: under `openvibe-only` every lookup is
/// NXDOMAIN, recorded, and the attacker's DNS server never hears one of them. Under `public`,
/// where the job may reach the attacker's hosts anyway, each name is looked up by the runner
/// itself and answered as the upstream answers (NXDOMAIN here): the attacker's server hears
/// the runner's one A and one AAAA question per name, never the tool's own query (no TXT, no
/// query to the server the tool named), and each name is recorded once.
#[test]
fn dns_tunnels_carry_nothing_out() {
    let _h = exclusive();
    let net = EgressNet::new("egress-tunnel");
    let suffix = "exfil.upstream.net";
    for mode in ["openvibe-only", "public"] {
        let r = net.run(
            HOSTILE,
            "tunnel",
            mode,
            json!({"suffix": suffix, "count": 12}),
        );
        let out = &r["output"];
        let names = out["names"].as_array().expect("names");
        assert_eq!(names.len(), 12);
        let mut bad = Vec::new();
        for res in out["results"].as_array().expect("results") {
            let method = res["method"].as_str().unwrap_or("");
            let addrs = res["addresses"].as_array().cloned().unwrap_or_default();
            let _ = method;
            let fine = res["error"] == "ENOTFOUND" && addrs.is_empty();
            if !fine {
                bad.push(format!("  {res}"));
            }
        }
        assert!(bad.is_empty(), "{mode}:\n{}", bad.join("\n"));
        for n in names {
            let n = n.as_str().expect("name");
            if mode == "openvibe-only" {
                assert_lookup(&r, n, false, "refused");
            } else {
                assert_lookup(&r, n, true, "nxdomain");
                assert_eq!(net.dns.count_type(n, RecordType::A), 1, "{n}");
                assert_eq!(net.dns.count_type(n, RecordType::AAAA), 1, "{n}");
            }
        }
        assert_allowed_only(&r, &[]);
        assert_record_ports(&r);
        let heard = net
            .dns
            .count_where(|q| q.name.ends_with(&format!(".{suffix}")));
        let expected = if mode == "public" { 2 * names.len() } else { 0 };
        assert_eq!(heard, expected, "{mode}: what the attacker's DNS heard");
    }
    assert_eq!(net.dns.total(), 24, "{:?}", net.dns.questions());
    end(net);
}

// ---- deny ---------------------------------------------------------------------------------------------

/// Under `deny` the same tools reach nothing: DNS fails, every connection fails (allowed names,
/// the public host, the LAN, loopback, metadata, every literal spelling), and the record is
/// empty.
#[test]
fn deny_reaches_nothing_and_records_nothing() {
    let _h = exclusive();
    let net = EgressNet::new("egress-deny");
    let r = net.run(
        SKILL,
        "get",
        "deny",
        json!({"ca": net.ca, "timeout_ms": 2000, "requests": [
            {"url": "http://api.openvibe.services/"},
            {"url": "https://api.openvibe.services/"},
            {"url": "http://203.0.113.10/"},
            {"url": "http://10.77.0.2/"},
            {"url": "http://127.0.0.1/"},
            {"url": "http://169.254.169.254/latest/meta-data/"},
        ]}),
    );
    check_all("deny get", &r["output"]["results"], |_| Expect::Errors);
    assert_eq!(r["egress"], json!([]), "{r}");
    for method in ["lookup", "resolve4"] {
        let l = net.run(
            SKILL,
            "lookup",
            "deny",
            json!({"names": ["api.openvibe.services", "pub.upstream.net"], "method": method}),
        );
        for res in l["output"]["results"].as_array().expect("results") {
            assert!(
                res["error"].is_string() && res["addresses"] == json!([]),
                "{method}: {res}"
            );
        }
        assert_eq!(l["egress"], json!([]), "{l}");
    }
    let h = net.run(HOSTILE, "literals", "deny", json!({"ca": net.ca}));
    check_all("deny literals", &h["output"]["attempts"], |id| {
        literal_expect("deny", id)
    });
    assert_eq!(h["egress"], json!([]), "{h}");
    assert_eq!(net.dns.total(), 0);
    assert!(net.upstream_requests().is_empty());
    end(net);
}

#[test]
fn fetch_works_for_allowed_names_and_fails_for_refused_ones() {
    let _h = exclusive();
    let net = EgressNet::new("egress-fetch");
    // fetch() is undici, which compiles its HTTP parser to WebAssembly: the preload lets
    // exactly that module compile (runtime/harden.cjs), nothing else.
    for mode in ["openvibe-only", "public"] {
        let r = net.run(
            SKILL,
            "fetch",
            mode,
            json!({"urls": ["http://api.openvibe.services/fetched", "http://lan.upstream.net/", "http://127.0.0.1/"]}),
        );
        let results = r["output"]["results"].as_array().expect("results").clone();
        assert_eq!(results[0]["status"], 200, "{mode}: {results:?}");
        let seen: Value =
            serde_json::from_str(results[0]["body"].as_str().expect("body")).expect("json body");
        assert_eq!(seen["server"], "upstream", "{seen}");
        assert_eq!(seen["path"], "/fetched", "{seen}");
        for refused in &results[1..] {
            let status = refused["status"].as_u64();
            let error = refused["error"].as_str().unwrap_or("");
            assert!(
                (status == Some(403) && refused_of(refused)) || error == "ENOTFOUND",
                "{mode}: a refused destination fails: {refused}"
            );
        }
        assert_allowed_with_bytes(&r, "api.openvibe.services", 80);
    }
    end(net);
}

/// The added latency of one proxied HTTP request against the same request made from the
/// Link itself, in one run. A measurement, printed (`--nocapture`), never asserted: this
/// machine is shared and noisy. Each request looks its name up and opens its own connection,
/// inside the sandbox through the runner's DNS and proxy, outside with the same upstream DNS.
#[test]
fn proxied_request_latency_against_the_host() {
    let _h = exclusive();
    let net = EgressNet::new("egress-latency");
    let n = 20;
    let median = |v: &Value| -> f64 {
        let mut ms: Vec<f64> = v["ms"]
            .as_array()
            .expect("ms")
            .iter()
            .map(|x| x.as_f64().expect("a time, not a failure"))
            .collect();
        ms.sort_by(f64::total_cmp);
        ms[ms.len() / 2]
    };
    let mut sandbox = Vec::new();
    let mut host = Vec::new();
    for _round in 0..3 {
        let r = net.run(
            SKILL,
            "latency",
            "public",
            json!({"url": "http://pub.upstream.net/latency", "n": n}),
        );
        assert!(
            r["output"]["statuses"]
                .as_array()
                .expect("statuses")
                .iter()
                .all(|s| s == 200),
            "{r}"
        );
        sandbox.push(median(&r["output"]));
        let script = repo().join("test-skills/net-egress/latency.js");
        let mut child = std::process::Command::new("nsenter")
            .arg(format!("--net={}", ns_path(&net.link).display()))
            .arg("--")
            .arg(NODE)
            .arg(&script)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run node in the link namespace");
        {
            use std::io::Write;
            let input = json!({"url": "http://pub.upstream.net/latency", "n": n, "dns_server": "203.0.113.53"});
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.to_string().as_bytes())
                .expect("write the input");
        }
        let out = child.wait_with_output().expect("node on the host");
        let v: Value = serde_json::from_slice(&out.stdout).expect("host latency json");
        assert!(
            v["statuses"]
                .as_array()
                .expect("statuses")
                .iter()
                .all(|s| s == 200),
            "{v}"
        );
        host.push(median(&v));
    }
    sandbox.sort_by(f64::total_cmp);
    host.sort_by(f64::total_cmp);
    let (s, h) = (sandbox[1], host[1]);
    println!(
        "egress latency: one HTTP request (lookup + connect + GET), median of {n} x 3 rounds: \
         through the runner {s:.2} ms, from the host {h:.2} ms, added {:.2} ms ({:.2}x)",
        s - h,
        s / h
    );
    end(net);
}
