//! `--threads N`, taken by every command that runs the model (`generate`, `perplexity`,
//! `logits`, `serve`): the forward pass's work is split over N threads (default: every core
//! the OS offers); any count gives the same tokens and logits.

use edgellm::exec::{available_threads, Exec};
use edgellm::limits::MAX_THREADS;

use crate::args::Args;

pub const OPTION: &str = "threads";

/// The count asked for, or all cores.
pub fn count(args: &Args) -> Result<usize, String> {
    Ok(args.count(OPTION, 1, MAX_THREADS)?.unwrap_or_else(available_threads))
}

pub fn exec(args: &Args) -> Result<Exec, String> {
    Exec::with_threads(count(args)?).map_err(|e| format!("--threads: {e} [{}]", e.code()))
}
