//! One accepted job from its slot to its journaled end: the wait for a slot within its
//! TTL, the run (warm or cold), and the journal write that must take the result before
//! anybody sees it.

use super::*;

impl Jobs {
    pub(super) async fn run_job(
        self: Arc<Self>,
        job: ValidJob,
        live: Arc<LiveJob>,
        accepted_at: Instant,
    ) {
        let deadline =
            tokio::time::Instant::from_std(accepted_at) + Duration::from_millis(job.ttl_ms);
        let id = job.job_id.clone();
        let tool = job.tool.clone();
        let net = job.net;
        let permit = tokio::select! {
            biased;
            cause = live.cancel.cancelled() => Err(NotStarted::Cancelled(cause)),
            _ = self.stopping.cancelled() => Err(NotStarted::Stopping),
            // Before the slot: a deadline already past (the ttl spent while the job was
            // taken) expires the job even when a slot is free.
            _ = tokio::time::sleep_until(deadline) => Err(NotStarted::Expired { ttl_ms: job.ttl_ms }),
            p = self.slots.clone().acquire_owned() => p.map_err(|_| NotStarted::NoSlots),
        };
        let permit = match permit {
            Ok(p) => p,
            Err(why) => {
                let (reason, message) = admit::not_started(why);
                let r = JobResult::not_run(&id, reason, message, net, self.node());
                self.live().queued -= 1;
                self.finish(&id, &tool, &live, r, None).await;
                self.trim_if_idle();
                return;
            }
        };
        {
            let mut l = self.live();
            l.queued -= 1;
            l.running += 1;
        }
        live.state.send_replace(JobState::Running);
        let started = Instant::now();
        let (result, removal) = match &self.runner {
            // Its own task: a panic in the engine ends this job `internal`, not the daemon's
            // bookkeeping of it.
            Some(runner) => {
                match tokio::spawn(runner.clone().run(job, live.cancel.clone())).await {
                    Ok(ran) => ran,
                    Err(e) => {
                        tracing::error!(job_id = %id, error = %e, "the engine failed");
                        let r = JobResult::not_run(
                            &id,
                            Reason::Internal,
                            "the runner failed while running the job (a bug: its log says where); its processes are killed and its cgroup and folder removed",
                            net,
                            self.node(),
                        );
                        (r, Removal::none())
                    }
                }
            }
            None => {
                let r = JobResult::not_run(
                    &id,
                    Reason::RunnerUnavailable,
                    format!(
                        "{} (run `openvibe-skill-runner doctor` for every layer)",
                        self.problem
                            .as_deref()
                            .unwrap_or("the engine did not start")
                    ),
                    net,
                    None,
                );
                (r, Removal::none())
            }
        };
        let total = started.elapsed().as_secs_f64();
        let overhead =
            admit::ran(&result).then(|| (total - result.wall_ms as f64 / 1000.0).max(0.0));
        // The answer does not wait for the sandbox's removal (a warm job's runs after its
        // tool's end), nor the slot for the journal; but the slot is held until nothing of
        // the job is left, so what still runs of it counts against `max_jobs`.
        let free = async {
            removal.done().await;
            drop(permit);
            self.live().running -= 1;
        };
        tokio::join!(self.finish(&id, &tool, &live, result, overhead), free);
        self.trim_if_idle();
    }

    /// Journals the terminal result, then lets everyone waiting see it. A result the
    /// journal will not take is kept and tried again until it goes in; nobody sees it
    /// before. Only when the daemon stops (past the grace period) with it still unwritten
    /// is it given up: then nobody ever saw it, and the restart's answer for the job
    /// (`runner_restarted`) contradicts nothing.
    async fn finish(
        &self,
        id: &str,
        tool: &str,
        live: &Arc<LiveJob>,
        result: JobResult,
        overhead: Option<f64>,
    ) {
        let mut result = Arc::new(result);
        log_end(&result, tool);
        let mut wait = Duration::from_millis(100);
        let mut tries = 0u32;
        // Whether this result is counted in `results_unjournaled` (from its first failed
        // write until it is written or given up).
        let mut counted_unjournaled = false;
        let durable = loop {
            let r = result.clone();
            let written = self.blocking(move |j| j.finish(&r)).await;
            tries += 1;
            let e = match written {
                Some(Ok(())) => break true,
                Some(Err(e)) if e.kind == Trouble::Conflict => {
                    // Not the disk: the row is not waiting for this result (another
                    // process ended it). Retrying cannot help; what the journal holds is
                    // the id's answer, so that is what is shown, never this result.
                    tracing::error!(job_id = %id, error = %e, "a job's result does not fit its journal row; the journal's answer stands");
                    let key = id.to_string();
                    if let Some(Ok(Some(Entry::Done(held)))) =
                        self.blocking(move |j| j.get(&key)).await
                    {
                        result = Arc::new(*held);
                    }
                    break true;
                }
                other => journal_failure(other),
            };
            if !counted_unjournaled {
                counted_unjournaled = true;
                self.health().unjournaled += 1;
                tracing::error!(job_id = %id, error = %e, "cannot journal a job's result; kept in memory and tried again; the runner takes no new job until it is written");
            }
            self.journal_outcome(&Err(e));
            if self.kill_all.is_cancelled() {
                tracing::error!(job_id = %id, status = result.status.as_str(), "the runner stops with this job's result unwritten: it was shown to nobody, and after a restart the job ends internal runner_restarted");
                break false;
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.kill_all.cancelled() => {}
            }
            wait = (wait * 2).min(JOURNAL_RETRY_MAX);
        };
        if counted_unjournaled {
            self.health().unjournaled -= 1;
            if durable {
                tracing::warn!(job_id = %id, tries, "a job's result is journaled after all");
            }
        }
        if durable {
            // Counted as the journal holds it: a result given up at shutdown was shown to
            // nobody (the next start counts the id's runner_restarted).
            self.metrics.ended(&result, admit::ran(&result), overhead);
            self.journal_outcome(&Ok(()));
            live.state.send_replace(JobState::Done(result));
        }
        let mut l = self.live();
        if l.jobs.get(id).is_some_and(|x| Arc::ptr_eq(x, live)) {
            l.jobs.remove(id);
        }
        if l.jobs.is_empty() {
            l.jobs.shrink_to(64);
        }
    }

    /// Once no job runs or waits, hands the memory of the last burst back to the system.
    fn trim_if_idle(&self) {
        let idle = {
            let l = self.live();
            l.running == 0 && l.queued == 0
        };
        if idle {
            tokio::task::spawn_blocking(|| {
                // SAFETY: malloc_trim only releases free heap pages.
                unsafe { libc::malloc_trim(0) };
            });
        }
    }
}
