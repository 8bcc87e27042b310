//! `--threads N`, taken by every command that runs the model (`generate`, `perplexity`,
//! `logits`, `serve`): the forward pass's work is split over N threads (default: every core
//! the OS offers); any count gives the same tokens and logits.

use edgellm::exec::{available_threads, Exec};
use edgellm::limits::MAX_THREADS;

#[derive(clap::Args, Debug)]
pub struct ThreadsArg {
    /// Threads the model runs on (default: every core); any N gives the same output
    #[arg(long, value_name = "N")]
    threads: Option<u64>,
}

impl ThreadsArg {
    /// The count asked for, or all cores.
    pub fn count(&self) -> Result<usize, String> {
        Ok(crate::args::count("threads", self.threads, 1, MAX_THREADS)?.unwrap_or_else(available_threads))
    }

    pub fn exec(&self) -> Result<Exec, String> {
        Exec::with_threads(self.count()?).map_err(|e| format!("--threads: {e} [{}]", e.code()))
    }
}
