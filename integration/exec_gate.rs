//! The exec gate from JavaScript, with Node's own layers removed: Node runs without its
//! permission model, without `--disallow-code-generation-from-strings` and without the
//! preload (`Engine::without_node_hardening`), as a compromised Node would, under the very
//! same sandbox otherwise. `process.execve` of Node through `/proc/self/exe` and its own
//! path, of the loader with Node as argument, and `child_process.spawnSync` of Node are each
//! tried in every net mode; none may start a program (spawnSync is stopped by seccomp first,
//! and by the gate alone with seccomp left out). The skill is `test-skills/exec-routes`
//! (its `cases.json` has the same routes with the permission model on).
//!
//! Every target only prints `{"exec_landed": ROUTE}`: an exec that went through says so.

use crate::common::*;
use base64::Engine as _;
use openvibe_skill_runner::engine::Engine;
use serde_json::{json, Value};
use sha2::Digest;
use std::path::PathBuf;

fn compromised_engine(state: &State) -> Engine {
    Engine::start(hermetic_engine_config(state.path()))
        .unwrap_or_else(|e| panic!("the engine must start on the test host: {e}"))
        .with_runner_executable(PathBuf::from(BIN))
        .without_node_hardening()
}

fn run_route(engine: &Engine, job_id: &str, route: &str, loader: &str, net: &str) -> Value {
    let code = std::fs::read(repo().join("test-skills/exec-routes/exec.js")).expect("exec.js");
    let input = json!({"route": route, "loader": loader});
    let job = json!({
        "job_id": job_id,
        "class": "function",
        "artifact": "openvibe-skill-runner@1.0.0",
        "args": {"tool": "exec", "entry": "exec.js", "input": input},
        "inputs": [{
            "name": "exec.js",
            "sha256": hex::encode(sha2::Sha256::digest(&code)),
            "content_base64": base64::engine::general_purpose::STANDARD.encode(&code),
        }],
        "net": net,
        "limits": {"wall_ms": 20000, "mem_bytes": 268435456}
    });
    run_engine_job(engine, job)
}

#[test]
fn javascript_without_the_permission_model_cannot_exec_in_any_net_mode() {
    require_host();
    let _h = exclusive();
    let state = State::new();
    let engine = compromised_engine(&state);
    let loader = engine
        .runtime
        .loader
        .clone()
        .expect("the pinned Node names its ELF interpreter");
    let loader = loader.display().to_string();
    for net in ["deny", "openvibe-only", "public"] {
        for route in ["proc_self_exe", "node_path", "loader"] {
            let r = run_route(
                &engine,
                &format!("itest-exec-gate-{net}-{route}"),
                route,
                &loader,
                net,
            );
            let stderr = r["stderr"].as_str().unwrap_or("");
            assert!(
                !r.to_string().contains("exec_landed"),
                "{net} {route}: an exec went through: {r:#}"
            );
            // The call reached the kernel (the permission model would have thrown
            // ERR_ACCESS_DENIED in JavaScript) and was refused: Node aborts on a failed
            // process.execve and names the errno.
            assert!(
                stderr.contains("process.execve failed with error code EPERM"),
                "{net} {route}: expected the exec refused with EPERM: {r:#}"
            );
            assert_status(&r, "error", Some("signal"));
            assert_eq!(r["signal"], "SIGABRT", "{net} {route}: {r:#}");
        }
        let r = run_route(
            &engine,
            &format!("itest-exec-gate-{net}-spawn"),
            "spawn_sync",
            &loader,
            net,
        );
        // Node started (its first exec went through) without its permission model, and
        // spawnSync was refused by the kernel's answer, not by Node: here by seccomp,
        // whose `clone` makes threads only, before any exec (below for the gate).
        assert_status(&r, "ok", None);
        assert_eq!(r["output"]["permission_model"], false, "{net}: {r:#}");
        assert_eq!(
            r["output"]["spawn_sync"],
            json!({"blocked": true, "code": "EPERM"}),
            "{net}: {r:#}"
        );
    }
    state.assert_clean();
    assert_host_clean("itest-exec-gate");
}

/// spawnSync with the policy's seccomp filter left out (the layer matrix's hook): the fork
/// happens, and the child's exec is the gate's to answer, `EPERM`. The control leaves the
/// gate out as well: the same spawn then starts the second Node (it only prints that it
/// landed), so it is the gate that refuses. Before, the spawn case above was refused by
/// seccomp alone, and no test showed the gate stopping a spawn.
#[test]
fn a_spawn_that_forks_is_refused_by_the_exec_gate_alone() {
    use openvibe_skill_runner::fault::Layer;
    require_host();
    let _h = exclusive();
    let state = State::new();
    for (omit, gate) in [
        (vec![Layer::Seccomp], true),
        (vec![Layer::Seccomp, Layer::ExecGate], false),
    ] {
        let engine = engine_omitting(state.path(), omit)
            .with_runner_executable(PathBuf::from(BIN))
            .without_node_hardening();
        let loader = engine.runtime.loader.clone().expect("the loader");
        let loader = loader.display().to_string();
        let r = run_route(
            &engine,
            "itest-exec-gate-spawn-alone",
            "spawn_sync",
            &loader,
            "deny",
        );
        assert_status(&r, "ok", None);
        assert_eq!(r["output"]["permission_model"], false, "{r:#}");
        let spawn = &r["output"]["spawn_sync"];
        if gate {
            assert_eq!(spawn, &json!({"blocked": true, "code": "EPERM"}), "{r:#}");
        } else {
            assert_eq!(spawn["blocked"], false, "{r:#}");
            assert!(
                spawn["out"].as_str().unwrap_or("").contains("exec_landed"),
                "without the gate the spawn starts its program: {r:#}"
            );
        }
    }
    state.assert_clean();
    assert_host_clean("itest-exec-gate");
}
