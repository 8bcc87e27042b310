// Type declarations for edgellm (hand-written; they describe src/index.js and src/node.js).

// ── Errors ─────────────────────────────────────────────────────────────────────────────────────

export type ErrorCodeName =
  | 'GGUF_INVALID'
  | 'GGUF_TRUNCATED'
  | 'UNSUPPORTED_MODEL'
  | 'OVER_MEMORY_BUDGET'
  | 'PROMPT_TOO_LONG'
  | 'NETWORK'
  | 'CHECKSUM_MISMATCH'
  | 'ABORTED'
  | 'ENGINE_CRASHED'
  | 'ENGINE_INIT_FAILED'
  | 'MODEL_NOT_LOADED'
  | 'INVALID_REQUEST'
  | 'TERMINATED'
  | 'INTERNAL'
  | 'PROMPT_OVER_KV_BUDGET'
  | 'PRIVATE_REMOTE_FORBIDDEN'
  | 'REMOTE_UNAVAILABLE'
  | 'REMOTE_UNAUTHORIZED'
  | 'REMOTE_ERROR'
  | 'REMOTE_INTERRUPTED'
  | 'NO_ROUTE'
  | 'SESSION_NOT_FOUND'
  | 'SESSION_MISMATCH'
  | 'SESSION_CORRUPT';

export declare const ErrorCode: { readonly [K in ErrorCodeName]: K };

/** The only kind of error edgellm throws or rejects with. */
export declare class EdgeLLMError extends Error {
  constructor(
    code: ErrorCodeName,
    message: string,
    extra?: { detail?: string; status?: number; cause?: unknown; terms?: MemoryTerms; budget_bytes?: number; estimate?: MemoryEstimate; kept_model?: ModelInfo },
  );
  readonly name: 'EdgeLLMError';
  /** Stable umbrella code: branch on this. */
  readonly code: ErrorCodeName;
  /** The precise code of the failing layer, e.g. 'GGUF_BAD_MAGIC', 'HTTP_STATUS', 'CONNECTION_LOST'. */
  readonly detail?: string;
  /** HTTP status, for NETWORK and REMOTE_* errors caused by one. */
  readonly status?: number;
  /** INVALID_REQUEST for a request parameter: its name (e.g. 'tools', 'messages[1].tool_calls'). */
  readonly param?: string;
  /** For errors of routed requests: the decision (what was ruled out and why). */
  route?: RouteInfo;
  /** OVER_MEMORY_BUDGET from a load: the estimate per term, and the budget it exceeded. */
  readonly terms?: MemoryTerms;
  readonly budget_bytes?: number;
  readonly estimate?: MemoryEstimate;
  /** A load refused before it replaced the loaded model (bad KV options, the source
   * unreachable, not a GGUF, over the memory budget, aborted while its header was read): the
   * model still loaded, as `engine.model` says again. */
  readonly kept_model?: ModelInfo;
  toJSON(): { code: ErrorCodeName; message: string; detail?: string; status?: number };
}

// ── Engine ─────────────────────────────────────────────────────────────────────────────────────

/** What engine.countTokens answers. */
export interface TokenCount {
  prompt_tokens: number;
  /** The loaded session's context (or KV budget) in tokens. */
  max_context: number;
  /** Whether a generation of this request could start. */
  fits: boolean;
  /** When it could not: the error generation would give. */
  code: 'PROMPT_TOO_LONG' | 'PROMPT_OVER_KV_BUDGET' | null;
}

export interface EngineOptions {
  /** Cache models loaded from URLs (OPFS in browsers, `cacheDir` under Node). Default true. */
  cache?: boolean;
  /** Node only: the cache directory (default $XDG_CACHE_HOME/edgellm or ~/.cache/edgellm). */
  cacheDir?: string;
  /**
   * Where the wasm is, when the package's own files are not to be used (browser: relative to the
   * page; Node: a path or file URL). A URL names the one build to run (wins over `simd`);
   * `{ relaxed, simd128, threads, threadsRelaxed }` names each build (the tier is still chosen by
   * `simd`, threaded or not by `threads`), the package's files serving the ones it leaves out. A location given here never falls back to the copy
   * embedded in the package.
   */
  wasmUrl?: string | URL | { relaxed?: string | URL; simd128?: string | URL; threads?: string | URL; threadsRelaxed?: string | URL };
  /**
   * Which wasm build runs. 'auto' (default): the relaxed-SIMD build where the JS engine validates
   * WebAssembly relaxed SIMD (Chromium 114+; Node 20 only with --experimental-wasm-relaxed-simd),
   * else the SIMD128 build. 'simd128': always the SIMD128 build. 'relaxed': the relaxed-SIMD build
   * or an ENGINE_INIT_FAILED error with detail 'RELAXED_SIMD_UNSUPPORTED'.
   * `engine.info.simd_tier` reports the build that runs.
   */
  simd?: SimdOption;
  /**
   * Threads the model runs on. 'auto' (default): every core (`navigator.hardwareConcurrency`)
   * where the page is cross-origin isolated (COOP `same-origin` + COEP `require-corp`) and the
   * threaded builds (`wasm/threads/`, or `wasmUrl.threads` / `wasmUrl.threadsRelaxed`; the tier
   * chosen by `simd` as for one thread) are served, else 1. A count > 1 where
   * that is missing runs 1 thread with a warning log. Any count gives the same tokens.
   * `engine.info.threads` reports the count that runs.
   */
  threads?: 'auto' | number;
  /**
   * Where the worker script is. Browser: a same-origin module worker (the package's
   * `wasm/edgellm-worker.js` copied as is, or a module that imports 'edgellm/worker'), for a
   * Content-Security-Policy without `blob:` in worker-src; default: the bundled worker from a
   * Blob URL. Node: a file URL or path.
   */
  workerUrl?: string | URL;
  /** Milliseconds to wait for the worker and wasm to start (default 60000). */
  initTimeoutMs?: number;
  /**
   * Milliseconds an aborted operation's worker has to stop (default 5000); past it the worker
   * is taken as stuck, terminated and restarted (the request has already rejected ABORTED;
   * requests queued behind it run on the new worker, after the model is reloaded).
   */
  abortGraceMs?: number;
  /**
   * The largest request a create() or countTokens() call may make, in bytes of its JSON
   * (default 1 MiB, the same as `edgellm serve --max-body-bytes`). Larger is INVALID_REQUEST
   * (`detail: 'request_too_large'`) before the text reaches the worker: a prompt is tokenized in
   * wasm memory, which never shrinks.
   */
  maxRequestBytes?: number;
  /** Older name of `memory.budget_bytes`. */
  memoryBudget?: number;
  /**
   * The device power model of `usage.compute.energy_j` (an estimate): every busy core draws
   * `watts_per_busy_core` while it works. Default 1.33 W: a phone's big core at full clock
   * (AnandTech's Kirin 960 measurement: 4 × Cortex-A73 at 2.36 GHz = 5.31 W of active system
   * power). A laptop or desktop core draws several times more: set your device's figure.
   * Outside (0, 1000]: INVALID_REQUEST.
   */
  energy?: EnergyOptions;
  /**
   * The decode-speed windows of `usage.compute.sustained` and the 'pressure' event: window
   * length (default 10000 ms, [100, 600000]) and the `throttled` rule (latest window below
   * `throttle_fraction` × the first; default 0.75, (0, 1]).
   */
  sustained?: { window_ms?: number; throttle_fraction?: number };
  /**
   * The memory ledger: the budget (default: from navigator.deviceMemory, see
   * `defaultMemoryBudget`) and the pressure thresholds (fractions of it; default 0.75 and 0.9).
   * A model whose estimated peak exceeds the budget is refused before it is downloaded; a step
   * that would grow memory past it fails with OVER_MEMORY_BUDGET.
   */
  memory?: MemoryOptions;
  /** Minimum interval between load progress events (default 50 ms). */
  progressIntervalMs?: number;
  /** Receives the worker's log lines (default: warnings go to console.warn). */
  onLog?: (level: 'debug' | 'info' | 'warn' | 'error', message: string) => void;
  /** Called when the worker crashed and was discarded (a fresh one starts on the next call). */
  onCrash?: (error: EdgeLLMError) => void;
  /** Route requests between this engine and an OpenAI-compatible server (see README "Routing"). */
  route?: RouteOptions;
  /** The session's KV cache for every load (a load's own `kv` option wins). Default: the plain context. */
  kv?: KvOptions | null;
}

/**
 * The session's KV cache. Without it the cache is the model's context (`max_context` tokens,
 * PROMPT_TOO_LONG beyond). With it: a budget in tokens (or bytes), f16 or int8 ('q8': one f16
 * scale per 32 values) storage, and what happens when full: 'window-sinks' (default) keeps the
 * first `sinks` tokens (default 4) and the most recent ones, evicting the rest, so a chat never
 * runs out of room nor grows memory; 'error' refuses a prompt over the budget
 * (PROMPT_OVER_KV_BUDGET) and ends a generation with finish_reason 'length' when full.
 */
export interface KvOptions {
  /** Tokens held by the global-attention layers (sliding-window layers hold their window). */
  tokens?: number;
  /** Alternatively, bytes of K/V storage at full occupancy. */
  bytes?: number;
  dtype?: 'f16' | 'q8';
  sinks?: number;
  policy?: 'window-sinks' | 'error';
}

/** KV cache occupancy of one layer kind. */
export interface KvKindStats {
  kind: 'global' | 'local';
  layers: number;
  window: number | null;
  tokens_held: number;
  capacity_tokens: number;
  bytes: number;
  budget_bytes: number;
  /** Bytes one more held token costs in these layers. */
  bytes_per_token: number;
}

/** KV cache occupancy. */
export interface KvStats {
  /** Tokens the model attends to (sinks included). */
  tokens_held: number;
  /** Tokens evicted so far. */
  evicted: number;
  /** Bytes of K/V held. */
  bytes: number;
  /** Bytes at full occupancy (allocated once, never more). */
  budget_bytes: number;
  allocated_bytes: number;
  budget_tokens: number;
  n_past: number;
  sinks: number;
  dtype: 'f16' | 'q8';
  policy: 'window-sinks' | 'error';
  rebases: number;
  by_kind: KvKindStats[];
}

// ── Memory ledger ──────────────────────────────────────────────────────────────────────────────

export interface MemoryOptions {
  /** Most bytes the engine may use (wasm memory). */
  budget_bytes?: number;
  /** `elevated` at this fraction of the budget or more (default 0.75). */
  elevated?: number;
  /** `critical` at this fraction of the budget or more (default 0.9). */
  critical?: number;
}

export type MemoryLevel = 'ok' | 'elevated' | 'critical';

/** One term in bytes: estimated from the header, measured in the running engine (null: not yet). */
export interface MemoryFigures {
  estimated: number | null;
  measured: number | null;
}

/** The ledger at one moment (`engine.memory()`, the 'memory' event). */
export interface MemorySnapshot {
  level: MemoryLevel;
  budget_bytes: number | null;
  /** wasm linear memory now: what the tab pays (it never shrinks). */
  wasm_memory_bytes: number;
  high_water_bytes: number;
  terms: { weights: MemoryFigures; kv: MemoryFigures; activations: MemoryFigures; runtime: MemoryFigures };
  total: MemoryFigures;
  /** Estimated / measured wasm memory at the end of the load. */
  load_peak: MemoryFigures;
  /** measured total / budget. */
  usage: number | null;
  thresholds: { elevated: number; critical: number };
  phase: 'empty' | 'loading' | 'ready' | 'generating';
  /** Bytes live on the wasm heap (the rest of wasm memory is free space the allocator keeps). */
  heap_live_bytes: number | null;
  /** wasm memory when the engine started (module data + stack). */
  module_bytes: number | null;
  kv_tokens: number | null;
  kv_dtype: 'f16' | 'q8' | null;
  /** Model bytes the worker holds outside wasm memory (header chunks while admitting a load). */
  js_buffers_bytes: number;
  /** Their peak during the last load (the header's chunks, held while the load is admitted). */
  js_buffers_peak_bytes: number;
  /** Why it was sent: 'init', 'level' (a pressure-level change), 'load', 'request', 'options', 'read'. */
  reason: string;
}

export interface MemoryTerms {
  weights: number;
  kv: number;
  activations: number;
  runtime: number;
}

/** `engine.estimate()`: every term from the model's header alone. */
export interface MemoryEstimate {
  /** Whether the peak fits the budget. */
  fits: boolean;
  budget_bytes: number | null;
  terms: MemoryTerms;
  /** weights + kv + activations + runtime. */
  total: number;
  /** wasm memory at the end of the load. */
  load_peak: number;
  /** max(load_peak, total + the free space the load leaves): what is checked against the budget, so a model admitted under it runs to its KV budget. */
  peak: number;
  kv: { tokens: number; dtype: 'f16' | 'q8'; bytes_per_token: number };
  batch: number;
  parts: {
    activations: { forward: number; logits: number; sampler: number; kv_staging: number };
    runtime: { module: number; header: number; tokenizer: number; model: number; fragmentation: number };
  };
  model: { name: string | null; architecture: string | null; n_vocab: number; n_layer: number; context_length: number; header_bytes: number };
  /** Bytes of the file read to get here (`estimate()`, and a load refused from its header). */
  bytes_read?: number;
}

export interface EstimateOptions {
  /** The KV cache to estimate for (default: the engine's `kv` option). */
  kv?: KvOptions | null;
  /** A plain context of this many positions instead of `kv`. */
  ctx?: number;
  /** Prompt tokens per forward pass (default 64, the engine's prefill chunk). */
  batch?: number;
  /** Count the sampler's candidate list (default true; greedy decoding does not allocate it). */
  sampling?: boolean;
  /** Budget to check against (default: the engine's). */
  budget_bytes?: number;
  signal?: AbortSignal;
}

/**
 * The default memory budget: min(4 GiB × 0.9, deviceMemory GiB × 0.25), with 4 GiB of device
 * memory assumed where `navigator.deviceMemory` is not available.
 */
export declare function defaultMemoryBudget(env?: { deviceMemory?: number }): number;

// ── Routing ────────────────────────────────────────────────────────────────────────────────────

export type RouteMode = 'local-only' | 'prefer-local' | 'prefer-remote' | 'remote-only';
export type RouteTarget = 'local' | 'remote';

/** Why a route was ruled out (see README "Routing"). */
export type RuledOutReason =
  | 'mode_local_only'
  | 'mode_remote_only'
  | 'private'
  | 'no_local_model'
  | 'over_memory_budget'
  | 'prompt_over_kv_budget'
  | 'remote_not_configured'
  | 'remote_unavailable'
  | 'remote_unauthorized'
  | 'capability'
  | 'latency'
  | 'version_pinned';

export interface RemoteOptions {
  /** The server's OpenAI base URL, e.g. 'http://127.0.0.1:8080/v1'. */
  baseURL: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** The model name sent to the server (default: the first model of its /v1/models). */
  model?: string;
  headers?: Record<string, string>;
  /** Default: baseURL without its trailing /v1, plus /health. */
  healthURL?: string;
  /** Most milliseconds from the request to the first output: text, reasoning, a refusal, a tool
   * call or a finish (default 30000); chunks without output (a role chunk, empty deltas) do not extend it. Then REMOTE_UNAVAILABLE. */
  timeoutMs?: number;
  /** Most milliseconds between chunks with output once streaming (default 60000; the time the
   * reader holds the stream back is not counted): then REMOTE_INTERRUPTED. */
  idleTimeoutMs?: number;
  /** A fetch implementation (default: globalThis.fetch). */
  fetch?: typeof fetch;
}

export interface RouteCapabilityContext {
  target: RouteTarget;
  /** The request's parameters (app tags such as `metadata.quality` included). */
  params: Record<string, unknown>;
  /** The local ModelInfo, or the server's model card. */
  model: unknown;
}

export interface RouteOptions {
  /** Default 'prefer-local' with a remote, 'local-only' without. */
  mode?: RouteMode;
  remote?: RemoteOptions;
  local?: {
    /** The local KV/context budget in tokens (prompt + output); default the session's context. */
    maxContextTokens?: number;
  };
  /** Return true to treat a request as private (never sent to the server). */
  isSensitive?: (input: ChatMessage[] | string | string[], params: Record<string, unknown>) => boolean | Promise<boolean>;
  /** Return false to rule a route out for this request (quality: Q_r(x) >= Q_min). */
  capability?: (ctx: RouteCapabilityContext) => boolean;
  /**
   * A function: C_r(x), lower wins (replaces the default, the mode's preference). Ties go to the
   * lower latency estimate. An options object: the device's cost terms beside the mode's
   * preference (see RouteCostOptions); `{}` turns them all on with their defaults.
   */
  cost?: ((target: RouteTarget, ctx: { estimates: RouteEstimates; params: Record<string, unknown>; mode: RouteMode }) => number) | RouteCostOptions;
  /** T_max: a route whose estimate exceeds it is ruled out. */
  maxLatencyMs?: number;
  /** Output tokens assumed by the estimates when a request sets no max_tokens (default 256). */
  defaultMaxTokens?: number;
  /** Forbid switching routes within a conversation while local and server model versions differ. */
  pinOnVersionMismatch?: boolean;
  health?: { healthTtlMs?: number; healthDownTtlMs?: number; healthTimeoutMs?: number; modelTtlMs?: number };
  /** Starting rates for the estimates, until measurements replace them. */
  priors?: {
    local?: { prefill_tokens_per_s?: number; tpot_ms?: number; load_ms?: number };
    remote?: { rtt_ms?: number; prefill_tokens_per_s?: number; tpot_ms?: number };
  };
  /** Called with each decision, before the request runs. */
  onDecision?: (route: RouteInfo) => void;
}

/**
 * The router's cost terms. Each that fires adds 2 to the cost of one route (the mode's own
 * preference weighs 1), only between two routes that privacy, the mode and feasibility left open;
 * the reason is then `cost_<term>`. Signals the browser does not expose are 'unknown' and weigh
 * nothing.
 */
export interface RouteCostOptions {
  /** Prefer the server on battery (not charging) below this level (default {below: 0.2}); false: off. */
  battery?: { below?: number } | false;
  /** Prefer the server in these Compute Pressure states (default ['serious', 'critical']); false: off. */
  pressure?: PressureState[] | false;
  /** Prefer the server after a long local request was throttled (default true). */
  throttled?: boolean;
  /** Prefer local when navigator.connection.saveData is on (default true). */
  saveData?: boolean;
  /** Prefer local on these navigator.connection.effectiveType values (default ['slow-2g', '2g']); false: off. */
  slowConnection?: Array<'slow-2g' | '2g' | '3g' | '4g'> | false;
  /** The signals to use instead of the browser's (tests, non-browser hosts); missing ones are 'unknown'. */
  signals?: () => Partial<RouteSignals> | Promise<Partial<RouteSignals>>;
}

export interface RouteSignals {
  battery: { level: number; charging: boolean } | 'unknown';
  pressure: PressureState | 'unknown';
  connection: { save_data: boolean; effective_type: 'slow-2g' | '2g' | '3g' | '4g' | 'unknown' } | 'unknown';
  /** The last long local request was throttled (null: none yet). */
  throttled: boolean | null;
}

export interface RouteEstimates {
  /** Estimated time of the whole request locally (load if needed + prefill + decode); null if local is impossible. */
  t_local_ms: number | null;
  /** Estimated time on the server (RTT + prefill + decode); null if the server is not allowed. */
  t_remote_ms: number | null;
}

/** The decision, on every routed response and streamed chunk. */
export interface RouteInfo {
  target: RouteTarget;
  /** Why this target: the mode ('prefer-local', 'local-only', ...), 'private', or why the other was ruled out. After a failover: what failed ('remote_unavailable', 'remote_error_503', 'engine_crashed', ...). */
  reason: string;
  mode: RouteMode;
  estimates: RouteEstimates;
  ruled_out: Partial<Record<RouteTarget, RuledOutReason>>;
  /** sha256 of the local model and of the server's (from /v1/models); match null when unknown. */
  version: { local: string | null; remote: string | null; match: boolean | null };
  /** The prompt's tokens as the local tokenizer counts them (null when not counted). */
  prompt_tokens: number | null;
  kv_budget: number | null;
  private: boolean;
  /** With RouteCostOptions, when both routes were open: the signals read, the terms that fired (each makes that route costlier) and the costs compared. */
  cost?: { signals: RouteSignals; terms: { local: Array<'battery_low' | 'compute_pressure' | 'throttled'>; remote: Array<'save_data' | 'slow_network'> }; costs?: { local: number; remote: number } } | null;
  /** Set when the first choice failed before its first token and the other route took over. */
  fallback_from?: RouteTarget;
  /** What made the first choice fail (with fallback_from). */
  error?: { code: ErrorCodeName; message: string; status?: number; detail?: string };
}

/** Per-request routing fields (removed before the request goes anywhere). */
export interface RouteParams {
  /** Never send this request to the server. */
  private?: boolean;
  /** Overrides of the engine's route options for this request. */
  route?: { mode?: RouteMode; maxLatencyMs?: number; pinOnVersionMismatch?: boolean };
  /** T_max for this request. */
  max_latency_ms?: number;
  /** Identifies a conversation (default for chat: its system + first user message). */
  conversation_id?: string;
}

export interface RouterHandle {
  readonly mode: RouteMode;
  /** The last decision made. */
  readonly lastRoute: RouteInfo | null;
  readonly estimates: {
    snapshot(): {
      local: { prefill_tokens_per_s: number; tpot_ms: number; load_ms: number; samples: number };
      remote: { rtt_ms: number; prefill_tokens_per_s: number; tpot_ms: number; samples: number };
    };
  };
}

/** Set on a response (final chunk) whose source broke after the first token (finish_reason 'error'). */
export interface StreamError {
  code: ErrorCodeName;
  message: string;
  detail?: string;
}

export interface LoadProgress {
  /** 'download': from the network; 'cache': from the local cache; 'file': a File/Blob/path. */
  phase: 'download' | 'cache' | 'file';
  /** Bytes done; never decreases within a phase; the last event of a phase has loaded === total. */
  loaded: number;
  total: number | null;
  fraction: number | null;
}

export interface LoadOptions {
  onProgress?: (p: LoadProgress) => void;
  signal?: AbortSignal;
  /** Use (and fill) the cache for this load. Default: the engine's `cache` option. */
  cache?: boolean;
  /** Expected sha256 (hex) of the file: a mismatch is CHECKSUM_MISMATCH. */
  sha256?: string;
  /** Memory budget for this load (default: the engine's): a model whose estimated peak needs more is refused (OVER_MEMORY_BUDGET) from its header, before the weights are downloaded. */
  memoryBudget?: number;
  /** The session's KV cache (default: the engine's `kv` option). */
  kv?: KvOptions | null;
  progressIntervalMs?: number;
}

export interface ModelInfo {
  name: string;
  architecture: string;
  file_size: number;
  /** sha256 of the file, computed while it streamed in. */
  sha256: string;
  tensor_count: number;
  n_params: number;
  context_length: number | null;
  vocab_size: number | null;
  quantization: string | null;
  has_chat_template: boolean;
  weights_bytes: number;
  /** Positions the engine's context holds (prompt + generated tokens); with a `kv` budget, its tokens. */
  max_context: number;
  /** The session's KV cache settings and per-token cost (empty occupancy). */
  kv?: KvStats;
  source: 'network' | 'cache' | 'file';
  load_ms: number;
}

/** A URL (string or URL), a Blob/File, `{url, headers}`, or under Node a file path or file: URL. */
export type ModelSource = string | URL | Blob | { url: string; headers?: Record<string, string> };

export type SimdOption = 'auto' | 'relaxed' | 'simd128';

/** The build a wasm engine was compiled for. */
export type SimdTier = 'relaxed-simd' | 'simd128' | 'scalar';

export interface EngineInfo {
  version: string;
  protocol: number;
  cache: 'opfs' | 'fs' | 'none';
  /** Compiled with SIMD128 (true for both shipped builds). */
  simd: boolean | null;
  /** The build that runs (see the `simd` option); null for a custom wasm without the export. */
  simd_tier: SimdTier | null;
  /** Threads every forward pass runs on (see the `threads` option). */
  threads: number;
}

export interface EngineStatus {
  loaded: boolean;
  model: ModelInfo | null;
  busy: boolean;
  running: string | null;
  queued: number;
  wasm_memory_bytes: number;
  /** The memory ledger's last pressure level (null before the first snapshot). */
  memory_level: MemoryLevel | null;
  dead: boolean;
}

export interface CacheEntry {
  url: string;
  size: number;
  sha256: string;
  etag: string | null;
  stored_at: string;
}

// ── OpenAI-shaped requests and responses ───────────────────────────────────────────────────────

export type TextContentPart = { type: 'text'; text: string };

export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool' | (string & {});
  content: string | TextContentPart[] | null;
  /** An assistant message's calls (as a response gave them). */
  tool_calls?: ChatCompletionMessageToolCall[] | null;
  /** A tool message: the id of the call it answers (a call of the assistant message before it). */
  tool_call_id?: string | null;
}

/** A function the model may call. `parameters`: the JSON Schema of its arguments object (default: no arguments). */
export interface ChatCompletionTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean | null };
}

/** 'auto' (default with tools): text or calls; 'required': calls; a named function: one call of it; 'none': text. */
export type ChatCompletionToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };

/** A call: `arguments` is JSON text valid against the function's `parameters`. */
export interface ChatCompletionMessageToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** A streamed piece of a call: the first (by `index`) has id, type and name; then `arguments` fragments. */
export interface ChatCompletionToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

/**
 * The OpenAI parameters, checked by the core's rules (src/protocol/request.rs, the same for
 * `edgellm serve` and the remote route; a Rust test checks these declarations against them).
 * Any other parameter — e.g. OpenAI's `best_of`, `audio` — is refused with INVALID_REQUEST, `detail`
 * 'unsupported_parameter' or 'unknown_parameter' and `param` naming it: never silently ignored.
 */
export interface SamplingParams extends RouteParams {
  /** Most tokens to generate, in [1, 2^24] (default: until the context is full). */
  max_tokens?: number | null;
  /** OpenAI's newer name for max_tokens; wins when both are given. */
  max_completion_tokens?: number | null;
  /** In [0, 100]; 0 = greedy (above OpenAI's 2 is an extension). */
  temperature?: number | null;
  /** In [0, 1]. */
  top_p?: number | null;
  /** Extension: integer in [0, 2^20], 0 = off. */
  top_k?: number | null;
  /** Extension: in [0, 1]. */
  min_p?: number | null;
  /** Extension (llama.cpp's repeat_penalty): in (0, 10], 1 = off. */
  repetition_penalty?: number | null;
  /** Extension: another name of repetition_penalty. */
  repeat_penalty?: number | null;
  /** In [-2, 2]. */
  presence_penalty?: number | null;
  /** In [-2, 2]. */
  frequency_penalty?: number | null;
  /** Any 64-bit integer (a negative seed is its two's complement); default: random per request. */
  seed?: number | null;
  /** A non-empty string or up to 4 non-empty strings (OpenAI's limit). */
  stop?: string | string[] | null;
  /** Informational (an end-user id): accepted, changes nothing. */
  user?: string | null;
  /** Informational: up to 16 string tags (e.g. for the router's `capability` rule). */
  metadata?: Record<string, string> | null;
  /**
   * Token id (a decimal string, as JSON keys are) → bias in [-100, 100], added to that token's
   * logit before every other sampling stage (-100 bans it, +100 all but forces it); an id
   * outside the model's vocabulary is INVALID_REQUEST (`param: 'logit_bias'`).
   */
  logit_bias?: Record<string, number> | null;
  /**
   * Parse special-token text inside user and tool contents (default false: it is literal text,
   * so a user typing `<start_of_turn>` cannot forge a turn).
   */
  raw_special_tokens?: boolean;
  /**
   * Choices, in [1, 128] (default 1): generated one after the other from the one prompt, each
   * with its own seed (choice 0: `seed`); streamed, each choice's chunks carry its `index`.
   */
  n?: number | null;
  signal?: AbortSignal;
}

/**
 * OpenAI's `response_format`. 'json_object': any JSON object; 'json_schema': JSON valid against
 * `schema` (JSON Schema as llguidance supports it: types, properties/required,
 * additionalProperties, enum/const, anyOf/oneOf, min/max lengths, items, patterns, $defs/$ref
 * within the schema; no schema = any JSON). `name`: 1–64 of a-z A-Z 0-9 _ -. `strict` is accepted;
 * the output always follows the schema. A schema that cannot be compiled: INVALID_REQUEST.
 */
export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; json_schema: { name: string; schema?: Record<string, unknown>; strict?: boolean | null; description?: string } }
  /** Extension: text in the language of a grammar in llguidance's Lark syntax, e.g. 'start: "yes" | "no"'. */
  | { type: 'grammar'; grammar: string };

export interface ChatCompletionCreateParamsBase extends SamplingParams {
  /** Each message has `role` and `content`, plus `tool_calls` (assistant) or `tool_call_id` (tool); `name` is refused. */
  messages: ChatMessage[];
  /** 1 to 128 functions the model may call (see README "Tool calls"). */
  tools?: ChatCompletionTool[] | null;
  /** Only with tools. 'required' / a named function: the call is produced by constrained decoding. */
  tool_choice?: ChatCompletionToolChoice | null;
  /** Only with tools. true: more than one call in one answer; absent or false: one (unlike OpenAI's default, see README). */
  parallel_tool_calls?: boolean | null;
  /** Informational: the loaded model answers. */
  model?: string;
  /** Informational (an end-user id, OpenAI's successor of `user`): accepted, changes nothing. */
  safety_identifier?: string | null;
  /** Informational: the engine reuses a conversation's cached prefix by itself; accepted, changes nothing. */
  prompt_cache_key?: string | null;
  /** Only with stream: true. include_usage: one more last chunk, `choices: []` and `usage` (the only chunk with usage). */
  stream_options?: { include_usage?: boolean } | null;
  /** Structured output by constrained decoding: the text always parses (and follows the schema). */
  response_format?: ResponseFormat | null;
  /** Each generated token's log probability (choices[].logprobs.content; see ChatCompletionLogprobs). */
  logprobs?: boolean | null;
  /** Alternatives per token, in [0, 20]; needs logprobs: true. */
  top_logprobs?: number | null;
}
export interface ChatCompletionCreateParamsNonStreaming extends ChatCompletionCreateParamsBase {
  stream?: false | null;
}
export interface ChatCompletionCreateParamsStreaming extends ChatCompletionCreateParamsBase {
  stream: true;
}

export interface CompletionCreateParamsBase extends SamplingParams {
  prompt: string | [string];
  /** Informational: the loaded model answers. */
  model?: string;
  /** Only with stream: true (see ChatCompletionCreateParamsBase). */
  stream_options?: { include_usage?: boolean } | null;
  /** Structured output by constrained decoding (see ChatCompletionCreateParamsBase). */
  response_format?: ResponseFormat | null;
  /** Log probabilities with this many alternatives per token, in [0, 5] (OpenAI's legacy shape: CompletionLogprobs). */
  logprobs?: number | null;
}
export interface CompletionCreateParamsNonStreaming extends CompletionCreateParamsBase {
  stream?: false | null;
}
export interface CompletionCreateParamsStreaming extends CompletionCreateParamsBase {
  stream: true;
}

/** What `engine.session.save` stored. */
export interface SavedSession {
  key: string;
  /** Tokens of the conversation (prompt and answers so far). */
  tokens: number;
  /** Bytes of the stored snapshot. */
  bytes: number;
}
export interface SavedSessionEntry extends SavedSession {
  model_sha256: string;
  /** ISO 8601. */
  saved_at: string;
}

export interface EnergyOptions {
  watts_per_busy_core?: number;
}

/** A figure per phase of a generation and their sum. */
export interface PhaseSplit {
  /** Tokenizing, prefix reuse and the prompt's forward passes. */
  prefill: number;
  /** The decode steps (a forward pass and a sampling each). */
  decode: number;
  total: number;
}

export type PressureState = 'nominal' | 'fair' | 'serious' | 'critical';

/** Decode speed per time window over one generation (sustained vs peak). */
export interface SustainedSpeed {
  window_ms: number;
  /** tok/s of each closed window (the first token starts window 0; an unfinished last window is left out). */
  windows: number[];
  first_tps: number | null;
  latest_tps: number | null;
  peak_tps: number | null;
  /** latest_tps / first_tps, when long. */
  ratio: number | null;
  /** At least two windows. */
  long: boolean;
  throttle_fraction: number;
  /** latest_tps < throttle_fraction × first_tps; null when not long. */
  throttled: boolean | null;
}

/**
 * What a request cost the machine that ran it — edgellm's extension of `usage`, kept in this
 * one sub-object so OpenAI's own fields are untouched. ESTIMATES, derived as follows:
 * `cpu_ms` is core-milliseconds of CPU time. In the browser (and Node) worker there is no
 * per-thread CPU clock: it is the busy wall time inside the engine's wasm calls
 * (`cpu_clock: 'wasm-busy-wall'`), which for the single-threaded compute worker is its CPU time
 * unless the OS preempts it mid-call (then it over-counts). `edgellm serve` reads its process
 * CPU time, all threads (`'process-cpu'`). `energy_j` = `cpu_ms / 1000 × watts_per_busy_core`
 * per phase (the `energy` option; the server's `--watts-per-busy-core`): the CPU cores only —
 * not the screen, radio, memory or the rest of the device.
 */
export interface ComputeUsage {
  cpu_ms: PhaseSplit;
  /** Wall time spent inside the engine's calls (waits between calls excluded). */
  busy_wall_ms: PhaseSplit;
  /** cpu_ms.total / busy_wall_ms.total: mean busy cores while working. */
  busy_cores: number;
  energy_j: PhaseSplit;
  watts_per_busy_core: number;
  cpu_clock: 'wasm-busy-wall' | 'process-cpu' | 'busy-wall' | 'none';
  /** Decode speed per window: local runs measure it in the worker; for `edgellm serve` the router measures it on the chunks' arrival (network included). */
  sustained?: SustainedSpeed | null;
  /** Local runs: the Compute Pressure ('cpu') state during the request: `state` the worst seen, `last` at the end. */
  pressure?: { state: PressureState | 'unknown'; last: PressureState | 'unknown' };
}

/** The 'pressure' event: a decode-speed window closed ('window') or the compute pressure changed ('state'). */
export interface PressureEvent {
  reason: 'window' | 'state';
  state: PressureState | 'unknown';
  sustained: SustainedSpeed | null;
}

/** OpenAI's usage, extended with timings. */
export interface CompletionUsage {
  prompt_tokens: number;
  /** OpenAI's details: `cached_tokens` = prompt tokens the KV cache already held from the
   * previous request (the conversation so far), so not prefilled again (local runs and
   * `edgellm serve`). */
  prompt_tokens_details?: { cached_tokens: number };
  completion_tokens: number;
  total_tokens: number;
  /** Request start to first generated token. */
  ttft_ms: number;
  /** Mean time per output token after the first. */
  tpot_ms: number;
  prefill_tokens_per_s: number;
  decode_tokens_per_s: number;
  /** Weight bytes one decode step (a token after the first) reads: every layer's matrices and
   * f32 norms/biases, the output projection (the embedding again when tied), one embedding row
   * (local runs and `edgellm serve`); the mean over the decode steps, lower when they used the
   * screened output head (see `head`). */
  decode_weight_bytes_per_token?: number;
  /** Which output head the decode steps used: `path` 'screened' (about half the head's bytes
   * read, the same tokens), 'full' (every logit: logprobs, structured output, top-p sampling
   * without top-k) or 'mixed'; step counts and candidate rows per screened step. */
  head?: {
    path: 'screened' | 'full' | 'mixed';
    screened_steps: number;
    full_steps: number;
    fallback_steps: number;
    /** Candidate rows computed exactly per screened step that did not fall back. */
    candidates_mean: number;
    candidates_median: number;
    candidates_max: number;
  };
  /** K/V bytes the last decode step's attention read: every row the cache held. */
  decode_kv_bytes_last_token?: number;
  /** Mean bytes read per decode step: weights + mean K/V over the decode steps. */
  decode_bytes_per_token?: number;
  /** Achieved decode bandwidth, GB/s (1e9 bytes): decode_bytes_per_token × decode_tokens_per_s / 1e9. */
  decode_gb_s?: number;
  /** The local KV cache at the end of the generation (local runs). */
  kv?: KvStats;
  /** The memory ledger at the end of the generation (local runs). */
  memory?: MemorySnapshot;
  /** CPU time, energy estimate, sustained speed and compute pressure (local runs and `edgellm serve`). */
  compute?: ComputeUsage;
}

/**
 * A generated token's log probability under the model's own distribution: log-softmax of the
 * raw logits over the whole vocabulary, before temperature, penalties and top-k/top-p/min-p (what
 * OpenAI reports). `bytes`: the token's UTF-8 bytes (a token may hold part of a character).
 */
export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  /** The likeliest tokens at this position, most likely first (top_logprobs of them). */
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}

/** Chat `logprobs` (with logprobs: true): one entry per generated token (end of turn excluded). */
export interface ChatCompletionLogprobs {
  content: TokenLogprob[];
  refusal: null;
}

/** Completions `logprobs` (OpenAI's legacy shape); text_offset counts characters from the prompt's start. */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Array<Record<string, number>>;
  text_offset: number[];
}

/** 'tool_calls': the answer is calls; 'error': the route's source broke after the first token (see `error`); routed requests only. */
export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'error';

/** Fields routed responses add. */
export interface Routed {
  route?: RouteInfo;
  error?: StreamError;
}

export interface ChatCompletion extends Routed {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    /** With calls: `tool_calls`, and `content` null unless there was text besides. */
    message: { role: 'assistant'; content: string | null; tool_calls?: ChatCompletionMessageToolCall[] };
    logprobs: ChatCompletionLogprobs | null;
    finish_reason: FinishReason;
  }>;
  usage: CompletionUsage;
}

export interface ChatCompletionChunk extends Routed {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    delta: { role?: 'assistant'; content?: string; tool_calls?: ChatCompletionToolCallDelta[] };
    /** The entries of the tokens whose text this chunk completes. */
    logprobs: ChatCompletionLogprobs | null;
    finish_reason: FinishReason | null;
  }>;
  /** On the extra last chunk of stream_options.include_usage (whose choices are []); with
   * include_usage every other chunk has `usage: null`, as OpenAI's. */
  usage?: CompletionUsage | null;
}

export interface Completion extends Routed {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: Array<{ index: number; text: string; logprobs: CompletionLogprobs | null; finish_reason: FinishReason }>;
  usage: CompletionUsage;
}

export interface CompletionChunk extends Routed {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: Array<{ index: number; text: string; logprobs: CompletionLogprobs | null; finish_reason: FinishReason | null }>;
  /** On the extra last chunk of stream_options.include_usage (`null` on the others then). */
  usage?: CompletionUsage | null;
}

export interface RequestOptions {
  signal?: AbortSignal;
}

/**
 * The chunks of a streamed completion. Iterate with `for await`; `abort()` or leaving the loop
 * early stops the generation (an aborted stream's pending/next `next()` rejects with ABORTED).
 */
export declare class CompletionStream<T> implements AsyncIterable<T> {
  /** As in the openai SDK: `stream.controller.abort()` stops the generation like abort(). */
  readonly controller: AbortController;
  abort(): void;
  [Symbol.asyncIterator](): AsyncIterator<T>;
  toReadableStream(): ReadableStream<T>;
}

export declare class Engine {
  /** The loaded model, or null. */
  readonly model: ModelInfo | null;
  /** Set once the worker is ready. */
  readonly info: EngineInfo | null;
  /** How many times the worker was restarted after a crash. */
  readonly restarts: number;

  start(): Promise<EngineInfo>;
  load(source: ModelSource, options?: LoadOptions): Promise<ModelInfo>;
  unload(): Promise<void>;
  status(): Promise<EngineStatus>;
  /** Stops the worker for good; pending calls reject with TERMINATED. */
  terminate(): void;
  /** The router, when routing is on. */
  readonly router: RouterHandle | null;
  /** Replaces the routing options (null: every request runs locally). */
  setRoute(options: RouteOptions | null): RouterHandle | null;
  /** Estimates each memory term of a model from its header alone (nothing is loaded). */
  estimate(source: ModelSource, options?: EstimateOptions): Promise<MemoryEstimate>;
  /** The latest memory snapshot (null before the first). */
  memory(): MemorySnapshot | null;
  /** A fresh snapshot from the worker. */
  refreshMemory(): Promise<MemorySnapshot | null>;
  /** Changes the budget and/or thresholds. */
  setMemoryOptions(options: MemoryOptions): Promise<MemorySnapshot | null>;
  /** The budget and thresholds in force. */
  readonly memoryOptions: Required<MemoryOptions>;
  /** 'memory': every pressure-level change and the end of each load and request. Returns an unsubscribe function. */
  on(event: 'memory', listener: (snapshot: MemorySnapshot) => void): () => void;
  /** 'pressure': each closed decode-speed window of a local request, and each Compute Pressure change. */
  on(event: 'pressure', listener: (event: PressureEvent) => void): () => void;
  off(event: 'memory', listener: (snapshot: MemorySnapshot) => void): void;
  off(event: 'pressure', listener: (event: PressureEvent) => void): void;
  /** The Compute Pressure state now ('unknown' without the API) and the sustained speed of the last long local request. */
  pressure(): { state: PressureState | 'unknown'; supported: boolean; last_long: SustainedSpeed | null };
  /**
   * The prompt's tokens exactly as a local generation would run them (chat template and
   * special-token rules applied; no model call), and whether it fits the loaded session's
   * context or KV budget. Rejects MODEL_NOT_LOADED without a model, INVALID_REQUEST for a
   * request without a prompt.
   */
  countTokens(params: { messages: ChatMessage[] } | { prompt: string | [string] }): Promise<TokenCount>;

  readonly chat: {
    readonly completions: {
      create(params: ChatCompletionCreateParamsNonStreaming, options?: RequestOptions): Promise<ChatCompletion>;
      create(params: ChatCompletionCreateParamsStreaming, options?: RequestOptions): Promise<CompletionStream<ChatCompletionChunk>>;
      create(
        params: ChatCompletionCreateParamsBase & { stream?: boolean | null },
        options?: RequestOptions,
      ): Promise<ChatCompletion | CompletionStream<ChatCompletionChunk>>;
    };
  };
  readonly completions: {
    create(params: CompletionCreateParamsNonStreaming, options?: RequestOptions): Promise<Completion>;
    create(params: CompletionCreateParamsStreaming, options?: RequestOptions): Promise<CompletionStream<CompletionChunk>>;
    create(
      params: CompletionCreateParamsBase & { stream?: boolean | null },
      options?: RequestOptions,
    ): Promise<Completion | CompletionStream<CompletionChunk>>;
  };
  /**
   * Saved conversations: the current conversation's KV cache (its tokens and K/V rows, tagged
   * with the model's sha256 and the KV settings, checksummed) in the engine's storage (OPFS in
   * browsers, `<cacheDir>-sessions` in Node; memory only without a cache). After `restore`,
   * the next request whose prompt starts with the saved conversation prefills only the rest.
   * Restore errors: `SESSION_NOT_FOUND`, `SESSION_MISMATCH` (another model or KV settings),
   * `SESSION_CORRUPT` (checksum); the engine is unchanged and the next request prefills.
   */
  readonly session: {
    save(key: string): Promise<SavedSession>;
    restore(key: string): Promise<{ key: string; tokens: number }>;
    list(): Promise<SavedSessionEntry[]>;
    delete(key: string): Promise<{ key: string; deleted: boolean }>;
  };
  readonly cache: {
    list(): Promise<CacheEntry[]>;
    delete(url: string | URL): Promise<void>;
    clear(): Promise<void>;
  };
}

/**
 * A `fetch` that answers OpenAI's HTTP API (GET /v1/models, POST /v1/chat/completions and
 * /v1/completions; JSON or server-sent events) from this engine, nothing sent anywhere: pass it
 * as the `fetch` option of an OpenAI client (`baseURL` any URL, e.g. 'http://edgellm.local/v1').
 * Errors are OpenAI's error bodies with the statuses `edgellm serve` uses; the request's signal
 * cancels the generation.
 */
export declare function createOpenAIFetch(engine: Engine): typeof fetch;

/** Starts an engine (a Web Worker in browsers, worker_threads under Node) and waits until it is ready. */
export declare function createEngine(options?: EngineOptions): Promise<Engine>;
