//! What only the command line uses, beside `main.rs`: the `run` command's skill folders
//! ([`skill`]). The daemon and the engine never read a skill folder: they take jobs.

pub mod skill;

/// Writes `text` to stdout; a failure (a closed pipe, a full disk) is said on stderr and
/// exits 74 (EX_IOERR), never a panic as `println!` would.
pub fn write_stdout(text: &str) -> std::process::ExitCode {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("openvibe-skill-runner: cannot write to stdout: {e}");
            std::process::ExitCode::from(74)
        }
    }
}
