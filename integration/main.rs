//! The adversarial and end-to-end suite: the built binary on real jobs, as root.
//!
//! Every test asserts the exact status and reason, and that the host is unchanged: no
//! job directory, no cgroup, no mount, no process of a sandbox uid left behind.

mod cgroup;
mod common;
mod compat;
mod daemon;
mod egress;
mod exact;
mod exec_gate;
mod failclosed;
mod jobs;
mod layers;
mod probe;
mod skills;
mod warm;
