//! The wasm-bindgen surface: thin wrappers over the native-testable core (`crate::host`).
//! Each method converts arguments, calls the host, and returns JSON (or throws a JS `Error`
//! whose `code` property is the core's stable error code; why JSON text: see `json`). No logic
//! lives here.
use std::sync::Mutex;

use js_sys::{Error as JsError, Reflect};
use wasm_bindgen::prelude::*;

use crate::host::{GenerateRequest, Host, HostError};

#[cfg(feature = "boundary-bench")]
mod boundary_bench;

/// The message of the last panic, kept for the worker to put into its ENGINE_CRASHED error
/// (on wasm32-unknown-unknown a panic aborts: the call traps right after the hook runs).
static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

#[wasm_bindgen(start)]
pub fn start() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            console_error_panic_hook::hook(info);
            if let Ok(mut m) = LAST_PANIC.lock() {
                *m = info.to_string();
            }
        }));
    });
}

/// Version of the engine, for the JS side to check it loaded the wasm it expects.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// The largest request (JSON text, bytes) the JS engine takes by default (`maxRequestBytes`):
/// the server's `--max-body-bytes` default, one fact for both hosts.
#[wasm_bindgen]
pub fn default_max_request_bytes() -> usize {
    crate::limits::DEFAULT_MAX_REQUEST_BYTES
}

/// Whether this build was compiled with SIMD128.
#[wasm_bindgen]
pub fn simd_enabled() -> bool {
    cfg!(target_feature = "simd128")
}

/// The SIMD tier this build was compiled for: "relaxed-simd" (SIMD128 + relaxed SIMD, the
/// `edgellm_relaxed_bg.wasm` build), "simd128" (the default build) or "scalar".
#[wasm_bindgen]
pub fn simd_tier() -> String {
    tier().to_string()
}

fn tier() -> &'static str {
    if cfg!(target_feature = "relaxed-simd") {
        "relaxed-simd"
    } else if cfg!(target_feature = "simd128") {
        "simd128"
    } else {
        "scalar"
    }
}

/// Whether this is the threaded build (shared memory, a pool of web workers).
#[wasm_bindgen]
pub fn threads_build() -> bool {
    cfg!(feature = "threads")
}

/// Threaded build: a pool worker's body (`index` from 0); never returns. JS calls it in each
/// web worker it starts on this module and memory.
#[cfg(feature = "threads")]
#[wasm_bindgen]
pub fn thread_worker_run(index: usize) {
    crate::exec::wasm_pool::worker_loop(index)
}

/// Threaded build: JS calls this in a pool worker whose `thread_worker_run` trapped, so the
/// engine's caller stops waiting for it (and reports the crash) instead of hanging.
#[cfg(feature = "threads")]
#[wasm_bindgen]
pub fn thread_worker_failed() {
    crate::exec::wasm_pool::worker_failed()
}

/// Test hook: the next part a pool worker runs panics. False (nothing armed) in the
/// single-thread builds, which have no pool.
#[wasm_bindgen]
pub fn debug_pool_panic() -> bool {
    #[cfg(feature = "threads")]
    {
        crate::exec::wasm_pool::panic_next_part();
        true
    }
    #[cfg(not(feature = "threads"))]
    {
        false
    }
}

/// Stack of each pool worker (`thread_stack_size` of the glue's init; the ledger counts it).
#[wasm_bindgen]
pub fn thread_stack_bytes() -> usize {
    crate::limits::WORKER_STACK_BYTES
}

/// Threaded build: pool workers parked so far (JS waits for all before `set_threads`).
#[wasm_bindgen]
pub fn thread_workers() -> usize {
    #[cfg(feature = "threads")]
    {
        crate::exec::wasm_pool::workers()
    }
    #[cfg(not(feature = "threads"))]
    {
        0
    }
}

/// The message of the last panic (empty when none), cleared by reading it.
#[wasm_bindgen]
pub fn take_panic_message() -> String {
    LAST_PANIC.lock().map(|mut m| std::mem::take(&mut *m)).unwrap_or_default()
}

/// Test hook: panics, so tests can check that a crash becomes a typed error and a restart.
#[wasm_bindgen]
pub fn debug_panic() {
    panic!("debug_panic: deliberate panic requested by the host");
}

fn js_error(e: HostError) -> JsValue {
    let err = JsError::new(&e.message);
    let _ = Reflect::set(&err, &JsValue::from_str("code"), &JsValue::from_str(&e.code));
    if let Some(p) = &e.param {
        let _ = Reflect::set(&err, &JsValue::from_str("param"), &JsValue::from_str(p));
    }
    err.into()
}

/// A `GenerateRequest` from the worker's JSON (nested as deep as a request may be,
/// `protocol::deep_json`).
fn generate_request(request_json: &str) -> Result<GenerateRequest, JsValue> {
    crate::protocol::deep_json::from_slice(request_json.as_bytes()).map_err(|e| js_error(HostError::new("INVALID_REQUEST", format!("bad request: {e}"))))
}

/// Every value crosses the boundary as JSON text, parsed by `JSON.parse` in the worker (pkg/src
/// runtime.js `json`) — not as JS values built by serde-wasm-bindgen, which the product card
/// names. Measured with `node bench/wasm_boundary.mjs` (Node 20, SmolLM2-135M, 2 busy shared
/// cores, four runs, medians of 41 batches, JS side included):
/// - size: +13.1 KB of wasm (+0.33 %) for a decode step's event alone, +34.5 KB (+0.88 %) with
///   `usage` too, on a 3.92 MB module (serde_json stays either way: the protocol and the server
///   parse JSON text);
/// - a plain step event: 0.7–1.5 µs against 2.2–4.2 µs, i.e. ~2 µs per token beside a decode
///   step measured at 121 ms in the same run (~0.002 %); with logprobs (5 top) no faster
///   (17–23 µs against 16–22 µs), and
///   the f32 log probabilities arrive widened (-0.10536050796508789) instead of the shortest
///   decimal JSON and `edgellm serve` give (-0.10536051), so local and served numbers would differ;
/// - `usage` (a 3.5 kB `GenerateResult` in, usage out): 3–4× slower (586–633 µs against 124–192 µs).
/// Nowhere a clear win, bigger everywhere: JSON text stays (with `float_roundtrip`, numbers come
/// back bit-exact).
fn json<T: serde::Serialize>(v: &T) -> Result<String, JsValue> {
    serde_json::to_string(v).map_err(|e| js_error(HostError::new("INTERNAL", e.to_string())))
}

/// `performance.now()` of the current global (window or worker); 0 where there is none.
pub fn now_ms() -> f64 {
    let perf = Reflect::get(&js_sys::global(), &JsValue::from_str("performance")).unwrap_or(JsValue::UNDEFINED);
    if perf.is_undefined() {
        return 0.0;
    }
    let f = Reflect::get(&perf, &JsValue::from_str("now")).ok().and_then(|f| f.dyn_into::<js_sys::Function>().ok());
    f.and_then(|f| f.call0(&perf).ok()).and_then(|v| v.as_f64()).unwrap_or(0.0)
}

/// Checks an OpenAI request body (`kind`: "chat" or "completion"; JSON text) with the protocol's
/// rules (`crate::protocol`, the same as `edgellm serve`) and returns
/// `{request: GenerateRequest, stream, include_usage}` as JSON; a broken rule throws an `Error`
/// with `code` "INVALID_REQUEST", `rule` (e.g. "unsupported_parameter") and `param`.
#[wasm_bindgen]
pub fn parse_openai_request(kind: &str, params_json: &str) -> Result<String, JsValue> {
    use crate::protocol::{parse_request_json, Kind, ProtocolError, RequestLimits};
    let k = Kind::from_name(kind).ok_or_else(|| js_error(HostError::new("INVALID_REQUEST", format!("unknown request kind {kind:?}"))))?;
    let r = parse_request_json(k, params_json.as_bytes(), RequestLimits::default()).map_err(|e: ProtocolError| {
        let err = JsError::new(&e.message);
        let _ = Reflect::set(&err, &JsValue::from_str("code"), &JsValue::from_str("INVALID_REQUEST"));
        let _ = Reflect::set(&err, &JsValue::from_str("rule"), &JsValue::from_str(e.code));
        let _ = Reflect::set(&err, &JsValue::from_str("param"), &JsValue::from_str(&e.param));
        JsValue::from(err)
    })?;
    json(&serde_json::json!({ "request": r.gen, "stream": r.stream, "include_usage": r.include_usage }))
}

/// A streamed OpenAI response's chunks (`crate::protocol::ChunkStream`, the same code as
/// `edgellm serve`'s): the worker hands it each decode step's event and posts the chunks.
#[wasm_bindgen]
pub struct OpenAiStream {
    inner: crate::protocol::ChunkStream,
}

#[wasm_bindgen]
impl OpenAiStream {
    /// `envelope_json`: `{kind: 'chat'|'completion', id, created, model, prompt_chars}`.
    #[wasm_bindgen(constructor)]
    pub fn new(envelope_json: &str, include_usage: bool) -> Result<OpenAiStream, JsValue> {
        Ok(OpenAiStream { inner: crate::protocol::ChunkStream::new(envelope(envelope_json)?, include_usage) })
    }

    /// The chunks (a JSON array, often empty) of a `StepEvent` (JSON: choice, text, logprobs,
    /// tool_calls, choice_finish_reason).
    pub fn step(&mut self, event_json: &str) -> Result<String, JsValue> {
        let s: crate::protocol::StepChunk = serde_json::from_str(event_json).map_err(|e| js_error(HostError::new("INTERNAL", format!("bad step event: {e}"))))?;
        json(&self.inner.step(&s))
    }

    /// The last chunks (JSON array): with include_usage the usage chunk.
    pub fn end(&self, usage_json: &str) -> Result<String, JsValue> {
        json(&self.inner.end(parse_json(usage_json)?))
    }
}

fn parse_json(s: &str) -> Result<serde_json::Value, JsValue> {
    serde_json::from_str(s).map_err(|e| js_error(HostError::new("INTERNAL", format!("bad JSON: {e}"))))
}

fn envelope(s: &str) -> Result<crate::protocol::Envelope, JsValue> {
    serde_json::from_str(s).map_err(|e| js_error(HostError::new("INVALID_REQUEST", format!("bad envelope: {e}"))))
}

/// OpenAI's `usage` of a `GenerateResult` (JSON) — `crate::protocol::usage`, as `edgellm serve`'s.
#[wasm_bindgen]
pub fn openai_usage(result_json: &str) -> Result<String, JsValue> {
    json(&crate::protocol::usage(&parse_json(result_json)?))
}

/// The whole OpenAI response of a `GenerateResult` (JSON) with this `usage` (JSON).
#[wasm_bindgen]
pub fn openai_completion(envelope_json: &str, result_json: &str, usage_json: &str) -> Result<String, JsValue> {
    json(&envelope(envelope_json)?.completion(&parse_json(result_json)?, parse_json(usage_json)?))
}

/// One engine: at most one model, one load or generation in progress.
#[wasm_bindgen]
pub struct WasmEngine {
    host: Host,
}

impl Default for WasmEngine {
    fn default() -> Self {
        Self::new()
    }
}

#[wasm_bindgen]
impl WasmEngine {
    #[wasm_bindgen(constructor)]
    pub fn new() -> WasmEngine {
        let host = Host::with_clock(now_ms); // records wasm memory at start (module_bytes)
        // Room for chunk copies and the header skimmer, so that an estimate (and a load the
        // ledger refuses) does not grow wasm memory.
        crate::memory::probe::reserve(crate::memory::probe::IO_RESERVE);
        WasmEngine { host }
    }

    /// Starts loading a file of `total_len` bytes (`budget_bytes`: optional weights budget).
    pub fn load_begin(&mut self, total_len: f64, budget_bytes: Option<f64>) {
        self.host.load_begin(total_len as u64, budget_bytes.map(|b| b as u64));
    }

    /// `load_begin` for the file the last estimate admitted (the worker skims the header first):
    /// the load takes that admission over instead of estimating the header again.
    pub fn load_begin_admitted(&mut self, total_len: f64, budget_bytes: Option<f64>) {
        self.host.load_begin_admitted(total_len as u64, budget_bytes.map(|b| b as u64));
    }

    /// Feeds the next chunk; returns `LoadStatus` as JSON.
    pub fn load_push(&mut self, chunk: &[u8]) -> Result<String, JsValue> {
        let s = self.host.load_push(chunk).map_err(js_error)?;
        json(&s)
    }

    /// Completes the load; returns `ModelInfo` as JSON.
    pub fn load_finish(&mut self) -> Result<String, JsValue> {
        let info = self.host.load_finish().map_err(js_error)?;
        json(info)
    }

    pub fn load_cancel(&mut self) {
        self.host.load_cancel();
    }

    pub fn unload(&mut self) {
        self.host.unload();
    }

    /// `ModelInfo` of the loaded model as JSON, or `null`.
    pub fn model_info(&self) -> Result<String, JsValue> {
        json(&self.host.model_info())
    }

    /// Starts a generation from a `GenerateRequest` (JSON); returns `GenerateStarted` JSON.
    pub fn generate_begin(&mut self, request_json: &str) -> Result<String, JsValue> {
        let req = generate_request(request_json)?;
        let s = self.host.generate_begin(&req, now_ms()).map_err(js_error)?;
        json(&s)
    }

    /// The prompt tokens of a `GenerateRequest` (JSON) as a generation would run them, and
    /// whether it fits; returns `TokenCount` JSON. No model call.
    pub fn count_tokens(&self, request_json: &str) -> Result<String, JsValue> {
        let req = generate_request(request_json)?;
        let c = self.host.count_tokens(&req).map_err(js_error)?;
        json(&c)
    }

    /// Runs the next prefill chunk; returns `PrefillStatus` JSON.
    pub fn prefill_chunk(&mut self) -> Result<String, JsValue> {
        let s = self.host.prefill_chunk().map_err(js_error)?;
        json(&s)
    }

    /// One decode step; returns `StepEvent` JSON.
    pub fn decode_step(&mut self) -> Result<String, JsValue> {
        let s = self.host.decode_step().map_err(js_error)?;
        json(&s)
    }

    /// Ends the generation; returns `GenerateResult` JSON.
    pub fn generate_end(&mut self) -> Result<String, JsValue> {
        let s = self.host.generate_end(now_ms()).map_err(js_error)?;
        json(&s)
    }

    pub fn generate_cancel(&mut self) {
        self.host.generate_cancel();
    }

    /// Sets the power model of the energy estimate (`PowerModel` JSON, e.g.
    /// `{"watts_per_busy_core": 1.33}`; `{}` or `null`: the default); `INVALID_REQUEST` when bad.
    pub fn set_power_model(&mut self, model_json: &str) -> Result<(), JsValue> {
        let m: Option<crate::work::PowerModel> = serde_json::from_str(model_json)
            .map_err(|e| js_error(HostError::new("INVALID_REQUEST", format!("bad energy options: {e}"))))?;
        self.host.set_power_model(m.unwrap_or_default()).map_err(js_error)
    }

    /// Runs the model on `n` threads (the caller + `n - 1` started pool workers); returns the
    /// count. `THREADS_UNSUPPORTED` in the single-thread builds for `n > 1`.
    pub fn set_threads(&mut self, n: usize) -> Result<usize, JsValue> {
        self.host.set_threads(n).map_err(js_error)
    }

    /// Threads the model runs on.
    pub fn threads(&self) -> usize {
        self.host.threads()
    }

    /// Sets the KV cache options (`KvOptions` JSON, or `null` for the plain context) for the
    /// loaded model's session and later loads; returns the updated `ModelInfo` JSON or `null`.
    pub fn set_kv_options(&mut self, options_json: &str) -> Result<String, JsValue> {
        let opts: Option<crate::kv::KvOptions> = serde_json::from_str(options_json)
            .map_err(|e| js_error(HostError::new("BAD_KV_CONFIG", format!("bad kv options: {e}"))))?;
        let info = self.host.set_kv_options(opts).map_err(js_error)?;
        json(&info)
    }

    /// Checks KV options as `set_kv_options` would before touching anything (no model needed):
    /// a load validates them before it unloads the current model.
    pub fn check_kv_options(&self, options_json: &str) -> Result<(), JsValue> {
        let opts: Option<crate::kv::KvOptions> = serde_json::from_str(options_json)
            .map_err(|e| js_error(HostError::new("BAD_KV_CONFIG", format!("bad kv options: {e}"))))?;
        opts.map_or(Ok(()), |o| o.check()).map_err(|e| js_error(HostError::new(e.code(), e.to_string())))
    }

    /// The KV cache's occupancy now (`KvStats` JSON, or `null` without a model).
    pub fn kv_stats(&self) -> Result<String, JsValue> {
        json(&self.host.kv_stats())
    }

    // ── saved conversations (see `crate::snapshot`) ───────────────────────────────────────

    /// The current conversation as snapshot bytes (a `Uint8Array`).
    pub fn session_save(&self) -> Result<Vec<u8>, JsValue> {
        self.host.session_save().map_err(js_error)
    }

    /// Tokens of the current conversation.
    pub fn session_tokens(&self) -> usize {
        self.host.session_tokens()
    }

    /// Restores snapshot bytes; returns the conversation's token count.
    pub fn session_restore(&mut self, bytes: &[u8]) -> Result<usize, JsValue> {
        self.host.session_restore(bytes).map_err(js_error)
    }

    // ── memory ledger (see `crate::memory`, `host/memory.rs`) ─────────────────────────────

    /// Sets the memory budget and pressure thresholds (`MemoryOptions` JSON:
    /// `{"budget_bytes": n|null, "elevated": 0.75, "critical": 0.9}`).
    pub fn set_memory_options(&mut self, options_json: &str) -> Result<(), JsValue> {
        let o: crate::memory::MemoryOptions = serde_json::from_str(options_json)
            .map_err(|e| js_error(HostError::new("BAD_MEMORY_OPTIONS", format!("bad memory options: {e}"))))?;
        self.host.set_memory_options(o).map_err(js_error)
    }

    /// The ledger now (`MemorySnapshot` JSON).
    pub fn memory_snapshot(&mut self) -> Result<String, JsValue> {
        let s = self.host.memory_snapshot();
        json(&s)
    }

    /// `MemorySnapshot` JSON if the pressure level changed since the last poll, else "".
    pub fn memory_poll(&mut self) -> Result<String, JsValue> {
        match self.host.memory_poll() {
            Some(s) => json(&s),
            None => Ok(String::new()),
        }
    }

    /// Starts reading a model header for an estimate (nothing loaded is touched).
    pub fn estimate_begin(&mut self) {
        self.host.estimate_begin();
    }

    /// Feeds the next bytes of the file; returns `SkimProgress` JSON.
    pub fn estimate_push(&mut self, chunk: &[u8]) -> Result<String, JsValue> {
        let s = self.host.estimate_push(chunk).map_err(js_error)?;
        json(&s)
    }

    /// Ends the estimate (`EstimateRequest` JSON); returns `EstimateReport` JSON.
    pub fn estimate_finish(&mut self, file_len: Option<f64>, request_json: &str) -> Result<String, JsValue> {
        let req: crate::host::EstimateRequest = serde_json::from_str(request_json)
            .map_err(|e| js_error(HostError::new("INVALID_REQUEST", format!("bad estimate options: {e}"))))?;
        let r = self.host.estimate_finish(file_len.map(|l| l as u64), &req).map_err(js_error)?;
        json(&r)
    }

    /// The estimate of the last load or refused load (`Estimate` JSON or `null`).
    pub fn last_estimate(&self) -> Result<String, JsValue> {
        json(&self.host.last_estimate())
    }
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::*;

    /// The tier names the build's target features (build.sh runs the lib tests for both builds).
    #[wasm_bindgen_test]
    fn simd_tier_matches_the_build() {
        let want = if cfg!(target_feature = "relaxed-simd") { "relaxed-simd" } else { "simd128" };
        assert_eq!(super::simd_tier(), want);
    }

    /// In the relaxed build this executes `i32x4.relaxed_dot_i8x16_i7x16_add_s`: the module only
    /// compiles where the host runs relaxed SIMD, and the exact standard result (Chromium; Node
    /// 20's flagged draft fails it) proves the tests ran on a host the kernels are exact on.
    #[cfg(target_feature = "relaxed-simd")]
    #[wasm_bindgen_test]
    fn relaxed_dot_executes() {
        use core::arch::wasm32::*;
        use std::hint::black_box;
        // pkg/src/tier.js's probe vector: Node 20's pre-standard draft gets it wrong.
        let a = black_box(i8x16(-1, -128, 127, 5, 100, -100, 3, -3, 0, 1, 2, 3, -50, 60, -70, 80));
        let b = black_box(i8x16(1, 2, 3, 4, 127, 127, 0, 1, 5, 6, 7, 8, 9, 10, 11, 12));
        let acc = black_box(i32x4(1000, 0, -7, 1 << 20));
        let r = i32x4_relaxed_dot_i8x16_i7x16_add(a, b, acc);
        let lanes = [
            i32x4_extract_lane::<0>(r),
            i32x4_extract_lane::<1>(r),
            i32x4_extract_lane::<2>(r),
            i32x4_extract_lane::<3>(r),
        ];
        assert_eq!(lanes, [1000 + 144, -3, -7 + 44, (1 << 20) + 340]);
    }
}
