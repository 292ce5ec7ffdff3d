use clap::{Parser, Subcommand};
use openvibe_skill_runner::cancel::{Cancel, Cause};
use openvibe_skill_runner::cli::skill;
use openvibe_skill_runner::config::Config;
use openvibe_skill_runner::engine::Engine;
use openvibe_skill_runner::job::{JobResult, Net};
use openvibe_skill_runner::json_text::{DuplicateKeys, JsonText};
use openvibe_skill_runner::{doctor, sandbox};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "openvibe-skill-runner",
    version,
    about = "Runs one JavaScript tool of a skill under Node.js inside a Linux sandbox"
)]
struct Cli {
    /// Configuration file (default /etc/openvibe-skill-runner/config.toml).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Overrides runner.state_dir (job directories, input cache).
    #[arg(long, global = true)]
    state_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one job (SPEC.md's format) from FILE or stdin; print the result as one JSON line.
    RunJob {
        /// The job file, or - for stdin.
        #[arg(default_value = "-")]
        file: String,
    },
    /// Run a tool of a skill folder (skill.json and its code), for skill authors.
    Run {
        skill_dir: PathBuf,
        #[arg(long)]
        tool: String,
        /// The input: JSON text, or @FILE to read it from a file.
        #[arg(long)]
        input: Option<String>,
        #[arg(long)]
        net: Option<String>,
        #[arg(long)]
        wall_ms: Option<u64>,
        #[arg(long)]
        mem_bytes: Option<u64>,
        /// Print the result as one JSON line instead of a summary.
        #[arg(long)]
        json: bool,
    },
    /// What this host gives each sandbox layer, and whether jobs can run here.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Turn the runner on or off for this Link (worker.functions), or show which it is.
    Skills {
        #[arg(value_enum)]
        action: openvibe_skill_runner::daemon::skills::Action,
    },
    /// The daemon: the HTTP API on a unix socket, with a queue and a journal.
    Serve {
        /// The unix socket (overrides daemon.socket).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// JSON log lines (also daemon.log_json).
        #[arg(long)]
        log_json: bool,
    },
}

fn main() -> ExitCode {
    // The init stage must stay a fresh single-threaded process: no runtime, no parser.
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new("sandbox-init")) {
        sandbox::init::main();
    }
    let code = run(Cli::parse());
    // After the command's jobs are gone: nothing of the runner's own stays in the cgroups.
    sandbox::cgroup::leave_runner_leaf();
    code
}

fn run(cli: Cli) -> ExitCode {
    let command = match cli.command {
        Command::Skills { action } => {
            return openvibe_skill_runner::daemon::skills::cli(cli.config.as_deref(), action)
        }
        Command::Serve { socket, log_json } => {
            return openvibe_skill_runner::daemon::serve_cli(
                openvibe_skill_runner::daemon::ServeArgs {
                    config: cli.config,
                    state_dir: cli.state_dir,
                    socket,
                    log_json,
                },
            )
        }
        other => other,
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("OPENVIBE_SKILL_RUNNER_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let mut config = match Config::load(cli.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return usage(format!("{e:#}")),
    };
    if let Some(dir) = cli.state_dir {
        config.runner.state_dir = dir;
    }
    config.runner.state_dir = openvibe_skill_runner::state_dir::settled(&config.runner.state_dir);
    match command {
        Command::Skills { .. } | Command::Serve { .. } => unreachable!("handled above"),
        Command::Doctor { json } => doctor::run(config, json),
        Command::RunJob { file } => {
            let text = match read_job(&file) {
                Ok(Some(t)) => t,
                // A job, only too large to be one: its `rejected` result, as the daemon's
                // answer to such a body is, and nothing runs.
                Ok(None) => return print_json(&too_large(&file)),
                Err(e) => return usage(e),
            };
            let bounds = openvibe_skill_runner::job::Bounds {
                max_input_json_bytes: config.runner.max_input_json_bytes,
            };
            let result = match start(config) {
                Ok(engine) => block_on(interruptible(|cancel| async move {
                    engine.run_raw(&text, &cancel).await
                })),
                // As the daemon without an engine: a job that breaks a rule is `rejected`,
                // a valid one `runner_unavailable` under its own id and net.
                Err(why) => match openvibe_skill_runner::engine::admit_text(&text, &bounds, None) {
                    Ok(job) => unavailable(&job.job_id, job.net, why),
                    Err(refused) => *refused,
                },
            };
            print_json(&result)
        }
        Command::Run {
            skill_dir,
            tool,
            input,
            net,
            wall_ms,
            mem_bytes,
            json,
        } => {
            let input = match parse_input(input.as_deref()) {
                Ok(v) => v,
                Err(e) => return usage(e),
            };
            let net = match net.as_deref().map(|n| Net::parse(n).ok_or(n)) {
                None => None,
                Some(Ok(n)) => Some(n),
                Some(Err(n)) => {
                    return usage(format!(
                        "--net {n:?} is not one of deny, openvibe-only, public"
                    ))
                }
            };
            let req = skill::RunRequest {
                tool,
                input,
                net,
                wall_ms,
                mem_bytes,
            };
            let job = match skill::valid_job_from_skill(&skill_dir, &req) {
                Ok(j) => j,
                // It quotes the folder's own names: on one line, so none can pass for a
                // line of the runner's.
                Err(e) => return usage(escaped(&e.to_string(), false)),
            };
            let result = match start(config) {
                Ok(engine) => block_on(interruptible(|cancel| async move {
                    engine.run_built(job, &cancel).await
                })),
                Err(why) => unavailable(&job.job_id, job.net, why),
            };
            let printed = if json {
                print_json(&result)
            } else {
                print_human(&result)
            };
            if printed != ExitCode::SUCCESS {
                printed
            } else if result.status == openvibe_skill_runner::job::Status::Ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// The engine of a command that runs jobs itself, or why jobs cannot run here; what runners
/// killed before their end left is removed first (`recovery::remove_killed_runners_leftovers`).
fn start(config: Config) -> Result<Engine, String> {
    let engine = Engine::start(config).map_err(|e| e.to_string())?;
    let jobs = engine.jobs_dir();
    match openvibe_skill_runner::daemon::recovery::remove_killed_runners_leftovers(
        engine.cgroups(),
        jobs,
    ) {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            removed = n,
            "job cgroups and folders of killed runners removed"
        ),
        Err(e) => tracing::warn!(error = %e, "what killed runners left is not all removed"),
    }
    Ok(engine)
}

/// The `internal` result of a job that cannot run here, `why`.
fn unavailable(job_id: &str, net: Net, why: String) -> JobResult {
    JobResult::not_run(
        job_id,
        openvibe_skill_runner::job::Reason::RunnerUnavailable,
        format!("{why} (run `openvibe-skill-runner doctor` for every layer)"),
        net,
        None,
    )
}

/// Runs one job so that SIGINT, SIGTERM or SIGHUP (a terminal's Ctrl-C, a `kill`, a
/// closed terminal) cancel it instead of ending the command at once: the job is killed,
/// everything it made (its cgroups, its folder) is removed, and its result, `internal`
/// `shutdown`, is printed as any other. A second signal changes nothing: the removal goes
/// on. Without the handlers (they could not be installed) the job runs as before.
async fn interruptible<F, Fut>(run: F) -> JobResult
where
    F: FnOnce(Cancel) -> Fut,
    Fut: std::future::Future<Output = JobResult>,
{
    use tokio::signal::unix::{signal, Signal, SignalKind};
    fn caught(kind: SignalKind, name: &str) -> Option<Signal> {
        signal(kind)
            .map_err(|e| {
                tracing::warn!(signal = name, error = %e, "cannot catch the signal; it ends the command at once");
            })
            .ok()
    }
    /// The next arrival of `s`; never, when it is not caught (or its stream has ended).
    async fn arrival(s: &mut Option<Signal>) {
        if let Some(s) = s {
            if s.recv().await.is_some() {
                return;
            }
        }
        std::future::pending().await
    }
    let cancel = Cancel::new();
    let mut int = caught(SignalKind::interrupt(), "SIGINT");
    let mut term = caught(SignalKind::terminate(), "SIGTERM");
    let mut hup = caught(SignalKind::hangup(), "SIGHUP");
    let watch = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let signal = tokio::select! {
                _ = arrival(&mut int) => "SIGINT",
                _ = arrival(&mut term) => "SIGTERM",
                _ = arrival(&mut hup) => "SIGHUP",
            };
            tracing::warn!(
                signal,
                "interrupted: killing the job and removing what it made"
            );
            cancel.cancel(Cause::Interrupted { signal });
            // Later signals are still caught, and change nothing: the removal goes on.
            loop {
                tokio::select! {
                    _ = arrival(&mut int) => {}
                    _ = arrival(&mut term) => {}
                    _ = arrival(&mut hup) => {}
                }
            }
        })
    };
    let result = run(cancel).await;
    watch.abort();
    result
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(f),
        Err(e) => {
            eprintln!("openvibe-skill-runner: cannot start the async runtime: {e}");
            std::process::exit(70);
        }
    }
}

/// A usage error. It may quote a skill folder's keys, file names and argument names (the
/// folder may be someone else's), so it goes through [`shown`] like the tool's own text.
fn usage(message: String) -> ExitCode {
    eprintln!("openvibe-skill-runner: {}", shown(&message));
    ExitCode::from(2)
}

/// The job's text, `None` when it is larger than a job can be (read no further), or why it
/// could not be read.
fn read_job(file: &str) -> Result<Option<Vec<u8>>, String> {
    // A job is at most a few MiB (1 MiB of inputs, base64, plus the input JSON).
    const MAX_JOB_BYTES: u64 = openvibe_skill_runner::job::MAX_JOB_TEXT_BYTES as u64;
    let mut buf = Vec::new();
    let r = if file == "-" {
        std::io::stdin()
            .take(MAX_JOB_BYTES + 1)
            .read_to_end(&mut buf)
    } else {
        std::fs::File::open(file)
            .map_err(|e| format!("cannot open the job file {file}: {e}"))?
            .take(MAX_JOB_BYTES + 1)
            .read_to_end(&mut buf)
    };
    r.map_err(|e| format!("cannot read the job from {file}: {e}"))?;
    if buf.len() as u64 > MAX_JOB_BYTES {
        return Ok(None);
    }
    Ok(Some(buf))
}

/// The result of a job larger than any valid one: `rejected`/`invalid_job`, its id unread.
fn too_large(file: &str) -> JobResult {
    let max = openvibe_skill_runner::job::MAX_JOB_TEXT_BYTES;
    JobResult::not_run(
        "",
        openvibe_skill_runner::job::Reason::InvalidJob,
        format!(
            "the job in {file} is larger than {max} bytes, more than a valid job can be \
             (its inputs are at most 1 MiB, carried as base64)"
        ),
        Net::Deny,
        None,
    )
}

/// The text of `--input @FILE`, read no further than a job could carry (the runner's
/// own bound on the input is applied to the job after).
fn read_input_file(path: &str) -> Result<String, String> {
    const MAX: u64 = openvibe_skill_runner::job::MAX_JOB_TEXT_BYTES as u64;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read --input file {path}: {e}"))?;
    if bytes.len() as u64 > MAX {
        return Err(format!(
            "--input file {path} is larger than {MAX} bytes, more than a job can carry"
        ));
    }
    String::from_utf8(bytes).map_err(|e| format!("--input file {path} is not UTF-8: {e}"))
}

/// `--input`: one JSON value (default `{}`), kept as the text written, so the tool reads
/// exactly what was given (key order, number spelling, escapes).
fn parse_input(input: Option<&str>) -> Result<JsonText, String> {
    let (text, from) = match input {
        None => ("{}".to_string(), "--input".to_string()),
        Some(s) => match s.strip_prefix('@') {
            Some(path) => (read_input_file(path)?, format!("--input file {path}")),
            None => (s.to_string(), "--input".to_string()),
        },
    };
    JsonText::parse(&text, DuplicateKeys::Refuse).map_err(|e| {
        format!("{from} is refused: {e}; pass exactly one JSON value, each key once per object")
    })
}

/// The result as one JSON line (SPEC): line breaks in the whitespace of the tool's output,
/// kept as written elsewhere, are printed as spaces. A JSON text holds CR and LF only as
/// whitespace between tokens (in strings they are escaped), so no value changes.
fn print_json(result: &JobResult) -> ExitCode {
    match serde_json::to_string(result) {
        Ok(s) => openvibe_skill_runner::cli::write_stdout(&format!("{}\n", one_line(&s))),
        Err(e) => {
            eprintln!("openvibe-skill-runner: cannot print the result: {e}");
            ExitCode::from(70)
        }
    }
}

fn one_line(json: &str) -> String {
    json.replace(['\n', '\r'], " ")
}

/// Text from the tool for a terminal: control characters but line breaks and tabs, and
/// the characters that reorder text (bidi controls), are shown escaped, never sent.
fn shown(text: &str) -> String {
    escaped(text, true)
}

/// [`shown`], line breaks and tabs escaped too when `keep_breaks` is false: one line that
/// cannot pass for another of the runner's own.
fn escaped(text: &str, keep_breaks: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        let kept = keep_breaks && (c == '\n' || c == '\t');
        if (c.is_control() && !kept) || bidi {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

fn print_human(r: &JobResult) -> ExitCode {
    openvibe_skill_runner::cli::write_stdout(&summary(r))
}

/// `run`'s summary for a person: what the tool wrote is shown through [`shown`].
fn summary(r: &JobResult) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let reason = r
        .reason_str()
        .map(|x| format!(" ({x})"))
        .unwrap_or_default();
    let _ = writeln!(s, "status: {}{reason}", r.status.as_str());
    if let Some(m) = &r.message {
        let _ = writeln!(s, "message: {}", shown(m));
    }
    if let Some(o) = &r.output {
        // As the tool wrote it: a reformatted value could change its numbers or key order.
        let _ = writeln!(s, "output:\n{}", shown(o.as_str()));
    }
    if !r.stderr.is_empty() {
        let more = if r.stderr_truncated {
            "\n[…truncated]"
        } else {
            ""
        };
        let _ = writeln!(s, "stderr:\n{}{more}", shown(r.stderr.trim_end()));
    }
    if !r.egress.is_empty() {
        let _ = writeln!(s, "egress:");
        for e in &r.egress {
            // A name the tool asked for: shown escaped, never as terminal control bytes.
            let _ = writeln!(
                s,
                "  {} {}:{} (sent {} B, received {} B)",
                if e.allowed { "allowed" } else { "refused" },
                e.host.escape_debug(),
                e.port,
                e.bytes_out,
                e.bytes_in
            );
        }
    }
    let _ = writeln!(
        s,
        "wall {} ms, cpu {} ms, memory peak {:.1} MiB, net {}, node {}",
        r.wall_ms,
        r.cpu_ms,
        r.mem_peak_bytes as f64 / 1048576.0,
        r.net.as_str(),
        r.node.as_deref().unwrap_or("?")
    );
    s
}
