//! What the daemon needs of whatever runs its jobs: the engine in production, a stand-in
//! in the daemon's unit tests (which need neither root nor a kernel).

use super::pool::Pool;
use crate::cancel::Cancel;
use crate::engine::{Engine, Removal};
use crate::inputs::CacheStats;
use crate::job::{Bounds, JobResult, ValidJob};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

/// A job's run, to its terminal result, with what is left to remove of the job once the
/// result is known (its slot is free only after that).
pub type Run = Pin<Box<dyn Future<Output = (JobResult, Removal)> + Send>>;

pub trait JobRunner: Send + Sync + 'static {
    /// The Node version results carry.
    fn node(&self) -> &str;
    /// The job rules' configured bounds.
    fn bounds(&self) -> &Bounds;
    /// The folder the runner's job directories live in, kept in place by the daemon.
    fn jobs_dir(&self) -> Option<&Path>;
    /// The input cache's figures, for `/metrics`.
    fn cache_stats(&self) -> Option<CacheStats>;
    /// Runs one valid job; `cancel` ends it early, its cause deciding the result.
    fn run(self: Arc<Self>, job: ValidJob, cancel: Cancel) -> Run;
}

impl JobRunner for Engine {
    fn node(&self) -> &str {
        &self.runtime.version
    }

    fn bounds(&self) -> &Bounds {
        Engine::bounds(self)
    }

    fn jobs_dir(&self) -> Option<&Path> {
        Some(Engine::jobs_dir(self))
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        Some(Engine::cache_stats(self))
    }

    fn run(self: Arc<Self>, job: ValidJob, cancel: Cancel) -> Run {
        Box::pin(async move { (Engine::run(&self, job, &cancel).await, Removal::none()) })
    }
}

/// The engine with the daemon's warm pool: a job whose shape has a sandbox waiting is
/// handed to it once its inputs are verified; any other runs cold.
pub struct PooledEngine {
    pub engine: Arc<Engine>,
    pub pool: Arc<Pool<Engine>>,
}

impl JobRunner for PooledEngine {
    fn node(&self) -> &str {
        &self.engine.runtime.version
    }

    fn bounds(&self) -> &Bounds {
        self.engine.bounds()
    }

    fn jobs_dir(&self) -> Option<&Path> {
        Some(self.engine.jobs_dir())
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        Some(self.engine.cache_stats())
    }

    fn run(self: Arc<Self>, job: ValidJob, cancel: Cancel) -> Run {
        Box::pin(async move { self.engine.run_with(job, &cancel, &*self.pool).await })
    }
}
