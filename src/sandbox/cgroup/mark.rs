//! A warm sandbox's hand-over, as its cgroup counts it: the CPU time its start took, and a
//! memory peak that starts again there, so that a job's figures are its own.

use super::*;
use std::io::{Read as _, Seek as _};

/// Taken at the hand-over ([`JobCgroup::mark_hand_over`]).
#[derive(Debug)]
pub struct HandOverMark {
    /// The cgroup's CPU time so far: the warm-up's, not the job's.
    pub cpu_ns: u64,
    /// Where the job's memory peak since the mark is read: v2's `memory.peak`, opened and
    /// reset (the kernel keeps a peak per descriptor that wrote to it, Linux 6.12+), or
    /// `memory.current` sampled from the mark where `memory.peak` cannot be reset (Linux
    /// 5.19 to 6.11: its peak counts the warm-up's start, and pid 1's hand-over). None
    /// where the peak was reset in place (v1), or where v2 keeps no peak at all (before
    /// 5.19: the supervisor samples `memory.current` from the mark anyway).
    peak: Option<Peak>,
}

#[derive(Debug)]
enum Peak {
    Reset(fs::File),
    Sampled(super::PeakSampler),
}

impl HandOverMark {
    /// The memory peak since the mark, where v2 cannot reset it in place.
    pub fn peak_since(&mut self) -> Option<u64> {
        match self.peak.as_mut()? {
            Peak::Reset(file) => {
                file.rewind().ok()?;
                let mut text = String::new();
                file.read_to_string(&mut text).ok()?;
                text.trim().parse().ok()
            }
            Peak::Sampled(sampler) => Some(sampler.peak()),
        }
    }
}

impl JobCgroup {
    /// Marks the hand-over of a warm sandbox: reads the CPU time so far and starts the
    /// memory peak again (v1 `memory.max_usage_in_bytes`, v2 `memory.peak`, or a sampler
    /// of v2's `memory.current` where the kernel cannot reset its peak). Needs a tokio
    /// runtime.
    pub fn mark_hand_over(&self) -> HandOverMark {
        let cpu_ns = self.stats().cpu_ns;
        let mut peak = None;
        for dir in &self.dirs {
            let v1 = dir.join("memory.max_usage_in_bytes");
            if v1.exists() {
                if let Err(err) = fs::write(&v1, "0") {
                    tracing::debug!(file = %v1.display(), %err, "memory peak not reset");
                }
                continue;
            }
            let v2 = dir.join("memory.peak");
            if v2.exists() {
                let reset = fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&v2)
                    .and_then(|mut f| f.write_all(b"reset\n").map(|()| f));
                match reset {
                    Ok(f) => peak = Some(Peak::Reset(f)),
                    Err(err) => {
                        tracing::debug!(file = %v2.display(), %err, "memory peak cannot be reset on this kernel; sampled from the hand-over");
                        let current = dir.join("memory.current");
                        peak = Some(Peak::Sampled(super::PeakSampler::start(current)));
                    }
                }
            }
        }
        HandOverMark { cpu_ns, peak }
    }

    /// The memory the job's cgroup holds now (v1 `memory.usage_in_bytes`, v2
    /// `memory.current`); 0 when unreadable.
    pub fn memory_now(&self) -> u64 {
        self.dirs
            .iter()
            .find_map(|dir| {
                read_u64(&dir.join("memory.usage_in_bytes"))
                    .or_else(|| read_u64(&dir.join("memory.current")))
            })
            .unwrap_or(0)
    }
}
