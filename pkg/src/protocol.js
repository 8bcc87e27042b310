// The message protocol between the client (main thread / Node main) and the engine worker.
// THIS FILE IS THE ONE PLACE IT IS DEFINED: client.js and runtime.js import these constants, and
// the shapes below are the contract. Bump PROTOCOL_VERSION on any incompatible change.
//
// ── Rules ──────────────────────────────────────────────────────────────────────────────────────
// 1. Every client → worker message that has an `id` gets EXACTLY ONE terminal reply with that
//    id: `result` or `error`. Before it, an operation may send events with the same id
//    (`progress` for load; `started` then `token`* for generate).
// 2. Operations run one at a time, in arrival order (the worker keeps a queue). `abort` and
//    `status` are handled immediately, even while an operation runs: the worker yields to its
//    event loop between every network/file chunk, prefill chunk and decode step.
// 3. `abort {target}` makes the target operation (running or queued) end with
//    `error {code: 'ABORTED'}`. The client does not wait for it: it settles the caller's promise
//    at once and ignores later messages for that id.
// 4. `error` with `fatal: true` means the wasm instance trapped (Rust panic, out of memory) and
//    its state cannot be trusted: the client terminates this worker and starts a fresh one.
//    A worker that dies without a word (`error`/`exit` event) is treated the same way.
// 5. Large data is never copied through messages: a Blob/File is posted as is (structured clone
//    shares its backing store), URLs and paths are read by the worker itself.
//
// ── Client → worker ────────────────────────────────────────────────────────────────────────────
// {type:'init', id, wasmUrl?: string | {relaxed?, simd128?: string, embedded?: string[]},
//  simd?: 'auto'|'relaxed'|'simd128', cache: CacheConfig, memory?: MemoryOptions,
//  energy?: {watts_per_busy_core: number}}
//     → result {version: string, protocol: number, cache: 'opfs'|'fs'|'none', simd: boolean,
//               simd_tier: 'relaxed-simd'|'simd128'|'scalar'|null}
//     simd picks the wasm build (tier.js; default 'auto': relaxed SIMD where WebAssembly.validate
//     accepts it, else SIMD128); a string wasmUrl overrides it, an object locates each tier
//     (`embedded`: the tiers whose location is the package's guess, which may fall back to the
//     copy embedded in the package: tier.js EMBEDDED_WASM, browser worker ↔ worker-url.js only).
//     'relaxed' where unsupported → error ENGINE_INIT_FAILED, detail RELAXED_SIMD_UNSUPPORTED.
//     simd_tier: what the loaded build was compiled for (the wasm's simd_tier()). simd: compiled
//     with SIMD128 at all.
// {type:'load', id, source: Source, cache: boolean, sha256?: string, budget?: number,
//  kv?: KvOptions|null, progressIntervalMs: number}
//     → progress* → result ModelInfo      (budget: most bytes of weights; checked from the header;
//                                          kv: the session's KV cache, null = plain context)
// {type:'generate', id, request: GenerateRequest, sustained?: {window_ms, throttle_fraction},
//  openai: {envelope: {kind, id, created, model, prompt_chars}, stream: boolean, include_usage: boolean}}
//     → started → token* (sustained*) → result GenerateResult
//     OpenAI's objects are built by the core (src/protocol/response.rs, as edgellm serve builds
//     them): with stream, `token.chunks` (a step's text, logprobs and delta.tool_calls; a chat
//     choice's role with its first, a choice's finish chunk) and
//     `result.openai.chunks` (with include_usage, the usage chunk); without,
//     `result.openai.response`. With `n > 1` the choices run one after the other (`token.choice`). Their usage is the
//     core's plus kv, memory and compute.sustained (the client adds compute.pressure).
//     GenerateResult.compute: CPU time per phase (the busy wall time inside the wasm calls) and
//     the energy estimate under init's `energy` (src/work.rs); .sustained: sustained.js summary.
// {type:'parse', id, kind: 'chat'|'completion', params: string}   (answered at once, not queued)
//     → result {request: GenerateRequest, stream: boolean, include_usage: boolean}
//     The OpenAI parameters (JSON text) checked by the core's rules (src/protocol, the same as
//     edgellm serve); a broken rule → error INVALID_REQUEST, detail = the rule's code
//     ('unsupported_parameter', 'unknown_parameter', 'invalid_value', ...), param = its name.
// {type:'count', id, request: GenerateRequest}
//     → result {prompt_tokens: number, max_context: number, fits: boolean, code: string|null}
//     The prompt's tokens as generate would run them (the core's count_tokens: chat template and
//     special-token rules applied, no model call); fits = false when generate would refuse it,
//     code = its error then ('PROMPT_TOO_LONG' | 'PROMPT_OVER_KV_BUDGET'). Used by the router and
//     engine.countTokens; a request without a prompt is INVALID_REQUEST.
// {type:'unload', id}                    → result null
// {type:'status', id}                    → result {loaded: boolean, model: ModelInfo|null, busy: boolean, queued: number, wasm_memory_bytes: number}
// {type:'cache', id, action: 'list'|'delete'|'clear', url?: string}  → result (list: CacheEntry[]; else null)
// {type:'estimate', id, source: Source, options: EstimateRequest}
//     → result Estimate                   Reads only the model's header (Range requests / Blob.slice)
//                                         and estimates each memory term; loads nothing.
// {type:'memory', id, action: 'get'|'set', options?: MemoryOptions}
//     → result MemorySnapshot             ('set': budget and thresholds for later checks)
// {type:'session', id, action: 'save'|'restore'|'list'|'delete', key?: string}
//     → result save: {key, tokens, bytes}; restore: {key, tokens}; delete: {key, deleted};
//       list: {key, tokens, bytes, model_sha256, saved_at}[]. The current conversation's KV
//       cache (sessions.js); restore errors SESSION_NOT_FOUND / SESSION_MISMATCH / SESSION_CORRUPT.
// {type:'abort', target}                 (no reply of its own)
// {type:'debug', id, action: 'panic'}    → error {fatal: true} (test hook: a deliberate Rust panic)
// {type:'debug', id, action: 'decode-delay', ms, after_tokens}  → result null (test hook: wait
//     ms after each decode step past after_tokens in later generations; ms 0 = off)
//
// ── Worker → client ────────────────────────────────────────────────────────────────────────────
// {type:'progress', id, phase: 'download'|'cache'|'file', loaded: number, total: number|null}
//     `loaded` never decreases within a phase; the last event of a phase has loaded === total.
//     A corrupt cache entry ends phase 'cache' early and the load continues with 'download'.
// {type:'started', id, prompt_tokens: number, cached_tokens: number}  (cached: already in the KV cache)
// {type:'token', id, text: string, token: number|null, choice: number, chunks?: object[]}
//     `text` is the decoded delta (may be '' while a UTF-8 sequence or a possible stop string is
//     held back; with tools, only the content besides the calls); `token` is null on a last
//     event that only flushes held-back text. `chunks` (streamed requests): the OpenAI chunks of
//     this step, when it has something to send (text, logprobs, delta.tool_calls, a finish).
// {type:'result', id, value}
// {type:'error', id, error: ErrorPayload, fatal?: true}
// {type:'log', level: 'debug'|'info'|'warn'|'error', message: string}
// {type:'sustained', id, sustained: SustainedSummary}
//     Sent when a decode-speed window closes (sustained.js), during a generation.
// {type:'memory', snapshot: MemorySnapshot}
//     The memory ledger: sent when the pressure level changes (reason 'level', checked after
//     every load chunk, prefill chunk and decode step, and before any other memory event, so
//     that every change arrives as a 'level' event), at the end of every load and generation
//     (reason 'load' / 'request', also on failure), and after a 'memory' request.
//
// Loading: before the loader allocates anything, the worker skims the header in 64 KiB pieces
// (keeping the chunks in JS meanwhile) and the core estimates every term; a model whose
// estimated peak exceeds the budget fails with OVER_MEMORY_BUDGET (error.terms, error.estimate).
//
// ── Shapes ─────────────────────────────────────────────────────────────────────────────────────
/**
 * @typedef {{kind:'url', url:string, headers?:Record<string,string>}
 *         | {kind:'blob', blob:Blob, name?:string}
 *         | {kind:'path', path:string}} Source            'path' only under Node
 * @typedef {{enabled:boolean, dir?:string}} CacheConfig  dir: Node's cache directory
 * @typedef {{code:string, message:string, detail?:string, status?:number}} ErrorPayload
 * @typedef {{
 *   name:string, architecture:string, file_size:number, sha256:string, tensor_count:number,
 *   context_length:number|null, vocab_size:number|null, quantization:string|null,
 *   has_chat_template:boolean, source:'network'|'cache'|'file', load_ms:number,
 *   weights_bytes:number, n_params:number, max_context:number, kv?: KvStats
 * }} ModelInfo
 * @typedef {{tokens?:number, bytes?:number, dtype?:'f16'|'q8', sinks?:number,
 *   policy?:'window-sinks'|'error'}} KvOptions
 * @typedef {{tokens_held:number, evicted:number, bytes:number, budget_bytes:number,
 *   allocated_bytes:number, budget_tokens:number, n_past:number, sinks:number, dtype:string,
 *   policy:string, rebases:number, by_kind:{kind:'global'|'local', layers:number,
 *   window:number|null, tokens_held:number, capacity_tokens:number, bytes:number,
 *   budget_bytes:number, bytes_per_token:number}[]}} KvStats
 * @typedef {{
 *   kind:'chat'|'completion', messages?:{role:string, content:string}[], prompt?:string,
 *   max_tokens?:number, temperature?:number, top_p?:number, top_k?:number, min_p?:number,
 *   repetition_penalty?:number, presence_penalty?:number, frequency_penalty?:number,
 *   seed?:number, stop?:string[], logprobs?:number, response_format?:object, tools?:object
 * }} GenerateRequest            (what src/protocol's parse_request builds: pass it on, never build it by hand)
 * @typedef {{
 *   text:string, finish_reason:'stop'|'length', prompt_tokens:number, cached_tokens:number,
 *   completion_tokens:number,
 *   ttft_ms:number, tpot_ms:number, prefill_tokens_per_s:number, decode_tokens_per_s:number,
 *   decode_weight_bytes_per_token:number, decode_kv_bytes_last_token:number,
 *   decode_bytes_per_token:number, decode_gb_s:number,
 *   total_ms:number, ids:number[], kv?: KvStats
 * }} GenerateResult
 * @typedef {{url:string, size:number, sha256:string, stored_at:string, etag:string|null}} CacheEntry
 * @typedef {{budget_bytes?:number|null, elevated?:number, critical?:number}} MemoryOptions
 * @typedef {{kv?:KvOptions, ctx?:number, batch?:number, sampling?:boolean, load_chunk?:number,
 *   budget_bytes?:number}} EstimateRequest
 * @typedef {{estimated:number|null, measured:number|null}} Figures
 * @typedef {{
 *   level:'ok'|'elevated'|'critical', budget_bytes:number|null, wasm_memory_bytes:number,
 *   high_water_bytes:number, terms:{weights:Figures, kv:Figures, activations:Figures, runtime:Figures},
 *   total:Figures, load_peak:Figures, usage:number|null, thresholds:{elevated:number, critical:number},
 *   phase:'empty'|'loading'|'ready'|'generating', heap_live_bytes:number|null,
 *   module_bytes:number|null, kv_tokens:number|null, kv_dtype:'f16'|'q8'|null,
 *   js_buffers_bytes:number, js_buffers_peak_bytes:number, reason:string
 * }} MemorySnapshot
 * @typedef {{fits:boolean, budget_bytes:number|null, terms:{weights:number, kv:number,
 *   activations:number, runtime:number}, total:number, load_peak:number, peak:number,
 *   kv:{tokens:number, dtype:'f16'|'q8', bytes_per_token:number}, batch:number,
 *   parts:{activations:object, runtime:object}, model:object, bytes_read?:number}} Estimate
 */

export const PROTOCOL_VERSION = 1;

/** Client → worker message types. */
export const Req = Object.freeze({
  INIT: 'init',
  LOAD: 'load',
  GENERATE: 'generate',
  COUNT: 'count',
  UNLOAD: 'unload',
  STATUS: 'status',
  CACHE: 'cache',
  ABORT: 'abort',
  DEBUG: 'debug',
  ESTIMATE: 'estimate',
  MEMORY: 'memory',
  SESSION: 'session',
  PARSE: 'parse',
});

/** Worker → client message types. */
export const Ev = Object.freeze({
  PROGRESS: 'progress',
  STARTED: 'started',
  TOKEN: 'token',
  RESULT: 'result',
  ERROR: 'error',
  LOG: 'log',
  MEMORY: 'memory',
  SUSTAINED: 'sustained',
});

/** Operations that are answered immediately instead of being queued behind the running one. */
export const IMMEDIATE = new Set([Req.ABORT, Req.STATUS, Req.PARSE]);
