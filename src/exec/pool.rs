//! The threaded executor: a rayon pool of `n - 1` persistent workers plus the calling thread.
//!
//! `in_place_scope` runs part 0 on the calling thread while the others are queued to the
//! workers, so no part waits for a hop into the pool; rayon's idle workers spin a while before
//! they sleep, which keeps the hand-off cheap between the back-to-back matmuls of a decode step.

use super::{ExecError, Executor};

pub struct ThreadPool {
    pool: rayon::ThreadPool,
    threads: usize,
}

impl ThreadPool {
    /// `threads >= 2`: the caller plus `threads - 1` workers.
    pub fn new(threads: usize) -> Result<ThreadPool, ExecError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads - 1)
            .thread_name(|i| format!("edgellm-worker-{i}"))
            .stack_size(crate::limits::WORKER_STACK_BYTES)
            .build()
            .map_err(|e| ExecError::Spawn(e.to_string()))?;
        Ok(ThreadPool { pool, threads })
    }
}

impl Executor for ThreadPool {
    fn threads(&self) -> usize {
        self.threads
    }

    fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync)) {
        self.pool.in_place_scope(|s| {
            for i in 1..parts {
                s.spawn(move |_| f(i));
            }
            if parts > 0 {
                f(0);
            }
        });
    }
}
