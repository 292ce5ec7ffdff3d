//! Unit tests of `src/skill.rs`.

use super::*;
use serde_json::json;
use std::os::unix::fs::symlink;
use tempfile::TempDir;

const COUNT_JS: &str = "const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n\
                            process.stdout.write(JSON.stringify({ words: input.text.split(/\\s+/).length }));\n";

fn count_tool() -> Value {
    json!({
        "name": "count_words",
        "description": "Counts the words of a text.",
        "language": "javascript",
        "entry": "tools/count.js",
        "args": {
            "type": "object",
            "properties": { "text": { "type": "string", "maxLength": 200 } },
            "required": ["text"]
        },
        "net": "deny",
        "limits": { "wall_ms": 5000, "mem_bytes": 67108864 }
    })
}

fn manifest_with(tools: Vec<Value>) -> Value {
    json!({
        "contract": "actor.skill@2",
        "slug": "word-tools",
        "version": "1.2.0",
        "runs": "sandbox",
        "instructions": "Use count_words to count words.",
        "requires": { "kinds": ["skill.run"] },
        "tools": tools
    })
}

/// A skill folder: `skill.json` and `tools/count.js`.
fn skill_dir(manifest: &Value) -> TempDir {
    let dir = TempDir::new().expect("tempdir");
    write(&dir, "tools/count.js", COUNT_JS);
    write(&dir, "skill.json", &manifest.to_string());
    dir
}

fn good_dir() -> TempDir {
    skill_dir(&manifest_with(vec![count_tool()]))
}

fn write(dir: &TempDir, name: &str, text: &str) {
    let path = dir.path().join(name);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(path, text).expect("write");
}

/// The good manifest with one field of its one tool changed.
fn tool_with(key: &str, value: Value) -> Value {
    let mut tool = count_tool();
    tool[key] = value;
    manifest_with(vec![tool])
}

/// A value as JSON text, for a request's input.
fn text(v: Value) -> JsonText {
    JsonText::parse(&v.to_string(), crate::json_text::DuplicateKeys::Refuse).expect("json")
}

fn request(tool: &str) -> RunRequest {
    RunRequest {
        tool: tool.into(),
        input: text(json!({ "text": "hello there" })),
        net: None,
        wall_ms: None,
        mem_bytes: None,
    }
}

#[track_caller]
fn manifest_error(manifest: &Value, needle: &str) {
    let dir = skill_dir(manifest);
    match load_manifest(dir.path()) {
        Ok(_) => panic!("expected an error mentioning {needle:?}"),
        Err(e) => {
            let text = e.to_string();
            assert!(matches!(e, SkillError::Manifest { .. }), "{text}");
            assert!(text.contains(needle), "{text:?} should mention {needle:?}");
            assert!(text.contains("skill.json"), "{text:?} should name the file");
        }
    }
}

#[track_caller]
fn build_error(dir: &TempDir, req: &RunRequest, needle: &str) -> SkillError {
    match valid_job_from_skill(dir.path(), req) {
        Ok(job) => panic!("expected an error mentioning {needle:?}, got {job:?}"),
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains(needle), "{text:?} should mention {needle:?}");
            e
        }
    }
}

fn names(job: &ValidJob) -> Vec<&str> {
    job.inputs.iter().map(|i| i.name.as_str()).collect()
}

// ---- a good folder ----------------------------------------------------------------

#[test]
fn a_good_folder_loads_and_ignores_unknown_top_level_fields() {
    let dir = good_dir();
    let m = load_manifest(dir.path()).expect("manifest");
    assert_eq!(m.slug, "word-tools");
    assert_eq!(m.version, "1.2.0");
    assert_eq!(m.tools.len(), 1);
    assert_eq!(m.tools[0].declared_net(), Net::Deny);
    assert_eq!(m.tools[0].declared_wall_ms(), 5000);
    assert_eq!(m.tools[0].declared_mem_bytes(), 67_108_864);
}

#[test]
fn a_good_folder_builds_a_valid_job() {
    let dir = good_dir();
    let job = valid_job_from_skill(dir.path(), &request("count_words")).expect("job");
    assert_eq!(job.tool, "count_words");
    assert_eq!(job.entry, "tools/count.js");
    assert_eq!(job.input_json, br#"{"text":"hello there"}"#);
    assert_eq!(job.net, Net::Deny);
    assert_eq!(job.wall_ms, 5000);
    assert_eq!(job.mem_bytes, 67_108_864);
    assert_eq!(job.ttl_ms, job::TTL_MS_DEFAULT);
    assert!(job.job_id.starts_with("run-word-tools-"), "{}", job.job_id);
    assert_eq!(names(&job), ["tools/count.js"]);
    let input = &job.inputs[0];
    assert_eq!(
        input.sha256_hex(),
        hex::encode(Sha256::digest(COUNT_JS.as_bytes()))
    );
    assert_eq!(input.content.as_deref(), Some(COUNT_JS.as_bytes()));
    assert_eq!(input.media_id, None);
}

#[test]
fn undeclared_net_and_limits_take_the_defaults() {
    let mut tool = count_tool();
    let object = tool.as_object_mut().expect("object");
    object.remove("net");
    object.remove("limits");
    let dir = skill_dir(&manifest_with(vec![tool]));
    let job = valid_job_from_skill(dir.path(), &request("count_words")).expect("job");
    assert_eq!(job.net, Net::Deny);
    assert_eq!(job.wall_ms, WALL_MS_DEFAULT);
    assert_eq!(job.mem_bytes, MEM_BYTES_DEFAULT);
}

#[test]
fn several_tools_pick_the_requested_one() {
    let mut second = count_tool();
    second["name"] = json!("fetch_page");
    second["entry"] = json!("tools/fetch.js");
    second["net"] = json!("public");
    let dir = skill_dir(&manifest_with(vec![count_tool(), second]));
    write(&dir, "tools/fetch.js", "process.stdout.write('1')\n");
    let job = valid_job_from_skill(dir.path(), &request("fetch_page")).expect("job");
    assert_eq!(job.entry, "tools/fetch.js");
    assert_eq!(job.net, Net::Public);
    // Both code files travel: a tool may require the other's helpers.
    assert_eq!(names(&job), ["tools/count.js", "tools/fetch.js"]);
}

// ---- manifest errors --------------------------------------------------------------

#[test]
fn missing_manifest() {
    let dir = TempDir::new().expect("tempdir");
    let e = load_manifest(dir.path()).expect_err("no manifest");
    assert!(e.to_string().contains("skill.json"), "{e}");
    assert!(e.to_string().contains("not found"), "{e}");
}

#[test]
fn manifest_that_is_not_json() {
    let dir = good_dir();
    write(&dir, "skill.json", "{ not json");
    let e = load_manifest(dir.path()).expect_err("bad json");
    assert!(e.to_string().contains("not a valid actor.skill@2"), "{e}");
}

#[test]
fn manifest_that_is_a_symlink_is_refused() {
    let dir = good_dir();
    let elsewhere = TempDir::new().expect("tempdir");
    let target = elsewhere.path().join("skill.json");
    fs::write(&target, manifest_with(vec![count_tool()]).to_string()).expect("write");
    fs::remove_file(dir.path().join("skill.json")).expect("rm");
    symlink(&target, dir.path().join("skill.json")).expect("symlink");
    let e = load_manifest(dir.path()).expect_err("symlink");
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

#[test]
fn missing_top_level_fields() {
    for key in ["slug", "version", "runs"] {
        let mut m = manifest_with(vec![count_tool()]);
        m.as_object_mut().expect("object").remove(key);
        manifest_error(&m, key);
    }
    let mut m = manifest_with(vec![count_tool()]);
    m["slug"] = json!(" ");
    manifest_error(&m, "slug");
    let mut m = manifest_with(vec![count_tool()]);
    m["version"] = json!("");
    manifest_error(&m, "version");
}

#[test]
fn runs_must_be_sandbox() {
    let mut m = manifest_with(vec![count_tool()]);
    m["runs"] = json!("prompt");
    manifest_error(&m, "\"runs\": \"sandbox\"");
    m.as_object_mut().expect("object").remove("tools");
    manifest_error(&m, "prompt skill");
}

#[test]
fn one_to_five_tools() {
    manifest_error(&manifest_with(vec![]), "1 to 5");
    let tools: Vec<Value> = (0..6)
        .map(|i| {
            let mut t = count_tool();
            t["name"] = json!(format!("tool_{i}"));
            t
        })
        .collect();
    manifest_error(&manifest_with(tools.clone()), "1 to 5");
    let dir = skill_dir(&manifest_with(tools[..5].to_vec()));
    assert_eq!(load_manifest(dir.path()).expect("five").tools.len(), 5);
}

#[test]
fn tool_names_follow_the_regex_and_are_unique() {
    for bad in ["", "Count", "1count", "count-words", &"a".repeat(33)] {
        manifest_error(&tool_with("name", json!(bad)), "tools[0].name");
    }
    let dir = skill_dir(&tool_with("name", json!("a".repeat(32))));
    load_manifest(dir.path()).expect("32 characters");
    manifest_error(&manifest_with(vec![count_tool(), count_tool()]), "unique");
}

#[test]
fn description_of_1_to_200_characters() {
    let dir = skill_dir(&tool_with("description", json!("é".repeat(200))));
    load_manifest(dir.path()).expect("200 characters");
    manifest_error(
        &tool_with("description", json!("é".repeat(201))),
        "description",
    );
    manifest_error(&tool_with("description", json!("")), "description");
}

#[test]
fn language_must_be_javascript() {
    for bad in ["python", "JavaScript", "typescript", ""] {
        manifest_error(&tool_with("language", json!(bad)), "\"javascript\"");
    }
}

#[test]
fn entry_must_be_a_relative_js_file_of_the_folder() {
    manifest_error(
        &tool_with("entry", json!("tools/count.ts")),
        "must name a .js",
    );
    manifest_error(
        &tool_with("entry", json!("tools/missing.js")),
        "does not exist",
    );
    manifest_error(&tool_with("entry", json!("/tools/count.js")), "relative");
    manifest_error(&tool_with("entry", json!("./tools/count.js")), "relative");
    manifest_error(&tool_with("entry", json!("../count.js")), "relative");
    manifest_error(&tool_with("entry", json!("tools\\count.js")), "relative");
    manifest_error(&tool_with("entry", json!(".hidden/count.js")), "dot-");
    manifest_error(&tool_with("entry", json!("tools")), "must name a .js");
    // A folder named like a script is not a file.
    let dir = skill_dir(&tool_with("entry", json!("dir.js")));
    fs::create_dir(dir.path().join("dir.js")).expect("mkdir");
    let e = load_manifest(dir.path()).expect_err("a folder");
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

#[test]
fn entry_through_a_symlink_is_refused() {
    let dir = skill_dir(&tool_with("entry", json!("link.js")));
    symlink(
        dir.path().join("tools/count.js"),
        dir.path().join("link.js"),
    )
    .expect("symlink");
    let e = load_manifest(dir.path()).expect_err("symlinked entry");
    assert!(e.to_string().contains("symlink"), "{e}");

    let dir = skill_dir(&tool_with("entry", json!("lib/count.js")));
    symlink(dir.path().join("tools"), dir.path().join("lib")).expect("symlink");
    let e = load_manifest(dir.path()).expect_err("symlinked folder");
    assert!(e.to_string().contains("symlink"), "{e}");
}

#[test]
fn unknown_fields_inside_a_tool_are_refused() {
    manifest_error(&tool_with("nett", json!("public")), "nett");
    manifest_error(&tool_with("limits", json!({ "wall": 5 })), "wall");
}

#[test]
fn a_tool_needs_its_required_fields() {
    for key in ["name", "description", "language", "entry", "args"] {
        let mut tool = count_tool();
        tool.as_object_mut().expect("object").remove(key);
        manifest_error(&manifest_with(vec![tool]), key);
    }
}

#[test]
fn net_must_be_a_valid_mode() {
    for good in ["deny", "openvibe-only", "public"] {
        let dir = skill_dir(&tool_with("net", json!(good)));
        load_manifest(dir.path()).expect(good);
    }
    for bad in ["allow", "Public", "openvibe_only", ""] {
        manifest_error(&tool_with("net", json!(bad)), "unknown variant");
    }
}

#[test]
fn limits_within_the_caps() {
    for good in [
        json!({ "wall_ms": 1 }),
        json!({ "wall_ms": 30000 }),
        json!({ "mem_bytes": 16777216 }),
        json!({ "mem_bytes": 268435456u64 }),
        json!({}),
    ] {
        let dir = skill_dir(&tool_with("limits", good.clone()));
        load_manifest(dir.path()).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    manifest_error(&tool_with("limits", json!({ "wall_ms": 0 })), "wall_ms");
    manifest_error(&tool_with("limits", json!({ "wall_ms": 30001 })), "wall_ms");
    manifest_error(
        &tool_with("limits", json!({ "mem_bytes": 16777215 })),
        "mem_bytes",
    );
    manifest_error(
        &tool_with("limits", json!({ "mem_bytes": 268435457u64 })),
        "mem_bytes",
    );
}

#[test]
fn args_must_be_an_object_schema() {
    manifest_error(&tool_with("args", json!("text")), "JSON Schema object");
    manifest_error(
        &tool_with("args", json!({ "type": "string" })),
        "\"object\"",
    );
    manifest_error(
        &tool_with("args", json!({ "required": "text" })),
        "required",
    );
    manifest_error(&tool_with("args", json!({ "required": [1] })), "required");
}

// ---- the request ------------------------------------------------------------------

#[test]
fn an_unknown_tool_lists_the_tools() {
    let dir = good_dir();
    let e = build_error(&dir, &request("count_lines"), "count_words");
    assert!(matches!(e, SkillError::UnknownTool { .. }));
    assert!(e.to_string().contains("count_lines"), "{e}");
}

#[test]
fn net_widening_is_refused() {
    let dir = good_dir(); // declares deny
    for wider in [Net::OpenvibeOnly, Net::Public] {
        let mut req = request("count_words");
        req.net = Some(wider);
        let e = build_error(&dir, &req, "wider");
        assert!(matches!(e, SkillError::NetWider { .. }));
        assert!(e.to_string().contains(wider.as_str()), "{e}");
    }
    let dir = skill_dir(&tool_with("net", json!("openvibe-only")));
    let mut req = request("count_words");
    req.net = Some(Net::Public);
    build_error(&dir, &req, "wider");
}

#[test]
fn net_narrowing_is_allowed() {
    let dir = skill_dir(&tool_with("net", json!("public")));
    for (asked, got) in [
        (None, Net::Public),
        (Some(Net::Public), Net::Public),
        (Some(Net::OpenvibeOnly), Net::OpenvibeOnly),
        (Some(Net::Deny), Net::Deny),
    ] {
        let mut req = request("count_words");
        req.net = asked;
        assert_eq!(
            valid_job_from_skill(dir.path(), &req).expect("job").net,
            got
        );
    }
}

#[test]
fn limits_may_be_lowered_not_raised() {
    let dir = good_dir(); // declares 5000 ms and 64 MiB
    let mut req = request("count_words");
    req.wall_ms = Some(100);
    req.mem_bytes = Some(33_554_432);
    let job = valid_job_from_skill(dir.path(), &req).expect("job");
    assert_eq!(job.wall_ms, 100);
    assert_eq!(job.mem_bytes, 33_554_432);

    req.wall_ms = Some(5000);
    req.mem_bytes = Some(67_108_864);
    valid_job_from_skill(dir.path(), &req).expect("equal to the declaration");

    let mut req = request("count_words");
    req.wall_ms = Some(5001);
    let e = build_error(&dir, &req, "--wall-ms 5001");
    assert!(matches!(e, SkillError::LimitWider { .. }));
    let mut req = request("count_words");
    req.mem_bytes = Some(67_108_865);
    build_error(&dir, &req, "limits.mem_bytes");
}

/// A flag below the job's least limit is named as the flag the person typed, with the
/// least value (it read "limits.wall_ms" before, a field they never wrote).
#[test]
fn a_limit_below_the_minimum_names_the_flag() {
    let dir = good_dir();
    let mut req = request("count_words");
    req.wall_ms = Some(0);
    let e = build_error(
        &dir,
        &req,
        "--wall-ms 0 is below the least a job may have (1)",
    );
    assert!(matches!(e, SkillError::LimitTooLow { .. }), "{e}");
    let mut req = request("count_words");
    req.mem_bytes = Some(1024);
    build_error(
        &dir,
        &req,
        "--mem-bytes 1024 is below the least a job may have (16777216)",
    );
    req.mem_bytes = Some(16_777_216);
    valid_job_from_skill(dir.path(), &req).expect("the least is allowed");
}

#[test]
fn required_input_keys_are_checked() {
    let dir = good_dir();
    let mut req = request("count_words");
    req.input = text(json!({}));
    build_error(&dir, &req, "lacks text");
    req.input = text(json!("hello"));
    build_error(&dir, &req, "takes an object");
    req.input = text(json!({ "text": 5 })); // the type is the tool's to judge
    valid_job_from_skill(dir.path(), &req).expect("job");
    // A key is read unescaped, as the tool's JSON.parse reads it.
    let escaped = r#"{"\u0074ext":"hi"}"#;
    req.input = JsonText::parse(escaped, crate::json_text::DuplicateKeys::Refuse).expect("json");
    valid_job_from_skill(dir.path(), &req).expect("job");
    // Without `required`, any input goes through.
    let dir = skill_dir(&tool_with("args", json!({ "type": "object" })));
    req.input = text(Value::Null);
    valid_job_from_skill(dir.path(), &req).expect("job");
}

#[test]
fn the_input_reaches_the_job_as_written() {
    let dir = good_dir();
    let mut req = request("count_words");
    let written = r#"{"zeta":2,"text":"\u00e9\/","id":1234567890123456789012,"n":-0}"#;
    req.input = JsonText::parse(written, crate::json_text::DuplicateKeys::Refuse).expect("json");
    let job = valid_job_from_skill(dir.path(), &req).expect("job");
    assert_eq!(job.input_json, written.as_bytes());
    // And as a dispatcher would submit it, through the door every submitted job takes.
    let wire = job_from_skill(dir.path(), &req).expect("job");
    let text = serde_json::to_vec(&wire).expect("json");
    let admitted = job::admit(&text, &Bounds::default()).expect("admitted");
    assert_eq!(admitted.input_json, written.as_bytes());
    assert_eq!(admitted.tool, job.tool);
    assert_eq!(admitted.entry, job.entry);
    assert_eq!(
        (admitted.net, admitted.wall_ms, admitted.mem_bytes),
        (job.net, job.wall_ms, job.mem_bytes)
    );
    let names = |j: &ValidJob| -> Vec<(String, [u8; 32])> {
        j.inputs
            .iter()
            .map(|i| (i.name.clone(), i.sha256))
            .collect()
    };
    assert_eq!(names(&admitted), names(&job));
}

// ---- the folder -------------------------------------------------------------------

#[test]
fn nested_files_are_sent_sorted_with_slashes() {
    let dir = good_dir();
    write(&dir, "lib/text/split.js", "module.exports = 1;\n");
    write(&dir, "lib/a-b.js", "module.exports = 2;\n");
    write(&dir, "data/words.json", "[\"a\"]\n");
    write(&dir, "README.md", "# word tools\n");
    write(&dir, "lib/skill.json", "{}\n"); // only the root manifest stays home
    let job = valid_job_from_skill(dir.path(), &request("count_words")).expect("job");
    assert_eq!(
        names(&job),
        [
            "README.md",
            "data/words.json",
            "lib/a-b.js",
            "lib/skill.json",
            "lib/text/split.js",
            "tools/count.js",
        ]
    );
    for input in &job.inputs {
        let bytes = fs::read(dir.path().join(&input.name)).expect("read");
        assert_eq!(
            input.sha256_hex(),
            hex::encode(Sha256::digest(&bytes)),
            "{}",
            input.name
        );
        assert_eq!(
            input.content.as_deref(),
            Some(bytes.as_slice()),
            "{}",
            input.name
        );
    }
}

#[test]
fn dot_files_and_dot_folders_are_skipped() {
    let dir = good_dir();
    write(&dir, ".env", "SECRET=1\n");
    write(&dir, ".git/config", "[core]\n");
    write(&dir, "tools/.eslintrc.json", "{}\n");
    write(&dir, "tools/.cache/x.js", "1\n");
    let job = valid_job_from_skill(dir.path(), &request("count_words")).expect("job");
    assert_eq!(names(&job), ["tools/count.js"]);
}

#[test]
fn a_symlink_in_the_folder_is_an_error_naming_it() {
    let dir = good_dir();
    symlink("/etc/passwd", dir.path().join("tools/passwd")).expect("symlink");
    let e = build_error(&dir, &request("count_words"), "tools/passwd");
    assert!(e.to_string().contains("symlink"), "{e}");

    let dir = good_dir();
    symlink("/etc", dir.path().join("etc")).expect("symlink");
    build_error(&dir, &request("count_words"), "symlink");

    // A dangling one too.
    let dir = good_dir();
    symlink("/nowhere", dir.path().join("x.js")).expect("symlink");
    build_error(&dir, &request("count_words"), "x.js");
}

#[test]
fn a_special_file_is_an_error_naming_it() {
    let dir = good_dir();
    let socket = dir.path().join("tools/agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    let e = build_error(&dir, &request("count_words"), "agent.sock");
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

#[test]
fn file_rules_name_the_file() {
    let dir = good_dir();
    write(&dir, "lib/big.js", &"/".repeat(MAX_JS_BYTES + 1));
    build_error(&dir, &request("count_words"), "lib/big.js");

    let dir = good_dir();
    write(&dir, "lib/ok.js", &"/".repeat(MAX_JS_BYTES));
    valid_job_from_skill(dir.path(), &request("count_words")).expect("64 KiB .js");

    let dir = good_dir();
    fs::write(dir.path().join("logo.png"), b"\x89PNG\r\n\x1a\n\0\0").expect("write");
    build_error(&dir, &request("count_words"), "logo.png");

    let dir = good_dir();
    write(&dir, "my notes.txt", "x");
    build_error(&dir, &request("count_words"), "my notes.txt");
}

#[test]
fn too_many_or_too_large_files_are_refused() {
    let dir = good_dir();
    for i in 0..MAX_INPUTS {
        write(&dir, &format!("data/f{i:02}.txt"), "x");
    }
    build_error(&dir, &request("count_words"), "more than 64 files");

    let dir = good_dir();
    for i in 0..MAX_INPUTS - 1 {
        write(&dir, &format!("data/f{i:02}.txt"), "x");
    }
    let job = valid_job_from_skill(dir.path(), &request("count_words")).expect("64 files");
    assert_eq!(job.inputs.len(), MAX_INPUTS);

    let dir = good_dir();
    write(&dir, "data/a.txt", &"a".repeat(600 * 1024));
    write(&dir, "data/b.txt", &"b".repeat(600 * 1024));
    build_error(&dir, &request("count_words"), "1 MiB");
}

#[test]
fn folders_deeper_than_the_name_rule_are_refused() {
    let dir = good_dir();
    write(&dir, "a/b/c/d/e/f/g/h.txt", "8 components");
    valid_job_from_skill(dir.path(), &request("count_words")).expect("8 components");
    write(&dir, "a/b/c/d/e/f/g/h/i.txt", "9 components");
    build_error(&dir, &request("count_words"), "too deep");
}

#[test]
fn case_insensitive_duplicates_are_the_runners_rejection() {
    let dir = good_dir();
    write(&dir, "tools/Count.js", "1\n");
    let e = build_error(&dir, &request("count_words"), "twice");
    assert!(matches!(e, SkillError::Job { .. }), "{e}");
}

// ---- the folder, while its owner renames things in it ----------------------------

/// A folder with `sub/data.txt`, and a folder outside it holding a `data.txt` of its own
/// (as a root-only file would be, for a `run` by root).
fn folder_and_outside() -> (TempDir, TempDir) {
    let dir = good_dir();
    write(&dir, "sub/data.txt", "the skill's own data\n");
    let outside = TempDir::new().expect("tempdir");
    // Not longer than the folder's own file, or a read bounded by its size would refuse it.
    fs::write(outside.path().join("data.txt"), "SECRET\n").expect("write");
    (dir, outside)
}

/// Puts a symlink to `target` where `folder/name` was (moved to a dot-name beside it), as
/// its owner's `rename` would.
fn swap_for_symlink(folder: &Path, name: &str, target: &Path) {
    fs::rename(folder.join(name), folder.join(format!(".moved-{name}"))).expect("rename");
    symlink(target, folder.join(name)).expect("symlink");
}

fn assert_no_outside_bytes(job: &ValidJob) {
    for input in &job.inputs {
        let content = input.content.as_deref().unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(content).contains("SECRET"),
            "{} carries the outside file",
            input.name
        );
    }
}

/// The audit's attack: `sub` swapped for a symlink to an outside folder once the walk has
/// checked everything, before the files are read. The files are read from what the walk
/// opened, so the job carries `sub/data.txt` as it was; reading `dir/sub/data.txt` by its
/// path would have sent the outside file.
#[test]
fn a_sub_folder_swapped_for_a_symlink_before_the_reads_is_not_read_through() {
    let (dir, outside) = folder_and_outside();
    let (folder, target) = (dir.path().to_path_buf(), outside.path().to_path_buf());
    folder::seam::set(move |point| {
        if let folder::seam::Point::Reads = point {
            swap_for_symlink(&folder, "sub", &target);
        }
    });
    let job = valid_job_from_skill(dir.path(), &request("count_words"));
    folder::seam::clear();
    let job = job.expect("job");
    let swapped = fs::symlink_metadata(dir.path().join("sub")).expect("lstat");
    assert!(swapped.file_type().is_symlink(), "the swap was made");
    assert_no_outside_bytes(&job);
    let data = job
        .inputs
        .iter()
        .find(|i| i.name == "sub/data.txt")
        .expect("sub/data.txt is sent");
    assert_eq!(
        data.content.as_deref(),
        Some(&b"the skill's own data\n"[..])
    );
    assert_eq!(names(&job), ["sub/data.txt", "tools/count.js"]);
}

/// `sub` swapped for a symlink after the walk saw a folder there and before it went in:
/// the walk refuses it, as any symlink, instead of listing and reading the outside folder.
#[test]
fn a_sub_folder_swapped_for_a_symlink_while_walked_is_refused() {
    let (dir, outside) = folder_and_outside();
    let (folder, target) = (dir.path().to_path_buf(), outside.path().to_path_buf());
    folder::seam::set(move |point| {
        if let folder::seam::Point::Entry("sub") = point {
            swap_for_symlink(&folder, "sub", &target);
        }
    });
    let result = valid_job_from_skill(dir.path(), &request("count_words"));
    folder::seam::clear();
    match result {
        Ok(job) => {
            assert_no_outside_bytes(&job);
            panic!("a symlink was walked into: {:?}", names(&job));
        }
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains("symlink"), "{text}");
            assert!(text.contains("sub"), "{text}");
        }
    }
}

/// A file swapped for a pipe after the walk saw a regular file there: it is opened without
/// blocking (so `run` does not hang on it, nor opens a terminal as its own) and refused by
/// what `fstat` says of what was opened, before anything is read.
#[test]
fn a_file_swapped_for_a_pipe_while_walked_is_refused_without_blocking() {
    let dir = good_dir();
    write(&dir, "sub/data.txt", "text\n");
    let file = dir.path().join("sub/data.txt");
    folder::seam::set(move |point| {
        if let folder::seam::Point::Entry("sub/data.txt") = point {
            fs::remove_file(&file).expect("rm");
            let c_path = std::ffi::CString::new(file.as_os_str().as_encoded_bytes())
                .expect("no NUL in a temporary path");
            // SAFETY: `c_path` is a NUL-terminated path that outlives the call.
            let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
            assert_eq!(rc, 0, "mkfifo: {}", std::io::Error::last_os_error());
        }
    });
    let result = valid_job_from_skill(dir.path(), &request("count_words"));
    folder::seam::clear();
    let e = result.expect_err("a pipe");
    let text = e.to_string();
    assert!(text.contains("sub/data.txt"), "{text}");
    assert!(text.contains("not a regular file"), "{text}");
}

/// The reader on its own: a file is read from the folder's descriptor, so once the folder
/// is open, swapping it for a symlink to an outside folder changes nothing that is read.
#[test]
fn the_reader_reads_from_the_folder_it_holds_never_through_a_path() {
    let (dir, outside) = folder_and_outside();
    let sub = folder::open_folder(&dir.path().join("sub")).expect("open sub");
    swap_for_symlink(dir.path(), "sub", outside.path());
    let bytes = match folder::read_file_at(
        std::os::fd::AsFd::as_fd(&sub),
        c"data.txt",
        MAX_INPUTS_TOTAL_BYTES as u64,
    ) {
        Ok(bytes) => bytes,
        Err(e) => panic!("{}", e.into_skill_error(dir.path(), "data.txt")),
    };
    assert_eq!(bytes, b"the skill's own data\n");
    // What the path leads to now is the outside file, which a walk started now refuses.
    let by_path = fs::read(dir.path().join("sub/data.txt")).expect("read");
    assert!(String::from_utf8_lossy(&by_path).contains("SECRET"));
    let e = build_error(&dir, &request("count_words"), "symlink");
    assert!(e.to_string().contains("sub"), "{e}");
}

#[test]
fn a_dot_file_whose_name_is_not_utf8_is_skipped() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt as _;
    let dir = good_dir();
    fs::write(dir.path().join(OsStr::from_bytes(b".\xff")), "x").expect("write");
    fs::create_dir(dir.path().join(OsStr::from_bytes(b".\xfe-cache"))).expect("mkdir");
    fs::write(
        dir.path().join(OsStr::from_bytes(b"tools/.\xfd")),
        "\0binary",
    )
    .expect("write");
    let job = valid_job_from_skill(dir.path(), &request("count_words")).expect("job");
    assert_eq!(names(&job), ["tools/count.js"]);

    // Any other name that is not UTF-8 is still refused, named.
    fs::write(dir.path().join(OsStr::from_bytes(b"tools/x\xff.js")), "1").expect("write");
    let e = build_error(&dir, &request("count_words"), "not UTF-8");
    assert!(e.to_string().contains("tools/x"), "{e}");
}

#[test]
fn a_manifest_that_is_a_pipe_is_refused_without_blocking() {
    let dir = good_dir();
    let manifest = dir.path().join(MANIFEST_FILE);
    fs::remove_file(&manifest).expect("rm");
    let c_path = std::ffi::CString::new(manifest.as_os_str().as_encoded_bytes())
        .expect("no NUL in a temporary path");
    // SAFETY: `c_path` is a NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo: {}", std::io::Error::last_os_error());
    let e = load_manifest(dir.path()).expect_err("a pipe");
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

// ---- job ids ----------------------------------------------------------------------

#[test]
fn job_ids_are_sanitized_and_bounded() {
    assert_eq!(
        job_id_for("word-tools", 1_700_000_000_000),
        "run-word-tools-1700000000000"
    );
    assert_eq!(job_id_for("mes outils/é", 1), "run-mes-outils---1");
    assert_eq!(job_id_for("", 5), "run-skill-5");
    let long = job_id_for(&"s".repeat(200), 1_700_000_000_000);
    assert_eq!(long.len(), MAX_JOB_ID_LEN);
    assert!(job::valid_job_id(&long), "{long}");
    let huge = job_id_for(&"é".repeat(100), u128::MAX);
    assert!(job::valid_job_id(&huge), "{huge}");
}

// ---- the repository's test skills ------------------------------------------------

/// An input that holds every key `required` names, with a value of the declared type.
fn sample_input(args: &Value) -> Value {
    let mut object = serde_json::Map::new();
    let required = args.get("required").and_then(Value::as_array);
    for key in required.into_iter().flatten().filter_map(Value::as_str) {
        let kind = args
            .pointer(&format!("/properties/{key}/type"))
            .and_then(Value::as_str);
        let value = match kind {
            Some("number") | Some("integer") => json!(1),
            Some("boolean") => json!(true),
            Some("array") => json!([]),
            _ => json!("text"),
        };
        object.insert(key.to_string(), value);
    }
    Value::Object(object)
}

#[test]
fn every_test_skill_builds_a_valid_job() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("test-skills");
    let Ok(entries) = fs::read_dir(&root) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(MANIFEST_FILE).is_file())
        .collect();
    dirs.sort();
    for dir in dirs {
        let manifest = load_manifest(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for tool in &manifest.tools {
            let req = RunRequest {
                tool: tool.name.clone(),
                input: text(sample_input(&tool.args)),
                net: None,
                wall_ms: None,
                mem_bytes: None,
            };
            let job = valid_job_from_skill(&dir, &req)
                .unwrap_or_else(|e| panic!("{} {}: {e}", dir.display(), tool.name));
            assert_eq!(job.net, tool.declared_net());
            // Within the default bound on the input too, which the engine applies.
            job::check_input_size(job.input_json.len(), &Bounds::default())
                .unwrap_or_else(|r| panic!("{} {}: {}", dir.display(), tool.name, r.message));
        }
    }
}

#[test]
fn a_key_twice_anywhere_in_the_manifest_is_refused() {
    // In `args`, the typed reading kept the last "required": the check of required keys
    // was dropped without a word.
    let dir = good_dir();
    let mut text = manifest_with(vec![count_tool()]).to_string();
    let args_at = text.find("\"args\":{").expect("args") + "\"args\":{".len();
    text.insert_str(args_at, "\"required\":[\"text\"],\"required\":[],");
    write(&dir, "skill.json", &text);
    let e = load_manifest(dir.path()).expect_err("a key twice");
    assert!(e.to_string().contains("required"), "{e}");
    assert!(e.to_string().contains("each key once"), "{e}");
}

#[test]
fn an_array_where_an_object_belongs_is_refused() {
    // serde reads a struct from an array by position: this ran before.
    let dir = good_dir();
    write(
        &dir,
        "skill.json",
        r#"["arr","1","sandbox",[["count_words","d","javascript","tools/count.js",{},"deny",[5000,16777216]]]]"#,
    );
    let e = load_manifest(dir.path()).expect_err("an array manifest");
    assert!(
        e.to_string().contains("the manifest must be a JSON object"),
        "{e}"
    );
    let mut tool = count_tool();
    tool["limits"] = json!([5000, 16777216]);
    let dir = skill_dir(&manifest_with(vec![tool]));
    let e = load_manifest(dir.path()).expect_err("array limits");
    assert!(
        e.to_string()
            .contains("tools[0].limits must be a JSON object"),
        "{e}"
    );
}

#[test]
fn a_byte_order_mark_is_named() {
    let dir = good_dir();
    let text = format!("\u{feff}{}", manifest_with(vec![count_tool()]));
    write(&dir, "skill.json", &text);
    let e = load_manifest(dir.path()).expect_err("a BOM");
    assert!(e.to_string().contains("byte order mark"), "{e}");
}
