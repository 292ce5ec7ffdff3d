//! Untrusted bytes as a skill folder's `skill.json`, in a folder holding a few small files (one
//! in a subfolder, a symlink, a folder named like a file): `load_manifest` must never panic,
//! and what it accepts must hold the manifest rules. For an accepted manifest, every tool is
//! then turned into a job with `job_from_skill`, which must be a valid job that does not
//! reach further than the tool declares.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openvibe_skill_runner::job::{self, Bounds, Net};
use openvibe_skill_runner::json_text::{DuplicateKeys, JsonText};
use openvibe_skill_runner::cli::skill::{self, RunRequest, SkillError};
use openvibe_skill_runner_fuzz::assert_valid_job;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::OnceLock;

/// One folder per process, made once: only `skill.json` changes between runs.
fn folder() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("fuzz-skill-")
            .tempdir()
            .expect("a temporary folder");
        let root = dir.path();
        std::fs::write(root.join("count.js"), "console.log('{}')\n").expect("count.js");
        std::fs::create_dir_all(root.join("tools")).expect("tools/");
        std::fs::write(root.join("tools/main.js"), "require('./lib.js')\n").expect("main.js");
        std::fs::write(root.join("tools/lib.js"), "module.exports = 1\n").expect("lib.js");
        std::fs::create_dir(root.join("dir.js")).expect("dir.js/");
        std::fs::create_dir(root.join(".hidden")).expect(".hidden/");
        std::fs::write(root.join(".hidden/x.js"), "1\n").expect(".hidden/x.js");
        std::os::unix::fs::symlink("count.js", root.join(".link.js")).expect(".link.js");
        dir
    })
    .path()
}

fn breadth(net: Net) -> u8 {
    match net {
        Net::Deny => 0,
        Net::OpenvibeOnly => 1,
        Net::Public => 2,
    }
}

fuzz_target!(|data: &[u8]| {
    let dir = folder();
    std::fs::write(dir.join("skill.json"), data).expect("write skill.json");
    let manifest = match skill::load_manifest(dir) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    assert!((1..=skill::MAX_TOOLS).contains(&manifest.tools.len()));
    assert_eq!(manifest.runs, "sandbox");
    for (i, tool) in manifest.tools.iter().enumerate() {
        assert!(job::valid_tool_name(&tool.name), "tool {:?}", tool.name);
        assert!(
            manifest.tools[..i].iter().all(|t| t.name != tool.name),
            "tool {:?} twice",
            tool.name
        );
        assert_eq!(tool.language, "javascript");
        assert!(tool.entry.ends_with(".js"));
        assert!(
            job::check_input_name(&tool.entry).is_ok(),
            "entry {:?}",
            tool.entry
        );
        assert!(dir.join(&tool.entry).is_file(), "entry {:?}", tool.entry);

        // An input with every key `required` names, so the job can be built.
        let mut input = Map::new();
        if let Some(required) = tool.args.get("required").and_then(Value::as_array) {
            for key in required.iter().filter_map(Value::as_str) {
                input.insert(key.to_string(), Value::Null);
            }
        }
        let req = RunRequest {
            tool: tool.name.clone(),
            input: JsonText::parse(&Value::Object(input).to_string(), DuplicateKeys::Refuse)
                .expect("an object of nulls is JSON"),
            net: None,
            wall_ms: None,
            mem_bytes: None,
        };
        match skill::valid_job_from_skill(dir, &req) {
            Ok(valid) => {
                // `run` leaves the input's size to the engine: check everything else.
                let any_size = Bounds {
                    max_input_json_bytes: usize::MAX,
                };
                assert_valid_job(&valid, &any_size);
                assert_eq!(valid.entry, tool.entry);
                assert_eq!(valid.net, tool.declared_net());
                assert_eq!(valid.wall_ms, tool.declared_wall_ms());
                assert_eq!(valid.mem_bytes, tool.declared_mem_bytes());
                assert!(valid.inputs.iter().all(|i| !i.name.starts_with('.')));
                assert!(valid.inputs.iter().all(|i| i.name != "skill.json"));
            }
            // The folder is fixed and valid and the input has every required key: nothing is
            // left that could stop the job.
            Err(e @ SkillError::Job { .. }) => panic!("an accepted manifest made a bad job: {e}"),
            Err(e) => panic!("an accepted manifest could not become a job: {e}"),
        }

        // Asking for more than the tool declares is refused, never widened.
        let wider = RunRequest {
            net: Some(Net::Public),
            ..req.clone()
        };
        let declared = tool.declared_net();
        match skill::job_from_skill(dir, &wider) {
            Ok(built) => assert!(breadth(built.net) <= breadth(declared)),
            Err(SkillError::NetWider { .. }) => assert!(breadth(declared) < 2),
            Err(e) => panic!("unexpected error for a wider net: {e}"),
        }
    }
});
