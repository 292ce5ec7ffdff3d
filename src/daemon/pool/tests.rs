use super::*;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::time::Instant;

const MIB: u64 = 1024 * 1024;

fn deny(mem_bytes: u64) -> Shape {
    Shape {
        net: Net::Deny,
        mem_bytes,
    }
}

fn settings() -> PoolSettings {
    PoolSettings {
        warm: WarmConfig::default(),
        skills_on: true,
        max_jobs: 2,
        revision: "r1".into(),
    }
}

/// A sandbox that holds nothing: it counts how many of its kind live.
struct Fake {
    shape: Shape,
    born: Instant,
    alive: Arc<AtomicBool>,
    live: Arc<AtomicUsize>,
    /// Its teardown waits for a permit here (the warmer's `teardowns`).
    teardowns: Arc<Semaphore>,
    /// The warmer's `slot_taker`.
    slot_taker: SlotTaker,
}

/// Job slots the next teardown takes one of (and keeps), as a job starting then would.
type SlotTaker = Arc<Mutex<Option<Arc<Semaphore>>>>;

impl Held for Fake {
    fn shape(&self) -> Shape {
        self.shape
    }
    fn age(&self) -> Duration {
        self.born.elapsed()
    }
    fn is_alive(&mut self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }
    fn memory_bytes(&self) -> u64 {
        40 * MIB
    }
    fn discard(self) -> impl Future<Output = ()> + Send + 'static {
        let live = self.live.clone();
        let teardowns = self.teardowns.clone();
        let taker = self.slot_taker.clone();
        async move {
            if let Ok(permit) = teardowns.acquire().await {
                permit.forget();
            }
            let slots = taker.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(slots) = slots {
                if let Ok(permit) = slots.acquire().await {
                    permit.forget();
                }
            }
            live.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

struct FakeWarmer {
    live: Arc<AtomicUsize>,
    /// Permits for teardowns: unbounded unless a test holds them back (`hold_teardowns`).
    teardowns: Arc<Semaphore>,
    made: AtomicUsize,
    fail: AtomicBool,
    /// Warm-ups of this `mem_bytes` fail (0: none).
    fail_mem: AtomicU64,
    delay_ms: AtomicU64,
    /// The `alive` flag of every sandbox made, in order.
    flags: Mutex<Vec<Arc<AtomicBool>>>,
    uids: usize,
    slot_taker: SlotTaker,
}

impl Default for FakeWarmer {
    fn default() -> FakeWarmer {
        FakeWarmer {
            live: Arc::default(),
            teardowns: Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)),
            made: AtomicUsize::default(),
            fail: AtomicBool::default(),
            fail_mem: AtomicU64::default(),
            delay_ms: AtomicU64::default(),
            flags: Mutex::default(),
            uids: 0,
            slot_taker: SlotTaker::default(),
        }
    }
}

impl FakeWarmer {
    /// Every teardown from now on waits until the test lets it go (`let_teardowns_go`).
    fn hold_teardowns(&mut self) {
        self.teardowns = Arc::new(Semaphore::new(0));
    }

    fn let_teardowns_go(&self) {
        self.teardowns.add_permits(1000);
    }
}

impl Warmer for FakeWarmer {
    type Sandbox = Fake;

    fn warm_up(&self, shape: Shape) -> impl Future<Output = Result<Fake, String>> + Send {
        let delay = Duration::from_millis(self.delay_ms.load(Ordering::SeqCst));
        let fail = self.fail.load(Ordering::SeqCst)
            || self.fail_mem.load(Ordering::SeqCst) == shape.mem_bytes;
        let live = self.live.clone();
        let teardowns = self.teardowns.clone();
        let slot_taker = self.slot_taker.clone();
        let alive = Arc::new(AtomicBool::new(true));
        if !fail {
            self.made.fetch_add(1, Ordering::SeqCst);
            self.flags
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(alive.clone());
        }
        async move {
            tokio::time::sleep(delay).await;
            if fail {
                return Err("no sandbox here".into());
            }
            live.fetch_add(1, Ordering::SeqCst);
            Ok(Fake {
                shape,
                born: Instant::now(),
                alive,
                live,
                teardowns,
                slot_taker,
            })
        }
    }

    fn warmable(&self, shape: Shape) -> bool {
        shape.net == Net::Deny
    }

    fn uid_count(&self) -> usize {
        if self.uids == 0 {
            65_536
        } else {
            self.uids
        }
    }
}

fn pool_of(warmer: FakeWarmer, s: PoolSettings, permits: usize) -> Arc<Pool<FakeWarmer>> {
    Pool::new(Arc::new(warmer), s, Arc::new(Semaphore::new(permits)))
}

/// Waits (bounded: 5 s) until `cond` holds.
async fn until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("not within 5 s: {what}");
}

/// A sandbox past `max_age_ms` is discarded when a job looks for one, not handed out,
/// though no refill ran to discard it (the refill may be in a warm-up or a backoff).
#[tokio::test]
async fn a_sandbox_past_its_age_is_never_handed_out() {
    let warmer = FakeWarmer::default();
    let live = warmer.live.clone();
    let shape = deny(128 * MIB);
    let aged = |mut f: Fake| {
        f.born = Instant::now()
            .checked_sub(Duration::from_millis(1500))
            .expect("a boot over 1.5 s ago");
        f
    };
    let old = aged(warmer.warm_up(shape).await.expect("made"));
    let older = aged(warmer.warm_up(shape).await.expect("made"));
    let fresh = warmer.warm_up(shape).await.expect("made");
    let mut s = settings();
    s.warm.max_age_ms = 1000;
    // Not started: no refill task.
    let pool = pool_of(warmer, s, 2);
    pool.state().ready.extend([old, fresh, older]);
    let got = pool.take_ready(shape).expect("the fresh one");
    assert!(got.age() < Duration::from_millis(1000), "{:?}", got.age());
    // The old ones were discarded on the way, or are the only ones left: none is given.
    assert!(pool.take_ready(shape).is_none());
    until("the old ones torn down", || {
        live.load(Ordering::SeqCst) == 1
    })
    .await;
    assert!(pool.state().ready.is_empty());
}

#[test]
fn by_default_two_sandboxes_of_the_contracts_default_shape() {
    let t = Targets::of(&settings(), &VecDeque::new(), 65_536);
    assert_eq!(t.0, vec![(deny(128 * MIB), 2, false)]);
}

#[test]
fn nothing_is_kept_while_skills_are_off_or_the_pool_is_disabled() {
    let mut s = settings();
    s.skills_on = false;
    assert_eq!(
        Targets::of(&s, &VecDeque::new(), 65_536),
        Targets::default()
    );
    let mut s = settings();
    s.warm.enabled = false;
    assert_eq!(
        Targets::of(&s, &VecDeque::new(), 65_536),
        Targets::default()
    );
}

#[test]
fn a_shape_recent_jobs_asked_for_twice_is_learned_one_sandbox() {
    let mut recent: VecDeque<Shape> = [deny(96 * MIB)].into_iter().collect();
    let s = settings();
    assert_eq!(
        Targets::of(&s, &recent, 65_536).0.len(),
        1,
        "once is not enough"
    );
    recent.push_back(deny(128 * MIB));
    recent.push_back(deny(96 * MIB));
    recent.push_back(Shape {
        net: Net::Public,
        mem_bytes: 64 * MIB,
    });
    recent.push_back(Shape {
        net: Net::Public,
        mem_bytes: 64 * MIB,
    });
    let t = Targets::of(&s, &recent, 65_536);
    assert_eq!(
        t.0,
        vec![(deny(128 * MIB), 2, false), (deny(96 * MIB), 1, true)],
        "a configured shape is not learned again, and egress shapes never"
    );
    let mut s = settings();
    s.warm.learn = 0;
    assert_eq!(Targets::of(&s, &recent, 65_536).0.len(), 1);
}

#[test]
fn the_pool_leaves_the_jobs_their_uids() {
    let mut s = settings();
    s.warm.shapes.push(crate::config::WarmShape {
        mem_bytes: 64 * MIB,
        count: 3,
    });
    // 4 uids, 2 job slots: 2 for the pool, the first shape's.
    let t = Targets::of(&s, &VecDeque::new(), 4);
    assert_eq!(t.0, vec![(deny(128 * MIB), 2, false)]);
    let t = Targets::of(&s, &VecDeque::new(), 5);
    assert_eq!(
        t.0,
        vec![(deny(128 * MIB), 2, false), (deny(64 * MIB), 1, false)]
    );
    assert_eq!(Targets::of(&s, &VecDeque::new(), 2), Targets::default());
}

#[test]
fn stale_sandboxes_are_the_old_the_unkept_and_the_surplus() {
    let t = Targets(vec![(deny(128 * MIB), 1, false)]);
    let ready = [
        (deny(128 * MIB), Duration::from_secs(5)),
        (deny(128 * MIB), Duration::from_secs(1)),
        (deny(64 * MIB), Duration::from_secs(1)),
        (deny(128 * MIB), Duration::from_secs(700)),
    ];
    // The newest of the kept shape stays; the older one is surplus, the 64 MiB one is
    // not kept, the last is too old.
    assert_eq!(stale(&ready, &t, Duration::from_secs(600)), vec![0, 2, 3]);
    assert_eq!(
        stale(&ready[1..2], &t, Duration::from_secs(600)),
        Vec::<usize>::new()
    );
}

#[tokio::test]
async fn the_pool_fills_serves_once_and_refills() {
    let pool = pool_of(FakeWarmer::default(), settings(), 2);
    pool.start();
    until("two ready", || pool.info().ready == 2).await;
    let shape = deny(128 * MIB);
    let first = pool.take_ready(shape);
    assert!(first.is_some(), "a sandbox for the job");
    assert_eq!(pool.info().hits, 0, "a hit once the hand-over is done");
    pool.handed_over();
    assert_eq!(pool.info().hits, 1);
    // One that fails at its hand-over served no job: no hit, and the count of hits never
    // goes down (it is a Prometheus counter).
    let failed = pool.take_ready(shape);
    assert!(failed.is_some());
    pool.hand_over_failed();
    assert_eq!((pool.info().hits, pool.info().hand_overs_failed), (1, 1));
    if let Some(f) = failed {
        f.discard().await;
    }
    until("refilled", || pool.info().ready == 2).await;
    assert_eq!(pool.info().made, 4);
    assert!(
        pool.take_ready(deny(96 * MIB)).is_none(),
        "another shape: a miss"
    );
    assert_eq!(pool.info().misses, 1);
    let info = pool.info();
    assert_eq!(info.memory_bytes, 80 * MIB);
    assert_eq!(info.shapes[0].target, 2);
    drop(first.map(|f| f.discard()));
    pool.shutdown().await;
    assert_eq!(
        pool.warmer.live.load(Ordering::SeqCst),
        1,
        "the one taken only"
    );
}

#[tokio::test]
async fn skills_off_drains_and_stops_the_refill() {
    let pool = pool_of(FakeWarmer::default(), settings(), 2);
    pool.start();
    until("two ready", || pool.info().ready == 2).await;
    let mut off = settings();
    off.skills_on = false;
    pool.configure(off).await;
    assert_eq!(pool.info().ready, 0);
    assert_eq!(
        pool.warmer.live.load(Ordering::SeqCst),
        0,
        "every one discarded"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        pool.warmer.made.load(Ordering::SeqCst),
        2,
        "none made while off"
    );
    pool.configure(settings()).await;
    until("ready again", || pool.info().ready == 2).await;
    pool.shutdown().await;
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn any_configuration_change_replaces_every_sandbox() {
    let pool = pool_of(FakeWarmer::default(), settings(), 2);
    pool.start();
    until("two ready", || pool.info().ready == 2).await;
    let same = settings();
    pool.configure(same).await;
    assert_eq!(
        pool.info().discarded,
        0,
        "the same settings again change nothing"
    );
    let mut changed = settings();
    changed.revision = "r2".into();
    pool.configure(changed).await;
    assert_eq!(pool.info().discarded, 2);
    until("refilled", || pool.info().ready == 2).await;
    assert_eq!(pool.warmer.made.load(Ordering::SeqCst), 4);
    pool.shutdown().await;
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn old_sandboxes_are_replaced() {
    let mut s = settings();
    s.warm.max_age_ms = 50;
    let pool = pool_of(FakeWarmer::default(), s, 2);
    pool.start();
    until("recycled and made again", || {
        pool.info().discarded >= 2 && pool.warmer.made.load(Ordering::SeqCst) >= 4
    })
    .await;
    pool.shutdown().await;
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn nothing_is_made_while_every_job_slot_is_taken() {
    let pool = pool_of(FakeWarmer::default(), settings(), 0);
    pool.start();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(pool.warmer.made.load(Ordering::SeqCst), 0);
    pool.slots.add_permits(1);
    until("made once a slot is free", || pool.info().ready == 2).await;
    pool.shutdown().await;
}

#[tokio::test]
async fn slots_taken_between_the_refills_checks_leave_nothing_starting() {
    // One sandbox of one shape, replaced when 100 ms old, one job slot: the stale one's
    // teardown, which the refill task runs after deciding to make its replacement and
    // before starting it, takes the slot, as a job starting then would.
    let mut s = settings();
    s.warm.shapes = vec![crate::config::WarmShape {
        mem_bytes: 128 * MIB,
        count: 1,
    }];
    s.warm.learn = 0;
    s.warm.max_age_ms = 100;
    let pool = pool_of(FakeWarmer::default(), s, 1);
    *pool.warmer.slot_taker.lock().expect("taker") = Some(pool.slots.clone());
    pool.start();
    until("the slot taken by the stale one's teardown", || {
        pool.slots.available_permits() == 0 && pool.warmer.live.load(Ordering::SeqCst) == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let info = pool.info();
    assert_eq!(
        (info.ready, info.starting),
        (0, 0),
        "nothing is being made while the slot is taken"
    );
    assert_eq!(pool.warmer.made.load(Ordering::SeqCst), 1);
    // The job ends: the shape is made again (it counted a sandbox being made that was not).
    pool.slots.add_permits(1);
    until("the replacement made", || {
        pool.warmer.made.load(Ordering::SeqCst) >= 2
    })
    .await;
    pool.shutdown().await;
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn shutdown_discards_a_sandbox_still_being_made() {
    let warmer = FakeWarmer::default();
    warmer.delay_ms.store(200, Ordering::SeqCst);
    let pool = pool_of(warmer, settings(), 2);
    pool.start();
    until("one starting", || pool.info().starting == 1).await;
    pool.shutdown().await;
    assert_eq!(pool.warmer.made.load(Ordering::SeqCst), 1);
    assert_eq!(
        pool.warmer.live.load(Ordering::SeqCst),
        0,
        "discarded once made"
    );
    assert_eq!(pool.info().ready, 0);
}

/// On tokio's paused clock: the backoff is waited exactly, however loaded the machine.
#[tokio::test(start_paused = true)]
async fn a_warm_up_that_fails_is_counted_and_tried_again_later() {
    let warmer = FakeWarmer::default();
    warmer.fail.store(true, Ordering::SeqCst);
    let pool = pool_of(warmer, settings(), 2);
    pool.start();
    until("a failure", || pool.info().failed >= 1).await;
    // Jobs coming meanwhile (each take wakes the refill) do not cut the backoff short.
    for _ in 0..10 {
        assert!(pool.take_ready(deny(128 * MIB)).is_none());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(pool.info().failed, 1, "the next try waits its backoff");
    pool.warmer.fail.store(false, Ordering::SeqCst);
    until("made after the backoff", || pool.info().ready == 2).await;
    pool.shutdown().await;
}

/// Only new settings cut a backoff short: a change the pool had taken before its warm-up
/// failed does not (its wake-up was left stored while the pool was full). Before, the
/// first failure after any reload was tried again at once.
#[tokio::test(start_paused = true)]
async fn a_reload_the_pool_already_had_does_not_cut_a_backoff_short() {
    let pool = pool_of(FakeWarmer::default(), settings(), 2);
    pool.start();
    until("two ready", || pool.info().ready == 2).await;
    let mut other = settings();
    other.warm.max_age_ms += 1;
    pool.configure(other).await;
    until("two ready again", || {
        pool.info().ready == 2 && pool.info().discarded == 2
    })
    .await;
    pool.warmer.fail.store(true, Ordering::SeqCst);
    assert!(pool.take_ready(deny(128 * MIB)).is_some());
    until("a failure", || pool.info().failed >= 1).await;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(pool.info().failed, 1, "the next try waits its backoff");
    // A change now ends the backoff at once.
    let mut again = settings();
    again.warm.max_age_ms += 2;
    pool.configure(again).await;
    until("tried again", || pool.info().failed >= 2).await;
    pool.shutdown().await;
}

#[tokio::test]
async fn a_sandbox_that_died_waiting_is_discarded_not_handed_out() {
    let pool = pool_of(FakeWarmer::default(), settings(), 2);
    pool.start();
    until("two ready", || pool.info().ready == 2).await;
    kill_every_sandbox_made(&pool);
    assert!(pool.take_ready(deny(128 * MIB)).is_none());
    assert_eq!(pool.info().misses, 1);
    until("the dead discarded", || {
        pool.warmer.live.load(Ordering::SeqCst) == pool.info().ready
    })
    .await;
    pool.shutdown().await;
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_sandbox_that_died_waiting_is_replaced_before_any_job_comes() {
    let pool = pool_of(FakeWarmer::default(), settings(), 2);
    pool.start();
    until("two ready", || pool.info().ready == 2).await;
    let made = pool.info().made;
    kill_every_sandbox_made(&pool);
    // No job takes one: the refill's own check finds them, tears them down, makes two more.
    until("two more made, and only live ones held", || {
        let info = pool.info();
        info.made == made + 2 && info.ready == 2 && pool.warmer.live.load(Ordering::SeqCst) == 2
    })
    .await;
    let info = pool.info();
    assert_eq!(
        (info.hits, info.misses),
        (0, 0),
        "no job was needed to find them"
    );
    assert_eq!(info.discarded, 2);
    pool.shutdown().await;
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 0);
}

/// A pool of two job slots whose warmer holds every teardown until let go, started and
/// with two sandboxes ready.
async fn two_ready_with_teardowns_held() -> Arc<Pool<FakeWarmer>> {
    let mut warmer = FakeWarmer::default();
    warmer.hold_teardowns();
    let pool = pool_of(warmer, settings(), 2);
    pool.start();
    until("two ready", || pool.info().ready == 2).await;
    pool
}

/// Every sandbox the warmer has made so far dies (its init stage "ends").
fn kill_every_sandbox_made(pool: &Pool<FakeWarmer>) {
    let flags = pool.warmer.flags.lock().unwrap_or_else(|p| p.into_inner());
    for flag in flags.iter() {
        flag.store(false, Ordering::SeqCst);
    }
}

/// Every sandbox made and not yet torn down is ready, starting or stopping in what
/// `/v1/info` shows.
fn accounted(pool: &Pool<FakeWarmer>) -> bool {
    let info = pool.info();
    pool.warmer.live.load(Ordering::SeqCst) <= info.ready + info.starting + info.stopping
}

#[tokio::test]
async fn dead_sandboxes_a_job_found_are_stopping_until_torn_down() {
    let pool = two_ready_with_teardowns_held().await;
    kill_every_sandbox_made(&pool);
    assert!(pool.take_ready(deny(128 * MIB)).is_none());
    // Their teardown is held: they are out of `ready` and shown as stopping meanwhile,
    // while the refill makes two more.
    until("two more ready", || pool.info().ready == 2).await;
    let info = pool.info();
    assert_eq!(info.stopping, 2, "{info:?}");
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 4);
    assert!(accounted(&pool));
    pool.warmer.let_teardowns_go();
    until("the dead torn down", || pool.info().stopping == 0).await;
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 2);
    pool.shutdown().await;
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 0);
}

/// With few uids (`max_jobs` + 2), sandboxes being torn down still hold theirs: the refill
/// makes no new ones until they are gone, so the jobs always find the uids they need.
#[tokio::test]
async fn sandboxes_being_torn_down_count_against_the_uids_the_jobs_leave() {
    let mut warmer = FakeWarmer {
        uids: settings().max_jobs + 2,
        ..FakeWarmer::default()
    };
    warmer.hold_teardowns();
    let pool = pool_of(warmer, settings(), 2);
    pool.start();
    until("two ready", || pool.info().ready == 2).await;
    kill_every_sandbox_made(&pool);
    assert!(pool.take_ready(deny(128 * MIB)).is_none());
    assert_eq!(pool.info().stopping, 2);
    // The refill was woken by the take and checks again every second: nothing new.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let info = pool.info();
    assert_eq!(info.ready + info.starting, 0, "{info:?}");
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 2);
    pool.warmer.let_teardowns_go();
    until("two ready again", || pool.info().ready == 2).await;
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 2);
    pool.shutdown().await;
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn shutdown_waits_for_the_teardown_of_dead_sandboxes_a_job_found() {
    let pool = two_ready_with_teardowns_held().await;
    kill_every_sandbox_made(&pool);
    // Every job slot taken: the refill makes no other sandbox whose teardown (held too)
    // would keep the shutdown waiting for another reason.
    let _slots = pool
        .slots
        .clone()
        .acquire_many_owned(2)
        .await
        .expect("the slots");
    assert!(pool.take_ready(deny(128 * MIB)).is_none());
    assert_eq!(pool.info().stopping, 2);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        pool.info().ready + pool.info().starting,
        0,
        "{:?}",
        pool.info()
    );
    shutdown_waits_for_the_held_teardowns(&pool).await;
}

/// Shuts `pool` down while its warmer holds the teardowns: the shutdown is not over until
/// they are let go, and then every sandbox is torn down.
async fn shutdown_waits_for_the_held_teardowns(pool: &Arc<Pool<FakeWarmer>>) {
    let stopping = tokio::spawn({
        let pool = pool.clone();
        async move { pool.shutdown().await }
    });
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(
            !stopping.is_finished(),
            "shutdown returned with teardowns running"
        );
    }
    pool.warmer.let_teardowns_go();
    tokio::time::timeout(Duration::from_secs(5), stopping)
        .await
        .expect("shutdown within 5 s")
        .expect("shutdown");
    assert_eq!(
        pool.warmer.live.load(Ordering::SeqCst),
        0,
        "every sandbox torn down"
    );
    assert_eq!(pool.info().stopping, 0);
}

#[tokio::test]
async fn a_drain_shows_its_sandboxes_stopping_until_torn_down() {
    let pool = two_ready_with_teardowns_held().await;
    let drain = {
        let pool = pool.clone();
        let mut off = settings();
        off.skills_on = false;
        tokio::spawn(async move { pool.configure(off).await })
    };
    until("both stopping", || pool.info().stopping == 2).await;
    for _ in 0..20 {
        assert!(accounted(&pool), "{:?}", pool.info());
        assert_eq!(pool.info().ready, 0, "nothing is made while skills are off");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!drain.is_finished(), "the drain waits for its teardowns");
    pool.warmer.let_teardowns_go();
    drain.await.expect("the drain");
    let info = pool.info();
    assert_eq!((info.ready, info.stopping), (0, 0), "{info:?}");
    assert_eq!(pool.warmer.live.load(Ordering::SeqCst), 0);
    pool.shutdown().await;
}

#[tokio::test]
async fn shutdown_waits_for_a_drain_whose_reload_was_stopped() {
    let pool = two_ready_with_teardowns_held().await;
    // A configuration change drains the pool; the task of the reload that asked for it
    // is stopped before the teardowns end (the daemon stops it at its shutdown).
    let reload = {
        let pool = pool.clone();
        let mut changed = settings();
        changed.revision.push_str(" changed");
        tokio::spawn(async move { pool.configure(changed).await })
    };
    until("both stopping", || pool.info().stopping == 2).await;
    reload.abort();
    let _ = reload.await;
    shutdown_waits_for_the_held_teardowns(&pool).await;
}

#[tokio::test]
async fn a_learned_shape_is_warmed_after_two_misses() {
    let pool = pool_of(FakeWarmer::default(), settings(), 2);
    pool.start();
    until("two ready", || pool.info().ready == 2).await;
    let other = deny(96 * MIB);
    assert!(pool.take_ready(other).is_none());
    assert!(pool.take_ready(other).is_none());
    until("the learned shape warm", || pool.info().ready == 3).await;
    assert!(pool.take_ready(other).is_some(), "the third job of it hits");
    let learned = pool.info().shapes.into_iter().find(|s| s.learned);
    assert_eq!(learned.map(|s| s.mem_bytes), Some(96 * MIB));
    pool.shutdown().await;
}

/// A shape that cannot be made (here a learned one) waits its own backoff: the configured
/// shape is refilled at once meanwhile. Before, one backoff held every shape, so after two
/// takes each job of the default shape ran cold for up to 30 s.
#[tokio::test(start_paused = true)]
async fn a_shape_that_cannot_be_made_keeps_no_other_from_refilling() {
    let warmer = FakeWarmer::default();
    warmer.fail_mem.store(16 * MIB, Ordering::SeqCst);
    let pool = pool_of(warmer, settings(), 2);
    pool.start();
    until("two ready", || pool.info().ready == 2).await;
    let small = deny(16 * MIB);
    assert!(pool.take_ready(small).is_none());
    assert!(pool.take_ready(small).is_none());
    // Its waits grow: 0.5 s, 1 s, 2 s, then 4 s.
    until("the learned shape failed thrice", || {
        pool.info().failed >= 3
    })
    .await;
    for _ in 0..2 {
        assert!(pool.take_ready(deny(128 * MIB)).is_some());
        let mut ready = false;
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            ready = pool.info().ready == 2;
            if ready {
                break;
            }
        }
        assert!(
            ready,
            "the default shape refilled within 200 ms, in the learned one's wait"
        );
    }
    // The failing shape is still tried, after its wait.
    let failed = pool.info().failed;
    until("tried again", || pool.info().failed > failed).await;
    pool.shutdown().await;
}

#[test]
fn each_shape_waits_its_own_backoff_doubling_to_the_most() {
    let now = tokio::time::Instant::now();
    let (a, b) = (deny(16 * MIB), deny(128 * MIB));
    let mut w = Backoffs::default();
    assert!(w.may_try(a, now) && w.next_try(now).is_none());
    assert_eq!(w.failed(a, now), BACKOFF_MIN);
    assert!(!w.may_try(a, now) && w.may_try(b, now));
    assert_eq!(w.next_try(now), Some(now + BACKOFF_MIN));
    assert!(w.may_try(a, now + BACKOFF_MIN));
    assert_eq!(w.failed(a, now), BACKOFF_MIN * 2);
    for _ in 0..10 {
        w.failed(a, now);
    }
    assert_eq!(w.failed(a, now), BACKOFF_MAX);
    w.succeeded(a);
    assert!(w.may_try(a, now));
    assert_eq!(w.failed(a, now), BACKOFF_MIN, "a success starts it over");
    // A shape no longer kept is forgotten: the list never outgrows the targets.
    w.failed(b, now);
    w.keep_only(&Targets(vec![(b, 1, false)]));
    assert!(w.may_try(a, now) && !w.may_try(b, now));
    assert_eq!(w.next_try(now), Some(now + BACKOFF_MIN));
}
