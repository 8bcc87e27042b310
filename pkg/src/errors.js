// Errors with a stable `code`: the only kind of error the client API throws or rejects with.
//
// `code` is one of the few umbrella codes in `ErrorCode` (branch on these); `detail` is the
// precise code of the layer that failed, when it has one (e.g. the core's `GGUF_BAD_MAGIC` under
// `GGUF_INVALID`), for logs and bug reports.

/** The stable umbrella codes. Keep in sync with index.d.ts and README.md. */
export const ErrorCode = Object.freeze({
  /** Not a GGUF file, or a corrupt / inconsistent header. */
  GGUF_INVALID: 'GGUF_INVALID',
  /** The file ends before its header or tensor data does. */
  GGUF_TRUNCATED: 'GGUF_TRUNCATED',
  /** A valid GGUF the engine cannot run (architecture, tensor type, tokenizer). */
  UNSUPPORTED_MODEL: 'UNSUPPORTED_MODEL',
  /** The model (or the request) does not fit the memory budget. */
  OVER_MEMORY_BUDGET: 'OVER_MEMORY_BUDGET',
  /** The prompt does not fit the context / KV budget. */
  PROMPT_TOO_LONG: 'PROMPT_TOO_LONG',
  /** HTTP error status (`status` is set), dropped connection after bounded retries, or fetch failure. */
  NETWORK: 'NETWORK',
  /** The bytes do not match the expected sha256 / size. */
  CHECKSUM_MISMATCH: 'CHECKSUM_MISMATCH',
  /** The caller aborted (AbortSignal, stream.abort(), break out of the stream). */
  ABORTED: 'ABORTED',
  /** The wasm engine panicked/trapped or the worker died; the client restarts it. */
  ENGINE_CRASHED: 'ENGINE_CRASHED',
  /** The wasm module or worker could not be started. */
  ENGINE_INIT_FAILED: 'ENGINE_INIT_FAILED',
  /** A generation request came before a model was loaded (or after unload). */
  MODEL_NOT_LOADED: 'MODEL_NOT_LOADED',
  /** A request argument is missing or out of range. */
  INVALID_REQUEST: 'INVALID_REQUEST',
  /** The engine was terminated by `engine.terminate()`. */
  TERMINATED: 'TERMINATED',
  /** Anything else: a bug. */
  INTERNAL: 'INTERNAL',
  // ── the router (route option) ──
  /** The prompt does not fit the local KV/context budget, and the route may not leave the device. */
  PROMPT_OVER_KV_BUDGET: 'PROMPT_OVER_KV_BUDGET',
  /** A private request cannot run locally; nothing was sent to the server. */
  PRIVATE_REMOTE_FORBIDDEN: 'PRIVATE_REMOTE_FORBIDDEN',
  /** The server is unreachable, unhealthy or timed out (before the first token). */
  REMOTE_UNAVAILABLE: 'REMOTE_UNAVAILABLE',
  /** The server refused the API key (HTTP 401/403). */
  REMOTE_UNAUTHORIZED: 'REMOTE_UNAUTHORIZED',
  /** The server answered with an error (`status`; `detail` = its error code). */
  REMOTE_ERROR: 'REMOTE_ERROR',
  /** The server's stream broke after it started (the text so far is kept; finish_reason 'error'). */
  REMOTE_INTERRUPTED: 'REMOTE_INTERRUPTED',
  /** No route satisfies the constraints (capability, latency, version pin): see `error.route`. */
  NO_ROUTE: 'NO_ROUTE',
  /** engine.session.restore: no saved conversation under that key. */
  SESSION_NOT_FOUND: 'SESSION_NOT_FOUND',
  /** engine.session.restore: saved with another model (sha256) or other KV settings. */
  SESSION_MISMATCH: 'SESSION_MISMATCH',
  /** engine.session.restore: the saved bytes fail their checksum or are inconsistent. */
  SESSION_CORRUPT: 'SESSION_CORRUPT',
});

/** Fields some errors carry beside `detail`, `status` and `param`, kept across the worker
 * boundary: OVER_MEMORY_BUDGET's estimate per term and the budget it was checked against; a
 * refused load's `kept_model`, the model still loaded (what `engine.load()` resolved with). */
const EXTRA_FIELDS = ['terms', 'budget_bytes', 'estimate', 'kept_model'];

export class EdgeLLMError extends Error {
  /**
   * @param {string} code one of ErrorCode
   * @param {string} message what happened, in words a person can act on
   * @param {{detail?: string, status?: number, param?: string, cause?: unknown, terms?: object, budget_bytes?: number, estimate?: object, kept_model?: object}} [extra]
   */
  constructor(code, message, extra = {}) {
    super(message, extra.cause !== undefined ? { cause: extra.cause } : undefined);
    this.name = 'EdgeLLMError';
    this.code = code;
    if (extra.detail !== undefined) this.detail = extra.detail;
    if (extra.status !== undefined) this.status = extra.status;
    // INVALID_REQUEST: the request parameter at fault (OpenAI's `param`).
    if (extra.param !== undefined) this.param = extra.param;
    for (const k of EXTRA_FIELDS) if (extra[k] !== undefined) this[k] = extra[k];
  }

  /** The plain object that crosses the worker boundary (see protocol.js, `ErrorPayload`). */
  toJSON() {
    const o = { code: this.code, message: this.message };
    if (this.detail !== undefined) o.detail = this.detail;
    if (this.status !== undefined) o.status = this.status;
    if (this.param !== undefined) o.param = this.param;
    for (const k of EXTRA_FIELDS) if (this[k] !== undefined) o[k] = this[k];
    return o;
  }
}

/** Rebuilds an EdgeLLMError from an `ErrorPayload` received from the worker. */
export function errorFromPayload(p) {
  if (!p || typeof p !== 'object') return new EdgeLLMError(ErrorCode.INTERNAL, String(p));
  const code = Object.prototype.hasOwnProperty.call(ErrorCode, p.code) ? p.code : ErrorCode.INTERNAL;
  const extra = { detail: p.detail, status: p.status, param: p.param };
  for (const k of EXTRA_FIELDS) extra[k] = p[k];
  return new EdgeLLMError(code, p.message || code, extra);
}

/**
 * Maps a precise code from the wasm core (`GgufError::code()` and friends) to its umbrella code.
 * Codes the core may add later fall back by prefix, so nothing is ever reported without a code.
 */
export function umbrellaCode(detail) {
  if (!detail) return ErrorCode.INTERNAL;
  if (Object.prototype.hasOwnProperty.call(ErrorCode, detail)) return detail;
  switch (detail) {
    case 'GGUF_TRUNCATED':
    case 'GGUF_TENSOR_OUT_OF_BOUNDS': // data past the end of a file whose length is known
    case 'STREAM_INCOMPLETE':
      return ErrorCode.GGUF_TRUNCATED;
    case 'GGUF_ALLOC_FAILED':
    case 'OUT_OF_MEMORY':
      return ErrorCode.OVER_MEMORY_BUDGET;
    case 'GGUF_IO':
      return ErrorCode.NETWORK;
    case 'NO_GENERATION':
    case 'NOTHING_TO_DECODE':
    case 'NO_LOAD_IN_PROGRESS':
      return ErrorCode.INTERNAL;
    case 'CONTEXT_FULL':
    case 'CONTEXT_OVERFLOW':
    case 'KV_FULL': // kv policy 'error': no room for another token
      return ErrorCode.PROMPT_TOO_LONG;
    case 'KV_BUDGET_TOO_SMALL': // kv option {bytes} below one token's worth
    case 'KV_BATCH_TOO_LARGE':
    // The chat template refused the conversation (its raise_exception, a bad role order) or
    // the contents hold too many special-token texts: the server's 400s.
    case 'CHAT_TEMPLATE_ERROR':
    case 'CHAT_TEMPLATE_TOO_MANY_LITERALS':
      return ErrorCode.INVALID_REQUEST;
    // A file whose header or tensor values are inconsistent or impossible.
    case 'BAD_METADATA':
    case 'BAD_TENSOR_SHAPE':
    case 'BAD_TENSOR_DATA':
    case 'MISSING_TENSOR':
      return ErrorCode.GGUF_INVALID;
  }
  // The model's own chat template cannot render (too costly, too long a chain, too much output).
  if (detail.startsWith('CHAT_TEMPLATE')) return ErrorCode.UNSUPPORTED_MODEL;
  if (detail.startsWith('UNSUPPORTED_') || detail.startsWith('GGUF_UNSUPPORTED')) return ErrorCode.UNSUPPORTED_MODEL;
  if (detail.startsWith('MODEL_') || detail.startsWith('TOKENIZER_')) return ErrorCode.UNSUPPORTED_MODEL;
  if (detail.startsWith('GGUF_')) return ErrorCode.GGUF_INVALID;
  if (detail.startsWith('OVER_') || detail.endsWith('_BUDGET')) return ErrorCode.OVER_MEMORY_BUDGET;
  if (detail.startsWith('INVALID_') || detail.startsWith('BAD_')) return ErrorCode.INVALID_REQUEST;
  return ErrorCode.INTERNAL;
}

/** Anything thrown → EdgeLLMError (used on both sides of the worker boundary). */
export function toEdgeError(e, fallbackCode = ErrorCode.INTERNAL) {
  if (e instanceof EdgeLLMError) return e;
  if (e && typeof e === 'object' && e.name === 'AbortError') {
    return new EdgeLLMError(ErrorCode.ABORTED, 'aborted', { cause: e });
  }
  const message = e && typeof e === 'object' && 'message' in e ? String(e.message) : String(e);
  return new EdgeLLMError(fallbackCode, message, { cause: e });
}

export function abortedError(what = 'request') {
  return new EdgeLLMError(ErrorCode.ABORTED, `${what} aborted`);
}
