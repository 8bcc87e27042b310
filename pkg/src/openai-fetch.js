// A fetch function that answers OpenAI's HTTP API from a local engine, so any OpenAI client runs
// on the model in this tab (or Node process), nothing sent anywhere:
//
//   const client = new OpenAI({ apiKey: 'local', baseURL: 'http://edgellm.local/v1',
//                               fetch: createOpenAIFetch(engine), dangerouslyAllowBrowser: true });
//
// Routes (under any base URL; only the path is read): GET /v1/models, POST /v1/chat/completions,
// POST /v1/completions — the engine's own `create` with the body as parameters, so the answer
// (JSON, or server-sent events with `stream: true`) is exactly what the engine returns; errors
// are OpenAI's error bodies with the status `edgellm serve` uses. The request's `signal`
// cancels the generation (the SDK's `stream.controller.abort()` included).

import { EdgeLLMError, ErrorCode } from './errors.js';

/** HTTP status of an engine error, as edgellm serve answers the same failure. */
const STATUS = {
  [ErrorCode.INVALID_REQUEST]: 400,
  [ErrorCode.PROMPT_TOO_LONG]: 400,
  [ErrorCode.PROMPT_OVER_KV_BUDGET]: 400,
  [ErrorCode.MODEL_NOT_LOADED]: 503,
  [ErrorCode.OVER_MEMORY_BUDGET]: 503,
  [ErrorCode.ENGINE_CRASHED]: 500,
};

/**
 * Where the precise code's status differs from its umbrella's: the model's chat template past
 * its work or output budget is UNSUPPORTED_MODEL here but a 400 there (the template cannot
 * render this conversation, as for CHAT_TEMPLATE_ERROR).
 */
const DETAIL_STATUS = {
  CHAT_TEMPLATE_TOO_COSTLY: 400,
  CHAT_TEMPLATE_OUTPUT_TOO_LARGE: 400,
};

const json = (status, value) => new Response(JSON.stringify(value), { status, headers: { 'content-type': 'application/json' } });

/** OpenAI's error body: {error: {message, type, code, param}}. */
/**
 * OpenAI's `code` for an engine error, as edgellm serve words the same failure
 * (`ApiError::from_host` in src/server/errors.rs): a broken request rule keeps its own code
 * (`detail`, lower case: `unknown_parameter`, ...); the core's upper-case codes map as there.
 */
const SERVER_CODE = {
  PROMPT_TOO_LONG: 'context_length_exceeded',
  CONTEXT_FULL: 'context_length_exceeded',
  PROMPT_OVER_KV_BUDGET: 'context_length_exceeded',
  INVALID_REQUEST: 'invalid_request',
  CHAT_TEMPLATE_ERROR: 'chat_template_error',
  CHAT_TEMPLATE_TOO_COSTLY: 'chat_template_error',
  CHAT_TEMPLATE_OUTPUT_TOO_LARGE: 'chat_template_error',
  CHAT_TEMPLATE_TOO_MANY_LITERALS: 'invalid_request',
};

function errorCode(e) {
  if (!e) return 'internal_error';
  if (e.detail && e.detail !== e.detail.toUpperCase()) return e.detail;
  // The precise code first, then the umbrella one (PROMPT_TOO_LONG covers CONTEXT_OVERFLOW...).
  const mapped = SERVER_CODE[e.detail] ?? SERVER_CODE[e.code];
  if (mapped) return mapped;
  const key = e.detail || e.code;
  return (key && String(key).toLowerCase()) || 'internal_error';
}

function errorResponse(e) {
  const status = DETAIL_STATUS[e && e.detail] ?? STATUS[e && e.code] ?? 500;
  const type = status === 400 ? 'invalid_request_error' : 'server_error';
  const code = errorCode(e);
  return json(status, { error: { message: e && e.message ? e.message : String(e), type, code, param: (e && e.param) || null } });
}

function abortError() {
  return new DOMException('This operation was aborted', 'AbortError');
}

/** The body of a request (a string, bytes or a Request), as JSON. */
async function readBody(input, init) {
  let body = init && init.body !== undefined ? init.body : input instanceof Request ? await input.text() : undefined;
  if (body instanceof Uint8Array || body instanceof ArrayBuffer) body = new TextDecoder().decode(body);
  if (typeof body !== 'string') throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'the request body must be JSON text');
  try {
    return JSON.parse(body);
  } catch (e) {
    throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `the body is not valid JSON: ${e.message}`, { detail: 'invalid_json' });
  }
}

/** Server-sent events of a CompletionStream: one `data:` frame per chunk, then `[DONE]`. */
function sse(stream, signal) {
  const enc = new TextEncoder();
  const it = stream[Symbol.asyncIterator]();
  const onAbort = () => stream.abort();
  if (signal) signal.addEventListener('abort', onAbort, { once: true });
  const body = new ReadableStream({
    async pull(c) {
      try {
        const r = await it.next();
        if (r.done) {
          c.enqueue(enc.encode('data: [DONE]\n\n'));
          c.close();
          if (signal) signal.removeEventListener('abort', onAbort);
        } else c.enqueue(enc.encode(`data: ${JSON.stringify(r.value)}\n\n`));
      } catch (e) {
        if (signal && signal.aborted) return c.error(abortError());
        // An error after the stream started: an error event, as edgellm serve sends it.
        c.enqueue(enc.encode(`data: ${JSON.stringify({ error: { message: e.message, type: 'server_error', code: e.detail || e.code || 'internal_error', param: e.param || null } })}\n\n`));
        c.enqueue(enc.encode('data: [DONE]\n\n'));
        c.close();
      }
    },
    cancel: () => it.return(),
  });
  return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' } });
}

/**
 * A fetch-compatible function over `engine` (see the file's head).
 * @param {import('../index.d.ts').Engine} engine
 * @returns {typeof fetch}
 */
export function createOpenAIFetch(engine) {
  return async function openaiFetch(input, init = {}) {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const method = String(init.method || (input instanceof Request ? input.method : 'GET')).toUpperCase();
    const signal = init.signal || (input instanceof Request ? input.signal : undefined);
    if (signal && signal.aborted) throw abortError();
    const path = url.pathname.replace(/\/+$/, '');
    const one = /\/models\/([^/]+)$/.exec(path);
    const route = path.endsWith('/chat/completions') ? 'chat' : path.endsWith('/completions') ? 'completion' : path.endsWith('/models') || one ? 'models' : null;
    if (!route) return json(404, { error: { message: `no route for ${method} ${path}`, type: 'invalid_request_error', code: 'not_found', param: null } });
    if (route === 'models') {
      if (method !== 'GET') return json(405, { error: { message: `${method} ${path}: use GET`, type: 'invalid_request_error', code: 'method_not_allowed', param: null } });
      const m = engine.model;
      // The card edgellm serve gives: locally a prompt may take the context but one position,
      // and a generation all of it.
      const card = m && { id: m.name, object: 'model', created: 0, owned_by: 'edgellm', sha256: m.sha256, file_size: m.file_size, architecture: m.architecture, quantization: m.quantization, context_length: m.context_length, max_context: m.max_context, max_prompt_tokens: m.max_context - 1, max_tokens: m.max_context, chat_template: m.has_chat_template ? 'file' : 'built-in' };
      if (one) {
        // OpenAI's "retrieve model", as edgellm serve answers it.
        let id = one[1];
        try {
          id = decodeURIComponent(id);
        } catch {
          // A malformed escape: the id as written (it matches no model).
        }
        if (card && id === card.id) return json(200, card);
        return json(404, { error: { message: `the model ${JSON.stringify(id)} does not exist`, type: 'invalid_request_error', code: 'model_not_found', param: null } });
      }
      return json(200, { object: 'list', data: card ? [card] : [] });
    }
    if (method !== 'POST') return json(405, { error: { message: `${method} ${path}: use POST`, type: 'invalid_request_error', code: 'method_not_allowed', param: null } });
    try {
      const params = await readBody(input, init);
      if (!params || typeof params !== 'object' || Array.isArray(params)) throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'the body must be a JSON object', { detail: 'invalid_json' });
      const api = route === 'chat' ? engine.chat.completions : engine.completions;
      const r = await api.create(params, { signal });
      return params.stream ? sse(r, signal) : json(200, r);
    } catch (e) {
      if ((signal && signal.aborted) || (e && e.code === ErrorCode.ABORTED)) throw abortError();
      return errorResponse(e);
    }
  };
}
