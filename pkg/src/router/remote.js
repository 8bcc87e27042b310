// The remote route: an OpenAI-compatible server (edgellm serve, llama.cpp server, vLLM, …).
//
// Requests always go out streamed (SSE with stream_options.include_usage), whatever the caller
// asked: the router needs to know when the first token arrived (failover is only allowed before
// it) and what was received when a connection dies. Non-streamed responses are assembled by the
// router from the same chunks.
//
// Errors (EdgeLLMError codes):
//   REMOTE_UNAVAILABLE   network failure, refused connection, or no first token within timeoutMs
//   REMOTE_UNAUTHORIZED  401 / 403
//   REMOTE_ERROR         any other HTTP error (`status`, `detail` = the server's error.code),
//                        or an error event in the stream before the first token
//   REMOTE_INTERRUPTED   the stream broke after its first output (connection lost, error event,
//                        idle timeout, an answer that breaks the protocol or its bounds)
//
// "Started" means the first output (text, reasoning, a refusal, a tool call or a finish), not
// the first event: a role chunk followed by a dropped connection is still a failure before the
// first token (it may fail over), and events that carry nothing never hold the clocks open.

import { EdgeLLMError, ErrorCode, abortedError } from '../errors.js';

/** Set by the remote route itself: the caller's values are replaced. */
const OWN = ['model', 'messages', 'prompt', 'stream', 'stream_options'];

const trimSlash = (s) => String(s).replace(/\/+$/, '');

/** `http://h:p/v1` → `http://h:p/health` (where edgellm serve, llama.cpp and vLLM answer). */
export function defaultHealthURL(baseURL) {
  const u = new URL(trimSlash(baseURL));
  u.pathname = u.pathname.replace(/\/v1$/, '') + '/health';
  u.pathname = u.pathname.replace(/\/{2,}/g, '/');
  return u.href;
}

/** Most characters one SSE event may hold (a chunk is a few hundred; a whole reply, tool call
 * arguments included, is far below): past it the stream is broken or hostile. */
export const MAX_SSE_EVENT_CHARS = 8 << 20;

/** Most bytes of an error body or a model list read from a server. */
const MAX_BODY_BYTES = 1 << 20;

/** Most characters of text (content, tool-call arguments) one answer may carry, all choices
 * together: a server that ignores `max_tokens` cannot fill the tab's memory. */
export const MAX_REMOTE_OUTPUT_CHARS = 16 << 20;

/** Most events without output before the first output (role chunks, empty deltas). */
export const MAX_EVENTS_BEFORE_OUTPUT = 256;

/** A stream that broke or broke the protocol: REMOTE_UNAVAILABLE before the first output (the
 * router may fail over), REMOTE_INTERRUPTED after it. */
class StreamBroken extends Error {
  constructor(message, detail) {
    super(message);
    this.detail = detail;
  }
}

/** Whether a chunk's choice carries generated text: content (or a completion's text), a tool
 * call, reasoning (`reasoning_content` / `reasoning`, as llama.cpp's and vLLM's reasoning parsers
 * send it) or a refusal. */
function choiceHasText(c) {
  if (!c || typeof c !== 'object') return false;
  const d = c.delta && typeof c.delta === 'object' ? c.delta : null;
  return !!(c.text || (d && (d.content || (Array.isArray(d.tool_calls) && d.tool_calls.length) || d.reasoning_content || d.reasoning || d.refusal)));
}

/** Whether a chunk's choice carries output (generated text or a finish): the router's one rule
 * for "the first token has arrived", for local and remote chunks alike. */
export function choiceHasOutput(c) {
  return !!(c && typeof c === 'object' && (c.finish_reason || choiceHasText(c)));
}

/** Text events one choice may send for a `max_tokens`: each event holds at least one token, but
 * servers also flush held text (a partial stop string) as events of their own, so only a server
 * far past the limit is cut. */
export const maxTextEvents = (maxTokens) => 2 * maxTokens + 16;

/** A server's `usage` as the app may count on it: token counts that are not non-negative
 * integers are dropped (the router then counts what it received), anything but an object is
 * no usage at all. Other fields pass as they are. */
export function cleanUsage(u) {
  if (!u || typeof u !== 'object' || Array.isArray(u)) return null;
  const out = { ...u };
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) {
    if (k in out && !(Number.isSafeInteger(out[k]) && out[k] >= 0)) delete out[k];
  }
  return out;
}

/** What a chunk carries, after checking its shape against OpenAI's: its text's length and, per
 * choice, whether it holds text and whether it finishes. Throws StreamBroken for a shape no
 * OpenAI client could read (choices not an array, an index outside [0, n)). */
function readChunk(obj, n) {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) throw new StreamBroken('the server sent an event that is not a JSON object', 'BAD_RESPONSE');
  const out = { chars: 0, choices: [] };
  if (obj.choices === undefined) return out;
  if (!Array.isArray(obj.choices)) throw new StreamBroken('the server sent `choices` that is not an array', 'BAD_RESPONSE');
  for (const c of obj.choices) {
    if (c === null || typeof c !== 'object') throw new StreamBroken('the server sent a choice that is not an object', 'BAD_RESPONSE');
    const i = c.index === undefined && n === 1 ? 0 : c.index;
    if (!Number.isInteger(i) || i < 0 || i >= n) throw new StreamBroken(`the server sent choice index ${JSON.stringify(c.index)} (the request asked for ${n})`, 'BAD_RESPONSE');
    const d = c.delta && typeof c.delta === 'object' ? c.delta : {};
    for (const t of [d.content, c.text, d.reasoning_content, d.reasoning, d.refusal]) out.chars += typeof t === 'string' ? t.length : 0;
    if (Array.isArray(d.tool_calls)) {
      for (const t of d.tool_calls) out.chars += t && t.function && typeof t.function.arguments === 'string' ? t.function.arguments.length : 0;
    }
    out.choices.push({ index: i, text: choiceHasText(c), finish: !!c.finish_reason });
  }
  return out;
}

/** Parses an SSE byte stream into `data:` payloads (one string per event). An event longer than
 * MAX_SSE_EVENT_CHARS throws (a broken stream): a line that never ends would grow the buffer
 * without bound (and each chunk only scans what it added). */
export async function* sseData(reader) {
  const dec = new TextDecoder();
  let buf = '';
  let scanned = 0; // buf[..scanned] holds no newline
  let data = [];
  let held = 0;
  const tooLong = () => new StreamBroken(`the server sent an event longer than ${MAX_SSE_EVENT_CHARS} characters`, 'BAD_RESPONSE');
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n', scanned)) >= 0) {
      let line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      scanned = 0;
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (data.length) yield data.join('\n');
        data = [];
        held = 0;
      } else if (line.startsWith('data:')) {
        data.push(line.slice(line[5] === ' ' ? 6 : 5));
        held += line.length;
        if (held > MAX_SSE_EVENT_CHARS) throw tooLong();
      } // comments (':'), event:, id:, retry: are not needed
    }
    scanned = buf.length;
    if (held + buf.length > MAX_SSE_EVENT_CHARS) throw tooLong();
  }
  if (data.length) yield data.join('\n');
}

/** A response body as text, at most `limit` bytes (the rest is dropped, the read cancelled).
 * The caller's timer, which aborts the fetch, bounds the time. */
async function cappedText(res, limit = MAX_BODY_BYTES) {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  let n = 0;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      n += value.byteLength;
      text += dec.decode(value, { stream: true });
      if (n >= limit) {
        await reader.cancel().catch(() => {});
        break;
      }
    }
  } finally {
    reader.releaseLock?.();
  }
  return text + dec.decode();
}

function httpError(status, body, what) {
  let parsed = null;
  try {
    parsed = JSON.parse(body);
  } catch {
    /* not JSON */
  }
  const e = parsed && parsed.error ? parsed.error : null;
  const serverMsg = e ? (typeof e === 'string' ? e : e.message) : body.slice(0, 200);
  const detail = e && typeof e === 'object' && e.code ? String(e.code) : `HTTP_${status}`;
  const msg = `${what}: HTTP ${status}${serverMsg ? ` — ${serverMsg}` : ''}`;
  if (status === 401 || status === 403) return new EdgeLLMError(ErrorCode.REMOTE_UNAUTHORIZED, msg, { status, detail });
  const err = new EdgeLLMError(ErrorCode.REMOTE_ERROR, msg, { status, detail });
  return err;
}

/** Whether a failure of the remote route before the first token may fall back to local. */
export function remoteRetriable(e) {
  if (!e) return false;
  if (e.code === ErrorCode.REMOTE_UNAVAILABLE) return true;
  return e.code === ErrorCode.REMOTE_ERROR && (e.status === undefined || e.status === 429 || e.status >= 500);
}

export class RemoteClient {
  /**
   * @param {{baseURL: string, apiKey?: string, model?: string, headers?: Record<string,string>,
   *          healthURL?: string, timeoutMs?: number, idleTimeoutMs?: number, fetch?: typeof fetch}} cfg
   */
  constructor(cfg) {
    if (!cfg || !cfg.baseURL) throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'route.remote.baseURL is required');
    this.baseURL = trimSlash(cfg.baseURL);
    this.apiKey = cfg.apiKey;
    this.model = cfg.model;
    this.extraHeaders = cfg.headers || {};
    this.healthURL = cfg.healthURL || defaultHealthURL(this.baseURL);
    this.timeoutMs = cfg.timeoutMs ?? 30_000;
    this.idleTimeoutMs = cfg.idleTimeoutMs ?? 60_000;
    this.fetch = cfg.fetch || ((...a) => globalThis.fetch(...a));
  }

  headers(json) {
    const h = { ...this.extraHeaders };
    if (json) h['Content-Type'] = 'application/json';
    if (this.apiKey) h.Authorization = `Bearer ${this.apiKey}`;
    return h;
  }

  /** GET with a timeout over the headers and, with `readBody`, the (capped) body: resolves with
   * {status, ok, text}, or throws REMOTE_UNAVAILABLE. A server that sends its headers and then
   * stalls the body is cut by the same timer (it used to hang every caller sharing the answer). */
  async #get(url, timeoutMs, auth, readBody) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), timeoutMs);
    try {
      const r = await this.fetch(url, { method: 'GET', headers: auth ? this.headers(false) : { ...this.extraHeaders }, signal: ctl.signal, cache: 'no-store', redirect: 'error' });
      if (!readBody) await r.body?.cancel?.().catch(() => {});
      return { status: r.status, ok: r.ok, text: readBody ? await cappedText(r) : '' };
    } catch (e) {
      const what = ctl.signal.aborted ? `no answer within ${timeoutMs} ms` : e && e.message ? e.message : String(e);
      throw new EdgeLLMError(ErrorCode.REMOTE_UNAVAILABLE, `${url}: ${what}`, { detail: ctl.signal.aborted ? 'TIMEOUT' : 'CONNECT', cause: e });
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * GET /health → {ok, status, rtt_ms}. Never throws. Any answer below 500 counts as up (a server
   * without a health route answers 404; llama.cpp answers 503 while it loads its model).
   */
  async health(timeoutMs) {
    const t0 = performance.now();
    try {
      const r = await this.#get(this.healthURL, timeoutMs, false, false);
      const rtt_ms = performance.now() - t0;
      const ok = r.status < 500;
      return { ok, status: r.status, rtt_ms, reason: ok ? null : 'remote_unavailable' };
    } catch (e) {
      return { ok: false, status: null, rtt_ms: null, reason: 'remote_unavailable', error: e.message };
    }
  }

  /** GET {baseURL}/models → the model entry (id, sha256 when the server reports it) or throws. */
  async modelInfo(timeoutMs) {
    const r = await this.#get(`${this.baseURL}/models`, timeoutMs, true, true);
    const text = r.text;
    if (!r.ok) throw httpError(r.status, text, 'GET /models');
    let list;
    try {
      list = JSON.parse(text);
    } catch {
      throw new EdgeLLMError(ErrorCode.REMOTE_ERROR, 'GET /models: the answer is not JSON', { detail: 'BAD_RESPONSE' });
    }
    const data = Array.isArray(list && list.data) ? list.data : [];
    const m = (this.model && data.find((d) => d && d.id === this.model)) || data[0] || null;
    if (!m) return { id: this.model ?? null, sha256: null };
    return {
      id: m.id ?? null,
      sha256: typeof m.sha256 === 'string' ? m.sha256.toLowerCase() : null,
      max_context: m.max_context ?? m.context_length ?? null,
      max_prompt_tokens: m.max_prompt_tokens ?? null,
    };
  }

  /** The request body sent to the server. */
  body(kind, params, modelId) {
    const b = { model: this.model || modelId || 'default' };
    if (kind === 'chat') b.messages = params.messages;
    else b.prompt = params.prompt;
    // Every other parameter goes as given: the router has checked them with the core's rules
    // (src/protocol), which edgellm serve applies too, so there is no second list to drift.
    for (const [k, v] of Object.entries(params)) if (!OWN.includes(k) && v !== undefined && v !== null) b[k] = v;
    b.stream = true;
    b.stream_options = { include_usage: true };
    return b;
  }

  /**
   * POSTs a streamed completion. Resolves once the response headers are in (status 200), with an
   * async iterator of chunk objects; throws the typed errors above.
   * @returns {Promise<{chunks: AsyncIterator<object>, abort: () => void, t0: number, headers_ms: number}>}
   */
  async open(kind, body, signal) {
    const ctl = new AbortController();
    const onAbort = () => ctl.abort();
    if (signal) {
      if (signal.aborted) throw abortedError('generation');
      signal.addEventListener('abort', onAbort, { once: true });
    }
    const path = kind === 'chat' ? '/chat/completions' : '/completions';
    const t0 = performance.now();
    let timedOut = false;
    let timer = setTimeout(() => {
      timedOut = true;
      ctl.abort();
    }, this.timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      if (signal) signal.removeEventListener('abort', onAbort);
    };
    let res;
    try {
      // A redirect is an error, never followed: it would send the prompt to another origin.
      res = await this.fetch(`${this.baseURL}${path}`, { method: 'POST', headers: this.headers(true), body: JSON.stringify(body), signal: ctl.signal, cache: 'no-store', redirect: 'error' });
    } catch (e) {
      cleanup();
      if (signal && signal.aborted) throw abortedError('generation');
      if (timedOut) throw new EdgeLLMError(ErrorCode.REMOTE_UNAVAILABLE, `POST ${path}: no answer within ${this.timeoutMs} ms`, { detail: 'TIMEOUT' });
      throw new EdgeLLMError(ErrorCode.REMOTE_UNAVAILABLE, `POST ${path}: ${e && e.message ? e.message : e}`, { detail: 'CONNECT', cause: e });
    }
    if (!res.ok) {
      // The error body under the same timer and the caller's abort (a stalled body used to
      // hang the request past both), capped.
      const text = await cappedText(res).catch(() => '');
      cleanup();
      if (signal && signal.aborted) throw abortedError('generation');
      throw httpError(res.status, text, `POST ${path}`);
    }
    const headers_ms = performance.now() - t0;
    if (!res.body) {
      cleanup();
      throw new EdgeLLMError(ErrorCode.REMOTE_ERROR, `POST ${path}: HTTP ${res.status} with no body`, { status: res.status, detail: 'BAD_RESPONSE' });
    }
    const reader = res.body.getReader();
    const self = this;
    const n = Number.isInteger(body.n) && body.n > 0 ? body.n : 1;
    // A server may read either when both are given: the answer is held to the larger.
    const given = [body.max_tokens, body.max_completion_tokens].filter((v) => Number.isInteger(v) && v > 0);
    const maxTokens = given.length ? Math.max(...given) : undefined;
    let started = false;
    // One deadline: timeoutMs from the request until the first output, then idleTimeoutMs from
    // the last event with output. Events without output move it not at all; the time the
    // caller holds a chunk (a slow reader holding the stream back) does not count against it.
    let deadline = t0 + self.timeoutMs;
    const schedule = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        timedOut = true;
        ctl.abort();
      }, Math.max(1, deadline - performance.now()));
    };
    async function* chunks() {
      const finished = new Set();
      const opened = new Set();
      const textEvents = new Array(n).fill(0);
      const maxEvents = maxTokens === undefined ? Infinity : maxTextEvents(maxTokens);
      let chars = 0;
      let idle = 0;
      let events = 0;
      let done = false;
      try {
        schedule();
        for await (const data of sseData(reader)) {
          events++;
          if (data === '[DONE]') {
            done = true;
            break;
          }
          let obj;
          try {
            obj = JSON.parse(data);
          } catch {
            continue; // not a JSON event: ignore, as OpenAI clients do
          }
          if (obj && typeof obj === 'object' && obj.error) {
            const e = obj.error;
            const msg = `the server reported an error: ${typeof e === 'string' ? e : e.message || JSON.stringify(e)}`;
            const detail = (e && e.code && String(e.code)) || 'STREAM_ERROR';
            if (!started) throw new EdgeLLMError(ErrorCode.REMOTE_ERROR, msg, { detail, status: e && e.type === 'server_error' ? 500 : 400 });
            throw new EdgeLLMError(ErrorCode.REMOTE_INTERRUPTED, msg, { detail });
          }
          const seen = readChunk(obj, n);
          // A choice ends at its finish_reason (OpenAI sends nothing more for it): what a server
          // sends for it afterwards is dropped, not delivered past the choice's end.
          if (seen.choices.some((c) => finished.has(c.index))) {
            const keep = seen.choices.map((c) => !finished.has(c.index));
            obj.choices = obj.choices.filter((_, k) => keep[k]);
            seen.choices = seen.choices.filter((_, k) => keep[k]);
            if (!obj.choices.length && !('usage' in obj)) continue;
          }
          if ('usage' in obj) obj.usage = cleanUsage(obj.usage);
          chars += seen.chars;
          if (chars > MAX_REMOTE_OUTPUT_CHARS) throw new StreamBroken(`the server sent more than ${MAX_REMOTE_OUTPUT_CHARS} characters`, 'TOO_LONG');
          let output = false;
          for (const c of seen.choices) {
            opened.add(c.index);
            output ||= c.text || c.finish;
            if (c.text && !finished.has(c.index) && ++textEvents[c.index] > maxEvents) {
              throw new StreamBroken(`the server sent ${textEvents[c.index]} text events for max_tokens ${maxTokens}`, 'TOO_LONG');
            }
          }
          for (const c of seen.choices) if (c.finish) finished.add(c.index);
          if (output) {
            started = true;
            deadline = performance.now() + self.idleTimeoutMs;
            schedule();
          } else if (!started && ++idle > MAX_EVENTS_BEFORE_OUTPUT) {
            throw new StreamBroken(`the server sent ${MAX_EVENTS_BEFORE_OUTPUT} events without output`, 'BAD_RESPONSE');
          }
          clearTimeout(timer);
          const held = performance.now();
          yield obj;
          deadline += performance.now() - held;
          schedule();
        }
        if (!events) throw new StreamBroken(`the answer held no server-sent events (Content-Type: ${res.headers.get('content-type') || 'none'})`, 'BAD_RESPONSE');
        // Every choice the server opened must finish (a server that ignores `n` and answers one
        // choice is taken at its word), and at least one.
        const open = [...opened].filter((i) => !finished.has(i));
        if (open.length || !finished.size) {
          const what = open.length ? `choice ${open[0]} had no finish_reason` : 'no choice had a finish_reason';
          throw new StreamBroken(`the stream ended${done ? ' ([DONE])' : ''} before its end: ${what}`, 'CONNECTION_LOST');
        }
      } catch (e) {
        if (e instanceof EdgeLLMError) throw e;
        if (signal && signal.aborted) throw abortedError('generation');
        const detail = timedOut ? 'TIMEOUT' : e instanceof StreamBroken ? e.detail : 'CONNECTION_LOST';
        const why = timedOut ? `no output for ${started ? self.idleTimeoutMs : self.timeoutMs} ms` : e && e.message ? e.message : String(e);
        if (!started) throw new EdgeLLMError(ErrorCode.REMOTE_UNAVAILABLE, `POST ${path}: ${why}`, { detail });
        throw new EdgeLLMError(ErrorCode.REMOTE_INTERRUPTED, `the server's stream broke: ${why}`, { detail });
      } finally {
        cleanup();
        reader.cancel().catch(() => {});
      }
    }
    return { chunks: chunks(), abort: () => ctl.abort(), t0, headers_ms };
  }
}
