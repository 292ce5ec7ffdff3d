use super::*;
use crate::egress::sniff::{sniff, Sniff};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

struct World {
    policy: EgressPolicy,
    own: Vec<IpNet>,
    nat64: Nat64,
    table: NameTable,
}

impl World {
    /// The shipped policy, a Link at 81.2.3.4/24 and 2a01:db9:1:2::5/64, and a job whose DNS
    /// has answered openvibe.services (198.18.0.1), api.openvibe.services (198.18.0.2) and
    /// example.com (198.18.0.3).
    fn new() -> World {
        let w = World {
            policy: EgressPolicy::shipped(),
            own: vec![
                "81.2.3.4/24".parse().unwrap(),
                "2a01:db9:1:2::5/64".parse().unwrap(),
            ],
            nat64: Nat64::Known(Vec::new()),
            table: NameTable::new(256),
        };
        for n in ["openvibe.services", "api.openvibe.services", "example.com"] {
            w.table.address_for(n).unwrap();
        }
        w
    }

    fn ctx(&self) -> Context<'_> {
        Context {
            policy: &self.policy,
            own: &self.own,
            nat64: &self.nat64,
            table: &self.table,
        }
    }

    fn decide(&self, net: Net, dest: &str, sniffed: Option<&str>, resolved: &[&str]) -> Decision {
        let resolved: Vec<IpAddr> = resolved.iter().map(|s| ip(s)).collect();
        let attempt = Attempt {
            net,
            dest: sa(dest),
            sniffed,
        };
        decide(&self.ctx(), &attempt, &resolved)
    }

    fn target(&self, net: Net, dest: &str, sniffed: Option<&str>) -> Result<Target, Refusal> {
        target(
            &self.ctx(),
            &Attempt {
                net,
                dest: sa(dest),
                sniffed,
            },
        )
    }
}

fn allow(connect_to: &str, host: &str) -> Decision {
    Decision::Allow {
        connect_to: sa(connect_to),
        host: host.into(),
    }
}

fn deny(host: &str, reason: Refusal) -> Decision {
    Decision::Deny {
        host: host.into(),
        reason,
    }
}

const OV: &str = "198.18.0.1";
const API: &str = "198.18.0.2";
const EXAMPLE: &str = "198.18.0.3";
const PUBLIC4: &str = "93.184.216.34";
const PUBLIC6: &str = "2606:2800:220:1:248:1893:25c8:1946";

#[test]
fn openvibe_only_allows_the_name_it_looked_up_with_matching_sni_or_host() {
    let w = World::new();
    for (dest, name) in [(OV, "openvibe.services"), (API, "api.openvibe.services")] {
        for port in [443, 80] {
            let d = w.decide(
                Net::OpenvibeOnly,
                &format!("{dest}:{port}"),
                Some(name),
                &[PUBLIC4],
            );
            assert_eq!(
                d,
                allow(&format!("{PUBLIC4}:{port}"), name),
                "{dest}:{port}"
            );
            assert!(d.allowed());
            assert_eq!(d.host(), name);
        }
    }
    // target() says what to resolve, before anything is resolved.
    assert_eq!(
        w.target(
            Net::OpenvibeOnly,
            &format!("{OV}:443"),
            Some("openvibe.services")
        ),
        Ok(Target::Name("openvibe.services".into()))
    );
}

#[test]
fn sni_or_host_mismatch_and_absence_are_refused_in_both_modes() {
    let w = World::new();
    for net in [Net::OpenvibeOnly, Net::Public] {
        for (sniffed, reason) in [
            (
                Some("evil.com"),
                Refusal::NameMismatch {
                    expected: "openvibe.services".into(),
                    sniffed: "evil.com".into(),
                },
            ),
            (
                Some("api.openvibe.services"),
                Refusal::NameMismatch {
                    expected: "openvibe.services".into(),
                    sniffed: "api.openvibe.services".into(),
                },
            ),
            (
                Some("127.0.0.1"),
                Refusal::NameMismatch {
                    expected: "openvibe.services".into(),
                    sniffed: "127.0.0.1".into(),
                },
            ),
            (
                None,
                Refusal::NoSniffedName {
                    expected: "openvibe.services".into(),
                },
            ),
        ] {
            let d = w.decide(net, &format!("{OV}:443"), sniffed, &[PUBLIC4]);
            assert_eq!(
                d,
                deny("openvibe.services", reason.clone()),
                "{net:?} {sniffed:?}"
            );
        }
    }
}

#[test]
fn openvibe_only_refuses_ip_literals_of_every_kind() {
    let w = World::new();
    for dest in [
        "93.184.216.34:443",
        "1.1.1.1:80",
        "127.0.0.1:443",
        "169.254.169.254:80",
        "10.0.0.1:443",
        "[2606:4700::1111]:443",
        "[::1]:443",
    ] {
        let d = w.decide(
            Net::OpenvibeOnly,
            dest,
            Some("openvibe.services"),
            &[PUBLIC4],
        );
        let want_ip = sa(dest).ip();
        assert_eq!(
            d,
            deny(&want_ip.to_string(), Refusal::IpLiteral(want_ip)),
            "{dest}"
        );
    }
}

#[test]
fn synthetic_addresses_the_job_did_not_get_are_refused() {
    let w = World::new();
    for net in [Net::OpenvibeOnly, Net::Public] {
        for dest in [
            "198.18.0.4:443",
            "198.18.0.0:443",
            "198.19.255.255:80",
            "198.18.200.1:443",
        ] {
            let d = w.decide(net, dest, Some("openvibe.services"), &[PUBLIC4]);
            let a = sa(dest).ip();
            assert_eq!(
                d,
                deny(&a.to_string(), Refusal::UnknownSynthetic(a)),
                "{net:?} {dest}"
            );
        }
    }
}

#[test]
fn a_name_answered_under_public_is_not_allowed_under_openvibe_only() {
    // The same table is per job, so this only happens if a job's net were changed midway;
    // the decision re-checks the name anyway.
    let w = World::new();
    let d = w.decide(
        Net::OpenvibeOnly,
        &format!("{EXAMPLE}:443"),
        Some("example.com"),
        &[PUBLIC4],
    );
    assert_eq!(d, deny("example.com", Refusal::Name("example.com".into())));
}

#[test]
fn deny_and_other_ports_are_refused() {
    let w = World::new();
    assert_eq!(
        w.decide(
            Net::Deny,
            &format!("{OV}:443"),
            Some("openvibe.services"),
            &[PUBLIC4]
        ),
        deny("openvibe.services", Refusal::NetDenied)
    );
    assert_eq!(
        w.decide(Net::Deny, "93.184.216.34:443", None, &[]),
        deny("93.184.216.34", Refusal::NetDenied)
    );
    for port in [22, 53, 8080, 8443, 0] {
        for net in [Net::OpenvibeOnly, Net::Public] {
            assert_eq!(
                w.decide(
                    net,
                    &format!("{OV}:{port}"),
                    Some("openvibe.services"),
                    &[PUBLIC4]
                ),
                deny("openvibe.services", Refusal::Port(port))
            );
        }
    }
    // A policy serving 443 only refuses 80.
    let mut w = World::new();
    w.policy.ports = vec![443];
    assert_eq!(
        w.decide(
            Net::OpenvibeOnly,
            &format!("{OV}:80"),
            Some("openvibe.services"),
            &[PUBLIC4]
        ),
        deny("openvibe.services", Refusal::Port(80))
    );
}

#[test]
fn public_ip_literals_are_judged_by_address() {
    let w = World::new();
    for (dest, ok) in [
        ("93.184.216.34:443", true),
        ("1.1.1.1:80", true),
        ("[2606:4700:4700::1111]:443", true),
        ("[::ffff:8.8.8.8]:443", true),
        ("127.0.0.1:443", false),
        ("127.0.0.53:80", false),
        ("0.0.0.0:80", false),
        ("10.0.0.1:443", false),
        ("172.16.5.4:80", false),
        ("192.168.1.1:80", false),
        ("100.64.0.1:443", false),
        ("169.254.169.254:80", false),
        ("224.0.0.251:80", false),
        ("255.255.255.255:80", false),
        ("81.2.3.4:443", false),  // the Link itself
        ("81.2.3.77:443", false), // its on-link network
        ("[::1]:443", false),
        ("[::]:443", false),
        ("[::ffff:127.0.0.1]:80", false),
        ("[::ffff:169.254.169.254]:80", false),
        ("[64:ff9b::a9fe:a9fe]:80", false),
        ("[2002:a9fe:a9fe::]:80", false),
        ("[fe80::1]:443", false),
        ("[fd00:ec2::254]:80", false),
        ("[2a01:db9:1:2::77]:443", false), // the Link's IPv6 neighbour
        ("[ff02::1]:443", false),
    ] {
        let d = w.decide(Net::Public, dest, None, &[]);
        assert_eq!(d.allowed(), ok, "{dest}: {d:?}");
        let a = sa(dest);
        assert_eq!(d.host(), a.ip().to_canonical().to_string(), "{dest}");
        if ok {
            // Connected to as is; IPv4-mapped becomes IPv4.
            assert_eq!(
                d,
                allow(
                    &SocketAddr::new(a.ip().to_canonical(), a.port()).to_string(),
                    d.host()
                ),
                "{dest}"
            );
        } else {
            assert!(
                matches!(
                    d,
                    Decision::Deny {
                        reason: Refusal::Address { .. },
                        ..
                    }
                ),
                "{dest}"
            );
        }
    }
    // The SNI/Host is not what routes an IP-literal connection: any or none is fine.
    for sniffed in [
        None,
        Some("evil.com"),
        Some("93.184.216.34"),
        Some("openvibe.services"),
    ] {
        assert_eq!(
            w.decide(Net::Public, "93.184.216.34:443", sniffed, &[]),
            allow("93.184.216.34:443", "93.184.216.34")
        );
    }
    assert_eq!(
        w.target(Net::Public, "93.184.216.34:443", None),
        Ok(Target::Literal(ip("93.184.216.34")))
    );
}

#[test]
fn public_names_connect_to_the_first_checked_address() {
    let w = World::new();
    assert_eq!(
        w.decide(
            Net::Public,
            &format!("{EXAMPLE}:443"),
            Some("example.com"),
            &[PUBLIC4, "93.184.216.35"]
        ),
        allow(&format!("{PUBLIC4}:443"), "example.com")
    );
    assert_eq!(
        w.decide(
            Net::Public,
            &format!("{EXAMPLE}:80"),
            Some("example.com"),
            &[PUBLIC6, PUBLIC4]
        ),
        allow(&format!("[{PUBLIC6}]:80"), "example.com")
    );
    assert_eq!(
        w.decide(
            Net::Public,
            &format!("{EXAMPLE}:443"),
            Some("example.com"),
            &["::ffff:93.184.216.34"]
        ),
        allow(&format!("{PUBLIC4}:443"), "example.com")
    );
    // The connection's port is the tool's, whatever the resolver said.
    assert_eq!(
        w.decide(
            Net::Public,
            &format!("{EXAMPLE}:80"),
            Some("example.com"),
            &[PUBLIC4]
        ),
        allow(&format!("{PUBLIC4}:80"), "example.com")
    );
}

#[test]
fn a_name_with_any_denied_address_is_refused_whole() {
    let w = World::new();
    for net in [Net::Public, Net::OpenvibeOnly] {
        let (dest, name) = if net == Net::Public {
            (EXAMPLE, "example.com")
        } else {
            (OV, "openvibe.services")
        };
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "198.18.0.1", // a synthetic address handed back by a hostile resolver
            "81.2.3.4",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::7f00:1",
            "fd00:ec2::254",
            "fe80::1",
            "2a01:db9:1:2::1",
        ] {
            for resolved in [
                vec![bad],
                vec![PUBLIC4, bad],
                vec![bad, PUBLIC4],
                vec![PUBLIC4, PUBLIC6, bad],
            ] {
                let d = w.decide(net, &format!("{dest}:443"), Some(name), &resolved);
                match &d {
                    Decision::Deny {
                        host,
                        reason: Refusal::Address { ip: denied, .. },
                    } => {
                        assert_eq!(host, name);
                        assert_eq!(*denied, ip(bad), "{net:?} {resolved:?}");
                    }
                    other => panic!("{net:?} {resolved:?}: {other:?}"),
                }
            }
        }
    }
}

/// An answer whose chain passes through a name never looked up (a single label, a
/// never-resolved suffix, an IP literal written as a name) is refused whatever the job's
/// `net`; a chain through public names (a CDN's) passes.
#[test]
fn an_answer_through_a_name_never_looked_up_is_refused() {
    let p = EgressPolicy::shipped();
    assert_eq!(
        chain_refused(&p, ["api.openvibe.services.", "edge.cdn.example.net."]),
        None
    );
    assert_eq!(chain_refused(&p, Vec::<&str>::new()), None);
    for bad in [
        "intranet.corp.",
        "printer.lan",
        "router.",
        "nas.home.arpa.",
        "127.0.0.1.",
    ] {
        assert_eq!(
            chain_refused(&p, ["alias.example.com.", "alias.example.com.", bad]),
            Some(bad.trim_end_matches('.').to_string()),
            "{bad}"
        );
    }
}

/// A tool is told an address was refused, but not which, when it asked for a name: the
/// address is the upstream's answer, which the job's DNS never gives it. For an IP
/// literal it wrote itself it is told the whole reason; the log always gets it.
#[test]
fn a_refused_names_address_is_not_told_to_the_tool() {
    let w = World::new();
    let by_name = w.decide(
        Net::Public,
        &format!("{EXAMPLE}:80"),
        Some("example.com"),
        &["10.77.0.2"],
    );
    let literal = w.decide(Net::Public, "10.77.0.2:80", None, &[]);
    let (Decision::Deny { host, reason }, Decision::Deny { reason: lit, .. }) =
        (&by_name, &literal)
    else {
        panic!("both refused: {by_name:?} {literal:?}");
    };
    assert_eq!(reason.code(), RefusalCode::AddressRefused);
    assert!(
        reason.to_string().contains("10.77.0.2"),
        "the log's: {reason}"
    );
    let told = reason.told(host, true);
    assert_eq!(
        told,
        "example.com resolves to an address this job may not reach"
    );
    assert!(!told.contains("10.") && !told.contains("private"), "{told}");
    assert_eq!(lit.told("10.77.0.2", false), lit.to_string());
    assert!(lit.told("10.77.0.2", false).contains("10.77.0.2"));
}

/// A tool that writes an IP literal of the Link's own network is told the address is the
/// Link's, but not the network's prefix or length, directly or inside an IPv6 form (the
/// log keeps them); the refusal itself still marks that one address as the Link's.
#[test]
fn the_links_own_network_is_not_told_to_the_tool() {
    let w = World::new();
    for literal in [
        "81.2.3.9:80",
        "[2a01:db9:1:2::9]:443",
        "[::ffff:81.2.3.9]:80",
    ] {
        let Decision::Deny { host, reason } = w.decide(Net::Public, literal, None, &[]) else {
            panic!("{literal} is the Link's own");
        };
        let (log, told) = (reason.to_string(), reason.told(&host, false));
        assert!(
            log.contains("/24") || log.contains("/64"),
            "the log's: {log}"
        );
        assert!(told.contains("the Link's own address or network"), "{told}");
        assert!(
            told.contains(&host) && !told.contains('/') && !told.contains("81.2.3.0"),
            "told {told}"
        );
    }
}

#[test]
fn public_never_reaches_the_azure_platform_address() {
    // 168.63.129.16 (WireServer) answers only from inside an Azure host, and the proxy
    // connects as root, which the guest agent's firewall lets through.
    let w = World::new();
    let literal = w.decide(Net::Public, "168.63.129.16:80", None, &[]);
    let by_name = w.decide(
        Net::Public,
        &format!("{EXAMPLE}:80"),
        Some("example.com"),
        &["168.63.129.16"],
    );
    let mapped = w.decide(Net::Public, "[::ffff:168.63.129.16]:80", None, &[]);
    for (d, host) in [
        (literal, "168.63.129.16"),
        (by_name, "example.com"),
        (mapped, "168.63.129.16"),
    ] {
        match &d {
            Decision::Deny {
                host: h,
                reason: reason @ Refusal::Address { ip: denied, .. },
            } => {
                assert_eq!(h, host);
                assert_eq!(denied.to_canonical(), ip("168.63.129.16"), "{d:?}");
                assert_eq!(reason.code(), RefusalCode::AddressRefused);
                assert_eq!(reason.code().as_str(), "address_refused");
            }
            other => panic!("{host}: {other:?}"),
        }
    }
}

#[test]
fn public_judges_the_networks_own_nat64_prefix_by_the_ipv4_it_carries() {
    // A network whose DNS64 answered ipv4only.arpa inside 2a0d:64::/96 (and another
    // inside a /48, where RFC 6052 splits the address around the u octet).
    let mut w = World::new();
    w.nat64 = Nat64::Known(crate::egress::nat64::prefixes_of(&[
        ip_v6("2a0d:64::c000:aa"),
        ip_v6("2a0e:99:122:c000:0:aa00::"),
    ]));
    assert_eq!(w.nat64.prefixes().len(), 2, "{:?}", w.nat64);
    for bad in [
        "2a0d:64::a4d:2",             // 10.77.0.2
        "2a0d:64::a9fe:a9fe",         // 169.254.169.254
        "2a0d:64::7f00:1",            // 127.0.0.1
        "2a0d:64::5102:305",          // 81.2.3.5, the Link's own network
        "2a0e:99:122:ac10:1:100::",   // 172.16.1.1
        "2a0e:99:122:a9fe:a9:fe00::", // 169.254.169.254
    ] {
        let literal = w.decide(Net::Public, &format!("[{bad}]:80"), None, &[]);
        let by_name = w.decide(
            Net::Public,
            &format!("{EXAMPLE}:443"),
            Some("example.com"),
            &[bad],
        );
        for d in [literal, by_name] {
            match &d {
                Decision::Deny {
                    reason:
                        Refusal::Address {
                            reason: DenyReason::Embedded { form, .. },
                            ..
                        },
                    ..
                } => assert!(form.contains("NAT64 prefix of this network"), "{form}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
    // A public IPv4 address through the same gateway, and IPv6 outside the prefixes.
    for good in ["2a0d:64::5db8:d822", "2a0e:99:122:5db8:d8:2200::", PUBLIC6] {
        let d = w.decide(Net::Public, &format!("[{good}]:443"), None, &[]);
        assert!(d.allowed(), "{good}: {d:?}");
    }
    // Without the discovery the same address would go out: what the prefix guards.
    let plain = World::new();
    assert!(plain
        .decide(Net::Public, "[2a0d:64::a4d:2]:80", None, &[])
        .allowed());
}

#[test]
fn public_reaches_ipv4_only_when_the_networks_nat64_prefix_is_unknown() {
    // The resolver did not answer ipv4only.arpa at the job's start: any IPv6 address
    // might be in the network's own NAT64 prefix.
    let mut w = World::new();
    w.nat64 = Nat64::Unknown;
    let unknown = |d: &Decision, ip6: &str| match d {
        Decision::Deny {
            reason:
                Refusal::Address {
                    ip: got,
                    reason: DenyReason::Nat64Unknown,
                },
            ..
        } => assert_eq!(*got, ip(ip6)),
        other => panic!("{ip6}: {other:?}"),
    };
    let by_name = |w: &World, resolved: &[&str]| {
        w.decide(
            Net::Public,
            &format!("{EXAMPLE}:443"),
            Some("example.com"),
            resolved,
        )
    };
    for literal in ["2a0d:64::a4d:2", PUBLIC6] {
        let d = w.decide(Net::Public, &format!("[{literal}]:443"), None, &[]);
        unknown(&d, literal);
    }
    // IPv4, written out or IPv4-mapped, still goes out.
    for v4 in [PUBLIC4, "::ffff:93.184.216.34"] {
        let dest: SocketAddr = SocketAddr::new(ip(v4), 443);
        match w.decide(Net::Public, &dest.to_string(), None, &[]) {
            Decision::Allow { connect_to, .. } => assert_eq!(connect_to, sa("93.184.216.34:443")),
            other => panic!("{v4}: {other:?}"),
        }
    }
    // A name's IPv6 addresses are left out: reached over IPv4 if it has it ...
    match by_name(&w, &[PUBLIC6, PUBLIC4]) {
        Decision::Allow { connect_to, host } => {
            assert_eq!(connect_to, sa("93.184.216.34:443"));
            assert_eq!(host, "example.com");
        }
        other => panic!("{other:?}"),
    }
    // ... refused without it, and refused whole when another address is denied anyway.
    unknown(&by_name(&w, &[PUBLIC6]), PUBLIC6);
    match by_name(&w, &[PUBLIC6, "10.77.0.2"]) {
        Decision::Deny {
            reason:
                Refusal::Address {
                    ip: got,
                    reason: DenyReason::Range { .. },
                },
            ..
        } => assert_eq!(got, ip("10.77.0.2")),
        other => panic!("{other:?}"),
    }
    // With the prefix known (none: no DNS64), IPv6 goes out as before.
    w.nat64 = Nat64::Known(Vec::new());
    assert!(w
        .decide(Net::Public, &format!("[{PUBLIC6}]:443"), None, &[])
        .allowed());
    assert!(by_name(&w, &[PUBLIC6]).allowed());
}

fn ip_v6(s: &str) -> std::net::Ipv6Addr {
    s.parse().unwrap()
}

#[test]
fn a_name_without_addresses_is_refused() {
    let w = World::new();
    assert_eq!(
        w.decide(
            Net::Public,
            &format!("{EXAMPLE}:443"),
            Some("example.com"),
            &[]
        ),
        deny("example.com", Refusal::NoAddress("example.com".into()))
    );
}

#[test]
fn rebinding_gets_nowhere() {
    // The first lookup (by the job's DNS) gave only a synthetic address; the proxy's one lookup
    // is the one checked and the one connected to. A second, different answer is a second
    // decision, judged on its own.
    let w = World::new();
    let first = w.decide(
        Net::Public,
        &format!("{EXAMPLE}:443"),
        Some("example.com"),
        &[PUBLIC4],
    );
    assert_eq!(first, allow(&format!("{PUBLIC4}:443"), "example.com"));
    let second = w.decide(
        Net::Public,
        &format!("{EXAMPLE}:443"),
        Some("example.com"),
        &["127.0.0.1"],
    );
    assert!(!second.allowed());
    // Whatever the resolver says, connect_to is always one of the addresses given, checked.
    for resolved in [vec![PUBLIC4], vec![PUBLIC6], vec![PUBLIC4, PUBLIC6]] {
        if let Decision::Allow { connect_to, .. } = w.decide(
            Net::Public,
            &format!("{EXAMPLE}:443"),
            Some("example.com"),
            &resolved,
        ) {
            assert!(resolved
                .iter()
                .any(|r| ip(r).to_canonical() == connect_to.ip()));
            assert!(address_allowed(&w.policy, connect_to.ip(), &w.own, &[]).is_ok());
        }
    }
}

#[test]
fn the_mapped_form_of_a_synthetic_destination_is_the_same_destination() {
    let w = World::new();
    assert_eq!(
        w.decide(
            Net::OpenvibeOnly,
            "[::ffff:198.18.0.1]:443",
            Some("openvibe.services"),
            &[PUBLIC4]
        ),
        allow(&format!("{PUBLIC4}:443"), "openvibe.services")
    );
}

#[test]
fn refused_attempts_name_a_useful_host_and_reason() {
    let w = World::new();
    assert_eq!(
        record_host(w.ctx().table, sa("198.18.0.2:443")),
        "api.openvibe.services"
    );
    assert_eq!(
        record_host(w.ctx().table, sa("198.18.9.9:443")),
        "198.18.9.9"
    );
    assert_eq!(
        record_host(w.ctx().table, sa("[::ffff:1.2.3.4]:443")),
        "1.2.3.4"
    );
    let d = w.decide(Net::Public, "169.254.169.254:80", None, &[]);
    let Decision::Deny { reason, .. } = d else {
        panic!()
    };
    let text = reason.to_string();
    assert!(
        text.contains("169.254.169.254") && text.contains("metadata"),
        "{text}"
    );
    for r in [
        Refusal::NetDenied,
        Refusal::Port(22),
        Refusal::UnknownSynthetic(ip("198.18.0.9")),
        Refusal::Name("evil.com".into()),
        Refusal::IpLiteral(ip("1.1.1.1")),
        Refusal::NoSniffedName {
            expected: "a.b".into(),
        },
        Refusal::NameMismatch {
            expected: "a.b".into(),
            sniffed: "c.d".into(),
        },
        Refusal::NoAddress("a.b".into()),
    ] {
        assert!(!r.to_string().is_empty());
    }
}

#[test]
fn end_to_end_with_sniffed_bytes() {
    // The proxy's path: sniff the first bytes, then decide.
    let w = World::new();
    let run = |net: Net, dest: &str, bytes: &[u8]| {
        let d = sa(dest);
        let sniffed = match sniff(d.port(), bytes) {
            Sniff::Name(n) => Some(n),
            Sniff::NoName => None,
            other => panic!("{other:?}"),
        };
        w.decide(net, dest, sniffed.as_deref(), &[PUBLIC4])
    };
    let node = include_bytes!("../sniff/node20_openvibe.services.bin");
    assert!(run(Net::OpenvibeOnly, "198.18.0.1:443", node).allowed());
    assert!(!run(Net::OpenvibeOnly, "198.18.0.2:443", node).allowed()); // SNI says another name
    let get = b"GET / HTTP/1.1\r\nHost: API.openvibe.services:80\r\n\r\n";
    assert!(run(Net::OpenvibeOnly, "198.18.0.2:80", get).allowed());
    let fronted = b"GET / HTTP/1.1\r\nHost: evil.com\r\n\r\n";
    assert!(!run(Net::OpenvibeOnly, "198.18.0.1:80", fronted).allowed());
    assert!(!run(Net::Public, "198.18.0.1:80", fronted).allowed());
    let by_ip = b"GET / HTTP/1.1\r\nHost: 2130706433\r\n\r\n";
    assert!(!run(Net::OpenvibeOnly, "198.18.0.1:80", by_ip).allowed());
    assert!(!run(Net::Public, "127.0.0.1:80", by_ip).allowed());
    let no_sni = include_bytes!("../sniff/node20_no_sni.bin");
    assert!(run(Net::Public, "93.184.216.34:443", no_sni).allowed());
    assert!(!run(Net::OpenvibeOnly, "198.18.0.1:443", no_sni).allowed());
}

#[test]
fn every_refusal_has_a_stable_machine_code() {
    let v4 = ip("10.0.0.1");
    let reason = address_allowed(&EgressPolicy::shipped(), v4, &[], &[]).unwrap_err();
    let cases = [
        (Refusal::NetDenied, "net_denied"),
        (Refusal::Port(22), "port"),
        (
            Refusal::UnknownSynthetic(ip("198.18.0.9")),
            "unknown_address",
        ),
        (Refusal::Name("evil.com".into()), "name_refused"),
        (Refusal::IpLiteral(v4), "ip_literal"),
        (
            Refusal::NoSniffedName {
                expected: "a.b".into(),
            },
            "host_mismatch",
        ),
        (
            Refusal::NameMismatch {
                expected: "a.b".into(),
                sniffed: "c.d".into(),
            },
            "host_mismatch",
        ),
        (Refusal::NoAddress("a.b".into()), "no_address"),
        (Refusal::Address { ip: v4, reason }, "address_refused"),
    ];
    for (refusal, code) in cases {
        assert_eq!(refusal.code().as_str(), code, "{refusal}");
        assert_eq!(refusal.code().status(), 403);
    }
    assert_eq!(RefusalCode::UpstreamUnreachable.status(), 502);
    let all = [
        RefusalCode::NetDenied,
        RefusalCode::Port,
        RefusalCode::NameRefused,
        RefusalCode::UnknownAddress,
        RefusalCode::IpLiteral,
        RefusalCode::HostMismatch,
        RefusalCode::NoAddress,
        RefusalCode::AddressRefused,
        RefusalCode::BadRequest,
        RefusalCode::ConnectionCap,
        RefusalCode::Budget,
        RefusalCode::UpstreamUnreachable,
    ];
    let names: std::collections::HashSet<&str> = all.iter().map(|c| c.as_str()).collect();
    assert_eq!(names.len(), all.len(), "codes are distinct");
    assert!(names
        .iter()
        .all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
}
