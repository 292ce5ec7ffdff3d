//! openvibe-skill-runner: runs one JavaScript tool of a skill under Node.js inside a
//! Linux sandbox and hands back one JSON value.

#[cfg(feature = "runner")]
pub mod assets;
#[cfg(feature = "runner")]
pub mod bpf;
#[cfg(feature = "runner")]
pub mod cancel;
pub mod cli;
#[cfg(feature = "runner")]
pub mod config;
#[cfg(feature = "runner")]
pub mod daemon;
#[cfg(feature = "runner")]
pub mod doctor;
#[cfg(feature = "runner")]
pub mod egress;
#[cfg(feature = "runner")]
pub mod engine;
#[cfg(feature = "runner")]
pub mod fault;
#[cfg(feature = "runner")]
pub mod inputs;
pub mod job;
pub mod json_text;
#[cfg(feature = "runner")]
pub mod media;
#[cfg(test)]
mod module_graph;
#[cfg(feature = "runner")]
pub mod plan;
#[cfg(feature = "runner")]
pub mod runtime;
#[cfg(feature = "runner")]
pub mod sandbox;
#[cfg(feature = "runner")]
pub mod state_dir;
#[cfg(feature = "runner")]
pub mod supervise;
#[cfg(test)]
mod test_skips;
