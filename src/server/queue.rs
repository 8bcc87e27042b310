//! The inference thread and its bounded queue.
//!
//! The thread's one session is the server's cache slot: it keeps the last conversation's KV
//! cache between requests, so an OpenAI client that resends the growing message list gets only
//! the new part prefilled (`usage.prompt_tokens_details.cached_tokens`).
//!
//! Generation is CPU-bound, so it runs on one dedicated OS thread that owns the engine (a
//! [`Host`]: the model, shared through an `Arc`, its tokenizer and one session) and serves
//! queued requests in arrival order, one at a time. The HTTP side only parses, enqueues and
//! relays events. The queue holds at most `capacity` requests *waiting* (the running one is not
//! counted); a request that finds it full is refused at once (HTTP 429), never parked.
//!
//! Each job carries the sending half of its event channel. When the client goes away, hyper
//! drops the receiving half; the thread checks for that before a job starts and between every
//! prefill chunk and decode step, and stops the generation. The channel holds at most
//! [`EVENTS_IN_FLIGHT`] events: a client that reads its stream slowly holds the generation back
//! (the thread waits to send) instead of having every unread step buffered in the server's
//! memory; one that stops reading is cut by the send timeout, which ends the wait.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use tokio::sync::mpsc;

use super::errors::ApiError;
use crate::protocol::StepChunk;
use crate::host::{GenerateRequest, GenerateResult, Host};
use crate::metrics::native_clock;

/// What the inference thread tells a request's handler, in order: `Started`, `Text`*, then
/// `Done` or `Failed` (or `Failed` alone).
#[derive(Debug)]
pub enum Event {
    Started { prompt_tokens: usize },
    /// A step's text that became final, with the log probabilities of the tokens it completes
    /// (when asked), its call pieces, its choice and, on a choice's last step, its finish_reason.
    Text(StepChunk),
    Done { result: GenerateResult, queue_ms: f64 },
    Failed(ApiError),
}

/// Events a request's channel holds before the inference thread waits for its reader (a few
/// seconds of decode ahead of a slow client; each is one step's text and log probabilities).
pub const EVENTS_IN_FLIGHT: usize = 64;

/// A request's event channel (bounded: [`EVENTS_IN_FLIGHT`]).
pub fn events() -> (mpsc::Sender<Event>, mpsc::Receiver<Event>) {
    mpsc::channel(EVENTS_IN_FLIGHT)
}

pub struct Job {
    pub request: GenerateRequest,
    /// Refuse prompts with more tokens (`context_length_exceeded`).
    pub max_prompt_tokens: usize,
    /// Fail the request (`prefill_timeout`) when its prefill runs longer.
    pub max_prefill: Option<std::time::Duration>,
    /// End every choice ("length") when decoding runs longer (`Host::generate_cut`).
    pub max_decode: Option<std::time::Duration>,
    pub events: mpsc::Sender<Event>,
    pub enqueued: Instant,
}

/// Counters read by `/health` (and tests). Updated with relaxed atomics: figures, not locks.
#[derive(Debug, Default)]
pub struct QueueStats {
    pub waiting: AtomicUsize,
    pub running: AtomicUsize,
    pub completed: AtomicU64,
    /// Stopped because the client disconnected (before or during generation).
    pub cancelled: AtomicU64,
    pub failed: AtomicU64,
    pub rejected_full: AtomicU64,
    pub panics: AtomicU64,
    /// Mean wall time of a job, ms (an exponential average; f64 bits).
    mean_job_ms: AtomicU64,
}

impl QueueStats {
    pub fn mean_job_ms(&self) -> f64 {
        f64::from_bits(self.mean_job_ms.load(Ordering::Relaxed))
    }

    fn record_job_ms(&self, ms: f64) {
        let old = self.mean_job_ms();
        let new = if old == 0.0 { ms } else { 0.8 * old + 0.2 * ms };
        self.mean_job_ms.store(new.to_bits(), Ordering::Relaxed);
    }
}

/// The submitting side of the queue (cheap to share behind the server state).
pub struct Queue {
    tx: mpsc::Sender<Job>,
    capacity: usize,
    pub stats: Arc<QueueStats>,
}

impl Queue {
    /// Starts the inference thread over `host` (a model must be loaded). `capacity` >= 1.
    pub fn start(host: Host, capacity: usize) -> std::io::Result<(Queue, JoinHandle<()>)> {
        let capacity = capacity.max(1);
        let (tx, rx) = mpsc::channel(capacity);
        let stats = Arc::new(QueueStats::default());
        let s = stats.clone();
        // A roomy stack (reserved, touched only as used): the checks before llguidance and
        // minijinja bound their recursion, and this is the margin behind them.
        let thread = std::thread::Builder::new()
            .name("edgellm-inference".into())
            .stack_size(crate::limits::INFERENCE_STACK_BYTES)
            .spawn(move || worker(host, rx, s))?;
        Ok((Queue { tx, capacity, stats }, thread))
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Enqueues a job, or refuses it at once when `capacity` jobs are already waiting.
    pub fn try_submit(&self, job: Job) -> Result<(), ApiError> {
        // Count first: the thread may take the job (and decrement) before try_send returns.
        self.stats.waiting.fetch_add(1, Ordering::Relaxed);
        match self.tx.try_send(job) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.stats.waiting.fetch_sub(1, Ordering::Relaxed);
                match e {
                    mpsc::error::TrySendError::Full(_) => {
                        self.stats.rejected_full.fetch_add(1, Ordering::Relaxed);
                        Err(ApiError::queue_full(self.capacity, self.retry_after_s()))
                    }
                    mpsc::error::TrySendError::Closed(_) => Err(ApiError::unavailable("the inference thread has stopped")),
                }
            }
        }
    }

    /// A guess at when a slot frees up: the running job plus those waiting, at the mean job time.
    fn retry_after_s(&self) -> u64 {
        let mean = self.stats.mean_job_ms().max(100.0);
        let ahead = self.stats.waiting.load(Ordering::Relaxed) + 1;
        ((mean * ahead as f64 / 1000.0).ceil() as u64).clamp(1, 600)
    }
}

enum Outcome {
    Completed,
    Cancelled,
    Failed,
}

fn worker(mut host: Host, mut rx: mpsc::Receiver<Job>, stats: Arc<QueueStats>) {
    while let Some(job) = rx.blocking_recv() {
        stats.waiting.fetch_sub(1, Ordering::Relaxed);
        if job.events.is_closed() {
            stats.cancelled.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        stats.running.store(1, Ordering::Relaxed);
        let t0 = Instant::now();
        let outcome = match catch_unwind(AssertUnwindSafe(|| run(&mut host, &job))) {
            Ok(o) => o,
            Err(p) => {
                // The model is immutable; the session's cache may be half-written, so it is
                // forgotten. The thread carries on with the next request.
                stats.panics.fetch_add(1, Ordering::Relaxed);
                host.reset_session();
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                let _ = job.events.blocking_send(Event::Failed(ApiError::internal(format!("the engine panicked: {msg}"))));
                Outcome::Failed
            }
        };
        stats.record_job_ms(t0.elapsed().as_secs_f64() * 1000.0);
        stats.running.store(0, Ordering::Relaxed);
        let counter = match outcome {
            Outcome::Completed => &stats.completed,
            Outcome::Cancelled => &stats.cancelled,
            Outcome::Failed => &stats.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// One generation, step by step (the same host calls the browser worker makes).
fn run(host: &mut Host, job: &Job) -> Outcome {
    let tx = &job.events;
    let fail = |host: &mut Host, e: ApiError| {
        host.generate_cancel();
        let _ = tx.blocking_send(Event::Failed(e));
        Outcome::Failed
    };
    let queue_ms = job.enqueued.elapsed().as_secs_f64() * 1000.0;
    let started = match host.generate_begin(&job.request, native_clock()) {
        Ok(s) => s,
        Err(e) => return fail(host, ApiError::from_host(&e)),
    };
    if started.prompt_tokens > job.max_prompt_tokens {
        let msg = format!("the prompt has {} tokens; this server allows at most {}", started.prompt_tokens, job.max_prompt_tokens);
        return fail(host, ApiError { param: Some(job.request.input_param().into()), ..ApiError::invalid("context_length_exceeded", msg) });
    }
    if tx.blocking_send(Event::Started { prompt_tokens: started.prompt_tokens }).is_err() {
        host.generate_cancel();
        return Outcome::Cancelled;
    }
    let prefill_started = Instant::now();
    loop {
        if tx.is_closed() {
            host.generate_cancel();
            return Outcome::Cancelled;
        }
        if job.max_prefill.is_some_and(|m| prefill_started.elapsed() > m) {
            let msg = format!("reading the {}-token prompt took longer than this server allows; send a shorter prompt", started.prompt_tokens);
            return fail(host, ApiError::new(413, "invalid_request_error", "prefill_timeout", msg));
        }
        match host.prefill_chunk() {
            Ok(p) if p.done => break,
            Ok(_) => {}
            Err(e) => return fail(host, ApiError::from_host(&e)),
        }
    }
    let mut choice = 0;
    let decode_started = Instant::now();
    let mut cut = false;
    loop {
        if tx.is_closed() {
            host.generate_cancel();
            return Outcome::Cancelled;
        }
        if !cut && job.max_decode.is_some_and(|m| decode_started.elapsed() > m) {
            cut = true;
            if let Err(e) = host.generate_cut() {
                return fail(host, ApiError::from_host(&e));
            }
        }
        let ev = match host.decode_step() {
            Ok(ev) => ev,
            Err(e) => return fail(host, ApiError::from_host(&e)),
        };
        let done = ev.done;
        // A new choice's first step goes out even when empty: it opens the choice's chunks.
        let opens = ev.choice != choice;
        choice = ev.choice;
        if opens || !ev.text.is_empty() || !ev.logprobs.is_empty() || !ev.tool_calls.is_empty() || ev.choice_finish_reason.is_some() {
            let step = StepChunk { choice: ev.choice, text: ev.text, logprobs: ev.logprobs, tool_calls: ev.tool_calls, finish_reason: ev.choice_finish_reason.map(str::to_string) };
            let _ = tx.blocking_send(Event::Text(step));
        }
        if done {
            break;
        }
    }
    match host.generate_end(native_clock()) {
        Ok(result) => {
            let _ = tx.blocking_send(Event::Done { result, queue_ms });
            Outcome::Completed
        }
        Err(e) => fail(host, ApiError::from_host(&e)),
    }
}
