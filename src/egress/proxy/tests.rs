//! Unit tests of `src/egress/proxy.rs`.

use super::*;

/// The opening of every test here that makes network namespaces: one such test at a time
/// (the guard), or `None`, recorded as a skip, when this process may not make them.
fn netns_test(name: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    let one_at_a_time = netns::test_namespaces_one_at_a_time();
    if let Some(missing) = netns::missing_capabilities() {
        crate::test_skips::skipped(name, &missing);
        return None;
    }
    Some(one_at_a_time)
}

/// The runtime the egress of these tests' jobs runs on.
fn two_threads() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

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

/// A DNS query for `name`, type A, with `pad` zero bytes after it.
fn padded_query(id: u16, name: &str, pad: usize) -> Vec<u8> {
    use hickory_proto::op::{Message, MessageType, OpCode, Query};
    use hickory_proto::rr::{Name, RecordType};
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.add_query(Query::query(
        Name::from_ascii(name).expect("name"),
        RecordType::A,
    ));
    let mut q = m.to_vec().expect("query");
    q.extend(std::iter::repeat_n(0u8, pad));
    q
}

/// A job's DNS query over UDP is answered from the address it was sent to, whichever that
/// is: a resolver that connects its socket (c-ares, behind Node's `dns.Resolver`) takes
/// only such an answer. An IPv6 address other than `::1` was once answered from `::1`.
#[test]
fn udp_queries_are_answered_from_the_address_asked() {
    use nix::sched::{setns, CloneFlags};
    use std::os::fd::AsFd;
    let Some(_one_at_a_time) = netns_test("udp_queries_are_answered_from_the_address_asked") else {
        return;
    };
    let rt = two_threads();
    let hole = std::net::UdpSocket::bind("127.0.0.1:0").expect("black hole");
    let egress = Egress::new(
        EgressPolicy::shipped(),
        &[DnsServer(hole.local_addr().expect("addr"))],
    );
    let job = rt
        .block_on(egress.start("udp-source-test", Net::OpenvibeOnly))
        .unwrap_or_else(|e| panic!("egress: {e}"));
    let netns = job.netns.as_fd().try_clone_to_owned().expect("netns fd");
    let mut servers = vec!["127.0.0.1:53", "192.0.2.53:53", "[::ffff:192.0.2.54]:53"];
    // A host without IPv6 gives its jobs none either.
    if std::path::Path::new("/proc/net/if_inet6").exists() {
        servers.extend(["[::1]:53", "[2001:db8::53]:53", "[fd00::1]:53"]);
    }
    let answered = std::thread::spawn(move || {
        setns(&netns, CloneFlags::CLONE_NEWNET).expect("setns");
        let mut answered = Vec::new();
        for (i, server) in servers.iter().enumerate() {
            let to: std::net::SocketAddr = server.parse().expect("address");
            let any = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
            let s = std::net::UdpSocket::bind(any).expect("bind");
            s.connect(to).expect("connect");
            let q = padded_query(10 + i as u16, "evil.example", 0);
            s.send(&q).expect("send");
            s.set_read_timeout(Some(Duration::from_secs(2)))
                .expect("timeout");
            let mut buf = vec![0u8; 4096];
            let got = s
                .recv(&mut buf)
                .ok()
                .filter(|&n| n > 3 && buf[..2] == q[..2]);
            answered.push((server.to_string(), got.map(|_| buf[3] & 0x0f)));
        }
        answered
    })
    .join()
    .expect("the namespace's thread");
    rt.block_on(job.finish());
    for (server, rcode) in &answered {
        // NXDOMAIN: a name the job may not reach, answered by the responder itself.
        assert_eq!(*rcode, Some(3), "no answer through {server}: {answered:?}");
    }
}

/// The job's UDP DNS responder, from inside its network namespace, with an upstream that
/// never answers: a datagram longer than `MAX_UDP_QUERY` is dropped unread, a shorter one
/// with bytes after its query is FORMERR, and while `MAX_DNS_IN_FLIGHT` queries wait for
/// the upstream any further one is dropped, even one answered without the upstream (a name
/// the job may not reach); once they gave up, such a query is answered again.
#[test]
fn udp_queries_too_long_or_past_the_cap_are_dropped() {
    use nix::sched::{setns, CloneFlags};
    use std::os::fd::AsFd;
    let Some(_one_at_a_time) = netns_test("udp_queries_too_long_or_past_the_cap_are_dropped")
    else {
        return;
    };
    let hole = std::net::UdpSocket::bind("127.0.0.1:0").expect("black hole");
    let upstream = DnsServer(hole.local_addr().expect("addr"));
    let rt = two_threads();
    let egress = Egress::new(EgressPolicy::shipped(), &[upstream]);
    let job = rt
        .block_on(egress.start("udp-cap-test", Net::OpenvibeOnly))
        .unwrap_or_else(|e| panic!("egress: {e}"));
    let netns = job.netns.as_fd().try_clone_to_owned().expect("netns fd");
    // A thread of its own in the job's namespace: the test's other threads stay where they are.
    let seen = std::thread::spawn(move || {
        setns(&netns, CloneFlags::CLONE_NEWNET).expect("setns");
        let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        s.connect("127.0.0.1:53").expect("connect");
        let ask = |q: &[u8], wait: Duration| -> Option<Vec<u8>> {
            s.send(q).expect("send");
            s.set_read_timeout(Some(wait)).expect("timeout");
            let mut buf = vec![0u8; 65_535];
            let deadline = std::time::Instant::now() + wait;
            // Skip late answers to earlier queries: only the id asked counts.
            while std::time::Instant::now() < deadline {
                match s.recv(&mut buf) {
                    Ok(n) if buf[..2] == q[..2] => return Some(buf[..n].to_vec()),
                    Ok(_) => continue,
                    Err(_) => return None,
                }
            }
            None
        };
        let rcode = |a: &[u8]| a[3] & 0x0f;
        // An answer is awaited for long (it returns as soon as it comes); silence is
        // watched for half a second.
        let answered = Duration::from_secs(3);
        let quick = Duration::from_millis(500);
        let denied = ask(&padded_query(1, "evil.example", 0), answered);
        let short_padded = ask(&padded_query(2, "evil.example", 100), answered);
        let long = ask(&padded_query(3, "evil.example", MAX_UDP_QUERY + 1), quick);
        // Fill the queries in flight with names that wait for the upstream.
        for i in 0..MAX_DNS_IN_FLIGHT {
            s.send(&padded_query(100 + i as u16, "api.openvibe.services", 0))
                .expect("send");
        }
        std::thread::sleep(Duration::from_millis(200));
        let while_full = ask(&padded_query(4, "evil.example", 0), quick);
        // They give up after RESOLVE_TIME; then a query is answered again (asked anew
        // until then: one asked before the last of them gave up is dropped).
        std::thread::sleep(RESOLVE_TIME);
        let mut after = None;
        let mut dropped_after = 0;
        for id in 5..25 {
            after = ask(&padded_query(id, "evil.example", 0), quick);
            if after.is_some() {
                break;
            }
            dropped_after += 1;
        }
        (
            denied.map(|a| rcode(&a)),
            short_padded.map(|a| rcode(&a)),
            long.is_some(),
            while_full.is_some(),
            after.map(|a| rcode(&a)),
            dropped_after,
        )
    })
    .join()
    .expect("the namespace's thread");
    let records = rt.block_on(job.finish());
    // NXDOMAIN (3) for a name the job may not reach, FORMERR (1) for bytes after the query.
    assert_eq!(seen.0, Some(3), "a denied name is answered at once");
    assert_eq!(seen.1, Some(1), "a padded query is FORMERR");
    assert!(!seen.2, "a datagram over MAX_UDP_QUERY was answered");
    assert!(!seen.3, "a query past MAX_DNS_IN_FLIGHT was answered");
    assert_eq!(
        seen.4,
        Some(3),
        "answered again once the queries in flight ended"
    );
    // The dropped queries (too long, past the cap, and any asked again too early) are
    // in the record, counted.
    let last = records.last().expect("the job's record");
    let unanswered = format!("…{} DNS queries unanswered", 2 + seen.5);
    assert_eq!(
        (last.host.as_str(), last.port, last.allowed),
        (unanswered.as_str(), 53, false),
        "{records:?}"
    );
}

/// Sends a query of type A for each of `names` to `job`'s DNS responder, from inside its
/// network namespace (a thread of its own, so the test's others stay where they are).
fn ask_from_inside(job: &JobEgress, names: &[String]) {
    use nix::sched::{setns, CloneFlags};
    use std::os::fd::AsFd;
    let netns = job.netns.as_fd().try_clone_to_owned().expect("netns fd");
    let queries: Vec<Vec<u8>> = names
        .iter()
        .enumerate()
        .map(|(i, name)| padded_query(1000 + i as u16, name, 0))
        .collect();
    std::thread::spawn(move || {
        setns(&netns, CloneFlags::CLONE_NEWNET).expect("setns");
        let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        s.connect("127.0.0.1:53").expect("connect");
        for q in &queries {
            s.send(q).expect("send");
        }
    })
    .join()
    .expect("the namespace's thread");
}

/// The names starting with `prefix` that the upstream `hole` was asked, among the queries
/// it holds now (each name once, whatever its type and however often it was asked).
fn names_asked(hole: &std::net::UdpSocket, prefix: &str) -> std::collections::BTreeSet<String> {
    hole.set_nonblocking(true).expect("nonblocking");
    let mut buf = vec![0u8; 4096];
    let mut names = std::collections::BTreeSet::new();
    while let Ok(n) = hole.recv(&mut buf) {
        if let Ok(m) = hickory_proto::op::Message::from_vec(&buf[..n]) {
            names.extend(
                m.queries
                    .iter()
                    .map(|q| q.name().to_ascii())
                    .filter(|name| name.starts_with(prefix)),
            );
        }
    }
    names
}

/// The names starting with `prefix` that the upstream `hole` is asked, gathered until at
/// least `expected` came and no new one for a while (so more than `expected` are seen too),
/// or until `within` passed: a slow machine gets the time it needs, a fast one no fixed
/// sleep.
fn names_asked_until_still(
    hole: &std::net::UdpSocket,
    prefix: &str,
    expected: usize,
    within: Duration,
) -> std::collections::BTreeSet<String> {
    let still = Duration::from_millis(400);
    let started = std::time::Instant::now();
    let mut names = std::collections::BTreeSet::new();
    let mut last_new = started;
    while started.elapsed() < within {
        std::thread::sleep(Duration::from_millis(50));
        let before = names.len();
        names.extend(names_asked(hole, prefix));
        if names.len() > before {
            last_new = std::time::Instant::now();
        }
        if names.len() >= expected && last_new.elapsed() >= still {
            break;
        }
    }
    names
}

/// A job asking many names of a zone whose servers never answer has at most
/// `MAX_JOB_LOOKUPS` of them asked upstream at once, and every job together at most the
/// runner's places: a second job gets what is left, not the resolver the first filled.
#[test]
fn upstream_lookups_are_bounded_for_a_job_and_for_the_runner() {
    let Some(_one_at_a_time) =
        netns_test("upstream_lookups_are_bounded_for_a_job_and_for_the_runner")
    else {
        return;
    };
    let hole = std::net::UdpSocket::bind("127.0.0.1:0").expect("black hole");
    let upstream = DnsServer(hole.local_addr().expect("addr"));
    let rt = two_threads();
    let runner_places = MAX_JOB_LOOKUPS + 4;
    let egress = Egress::new(EgressPolicy::shipped(), &[upstream])
        .with_lookup_places(runner_places, MAX_JOB_LOOKUPS);
    let start = |id: &str| {
        rt.block_on(egress.start(id, Net::OpenvibeOnly))
            .unwrap_or_else(|e| panic!("egress: {e}"))
    };
    let (first, second) = (start("lookups-first"), start("lookups-second"));
    let names = |prefix: &str| -> Vec<String> {
        (0..40)
            .map(|i| format!("{prefix}{i}.openvibe.services"))
            .collect()
    };
    // Both waits together stay well within the time the first job's lookups take to give
    // up upstream and free their places (the resolver's timeout and attempts, about 4 s).
    let within = Duration::from_millis(1500);
    ask_from_inside(&first, &names("first"));
    let by_first = names_asked_until_still(&hole, "first", MAX_JOB_LOOKUPS, within);
    ask_from_inside(&second, &names("second"));
    let by_second =
        names_asked_until_still(&hole, "second", runner_places - MAX_JOB_LOOKUPS, within);
    rt.block_on(first.finish());
    rt.block_on(second.finish());
    assert_eq!(by_first.len(), MAX_JOB_LOOKUPS, "{by_first:?}");
    assert_eq!(
        by_second.len(),
        runner_places - MAX_JOB_LOOKUPS,
        "the runner's places left: {by_second:?}"
    );
}

/// Each job's share of the runner's upstream lookups: the whole per-job bound while four
/// jobs or fewer run at once, the fair share beyond, not under the floor while the
/// runner's places can grow for it, and the runner's places never past their bound.
#[test]
fn a_jobs_lookups_are_its_share_of_the_runners() {
    let (runner, job) = (MAX_RUNNER_LOOKUPS, MAX_JOB_LOOKUPS);
    assert_eq!(lookup_places(0), (runner, job));
    assert_eq!(lookup_places(1), (runner, job));
    assert_eq!(lookup_places(runner / job), (runner, job));
    assert_eq!(lookup_places(8), (runner, 8));
    assert_eq!(lookup_places(16), (runner, MIN_JOB_LOOKUPS));
    assert_eq!(lookup_places(32), (32 * MIN_JOB_LOOKUPS, MIN_JOB_LOOKUPS));
    assert_eq!(lookup_places(64), (MOST_RUNNER_LOOKUPS, MIN_JOB_LOOKUPS));
    assert_eq!(lookup_places(100), (MOST_RUNNER_LOOKUPS, 2));
    assert_eq!(
        lookup_places(100_000),
        (MOST_RUNNER_LOOKUPS, 1),
        "one at least"
    );
    for jobs in 1..=100_000 {
        let (runner_places, job_places) = lookup_places(jobs);
        assert!(
            runner_places <= MOST_RUNNER_LOOKUPS,
            "{jobs} jobs: {runner_places}"
        );
        assert!((1..=MAX_JOB_LOOKUPS).contains(&job_places));
        // However many places the running jobs hold, each other job finds its own.
        if jobs <= MOST_RUNNER_LOOKUPS {
            assert!(
                job_places * jobs <= runner_places,
                "{jobs} jobs at once hold every place"
            );
        }
    }
}

/// On a runner that runs eight jobs at once, a job asking many names of a zone whose
/// servers never answer holds its share of the runner's lookups (8 of 64), not the whole
/// per-job bound: eight such jobs leave no one's lookups waiting for a place. Before,
/// four of them held all 64 whatever the number of jobs.
#[test]
fn a_job_holds_its_share_of_lookups_when_many_jobs_run_at_once() {
    let Some(_one_at_a_time) =
        netns_test("a_job_holds_its_share_of_lookups_when_many_jobs_run_at_once")
    else {
        return;
    };
    let hole = std::net::UdpSocket::bind("127.0.0.1:0").expect("black hole");
    let rt = two_threads();
    let egress = Egress::new(
        EgressPolicy::shipped(),
        &[DnsServer(hole.local_addr().expect("addr"))],
    )
    .with_jobs_at_once(8);
    let job = rt
        .block_on(egress.start("lookups-share", Net::OpenvibeOnly))
        .unwrap_or_else(|e| panic!("egress: {e}"));
    let names: Vec<String> = (0..40)
        .map(|i| format!("share{i}.openvibe.services"))
        .collect();
    ask_from_inside(&job, &names);
    let asked = names_asked_until_still(&hole, "share", 8, Duration::from_millis(2000));
    rt.block_on(job.finish());
    assert_eq!(asked.len(), MAX_RUNNER_LOOKUPS / 8, "{asked:?}");
}

/// Counts the lines a subscriber writes.
#[derive(Clone, Default)]
struct Lines(Arc<AtomicU64>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.iter().filter(|&&b| b == b'\n').count() as u64;
        self.0.fetch_add(n, Ordering::Relaxed);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A job that opens many connections writes at most `LOG_LINES` lines about them to the
/// daemon's log, one more saying the rest are not logged, and a count at its end; its
/// record still holds every attempt. Before, each refused connection was a line: a few
/// thousand a second, past journald's rate limit, which then dropped other jobs' lines.
#[test]
fn a_job_writes_a_bounded_number_of_log_lines_however_many_attempts() {
    use nix::sched::{setns, CloneFlags};
    use std::os::fd::AsFd;
    let Some(_one_at_a_time) =
        netns_test("a_job_writes_a_bounded_number_of_log_lines_however_many_attempts")
    else {
        return;
    };
    const ATTEMPTS: usize = 200;
    let lines = Lines::default();
    let counted = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || counted.clone())
        .with_max_level(tracing::Level::INFO)
        .finish();
    // One thread runs every task of the job's egress, under the counting subscriber.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let egress = Egress::new(EgressPolicy::shipped(), &[]);
    let records = tracing::subscriber::with_default(subscriber, || {
        rt.block_on(async {
            let job = egress
                .start("log-budget-test", Net::OpenvibeOnly)
                .await
                .unwrap_or_else(|e| panic!("egress: {e}"));
            let netns = job.netns.as_fd().try_clone_to_owned().expect("netns fd");
            tokio::task::spawn_blocking(move || {
                setns(&netns, CloneFlags::CLONE_NEWNET).expect("setns");
                for _ in 0..ATTEMPTS {
                    // Connected, then closed with nothing sent: refused, one attempt each.
                    let c = std::net::TcpStream::connect("127.0.0.1:80").expect("connect");
                    drop(c);
                }
            })
            .await
            .expect("the client");
            job.finish().await
        })
    });
    let refused = records.iter().filter(|r| !r.allowed).count();
    assert!(
        refused >= ATTEMPTS / 2,
        "the record keeps the attempts: {refused}"
    );
    let logged = lines.0.load(Ordering::Relaxed);
    assert!(
        logged <= LOG_LINES + 2,
        "{logged} log lines for {ATTEMPTS} attempts"
    );
    assert!(
        logged >= LOG_LINES,
        "the first attempts are logged: {logged}"
    );
}

/// An upstream DNS server on loopback that answers every query SERVFAIL, counting the
/// names it was asked about, until `stop` is set.
fn failing_upstream(
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (
    DnsServer,
    std::thread::JoinHandle<std::collections::BTreeSet<String>>,
) {
    use hickory_proto::op::{Message, MessageType, ResponseCode};
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind the upstream");
    s.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    let at = DnsServer(s.local_addr().expect("addr"));
    let served = std::thread::spawn(move || {
        let mut asked = std::collections::BTreeSet::new();
        let mut buf = vec![0u8; 4096];
        while !stop.load(Ordering::SeqCst) {
            let Ok((n, from)) = s.recv_from(&mut buf) else {
                continue;
            };
            let Ok(q) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            for query in &q.queries {
                asked.insert(query.name().to_ascii().to_lowercase());
            }
            let mut a = q.clone();
            a.metadata.message_type = MessageType::Response;
            a.metadata.response_code = ResponseCode::ServFail;
            if let Ok(bytes) = a.to_vec() {
                let _ = s.send_to(&bytes, from);
            }
        }
        asked
    });
    (at, served)
}

/// The cap on names a job may have looked up (`dns.max_names`) counts the names whose
/// lookup failed too: a failure is asked again, but the name keeps its place. Before, a
/// failed name was forgotten, so a tool whose own nameserver answers SERVFAIL could send
/// any number of distinct names (a few bytes of data in each) to it past the cap.
#[test]
fn names_that_failed_count_against_the_jobs_names() {
    use nix::sched::{setns, CloneFlags};
    use std::os::fd::AsFd;
    let Some(_one_at_a_time) = netns_test("names_that_failed_count_against_the_jobs_names") else {
        return;
    };
    const CAP: usize = 4;
    const NAMES: usize = 12;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (upstream, served) = failing_upstream(stop.clone());
    let rt = two_threads();
    let mut policy = EgressPolicy::shipped();
    policy.dns.max_names = CAP;
    let egress = Egress::new(policy, &[upstream]);
    let job = rt
        .block_on(egress.start("failed-names-test", Net::OpenvibeOnly))
        .unwrap_or_else(|e| panic!("egress: {e}"));
    let netns = job.netns.as_fd().try_clone_to_owned().expect("netns fd");
    let rcodes = std::thread::spawn(move || {
        setns(&netns, CloneFlags::CLONE_NEWNET).expect("setns");
        let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        s.connect("127.0.0.1:53").expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(3)))
            .expect("timeout");
        let mut rcodes = Vec::new();
        let mut buf = vec![0u8; 4096];
        // Every name once, then the first again: a failure is asked again.
        for i in (0..NAMES).chain([0]) {
            let q = padded_query(
                rcodes.len() as u16,
                &format!("leak-{i}.openvibe.services"),
                0,
            );
            s.send(&q).expect("send");
            let rcode = loop {
                match s.recv(&mut buf) {
                    Ok(n) if n > 3 && buf[..2] == q[..2] => break Some(buf[3] & 0x0f),
                    Ok(_) => continue,
                    Err(_) => break None,
                }
            };
            rcodes.push(rcode);
        }
        rcodes
    })
    .join()
    .expect("the namespace's thread");
    rt.block_on(job.finish());
    stop.store(true, Ordering::SeqCst);
    let asked = served.join().expect("the upstream");
    let leaked: Vec<&String> = asked.iter().filter(|n| n.starts_with("leak-")).collect();
    // SERVFAIL (2) for the names within the cap, REFUSED (5) past it.
    let mut expected = vec![Some(2); CAP];
    expected.extend(vec![Some(5); NAMES - CAP]);
    expected.push(Some(2));
    assert_eq!(rcodes, expected, "the tool's answers");
    assert_eq!(leaked.len(), CAP, "names the upstream heard: {leaked:?}");
}

/// A name's addresses are kept in the upstream's order, each once, at most
/// `MAX_ADDRESSES`: an upstream answering thousands for each of a job's names held them
/// all in the daemon before.
#[test]
fn a_names_addresses_are_kept_in_order_once_and_bounded() {
    use super::connection::{addresses_kept, MAX_ADDRESSES};
    use std::net::IpAddr;
    let many = (0..5000u32).map(|i| IpAddr::from((0x5db8_0000u32 + i).to_be_bytes()));
    let kept = addresses_kept(many);
    assert_eq!(kept.len(), MAX_ADDRESSES);
    assert_eq!(kept[0], IpAddr::from([93, 184, 0, 0]));
    assert_eq!(kept[MAX_ADDRESSES - 1], IpAddr::from([93, 184, 0, 31]));
    let a = IpAddr::from([93, 184, 215, 14]);
    let b: IpAddr = "2606:2800:21f:cb07:6820:80da:af6b:8b2c".parse().unwrap();
    assert_eq!(addresses_kept([a, b, a, b, a].into_iter()), vec![a, b]);
    assert!(addresses_kept(std::iter::empty()).is_empty());
}

/// The code of the refusal a request to `to` on port 80, made from inside `netns`, is
/// answered with (its `X-Skill-Runner-Refused` header), or the reply's first line when it
/// has none.
fn refusal_code_from_inside(netns: &OwnedFd, to: &str) -> String {
    use std::io::{Read as _, Write as _};
    let netns = netns.try_clone().expect("netns fd");
    let to = to.to_string();
    std::thread::spawn(move || {
        nix::sched::setns(&netns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        let mut c = std::net::TcpStream::connect((to.as_str(), 80)).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        write!(
            c,
            "GET / HTTP/1.1\r\nHost: {to}\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut reply = String::new();
        let _ = c.read_to_string(&mut reply);
        reply
            .lines()
            .find_map(|l| l.strip_prefix("X-Skill-Runner-Refused: "))
            .unwrap_or_else(|| reply.lines().next().unwrap_or("no reply"))
            .to_string()
    })
    .join()
    .expect("the client")
}

/// A network the Link gains while a job runs (a VPN come up, a route or an address added)
/// is refused to that job from its next connection on, not only to the jobs started after
/// it. The runner's side runs in a network namespace of the test's own, where the route
/// is added: the host's routes are not touched. Before, the Link's networks were read once
/// at the job's start, and the second request went out like the first.
#[test]
fn a_network_the_link_gains_during_a_job_is_refused_to_it() {
    let name = "a_network_the_link_gains_during_a_job_is_refused_to_it";
    let Some(_one_at_a_time) = netns_test(name) else {
        return;
    };
    if std::process::Command::new("ip").arg("-V").output().is_err() {
        crate::test_skips::skipped(name, "iproute2's ip is not installed");
        return;
    }
    let ip = |args: &[&str]| {
        let out = std::process::Command::new("ip")
            .args(args)
            .output()
            .expect("run ip");
        assert!(out.status.success(), "ip {args:?}: {out:?}");
    };
    let host_before = crate::egress::host_networks::tests::host_holds(&[[93, 184, 215, 14]]);
    let (before, after, records) = std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
        ip(&["link", "set", "lo", "up"]);
        // Built on this thread, in its namespace: the runtime's threads, the watch of the
        // Link's networks and the upstream's sockets are all in it.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        // Nothing listens there: the NAT64 lookup of a `public` job fails at once.
        let upstream = DnsServer("127.0.0.1:9".parse().expect("address"));
        let egress = Egress::new(EgressPolicy::shipped(), &[upstream]);
        rt.block_on(async {
            let job = egress
                .start("own-change-test", Net::Public)
                .await
                .unwrap_or_else(|e| panic!("egress: {e}"));
            let netns = job.netns.try_clone().expect("netns fd");
            let ask = || {
                let netns = netns.try_clone().expect("netns fd");
                tokio::task::spawn_blocking(move || {
                    refusal_code_from_inside(&netns, "93.184.215.14")
                })
            };
            let before = ask().await.expect("the first request");
            ip(&["route", "add", "local", "93.184.215.0/24", "dev", "lo"]);
            let after = ask().await.expect("the second request");
            (before, after, job.finish().await)
        })
    })
    .join()
    .expect("the runner's namespace thread");
    // Allowed, and nothing reachable upstream: this namespace has no way out.
    assert_eq!(before, "upstream_unreachable", "{records:?}");
    assert_eq!(after, "address_refused", "{records:?}");
    let refused: Vec<_> = records.iter().filter(|r| !r.allowed).collect();
    assert_eq!(refused.len(), 1, "{records:?}");
    assert_eq!(refused[0].host, "93.184.215.14", "{records:?}");
    assert_eq!(
        crate::egress::host_networks::tests::host_holds(&[[93, 184, 215, 14]]),
        host_before,
        "the host's networks are as they were"
    );
}
