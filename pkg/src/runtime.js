// The worker side: hosts one wasm engine and serves the protocol of protocol.js.
// Environment-neutral: worker.js (browser) and worker-node.js (Node worker_threads) pass in
// `post`, `initWasm`, `openCache` and (Node) `fs`.
//
// Everything heavy runs in small steps with an `await` between them (a network/file chunk, a
// prefill chunk, a decode step), so `abort` and `status` messages are handled while an
// operation runs. Every wasm call goes through `#call`, which turns a core error into an
// EdgeLLMError with a stable code, and a trap (Rust panic) into a fatal ENGINE_CRASHED.

import { PROTOCOL_VERSION, Req, Ev, IMMEDIATE } from './protocol.js';
import { EdgeLLMError, ErrorCode, abortedError, toEdgeError, umbrellaCode } from './errors.js';
import { FaultPlan, decodeDelaySpec, stallThread } from './test-faults.js';
import { readUrl, readBlob, readPath, pathSize } from './loader.js';
import { readUrlHead, slices } from './memory.js';
import { NoCache } from './cache.js';
import { openSessionStore } from './sessions.js';
import { DecodeWindows } from './sustained.js';

const now = () => performance.now();

/** Resolves after the event loop had a chance to run other tasks (incoming messages first). */
export const yieldToEventLoop =
  typeof setImmediate === 'function'
    ? () => new Promise((r) => setImmediate(r))
    : (() => {
        const ch = new MessageChannel();
        const waiting = [];
        ch.port1.onmessage = () => waiting.shift()();
        return () =>
          new Promise((r) => {
            waiting.push(r);
            ch.port2.postMessage(0);
          });
      })();

class Fatal extends EdgeLLMError {}

/** The core's EstimateReport → the shape `engine.estimate()` resolves with. */
function shapeEstimate(r) {
  const e = r.estimate;
  return {
    fits: r.fits,
    budget_bytes: r.budget_bytes ?? null,
    terms: { weights: e.weights, kv: e.kv, activations: e.activations, runtime: e.runtime },
    total: e.total,
    load_peak: e.load_peak,
    peak: e.peak,
    kv: { tokens: e.kv_tokens, dtype: e.kv_dtype, bytes_per_token: e.kv_bytes_per_token },
    batch: e.batch,
    parts: { activations: e.activation_parts, runtime: e.runtime_parts },
    model: { name: r.name ?? null, architecture: r.architecture ?? null, n_vocab: r.n_vocab, n_layer: r.n_layer, context_length: r.context_length, header_bytes: r.header_bytes },
  };
}

const mib = (b) => `${(b / 1048576).toFixed(1)} MiB`;

function overBudget(est) {
  const t = est.terms;
  return new EdgeLLMError(
    ErrorCode.OVER_MEMORY_BUDGET,
    `the model needs an estimated ${mib(est.peak)} (weights ${mib(t.weights)} + KV ${mib(t.kv)} + activations ${mib(t.activations)} + runtime ${mib(t.runtime)}; load peak ${mib(est.load_peak)}), more than the memory budget of ${mib(est.budget_bytes)}`,
    { detail: 'OVER_MEMORY_BUDGET', terms: t, budget_bytes: est.budget_bytes, estimate: est },
  );
}

function isTrap(e) {
  return (typeof WebAssembly !== 'undefined' && e instanceof WebAssembly.RuntimeError) || (e && e.name === 'RuntimeError');
}

export class Runtime {
  /**
   * @param {{post: (msg: object) => void,
   *          initWasm: (wasmUrl: string|undefined, simd: 'auto'|'relaxed'|'simd128'|undefined,
   *                     log: (level: string, message: string) => void) => Promise<{bindings: any, exports: any}>,
   *          openCache: (cfg: {enabled: boolean, dir?: string}) => Promise<any>, fs?: any}} env
   */
  constructor(env) {
    this.env = env;
    this.queue = [];
    this.running = null; // {id, type, controller}
    this.bindings = null;
    this.exports = null;
    this.engine = null;
    this.model = null;
    this.cache = new NoCache();
    this.dead = null; // the fatal error once the wasm instance trapped
    this.jsBuffers = 0; // bytes of model data the worker holds outside wasm memory right now
    this.jsBuffersPeak = 0; // their peak during the last load (the header's chunks, while admitting it)
    this.faults = new FaultPlan(); // test-only (test-faults.js): unarmed unless a test arms it
  }

  // ── message entry ────────────────────────────────────────────────────────────────────────
  handle(msg) {
    if (!msg || typeof msg !== 'object') return;
    if (IMMEDIATE.has(msg.type)) {
      if (msg.type === Req.ABORT) this.#abort(msg.target);
      else if (msg.type === Req.STATUS) this.#reply(msg.id, this.#status());
      else if (msg.type === Req.PARSE) this.#parseOp(msg);
      return;
    }
    if (this.dead) {
      this.env.post({ type: Ev.ERROR, id: msg.id, error: this.dead.toJSON(), fatal: true });
      return;
    }
    this.queue.push(msg);
    this.#pump();
  }

  /** A fatal error raised outside any operation (uncaught exception in the worker). */
  fatal(e) {
    const err = e instanceof EdgeLLMError ? e : new EdgeLLMError(ErrorCode.ENGINE_CRASHED, `worker error: ${e && e.message ? e.message : e}`);
    this.dead = err;
    this.env.post({ type: Ev.ERROR, id: this.running ? this.running.id : null, error: err.toJSON(), fatal: true });
  }

  async #pump() {
    if (this.running) return;
    while (this.queue.length && !this.dead) {
      const msg = this.queue.shift();
      const controller = new AbortController();
      this.running = { id: msg.id, type: msg.type, controller };
      try {
        const value = await this.#run(msg, controller.signal);
        if (controller.signal.aborted) throw abortedError(msg.type);
        this.#reply(msg.id, value);
      } catch (e) {
        const err = controller.signal.aborted && !(e instanceof Fatal) ? abortedError(msg.type) : toEdgeError(e);
        if (e instanceof Fatal) this.dead = err;
        this.env.post({ type: Ev.ERROR, id: msg.id, error: err.toJSON(), ...(e instanceof Fatal ? { fatal: true } : {}) });
      } finally {
        this.running = null;
      }
    }
  }

  #abort(target) {
    if (this.running && this.running.id === target) {
      this.running.controller.abort();
      return;
    }
    const i = this.queue.findIndex((m) => m.id === target);
    if (i >= 0) {
      const [m] = this.queue.splice(i, 1);
      this.env.post({ type: Ev.ERROR, id: m.id, error: abortedError(m.type).toJSON() });
    }
  }

  #reply(id, value) {
    this.env.post({ type: Ev.RESULT, id, value: value === undefined ? null : value });
  }

  #status() {
    return {
      loaded: !!this.model,
      model: this.model,
      busy: !!this.running,
      running: this.running ? this.running.type : null,
      queued: this.queue.length,
      wasm_memory_bytes: this.exports && this.exports.memory ? this.exports.memory.buffer.byteLength : 0,
      memory_level: this.lastMemory ? this.lastMemory.level : null,
      dead: !!this.dead,
    };
  }

  #run(msg, signal) {
    switch (msg.type) {
      case Req.INIT:
        return this.#init(msg);
      case Req.LOAD:
        return this.#load(msg, signal);
      case Req.GENERATE:
        return this.#generate(msg, signal);
      case Req.COUNT:
        return this.#count(msg);
      case Req.UNLOAD:
        this.#unload();
        return null;
      case Req.CACHE:
        return this.#cacheOp(msg);
      case Req.ESTIMATE:
        return this.#estimate(msg, signal);
      case Req.MEMORY:
        return this.#memoryOp(msg);
      case Req.SESSION:
        return this.#sessionOp(msg);
      case Req.DEBUG:
        if (msg.action === 'panic') return this.#call(() => this.bindings.debug_panic());
        if (msg.action === 'fault') {
          if (msg.spec && msg.spec.fault === 'pool-panic' && !(this.threads > 1)) {
            throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'debug fault: pool-panic needs the threaded build on more than one thread');
          }
          return this.faults.arm(msg.spec);
        }
        if (msg.action === 'decode-delay') return this.#setDecodeDelay(msg);
        throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `unknown debug action ${msg.action}`);
      default:
        throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `unknown message type ${JSON.stringify(msg.type)}`);
    }
  }

  // ── wasm calls ───────────────────────────────────────────────────────────────────────────
  /** Runs a wasm call; core errors → EdgeLLMError, traps → Fatal (ENGINE_CRASHED). */
  #call(fn) {
    try {
      return fn();
    } catch (e) {
      if (isTrap(e) || (e && /recursive use of an object|already mutably borrowed|null pointer passed to rust/i.test(String(e.message)))) {
        let panic = '';
        try {
          panic = this.bindings && this.bindings.take_panic_message ? this.bindings.take_panic_message() : '';
        } catch {
          /* the instance may be too broken even for that */
        }
        throw new Fatal(ErrorCode.ENGINE_CRASHED, `the wasm engine crashed: ${panic || (e && e.message) || e}`, { detail: 'WASM_TRAP' });
      }
      if (e instanceof EdgeLLMError) throw e;
      const detail = e && typeof e === 'object' && typeof e.code === 'string' ? e.code : undefined;
      if (detail) throw new EdgeLLMError(umbrellaCode(detail), String(e.message || detail), { detail });
      throw toEdgeError(e);
    }
  }

  /** Fires the test fault armed for this point, if it is due (test-faults.js). */
  #faultPoint(point) {
    const f = this.faults.due(point);
    if (!f) return;
    if (f.fault === 'panic') this.#call(() => this.bindings.debug_panic());
    else if (f.fault === 'pool-panic') this.bindings.debug_pool_panic();
    else stallThread(f.ms);
  }

  #json(fn) {
    const s = this.#call(fn);
    return typeof s === 'string' ? JSON.parse(s) : s;
  }

  async #init(msg) {
    if (!this.bindings) {
      try {
        const { bindings, exports, threads } = await this.env.initWasm(msg.wasmUrl, msg.simd, (level, message) => this.#log(level, message), msg.threads);
        this.bindings = bindings;
        this.exports = exports;
        this.threads = threads || 1;
      } catch (e) {
        if (e instanceof EdgeLLMError) throw e; // e.g. RELAXED_SIMD_UNSUPPORTED from the tier choice
        throw new EdgeLLMError(ErrorCode.ENGINE_INIT_FAILED, `could not start the wasm engine: ${e && e.message ? e.message : e}`, { cause: e });
      }
      this.engine = this.#call(() => new this.bindings.WasmEngine());
      // The pool's workers are parked: from now on every forward pass is split over them.
      if (this.threads > 1) this.#call(() => this.engine.set_threads(this.threads));
    }
    if (msg.memory) this.#call(() => this.engine.set_memory_options(JSON.stringify(msg.memory)));
    // The power model of usage.compute.energy_j (validated by the core: INVALID_REQUEST).
    if (msg.energy && this.engine.set_power_model) this.#call(() => this.engine.set_power_model(JSON.stringify(msg.energy)));
    this.#postMemory('init');
    try {
      this.cache = await this.env.openCache(msg.cache || { enabled: false });
      this.sessions = null; // opened beside the cache on first use
    } catch (e) {
      this.#log('warn', `model cache unavailable: ${e && e.message ? e.message : e}`);
      this.cache = new NoCache();
    }
    return {
      version: this.#call(() => this.bindings.version()),
      protocol: PROTOCOL_VERSION,
      cache: this.cache.kind,
      simd: this.bindings.simd_enabled ? !!this.#call(() => this.bindings.simd_enabled()) : null,
      // The build that runs: 'relaxed-simd' | 'simd128' | 'scalar' (null: a wasm without the export).
      simd_tier: this.bindings.simd_tier ? this.#call(() => this.bindings.simd_tier()) : null,
      // Threads every forward pass runs on (1: a single-thread build).
      threads: this.engine.threads ? this.#call(() => this.engine.threads()) : 1,
    };
  }

  #log(level, message) {
    this.env.post({ type: Ev.LOG, level, message });
  }

  #unload() {
    if (this.engine) this.#call(() => this.engine.unload());
    this.model = null;
  }

  // ── load ─────────────────────────────────────────────────────────────────────────────────
  async #load(msg, signal) {
    try {
      return await this.#loadInner(msg, signal);
    } finally {
      // The ledger after the load (or the refusal): estimate and measurements per term.
      this.#postMemory('load');
    }
  }

  async #loadInner(msg, signal) {
    this.#requireEngine();
    // Bad KV options are refused before anything is unloaded: the current model stays.
    if (this.engine.check_kv_options) this.#call(() => this.engine.check_kv_options(JSON.stringify(msg.kv ?? null)));
    // Free the previous model first: holding two models at once would double the peak.
    this.#unload();
    const t0 = now();
    const src = msg.source || {};
    const interval = msg.progressIntervalMs ?? 50;
    const ctx = { id: msg.id, signal, interval, budget: msg.budget };
    // The session's KV cache (budget, f16/q8, policy, sinks); null: the plain context.
    if (this.engine.set_kv_options) this.#call(() => this.engine.set_kv_options(JSON.stringify(msg.kv ?? null)));
    let info;
    if (src.kind === 'blob') {
      info = await this.#stream({ ...ctx, phase: 'file', total: src.blob.size, chunks: readBlob(src.blob, { signal }), sha256: msg.sha256 });
      info.source = 'file';
    } else if (src.kind === 'path') {
      if (!this.env.fs) throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'file paths can only be loaded under Node');
      const total = await pathSize(this.env.fs, src.path);
      info = await this.#stream({ ...ctx, phase: 'file', total, chunks: readPath(this.env.fs, src.path, { signal }), sha256: msg.sha256 });
      info.source = 'file';
    } else if (src.kind === 'url') {
      info = await this.#loadUrl(src, msg, ctx);
    } else {
      throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'load: source must be a URL, a Blob/File, or (Node) a file path');
    }
    info.load_ms = Math.round(now() - t0);
    this.model = info;
    return info;
  }

  async #loadUrl(src, msg, ctx) {
    const useCache = msg.cache !== false && this.cache.kind !== 'none';
    if (useCache) {
      let hit = null;
      try {
        hit = await this.cache.lookup(src.url);
      } catch (e) {
        this.#log('warn', `cache lookup failed: ${e.message}`);
      }
      if (hit && hit.stale) this.#log('warn', `cache entry for ${src.url} dropped: ${hit.reason}`);
      if (hit && !hit.stale) {
        if (msg.sha256 && msg.sha256 !== hit.record.sha256) {
          this.#log('warn', `cache entry for ${src.url} has another sha256 than requested; fetching again`);
          await this.cache.evict(src.url);
        } else {
          try {
            await hit.begin?.(); // crash marker (cache.js): a crash here evicts at the next lookup
            const info = await this.#stream({ ...ctx, phase: 'cache', total: hit.size, chunks: hit.read({ signal: ctx.signal }), sha256: hit.record.sha256, fromCache: true });
            await hit.done?.();
            info.source = 'cache';
            return info;
          } catch (e) {
            // A corrupt or unreadable entry (digest mismatch, bad bytes, read error): drop it and
            // download again. Errors that are not about the bytes are final — and an engine crash
            // evicts the entry before it is rethrown, so the next load does not crash again.
            if (e instanceof Fatal || !(e instanceof EdgeLLMError)) {
              await this.cache.evict(src.url).catch(() => {});
              throw e;
            }
            if ([ErrorCode.ABORTED, ErrorCode.OVER_MEMORY_BUDGET, ErrorCode.UNSUPPORTED_MODEL].includes(e.code)) {
              await hit.done?.(); // the entry is not at fault: keep it
              throw e;
            }
            this.#log('warn', `cache entry for ${src.url} rejected (${e.message}); downloading again`);
            await this.cache.evict(src.url).catch(() => {});
          }
        }
      }
    }
    let total = null;
    let etag = null;
    const chunks = readUrl(src.url, {
      headers: src.headers,
      signal: ctx.signal,
      onStart: (i) => {
        total = i.total;
        etag = i.etag;
      },
      onResume: (r) => this.#log('info', `connection lost at byte ${r.offset}; resuming (attempt ${r.attempt}): ${r.reason}`),
    });
    let writer = null;
    const openWriter = async () => {
      if (!useCache) return;
      try {
        writer = await this.cache.writer(src.url);
      } catch (e) {
        this.#log('warn', `not caching ${src.url}: ${e.message}`);
      }
    };
    const info = await this.#stream({ ...ctx, phase: 'download', total: () => total, chunks, sha256: msg.sha256, beforeFirst: openWriter, writer: () => writer, dropWriter: () => (writer = null) });
    info.source = 'network';
    if (writer) {
      try {
        await writer.commit({ size: info.file_size, sha256: info.sha256, etag });
      } catch (e) {
        this.#log('warn', `could not record the cache entry: ${e.message}`);
        await writer.abort().catch(() => {});
      }
    }
    return info;
  }

  /**
   * Streams chunks into the engine's loader: header first (the core parses it incrementally),
   * then each tensor's bytes straight into its final allocation; the sha256 is computed on the
   * way. `total` may be a function (known once the first response arrived).
   */
  async #stream({ id, signal, interval, phase, total, chunks, sha256, fromCache, beforeFirst, writer, dropWriter, budget }) {
    const getTotal = typeof total === 'function' ? total : () => total;
    const getWriter = typeof writer === 'function' ? writer : () => null;
    let loaded = 0;
    let begun = false;
    let lastPost = -Infinity;
    const progress = (force) => {
      const t = now();
      if (force || t - lastPost >= interval) {
        lastPost = t;
        this.env.post({ type: Ev.PROGRESS, id, phase, loaded, total: getTotal() });
      }
    };
    // The ledger admits the model from its header before the loader allocates anything; the
    // load then takes that admission over (load_begin_admitted) instead of admitting it again.
    const admission = { admitted: false };
    chunks = this.#admitFirst(chunks, getTotal, budget, signal, admission);
    try {
      const it = chunks[Symbol.asyncIterator]();
      for (;;) {
        let r;
        r = await it.next();
        if (signal.aborted) throw abortedError('load');
        if (r.done) break;
        const chunk = r.value;
        if (!begun) {
          const t = getTotal();
          if (t === null || t === undefined) {
            throw new EdgeLLMError(ErrorCode.NETWORK, 'the server did not send a Content-Length: the model size must be known before loading', { detail: 'NO_CONTENT_LENGTH' });
          }
          if (beforeFirst) await beforeFirst();
          if (admission.admitted) this.#call(() => this.engine.load_begin_admitted(t, budget ?? undefined));
          else this.#call(() => this.engine.load_begin(t, budget ?? undefined));
          begun = true;
          progress(true);
        }
        this.#call(() => this.engine.load_push(chunk));
        this.#faultPoint('load');
        this.#pollMemory();
        const w = getWriter();
        if (w) {
          try {
            await w.write(chunk);
          } catch (e) {
            this.#log('warn', `cache write failed, not caching this model: ${e.message}`);
            await w.abort().catch(() => {});
            if (dropWriter) dropWriter();
          }
        }
        loaded += chunk.byteLength;
        progress(false);
      }
      if (!begun) {
        // An empty body: let the core say what that means (a truncated GGUF).
        this.#call(() => this.engine.load_begin(0));
        begun = true;
      }
      const info = this.#json(() => this.engine.load_finish());
      progress(true);
      if (sha256 && info.sha256 !== sha256.toLowerCase()) {
        this.#unload();
        throw new EdgeLLMError(ErrorCode.CHECKSUM_MISMATCH, `sha256 of the ${fromCache ? 'cached ' : ''}model is ${info.sha256}, expected ${sha256}`, { detail: 'SHA256_MISMATCH' });
      }
      return info;
    } catch (e) {
      if (begun && !this.dead && !(e instanceof Fatal)) {
        try {
          this.engine.load_cancel();
        } catch {
          /* already reset */
        }
      }
      const w = getWriter();
      if (w) await w.abort().catch(() => {});
      if (chunks.return) chunks.return().catch?.(() => {});
      throw e;
    }
  }

  #requireEngine() {
    if (!this.engine) throw new EdgeLLMError(ErrorCode.ENGINE_INIT_FAILED, 'the engine was not initialised');
  }

  // ── parse (the core's OpenAI rules, src/protocol) ────────────────────────────────────────
  #parseOp(msg) {
    try {
      if (this.dead) throw this.dead;
      this.#requireEngine();
      const value = this.#json(() => {
        try {
          return this.bindings.parse_openai_request(msg.kind, msg.params);
        } catch (e) {
          // A broken rule: its code and the parameter at fault travel with the error.
          if (e && typeof e.rule === 'string') throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, e.message, { detail: e.rule, ...(e.param ? { param: e.param } : {}) });
          throw e;
        }
      });
      this.#reply(msg.id, value);
    } catch (e) {
      const err = toEdgeError(e);
      if (e instanceof Fatal) this.dead = err;
      this.env.post({ type: Ev.ERROR, id: msg.id, error: err.toJSON(), ...(e instanceof Fatal || e === this.dead ? { fatal: true } : {}) });
    }
  }

  // ── generate ─────────────────────────────────────────────────────────────────────────────
  async #generate(msg, signal) {
    this.#requireEngine();
    if (!this.model) throw new EdgeLLMError(ErrorCode.MODEL_NOT_LOADED, 'no model is loaded: call engine.load() first');
    const id = msg.id;
    const begin = this.#json(() => this.engine.generate_begin(JSON.stringify(msg.request)));
    // OpenAI's response, chunks and usage are the core's (src/protocol/response.rs, the same as
    // edgellm serve's): `msg.openai` = {envelope: {kind, id, created, model, prompt_chars},
    // stream, include_usage}.
    const oa = msg.openai;
    const envelope = JSON.stringify(oa.envelope);
    const chunks = oa.stream ? this.#call(() => new this.bindings.OpenAiStream(envelope, !!oa.include_usage)) : null;
    const parse = (s) => (s === undefined || s === null ? undefined : JSON.parse(s));
    const first = chunks ? parse(this.#call(() => chunks.start())) : undefined;
    this.env.post({ type: Ev.STARTED, id, prompt_tokens: begin.prompt_tokens, cached_tokens: begin.cached_tokens, ...(first ? { chunk: first } : {}) });
    let active = true;
    // Decode speed per time window (sustained.js), measured here where the tokens are made.
    const windows = new DecodeWindows(msg.sustained || {});
    const delay = this.decodeDelay;
    let steps = 0;
    try {
      // Prefill in chunks; each call returns {done}.
      for (;;) {
        await yieldToEventLoop();
        if (signal.aborted) throw abortedError('generation');
        const p = this.#json(() => this.engine.prefill_chunk());
        this.#faultPoint('prefill');
        this.#pollMemory();
        if (p.done) break;
      }
      // Decode, one token per call.
      for (;;) {
        await yieldToEventLoop();
        if (signal.aborted) throw abortedError('generation');
        const ev = this.#json(() => this.engine.decode_step());
        this.#pollMemory();
        const chunk = chunks ? parse(this.#call(() => chunks.step(JSON.stringify({ text: ev.text || '', logprobs: ev.logprobs || [], tool_calls: ev.tool_calls || [] })))) : undefined;
        if ((ev.token !== null && ev.token !== undefined) || chunk) this.env.post({ type: Ev.TOKEN, id, text: ev.text || '', token: ev.token ?? null, ...(chunk ? { chunk } : {}) });
        if (ev.token !== null && ev.token !== undefined && windows.token(now()) !== null) this.env.post({ type: Ev.SUSTAINED, id, sustained: windows.summary() });
        if (ev.finish_reason) break;
        this.#faultPoint('decode'); // after the token went out: a crash here loses nothing emitted
        if (delay && ++steps > delay.after_tokens) await new Promise((r) => setTimeout(r, delay.ms));
      }
      const raw = this.#call(() => this.engine.generate_end());
      const result = JSON.parse(raw);
      result.sustained = windows.summary();
      active = false;
      this.#postMemory('request');
      if (this.lastMemory) result.memory = this.lastMemory;
      // The core's usage plus what only a local run has: the KV cache, the memory ledger and the
      // decode speed per window (usage.compute.sustained; the client adds the compute pressure).
      const usage = this.#json(() => this.bindings.openai_usage(raw));
      usage.kv = result.kv;
      if (result.memory) usage.memory = result.memory;
      if (usage.compute) usage.compute.sustained = result.sustained;
      const u = JSON.stringify(usage);
      result.openai = chunks ? { chunks: this.#json(() => chunks.end(result.finish_reason, u)) } : { response: this.#json(() => this.bindings.openai_completion(envelope, raw, u)) };
      return result;
    } finally {
      if (chunks && !this.dead) chunks.free();
      // A failed or aborted generation reports the ledger too.
      if (active && !this.dead) this.#postMemory('request');
      if (active && !this.dead) {
        try {
          this.engine.generate_cancel();
        } catch {
          /* already reset */
        }
      }
    }
  }

  /** Test hook (engine._debugDecodeDelay; its rule in test-faults.js). */
  #setDecodeDelay(msg) {
    this.decodeDelay = decodeDelaySpec(msg);
    return null;
  }

  // ── memory ledger ────────────────────────────────────────────────────────────────────────
  /**
   * Passes `chunks` through once the ledger has admitted the model from its header: until the
   * header is complete, chunks are kept here (JS memory, reported as js_buffers_bytes) and only
   * skimmed by the core in 64 KiB pieces, so a refused model never grows wasm memory. Sets
   * `admission.admitted` once the header fits (the core keeps that admission for the load).
   */
  async *#admitFirst(chunks, getTotal, budget, signal, admission) {
    const it = chunks[Symbol.asyncIterator]();
    let innerDone = false;
    const stash = [];
    this.jsBuffersPeak = 0;
    try {
      this.#call(() => this.engine.estimate_begin());
      let complete = false;
      let read = 0;
      while (!complete) {
        const r = await it.next();
        if (signal.aborted) throw abortedError('load');
        if (r.done) {
          innerDone = true;
          break;
        }
        const c = r.value.slice(); // readers may reuse their buffer
        read += c.byteLength;
        stash.push(c);
        this.jsBuffers += c.byteLength;
        this.jsBuffersPeak = Math.max(this.jsBuffersPeak, this.jsBuffers);
        for (const piece of slices(c)) {
          if (this.#json(() => this.engine.estimate_push(piece)).complete) {
            complete = true;
            break;
          }
        }
      }
      // A stream that ends inside the header: the loader says what is wrong with it.
      if (complete) {
        this.#admit(getTotal(), budget, read);
        admission.admitted = true;
      }
      while (stash.length) {
        const c = stash.shift();
        this.jsBuffers -= c.byteLength;
        yield c;
      }
      this.jsBuffers = 0;
      while (!innerDone) {
        const r = await it.next();
        if (r.done) {
          innerDone = true;
          break;
        }
        yield r.value;
      }
    } finally {
      this.jsBuffers = 0;
      if (!innerDone && it.return) await Promise.resolve(it.return()).catch(() => {});
    }
  }

  /** OVER_MEMORY_BUDGET (with the figures per term) unless the skimmed header's estimate fits;
   * `read`: the bytes of the file read to decide (the estimate's `bytes_read`, as `estimate()`). */
  #admit(total, budget, read) {
    const req = budget !== undefined && budget !== null ? { budget_bytes: budget } : {};
    const report = this.#json(() => this.engine.estimate_finish(total ?? undefined, JSON.stringify(req)));
    const est = { ...shapeEstimate(report), bytes_read: read };
    this.lastEstimate = est;
    if (!report.fits) throw overBudget(est);
  }

  async #estimate(msg, signal) {
    this.#requireEngine();
    const src = msg.source || {};
    let total = null;
    let chunks;
    if (src.kind === 'blob') {
      total = src.blob.size;
      chunks = readBlob(src.blob, { signal, chunkSize: 1 << 20 });
    } else if (src.kind === 'path') {
      if (!this.env.fs) throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'file paths can only be read under Node');
      total = await pathSize(this.env.fs, src.path);
      chunks = readPath(this.env.fs, src.path, { signal, chunkSize: 1 << 20 });
    } else if (src.kind === 'url') {
      chunks = readUrlHead(src.url, { headers: src.headers, signal, onTotal: (t) => (total = t) });
    } else {
      throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'estimate: source must be a URL, a Blob/File, or (Node) a file path');
    }
    this.#call(() => this.engine.estimate_begin());
    let complete = false;
    let read = 0;
    for await (const c of chunks) {
      if (signal.aborted) throw abortedError('estimate');
      read += c.byteLength;
      for (const piece of slices(c)) {
        if (this.#json(() => this.engine.estimate_push(piece)).complete) {
          complete = true;
          break;
        }
      }
      if (complete) break;
    }
    if (!complete) throw new EdgeLLMError(ErrorCode.GGUF_TRUNCATED, `the file ended inside its header (${read} bytes)`, { detail: 'GGUF_TRUNCATED' });
    const report = this.#json(() => this.engine.estimate_finish(total ?? undefined, JSON.stringify(msg.options || {})));
    return { ...shapeEstimate(report), bytes_read: read };
  }

  #memoryOp(msg) {
    this.#requireEngine();
    if (msg.action === 'set') this.#call(() => this.engine.set_memory_options(JSON.stringify(msg.options)));
    else if (msg.action !== 'get') throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `unknown memory action ${msg.action}`);
    this.#postMemory(msg.action === 'set' ? 'options' : 'read');
    return this.lastMemory;
  }

  /** Reports a pressure-level change (checked after every chunk and step). */
  #pollMemory() {
    if (!this.engine || !this.engine.memory_poll) return;
    const s = this.#call(() => this.engine.memory_poll());
    if (s) this.#postMemory('level', JSON.parse(s));
  }

  /** Posts the ledger's snapshot as a `memory` event and keeps it as the latest. */
  #postMemory(reason, snapshot) {
    if (!this.engine || this.dead || !this.engine.memory_snapshot) return;
    try {
      snapshot = snapshot || JSON.parse(this.engine.memory_snapshot());
    } catch {
      return; // the instance is broken: the crash is reported on its own
    }
    snapshot.js_buffers_bytes = this.jsBuffers;
    snapshot.js_buffers_peak_bytes = this.jsBuffersPeak;
    snapshot.reason = reason;
    this.lastMemory = snapshot;
    this.env.post({ type: Ev.MEMORY, snapshot });
  }

  // ── count ──────────────────────────────────────────────────────────────────────────────
  /** The prompt's tokens as generate would run them, and whether it fits (the core's count_tokens: no model call). */
  #count(msg) {
    this.#requireEngine();
    if (!this.model) throw new EdgeLLMError(ErrorCode.MODEL_NOT_LOADED, 'no model is loaded: call engine.load() first');
    return this.#json(() => this.engine.count_tokens(JSON.stringify(msg.request)));
  }

  // ── saved conversations (sessions.js, src/snapshot.rs) ──────────────────────────────────────
  async #sessionOp(msg) {
    this.#requireEngine();
    if (!this.sessions) this.sessions = await openSessionStore(this.cache);
    const key = msg.key;
    if (msg.action !== 'list' && (typeof key !== 'string' || key === '')) throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'a session key must be a non-empty string');
    const needModel = () => {
      if (!this.model) throw new EdgeLLMError(ErrorCode.MODEL_NOT_LOADED, 'no model is loaded: call engine.load() first');
    };
    switch (msg.action) {
      case 'save': {
        needModel();
        const bytes = this.#call(() => this.engine.session_save());
        const tokens = this.#call(() => this.engine.session_tokens());
        const record = { key, tokens, bytes: bytes.byteLength, model_sha256: this.model.sha256, saved_at: new Date().toISOString() };
        await this.sessions.put(key, bytes, record);
        return { key, tokens, bytes: bytes.byteLength };
      }
      case 'restore': {
        needModel();
        const entry = await this.sessions.get(key);
        if (!entry) throw new EdgeLLMError(ErrorCode.SESSION_NOT_FOUND, `no saved session ${JSON.stringify(key)}`);
        if (entry.record.model_sha256 !== this.model.sha256) {
          throw new EdgeLLMError(ErrorCode.SESSION_MISMATCH, `session ${JSON.stringify(key)} was saved with model sha256 ${entry.record.model_sha256}; the loaded model is ${this.model.sha256}`);
        }
        // The core checks the checksum, the model and the KV settings again; on error the
        // session is unchanged and the next request simply prefills.
        const tokens = this.#call(() => this.engine.session_restore(entry.bytes));
        return { key, tokens };
      }
      case 'list':
        return (await this.sessions.list()).map((r) => ({ key: r.key, tokens: r.tokens, bytes: r.bytes, model_sha256: r.model_sha256, saved_at: r.saved_at }));
      case 'delete':
        return { key, deleted: await this.sessions.delete(key) };
      default:
        throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `unknown session action ${msg.action}`);
    }
  }

  // ── cache maintenance ────────────────────────────────────────────────────────────────────
  async #cacheOp(msg) {
    switch (msg.action) {
      case 'list':
        return this.cache.list();
      case 'delete':
        await this.cache.evict(msg.url);
        return null;
      case 'clear':
        await this.cache.clear();
        return null;
      default:
        throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `unknown cache action ${msg.action}`);
    }
  }
}
