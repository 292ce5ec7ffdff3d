//! The crate's module graph read from its `use` lines and paths: sibling modules never
//! import each other in a circle (a child using its parent's items is not an arrow here:
//! the parent owns what its children share). Test code (`tests.rs`, `*_tests.rs`, inline
//! `mod tests`) is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every module of the crate (`a::b`) and its file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().and_then(|x| x.to_str()) != Some("rs") {
                continue;
            }
            let Ok(rel) = p.strip_prefix(src) else {
                continue;
            };
            let mut parts: Vec<String> = rel
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            if parts
                .last()
                .is_some_and(|l| l == "tests" || l.ends_with("_tests"))
            {
                continue;
            }
            out.insert(parts.join("::"), p);
        }
    }
    out
}

/// The text of a `use` without whitespace and without renames (`X as Y` is `X`).
fn drop_renames(u: &str) -> String {
    let mut out = String::new();
    let mut words = u.split_whitespace();
    while let Some(w) = words.next() {
        if w == "as" {
            if let Some(alias) = words.next() {
                // Keep what follows the new name: `,` or `}`.
                out.extend(
                    alias
                        .chars()
                        .skip_while(|c| c.is_alphanumeric() || *c == '_'),
                );
            }
            continue;
        }
        out.push_str(w);
    }
    out
}

/// `a::{b, c::{d, self}}` → `a::b`, `a::c::d`, `a::c`.
fn expand(u: &str) -> Vec<String> {
    let u = drop_renames(u);
    let Some(open) = u.find("::{") else {
        return vec![u];
    };
    let (prefix, body) = (&u[..open], &u[open + 3..u.len().saturating_sub(1)]);
    let mut items = Vec::new();
    let (mut depth, mut cur) = (0usize, String::new());
    for ch in body.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    items.push(cur);
    items
        .into_iter()
        .filter(|i| !i.is_empty())
        .flat_map(|i| {
            if i == "self" {
                vec![prefix.to_string()]
            } else {
                expand(&format!("{prefix}::{i}"))
            }
        })
        .collect()
}

/// The module a `crate::`/`super::`/`self::` path names, seen from `from`.
fn target(from: &str, path: &str, mods: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut segs = path.split("::").filter(|s| !s.is_empty());
    let mut base: Vec<&str> = from.split("::").filter(|s| !s.is_empty()).collect();
    match segs.next()? {
        "crate" => base.clear(),
        "super" => {
            base.pop();
        }
        "self" => {}
        _ => return None,
    }
    let mut rest: Vec<&str> = segs.collect();
    while rest.first() == Some(&"super") {
        base.pop();
        rest.remove(0);
    }
    let full: Vec<&str> = base.into_iter().chain(rest).collect();
    (0..=full.len())
        .rev()
        .map(|k| full[..k].join("::"))
        .find(|m| mods.contains_key(m))
}

/// Arrows between modules that are not a child's to an ancestor.
fn arrows(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, file) in &mods {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let code = text
            .split("#[cfg(test)]\nmod tests {")
            .next()
            .unwrap_or_default();
        let mut paths = Vec::new();
        let mut rest = code;
        while let Some(at) = rest.find("use ") {
            let before = &rest[..at];
            rest = &rest[at + 4..];
            if !(before.is_empty() || before.ends_with(['\n', ' ', '('])) {
                continue;
            }
            let Some(end) = rest.find(';') else {
                break;
            };
            paths.extend(expand(&rest[..end]));
        }
        // Paths written in the code itself (`crate::engine::make_jobs_dir(…)`).
        for word in code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
            if word.starts_with("crate::") || word.starts_with("super::") {
                paths.push(word.to_string());
            }
        }
        for p in paths {
            if let Some(t) = target(m, &p, &mods) {
                let ancestor = m.starts_with(&format!("{t}::")) || t.is_empty();
                if &t != m && !ancestor {
                    out.entry(m.clone()).or_default().insert(t);
                }
            }
        }
    }
    out
}

/// The modules on a circle, if any (depth-first search for a back edge).
fn circle(arrows: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        arrows: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut c = path[i..].to_vec();
            c.push(m.to_string());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in arrows.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, arrows, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    arrows
        .keys()
        .find_map(|m| visit(m, arrows, &mut Vec::new(), &mut done))
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let arrows = arrows(&src);
    // The reading works: arrows the code certainly has are found.
    let has = |a: &str, b: &str| arrows.get(a).is_some_and(|s| s.contains(b));
    assert!(has("daemon::runner", "engine"), "{arrows:#?}");
    assert!(has("sandbox::cgroup::detect", "sandbox::cgroup::v1"));
    assert_eq!(circle(&arrows), None, "a circle of imports");
}

#[test]
fn a_circle_is_found() {
    let mut a: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    a.entry("x".into()).or_default().insert("y".into());
    a.entry("y".into()).or_default().insert("z".into());
    assert_eq!(circle(&a), None);
    a.entry("z".into()).or_default().insert("x".into());
    assert_eq!(
        circle(&a),
        Some(vec!["x".into(), "y".into(), "z".into(), "x".into()])
    );
    assert_eq!(
        expand("a::{b, c::{d, self}}"),
        vec!["a::b".to_string(), "a::c::d".into(), "a::c".into()]
    );
    assert_eq!(
        expand("crate::assets::{X as _, Y as Z}"),
        vec!["crate::assets::X".to_string(), "crate::assets::Y".into()]
    );
}
