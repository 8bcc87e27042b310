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
  | 'INTERNAL';

export declare const ErrorCode: { readonly [K in ErrorCodeName]: K };

/** The only kind of error edgellm throws or rejects with. */
export declare class EdgeLLMError extends Error {
  constructor(code: ErrorCodeName, message: string, extra?: { detail?: string; status?: number; cause?: unknown });
  readonly name: 'EdgeLLMError';
  /** Stable umbrella code: branch on this. */
  readonly code: ErrorCodeName;
  /** The precise code of the failing layer, e.g. 'GGUF_BAD_MAGIC', 'HTTP_STATUS', 'CONNECTION_LOST'. */
  readonly detail?: string;
  /** HTTP status, for NETWORK errors caused by one. */
  readonly status?: number;
  toJSON(): { code: ErrorCodeName; message: string; detail?: string; status?: number };
}

// ── Engine ─────────────────────────────────────────────────────────────────────────────────────

export interface EngineOptions {
  /** Cache models loaded from URLs (OPFS in browsers, `cacheDir` under Node). Default true. */
  cache?: boolean;
  /** Node only: the cache directory (default $XDG_CACHE_HOME/edgellm or ~/.cache/edgellm). */
  cacheDir?: string;
  /** Where the wasm file is, when a bundler cannot be left to find it. */
  wasmUrl?: string;
  /** Where the worker script is (browser: a module worker URL; Node: a file URL or path). */
  workerUrl?: string | URL;
  /** Milliseconds to wait for the worker and wasm to start (default 60000). */
  initTimeoutMs?: number;
  /** Refuse models whose weights need more bytes than this (checked from the header, before download). */
  memoryBudget?: number;
  /** Minimum interval between load progress events (default 50 ms). */
  progressIntervalMs?: number;
  /** Receives the worker's log lines (default: warnings go to console.warn). */
  onLog?: (level: 'debug' | 'info' | 'warn' | 'error', message: string) => void;
  /** Called when the worker crashed and was discarded (a fresh one starts on the next call). */
  onCrash?: (error: EdgeLLMError) => void;
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
  /** Refuse (OVER_MEMORY_BUDGET) a model whose weights need more bytes; checked from the header. */
  memoryBudget?: number;
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
  /** Positions the engine's context holds (prompt + generated tokens). */
  max_context: number;
  source: 'network' | 'cache' | 'file';
  load_ms: number;
}

/** A URL (string or URL), a Blob/File, `{url, headers}`, or under Node a file path or file: URL. */
export type ModelSource = string | URL | Blob | { url: string; headers?: Record<string, string> };

export interface EngineInfo {
  version: string;
  protocol: number;
  cache: 'opfs' | 'fs' | 'none';
  simd: boolean | null;
}

export interface EngineStatus {
  loaded: boolean;
  model: ModelInfo | null;
  busy: boolean;
  running: string | null;
  queued: number;
  wasm_memory_bytes: number;
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
  role: 'system' | 'user' | 'assistant' | (string & {});
  content: string | TextContentPart[] | null;
}

export interface SamplingParams {
  max_tokens?: number | null;
  /** Alias of max_tokens. */
  max_completion_tokens?: number | null;
  /** 0 = greedy. */
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  min_p?: number | null;
  repetition_penalty?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
  /** Only 1 is supported. */
  n?: number | null;
  signal?: AbortSignal;
}

export interface ChatCompletionCreateParamsBase extends SamplingParams {
  messages: ChatMessage[];
  model?: string;
  stream_options?: { include_usage?: boolean } | null;
}
export interface ChatCompletionCreateParamsNonStreaming extends ChatCompletionCreateParamsBase {
  stream?: false | null;
}
export interface ChatCompletionCreateParamsStreaming extends ChatCompletionCreateParamsBase {
  stream: true;
}

export interface CompletionCreateParamsBase extends SamplingParams {
  prompt: string | [string];
  model?: string;
  stream_options?: { include_usage?: boolean } | null;
}
export interface CompletionCreateParamsNonStreaming extends CompletionCreateParamsBase {
  stream?: false | null;
}
export interface CompletionCreateParamsStreaming extends CompletionCreateParamsBase {
  stream: true;
}

/** OpenAI's usage, extended with timings. */
export interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** Request start to first generated token. */
  ttft_ms: number;
  /** Mean time per output token after the first. */
  tpot_ms: number;
  prefill_tokens_per_s: number;
  decode_tokens_per_s: number;
}

export type FinishReason = 'stop' | 'length';

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    message: { role: 'assistant'; content: string };
    logprobs: null;
    finish_reason: FinishReason;
  }>;
  usage: CompletionUsage;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    delta: { role?: 'assistant'; content?: string };
    logprobs: null;
    finish_reason: FinishReason | null;
  }>;
  /** Set on the chunk that carries finish_reason (and on the extra usage chunk of stream_options.include_usage). */
  usage?: CompletionUsage;
}

export interface Completion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: Array<{ index: number; text: string; logprobs: null; finish_reason: FinishReason }>;
  usage: CompletionUsage;
}

export interface CompletionChunk {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: Array<{ index: number; text: string; logprobs: null; finish_reason: FinishReason | null }>;
  usage?: CompletionUsage;
}

export interface RequestOptions {
  signal?: AbortSignal;
}

/**
 * The chunks of a streamed completion. Iterate with `for await`; `abort()` or leaving the loop
 * early stops the generation (an aborted stream's pending/next `next()` rejects with ABORTED).
 */
export declare class CompletionStream<T> implements AsyncIterable<T> {
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
  readonly cache: {
    list(): Promise<CacheEntry[]>;
    delete(url: string | URL): Promise<void>;
    clear(): Promise<void>;
  };
}

/** Starts an engine (a Web Worker in browsers, worker_threads under Node) and waits until it is ready. */
export declare function createEngine(options?: EngineOptions): Promise<Engine>;
