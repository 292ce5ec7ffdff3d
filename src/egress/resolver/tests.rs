//! Unit tests of `src/egress/resolver.rs`.

use super::*;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicUsize, Ordering};

use hickory_proto::op::{Message, OpCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{RData, Record, RecordType};
use tokio::net::UdpSocket;

const ADDRESS: Ipv4Addr = Ipv4Addr::new(93, 184, 216, 34);

/// A DNS server on loopback that answers every A and AAAA query (TTL one hour, so a cache
/// would keep the answer) and counts the A queries it was asked.
async fn counting_upstream() -> (SocketAddr, Arc<AtomicUsize>) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let addr = socket.local_addr().expect("addr");
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                return;
            };
            let Ok(query) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let Some(question) = query.queries.first().cloned() else {
                continue;
            };
            let mut response = Message::response(query.metadata.id, OpCode::Query);
            response.metadata.recursion_desired = query.metadata.recursion_desired;
            response.metadata.recursion_available = true;
            response.add_query(question.clone());
            let rdata = match question.query_type() {
                RecordType::A => {
                    counted.fetch_add(1, Ordering::SeqCst);
                    Some(RData::A(A(ADDRESS)))
                }
                RecordType::AAAA => Some(RData::AAAA(AAAA(Ipv6Addr::new(
                    0x2606, 0x2800, 0x220, 1, 0x248, 0x1893, 0x25c8, 0x1946,
                )))),
                _ => None,
            };
            if let Some(rdata) = rdata {
                response.add_answer(Record::from_rdata(question.name().clone(), 3600, rdata));
            }
            if let Ok(bytes) = response.to_vec() {
                let _ = socket.send_to(&bytes, from).await;
            }
        }
    });
    (addr, asked)
}

/// The upstream resolver is one for all jobs: it keeps no answer, so one job cannot time a
/// lookup to learn whether another job looked the same name up lately. Each job keeps its
/// own answers (`ServedJob::names`).
#[tokio::test]
async fn jobs_share_no_cached_answer() {
    let (server, asked) = counting_upstream().await;
    let upstream = Upstream::fixed(&[server]);
    let job_a = upstream.current().expect("resolver");
    let job_b = upstream.current().expect("resolver");
    assert!(
        Arc::ptr_eq(&job_a, &job_b),
        "every job asks the same resolver"
    );
    for (job, expected) in [(&job_a, 1), (&job_b, 2)] {
        let found: Vec<IpAddr> = job
            .lookup_ip("www.example.com.")
            .await
            .expect("lookup")
            .iter()
            .collect();
        assert!(found.contains(&IpAddr::V4(ADDRESS)), "{found:?}");
        assert_eq!(
            asked.load(Ordering::SeqCst),
            expected,
            "every lookup reaches the upstream"
        );
    }
    assert_eq!(job_a.options().cache_size, 0);
}
