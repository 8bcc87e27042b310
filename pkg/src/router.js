// The router: runs each request where it is feasible and cheapest — in this tab (the local
// engine) or on an OpenAI-compatible server — and says why in `route` on every response.
//
//   createEngine({ route: { mode, remote: { baseURL, apiKey, model }, local: { maxContextTokens }, ... } })
//   engine.chat.completions.create({ messages, private: true, route: { mode }, ... })
//
// Pieces: router/decision.js (the pure decision and its reason codes), router/estimates.js
// (latency estimates from measured rates), router/health.js (cached server health and model
// card), router/remote.js (the HTTP/SSE client). This file gathers the facts, decides, runs the
// chosen route, and fails over:
//
//   remote → local   server unreachable, 5xx/429 or timeout before the first token (when the
//                    mode allows local and the request fits locally)
//   local  → remote  OVER_MEMORY_BUDGET / ENGINE_CRASHED before the first token (when the mode
//                    allows remote and the request is not private)
//
// After the first token there is no switch: if the source breaks, the text already delivered
// stays and the response ends with finish_reason 'error' and `error: {code, message}`
// (REMOTE_INTERRUPTED, ENGINE_CRASHED, ...). A private request never causes a single network
// request to the server: not a health check, not a model-card fetch.

import { EdgeLLMError, ErrorCode, abortedError } from './errors.js';
import { decide, noRouteError, MODES, other } from './router/decision.js';
import { Estimates } from './router/estimates.js';
import { RemoteState } from './router/health.js';
import { RemoteClient, choiceHasOutput, remoteRetriable } from './router/remote.js';
import { costOptions, costTerms, normalizeSignals } from './router/cost.js';
import { DecodeWindows } from './sustained.js';
import { requestSignal, strictBoolean } from './strict.js';

const invalid = (m) => new EdgeLLMError(ErrorCode.INVALID_REQUEST, m);
const LOCAL_FAILOVER = new Set([ErrorCode.OVER_MEMORY_BUDGET, ErrorCode.ENGINE_CRASHED]);
/** The router's own request parameters (and the AbortSignal): never sent to an engine. */
export const ROUTER_PARAMS = ['private', 'route', 'conversation_id', 'max_latency_ms', 'signal'];

/** Two chunks' `logprobs` objects as one (chat's content, completions' parallel arrays). */
function mergeLogprobs(a, b) {
  if (!a) return { ...b };
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = Array.isArray(v) && Array.isArray(a[k]) ? a[k].concat(v) : v;
  return out;
}

/**
 * Streamed `delta.tool_calls` pieces gathered into `message.tool_calls` (OpenAI's rule: the
 * first piece of a call, by `index`, has its id, type and name; later ones add `arguments`).
 */
function mergeToolCalls(calls, deltas) {
  if (!Array.isArray(deltas)) return calls;
  for (const d of deltas) {
    if (!d || typeof d !== 'object') continue;
    const f = d.function && typeof d.function === 'object' ? d.function : {};
    // The server's index is trusted only as a small position: a missing one (some servers omit
    // it) continues the last call, or starts the first; a huge, negative or non-integer one
    // (a sparse array, or `__proto__`) is the next position.
    let i = d.index;
    if (!Number.isInteger(i) || i < 0 || i > calls.length) i = d.index === undefined && calls.length > 0 && !d.id ? calls.length - 1 : calls.length;
    if (!calls[i]) calls[i] = { id: d.id, type: d.type || 'function', function: { name: f.name, arguments: '' } };
    calls[i].function.arguments += typeof f.arguments === 'string' ? f.arguments : '';
  }
  return calls;
}

/** FNV-1a over a string: a compact conversation key. */
function hash(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16);
}

/** A conversation is known by its id, else by its opening (system + first user message). */
function conversationKey(kind, params, id) {
  if (id !== undefined && id !== null) return `id:${id}`;
  if (kind !== 'chat') return null;
  const msgs = params.messages || [];
  const firstUser = msgs.findIndex((m) => m && m.role === 'user');
  if (firstUser < 0) return null;
  return `h:${hash(JSON.stringify(msgs.slice(0, firstUser + 1).map((m) => [m.role, m.content])))}`;
}

function hasOutput(chunk) {
  const cs = chunk && Array.isArray(chunk.choices) ? chunk.choices : [];
  return cs.some(choiceHasOutput);
}

function promptChars(kind, p) {
  if (kind !== 'chat') return typeof p.prompt === 'string' ? p.prompt.length : String(p.prompt ?? '').length;
  return (p.messages || []).reduce((n, m) => n + (typeof m.content === 'string' ? m.content.length : JSON.stringify(m.content ?? '').length), 0);
}

export class Router {
  #hooks;
  #conversations = new Map(); // key → target of its last turn (bounded)

  /**
   * @param {{local: Function, countTokens: Function, localState: Function, makeStream: Function}} hooks from the Engine
   * @param {object} config createEngine's `route` option (see index.d.ts RouteOptions)
   */
  constructor(hooks, config = {}) {
    this.#hooks = hooks;
    const mode = config.mode ?? (config.remote ? 'prefer-local' : 'local-only');
    if (!MODES.includes(mode)) throw invalid(`route.mode must be one of ${MODES.join(', ')}; got ${JSON.stringify(mode)}`);
    this.mode = mode;
    this.config = config;
    this.client = config.remote ? new RemoteClient(config.remote) : null;
    this.remote = this.client ? new RemoteState(this.client, config.health || {}) : null;
    this.estimates = new Estimates(config.priors);
    this.defaultMaxTokens = config.defaultMaxTokens ?? 256;
    this.maxContextTokens = config.local && config.local.maxContextTokens;
    // route.cost: a function replaces the cost; an options object turns on the device's cost
    // terms (router/cost.js) beside the mode's preference.
    this.costFn = typeof config.cost === 'function' ? config.cost : null;
    this.costOpts = config.cost !== undefined && config.cost !== null && !this.costFn ? costOptions(config.cost) : null;
    /** The last decision (for debugging and tests). */
    this.lastRoute = null;
  }

  // ── facts ──────────────────────────────────────────────────────────────────────────────
  async #localFacts(kind, clean, mode, nOut) {
    if (mode === 'remote-only') return { reason: null, prompt_tokens: null };
    const st = this.#hooks.localState();
    const info = st.model || (st.reloadable ? st.lastModel : null);
    if (!info) return { reason: st.lastLoadError === ErrorCode.OVER_MEMORY_BUDGET ? 'over_memory_budget' : 'no_local_model', prompt_tokens: null };
    if (st.memoryBudget && (st.memoryNeed ?? info.weights_bytes) > st.memoryBudget) return { reason: 'over_memory_budget', prompt_tokens: null };
    const budget = Math.min(info.max_context, this.maxContextTokens ?? Infinity);
    let n = null;
    let fits = true;
    if (st.model) {
      // Counted by the worker's tokenizer, chat template included.
      const c = await this.#hooks.countTokens(kind, clean);
      n = c.prompt_tokens;
      fits = c.fits;
    }
    if (n === null) n = Math.ceil(promptChars(kind, clean) / 3);
    const out = { prompt_tokens: n, budget, loaded: !!st.model, load_ms: info.load_ms };
    if (!fits || n >= budget) return { ...out, reason: 'prompt_over_kv_budget' };
    const room = budget - n;
    return { ...out, reason: null, max_tokens: Math.min(nOut ?? room, room) };
  }

  async #remoteFacts() {
    if (!this.client) return { reason: 'remote_not_configured', info: null };
    const before = this.remote.health;
    const [h, info] = await Promise.all([this.remote.checkHealth(), this.remote.modelInfo()]);
    if (h !== before && h.ok && h.rtt_ms) this.estimates.observeRtt(h.rtt_ms);
    let reason = null;
    if (!h.ok) reason = h.reason || 'remote_unavailable';
    else if (info && info.error && info.error.code === ErrorCode.REMOTE_UNAUTHORIZED) reason = 'remote_unauthorized';
    return { reason, info: info && !info.error ? info : null, health: h };
  }

  /** The device signals the cost terms read: the app's `cost.signals()` or the browser's APIs. */
  async #signals() {
    const st = this.#hooks.localState();
    let raw;
    if (this.costOpts.signals) raw = { throttled: st.throttled, ...(await this.costOpts.signals()) };
    else {
      const dev = this.#hooks.deviceSignals ? this.#hooks.deviceSignals() : null;
      raw = { ...(dev ? await dev.read() : {}), throttled: st.throttled };
    }
    return normalizeSignals(raw);
  }

  // ── the request ────────────────────────────────────────────────────────────────────────
  /** Routes one request (the Engine's chat.completions.create / completions.create). */
  async create(kind, params, options = {}) {
    if (!params || typeof params !== 'object') throw invalid('create() needs a parameters object');
    const signal = requestSignal(params, options);
    if (signal && signal.aborted) throw abortedError('generation');
    const ro = params.route ?? {};
    if (typeof ro !== 'object') throw invalid('route must be an object such as {mode: "prefer-local"}');
    const mode = ro.mode ?? this.mode;
    if (!MODES.includes(mode)) throw invalid(`route.mode must be one of ${MODES.join(', ')}; got ${JSON.stringify(mode)}`);
    // An engine configured local-only stays local-only: no request can widen it.
    if (this.mode === 'local-only' && mode !== 'local-only') throw invalid(`this engine is local-only; route.mode ${JSON.stringify(mode)} is not allowed`);
    const clean = { ...params };
    for (const k of ROUTER_PARAMS) delete clean[k];
    if (kind === 'chat' && (!Array.isArray(clean.messages) || clean.messages.length === 0)) throw invalid('messages must be a non-empty array');
    if (kind !== 'chat' && typeof clean.prompt !== 'string' && !Array.isArray(clean.prompt)) throw invalid('prompt must be a string');
    // The core's rules (src/protocol), whatever the route: a request the engine would refuse is
    // refused the same way before it could go to the server.
    if (this.#hooks.validate) await this.#hooks.validate(kind, clean);

    // Only a real boolean: `private: "true"` or `1` is refused, never read as "not private".
    let isPrivate = strictBoolean(params, 'private') === true;
    if (!isPrivate && this.config.isSensitive) {
      isPrivate = !!(await this.config.isSensitive(kind === 'chat' ? clean.messages : clean.prompt, params));
    }
    // max_completion_tokens wins over max_tokens, as in the engine's request rules.
    const nOutReq = clean.max_completion_tokens ?? clean.max_tokens ?? null;
    const nOut = nOutReq ?? this.defaultMaxTokens;
    const remoteAllowed = mode !== 'local-only' && !isPrivate;

    const [local, remote] = await Promise.all([
      this.#localFacts(kind, clean, mode, nOutReq),
      remoteAllowed ? this.#remoteFacts() : Promise.resolve({ reason: null, info: null }),
    ]);
    if (signal && signal.aborted) throw abortedError('generation');
    // With no alternative, a failed health check does not stop the attempt: the request itself
    // then fails with the server's real error (REMOTE_UNAVAILABLE when it is really down).
    if (mode === 'remote-only' && remote.reason === 'remote_unavailable') remote.reason = null;
    const promptTokens = local.prompt_tokens ?? Math.ceil(promptChars(kind, clean) / 3);

    // Capability (Q_r(x) >= Q_min): the app's rule, per target.
    const cap = this.config.capability;
    for (const [t, facts] of [['local', local], ['remote', remote]]) {
      if (!facts.reason && cap && !cap({ target: t, params, model: t === 'local' ? this.#hooks.localState().model : remote.info })) facts.reason = 'capability';
    }
    const canLocal = mode !== 'remote-only' && !['no_local_model', 'over_memory_budget'].includes(local.reason);
    const estimates = {
      t_local_ms: canLocal ? Math.round(this.estimates.tLocal({ promptTokens, maxTokens: Math.min(nOut, local.max_tokens ?? nOut), loaded: local.loaded, loadMs: local.load_ms })) : null,
      t_remote_ms: remoteAllowed && this.client ? Math.round(this.estimates.tRemote({ promptTokens, maxTokens: nOut })) : null,
    };

    // Version consistency: the local model's sha256 against the server's /v1/models.
    const localModel = this.#hooks.localState().model;
    const version = {
      local: localModel ? localModel.sha256 : null,
      remote: remote.info ? remote.info.sha256 : null,
      match: null,
    };
    if (version.local && version.remote) version.match = version.local === version.remote;
    const key = conversationKey(kind, clean, params.conversation_id);
    const pinOn = ro.pinOnVersionMismatch ?? this.config.pinOnVersionMismatch ?? false;
    const pinned = pinOn && version.match === false && key && this.#conversations.has(key) ? this.#conversations.get(key) : null;

    // The cost terms, only where they can matter: both routes allowed by mode and privacy.
    let cost = null;
    if (this.costOpts && remoteAllowed && mode !== 'remote-only') {
      const signals = await this.#signals();
      cost = { signals, terms: costTerms(signals, this.costOpts) };
    }
    const d = decide({
      mode,
      private: isPrivate,
      maxLatencyMs: params.max_latency_ms ?? ro.maxLatencyMs ?? this.config.maxLatencyMs ?? null,
      local,
      remote,
      estimates,
      pinned,
      cost: this.costFn ? (t) => this.costFn(t, { estimates, params, mode }) : undefined,
      costTerms: cost && cost.terms,
    });
    if (cost && d.costs) cost.costs = d.costs;
    const route = {
      target: d.target,
      reason: d.reason,
      mode,
      estimates,
      ruled_out: d.ruled_out,
      version,
      prompt_tokens: local.prompt_tokens,
      kv_budget: local.budget ?? null,
      private: isPrivate,
      // With route.cost options: the signals read, the terms that fired, the costs compared.
      cost,
    };
    this.lastRoute = route;
    if (!d.target) throw noRouteError(d, route);
    if (this.config.onDecision) this.config.onDecision(route);

    const ctx = { kind, clean, signal, local, remote, route };
    let run;
    try {
      run = await this.#start(route.target, ctx);
    } catch (e) {
      if (e && e.code === ErrorCode.ABORTED) throw e;
      const from = route.target;
      const to = other(from);
      const ok =
        from === 'remote'
          ? (remoteRetriable(e) || e.code === ErrorCode.REMOTE_INTERRUPTED) && mode !== 'remote-only' && !local.reason && pinned !== 'remote'
          : LOCAL_FAILOVER.has(e.code) && remoteAllowed && !!this.client && !remote.reason && pinned !== 'local';
      if (from === 'remote' && remoteRetriable(e)) this.remote.markDown();
      if (!ok) {
        e.route = route;
        throw e;
      }
      route.fallback_from = from;
      route.target = to;
      route.reason = from === 'remote' ? (e.status ? `remote_error_${e.status}` : 'remote_unavailable') : String(e.code).toLowerCase();
      route.error = { code: e.code, message: e.message, ...(e.status ? { status: e.status } : {}), ...(e.detail ? { detail: e.detail } : {}) };
      try {
        run = await this.#start(to, ctx);
      } catch (e2) {
        e2.route = route;
        throw e2;
      }
    }
    if (key) {
      this.#conversations.delete(key);
      this.#conversations.set(key, route.target);
      if (this.#conversations.size > 256) this.#conversations.delete(this.#conversations.keys().next().value);
    }
    const includeUsage = !!(params.stream_options && params.stream_options.include_usage);
    return params.stream ? this.#stream(run, ctx, includeUsage) : this.#collect(run, ctx);
  }

  /**
   * Starts `target` and reads until its first output (a token or the end): failures up to there
   * may fail over. Resolves with the chunks read so far and the iterator for the rest.
   */
  async #start(target, ctx) {
    const t0 = performance.now();
    let it;
    let abort;
    if (target === 'local') {
      const p = { ...ctx.clean, stream: true, stream_options: { include_usage: true } };
      delete p.max_completion_tokens;
      if (ctx.local.max_tokens !== undefined) p.max_tokens = ctx.local.max_tokens;
      const s = await this.#hooks.local(ctx.kind, p, { signal: ctx.signal });
      it = s[Symbol.asyncIterator]();
      abort = () => s.abort();
    } else {
      const body = this.client.body(ctx.kind, ctx.clean, ctx.remote.info && ctx.remote.info.id);
      const conn = await this.client.open(ctx.kind, body, ctx.signal);
      it = conn.chunks;
      abort = conn.abort;
    }
    const first = [];
    try {
      for (;;) {
        const r = await it.next();
        if (r.done) return { target, t0, it, abort, first, ended: true, firstOutputAt: performance.now() };
        first.push(r.value);
        if (hasOutput(r.value)) break;
      }
    } catch (e) {
      abort();
      throw e;
    }
    return { target, t0, it, abort, first, ended: false, firstOutputAt: performance.now() };
  }

  /** Reads a started run to its end: chunks in order (usage merged onto the finish chunk). */
  async *#chunks(run, ctx) {
    const route = ctx.route;
    let held = null; // the finish chunk, held until its usage is known
    let usage = null;
    let outputs = 0;
    let lastOutputAt = run.firstOutputAt;
    let meta = null;
    // A remote answer's decode speed per window, from the chunks' arrival here (network
    // included); a local one is measured in the worker and comes with its usage.
    const meter = run.target === 'remote' ? new DecodeWindows(this.#hooks.sustained ? this.#hooks.sustained() : {}) : null;
    // The chunks to pass on now. A finish chunk is held until the next chunk with choices (with
    // `n > 1`, the next choice's) or the end.
    const take = (c, at = performance.now()) => {
      if (!meta && c && c.id) meta = { id: c.id, created: c.created, model: c.model, object: c.object };
      if (c && Array.isArray(c.choices) && c.choices.length === 0) {
        if (c.usage) usage = c.usage;
        return [];
      }
      const out = [];
      if (held && c) {
        out.push(held);
        held = null;
      }
      if (c && c.usage) usage = c.usage;
      if (c && (c.choices || []).some((x) => x && ((x.delta && (x.delta.content || x.delta.tool_calls)) || x.text))) {
        outputs++;
        lastOutputAt = at;
        if (meter) meter.token(at);
      }
      if (c && c.choices && c.choices.some((x) => x && x.finish_reason)) held = c;
      else out.push(c);
      return out;
    };
    const finalUsage = () => {
      const u = { ...(usage || {}) };
      const ttft = run.firstOutputAt - run.t0;
      if (u.prompt_tokens === undefined) u.prompt_tokens = route.prompt_tokens ?? 0;
      if (u.completion_tokens === undefined) u.completion_tokens = outputs;
      u.total_tokens = (u.prompt_tokens || 0) + (u.completion_tokens || 0);
      if (u.ttft_ms === undefined) u.ttft_ms = ttft;
      if (u.tpot_ms === undefined) u.tpot_ms = outputs > 1 ? (lastOutputAt - run.firstOutputAt) / (outputs - 1) : 0;
      if (u.prefill_tokens_per_s === undefined) u.prefill_tokens_per_s = ttft > 0 ? (u.prompt_tokens * 1000) / ttft : 0;
      if (u.decode_tokens_per_s === undefined) u.decode_tokens_per_s = u.tpot_ms > 0 ? 1000 / u.tpot_ms : 0;
      if (meter && u.compute && typeof u.compute === 'object' && u.compute.sustained === undefined) u.compute = { ...u.compute, sustained: meter.summary() };
      return u;
    };
    try {
      for (const c of run.first) {
        for (const out of take(c, run.firstOutputAt)) yield { chunk: out };
      }
      if (!run.ended) {
        for (;;) {
          const r = await run.it.next();
          if (r.done) break;
          for (const out of take(r.value)) yield { chunk: out };
        }
      }
    } catch (e) {
      if (e && e.code === ErrorCode.ABORTED) throw e;
      // Broke after the first token: what was delivered stays; the response ends here.
      yield { error: e, meta, usage: finalUsage() };
      return;
    }
    const u = finalUsage();
    if (run.target === 'local') this.estimates.observeLocal(u);
    else this.estimates.observeRemote(usage, { prompt_tokens: u.prompt_tokens, ttft_ms: u.ttft_ms, tpot_ms: u.tpot_ms });
    // OpenAI's shape: the finish chunk carries no usage (a usage-only chunk follows, see #stream).
    if (held) yield { chunk: held };
    yield { usage: u, meta };
  }

  #errorInfo(e) {
    const code = e.code === ErrorCode.REMOTE_INTERRUPTED || e.code === ErrorCode.ENGINE_CRASHED ? e.code : e.code || ErrorCode.INTERNAL;
    return { code, message: e.message, ...(e.detail ? { detail: e.detail } : {}) };
  }

  #stream(run, ctx, includeUsage) {
    const route = ctx.route;
    const kind = ctx.kind;
    const out = this.#hooks.makeStream(() => run.abort(), ctx.signal);
    (async () => {
      let meta = null;
      try {
        for await (const ev of this.#chunks(run, ctx)) {
          if (ev.chunk) {
            if (!meta) meta = { id: ev.chunk.id, created: ev.chunk.created, model: ev.chunk.model, object: ev.chunk.object };
            out._push({ ...ev.chunk, route });
            // A reader slower than the source holds the source back (bounded memory).
            await out._room();
          } else if (ev.error) {
            const m = meta || ev.meta || {};
            const choice = kind === 'chat' ? { index: 0, delta: {}, logprobs: null, finish_reason: 'error' } : { index: 0, text: '', logprobs: null, finish_reason: 'error' };
            out._push({ id: m.id, object: m.object || (kind === 'chat' ? 'chat.completion.chunk' : 'text_completion'), created: m.created, model: m.model, choices: [choice], usage: ev.usage, error: this.#errorInfo(ev.error), route });
          } else if (ev.usage && includeUsage) {
            const m = meta || ev.meta || {};
            out._push({ id: m.id, object: m.object, created: m.created, model: m.model, choices: [], usage: ev.usage, route });
          }
        }
        out._end();
      } catch (e) {
        out._end(e);
      }
    })();
    return out;
  }

  async #collect(run, ctx) {
    const kind = ctx.kind;
    // One entry per choice (OpenAI's `n`); a chunk's index is trusted only within [0, n).
    const n = Number.isInteger(ctx.clean.n) && ctx.clean.n > 0 ? ctx.clean.n : 1;
    const choices = [];
    const choiceAt = (i) => {
      const k = Number.isInteger(i) && i >= 0 && i < n ? i : 0;
      if (!choices[k]) choices[k] = { text: '', calls: [], logprobs: null, finish: null };
      return choices[k];
    };
    let usage = null;
    let meta = null;
    let error = null;
    try {
      for await (const ev of this.#chunks(run, ctx)) {
        if (ev.chunk) {
          const c = ev.chunk;
          if (!meta) meta = { id: c.id, created: c.created, model: c.model };
          for (const ch of c.choices || []) {
            if (!ch || typeof ch !== 'object') continue;
            const a = choiceAt(ch.index);
            a.text += (ch.delta ? ch.delta.content : ch.text) || '';
            if (ch.delta && ch.delta.tool_calls) a.calls = mergeToolCalls(a.calls, ch.delta.tool_calls);
            if (ch.finish_reason) a.finish = ch.finish_reason;
            if (ch.logprobs) a.logprobs = mergeLogprobs(a.logprobs, ch.logprobs);
          }
          if (c.usage) usage = c.usage;
        } else if (ev.error) {
          error = this.#errorInfo(ev.error);
          usage = ev.usage;
          for (const a of choices.length ? choices : [choiceAt(0)]) if (a && !a.finish) a.finish = 'error';
          meta = meta || ev.meta;
        } else if (ev.usage) {
          usage = ev.usage;
        }
      }
    } catch (e) {
      e.route = ctx.route;
      throw e;
    }
    const m = meta || {};
    if (!choices.length) choiceAt(0);
    const out = [];
    choices.forEach((a, index) => {
      if (!a) return;
      const message = { role: 'assistant', content: a.text };
      if (a.calls.length) Object.assign(message, { content: a.text || null, tool_calls: a.calls });
      out.push(
        kind === 'chat'
          ? { index, message, logprobs: a.logprobs, finish_reason: a.finish || 'stop' }
          : { index, text: a.text, logprobs: a.logprobs, finish_reason: a.finish || 'stop' },
      );
    });
    const r = { id: m.id, object: kind === 'chat' ? 'chat.completion' : 'text_completion', created: m.created, model: m.model, choices: out, usage, route: ctx.route };
    if (error) r.error = error;
    return r;
  }
}
