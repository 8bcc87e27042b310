//! The host driver: every operation the JS worker performs on the engine, as small steps with
//! plain data in and out, so that all of it is reachable from native tests. `src/wasm` wraps
//! each method 1:1 (JSON strings across the boundary) and adds nothing.
//!
//! Loading: `load_begin(total)`, then `load_push(chunk)` for each chunk in file order (the GGUF
//! header is parsed incrementally; once it is complete the model is checked against what this
//! engine supports and the memory budget *before* any tensor memory is allocated; then each
//! tensor's bytes are copied straight into its own final buffer), then `load_finish()`. A
//! SHA-256 of every pushed byte is computed on the way and reported in the model info, so the
//! JS cache can record it and verify a cached copy without a second pass over the data.
//!
//! Generation (see `generate_*`) is driven the same way: one call per prefill chunk, one per
//! decoded token, so the host can yield to its event loop in between.
//!
//! KV cache: without options the session's cache is the model's context (`max_context`
//! positions, `PROMPT_TOO_LONG` / `CONTEXT_FULL`). `set_kv_options` (the JS `kv` option) gives it
//! a budget, f16/int8 storage and a policy (`window-sinks`: any length, old tokens evicted;
//! `error`: `PROMPT_OVER_KV_BUDGET` before prefill). `kv_stats` reports occupancy at any step;
//! the figures also come with every `GenerateResult`.

mod choices;
mod error;
mod memory;
mod prompt;
mod sampler;
mod summary;
mod support;
mod wire;

use std::sync::Arc;

use crate::engine::{Session, SessionOptions};
use crate::exec::Exec;
use crate::generate::{GenerateOptions, Generator};
use crate::gguf::{LoadProgress, StreamLoader};
use crate::kv::{KvOptions, KvStats};
use crate::metrics::Clock;
use crate::model::Model;
use crate::sha256::Sha256;
use crate::tokenizer::Tokenizer;
use crate::work::{CpuClock, Phase, PowerModel, WorkMeter};

pub use crate::generate::{PrefillStatus, StepEvent};
pub use memory::{EstimateReport, EstimateRequest, MemoryState, SkimProgress};
pub use choices::ChoiceResult;
pub use error::HostError;
pub use prompt::TokenCount;
pub use support::check_supported;
pub use wire::{GenerateRequest, GenerateResult, GenerateStarted, LoadStatus, ModelInfo};
use summary::summarize;

/// Prompt tokens per `prefill_chunk` call: the host yields to its event loop between chunks.
pub const PREFILL_CHUNK: usize = 64;

struct Loading {
    loader: StreamLoader,
    hasher: Sha256,
    total: u64,
    budget: Option<u64>,
    /// The admission the worker's estimate of this file's header made (`load_begin_admitted`).
    admitted: Option<memory::Admission>,
    /// The estimate the header was admitted with (from `HeaderReady` on).
    estimate: Option<crate::memory::Estimate>,
}

/// A loaded model and what goes with it: its tokenizer and one reusable session.
pub struct Loaded {
    pub model: Arc<Model>,
    pub tokenizer: Tokenizer,
    pub session: Session,
    pub info: ModelInfo,
    /// The KV options the session was made with (`None`: the plain context).
    pub kv_options: Option<KvOptions>,
    /// The vocabulary as the structured-output engine sees it: built at the first request with
    /// a `response_format`, then kept with the model.
    vocabulary: Option<crate::structured::Vocabulary>,
}

/// The token filter of a constrained request.
enum Filter {
    /// `response_format`.
    Format(crate::structured::Constraint),
    /// `tools` (with a choice that allows calls).
    Tools(crate::tools::constraint::ToolConstraint),
}

impl Filter {
    fn as_dyn(&mut self) -> &mut dyn crate::generate::TokenFilter {
        match self {
            Filter::Format(c) => c,
            Filter::Tools(c) => c,
        }
    }
}

/// The choice being generated.
struct Choice {
    driver: Generator,
    /// The grammar state of a request with a `response_format` or tools.
    filter: Option<Filter>,
    /// With tools: the output read as content and calls.
    calls: Option<crate::tools::output::CallStream>,
}

struct Generating {
    current: Choice,
    /// Its index (OpenAI's `n`: see `host/choices.rs`).
    index: usize,
    /// Choices asked for.
    n: usize,
    /// For the choices after the first (`n > 1` only): the request (the prompt and max_tokens
    /// are the ended choice's driver's).
    next: Option<GenerateRequest>,
    /// The choices finished so far, and their merged metrics.
    finished: Finished,
    /// The first choice's prompt figures (the request's).
    prompt_tokens: usize,
    cached_tokens: usize,
    started_ms: f64,
    work: WorkMeter,
    /// Set by [`Host::generate_cut`]: how many choices after the current one have since ended
    /// unrun.
    cut: Option<usize>,
}

/// The engine as seen by a host. One model at a time, one generation at a time.
#[derive(Default)]
pub struct Host {
    loading: Option<Loading>,
    loaded: Option<Loaded>,
    generating: Option<Generating>,
    clock: Option<Clock>,
    /// What the generations' CPU time is read from (`None`: not measured, reported as 0).
    cpu_clock: Option<CpuClock>,
    /// The power model of the energy estimate.
    power: PowerModel,
    /// KV options for the sessions of models loaded from now on.
    kv_options: Option<KvOptions>,
    /// The memory ledger (`crate::memory`; see `host/memory.rs`).
    memory: memory::MemoryState,
    /// The threads every session's forward pass is split over.
    exec: Exec,
}

impl Host {
    pub fn new() -> Host {
        Host::default()
    }

    /// A host whose sessions time themselves with `clock` (`performance.now` in wasm); its CPU
    /// time is the busy wall time inside each generation call on that clock, until
    /// [`Host::set_cpu_clock`] gives a real CPU clock.
    pub fn with_clock(clock: Clock) -> Host {
        Host { clock: Some(clock), cpu_clock: Some(CpuClock::busy_wall(clock)), ..Host::default() }
    }

    /// Where the CPU time of generations is read from (`edgellm serve`: the process's).
    pub fn set_cpu_clock(&mut self, clock: CpuClock) {
        self.cpu_clock = Some(clock);
    }

    /// The power model of the energy estimate in every `GenerateResult` (checked).
    pub fn set_power_model(&mut self, model: PowerModel) -> Result<(), HostError> {
        model.check()?;
        self.power = model;
        Ok(())
    }

    pub fn power_model(&self) -> PowerModel {
        self.power
    }

    /// (cpu, wall) readings now, for [`Host::metered`].
    fn stamp(&self) -> (f64, f64) {
        let wall = self.clock.map_or(0.0, |c| c());
        let cpu = match self.cpu_clock {
            // A busy-wall clock times the calling thread; the pool's other threads work (or
            // spin, waiting for the next split) for the whole call too: core-ms = wall × threads.
            Some(c) if c.is_wall && self.clock.is_some() => wall * self.threads() as f64,
            Some(c) => (c.read)(),
            None => 0.0,
        };
        (cpu, wall)
    }

    /// Adds the time since `start` to the running generation's `phase`.
    fn charge(&mut self, phase: Phase, start: (f64, f64)) {
        let end = self.stamp();
        if let Some(g) = self.generating.as_mut() {
            g.work.add(phase, end.0 - start.0, end.1 - start.1);
        }
    }

    // ── loading ──────────────────────────────────────────────────────────────────────────────

    /// Starts a load of a `total_len`-byte file. Drops any model already loaded (holding two
    /// would double the memory peak) and any load in progress. `budget`: refuse models whose
    /// tensor data exceeds this many bytes (checked from the header, before allocation).
    pub fn load_begin(&mut self, total_len: u64, budget: Option<u64>) {
        self.start_load(total_len, budget, false);
    }

    /// [`Host::load_begin`] for the file whose header the last estimate
    /// (`estimate_begin/push/finish`, without what-if options) read and admitted: at
    /// `HeaderReady` that admission is taken over (support and budget were decided before the
    /// download) instead of estimating the same header again. A header that is not the one
    /// estimated is admitted afresh.
    pub fn load_begin_admitted(&mut self, total_len: u64, budget: Option<u64>) {
        self.start_load(total_len, budget, true);
    }

    fn start_load(&mut self, total_len: u64, budget: Option<u64>, take_admission: bool) {
        self.generating = None;
        self.loaded = None;
        let admission = self.memory_load_begin();
        self.loading = Some(Loading {
            loader: StreamLoader::new(Some(total_len)),
            hasher: Sha256::new(),
            total: total_len,
            budget,
            admitted: admission.filter(|_| take_admission),
            estimate: None,
        });
    }

    /// Feeds the next chunk. On error the load is abandoned (its memory freed).
    pub fn load_push(&mut self, chunk: &[u8]) -> Result<LoadStatus, HostError> {
        let r = self.load_push_inner(chunk);
        if r.is_err() {
            self.loading = None;
        }
        r
    }

    fn load_push_inner(&mut self, chunk: &[u8]) -> Result<LoadStatus, HostError> {
        let l = self.loading.as_mut().ok_or_else(|| HostError::new("NO_LOAD_IN_PROGRESS", "load_push called before load_begin"))?;
        l.hasher.update(chunk);
        let progress = l.loader.push(chunk)?;
        let mut header_ready = false;
        let phase = match progress {
            LoadProgress::Header { .. } => "header",
            LoadProgress::HeaderReady => {
                header_ready = true;
                let header = l.loader.header().expect("header is parsed at HeaderReady");
                // Supported, and the ledger's estimate (weights, KV, activations, runtime, load
                // peak) within the budget: `OVER_MEMORY_BUDGET` before any tensor memory is
                // allocated.
                l.estimate = memory::admit_header(&mut self.memory, self.kv_options.as_ref(), header, l.total, l.budget, l.admitted.take())?;
                // Start the data phase now, so tensor bytes that came with this chunk land.
                l.loader.accept_header()?;
                "data"
            }
            LoadProgress::Data { .. } => "data",
            LoadProgress::Complete { .. } => "complete",
        };
        Ok(LoadStatus { phase, bytes_received: l.loader.bytes_received(), header_ready })
    }

    /// Ends the load: every byte must have arrived (`GGUF_TRUNCATED` otherwise), then the model
    /// is built from the tensors (taking ownership of their buffers, no copy).
    pub fn load_finish(&mut self) -> Result<&ModelInfo, HostError> {
        let l = self.loading.take().ok_or_else(|| HostError::new("NO_LOAD_IN_PROGRESS", "load_finish called before load_begin"))?;
        let sha256 = l.hasher.hex_digest();
        let file_size = l.total;
        let estimate = l.estimate;
        let store = l.loader.finish()?;
        let summary = summarize(&store.header);
        let model = Arc::new(Model::from_store(store)?);
        let tokenizer = Tokenizer::from_gguf(model.header())?;
        let (session, max_context) = self.make_session(&model, self.kv_options.as_ref())?;
        let info = ModelInfo {
            name: summary.name,
            architecture: summary.architecture,
            file_size,
            sha256,
            tensor_count: summary.tensor_count,
            n_params: summary.n_params,
            context_length: summary.context_length,
            vocab_size: Some(model.n_vocab()),
            quantization: summary.quantization,
            has_chat_template: summary.has_chat_template,
            weights_bytes: model.weight_bytes() as u64,
            max_context,
            kv: session.kv_stats(),
        };
        self.loaded = Some(Loaded { model, tokenizer, session, info, kv_options: self.kv_options.clone(), vocabulary: None });
        self.memory_loaded(estimate);
        Ok(&self.loaded.as_ref().unwrap().info)
    }

    /// The session for `model`: the plain context without options, else a bounded cache
    /// (default budget: the context the plain session would have). Returns it with its
    /// `max_context`.
    fn make_session(&self, model: &Arc<Model>, kv: Option<&KvOptions>) -> Result<(Session, usize), HostError> {
        let mut opts = SessionOptions::for_model(model);
        if let Some(clock) = self.clock {
            opts.clock = clock;
        }
        opts.exec = self.exec.clone();
        let default_tokens = opts.max_context;
        match kv {
            None => Ok((Session::new(model.clone(), opts), default_tokens)),
            Some(o) => {
                let cfg = o.to_config(default_tokens).map_err(|e| HostError::new(e.code(), e.to_string()))?;
                let session = Session::with_kv(model.clone(), opts, &cfg)?;
                let max = session.kv().max_tokens();
                Ok((session, max))
            }
        }
    }

    /// Sets the KV cache options (`None`: the plain context) for the loaded model's session,
    /// rebuilt now (ending any generation in progress), and for models loaded later. Errors
    /// (`BAD_KV_CONFIG`, `KV_BUDGET_TOO_SMALL`) leave everything as it was. Returns the loaded
    /// model's updated info, if one is loaded.
    pub fn set_kv_options(&mut self, kv: Option<KvOptions>) -> Result<Option<&ModelInfo>, HostError> {
        if let Some(o) = &kv {
            // What can be checked without a model (a budget in tokens, sinks), checked now.
            o.check().map_err(|e| HostError::new(e.code(), e.to_string()))?;
        }
        if let Some(model) = self.loaded.as_ref().map(|l| l.model.clone()) {
            let (session, max_context) = self.make_session(&model, kv.as_ref())?;
            self.generating = None;
            let l = self.loaded.as_mut().unwrap();
            l.info.max_context = max_context;
            l.info.kv = session.kv_stats();
            l.session = session;
            l.kv_options = kv.clone();
        }
        // An admission made for exactly these options (a load's, `EstimateRequest::as_loaded`)
        // still holds.
        self.forget_admission_unless_for(&kv);
        self.kv_options = kv;
        Ok(self.loaded.as_ref().map(|l| &l.info))
    }

    /// Runs the forward passes of the loaded session and of later ones over `exec`'s threads
    /// (outputs do not depend on the count).
    pub fn set_exec(&mut self, exec: Exec) {
        if let Some(l) = self.loaded.as_mut() {
            l.session.set_exec(exec.clone());
        }
        self.memory.threads = exec.threads();
        self.exec = exec;
        self.forget_admission();
    }

    /// `n` threads (1..=`limits::MAX_THREADS`); `THREADS_UNSUPPORTED` in a build without
    /// threads for `n > 1`. Returns the count now in use.
    pub fn set_threads(&mut self, n: usize) -> Result<usize, HostError> {
        if n == self.exec.threads() {
            return Ok(n);
        }
        let exec = Exec::with_threads(n).map_err(|e| HostError::new(e.code(), e.to_string()))?;
        self.set_exec(exec);
        Ok(n)
    }

    /// Threads the forward pass runs on.
    pub fn threads(&self) -> usize {
        self.exec.threads()
    }

    /// The loaded session's KV cache occupancy now (after any step).
    pub fn kv_stats(&self) -> Option<KvStats> {
        self.loaded.as_ref().map(|l| l.session.kv_stats())
    }

    /// Abandons a load in progress (freeing what it allocated).
    pub fn load_cancel(&mut self) {
        self.loading = None;
    }

    /// Bytes pushed so far in the current load (0 when none).
    pub fn load_bytes_received(&self) -> u64 {
        self.loading.as_ref().map_or(0, |l| l.loader.bytes_received())
    }

    /// Frees the model.
    pub fn unload(&mut self) {
        self.loading = None;
        self.generating = None;
        self.loaded = None;
    }

    pub fn loaded(&self) -> Option<&Loaded> {
        self.loaded.as_ref()
    }

    pub fn model_info(&self) -> Option<&ModelInfo> {
        self.loaded.as_ref().map(|l| &l.info)
    }

    // ── generation ───────────────────────────────────────────────────────────────────────────
    //
    // `generate_begin`, then `prefill_chunk` until it says `done`, then `decode_step` until an
    // event says `done` (with `n > 1`, after the last choice's `finish_reason`), then
    // `generate_end`: the calls of the one driver
    // (`crate::generate::Generator`, as `Session::generate`), one model call per host call.
    // The session outlives requests: a prompt that starts like the conversation the KV cache
    // holds (the next chat turn, a regenerated answer) is prefilled only past the shared part.

    /// Tokenizes the request and prepares the session: keeps the part of the prompt the KV
    /// cache already holds (`cached_tokens`). No model call yet.
    pub fn generate_begin(&mut self, req: &GenerateRequest, now_ms: f64) -> Result<GenerateStarted, HostError> {
        let t0 = self.stamp();
        let r = self.generate_begin_inner(req, now_ms);
        self.charge(Phase::Prefill, t0);
        r
    }

    fn generate_begin_inner(&mut self, req: &GenerateRequest, now_ms: f64) -> Result<GenerateStarted, HostError> {
        self.generating = None;
        let l = self.loaded.as_mut().ok_or_else(|| HostError::new("MODEL_NOT_LOADED", "no model is loaded"))?;
        let prompt = prompt::prompt_tokens(&l.tokenizer, req)?;
        req.max_tokens.map_or(Ok(()), |n| crate::limits::check_new_tokens("max_tokens", n))?;
        let room = prompt::room_after(l, prompt.len()).map_err(|e| HostError::from(e).with_param(req.input_param()))?;
        let max_tokens = match room {
            // Window + sinks: any prompt (its oldest non-sink tokens are evicted as needed) and
            // any number of tokens; by default one cache's worth.
            None => req.max_tokens.unwrap_or(l.info.max_context),
            // Cut to the room the context and the KV budget leave (the answer then ends with
            // "length"). OpenAI refuses a max_tokens past the context instead; here the room
            // also depends on the KV byte budget, which the caller does not see.
            Some(room) => req.max_tokens.unwrap_or(room).min(room),
        };
        if max_tokens == 0 {
            return Err(HostError::new("INVALID_REQUEST", "max_tokens must be at least 1"));
        }
        let n_vocab = l.session.model().n_vocab();
        if let Some((&id, _)) = req.logit_bias.iter().flatten().find(|(&id, _)| id as usize >= n_vocab) {
            return Err(HostError::new("INVALID_REQUEST", format!("logit_bias: token id {id} is not in the model's vocabulary (ids 0..{n_vocab})")).with_param("logit_bias"));
        }
        let n = req.choices();
        if n > crate::protocol::MAX_CHOICES {
            return Err(HostError::new("INVALID_REQUEST", format!("n must be at most {}, got {n}", crate::protocol::MAX_CHOICES)).with_param("n"));
        }
        let next = (n > 1).then(|| req.clone());
        let current = start_choice(l, req, prompt, max_tokens, 0)?;
        let started = GenerateStarted { prompt_tokens: current.driver.prompt().len(), cached_tokens: current.driver.cached_tokens(), max_tokens };
        self.generating = Some(Generating {
            current,
            index: 0,
            n,
            next,
            finished: Finished::default(),
            prompt_tokens: started.prompt_tokens,
            cached_tokens: started.cached_tokens,
            started_ms: now_ms,
            work: WorkMeter::default(),
            cut: None,
        });
        Ok(started)
    }

    /// Runs the next chunk of at most `PREFILL_CHUNK` prompt tokens through the model.
    pub fn prefill_chunk(&mut self) -> Result<PrefillStatus, HostError> {
        let t0 = self.stamp();
        let r = self.prefill_chunk_inner();
        self.charge(Phase::Prefill, t0);
        r
    }

    fn prefill_chunk_inner(&mut self) -> Result<PrefillStatus, HostError> {
        // The memory budget: refused before a chunk that would grow memory past it.
        self.memory_guard(memory::Step::Prefill)?;
        let (l, g) = self.gen_parts()?;
        Ok(g.current.driver.prefill(&mut l.session, PREFILL_CHUNK)?)
    }

    /// Samples one token (running the previous one through the model first). With `n > 1`, the
    /// step after a choice's last one starts the next choice, and the steps that prefill its
    /// prompt (its last token, as a rule) return an event without a token.
    pub fn decode_step(&mut self) -> Result<StepEvent, HostError> {
        let t0 = self.stamp();
        let r = self.decode_step_inner();
        let phase = match &r {
            Ok((_, true)) => Phase::Prefill,
            _ => Phase::Decode,
        };
        self.charge(phase, t0);
        r.map(|(ev, _)| ev)
    }

    /// The step's event, and whether it was a prefill.
    fn decode_step_inner(&mut self) -> Result<(StepEvent, bool), HostError> {
        if let Some(unrun) = self.generating.as_ref().and_then(|g| g.cut) {
            let (l, g) = self.gen_parts()?;
            return Ok((g.cut_step(l, unrun), false));
        }
        self.memory_guard(memory::Step::Decode)?;
        let (l, g) = self.gen_parts()?;
        if g.current.driver.finish_reason().is_some() && g.index + 1 < g.n {
            g.next_choice(l)?;
        }
        if g.current.driver.prompt_remaining() > 0 {
            if g.index == 0 {
                return Err(HostError::new("INVALID_REQUEST", "decode_step before the prompt is prefilled"));
            }
            g.current.driver.prefill(&mut l.session, PREFILL_CHUNK)?;
            let ev = StepEvent { token: None, text: String::new(), finish_reason: None, logprobs: Vec::new(), tool_calls: Vec::new(), choice: g.index, choice_finish_reason: None, done: false };
            return Ok((ev, true));
        }
        let c = &mut g.current;
        let filter = c.filter.as_mut().map(Filter::as_dyn);
        let ev = c.driver.step_with(&mut l.session, &l.tokenizer, filter)?;
        Ok((g.current_event(ev), false))
    }

    /// Ends the generation early, as if every choice had reached its `max_tokens` now (a
    /// server's time limit): the next step ends the current choice with "length", releasing
    /// its held-back text, and each step after it ends one choice not yet started, empty and
    /// unrun, with "length" — so a stream still opens and closes every choice, and the result
    /// has all `n`. No model call is made after a cut.
    pub fn generate_cut(&mut self) -> Result<(), HostError> {
        let (_, g) = self.gen_parts()?;
        g.cut.get_or_insert(0);
        Ok(())
    }

    /// Ends the generation and returns its text and usage figures (with `n > 1`: every
    /// choice in `choices`, the first one's also at the top level).
    pub fn generate_end(&mut self, now_ms: f64) -> Result<GenerateResult, HostError> {
        let l = self.loaded.as_ref().ok_or_else(|| HostError::new("MODEL_NOT_LOADED", "no model is loaded"))?;
        let g = self.generating.take().ok_or_else(|| HostError::new("NO_GENERATION", "no generation in progress"))?;
        let total_ms = (now_ms - g.started_ms).max(0.0);
        let compute = g.work.report(&self.power, self.cpu_clock.map_or("none", |c| c.kind));
        let Generating { current, index, n, mut finished, prompt_tokens, cached_tokens, cut, .. } = g;
        let logprobs = current.driver.is_logprobs();
        finished.keep(l, index, current);
        for unrun in index + 1..=index + cut.unwrap_or(0) {
            finished.choices.push(choices::unrun_choice(unrun, logprobs));
        }
        let m = finished.metrics.take().unwrap_or_default();
        let completion_tokens = finished.choices.iter().map(|c| c.ids.len()).sum();
        let first = finished.choices.first().cloned().expect("a request has a first choice");
        Ok(GenerateResult {
            text: first.text,
            finish_reason: first.finish_reason,
            prompt_tokens,
            cached_tokens,
            completion_tokens,
            ttft_ms: m.ttft_ms,
            tpot_ms: m.tpot_ms(),
            prefill_tokens_per_s: m.prefill_tok_s(),
            decode_tokens_per_s: m.decode_tok_s(),
            decode_weight_bytes_per_token: m.decode_weight_bytes_per_token as u64,
            decode_kv_bytes_last_token: m.decode_kv_bytes_last_token as u64,
            decode_bytes_per_token: m.decode_bytes_per_token(),
            decode_gb_s: m.decode_gb_s(),
            head: m.head_report(),
            total_ms,
            ids: first.ids,
            kv: l.session.kv_stats(),
            compute,
            logprobs: first.logprobs,
            tool_calls: first.tool_calls,
            choices: (n > 1).then_some(finished.choices),
        })
    }

    /// Abandons a generation. The session keeps what was run through the model (the next
    /// request may reuse it).
    pub fn generate_cancel(&mut self) {
        self.generating = None;
    }

    /// The current conversation as a snapshot (tokens + KV rows, tagged with the model's
    /// sha256 and the KV settings: see [`crate::snapshot`]), for the JS side to store. Not
    /// during a generation (`BUSY`).
    pub fn session_save(&self) -> Result<Vec<u8>, HostError> {
        if self.generating.is_some() {
            return Err(HostError::new("BUSY", "a generation is in progress"));
        }
        let l = self.loaded.as_ref().ok_or_else(|| HostError::new("MODEL_NOT_LOADED", "no model is loaded"))?;
        Ok(l.session.save_snapshot(&l.info.sha256))
    }

    /// Tokens of the current conversation (what a `session_save` now would hold).
    pub fn session_tokens(&self) -> usize {
        self.loaded.as_ref().map_or(0, |l| l.session.tokens().len())
    }

    /// Restores a saved conversation into the session; returns its token count.
    /// `SESSION_MISMATCH` (another model or other KV settings) or `SESSION_CORRUPT`, with the
    /// session unchanged.
    pub fn session_restore(&mut self, bytes: &[u8]) -> Result<usize, HostError> {
        if self.generating.is_some() {
            return Err(HostError::new("BUSY", "a generation is in progress"));
        }
        let l = self.loaded.as_mut().ok_or_else(|| HostError::new("MODEL_NOT_LOADED", "no model is loaded"))?;
        l.session.restore_snapshot(bytes, &l.info.sha256).map_err(|e| HostError::new(e.code(), e.to_string()))
    }

    /// Forgets the conversation the session's KV cache holds (after a panic, whose state is
    /// not to be trusted; or to free the prefix a client no longer wants reused).
    pub fn reset_session(&mut self) {
        self.generating = None;
        if let Some(l) = self.loaded.as_mut() {
            l.session.reset();
        }
    }

    pub fn is_generating(&self) -> bool {
        self.generating.is_some()
    }

    fn gen_parts(&mut self) -> Result<(&mut Loaded, &mut Generating), HostError> {
        let l = self.loaded.as_mut().ok_or_else(|| HostError::new("MODEL_NOT_LOADED", "no model is loaded"))?;
        let g = self.generating.as_mut().ok_or_else(|| HostError::new("NO_GENERATION", "no generation in progress"))?;
        Ok((l, g))
    }
}

/// Starts choice `index` of `req` over the session: its grammar state, tool-call reader,
/// sampler (its own seed), stop strings and driver. No model call yet.
fn start_choice(l: &mut Loaded, req: &GenerateRequest, prompt: Vec<u32>, max_tokens: usize, index: usize) -> Result<Choice, HostError> {
    let calling = req.tools.as_ref().filter(|t| t.choice != crate::tools::ToolChoice::None);
    if (req.response_format.is_some() || calling.is_some()) && l.vocabulary.is_none() {
        let v = crate::structured::Vocabulary::new(&l.tokenizer).map_err(|e| HostError::new("INTERNAL", format!("structured output: {e}")))?;
        l.vocabulary = Some(v);
    }
    let filter = match (&req.response_format, calling) {
        (Some(format), _) => {
            let vocab = l.vocabulary.as_ref().expect("built above");
            Some(Filter::Format(vocab.constraint(format).map_err(|e| HostError::new("INVALID_REQUEST", format!("response_format: the schema cannot be used: {e}")).with_param("response_format"))?))
        }
        (None, Some(t)) => {
            let vocab = l.vocabulary.as_ref().expect("built above");
            let c = crate::tools::constraint::ToolConstraint::new(vocab, t).map_err(|e| HostError::new("INVALID_REQUEST", format!("tools: a function's parameters schema cannot be used: {e}")).with_param("tools"))?;
            c.map(Filter::Tools)
        }
        (None, None) => None,
    };
    let sampler = req.choice_sampler(index);
    let calls = calling.map(|t| crate::tools::output::CallStream::new(t.forced(), crate::tools::call_id_base(&prompt, sampler.seed)));
    l.session.set_sampler(sampler);
    // A forced call (`required`, a named function) is the whole output, held to the call
    // grammar: a stop string could only cut it (a "\n" stop cut every call after its first
    // line), so stop strings apply to text answers only.
    let stop = if calling.is_some_and(|t| t.forced()) { Vec::new() } else { req.stop.clone().unwrap_or_default() };
    let opts = GenerateOptions { max_tokens, stop, stop_on_eog: true };
    let mut driver = Generator::start(&l.session, &l.tokenizer, prompt, opts)?;
    driver.set_logprobs(req.logprobs);
    Ok(Choice { driver, filter, calls })
}

/// The choices finished so far and their merged metrics.
#[derive(Default)]
struct Finished {
    choices: Vec<ChoiceResult>,
    metrics: Option<crate::metrics::GenerationMetrics>,
}

impl Finished {
    /// Keeps `choice` (choice `index`) as a result and merges its metrics.
    fn keep(&mut self, l: &Loaded, index: usize, choice: Choice) {
        let Choice { driver, mut calls, .. } = choice;
        let logprobs = driver.is_logprobs().then(|| driver.logprobs().to_vec());
        if let Some(c) = calls.as_mut() {
            c.finish();
        }
        let (result, metrics) = choices::choice_result(index, driver.into_generation(&l.session), logprobs, calls);
        self.choices.push(result);
        match self.metrics.as_mut() {
            None => self.metrics = Some(metrics),
            Some(total) => choices::merge_metrics(total, &metrics),
        }
    }
}

impl Generating {
    /// The current choice's step event `ev` as the host reports it: with tools, its text split
    /// into content and call pieces; its choice, OpenAI finish_reason and whether it is the
    /// request's last.
    fn current_event(&mut self, mut ev: StepEvent) -> StepEvent {
        let c = &mut self.current;
        if let Some(calls) = c.calls.as_mut() {
            let mut r = calls.push(&ev.text);
            if ev.finish_reason.is_some() {
                let end = calls.finish();
                r.content.push_str(&end.content);
                r.tool_calls.extend(end.tool_calls);
            }
            ev.text = r.content;
            ev.tool_calls = r.tool_calls;
        }
        ev.choice = self.index;
        ev.choice_finish_reason = ev.finish_reason.map(|f| choices::finish_reason(f, c.calls.as_ref()));
        ev.done = ev.finish_reason.is_some() && self.index + 1 == self.n;
        ev
    }

    /// A step after [`Host::generate_cut`] (`unrun`: the choices after the current one ended
    /// so far): the current choice's end, or the next unrun choice's.
    fn cut_step(&mut self, l: &Loaded, unrun: usize) -> StepEvent {
        if self.current.driver.finish_reason().is_none() {
            let ev = self.current.driver.cut(&l.tokenizer);
            return self.current_event(ev);
        }
        // Past the last choice, its end again (as a finished driver repeats its end).
        let choice = (self.index + 1 + unrun).min(self.n - 1);
        self.cut = Some(choice - self.index);
        let ev = StepEvent::new(None, String::new(), Some(crate::generate::FinishReason::Length), Vec::new());
        StepEvent { choice, choice_finish_reason: Some("length"), done: choice + 1 == self.n, ..ev }
    }

    /// Ends the current choice and starts the next one. (The next one's driver is made
    /// first: that reads the session's tokens only; the metrics the ended one keeps are reset
    /// by the next one's first prefill.)
    fn next_choice(&mut self, l: &mut Loaded) -> Result<(), HostError> {
        let req = self.next.as_ref().expect("n > 1 keeps the request");
        let ended = &self.current.driver;
        let next = start_choice(l, req, ended.prompt().to_vec(), ended.max_tokens(), self.index + 1)?;
        let ended = std::mem::replace(&mut self.current, next);
        self.finished.keep(l, self.index, ended);
        self.index += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_before_begin_is_an_error() {
        let mut h = Host::new();
        assert_eq!(h.load_push(b"GGUF").unwrap_err().code, "NO_LOAD_IN_PROGRESS");
        assert_eq!(h.load_finish().unwrap_err().code, "NO_LOAD_IN_PROGRESS");
    }

    #[test]
    fn not_gguf_is_bad_magic_and_abandons_the_load() {
        let mut h = Host::new();
        h.load_begin(64, None);
        let e = h.load_push(&[b'<'; 64]).unwrap_err();
        assert_eq!(e.code, "GGUF_BAD_MAGIC");
        assert_eq!(h.load_bytes_received(), 0);
        assert_eq!(h.load_push(b"x").unwrap_err().code, "NO_LOAD_IN_PROGRESS");
    }

    #[test]
    fn empty_file_is_truncated() {
        let mut h = Host::new();
        h.load_begin(0, None);
        assert_eq!(h.load_finish().unwrap_err().code, "GGUF_TRUNCATED");
    }
}
