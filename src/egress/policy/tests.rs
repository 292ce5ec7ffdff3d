use super::*;

fn shipped() -> EgressPolicy {
    EgressPolicy::shipped()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

/// The shipped file with `edit` applied to its text.
fn edited(edit: impl Fn(&str) -> String) -> Result<EgressPolicy, PolicyError> {
    EgressPolicy::from_toml_str(&edit(SHIPPED_TOML))
}

#[test]
fn the_shipped_policy_loads() {
    let p = shipped();
    assert_eq!(p.ports, vec![443, 80]);
    assert_eq!(p.allow, vec!["openvibe.services".to_string()]);
    assert!(p.ipv6_global_unicast_only);
    assert_eq!(p.dns.max_names, 256);
    assert_eq!(p.budgets.max_records, 256);
    assert_eq!(p.budgets.job_time, Duration::from_secs(30));
    // The file's ranges then the floor; every one has a reason.
    assert!(p.deny.len() > FLOOR.len() + 20);
    assert!(p.deny.iter().all(|r| !r.reason.trim().is_empty()));
    assert_eq!(p.embedded.len(), 3 + FLOOR_EMBEDDED.len());
}

#[test]
fn the_shipped_policy_loads_from_its_path() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/egress.toml");
    assert_eq!(EgressPolicy::load(&path).unwrap(), shipped());
    let missing = EgressPolicy::load(Path::new("/nonexistent/egress.toml")).unwrap_err();
    assert!(matches!(missing, PolicyError::Read { .. }));
    assert!(missing.to_string().contains("policies_dir"));
}

#[test]
fn every_range_the_issue_lists_is_in_the_shipped_file() {
    // Not counting the floor: the data itself must say it (the floor is a second layer).
    let text: toml::Table = toml::from_str(SHIPPED_TOML).unwrap();
    let ranges: Vec<String> = text["deny"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["range"].as_str().unwrap().to_string())
        .collect();
    for r in [
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "169.254.0.0/16",
        "169.254.169.254/32",
        "224.0.0.0/4",
        "255.255.255.255/32",
        "0.0.0.0/8",
        "240.0.0.0/4",
        "198.18.0.0/15",
        "192.0.2.0/24",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "::1/128",
        "::/128",
        "fe80::/10",
        "fc00::/7",
        "ff00::/8",
    ] {
        assert!(
            ranges.iter().any(|x| x == r),
            "{r} missing from egress.toml"
        );
    }
    let embedded: Vec<&str> = text["embedded_ipv4"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["prefix"].as_str().unwrap())
        .collect();
    assert_eq!(embedded, ["::ffff:0:0/96", "64:ff9b::/96", "2002::/16"]);
}

#[test]
fn specific_ranges_come_before_the_ranges_that_contain_them() {
    // First match gives the reason, so a range listed after one containing it would be dead.
    let p = shipped();
    let file_ranges = &p.deny[..p.deny.len() - FLOOR.len()];
    for (i, later) in file_ranges.iter().enumerate() {
        for earlier in &file_ranges[..i] {
            assert!(
                !earlier.range.contains(&later.range),
                "{} is shadowed by {}",
                later.range,
                earlier.range
            );
        }
    }
}

#[test]
fn invalid_policies_are_refused_with_the_reason() {
    type Edit = Box<dyn Fn(&str) -> String>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "version 2",
            Box::new(|s| s.replace("version = 1", "version = 2")),
        ),
        (
            "only 443 and 80",
            Box::new(|s| s.replace("ports = [443, 80]", "ports = [443, 8080]")),
        ),
        (
            "listed twice",
            Box::new(|s| s.replace("ports = [443, 80]", "ports = [443, 443]")),
        ),
        (
            "ports is empty",
            Box::new(|s| s.replace("ports = [443, 80]", "ports = []")),
        ),
        (
            "top-level domain",
            Box::new(|s| s.replace("allow = [\"openvibe.services\"]", "allow = [\"services\"]")),
        ),
        (
            "lowercase",
            Box::new(|s| {
                s.replace(
                    "allow = [\"openvibe.services\"]",
                    "allow = [\"OpenVibe.services\"]",
                )
            }),
        ),
        (
            "lowercase",
            Box::new(|s| {
                s.replace(
                    "allow = [\"openvibe.services\"]",
                    "allow = [\"openvibe.services.\"]",
                )
            }),
        ),
        (
            "not an ASCII host name",
            Box::new(|s| {
                s.replace(
                    "allow = [\"openvibe.services\"]",
                    "allow = [\"öpenvibe.services\"]",
                )
            }),
        ),
        (
            "not an ASCII host name",
            Box::new(|s| {
                s.replace(
                    "allow = [\"openvibe.services\"]",
                    "allow = [\"*.openvibe.services\"]",
                )
            }),
        ),
        (
            "not an ASCII host name",
            Box::new(|s| s.replace("allow = [\"openvibe.services\"]", "allow = [\"10.0.0.1\"]")),
        ),
        (
            "host bits",
            Box::new(|s| s.replace("range = \"10.0.0.0/8\"", "range = \"10.0.0.1/8\"")),
        ),
        (
            "no reason",
            Box::new(|s| s.replace("reason = \"private network (RFC 1918)\"", "reason = \" \"")),
        ),
        (
            "ipv4_offset",
            Box::new(|s| s.replace("ipv4_offset = 16", "ipv4_offset = 8")),
        ),
        (
            "ipv4_offset",
            Box::new(|s| s.replace("ipv4_offset = 16", "ipv4_offset = 97")),
        ),
        // A /64 NAT64 prefix written with its length as the offset: read from bit 64, the
        // "u" octet, the address a gateway translates to (from bit 72) would go unjudged.
        (
            "ipv4_offset = 72",
            Box::new(|s| {
                s.replace(
                    "prefix = \"2002::/16\"\nipv4_offset = 16",
                    "prefix = \"2001:db8:122:344::/64\"\nipv4_offset = 64",
                )
            }),
        ),
        (
            "starts inside bits 64 to 71",
            Box::new(|s| {
                s.replace(
                    "prefix = \"2002::/16\"\nipv4_offset = 16",
                    "prefix = \"2001:db8:122:344::/64\"\nipv4_offset = 71",
                )
            }),
        ),
        (
            "max_names",
            Box::new(|s| s.replace("max_names = 256", "max_names = 0")),
        ),
        (
            "max_names",
            Box::new(|s| s.replace("max_names = 256", "max_names = 131071")),
        ),
        (
            "max_records",
            Box::new(|s| s.replace("max_records = 256", "max_records = 0")),
        ),
        (
            "budget times",
            Box::new(|s| s.replace("job_seconds = 30", "job_seconds = 0")),
        ),
        (
            "not valid TOML",
            Box::new(|s| format!("{s}\nsurprise = 1\n")),
        ),
        (
            "not valid TOML",
            Box::new(|s| s.replace("range = \"10.0.0.0/8\"", "range = \"10.0.0.0/33\"")),
        ),
        (
            "not valid TOML",
            Box::new(|s| s.replace("ipv6_global_unicast_only = true\n", "")),
        ),
        (
            "lowercase ASCII",
            Box::new(|s| s.replace("suffix = \"lan\"", "suffix = \"LAN\"")),
        ),
    ];
    for (want, edit) in cases {
        let err = edited(edit).expect_err(want).to_string();
        assert!(err.contains(want), "{err:?} should say {want:?}");
    }
}

#[test]
fn a_file_cannot_open_what_spec_says_public_never_reaches() {
    // An operator's file that drops ranges, or all of its [[deny]] list, still denies
    // loopback, private (RFC 1918, CGNAT), link-local and metadata, multicast, and the IPv6
    // equivalents, also when carried in an embedded form; only the ranges it adds beyond
    // them (documentation, benchmarking...) are its own to open.
    let p = edited(|s| {
        s.replace("range = \"10.0.0.0/8\"", "range = \"192.0.2.0/25\"")
            .replace("range = \"100.64.0.0/10\"", "range = \"192.0.2.128/25\"")
            .replace("range = \"127.0.0.0/8\"", "range = \"192.0.0.0/29\"")
            .replace("range = \"169.254.0.0/16\"", "range = \"192.0.0.8/29\"")
            .replace(
                "range = \"169.254.169.254/32\"",
                "range = \"192.0.0.16/29\"",
            )
            .replace("range = \"fc00::/7\"", "range = \"2001:db8::/33\"")
    })
    .unwrap();
    for denied in [
        "10.1.2.3",
        "100.100.100.200",
        "127.1.2.3",
        "169.254.169.254",
        "fd00::1",
    ] {
        let reason = address_allowed(&p, ip(denied), &[], &[]).unwrap_err();
        assert!(
            reason.to_string().contains("built in"),
            "{denied}: {reason}"
        );
    }
    // A file with no ranges and no embedded forms at all, and IPv6 outside 2000::/3 let
    // through: the floor still holds.
    let bare_text = SHIPPED_TOML.split("# ---- IPv4").next().unwrap().replace(
        "ipv6_global_unicast_only = true",
        "ipv6_global_unicast_only = false",
    );
    let bare = EgressPolicy::from_toml_str(&bare_text).unwrap();
    assert!(!bare.ipv6_global_unicast_only);
    assert_eq!(bare.deny.len(), FLOOR.len());
    assert_eq!(bare.embedded.len(), FLOOR_EMBEDDED.len());
    for denied in [
        "0.0.0.0",
        "10.0.0.1",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "100.64.0.1",
        "100.100.100.200",
        "127.0.0.1",
        "169.254.169.254",
        "224.0.0.1",
        "255.255.255.255",
        "198.18.0.1",
        "::",
        "::1",
        "::a00:1",
        "64:ff9b:1::a00:1",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "fec0::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "64:ff9b::a00:1",
        "64:ff9b::a9fe:a9fe",
        "2002:c0a8:101::1",
    ] {
        let reason = address_allowed(&bare, ip(denied), &[], &[]).unwrap_err();
        assert!(
            reason.to_string().contains("built in"),
            "{denied}: {reason}"
        );
    }
    // What is public stays reachable, also in an embedded form.
    for allowed in [
        "8.8.8.8",
        "1.1.1.1",
        "2606:4700::1111",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ] {
        assert_eq!(
            address_allowed(&bare, ip(allowed), &[], &[]),
            Ok(()),
            "{allowed}"
        );
    }
}

/// An operator's file with only the required keys: no `[[deny]]`, no `[[embedded_ipv4]]`.
const MINIMAL_TOML: &str = r#"
version = 1
ports = [443, 80]
ipv6_global_unicast_only = true

[openvibe_only]
allow = ["openvibe.services"]

[public]

[dns]
max_names = 256
ttl_seconds = 300

[budget]
max_records = 256
bytes_out = 16777216
bytes_in = 67108864
job_seconds = 30
connection_seconds = 30
"#;

#[test]
fn cloud_platform_addresses_and_teredo_are_in_the_floor() {
    // Azure's WireServer (host-only: goal state, extension settings, certificates; guest
    // agents let only root reach it and the proxy connects as root), Oracle Cloud Classic's
    // metadata in the IETF protocol block, and Teredo, which carries an IPv4 address.
    let shipped = shipped();
    let reason = address_allowed(&shipped, ip("168.63.129.16"), &[], &[]).unwrap_err();
    assert!(reason.to_string().contains("Azure"), "{reason}");
    let minimal = EgressPolicy::from_toml_str(MINIMAL_TOML).unwrap();
    assert_eq!(minimal.deny.len(), FLOOR.len(), "no ranges but the floor's");
    for (denied, why) in [
        ("168.63.129.16", "Azure"),
        ("::ffff:168.63.129.16", "Azure"),
        ("64:ff9b::a83f:8110", "Azure"),
        ("192.0.0.192", "IETF protocol"),
        ("192.0.0.170", "IETF protocol"),
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo"),
        ("2001::1", "Teredo"),
    ] {
        let reason = address_allowed(&minimal, ip(denied), &[], &[]).unwrap_err();
        let text = reason.to_string();
        assert!(
            text.contains(why) && text.contains("built in"),
            "{denied}: {text}"
        );
    }
    // Their neighbours are ordinary public addresses.
    for allowed in [
        "168.63.129.15",
        "168.63.129.17",
        "192.0.1.1",
        "2001:4860:4860::8888",
    ] {
        assert_eq!(
            address_allowed(&minimal, ip(allowed), &[], &[]),
            Ok(()),
            "{allowed}"
        );
    }
}

// ---- names ---------------------------------------------------------------------------------

#[test]
fn openvibe_only_names() {
    let p = shipped();
    let cases = [
        ("openvibe.services", true),
        ("OpenVibe.Services", true),
        ("OPENVIBE.SERVICES.", true),
        ("api.openvibe.services", true),
        ("a.b.c.openvibe.services", true),
        ("xn--bcher-kva.openvibe.services", true),
        ("_acme.openvibe.services", true),
        // Not a label boundary, or a different registrable name.
        ("evilopenvibe.services", false),
        ("openvibe.services.evil.com", false),
        ("openvibe.services.", true),
        ("openvibe.services..", false),
        ("openvibe-services.com", false),
        ("openvibeXservices", false),
        ("services", false),
        ("openvibe", false),
        ("", false),
        (".", false),
        (".openvibe.services", false),
        ("api..openvibe.services", false),
        // Non-ASCII and other bytes: refused, never folded.
        ("öpenvibe.services", false),
        ("api.openvibe.servıces", false),
        ("openvibe.services\0.evil.com", false),
        ("openvibe.services%2eevil.com", false),
        ("user@openvibe.services", false),
        ("openvibe.services:443", false),
        ("openvibe.services ", false),
        (" openvibe.services", false),
        ("*.openvibe.services", false),
        ("openvibe.services/evil", false),
        ("openvibe.services\\evil", false),
        // IP literals are never names.
        ("198.18.0.1", false),
        ("2130706433", false),
        ("[::1]", false),
    ];
    for (host, want) in cases {
        assert_eq!(name_allowed(&p, Net::OpenvibeOnly, host), want, "{host:?}");
    }
}

#[test]
fn an_operator_may_add_openvibe_domains() {
    let p = edited(|s| {
        s.replace(
            "allow = [\"openvibe.services\"]",
            "allow = [\"openvibe.services\", \"openvibe.example.org\"]",
        )
    })
    .unwrap();
    assert!(name_allowed(
        &p,
        Net::OpenvibeOnly,
        "cdn.openvibe.example.org"
    ));
    assert!(name_allowed(&p, Net::OpenvibeOnly, "openvibe.services"));
    assert!(!name_allowed(&p, Net::OpenvibeOnly, "example.org"));
    assert!(!name_allowed(
        &p,
        Net::OpenvibeOnly,
        "xopenvibe.example.org"
    ));
}

#[test]
fn public_names() {
    let p = shipped();
    let cases = [
        ("example.com", true),
        ("WWW.Example.COM.", true),
        ("openvibe.services", true),
        ("127.0.0.1.nip.io", true), // a name: its addresses are checked when connecting
        ("1password.com", true),
        ("123abc.com", true),
        ("localhost", false),
        ("LOCALHOST.", false),
        ("foo.localhost", false),
        ("printer.local", false),
        ("metadata.google.internal", false),
        ("router.home.arpa", false),
        ("1.0.0.127.in-addr.arpa", false),
        ("nas.lan", false),
        ("x.onion", false),
        ("intranet", false),
        ("wpad", false),
        ("example", false),
        ("www.example", false),
        ("bücher.de", false),
        ("a..b", false),
        (&"a".repeat(64), false),
        ("", false),
    ];
    for (host, want) in cases {
        assert_eq!(name_allowed(&p, Net::Public, host), want, "{host:?}");
    }
    // The longest names and labels are accepted, one more is not.
    let label63 = "a".repeat(63);
    assert!(name_allowed(&p, Net::Public, &format!("{label63}.com")));
    assert!(!name_allowed(&p, Net::Public, &format!("{label63}a.com")));
    let long = format!("{}.{}.{}.{}", label63, label63, label63, "b".repeat(61));
    assert_eq!(long.len(), 253);
    assert!(name_allowed(&p, Net::Public, &long));
    assert!(name_allowed(&p, Net::Public, &format!("{long}.")));
    assert!(!name_allowed(&p, Net::Public, &format!("{long}b")));
}

#[test]
fn deny_allows_no_name() {
    let p = shipped();
    for host in ["openvibe.services", "api.openvibe.services", "example.com"] {
        assert!(!name_allowed(&p, Net::Deny, host));
    }
}

#[test]
fn normalize_name_is_lowercase_without_trailing_dot() {
    assert_eq!(
        normalize_name("Api.OpenVibe.Services.").as_deref(),
        Some("api.openvibe.services")
    );
    assert_eq!(normalize_name("a-b_c.d").as_deref(), Some("a-b_c.d"));
    assert_eq!(normalize_name("0x7f000001"), None);
    assert_eq!(normalize_name("127.1"), None);
    assert_eq!(normalize_name("a.0x"), None);
    assert_eq!(normalize_name("a.0xg").as_deref(), Some("a.0xg"));
}

// ---- IP literals ---------------------------------------------------------------------------

#[test]
fn every_spelling_of_an_ip_literal_is_recognised() {
    let cases: &[(&str, &str)] = &[
        // Dotted and its inet_aton / WHATWG variants, all 127.0.0.1.
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0X7F000001", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0177.0000.0000.0001", "127.0.0.1"),
        ("127.000.000.001", "127.0.0.1"),
        ("0x7f.0x0.0x0.0x1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0177.1", "127.0.0.1"),
        ("127.0x1", "127.0.0.1"),
        ("127.0.0x0.1", "127.0.0.1"),
        // Metadata.
        ("169.254.169.254", "169.254.169.254"),
        ("2852039166", "169.254.169.254"),
        ("0xa9fea9fe", "169.254.169.254"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("169.254.43518", "169.254.169.254"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
        // Zero and friends.
        ("0", "0.0.0.0"),
        ("0x", "0.0.0.0"),
        ("0.0.0.0", "0.0.0.0"),
        ("00", "0.0.0.0"),
        ("10.1", "10.0.0.1"),
        ("192.168.1", "192.168.0.1"),
        ("4294967295", "255.255.255.255"),
        ("0xffffffff", "255.255.255.255"),
        ("1.1", "1.0.0.1"),
        // IPv6, bare, bracketed, with zones, with dotted tails.
        ("::1", "::1"),
        ("[::1]", "::1"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("::", "::"),
        ("[::]", "::"),
        ("::ffff:127.0.0.1", "::ffff:127.0.0.1"),
        ("[::ffff:7f00:1]", "::ffff:127.0.0.1"),
        ("0:0:0:0:0:ffff:127.0.0.1", "::ffff:127.0.0.1"),
        ("::127.0.0.1", "::127.0.0.1"),
        ("fe80::1%eth0", "fe80::1"),
        ("[fe80::1%25eth0]", "fe80::1"),
        ("[fe80::1%1]", "fe80::1"),
        ("64:ff9b::7f00:1", "64:ff9b::7f00:1"),
        ("2002:7f00:1::", "2002:7f00:1::"),
        ("FD00:EC2::254", "fd00:ec2::254"),
        // A bracketed IPv4 is still an address.
        ("[127.0.0.1]", "127.0.0.1"),
    ];
    for (host, want) in cases {
        assert_eq!(parse_ip_literal(host), Some(ip(want)), "{host:?}");
        assert!(looks_like_ip(host), "{host:?} must look like an IP");
        assert_eq!(normalize_name(host), None, "{host:?} must not be a name");
    }
}

#[test]
fn invalid_ip_spellings_are_no_address_but_still_not_names() {
    // Each is refused as a name (looks like an IP) and yields no address.
    for host in [
        "256.0.0.1",
        "1.2.3.256",
        "1.256.0.1",
        "1.2.256.1",
        "1.0x100.1",
        "0400.0.0.1",
        "1.2.65536",
        "1.16777216",
        "4294967296",
        "0x100000000",
        "08",
        "09.1.1.1",
        "1.2.3.4.5",
        "99999999999999999999999",
        "0x0000000000000000000000001.1.1.1.1",
        "1..1",
        "::1::",
        "[::1",
        "[fe80::1%]",
        "fe80::1%",
        "[::1]:80",
        "[]",
        "1.2.3.0x",
    ] {
        if host != "1.2.3.0x" {
            assert_eq!(parse_ip_literal(host), None, "{host:?}");
        }
        assert!(looks_like_ip(host), "{host:?}");
        assert_eq!(normalize_name(host), None, "{host:?}");
    }
    // "0x" alone is 0 (WHATWG), so 1.2.3.0x is 1.2.3.0.
    assert_eq!(parse_ip_literal("1.2.3.0x"), Some(ip("1.2.3.0")));
    // Long runs of leading zeros are still small numbers.
    assert_eq!(
        parse_ip_literal("0000000000000000000000000177.0.0.1"),
        Some(ip("127.0.0.1"))
    );
}

#[test]
fn names_are_not_ip_literals() {
    for host in [
        "openvibe.services",
        "127.0.0.1.nip.io",
        "1e100.net",
        "0xdeadbeef.com",
        "123abc",
        "a.b.c.d",
        "",
        "１２７.０.０.１",
        "①②⑦.0.0.1x",
    ] {
        assert_eq!(parse_ip_literal(host), None, "{host:?}");
    }
    assert!(!looks_like_ip("openvibe.services"));
    assert!(!looks_like_ip("1e100.net"));
    // Not a number in any base (WHATWG: not "ends in a number"), so a name.
    assert!(!looks_like_ip("0x1g"));
    assert_eq!(normalize_name("0x1g").as_deref(), Some("0x1g"));
    // Full-width digits are not ASCII: not an IP literal, and not a name either.
    assert_eq!(normalize_name("１２７.０.０.１"), None);
}

// ---- addresses -----------------------------------------------------------------------------

#[test]
fn denied_addresses_with_their_reasons() {
    let p = shipped();
    let cases: &[(&str, &str)] = &[
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("10.0.0.1", "RFC 1918"),
        ("172.16.0.1", "RFC 1918"),
        ("172.31.255.255", "RFC 1918"),
        ("192.168.1.1", "RFC 1918"),
        ("100.64.0.1", "CGNAT"),
        ("100.127.255.255", "CGNAT"),
        ("100.100.100.200", "CGNAT"),
        ("169.254.169.254", "cloud metadata"),
        ("169.254.0.1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("255.255.255.255", "limited broadcast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "unspecified"),
        ("198.18.0.1", "benchmarking"),
        ("198.19.255.255", "benchmarking"),
        ("192.0.2.1", "TEST-NET-1"),
        ("198.51.100.1", "TEST-NET-2"),
        ("203.0.113.1", "TEST-NET-3"),
        ("192.0.0.170", "IETF protocol"),
        ("192.88.99.1", "6to4 relay"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("::2", "IPv4-compatible"),
        ("::127.0.0.1", "IPv4-compatible"),
        ("fe80::1", "link-local"),
        ("febf::1", "link-local"),
        ("fec0::1", "site-local"),
        ("fc00::1", "unique local"),
        ("fd00:ec2::254", "unique local"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "documentation"),
        ("3fff::1", "documentation"),
        ("2001::1", "Teredo"),
        ("2001:2::1", "benchmarking"),
        ("2001:10::1", "ORCHID"),
        ("2001:20::1", "ORCHIDv2"),
        ("100::1", "discard"),
        ("64:ff9b:1::1", "local-use NAT64"),
    ];
    for (addr, why) in cases {
        let reason = address_allowed(&p, ip(addr), &[], &[])
            .expect_err(addr)
            .to_string();
        assert!(
            reason.contains(why),
            "{addr}: {reason:?} should say {why:?}"
        );
    }
}

#[test]
fn embedded_ipv4_is_judged_by_its_ipv4() {
    let p = shipped();
    // IPv4-mapped, NAT64 and 6to4 forms of denied IPv4 addresses.
    for (addr, v4, form) in [
        ("::ffff:127.0.0.1", "127.0.0.1", "IPv4-mapped"),
        ("::ffff:7f00:1", "127.0.0.1", "IPv4-mapped"),
        ("::ffff:169.254.169.254", "169.254.169.254", "IPv4-mapped"),
        ("::ffff:10.0.0.1", "10.0.0.1", "IPv4-mapped"),
        ("::ffff:0.0.0.0", "0.0.0.0", "IPv4-mapped"),
        ("64:ff9b::7f00:1", "127.0.0.1", "NAT64"),
        ("64:ff9b::a9fe:a9fe", "169.254.169.254", "NAT64"),
        ("64:ff9b::192.168.0.1", "192.168.0.1", "NAT64"),
        ("2002:7f00:1::", "127.0.0.1", "6to4"),
        ("2002:a9fe:a9fe::1", "169.254.169.254", "6to4"),
        ("2002:c0a8:101:1::1", "192.168.1.1", "6to4"),
    ] {
        match address_allowed(&p, ip(addr), &[], &[]) {
            Err(DenyReason::Embedded { form: f, ipv4, .. }) => {
                assert_eq!(IpAddr::V4(ipv4), ip(v4), "{addr}");
                assert!(f.contains(form), "{addr}: {f}");
            }
            other => panic!("{addr}: {other:?}"),
        }
    }
    // The same forms of public IPv4 addresses are allowed.
    for addr in ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"] {
        assert_eq!(address_allowed(&p, ip(addr), &[], &[]), Ok(()), "{addr}");
    }
    assert_eq!(connect_form(ip("::ffff:8.8.8.8")), ip("8.8.8.8"));
    assert_eq!(connect_form(ip("64:ff9b::808:808")), ip("64:ff9b::808:808"));
    assert_eq!(connect_form(ip("8.8.8.8")), ip("8.8.8.8"));
}

#[test]
fn ipv6_outside_global_unicast_is_denied() {
    let p = shipped();
    for addr in [
        "4000::1",
        "8000::1",
        "c000::1",
        "e000::1",
        "5f00::1",
        "::ffff:0:1.2.3.4",
        "1::1",
    ] {
        assert_eq!(
            address_allowed(&p, ip(addr), &[], &[]),
            Err(DenyReason::NotGlobalUnicast),
            "{addr}"
        );
    }
    let open = edited(|s| {
        s.replace(
            "ipv6_global_unicast_only = true",
            "ipv6_global_unicast_only = false",
        )
    })
    .unwrap();
    assert_eq!(address_allowed(&open, ip("4000::1"), &[], &[]), Ok(()));
}

#[test]
fn public_addresses_are_allowed() {
    let p = shipped();
    for addr in [
        "1.1.1.1",
        "8.8.8.8",
        "93.184.216.34",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "192.167.255.255",
        "192.169.0.0",
        "198.17.255.255",
        "198.20.0.0",
        "169.253.255.255",
        "223.255.255.255",
        "2606:4700:4700::1111",
        "2a00:1450:4001::200e",
        "2001:4860:4860::8888",
    ] {
        assert_eq!(address_allowed(&p, ip(addr), &[], &[]), Ok(()), "{addr}");
    }
}

#[test]
fn the_links_own_addresses_and_networks_are_denied_in_every_form() {
    let p = shipped();
    let own = [
        net("203.0.114.7/32"),
        net("2a01:db9:1:2::/64"),
        net("81.2.3.0/24"),
    ];
    for (addr, denied) in [
        ("203.0.114.7", true),
        ("203.0.114.8", false),
        ("::ffff:203.0.114.7", true),
        ("64:ff9b::cb00:7207", true),
        ("2002:cb00:7207::1", true),
        ("2a01:db9:1:2::1", true),
        ("2a01:db9:1:2:ffff:ffff:ffff:ffff", true),
        ("2a01:db9:1:3::1", false),
        ("81.2.3.200", true),
        ("81.2.4.1", false),
    ] {
        let got = address_allowed(&p, ip(addr), &own, &[]);
        assert_eq!(got.is_err(), denied, "{addr}: {got:?}");
        if denied {
            assert!(
                got.unwrap_err().to_string().contains("the Link's own"),
                "{addr}"
            );
        }
    }
}

#[test]
fn embedded_extraction_at_every_offset() {
    let e = EmbeddedIpv4 {
        prefix: "2002::/16".parse().unwrap(),
        ipv4_offset: 16,
        reason: String::new(),
    };
    assert_eq!(
        e.extract("2002:0102:0304::".parse().unwrap()),
        Some(Ipv4Addr::new(1, 2, 3, 4))
    );
    assert_eq!(e.extract("2003:0102:0304::".parse().unwrap()), None);
    let e = EmbeddedIpv4 {
        prefix: "64:ff9b::/96".parse().unwrap(),
        ipv4_offset: 96,
        reason: String::new(),
    };
    assert_eq!(
        e.extract("64:ff9b::1.2.3.4".parse().unwrap()),
        Some(Ipv4Addr::new(1, 2, 3, 4))
    );
    let e = EmbeddedIpv4 {
        prefix: "2001:db8::/32".parse().unwrap(),
        ipv4_offset: 32,
        reason: String::new(),
    };
    assert_eq!(
        e.extract("2001:db8:0102:0304::".parse().unwrap()),
        Some(Ipv4Addr::new(1, 2, 3, 4))
    );
}

/// An address inside two embedded forms is judged by the IPv4 address each carries: here
/// a form of the operator's file (a /32 layout, carrying 93.184.215.14) and the network's
/// NAT64 prefix inside it (a /96 layout, carrying 10.0.0.1, which the gateway reaches).
/// Before, the first form that held the address decided alone.
#[test]
fn an_address_in_two_forms_is_judged_by_each() {
    let form = |prefix: &str, ipv4_offset| EmbeddedIpv4 {
        prefix: prefix.parse().unwrap(),
        ipv4_offset,
        reason: "a form".into(),
    };
    let mut p = shipped();
    p.embedded.push(form("2a01:4f8::/32", 32));
    let nat64 = [form("2a01:4f8:5db8:d70e::/96", 96)];
    let ip: IpAddr = "2a01:4f8:5db8:d70e::a00:1".parse().unwrap();
    assert_eq!(
        p.embedded
            .last()
            .and_then(|e| e.extract("2a01:4f8:5db8:d70e::a00:1".parse().unwrap())),
        Some(Ipv4Addr::new(93, 184, 215, 14))
    );
    match address_allowed(&p, ip, &[], &nat64) {
        Err(DenyReason::Embedded { ipv4, .. }) => assert_eq!(ipv4, Ipv4Addr::new(10, 0, 0, 1)),
        other => panic!("{ip} carries 10.0.0.1 in the NAT64 layout: {other:?}"),
    }
    // The file's form alone lets it through.
    assert!(address_allowed(&p, ip, &[], &[]).is_ok());
    // An address every form it is in allows is allowed, outside 2000::/3 too (the
    // well-known NAT64 prefix).
    let public: IpAddr = "64:ff9b::5db8:d70e".parse().unwrap();
    assert!(address_allowed(&p, public, &[], &nat64).is_ok());
}

#[test]
fn every_ipv4_literal_spelling_of_a_denied_address_is_denied_under_public() {
    // The proxy's path for a Host/SNI or a connection by literal: parse, then check.
    let p = shipped();
    for host in [
        "2130706433",
        "0x7f000001",
        "0177.0.0.1",
        "127.1",
        "0",
        "0x0",
        "[::]",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "0xa9fea9fe",
        "2852039166",
        "169.254.43518",
        "0251.0376.0251.0376",
        "[::ffff:a9fe:a9fe]",
        "[64:ff9b::a9fe:a9fe]",
        "[fe80::1%25eth0]",
        "10.1",
        "0xc0a80001",
    ] {
        let addr = parse_ip_literal(host).unwrap_or_else(|| panic!("{host}"));
        assert!(address_allowed(&p, addr, &[], &[]).is_err(), "{host}");
    }
}
