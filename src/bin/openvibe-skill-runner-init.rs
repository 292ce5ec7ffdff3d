//! The init stage of a job's sandbox, alone: what the runner starts for each job (see
//! `sandbox::init_exe`). Small, so that a job's setup processes start, fork and exit fast;
//! it links nothing of the runner but the init stage.

fn main() {
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new("sandbox-init")) {
        openvibe_skill_runner::sandbox::init::main();
    }
    eprintln!(
        "openvibe-skill-runner-init is the sandbox's init stage, started by \
         openvibe-skill-runner for each job; it is not run by hand"
    );
    std::process::exit(2);
}
