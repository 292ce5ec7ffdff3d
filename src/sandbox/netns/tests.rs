//! Unit tests of `src/sandbox/netns.rs`.

use super::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

/// (device, inode) of a namespace.
type NsId = (u64, u64);

fn thread_netns() -> NsId {
    let m = std::fs::metadata("/proc/thread-self/ns/net").expect("stat own netns");
    (m.dev(), m.ino())
}

fn fd_id(fd: impl AsFd) -> NsId {
    let st = nix::sys::stat::fstat(fd).expect("fstat");
    (st.st_dev, st.st_ino)
}

/// The host's wildcard `local` routes (`local 0.0.0.0/0` and `local ::/0`, which `ip`
/// shows as `local default`), the ones a namespace's setup adds in the namespace: made on
/// the host they would take every address as the host's own. Only these are compared, as
/// another program may add and remove the host's other addresses meanwhile.
fn host_local_routes() -> String {
    let mut all = String::new();
    for args in [
        &["route", "show", "table", "local"][..],
        &["-6", "route", "show", "table", "local"][..],
    ] {
        let out = std::process::Command::new("ip")
            .args(args)
            .output()
            .expect("run ip");
        assert!(out.status.success(), "ip {args:?}: {out:?}");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut words = line.split_whitespace();
            if words.next() == Some("local")
                && matches!(words.next(), Some("default" | "0.0.0.0/0" | "::/0"))
            {
                all.push_str(line);
                all.push('\n');
            }
        }
    }
    all
}

/// Creates the namespace and checks that neither the test thread nor the host's local
/// routes changed. The checks around the whole test are in [`Guard`].
struct Guard {
    _serial: std::sync::MutexGuard<'static, ()>,
    ns_before: NsId,
    routes_before: String,
}

impl Guard {
    fn new() -> Guard {
        let serial = test_namespaces_one_at_a_time();
        Guard {
            _serial: serial,
            ns_before: thread_netns(),
            routes_before: host_local_routes(),
        }
    }

    fn create(&self) -> EgressNamespace {
        let ns = create().unwrap_or_else(|e| panic!("create the egress namespace: {e}"));
        assert_eq!(
            thread_netns(),
            self.ns_before,
            "the test thread changed namespace"
        );
        assert_ne!(fd_id(&ns.netns), self.ns_before, "no new namespace");
        ns
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        assert_eq!(
            thread_netns(),
            self.ns_before,
            "the test thread changed namespace"
        );
        assert_eq!(
            host_local_routes(),
            self.routes_before,
            "the host's local routes changed"
        );
    }
}

/// Runs `f` on a thread that has joined `netns`.
fn inside<T: Send>(netns: &OwnedFd, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::setns(netns, CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
        .join()
        .expect("thread inside the namespace")
    })
}

fn accept_within(l: &TcpListener, timeout: Duration) -> io::Result<TcpStream> {
    let deadline = Instant::now() + timeout;
    loop {
        match l.accept() {
            Ok((s, _)) => return Ok(s),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(e) => return Err(e),
        }
    }
}

fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

fn dual_stack(ns: &EgressNamespace) -> bool {
    ns.http.local_addr().expect("local_addr").is_ipv6()
}

#[test]
fn tcp_to_any_address_lands_on_the_listener_with_the_dialed_address() {
    let guard = Guard::new();
    let ns = guard.create();
    assert!(
        dual_stack(&ns),
        "this host has IPv6: expected a dual-stack [::] listener"
    );
    for l in [&ns.http, &ns.https, &ns.dns_tcp] {
        let addr = l.local_addr().expect("local_addr");
        assert!(addr.ip().is_unspecified(), "{addr} is not a wildcard");
    }

    let mut targets: Vec<SocketAddr> = vec![
        "1.2.3.4:80".parse().expect("addr"),
        "203.0.113.9:443".parse().expect("addr"),
        "127.0.0.1:443".parse().expect("addr"),
        "9.9.9.9:53".parse().expect("addr"),
    ];
    if dual_stack(&ns) {
        targets.push("[2001:db8::7]:80".parse().expect("addr"));
        targets.push("[::1]:443".parse().expect("addr"));
    }
    for target in targets {
        let listener = match target.port() {
            80 => &ns.http,
            443 => &ns.https,
            _ => &ns.dns_tcp,
        };
        let mut client = inside(&ns.netns, || {
            TcpStream::connect_timeout(&target, Duration::from_secs(1))
        })
        .unwrap_or_else(|e| panic!("connect to {target} from inside: {e}"));
        let mut server = accept_within(listener, Duration::from_secs(1))
            .unwrap_or_else(|e| panic!("accept for {target}: {e}"));
        let local = server.local_addr().expect("local_addr");
        assert_eq!(
            canonical(local),
            target,
            "getsockname() of the accepted socket"
        );
        assert_eq!(
            canonical(server.peer_addr().expect("peer_addr")),
            canonical(client.local_addr().expect("client local_addr"))
        );
        server.set_nonblocking(false).expect("blocking");
        client.write_all(b"x").expect("write");
        let mut byte = [0u8; 1];
        server
            .set_read_timeout(Some(Duration::from_secs(1)))
            .expect("timeout");
        server.read_exact(&mut byte).expect("read");
        assert_eq!(&byte, b"x");
    }
}

/// A UDP client inside the namespace, connected to `target` (as resolvers are: it
/// takes answers only from the address it asked), that has sent `query`.
fn udp_client(netns: &OwnedFd, target: SocketAddr) -> UdpSocket {
    let client = inside(netns, || {
        let any: SocketAddr = if target.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let c = UdpSocket::bind(any)?;
        c.connect(target)?;
        c.send(b"query")?;
        io::Result::Ok(c)
    })
    .unwrap_or_else(|e| panic!("send to {target} from inside: {e}"));
    client
        .set_read_timeout(Some(Duration::from_secs(1)))
        .expect("timeout");
    client
}

fn wait_readable(sock: &UdpSocket) {
    let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
    let n = nix::poll::poll(&mut fds, PollTimeout::from(1000u16)).expect("poll");
    assert_eq!(n, 1, "nothing arrived on dns_udp within a second");
}

#[test]
fn udp_dns_is_received_and_answered() {
    let guard = Guard::new();
    let ns = guard.create();
    let target: SocketAddr = "9.9.9.9:53".parse().expect("addr");
    let client = udp_client(&ns.netns, target);

    wait_readable(&ns.dns_udp);
    let mut buf = [0u8; 64];
    let (n, from) = ns.dns_udp.recv_from(&mut buf).expect("dns_udp receives");
    assert_eq!(&buf[..n], b"query");
    assert_eq!(
        canonical(from),
        client.local_addr().expect("client local_addr"),
        "the sender"
    );

    ns.dns_udp
        .send_to(b"answer", from)
        .expect("send the answer");
    let n = client.recv(&mut buf).expect("the answer arrives");
    assert_eq!(&buf[..n], b"answer");
}

#[test]
fn a_port_nobody_listens_on_is_refused_at_once() {
    let guard = Guard::new();
    let ns = guard.create();
    let mut targets: Vec<SocketAddr> = vec!["8.8.8.8:22".parse().expect("addr")];
    if dual_stack(&ns) {
        targets.push("[2001:4860:4860::8888]:22".parse().expect("addr"));
    }
    for target in targets {
        let started = Instant::now();
        let result = inside(&ns.netns, || {
            TcpStream::connect_timeout(&target, Duration::from_secs(1))
        });
        let took = started.elapsed();
        match result {
            Err(e) => assert_eq!(
                e.raw_os_error(),
                Some(libc::ECONNREFUSED),
                "connect to {target}: {e}"
            ),
            Ok(_) => panic!("connect to {target} succeeded"),
        }
        // ECONNREFUSED is the reset the job's stack got: a connection left unanswered
        // ends in the 1 s timeout with ETIMEDOUT instead. The time only tells more.
        eprintln!("refused in {took:?}");
    }
}

#[test]
fn the_listeners_are_not_reachable_from_the_host() {
    let guard = Guard::new();
    let ns = guard.create();
    // The test thread is in the host's namespace (Guard checks it). The host may
    // have listeners of its own on these ports: only ours must see nothing.
    for target in ["127.0.0.1:80", "127.0.0.1:443", "127.0.0.1:53", "[::1]:80"] {
        let target: SocketAddr = target.parse().expect("addr");
        let _ = TcpStream::connect_timeout(&target, Duration::from_millis(200));
    }
    if let Ok(udp) = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)) {
        let _ = udp.send_to(b"", (Ipv4Addr::LOCALHOST, 53));
    }
    std::thread::sleep(Duration::from_millis(20));
    for (name, l) in [
        ("http", &ns.http),
        ("https", &ns.https),
        ("dns_tcp", &ns.dns_tcp),
    ] {
        match l.accept() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{name}: {e}"),
            Ok((_, peer)) => panic!("{name} accepted {peer} from the host"),
        }
    }
    let mut buf = [0u8; 16];
    match ns.dns_udp.recv_from(&mut buf) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) => panic!("dns_udp: {e}"),
        Ok((_, peer)) => panic!("dns_udp received from {peer} on the host"),
    }
}

/// The threads of this process that are in the namespace with inode `ino`.
fn tasks_in(ino: u64) -> Vec<String> {
    let want = format!("net:[{ino}]");
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return vec![];
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_link(t.path().join("ns/net")).is_ok_and(|l| l.to_string_lossy() == want)
        })
        .map(|t| t.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The fds of this process that are the namespace `id`, or a socket in it.
fn fds_in(id: NsId) -> Vec<RawFd> {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return vec![];
    };
    let mut found = vec![];
    for entry in fds.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<RawFd>().ok())
        else {
            continue;
        };
        let Ok(meta) = std::fs::metadata(entry.path()) else {
            continue;
        };
        if (meta.dev(), meta.ino()) == id {
            found.push(fd);
            continue;
        }
        if meta.mode() & libc::S_IFMT != libc::S_IFSOCK {
            continue;
        }
        // SAFETY: SIOCGSKNS takes no argument; on an fd closed meanwhile it only fails.
        let ns = unsafe { libc::ioctl(fd, libc::SIOCGSKNS as _) };
        if ns < 0 {
            continue;
        }
        // SAFETY: `ns` is a new fd the kernel just returned to us; nothing else owns it.
        let ns = unsafe { OwnedFd::from_raw_fd(ns) };
        if fd_id(&ns) == id {
            found.push(fd);
        }
    }
    found
}

#[test]
fn dropping_releases_the_namespace() {
    let guard = Guard::new();
    let ns = guard.create();
    let id = fd_id(&ns.netns);
    // Some use first: a connection inside, accepted.
    let client = inside(&ns.netns, || {
        TcpStream::connect_timeout(
            &"192.0.2.1:443".parse().expect("addr"),
            Duration::from_secs(1),
        )
    })
    .expect("connect inside");
    let server = accept_within(&ns.https, Duration::from_secs(1)).expect("accept");

    let held = fds_in(id);
    for fd in [
        ns.netns.as_raw_fd(),
        ns.http.as_raw_fd(),
        ns.https.as_raw_fd(),
        ns.dns_udp.as_raw_fd(),
        ns.dns_tcp.as_raw_fd(),
        client.as_raw_fd(),
        server.as_raw_fd(),
    ] {
        assert!(
            held.contains(&fd),
            "fd {fd} not seen in the namespace: {held:?}"
        );
    }

    drop((ns, client, server));
    // A joined thread may still hold its namespace for a moment: in do_exit() the
    // kernel wakes the joiner (clear_child_tid, in exit_mm) before it drops the
    // thread's namespaces (exit_task_namespaces). Not seen here, but allowed for.
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let tasks = tasks_in(id.1);
        let fds = fds_in(id);
        if tasks.is_empty() && fds.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the namespace is still referenced: threads {tasks:?}, fds {fds:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn errors_say_what_failed() {
    let e = NetnsError::NetlinkRejected {
        step: "add the route `local ::/0 dev lo table local`",
        source: io::Error::from_raw_os_error(libc::EPERM),
        hint: "",
    };
    let text = e.to_string();
    assert!(text.contains("local ::/0"), "{text}");
    assert!(text.contains("CAP_NET_ADMIN"), "{text}");
}

#[test]
fn a_missing_capability_is_named_with_the_fix() {
    use caps::Capability::CAP_NET_BIND_SERVICE;
    assert_eq!(missing_of(|_| true), None);
    let text = missing_of(|c| c != CAP_NET_BIND_SERVICE).unwrap_or_default();
    assert!(text.contains("CAP_NET_BIND_SERVICE"), "{text}");
    assert!(!text.contains("CAP_NET_ADMIN"), "{text}");
    assert!(text.contains("CapabilityBoundingSet"), "{text}");
    let text = missing_of(|_| false).unwrap_or_default();
    assert!(
        text.contains("CAP_NET_ADMIN and CAP_NET_BIND_SERVICE"),
        "{text}"
    );
}

/// The tests run as root with every capability: nothing is missing.
#[test]
fn root_has_what_a_network_namespace_needs() {
    assert_eq!(missing_capabilities(), None);
}
