//! What only the command line uses, beside `main.rs`: the `run` command's skill folders
//! ([`skill`]). The daemon and the engine never read a skill folder: they take jobs.

pub mod skill;
