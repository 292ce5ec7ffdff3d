use super::*;

fn budgets() -> Budgets {
    Budgets {
        max_records: 3,
        bytes_out: 100,
        bytes_in: 1000,
        job_time: Duration::from_secs(3600),
        connection_time: Duration::from_secs(3600),
    }
}

fn rec(host: &str, port: u16, allowed: bool, bytes_out: u64, bytes_in: u64) -> EgressRecord {
    EgressRecord {
        host: host.into(),
        port,
        allowed,
        bytes_out,
        bytes_in,
        dns: None,
    }
}

#[test]
fn attempts_are_recorded_in_order_with_their_bytes() {
    let r = Recorder::new(budgets());
    r.refused("evil.com", 53);
    let flow = r.open("openvibe.services", 443).unwrap();
    assert_eq!(flow.grant_out(10), Ok(10));
    assert_eq!(flow.grant_in(200), Ok(200));
    assert_eq!(flow.grant_in(0), Ok(0));
    r.refused("127.0.0.1", 80);
    assert_eq!(
        r.records(),
        vec![
            rec("evil.com", 53, false, 0, 0),
            rec("openvibe.services", 443, true, 10, 200),
            rec("127.0.0.1", 80, false, 0, 0),
        ]
    );
    assert_eq!(r.totals(), (10, 200));
    assert_eq!(r.attempts(), 3);
}

#[test]
fn records_past_the_cap_fold_into_one_more_entry() {
    let r = Recorder::new(budgets());
    for i in 0..3 {
        r.refused(&format!("n{i}.example.com"), 443);
    }
    let a = r.open("a.example.com", 443).unwrap();
    let b = r.open("b.example.com", 80).unwrap();
    r.refused("c.example.com", 443);
    a.grant_out(5).unwrap();
    b.grant_in(7).unwrap();
    let records = r.records();
    assert_eq!(records.len(), 4);
    assert_eq!(records[3], rec("…3 more, 2 allowed", 0, false, 5, 7));
    assert_eq!(r.attempts(), 6);
    assert_eq!(r.totals(), (5, 7));
    // A thousand more attempts still give four entries.
    for _ in 0..1000 {
        r.refused("x.example.com", 443);
    }
    let records = r.records();
    assert_eq!(records.len(), 4);
    assert_eq!(records[3].host, "…1003 more, 2 allowed");
}

#[test]
fn dropped_dns_queries_are_one_entry_after_everything_else() {
    let r = Recorder::new(budgets());
    r.looked_up("a.example.com", true, LookupOutcome::Answered);
    assert_eq!(r.records().len(), 1, "nothing dropped, no entry for it");
    for _ in 0..10_000 {
        r.unanswered_query();
    }
    for i in 0..5 {
        r.refused(&format!("n{i}.example.com"), 443);
    }
    let records = r.records();
    assert_eq!(records.len(), 5, "the kept three, the folded, the dropped");
    assert_eq!(records[3].host, "…3 more, 0 allowed");
    assert_eq!(
        records[4],
        rec("…10000 DNS queries unanswered", 53, false, 0, 0)
    );
    assert_eq!(r.attempts(), 6, "a dropped query is not an attempt kept");
}

#[test]
fn the_byte_budget_is_never_exceeded() {
    let r = Recorder::new(budgets());
    let a = r.open("a.example.com", 443).unwrap();
    let b = r.open("b.example.com", 443).unwrap();
    assert_eq!(a.grant_out(60), Ok(60));
    // Only 40 left for the whole job, whichever flow asks.
    assert_eq!(b.grant_out(60), Ok(40));
    assert_eq!(a.grant_out(1), Err(BudgetExceeded::BytesOut));
    assert_eq!(b.grant_out(1), Err(BudgetExceeded::BytesOut));
    // Receiving has its own budget.
    assert_eq!(a.grant_in(999), Ok(999));
    assert_eq!(b.grant_in(5), Ok(1));
    assert_eq!(b.grant_in(5), Err(BudgetExceeded::BytesIn));
    assert_eq!(r.totals(), (100, 1000));
    let records = r.records();
    assert_eq!((records[0].bytes_out, records[0].bytes_in), (60, 999));
    assert_eq!((records[1].bytes_out, records[1].bytes_in), (40, 1));
    // A spent budget refuses new connections, and records them as refused.
    assert_eq!(
        r.open("c.example.com", 443).unwrap_err(),
        BudgetExceeded::BytesOut
    );
    assert_eq!(r.records()[2], rec("c.example.com", 443, false, 0, 0));
}

#[test]
fn a_spent_receive_budget_refuses_new_connections() {
    let r = Recorder::new(budgets());
    let a = r.open("a.example.com", 443).unwrap();
    assert_eq!(a.grant_in(5000), Ok(1000));
    assert_eq!(
        r.open("b.example.com", 443).unwrap_err(),
        BudgetExceeded::BytesIn
    );
}

#[test]
fn the_job_time_ends_egress() {
    let started = Instant::now() - Duration::from_secs(10);
    let r = Recorder::with_start(
        Budgets {
            job_time: Duration::from_secs(5),
            ..budgets()
        },
        started,
    );
    assert_eq!(
        r.open("a.example.com", 443).unwrap_err(),
        BudgetExceeded::JobTime
    );
    assert_eq!(r.records(), vec![rec("a.example.com", 443, false, 0, 0)]);
    assert!(r.job_deadline() <= Instant::now());
}

#[test]
fn a_flow_ends_at_the_earlier_of_job_and_connection_time() {
    let r = Recorder::new(Budgets {
        connection_time: Duration::ZERO,
        ..budgets()
    });
    let flow = r.open("a.example.com", 443).unwrap();
    assert_eq!(flow.grant_out(1), Err(BudgetExceeded::ConnectionTime));
    assert_eq!(flow.remaining(), Duration::ZERO);

    let started = Instant::now();
    let r = Recorder::with_start(
        Budgets {
            job_time: Duration::from_secs(60),
            connection_time: Duration::from_secs(3600),
            ..budgets()
        },
        started,
    );
    let flow = r.open("a.example.com", 443).unwrap();
    assert_eq!(flow.deadline(), started + Duration::from_secs(60));
    assert!(flow.remaining() <= Duration::from_secs(60));
    assert_eq!(flow.grant_out(1), Ok(1));
}

#[test]
fn the_recorder_is_shared_across_threads() {
    let r = Recorder::new(Budgets {
        max_records: 1000,
        bytes_out: 1_000_000,
        ..budgets()
    });
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let r = Arc::clone(&r);
            std::thread::spawn(move || {
                for i in 0..50 {
                    let flow = r.open(&format!("h{t}-{i}.example.com"), 443).unwrap();
                    for _ in 0..10 {
                        flow.grant_out(100).unwrap();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(r.attempts(), 400);
    // 400 flows × 10 × 100 would be 400000 bytes: all of it fits.
    assert_eq!(r.totals().0, 400_000);
    assert_eq!(
        r.records().iter().map(|e| e.bytes_out).sum::<u64>(),
        400_000
    );
}

#[test]
fn concurrent_grants_never_exceed_the_budget() {
    let r = Recorder::new(Budgets {
        bytes_out: 12_345,
        ..budgets()
    });
    let flows: Vec<Flow> = (0..8)
        .map(|_| r.open("a.example.com", 443).unwrap())
        .collect();
    let handles: Vec<_> = flows
        .into_iter()
        .map(|flow| {
            std::thread::spawn(move || {
                let mut sent = 0u64;
                while let Ok(n) = flow.grant_out(97) {
                    sent += n as u64;
                }
                sent
            })
        })
        .collect();
    let sent: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sent, 12_345);
    assert_eq!(r.totals().0, 12_345);
}

#[test]
fn the_default_budgets_match_the_shipped_policy() {
    assert_eq!(
        crate::egress::policy::EgressPolicy::shipped().budgets,
        Budgets::default()
    );
}

#[test]
fn a_name_is_recorded_once_with_the_outcome_of_its_first_lookup() {
    let r = Recorder::new(Budgets {
        max_records: 10,
        ..budgets()
    });
    r.looked_up("nothing.example.org", true, LookupOutcome::Nxdomain);
    r.looked_up("evil.com", false, LookupOutcome::Refused);
    r.looked_up("nothing.example.org", true, LookupOutcome::Nxdomain);
    r.looked_up("evil.com", false, LookupOutcome::Refused);
    let flow = r.open("api.example.org", 80).unwrap();
    drop(flow);
    r.looked_up("api.example.org", true, LookupOutcome::Answered);
    let lookup = |host: &str, allowed, dns| EgressRecord {
        dns: Some(dns),
        ..rec(host, 53, allowed, 0, 0)
    };
    assert_eq!(
        r.records(),
        vec![
            lookup("nothing.example.org", true, LookupOutcome::Nxdomain),
            lookup("evil.com", false, LookupOutcome::Refused),
            rec("api.example.org", 80, true, 0, 0),
            lookup("api.example.org", true, LookupOutcome::Answered),
        ]
    );
}

#[test]
fn a_grant_not_used_is_given_back() {
    let r = Recorder::new(budgets());
    let flow = r.open("openvibe.services", 80).unwrap();
    assert_eq!(flow.grant_out(60), Ok(60));
    flow.give_back_out(50);
    flow.give_back_out(0);
    assert_eq!(r.totals(), (10, 0));
    assert_eq!(
        flow.grant_out(100),
        Ok(90),
        "what was given back is free again"
    );
    assert_eq!(
        r.records(),
        vec![rec("openvibe.services", 80, true, 100, 0)]
    );
}
