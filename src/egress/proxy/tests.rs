//! Unit tests of `src/egress/proxy.rs`.

use super::*;

#[test]
fn the_hosts_resolver_follows_its_resolv_conf() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resolv.conf");
    std::fs::write(&path, "search corp.example\nnameserver 192.0.2.1\n").unwrap();
    let egress = Egress::with_resolv_conf(EgressPolicy::shipped(), &path);
    assert_eq!(egress.problem(), None);
    let first = egress.resolver().unwrap();
    assert!(
        Arc::ptr_eq(&first, &egress.resolver().unwrap()),
        "same file, same resolver"
    );
    std::fs::write(&path, "nameserver 192.0.2.2\n").unwrap();
    let second = egress.resolver().unwrap();
    assert!(
        !Arc::ptr_eq(&first, &second),
        "a changed file is read again"
    );
    std::fs::write(&path, "# no server\n").unwrap();
    let none = egress.problem().unwrap();
    assert!(
        none.contains("resolv.conf") && none.contains("runner.dns_servers"),
        "{none}"
    );
    std::fs::remove_file(&path).unwrap();
    let gone = egress.problem().unwrap();
    assert!(
        gone.contains("cannot be read") && gone.contains("runner.dns_servers"),
        "{gone}"
    );
    std::fs::write(&path, "nameserver 192.0.2.3\n").unwrap();
    assert_eq!(egress.problem(), None, "back once the file is");
}

#[test]
fn fixed_servers_are_used_as_given() {
    let server = crate::config::DnsServer::parse("192.0.2.53:5353").unwrap();
    let egress = Egress::new(EgressPolicy::shipped(), &[server]);
    assert_eq!(egress.problem(), None);
}
