//! Supervision of one sandboxed run: the pipes, the caps on output, the wall clock, the
//! kill, and the classification of the end.

use crate::cancel::{Cancel, Cause};
use crate::job::{Reason, Status, STDERR_KEEP, STDOUT_CAP};
use crate::json_text::{DuplicateKeys, JsonText};
use crate::sandbox::cgroup::{CgroupStats, JobCgroup};
use crate::sandbox::exec_gate::{self, GateReport, GATE_FD};
use crate::sandbox::init::{Report, NETNS_FD, REPORT_FD, WARM_FD};
use std::borrow::Cow;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

mod end;
pub use end::END_RECORD;

/// How long the pipes may stay open after every process of the job is gone.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Why the runner ended the job itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kill {
    Wall,
    Output,
    /// Cancelled, and why: the dispatcher's cancel, or the runner stopping.
    Cancelled(Cause),
}

/// Everything observed about one run, before classification.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub reports: Vec<Report>,
    pub killed: Option<Kill>,
    pub stdout: Vec<u8>,
    pub stdout_overflow: bool,
    pub stderr: Vec<u8>,
    pub stderr_truncated: bool,
    pub wall: Duration,
    pub stats: CgroupStats,
    /// What the exec gate answered (the init's exec of Node, and every exec refused).
    pub exec_gate: GateReport,
}

#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    #[error("cannot start the sandbox's init stage: {0}")]
    Spawn(String),
    #[error("cannot kill the job's processes: {0}; they may still run")]
    Kill(String),
}

/// In a child between fork and exec: dies with `runner`, its parent, from here on, and
/// goes no further if the runner died already. The parent-death signal is set only now, so
/// a runner that died between the fork and here would otherwise leave the init stage
/// running as an orphan, its job set up with nobody to watch it or end it. Once set, the
/// signal holds through the exec (the init stage is no set-id program).
fn die_with(runner: libc::pid_t) -> std::io::Result<()> {
    // SAFETY: prctl and getppid only read and set this process's own attributes.
    unsafe {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        if libc::getppid() != runner {
            // Nothing that allocates between fork and exec: the error is an errno, "no
            // such process", the runner.
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    Ok(())
}

/// Reads `r` to its end (or until `overflow_at`'s cap is passed), keeping the first `keep`
/// bytes. Once `drain` is notified it reads only what the pipe holds already and stops:
/// the tool reported its end, and it wrote everything before that.
async fn read_capped<R: AsyncRead + std::os::fd::AsFd + Unpin>(
    mut r: R,
    keep: usize,
    overflow_at: Option<(usize, Arc<Notify>)>,
    drain: Arc<Notify>,
) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut total = 0usize;
    let mut buf = vec![0u8; 16 * 1024];
    // Takes `n` bytes of `buf`; true once the cap is passed.
    let mut take = |buf: &[u8], n: usize| {
        total += n;
        if kept.len() < keep {
            let take = n.min(keep - kept.len());
            kept.extend_from_slice(&buf[..take]);
        }
        if let Some((cap, notify)) = &overflow_at {
            if total > *cap {
                notify.notify_one();
                return true;
            }
        }
        false
    };
    loop {
        let n = tokio::select! {
            read = r.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            () = drain.notified() => {
                // The descriptor is non-blocking (tokio's): EAGAIN once the pipe is empty.
                while let Ok(n @ 1..) = nix::unistd::read(r.as_fd(), &mut buf) {
                    if take(&buf, n) {
                        return (kept, true);
                    }
                }
                break;
            }
        };
        if take(&buf, n) {
            return (kept, true);
        }
    }
    (kept, total > keep)
}

/// Reads the tool's stderr to its end, keeping the first `keep` bytes, or up to the
/// preload's [`END_RECORD`], whose code it sends on `end` (the record is not stderr).
/// With `gate`, the preload's [`end::GATE_RECORD`] is looked for first, taken off and
/// told on `gate`; a stream that ends or runs past [`end::BEFORE_GATE_MAX`] without it
/// drops `gate` untold.
async fn read_stderr(
    mut r: impl AsyncRead + Unpin,
    keep: usize,
    end: tokio::sync::oneshot::Sender<u8>,
    gate: Option<tokio::sync::oneshot::Sender<()>>,
) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut total = 0usize;
    let mut take = |bytes: &[u8]| {
        total += bytes.len();
        if kept.len() < keep {
            kept.extend_from_slice(&bytes[..bytes.len().min(keep - kept.len())]);
        }
    };
    let mut scan = end::EndScan::default();
    // Until the gate record: its scan, and whom to tell. Dropped untold when it cannot come.
    let mut before_gate = gate.map(|tell| (end::GateScan::default(), tell));
    let mut buf = vec![0u8; 16 * 1024];
    let mut open = true;
    while open {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => {
                open = false;
                0
            }
            Ok(n) => n,
        };
        let chunk = match before_gate.take() {
            None => Cow::Borrowed(&buf[..n]),
            Some((held, _untold)) if !open => Cow::Owned(held.finish()),
            Some((mut held, tell)) => match held.feed(&buf[..n]) {
                None => {
                    before_gate = Some((held, tell));
                    continue;
                }
                Some(end::Gate::Reached(bytes)) => {
                    let _ = tell.send(());
                    Cow::Owned(bytes)
                }
                Some(end::Gate::Missed(bytes)) => Cow::Owned(bytes),
            },
        };
        let (bytes, code) = scan.feed(&chunk);
        take(&bytes);
        if let Some(code) = code {
            let _ = end.send(code);
            return (kept, total > keep);
        }
    }
    take(&scan.finish());
    (kept, total > keep)
}

/// How long a warm sandbox may take, at the hand-over, to be ready (Node executed with
/// every layer in place) and then to lay the job's files; past it the job runs cold.
const WARM_READY_TIMEOUT: Duration = Duration::from_secs(30);
const HAND_OVER_TIMEOUT: Duration = Duration::from_secs(10);
/// How much nicer than the runner a warm sandbox waits: its start takes CPU only when jobs
/// leave some. Pid 1 sets the tool back to the runner's own value at the hand-over
/// ([`runner_nice`]), the value a cold job inherits.
const WARM_NICE: libc::c_int = 10;

/// The runner's own nice value (of the calling thread, as a child forked from it would
/// inherit): what a cold job runs at, and what a warm job is set back to at its hand-over.
/// An operator who starts the runner under `nice` (or systemd's `Nice=`) has every job run
/// at that value. 0 if it cannot be read.
pub fn runner_nice() -> libc::c_int {
    nix::errno::Errno::clear();
    // SAFETY: getpriority takes numbers only.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    if nice == -1 && nix::errno::Errno::last_raw() != 0 {
        0
    } else {
        nice
    }
}

/// The nice value a warm sandbox waits at: [`WARM_NICE`] above the runner's, at most 19;
/// the runner's own when it could not be set back at the hand-over.
fn warm_nice() -> libc::c_int {
    let capable = caps::has_cap(
        None,
        caps::CapSet::Effective,
        caps::Capability::CAP_SYS_NICE,
    )
    .unwrap_or(false);
    nice_to_wait_at(runner_nice(), capable)
}

/// The nice value a warm sandbox waits at, for a runner at `own`: raised only when pid 1
/// can set the tool's back at the hand-over, which takes CAP_SYS_NICE (pid 1 has it only
/// when the runner has it). An RLIMIT_NICE that would let a process lower its own value
/// does not do: the tool runs as another uid, and the kernel lets only the capability set
/// another uid's priority. Without it every hand-over would fail and each job run cold
/// after a wasted warm-up (a container without the capability, say), so the sandbox
/// waits at the runner's priority instead.
fn nice_to_wait_at(own: libc::c_int, cap_sys_nice: bool) -> libc::c_int {
    if cap_sys_nice {
        (own + WARM_NICE).min(19)
    } else {
        own
    }
}

/// Runs the init stage on `plan_bytes` (see `sandbox::init::encode_plan`), feeding
/// `input` after it, in `cgroup`, and returns what happened. On return no process of the
/// job is left: it ended, or it was killed through its cgroup. `netns`, for a job with
/// egress, is the namespace the init stage joins (passed as `NETNS_FD`). `go` writes the
/// preload's go byte before the input (`plan::Start::Gated`).
#[allow(clippy::too_many_arguments)]
pub async fn run(
    self_exe: &Path,
    plan_bytes: Vec<u8>,
    input: Vec<u8>,
    cgroup: &JobCgroup,
    netns: Option<&OwnedFd>,
    wall: Duration,
    go: bool,
    cancel: &Cancel,
) -> Result<Outcome, SuperviseError> {
    let started = start(self_exe, plan_bytes, netns, false, go)?;
    let since = started.started;
    let (outcome, remains) = started
        .finish(input, go, since, wall, cgroup, cancel)
        .await?;
    remains.settle(cgroup).await?;
    Ok(outcome)
}

/// A running init stage: its pipes and the tasks reading them. A cold job's is finished at
/// once ([`run`]); a warm sandbox's waits for its job ([`Started::hand_over`]).
pub struct Started {
    child: tokio::process::Child,
    /// Writes the plan; gives the stdin back for the input.
    /// Taken by [`Started::finish`], which writes the input after it.
    plan_writer: Option<tokio::task::JoinHandle<Option<tokio::process::ChildStdin>>>,
    /// A warm sandbox's hand-over pipe ([`WARM_FD`] in pid 1).
    hand_over: Option<OwnedFd>,
    reports: tokio::sync::mpsc::UnboundedReceiver<Report>,
    seen: Vec<Report>,
    out_task: tokio::task::JoinHandle<(Vec<u8>, bool)>,
    err_task: tokio::task::JoinHandle<(Vec<u8>, bool)>,
    overflow: Arc<Notify>,
    /// The code of the preload's [`END_RECORD`], once stderr has held it.
    ended: tokio::sync::oneshot::Receiver<u8>,
    /// Told once stderr has held the preload's [`end::GATE_RECORD`] (Node's start done):
    /// none once told, or for a start without a gate.
    at_gate: Option<tokio::sync::oneshot::Receiver<()>>,
    /// Tells the stdout reader to take what the pipe holds and stop.
    drain: Arc<Notify>,
    gate: exec_gate::Gate,
    started: Instant,
}

fn dup_high(fd: &impl std::os::fd::AsFd, what: &str) -> Result<OwnedFd, SuperviseError> {
    nix::fcntl::fcntl(fd.as_fd(), nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(10))
        .map(|raw| {
            // SAFETY: F_DUPFD_CLOEXEC just returned this new descriptor; we own it.
            unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) }
        })
        .map_err(|e| SuperviseError::Spawn(format!("{what} descriptor: {e}")))
}

/// Starts the init stage on `plan_bytes`; `warm` passes the hand-over pipe and starts it
/// at [`warm_nice`]; `gated` (a plan whose preload has its gate, a warm one's always) has
/// the preload's gate record looked for on stderr and taken off.
pub fn start(
    self_exe: &Path,
    plan_bytes: Vec<u8>,
    netns: Option<&OwnedFd>,
    warm: bool,
    gated: bool,
) -> Result<Started, SuperviseError> {
    let (report_r, report_w): (OwnedFd, OwnedFd) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| SuperviseError::Spawn(format!("report pipe: {e}")))?;
    // Above every descriptor the child sets up, so that placing one never clobbers another.
    let netns_high: Option<OwnedFd> = netns
        .map(|fd| dup_high(fd, "network namespace"))
        .transpose()?;
    let ns = netns_high.as_ref().map(|fd| fd.as_raw_fd());
    let (hand_over_r, hand_over_w) = if warm {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| SuperviseError::Spawn(format!("hand-over pipe: {e}")))?;
        (Some(dup_high(&r, "hand-over")?), Some(w))
    } else {
        (None, None)
    };
    let h = hand_over_r.as_ref().map(|fd| fd.as_raw_fd());
    let waiting_nice = warm_nice();
    // The exec gate: its thread waits for the listener the init sends on this socket.
    let (gate, gate_end) =
        exec_gate::start().map_err(|e| SuperviseError::Spawn(format!("exec gate: {e}")))?;
    let gate_high = dup_high(&gate_end, "exec gate")?;
    drop(gate_end);
    let g = gate_high.as_raw_fd();
    let w = report_w.as_raw_fd();
    let runner = nix::unistd::getpid().as_raw();
    let mut cmd = tokio::process::Command::new(self_exe);
    cmd.arg("sandbox-init")
        .arg(crate::sandbox::init_exe::BUILD_ID)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: only prctl/getppid/dup2/fcntl/setpriority, all async-signal-safe, run in the
    // child between fork and exec; they touch no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            die_with(runner)?;
            if w == REPORT_FD {
                if libc::fcntl(w, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(w, REPORT_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(ns) = ns {
                if libc::dup2(ns, NETNS_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::dup2(g, GATE_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(h) = h {
                if libc::dup2(h, WARM_FD) < 0
                    || libc::setpriority(libc::PRIO_PROCESS, 0, waiting_nice) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| SuperviseError::Spawn(format!("{}: {e}", self_exe.display())))?;
    drop(report_w);
    drop(netns_high);
    drop(gate_high);
    drop(hand_over_r);
    // The init stage joins the job's cgroups itself, first thing after reading its plan
    // (see sandbox::init); the kill goes through the cgroup and, before that join,
    // through the child itself.
    let mut stdin = child.stdin.take();
    let plan_writer = tokio::spawn(async move {
        if let Some(s) = stdin.as_mut() {
            if s.write_all(&plan_bytes).await.is_err() {
                return None;
            }
        }
        stdin
    });
    let overflow = Arc::new(Notify::new());
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let drain = Arc::new(Notify::new());
    let out_task = {
        let (overflow, drain) = (overflow.clone(), drain.clone());
        tokio::spawn(async move {
            match stdout {
                Some(s) => {
                    read_capped(s, STDOUT_CAP + 1, Some((STDOUT_CAP, overflow)), drain).await
                }
                None => (Vec::new(), false),
            }
        })
    };
    let (end_tx, ended) = tokio::sync::oneshot::channel();
    let (gate_tx, at_gate) = if gated || warm {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    let err_task = tokio::spawn(async move {
        match stderr {
            Some(s) => read_stderr(s, STDERR_KEEP, end_tx, gate_tx).await,
            None => (Vec::new(), false),
        }
    });
    let (report_tx, reports) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        use tokio::io::AsyncBufReadExt;
        let Ok(rx) = tokio::net::unix::pipe::Receiver::from_owned_fd(report_r) else {
            return;
        };
        // The reports are the init stage's, a few lines; a longer one is not a report.
        let mut lines = tokio::io::BufReader::new(rx.take(64 * 1024)).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Ok(r) = serde_json::from_str::<Report>(&line) {
                if report_tx.send(r).is_err() {
                    break;
                }
            }
        }
    });
    Ok(Started {
        child,
        plan_writer: Some(plan_writer),
        hand_over: hand_over_w,
        reports,
        seen: Vec::new(),
        out_task,
        err_task,
        overflow,
        ended,
        at_gate: if warm { at_gate } else { None },
        drain,
        gate,
        started,
    })
}

impl Started {
    /// Whether the init stage still runs and reported no end (reports read so far).
    pub fn is_alive(&mut self) -> bool {
        while let Ok(r) = self.reports.try_recv() {
            self.seen.push(r);
        }
        matches!(self.child.try_wait(), Ok(None)) && !self.seen.iter().any(ends)
    }

    /// Whether it is ready: it reported `Ready` (every layer applied, Node executed next)
    /// and Node has reached the preload's gate.
    pub fn is_ready(&mut self) -> bool {
        let _ = self.is_alive();
        if let Some(rx) = self.at_gate.as_mut() {
            if rx.try_recv().is_err() {
                return false;
            }
            self.at_gate = None;
        }
        self.seen.contains(&Report::Ready)
    }

    /// Waits for a report matching `want`; an end, the reports closing or `limit` first is
    /// an error naming `what`.
    async fn wait_for(&mut self, want: &Report, what: &str, limit: Duration) -> Result<(), String> {
        if self.seen.contains(want) {
            return Ok(());
        }
        if let Some(end) = self.seen.iter().find(|r| ends(r)) {
            return Err(format!("the sandbox ended before {what}: {end:?}"));
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, self.reports.recv()).await {
                Err(_) => return Err(format!("no {what} within {limit:?}")),
                Ok(None) => return Err(format!("the sandbox ended before {what}")),
                Ok(Some(r)) => {
                    let done = &r == want;
                    let end = ends(&r).then(|| format!("{r:?}"));
                    self.seen.push(r);
                    if done {
                        return Ok(());
                    }
                    if let Some(end) = end {
                        return Err(format!("the sandbox ended before {what}: {end}"));
                    }
                }
            }
        }
    }

    /// The setup failure it reported, if any, as `" (step: error)"` for a message.
    pub fn setup_failure(&mut self) -> String {
        let _ = self.is_alive();
        self.seen
            .iter()
            .find_map(|r| match r {
                Report::SetupFailed { step, error } => Some(format!(" ({step}: {error})")),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Waits until a warm sandbox is ready: Node executed with every layer applied and
    /// waiting at its gate, its start done (none of it is left for a job's clocks).
    pub async fn ready(&mut self) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + WARM_READY_TIMEOUT;
        self.wait_for(&Report::Ready, "ready", WARM_READY_TIMEOUT)
            .await?;
        if let Some(rx) = self.at_gate.as_mut() {
            match tokio::time::timeout_at(deadline, rx).await {
                Ok(Ok(())) => self.at_gate = None,
                Ok(Err(_)) => {
                    return Err(format!(
                        "Node ended, or wrote over {} bytes to stderr, before its gate",
                        end::BEFORE_GATE_MAX
                    ))
                }
                Err(_) => {
                    return Err(format!(
                        "Node did not reach its gate within {WARM_READY_TIMEOUT:?}"
                    ))
                }
            }
        }
        Ok(())
    }

    /// A warm sandbox's hand-over: waits until it is ready, gives pid 1 `message` (an
    /// encoded `plan::HandOver`) and waits until the job's files are laid. An error
    /// leaves the tool at its gate, none of the job's code run: the caller discards the
    /// sandbox and runs the job cold.
    pub async fn hand_over(&mut self, message: Vec<u8>) -> Result<(), String> {
        self.ready().await?;
        let pipe = self
            .hand_over
            .take()
            .ok_or("this sandbox was handed over already, or is not warm")?;
        let mut tx = tokio::net::unix::pipe::Sender::from_owned_fd(pipe)
            .map_err(|e| format!("hand-over pipe: {e}"))?;
        tokio::time::timeout(HAND_OVER_TIMEOUT, tx.write_all(&message))
            .await
            .map_err(|_| "pid 1 did not take the hand-over in time".to_string())?
            .map_err(|e| format!("writing the hand-over: {e}"))?;
        drop(tx);
        self.wait_for(&Report::HandedOver, "the hand-over", HAND_OVER_TIMEOUT)
            .await?;
        // The init stage waited at low priority too; it relays the job's end, so it runs
        // the job at the runner's, as a cold job's does (pid 1 did its own and the tool's,
        // to the value the hand-over gave). Not yet reaped, so its pid is its.
        let pid = self
            .child
            .id()
            .ok_or("the init stage ended during the hand-over")?;
        // SAFETY: setpriority takes numbers only.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, pid, runner_nice()) } != 0 {
            return Err(format!(
                "the init stage's priority: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    /// Kills what runs (through `cgroup` once it may hold the init stage) and closes the
    /// gate: a warm sandbox never used.
    pub async fn stop(mut self, cgroup: &JobCgroup) -> Result<(), SuperviseError> {
        let killed = cgroup.kill_all_blocking().await;
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        if let Some(w) = self.plan_writer.take() {
            w.abort();
        }
        let _ = self.gate.finish().await;
        killed.map_err(|e| SuperviseError::Kill(e.to_string()))
    }

    /// Feeds the input (after the go byte, when `go`) and supervises the run to its end:
    /// the wall clock counts from `since`. The outcome is known when Node has ended or was
    /// killed, and also when the preload reported the tool's end ([`END_RECORD`]): Node may
    /// then still be exiting, and [`Remains::settle`] waits until no process of the job is
    /// left. Otherwise none is left on return.
    pub async fn finish(
        mut self,
        input: Vec<u8>,
        go: bool,
        since: Instant,
        wall: Duration,
        cgroup: &JobCgroup,
        cancel: &Cancel,
    ) -> Result<(Outcome, Remains), SuperviseError> {
        // Where the kernel keeps no memory peak, the runner does, while the job runs.
        let sampled = cgroup.sample_memory();
        let with_sampled = |mut stats: crate::sandbox::cgroup::CgroupStats| {
            if let Some(s) = &sampled {
                stats.mem_peak_bytes = stats.mem_peak_bytes.max(s.peak());
            }
            stats
        };
        let plan_writer = self.plan_writer.take();
        let go_unless = cancel.clone();
        let writer = tokio::spawn(async move {
            let mut stdin = match plan_writer {
                Some(w) => w.await.ok().flatten(),
                None => None,
            };
            if let Some(s) = stdin.as_mut() {
                // A tool may never read its input: the write then ends with the job (EPIPE).
                // A job cancelled by now never starts its tool: the kill below ends it
                // at its gate.
                let opened = !go
                    || (!go_unless.is_cancelled()
                        && s.write_all(&[crate::plan::GO_BYTE]).await.is_ok());
                if opened {
                    let _ = s.write_all(&input).await;
                }
                let _ = s.shutdown().await;
            }
            drop(stdin);
        });
        let child = &mut self.child;
        let ended = &mut self.ended;
        // Stderr's end without the record is no report: Node's exit tells then.
        let reported = async move {
            match ended.await {
                Ok(code) => code,
                Err(_) => std::future::pending().await,
            }
        };
        let deadline = tokio::time::Instant::from_std(since + wall);
        let killed = tokio::select! {
            _ = child.wait() => None,
            code = reported => {
                let wall_taken = since.elapsed();
                let (mut outcome, rest) = self.reported_end(code, wall_taken, writer, cgroup).await;
                outcome.stats = with_sampled(outcome.stats);
                return Ok((outcome, Remains { rest: Some(rest), deadline }));
            }
            _ = self.overflow.notified() => Some(Kill::Output),
            _ = tokio::time::sleep_until(deadline) => Some(Kill::Wall),
            cause = cancel.cancelled() => Some(Kill::Cancelled(cause)),
        };
        let mut wall_taken = since.elapsed();
        // Whatever ended it, nothing of the job may outlive this function.
        let kill_result = cgroup.kill_all_blocking().await;
        let _ = child.start_kill();
        let _ = child.wait().await;
        if killed.is_none() {
            wall_taken = wall_taken.min(since.elapsed());
        }
        writer.abort();
        kill_result.map_err(|e| SuperviseError::Kill(e.to_string()))?;
        // Every process of the job is gone: stop the gate's thread, close its listener.
        let exec_gate = self.gate.finish().await;

        let (stdout, stdout_overflow) = drained(self.out_task).await;
        let (stderr, stderr_truncated) = drained(self.err_task).await;
        let mut reports = self.seen;
        let _ = tokio::time::timeout(DRAIN_GRACE, async {
            while let Some(r) = self.reports.recv().await {
                reports.push(r);
            }
        })
        .await;
        let stats = with_sampled(cgroup.stats());
        let outcome = Outcome {
            reports,
            killed: killed.or(if stdout_overflow {
                Some(Kill::Output)
            } else {
                None
            }),
            stdout,
            stdout_overflow,
            stderr,
            stderr_truncated,
            wall: wall_taken,
            stats,
            exec_gate,
        };
        Ok((
            outcome,
            Remains {
                rest: None,
                deadline,
            },
        ))
    }

    /// The preload reported the tool's end with `code`: everything the tool wrote is in
    /// the pipes (see `end`), and the figures are the job's as they
    /// stand. Node, pid 1 and the init stage may still be exiting: they are returned with
    /// the outcome, for [`Remains`].
    async fn reported_end(
        mut self,
        code: u8,
        wall: Duration,
        writer: tokio::task::JoinHandle<()>,
        cgroup: &JobCgroup,
    ) -> (Outcome, Running) {
        let stats = cgroup.stats();
        self.drain.notify_one();
        let (stdout, stdout_overflow) = drained(self.out_task).await;
        // It ended at the record.
        let (stderr, stderr_truncated) = drained(self.err_task).await;
        let mut reports = self.seen;
        while let Ok(r) = self.reports.try_recv() {
            reports.push(r);
        }
        // Pid 1's report of Node's end, when it came first, is the kernel's word for it.
        if !reports.iter().any(ends) {
            reports.push(Report::Exited {
                code: i32::from(code),
            });
        }
        // Closing the listener now fails an exec still pending, as at every end.
        let exec_gate = self.gate.finish().await;
        let outcome = Outcome {
            reports,
            killed: stdout_overflow.then_some(Kill::Output),
            stdout,
            stdout_overflow,
            stderr,
            stderr_truncated,
            wall,
            stats,
            exec_gate,
        };
        (outcome, (self.child, writer))
    }
}

/// What is left of a run once its outcome is known: after the preload's report of the
/// tool's end, the init stage (and pid 1 and Node with it) may still be exiting.
#[must_use = "settle it: the job's processes may still be exiting"]
pub struct Remains {
    rest: Option<Running>,
    /// The job's wall clock: nothing of it runs past this.
    deadline: tokio::time::Instant,
}

/// The init stage and the task writing its input.
type Running = (tokio::process::Child, tokio::task::JoinHandle<()>);

/// How long what remains of a job may take to end by itself once the preload reported the
/// tool's end (Node exiting, then pid 1 and the init stage, each reaping the one before, so
/// that the job's CPU time reaches the runner as a child's) before it is killed: a few
/// milliseconds when the preload wrote the record. A tool that wrote it itself and goes on
/// is killed then, or at its wall clock if that comes first. A warm job's slot is held
/// until then (`engine::Removal`), so what runs after the record counts in `max_jobs`;
/// short so that such a job gives its slot back soon.
const END_GRACE: Duration = Duration::from_millis(50);

impl Remains {
    /// Waits (at most [`END_GRACE`], never past the job's wall clock) for the init stage
    /// to end, then kills what is left of the job through `cgroup` (and the init stage
    /// itself) and waits until none of it is left.
    pub async fn settle(self, cgroup: &JobCgroup) -> Result<(), SuperviseError> {
        let Some((mut child, writer)) = self.rest else {
            return Ok(());
        };
        let until = self.deadline.min(tokio::time::Instant::now() + END_GRACE);
        let _ = tokio::time::timeout_at(until, child.wait()).await;
        let killed = cgroup.kill_all_blocking().await;
        let _ = child.start_kill();
        let _ = child.wait().await;
        writer.abort();
        killed.map_err(|e| SuperviseError::Kill(e.to_string()))
    }
}

/// What a pipe's reader kept, once it ends (at most [`DRAIN_GRACE`] from now); nothing
/// when it does not, which no result takes for an answer.
async fn drained(reader: tokio::task::JoinHandle<(Vec<u8>, bool)>) -> (Vec<u8>, bool) {
    tokio::time::timeout(DRAIN_GRACE, reader)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default()
}

/// Whether a report is the end of the init stage's tool (or of its setup).
fn ends(r: &Report) -> bool {
    matches!(
        r,
        Report::SetupFailed { .. } | Report::Exited { .. } | Report::Signaled { .. }
    )
}

/// The verdict on one run, field for field what the result carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Always `Reason::status_of(reason)`.
    pub status: Status,
    pub reason: Option<Reason>,
    pub message: Option<String>,
    pub output: Option<JsonText>,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
}

fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("SIG{sig}"))
}

/// V8 gives up at its heap ceiling (`--max-old-space-size`) only when its old generation
/// holds at least this share of it (V8's `Heap::IsIneffectiveMarkCompact`, 80%, or the
/// ceiling itself); those bytes are live objects, so resident, so in the cgroup's peak.
const HEAP_CEILING_EVIDENCE: (u64, u64) = (4, 5);

/// Whether the evidence the runner owns fits V8 having reached its heap ceiling: Node
/// died by SIGABRT (V8's out-of-memory handler aborts) and the job's memory peak, read from
/// its cgroup, reached 80% of the ceiling. The tool's stderr is never consulted: a tool
/// writes it, and may print V8's message and abort at a few MiB. A tool that really holds
/// that much memory and then aborts is judged `memory` too; it could have reached the
/// ceiling just as well, so it gains nothing by pretending.
fn heap_ceiling_reached(o: &Outcome, signal: Option<i32>, mem_bytes: u64) -> bool {
    let ceiling = crate::plan::heap_mib(mem_bytes) * 1024 * 1024;
    let (num, den) = HEAP_CEILING_EVIDENCE;
    signal == Some(libc::SIGABRT) && o.stats.mem_peak_bytes >= ceiling / den * num
}

/// Pure: what an observed run means (SPEC.md's statuses and reasons).
pub fn classify(o: &Outcome, wall_ms: u64, mem_bytes: u64) -> Verdict {
    let node_end = o.reports.iter().find_map(|r| match r {
        Report::Exited { code } => Some((Some(*code), None)),
        Report::Signaled { signal } => Some((None, Some(*signal))),
        Report::SetupFailed { .. } | Report::Ready | Report::HandedOver => None,
    });
    let (exit_code, signal) = node_end.unwrap_or((None, None));
    let verdict = |reason: Reason, message: String, output| Verdict {
        status: reason.status(),
        reason: Some(reason),
        message: Some(message),
        output,
        exit_code,
        signal: signal.map(signal_name),
    };
    if let Some(Report::SetupFailed { step, error }) = o
        .reports
        .iter()
        .find(|r| matches!(r, Report::SetupFailed { .. }))
    {
        return verdict(
            Reason::SandboxSetup,
            format!("the sandbox could not be set up ({step}: {error}); the tool did not run"),
            None,
        );
    }
    match o.killed {
        Some(Kill::Output) => {
            return verdict(
                Reason::Output,
                format!(
                    "the tool wrote more than {} KiB to stdout and was stopped",
                    STDOUT_CAP / 1024
                ),
                None,
            )
        }
        Some(Kill::Cancelled(cause)) => return verdict(cause.reason(), cause.message(true), None),
        Some(Kill::Wall) => {
            return verdict(
                Reason::Wall,
                format!("the tool ran past its wall-clock limit of {wall_ms} ms and was killed"),
                None,
            )
        }
        // Ended by itself, but only seen past its deadline (the end and the wall clock's
        // timer fell in the same moment, and the end was looked at first): at `wall_ms`
        // the job is killed, so a run past it is never an `ok` one.
        None if o.wall.as_millis() > u128::from(wall_ms) => {
            return verdict(
                Reason::Wall,
                format!(
                    "the tool ran past its wall-clock limit of {wall_ms} ms (it ended at {} ms)",
                    o.wall.as_millis()
                ),
                None,
            )
        }
        None => {}
    }
    let failed = exit_code != Some(0);
    let heap_ceiling = heap_ceiling_reached(o, signal, mem_bytes);
    if failed && o.stats.oom_killed && !o.stats.memory_limit_hit && !heap_ceiling {
        // The job's memory never reached its cap: the OOM killer was the host's (or that
        // of a cgroup above the job's), which picks a sandbox first.
        return verdict(
            Reason::HostOutOfMemory,
            format!(
                "the kernel's out-of-memory killer ended the tool while it was under its \
                 {mem_bytes} bytes: the host ran out of memory, not the job; it may run again"
            ),
            None,
        );
    }
    if failed && (o.stats.oom_killed || o.stats.memory_limit_hit || heap_ceiling) {
        return verdict(
            Reason::Memory,
            format!("the tool ran out of its {mem_bytes} bytes of memory"),
            None,
        );
    }
    if failed && o.stats.pids_limit_hit {
        return verdict(
            Reason::Pids,
            "the tool reached its limit of processes and threads".into(),
            None,
        );
    }
    if node_end.is_none() {
        return verdict(
            Reason::NoReport,
            "the sandbox ended without reporting how the tool ended".into(),
            None,
        );
    }
    if let Some(sig) = signal {
        return verdict(
            Reason::Signal,
            format!("the tool was killed by {}", signal_name(sig)),
            None,
        );
    }
    if let Some(code) = exit_code {
        if code != 0 {
            return verdict(
                Reason::Exit,
                format!("the tool exited with code {code}"),
                None,
            );
        }
    }
    let text = match std::str::from_utf8(&o.stdout) {
        Ok(t) => t,
        Err(_) => {
            return verdict(
                Reason::BadOutput,
                "stdout is not valid UTF-8, so not one JSON value".into(),
                None,
            )
        }
    };
    // Only JSON's own whitespace is "nothing": a tool that wrote U+00A0 or a form feed
    // wrote something that is not one JSON value.
    if text
        .trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'))
        .is_empty()
    {
        return verdict(
            Reason::NoOutput,
            "the tool exited 0 but wrote nothing to stdout".into(),
            None,
        );
    }
    // The exact text the tool wrote, JSON whitespace around it dropped. Duplicate keys are
    // the tool's to write: RFC 8259 allows them and the result is untrusted data anyway.
    match JsonText::parse(text, DuplicateKeys::Keep) {
        Ok(v) => Verdict {
            status: Reason::status_of(None),
            reason: None,
            message: None,
            output: Some(v),
            exit_code,
            signal: None,
        },
        Err(e) => verdict(Reason::BadOutput, format!("stdout is refused: {e}"), None),
    }
}

#[cfg(test)]
mod tests;
