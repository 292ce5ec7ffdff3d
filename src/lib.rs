//! openvibe-skill-runner: runs one JavaScript tool of a skill under Node.js inside a
//! Linux sandbox and hands back one JSON value.

pub mod assets;
pub mod bpf;
pub mod cancel;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod doctor;
pub mod egress;
pub mod engine;
pub mod fault;
pub mod inputs;
pub mod job;
pub mod json_text;
pub mod media;
#[cfg(test)]
mod module_graph;
pub mod plan;
pub mod runtime;
pub mod sandbox;
pub mod supervise;
#[cfg(test)]
mod test_skips;
