//! One build id for the runner and its init stage (`OVSR_BUILD_ID`): a hash of everything
//! they are built from (the sources, the built-in policies and preload, the manifest, the
//! lock file, the enabled features). The runner passes its id to the init stage it starts,
//! and an init of another build refuses the plan (see `sandbox::init_exe`): two files of two
//! builds never read each other's plans.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

const INPUTS: [&str; 6] = [
    "src",
    "runtime",
    "policies",
    "Cargo.toml",
    "Cargo.lock",
    "build.rs",
];

fn files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        for entry in entries.flatten() {
            files(&entry.path(), out);
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

fn main() {
    let mut all = Vec::new();
    for input in INPUTS {
        println!("cargo:rerun-if-changed={input}");
        files(Path::new(input), &mut all);
    }
    all.sort();
    // SipHash with fixed keys: the same inputs give the same id in every build.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for path in &all {
        path.hash(&mut hasher);
        std::fs::read(path).unwrap_or_default().hash(&mut hasher);
    }
    let mut features: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("CARGO_FEATURE_"))
        .collect();
    features.sort();
    features.hash(&mut hasher);
    std::env::var("CARGO_PKG_VERSION")
        .unwrap_or_default()
        .hash(&mut hasher);
    println!("cargo:rustc-env=OVSR_BUILD_ID={:016x}", hasher.finish());
}
