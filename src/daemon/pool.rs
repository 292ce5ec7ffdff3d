//! The daemon's warm pool: sandboxes made ahead of the jobs that will use them
//! (`engine::warm`), so a job of a kept shape starts in a Node that is already running.
//!
//! 1. What to keep ([`Targets`]): the configured shapes (`[daemon.warm]`), plus up to
//!    `learn` shapes, one sandbox each, that recent `deny` jobs asked for at least twice.
//!    Nothing while skills are off or the pool is disabled.
//! 2. One refill task makes what is missing, one sandbox at a time, only while a job slot
//!    is free (the warm processes start at nice 10 besides), and never more than the uids
//!    the running jobs leave.
//! 3. A job takes a ready sandbox of its shape (a hit) or runs cold (a miss); the refill
//!    task then makes the next. A sandbox that died waiting is discarded on the way.
//! 4. A sandbox older than `max_age_ms`, or of a shape no longer kept, is discarded and
//!    replaced; on `skills off`, a configuration change and shutdown every one is.
//! 5. A shape whose warm-up failed waits its own backoff ([`Backoffs`]); the others go on.
//!
//! Warm sandboxes are never counted in `max_jobs` or the queue: they hold no job. The
//! decisions (what is missing, what is stale) are pure functions of the pool's state,
//! tested with a stand-in for the engine ([`Warmer`]) that needs no root.

use crate::config::WarmConfig;
use crate::engine::warm::{Shape, WarmSandbox, WarmSource};
use crate::engine::Engine;
use crate::job::Net;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

/// How many recent jobs' shapes the pool learns from.
const RECENT: usize = 32;
/// A shape asked for this often among them is kept warm (when `learn` allows).
const LEARN_AT: usize = 2;
/// How long the refill task waits when nothing is missing, at most (ages are checked then).
const IDLE_CHECK: Duration = Duration::from_secs(1);
/// How long it waits while every job slot is taken.
const BUSY_CHECK: Duration = Duration::from_millis(25);
/// After a warm-up of a shape fails, its next waits this long, doubling up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// What makes warm sandboxes: the engine, or a stand-in in the unit tests.
pub trait Warmer: Send + Sync + 'static {
    type Sandbox: Held;
    fn warm_up(&self, shape: Shape) -> impl Future<Output = Result<Self::Sandbox, String>> + Send;
    /// Whether a sandbox of `shape` can be kept here at all.
    fn warmable(&self, shape: Shape) -> bool;
    /// Uids the sandboxes and the jobs share: the pool keeps at most this less `max_jobs`.
    fn uid_count(&self) -> usize;
}

/// One sandbox the pool holds.
pub trait Held: Send + 'static {
    fn shape(&self) -> Shape;
    fn age(&self) -> Duration;
    fn is_alive(&mut self) -> bool;
    fn memory_bytes(&self) -> u64;
    fn discard(self) -> impl Future<Output = ()> + Send + 'static;
}

impl Warmer for Engine {
    type Sandbox = WarmSandbox;

    fn warm_up(&self, shape: Shape) -> impl Future<Output = Result<WarmSandbox, String>> + Send {
        Engine::warm_up(self, shape)
    }

    fn warmable(&self, shape: Shape) -> bool {
        Engine::warmable(self, shape)
    }

    fn uid_count(&self) -> usize {
        self.config.runner.sandbox_uid_count as usize
    }
}

impl Held for WarmSandbox {
    fn shape(&self) -> Shape {
        WarmSandbox::shape(self)
    }

    fn age(&self) -> Duration {
        WarmSandbox::age(self)
    }

    fn is_alive(&mut self) -> bool {
        WarmSandbox::is_alive(self)
    }

    fn memory_bytes(&self) -> u64 {
        WarmSandbox::memory_bytes(self)
    }

    fn discard(self) -> impl Future<Output = ()> + Send + 'static {
        WarmSandbox::discard(self)
    }
}

/// The pool's settings: `[daemon.warm]` and whether skills are on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSettings {
    pub warm: WarmConfig,
    pub skills_on: bool,
    pub max_jobs: usize,
    /// The whole configuration as read: any change of it drains the pool, so no sandbox
    /// made before a change serves a job after it.
    pub revision: String,
}

impl PoolSettings {
    pub fn from_config(c: &crate::config::Config) -> PoolSettings {
        PoolSettings {
            warm: c.daemon.warm.clone(),
            skills_on: c.skills_on(),
            max_jobs: c.max_jobs().max(1),
            revision: format!("{c:?}"),
        }
    }

    fn active(&self) -> bool {
        self.warm.enabled && self.skills_on
    }
}

/// What the pool should hold: each shape and how many.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Targets(pub Vec<(Shape, usize, bool)>);

impl Targets {
    /// The configured shapes, then the learned ones (`true`), bounded by the uids left.
    pub fn of(settings: &PoolSettings, recent: &VecDeque<Shape>, uids: usize) -> Targets {
        if !settings.active() {
            return Targets::default();
        }
        let mut out: Vec<(Shape, usize, bool)> = Vec::new();
        for s in &settings.warm.shapes {
            let shape = Shape {
                net: Net::Deny,
                mem_bytes: s.mem_bytes,
            };
            match out.iter_mut().find(|(sh, _, _)| *sh == shape) {
                Some(t) => t.1 += s.count,
                None if s.count > 0 => out.push((shape, s.count, false)),
                None => {}
            }
        }
        let mut asked: Vec<(Shape, usize)> = Vec::new();
        for shape in recent {
            match asked.iter_mut().find(|(s, _)| s == shape) {
                Some(a) => a.1 += 1,
                None => asked.push((*shape, 1)),
            }
        }
        // Most asked first; of equals, the one asked first.
        asked.sort_by_key(|a| std::cmp::Reverse(a.1));
        let learned = asked
            .into_iter()
            .filter(|(s, n)| *n >= LEARN_AT && s.net == Net::Deny)
            .filter(|(s, _)| !out.iter().any(|(o, _, _)| o == s))
            .take(settings.warm.learn)
            .map(|(s, _)| (s, 1, true))
            .collect::<Vec<_>>();
        out.extend(learned);
        // The uids the jobs may need first: the pool keeps what is left of them.
        let mut room = uids.saturating_sub(settings.max_jobs);
        for t in &mut out {
            t.1 = t.1.min(room);
            room -= t.1;
        }
        out.retain(|t| t.1 > 0);
        Targets(out)
    }

    fn count(&self, shape: Shape) -> usize {
        self.0
            .iter()
            .find(|(s, _, _)| *s == shape)
            .map_or(0, |t| t.1)
    }

    /// The first shape with fewer sandboxes than it should have (`have` counts them) that
    /// may be tried now (`may_try`).
    pub fn missing(
        &self,
        have: &dyn Fn(Shape) -> usize,
        may_try: &dyn Fn(Shape) -> bool,
    ) -> Option<Shape> {
        self.0
            .iter()
            .find(|(s, n, _)| have(*s) < *n && may_try(*s))
            .map(|(s, _, _)| *s)
    }
}

/// The shapes whose last warm-up failed: when each may be tried again, and how long its
/// next failure waits. Each shape waits its own, so a shape that cannot be made (a learned
/// `mem_bytes` Node cannot start in) keeps none of the others from being refilled. A
/// shape's warm-up that succeeds, or new settings, end its wait.
#[derive(Debug, Default)]
pub struct Backoffs(Vec<(Shape, tokio::time::Instant, Duration)>);

impl Backoffs {
    /// Whether a warm-up of `shape` may start at `now`.
    pub fn may_try(&self, shape: Shape, now: tokio::time::Instant) -> bool {
        self.0
            .iter()
            .all(|(s, until, _)| *s != shape || *until <= now)
    }

    /// The earliest moment after `now` at which a shape waiting may be tried.
    pub fn next_try(&self, now: tokio::time::Instant) -> Option<tokio::time::Instant> {
        self.0.iter().map(|t| t.1).filter(|u| *u > now).min()
    }

    /// A warm-up of `shape` failed at `now`: how long it waits.
    pub fn failed(&mut self, shape: Shape, now: tokio::time::Instant) -> Duration {
        match self.0.iter_mut().find(|t| t.0 == shape) {
            Some(t) => {
                let wait = t.2;
                t.1 = now + wait;
                t.2 = (wait * 2).min(BACKOFF_MAX);
                wait
            }
            None => {
                self.0.push((shape, now + BACKOFF_MIN, BACKOFF_MIN * 2));
                BACKOFF_MIN
            }
        }
    }

    /// A warm-up of `shape` succeeded.
    pub fn succeeded(&mut self, shape: Shape) {
        self.0.retain(|t| t.0 != shape);
    }

    /// Forgets the shapes no longer kept (learned ones the recent jobs stopped asking
    /// for), so the list holds no more than the targets; one that comes back starts over.
    pub fn keep_only(&mut self, targets: &Targets) {
        self.0.retain(|t| targets.count(t.0) > 0);
    }
}

/// Which of `ready` (by index) to discard: too old, of a shape not kept, or beyond the
/// shape's count (the newest of a shape are kept).
pub fn stale(ready: &[(Shape, Duration)], targets: &Targets, max_age: Duration) -> Vec<usize> {
    let mut kept: HashMap<Shape, usize> = HashMap::new();
    let mut order: Vec<usize> = (0..ready.len()).collect();
    order.sort_by_key(|&i| ready[i].1);
    let mut out = Vec::new();
    for i in order {
        let (shape, age) = ready[i];
        let n = kept.entry(shape).or_insert(0);
        if age >= max_age || *n >= targets.count(shape) {
            out.push(i);
        } else {
            *n += 1;
        }
    }
    out.sort_unstable();
    out
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    made: AtomicU64,
    failed: AtomicU64,
    discarded: AtomicU64,
    hand_overs_failed: AtomicU64,
    /// Sandboxes out of the pool and not yet torn down. Counted under the state's lock
    /// where they leave `ready` (or a late warm-up leaves `starting`), so that no view of
    /// the pool shows a sandbox in none of the three; shared with the tasks that tear
    /// down the dead ones a job found.
    stopping: Arc<AtomicUsize>,
}

struct State<S> {
    settings: PoolSettings,
    ready: Vec<S>,
    /// The shape of the warm-up under way, if any.
    starting: Option<Shape>,
    /// The shapes of the last [`RECENT`] warmable jobs, newest last.
    recent: VecDeque<Shape>,
    /// Bumped by every drain: a warm-up begun before is discarded when it ends.
    generation: u64,
    /// Set once at shutdown.
    closed: bool,
}

pub struct Pool<W: Warmer> {
    warmer: Arc<W>,
    state: Mutex<State<W::Sandbox>>,
    /// Free job slots: the pool makes sandboxes only while one is free.
    slots: Arc<Semaphore>,
    /// Something changed the pool should act on: a take, new settings.
    wake: Notify,
    stop: CancellationToken,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Teardowns of dead sandboxes a job found, done beside the job; shutdown waits for them.
    teardowns: tokio_util::task::TaskTracker,
    counters: Counters,
}

/// The pool as `/v1/info` shows it.
#[derive(Debug, Serialize, PartialEq)]
pub struct PoolInfo {
    pub enabled: bool,
    pub ready: usize,
    pub starting: usize,
    /// Out of the pool, being torn down (a drain, a stale, a late or a dead one).
    pub stopping: usize,
    pub max_age_ms: u64,
    pub shapes: Vec<ShapeInfo>,
    pub memory_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub made: u64,
    pub failed: u64,
    pub discarded: u64,
    /// Sandboxes a job took that failed at the hand-over (the job ran cold): not hits.
    pub hand_overs_failed: u64,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct ShapeInfo {
    pub net: &'static str,
    pub mem_bytes: u64,
    pub target: usize,
    pub ready: usize,
    pub learned: bool,
}

impl<W: Warmer> Pool<W> {
    pub fn new(warmer: Arc<W>, settings: PoolSettings, slots: Arc<Semaphore>) -> Arc<Pool<W>> {
        Arc::new(Pool {
            warmer,
            state: Mutex::new(State {
                settings,
                ready: Vec::new(),
                starting: None,
                recent: VecDeque::new(),
                generation: 0,
                closed: false,
            }),
            slots,
            wake: Notify::new(),
            stop: CancellationToken::new(),
            task: Mutex::new(None),
            teardowns: tokio_util::task::TaskTracker::new(),
            counters: Counters::default(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State<W::Sandbox>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn targets(&self, st: &State<W::Sandbox>) -> Targets {
        // Sandboxes being torn down still hold their uids: the room the jobs leave is
        // what remains after them too.
        let stopping = self.counters.stopping.load(Ordering::SeqCst);
        let uids = self.warmer.uid_count().saturating_sub(stopping);
        let mut t = Targets::of(&st.settings, &st.recent, uids);
        t.0.retain(|(s, _, _)| self.warmer.warmable(*s));
        t
    }

    /// Starts the refill task (once).
    pub fn start(self: &Arc<Self>) {
        let mut task = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if task.is_none() {
            let me = self.clone();
            *task = Some(tokio::spawn(async move { me.refill().await }));
        }
    }

    /// New settings (a reload, `skills on|off`): when what the pool should be changed,
    /// every sandbox is discarded and the pool refills under the new ones.
    pub async fn configure(&self, settings: PoolSettings) {
        let drained = {
            let mut st = self.state();
            if st.settings == settings {
                return;
            }
            st.settings = settings;
            st.generation += 1;
            self.leaving(std::mem::take(&mut st.ready))
        };
        self.discard_all_now(drained).await;
        self.wake.notify_one();
    }

    /// Shutdown: the refill task ends (a warm-up under way is finished, then discarded)
    /// and every sandbox is discarded. The pool is closed at the call, before the future
    /// is first polled: no job takes a sandbox after it.
    pub fn shutdown(&self) -> impl Future<Output = ()> + Send + '_ {
        let drained = {
            let mut st = self.state();
            st.closed = true;
            st.generation += 1;
            self.leaving(std::mem::take(&mut st.ready))
        };
        self.stop.cancel();
        self.closed_down(drained)
    }

    /// The rest of [`Self::shutdown`], once the pool is closed.
    async fn closed_down(&self, drained: Vec<W::Sandbox>) {
        self.discard_all_now(drained).await;
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "the warm pool's refill task failed");
            }
        }
        // And the dead ones jobs found (no job takes one now, so no new teardown starts).
        self.teardowns.close();
        self.teardowns.wait().await;
    }

    /// Counts `all` as stopping; called under the state's lock, where they leave it.
    fn leaving(&self, all: Vec<W::Sandbox>) -> Vec<W::Sandbox> {
        self.counters
            .stopping
            .fetch_add(all.len(), Ordering::SeqCst);
        all
    }

    /// Tears down sandboxes [`Self::leaving`] counted, in a task of `teardowns`: shutdown
    /// waits for it even when whoever started it (a reload) is gone. Its handle, to wait
    /// for them too.
    fn discard_all(&self, all: Vec<W::Sandbox>) -> Option<tokio::task::JoinHandle<()>> {
        if all.is_empty() {
            return None;
        }
        let n = all.len();
        self.counters
            .discarded
            .fetch_add(n as u64, Ordering::Relaxed);
        let stopping = self.counters.stopping.clone();
        Some(self.teardowns.spawn(async move {
            futures_join(all.into_iter().map(Held::discard)).await;
            stopping.fetch_sub(n, Ordering::SeqCst);
        }))
    }

    /// [`Self::discard_all`], waiting for the teardowns.
    async fn discard_all_now(&self, all: Vec<W::Sandbox>) {
        if let Some(torn_down) = self.discard_all(all) {
            if let Err(e) = torn_down.await {
                tracing::error!(error = %e, "tearing down warm sandboxes failed");
            }
        }
    }

    /// Takes a ready sandbox of `shape` for a job whose inputs are verified; `None` (a
    /// miss): the job runs cold. Sandboxes found dead on the way are discarded.
    pub fn take_ready(&self, shape: Shape) -> Option<W::Sandbox> {
        let (found, dead) = {
            let mut st = self.state();
            if !st.settings.active() {
                // Off: no hit, no miss, nothing learned.
                return None;
            }
            st.recent.push_back(shape);
            while st.recent.len() > RECENT {
                st.recent.pop_front();
            }
            // One past `max_age_ms` is never handed out, though the refill (which may be in
            // a warm-up or a backoff) has not discarded it yet: its age would tell the job
            // more than the setting allows about the jobs before it.
            let max_age = Duration::from_millis(st.settings.warm.max_age_ms);
            let mut dead = Vec::new();
            let mut found = None;
            let mut i = 0;
            while i < st.ready.len() {
                if st.ready[i].shape() != shape {
                    i += 1;
                } else if !st.ready[i].is_alive() || st.ready[i].age() >= max_age {
                    dead.push(st.ready.swap_remove(i));
                } else {
                    found = Some(st.ready.swap_remove(i));
                    break;
                }
            }
            (found, self.leaving(dead))
        };
        if !dead.is_empty() {
            tracing::warn!(
                discarded = dead.len(),
                "warm sandboxes ended or grew too old while waiting; discarded"
            );
            // Torn down beside the job, which does not wait for them; shutdown does.
            let _ = self.discard_all(dead);
        }
        // A hit is counted once the hand-over is done (`handed_over`): a counter that
        // took one back after a failed hand-over would go down between two scrapes.
        if found.is_none() {
            self.counters.misses.fetch_add(1, Ordering::Relaxed);
        }
        self.wake.notify_one();
        found
    }

    /// The sandbox [`Self::take_ready`] gave a job took the job's files: a hit.
    pub fn handed_over(&self) {
        self.counters.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// The sandbox [`Self::take_ready`] gave a job failed at the hand-over: it served no
    /// job, so it was no hit (the engine tore it down, and the job ran cold).
    pub fn hand_over_failed(&self) {
        self.counters
            .hand_overs_failed
            .fetch_add(1, Ordering::Relaxed);
    }

    /// The refill task: makes what is missing, discards what is stale, until shutdown.
    async fn refill(self: Arc<Self>) {
        let mut backoffs = Backoffs::default();
        let mut backoffs_of = None;
        loop {
            if self.stop.is_cancelled() {
                return;
            }
            // Dead and stale sandboxes out first, then at most one warm-up.
            let (stale_ones, next, generation, expiry) = {
                let mut st = self.state();
                // One whose Node or pid 1 ended while it waited (the host's OOM killer,
                // a kill from outside) is replaced now, not found by the next job.
                let mut dead = Vec::new();
                let mut i = 0;
                while i < st.ready.len() {
                    if st.ready[i].is_alive() {
                        i += 1;
                    } else {
                        dead.push(st.ready.swap_remove(i));
                    }
                }
                if !dead.is_empty() {
                    tracing::warn!(
                        dead = dead.len(),
                        "warm sandboxes ended while waiting; discarded"
                    );
                }
                let targets = self.targets(&st);
                let ages: Vec<(Shape, Duration)> =
                    st.ready.iter().map(|s| (s.shape(), s.age())).collect();
                let max_age = Duration::from_millis(st.settings.warm.max_age_ms);
                let mut out = dead;
                for i in stale(&ages, &targets, max_age).into_iter().rev() {
                    out.push(st.ready.swap_remove(i));
                }
                // New settings end every wait.
                if backoffs_of != Some(st.generation) {
                    backoffs = Backoffs::default();
                    backoffs_of = Some(st.generation);
                }
                backoffs.keep_only(&targets);
                // Nothing is starting here: only this task makes sandboxes.
                let have = |shape: Shape| st.ready.iter().filter(|s| s.shape() == shape).count();
                let now = tokio::time::Instant::now();
                let next = targets.missing(&have, &|shape| backoffs.may_try(shape, now));
                // When the oldest left comes of age, or a shape's wait ends.
                let oldest = st.ready.iter().map(Held::age).max().unwrap_or_default();
                let expiry = max_age.saturating_sub(oldest);
                let expiry = backoffs
                    .next_try(now)
                    .map_or(expiry, |t| expiry.min(t - now));
                (self.leaving(out), next, st.generation, expiry)
            };
            self.discard_all_now(stale_ones).await;
            let Some(shape) = next else {
                self.idle(IDLE_CHECK.min(expiry)).await;
                continue;
            };
            // Decided with the discards done, under the lock `info` reads `starting` with:
            // a warm-up shows as starting exactly while it runs.
            let go = {
                let mut st = self.state();
                let go = self.slots.available_permits() > 0 && !st.closed;
                st.starting = go.then_some(shape);
                go
            };
            if !go {
                // Every slot runs a job: their CPU comes first.
                self.idle(BUSY_CHECK).await;
                continue;
            }
            let made = self.warmer.warm_up(shape).await;
            let keep = {
                let mut st = self.state();
                st.starting = None;
                match made {
                    Ok(s) if st.generation == generation && !st.closed => {
                        st.ready.push(s);
                        None
                    }
                    Ok(s) => Some(Ok(self.leaving(vec![s]))),
                    Err(e) => Some(Err(e)),
                }
            };
            match keep {
                None => {
                    self.counters.made.fetch_add(1, Ordering::Relaxed);
                    backoffs.succeeded(shape);
                }
                Some(Ok(late)) => {
                    // Made under settings that changed meanwhile.
                    self.counters.made.fetch_add(1, Ordering::Relaxed);
                    self.discard_all_now(late).await;
                }
                Some(Err(e)) => {
                    self.counters.failed.fetch_add(1, Ordering::Relaxed);
                    // Jobs coming meanwhile wake this task, but the shape is not tried again
                    // before its wait ends; the other shapes are refilled as before.
                    let wait = backoffs.failed(shape, tokio::time::Instant::now());
                    tracing::warn!(error = %e, mem_bytes = shape.mem_bytes, backoff_ms = wait.as_millis() as u64, "a warm sandbox could not be made; jobs of its shape run cold meanwhile");
                }
            }
        }
    }

    async fn idle(&self, at_most: Duration) {
        tokio::select! {
            _ = self.wake.notified() => {}
            _ = tokio::time::sleep(at_most) => {}
            _ = self.stop.cancelled() => {}
        }
    }

    /// What `/v1/info` shows.
    pub fn info(&self) -> PoolInfo {
        let st = self.state();
        let targets = self.targets(&st);
        let shapes = targets
            .0
            .iter()
            .map(|(s, n, learned)| ShapeInfo {
                net: s.net.as_str(),
                mem_bytes: s.mem_bytes,
                target: *n,
                ready: st.ready.iter().filter(|r| r.shape() == *s).count(),
                learned: *learned,
            })
            .collect();
        let c = &self.counters;
        PoolInfo {
            enabled: st.settings.warm.enabled,
            ready: st.ready.len(),
            starting: usize::from(st.starting.is_some()),
            stopping: c.stopping.load(Ordering::SeqCst),
            max_age_ms: st.settings.warm.max_age_ms,
            shapes,
            memory_bytes: st.ready.iter().map(Held::memory_bytes).sum(),
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            made: c.made.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            discarded: c.discarded.load(Ordering::Relaxed),
            hand_overs_failed: c.hand_overs_failed.load(Ordering::Relaxed),
        }
    }
}

impl<W: Warmer<Sandbox = WarmSandbox>> WarmSource for Pool<W> {
    fn take(&self, shape: Shape) -> Option<WarmSandbox> {
        self.take_ready(shape)
    }

    fn handed_over(&self) {
        Pool::handed_over(self)
    }

    fn hand_over_failed(&self) {
        Pool::hand_over_failed(self)
    }
}

/// Runs the futures to their ends, all at once.
async fn futures_join<F: Future<Output = ()> + Send + 'static>(all: impl Iterator<Item = F>) {
    let mut set = tokio::task::JoinSet::new();
    for f in all {
        set.spawn(f);
    }
    while let Some(r) = set.join_next().await {
        if let Err(e) = r {
            tracing::error!(error = %e, "discarding a warm sandbox failed");
        }
    }
}

#[cfg(test)]
mod tests;
