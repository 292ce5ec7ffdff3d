//! The runner fails closed: when a layer is missing on the host, or fails to apply for a
//! job, the job does not run (status `internal`, the layer named), and nothing is left.
//!
//! A fault (`runner.fault_inject`, a test hook) does not return early before a step: it
//! hands the step's real call an input the kernel refuses (setns on a descriptor that is
//! no namespace, a write to a cgroup's folder, unshare with bits it does not know, a bind
//! mount of a missing source, more groups than NGROUPS_MAX, a landlock rule for a missing
//! path, the exec gate's listener sent over a closed descriptor, a seccomp program with a
//! jump past its end), so an error the init swallowed would let the tool run and fail
//! these tests. Landlock missing for real is the VM matrix's `no-landlock` guest.

use crate::common::*;
use base64::Engine as _;
use serde_json::{json, Value};
use sha2::Digest;

/// A tool that would print a mark if it ever ran.
const MARK: &str = "process.stdout.write(JSON.stringify('the tool ran'))";

fn job(id: &str) -> Value {
    job_with_net(id, "deny")
}

fn job_with_net(id: &str, net: &str) -> Value {
    json!({
        "job_id": id,
        "class": "function",
        "artifact": "openvibe-skill-runner@1.0.0",
        "args": {"tool": "mark", "entry": "mark.js", "input": null},
        "inputs": [{
            "name": "mark.js",
            "sha256": hex::encode(sha2::Sha256::digest(MARK)),
            "content_base64": base64::engine::general_purpose::STANDARD.encode(MARK),
        }],
        "net": net,
    })
}

/// The kernel's refusal of the cgroup fault's input: on v1 (as the runner chooses it,
/// `version_for`) a write to a cgroup's folder, on v2 the folder's `cgroup.procs` opened
/// as the folder pid 1 is made in.
fn cgroup_fault_refusal() -> &'static str {
    use openvibe_skill_runner::sandbox::cgroup::{version_for, CgroupVersion};
    if version_for(&cgroup_mounts()) == Some(CgroupVersion::V1) {
        "Is a directory"
    } else {
        "Not a directory"
    }
}

fn assert_did_not_run(r: &Value, what: &str) {
    assert_eq!(r["status"], "internal", "{what}: {r}");
    assert!(r.get("output").is_none(), "{what}: the tool ran: {r}");
    assert_eq!(r["stderr"], "", "{what}: {r}");
    assert!(
        r["exit_code"].is_null() || r["exit_code"] == 127,
        "{what}: Node never started, so no exit code of its own: {r}"
    );
}

#[test]
fn a_layer_that_fails_to_apply_stops_the_job() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    // Control: the same job runs when nothing is injected.
    let r = state.run_job_configured(
        serde_json::to_vec(&job("itest-fault"))
            .expect("json")
            .as_slice(),
        Some(""),
    );
    assert_status(&r, "ok", None);
    assert_eq!(r["output"], "the tool ran");
    // The step named, and the kernel's (or the ruleset's) own refusal of the real call.
    for (fault, net, step, refusal) in [
        ("netns", "public", "join network namespace", "EINVAL"),
        ("cgroup", "deny", "join cgroups", cgroup_fault_refusal()),
        ("namespaces", "deny", "unshare namespaces", "EINVAL"),
        ("mounts", "deny", "bind mount", "ENOENT"),
        ("capabilities", "deny", "setgroups", "EINVAL"),
        ("landlock", "deny", "landlock", "missing-by-fault"),
        ("exec_gate", "deny", "exec gate", "Bad file descriptor"),
        ("seccomp", "deny", "seccomp", "Invalid argument"),
    ] {
        let config = format!("[runner]\nfault_inject = \"{fault}\"\n");
        let r = state.run_job_configured(
            serde_json::to_vec(&job_with_net("itest-fault", net))
                .expect("json")
                .as_slice(),
            Some(&config),
        );
        assert_did_not_run(&r, fault);
        assert_eq!(r["reason"], "sandbox_setup", "{fault}: {r}");
        let message = r["message"].as_str().unwrap_or("");
        assert!(
            message.contains(step) && message.contains(refusal),
            "{fault}: the message names the step ({step}) and the real call's refusal ({refusal}): {r}"
        );
        assert!(!message.contains("injected"), "{fault}: {r}");
    }
    assert_host_clean("itest-fault");
}

#[test]
fn a_layer_missing_on_the_host_stops_every_job() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    for (missing, words) in [
        ("landlock", "landlock"),
        ("seccomp", "seccomp"),
        ("exec_gate", "exec gate"),
        ("namespaces", "namespace"),
        // Detection itself fails (it is handed a parent it refuses), not a made-up message.
        (
            "cgroups",
            "configured parent cgroup pretend_missing/cgroups",
        ),
    ] {
        let config = format!("[runner]\npretend_missing = [\"{missing}\"]\n");
        let r = state.run_job_configured(
            serde_json::to_vec(&job("itest-missing"))
                .expect("json")
                .as_slice(),
            Some(&config),
        );
        assert_did_not_run(&r, missing);
        assert_eq!(r["reason"], "runner_unavailable", "{missing}: {r}");
        // Under the job's own id, as the daemon answers it.
        assert_eq!(r["job_id"], "itest-missing", "{missing}: {r}");
        assert!(
            r["message"].as_str().unwrap_or("").contains(words),
            "{missing}: the message names the layer: {r}"
        );
        // doctor says the same and exits non-zero.
        let path = state.path().join("config.toml");
        let out = std::process::Command::new(BIN)
            .arg("--config")
            .arg(&path)
            .arg("--state-dir")
            .arg(state.path())
            .arg("doctor")
            .output()
            .expect("doctor");
        assert_eq!(out.status.code(), Some(1), "{missing}: doctor must fail");
        assert!(String::from_utf8_lossy(&out.stdout).contains("cannot run jobs"));
    }
    assert_host_clean("itest-missing");
}

#[test]
fn an_init_stage_of_another_build_refuses_the_plan_before_reading_it() {
    let _h = shared();
    let plan = br#"{"a plan":"that an init of another build could read otherwise"}"#;
    for exe in [INIT, BIN] {
        let (status, reports, left) = init_of_build(exe, "0123456789abcdef", plan);
        assert_eq!(status.code(), Some(127), "{exe}: {reports}");
        let r: Value = serde_json::from_str(reports.trim()).expect("one report");
        assert_eq!(r["kind"], "setup_failed", "{exe}: {r}");
        assert_eq!(r["step"], "start", "{exe}: {r}");
        let error = r["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("was started for build 0123456789abcdef")
                && error.contains("same build"),
            "{exe}: {error}"
        );
        // Refused before reading: not a byte of the plan was taken, so nothing it names
        // (cgroups, namespaces, mounts) was acted on.
        assert_eq!(left, plan, "{exe} read the plan before refusing it");
    }
    // Of this build, the same init reads it (and refuses it, not being a plan): the check
    // above can fail.
    let (status, reports, left) = init_of_build(
        INIT,
        openvibe_skill_runner::sandbox::init_exe::BUILD_ID,
        plan,
    );
    assert_eq!(status.code(), Some(127), "{reports}");
    assert!(reports.contains("read plan"), "{reports}");
    assert!(
        left.len() < plan.len(),
        "this build's init did not read its plan"
    );
    // Run by hand, without the init stage's arguments, it says what it is.
    let out = std::process::Command::new(INIT).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not run by hand"));
}

/// The runner's binary copied into a folder of its own (root's, 0755), with `init` (its
/// bytes, its mode) beside it as `openvibe-skill-runner-init`, or nothing; runs `job` with
/// it and returns the printed result, the runner's stderr and `doctor`'s line on the init
/// stage.
fn run_with_init_beside(init: Option<(&[u8], u32)>, job: &Value) -> (Value, String, String) {
    use std::os::unix::fs::PermissionsExt;
    let install = tempfile::tempdir().expect("install dir");
    std::fs::set_permissions(install.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let bin = install.path().join("openvibe-skill-runner");
    std::fs::copy(BIN, &bin).expect("copy the runner");
    if let Some((bytes, mode)) = init {
        let path = install.path().join("openvibe-skill-runner-init");
        std::fs::write(&path, bytes).expect("write the init");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
    let state = State::new();
    let out = feed(
        runner_in_at(&bin, state.path())
            .env("OPENVIBE_SKILL_RUNNER_LOG", "warn")
            .args(["run-job", "-"]),
        &serde_json::to_vec(job).expect("json"),
    );
    let doctor = runner_in_at(&bin, state.path())
        .arg("doctor")
        .output()
        .expect("doctor");
    let doctor = String::from_utf8_lossy(&doctor.stdout).into_owned();
    let init_line = doctor
        .lines()
        .find(|l| l.contains("init stage"))
        .unwrap_or_else(|| panic!("doctor has no init stage line:\n{doctor}"))
        .to_string();
    let result = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no result ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    state.assert_clean();
    (
        result,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        init_line,
    )
}

#[test]
fn an_init_executable_of_another_build_is_passed_over_and_an_untrusted_one_stops_every_job() {
    require_host();
    let _h = shared();
    // Of another build (an upgrade half done): the runner itself is the init, with a word.
    let stale = std::fs::read(INIT)
        .map(|mut image| {
            let id = openvibe_skill_runner::sandbox::init_exe::BUILD_ID.as_bytes();
            let mut at = 0;
            while let Some(i) = memchr::memmem::find(&image[at..], id) {
                image[at + i..at + i + id.len()].copy_from_slice(b"0000000000000000");
                at += i + id.len();
            }
            image
        })
        .expect("read the init executable");
    let (r, stderr, doctor) = run_with_init_beside(Some((&stale, 0o755)), &job("init-stale"));
    assert_eq!(r["status"], "ok", "{r}\n{stderr}");
    assert_eq!(r["output"], "the tool ran");
    assert!(
        stderr.contains("the init executable is of another build"),
        "{stderr}"
    );
    assert!(
        doctor.starts_with("ok")
            && doctor.contains("the runner itself")
            && doctor.contains("is of another build"),
        "{doctor}"
    );
    // One others may write: no job runs, and the result says which file and what to do.
    let image = std::fs::read(INIT).expect("read the init executable");
    let (r, _, doctor) = run_with_init_beside(Some((&image, 0o777)), &job("init-open"));
    assert!(
        doctor.starts_with("FAIL") && doctor.contains("may be written by users other than root"),
        "{doctor}"
    );
    assert_eq!(r["status"], "internal", "{r}");
    assert_eq!(r["reason"], "runner_unavailable", "{r}");
    let message = r["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("openvibe-skill-runner-init")
            && message.contains("may be written by users other than root")
            && message.contains("chmod 755"),
        "{message}"
    );
    // None beside it: the runner itself, silently.
    let (r, stderr, doctor) = run_with_init_beside(None, &job("init-none"));
    assert_eq!(r["status"], "ok", "{r}\n{stderr}");
    assert!(!stderr.contains("init executable"), "{stderr}");
    assert!(
        doctor.starts_with("ok")
            && doctor.contains("no openvibe-skill-runner-init beside the runner"),
        "{doctor}"
    );
    // Beside it, of this build: that file, pinned.
    let (r, stderr, doctor) = run_with_init_beside(Some((&image, 0o755)), &job("init-own"));
    assert_eq!(r["status"], "ok", "{r}\n{stderr}");
    assert!(
        doctor.starts_with("ok")
            && doctor.contains("openvibe-skill-runner-init (build ")
            && !doctor.contains("the runner itself"),
        "{doctor}"
    );
}

/// A state directory another user may change is refused before anything is read from it
/// or written in it: its owner could plant a symlink the runner (root) writes through, or
/// a runtime record whose libraries become mounts in every job's root. Here the state
/// directory belongs to `nobody` and holds a link `runtime.tmp` to a root file, where the
/// runner once wrote its runtime record: doctor and run-job refuse the folder, the job
/// does not run, and the file is unchanged.
#[test]
fn a_state_directory_another_user_may_change_is_refused() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let victim = state.path().join("victim.txt");
    std::fs::write(&victim, "root's data\n").expect("write");
    let evil = state.path().join("evil");
    std::fs::create_dir(&evil).expect("mkdir");
    std::os::unix::fs::symlink(&victim, evil.join("runtime.tmp")).expect("symlink");
    std::os::unix::fs::lchown(evil.join("runtime.tmp"), Some(65534), Some(65534)).expect("lchown");
    std::os::unix::fs::chown(&evil, Some(65534), Some(65534)).expect("chown");
    let config = hermetic_config_file(state.path());
    let under = |args: &[&str]| {
        let mut cmd = std::process::Command::new(BIN);
        cmd.arg("--config")
            .arg(&config)
            .arg("--state-dir")
            .arg(&evil)
            .args(args);
        cmd
    };
    let doctor = under(&["doctor"]).output().expect("doctor");
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(1), "doctor must fail: {said}");
    assert!(
        said.contains("owner uid 65534") && said.contains("cannot run jobs"),
        "doctor names the folder's owner: {said}"
    );
    let text = serde_json::to_vec(&job("itest-state-dir")).expect("json");
    let out = feed(under(&["run-job", "-"]).current_dir(state.path()), &text);
    let r = parse_result(&out.stdout);
    assert_did_not_run(&r, "an untrusted state directory");
    assert_eq!(r["reason"], "runner_unavailable", "{r}");
    assert_eq!(
        std::fs::read_to_string(&victim).expect("read"),
        "root's data\n",
        "the runner wrote through the planted link"
    );
    assert!(
        !evil.join("runtime.json").exists() && !evil.join("jobs").exists(),
        "nothing written in the folder"
    );
    assert_host_clean("itest-state-dir");
}
