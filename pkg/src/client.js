// The client API (environment-neutral). index.js (browsers) and node.js (Node worker_threads)
// create it with a `spawn` function that starts a worker and a `normalizeSource` function.
//
//   const engine = await createEngine(options)
//   await engine.load(source, { onProgress, signal, cache, sha256 })
//   await engine.chat.completions.create({ messages, stream, max_tokens, ... })
//   await engine.completions.create({ prompt, ... })
//   await engine.unload(); engine.terminate()

import { Req, Ev, PROTOCOL_VERSION } from './protocol.js';
import { EdgeLLMError, ErrorCode, errorFromPayload, abortedError } from './errors.js';
import { Router, ROUTER_PARAMS } from './router.js';
import { memoryOptions } from './memory.js';
import { SIMD_OPTIONS, threadsOption } from './tier.js';
import { strictBoolean } from './strict.js';
import { sustainedOptions, THROTTLE_MEMORY_MS } from './sustained.js';
import { DeviceSignals } from './device-signals.js';

/** What `engine.on` accepts. */
const EVENTS = ['memory', 'pressure'];

let idCounter = 0;
const nextId = () => ++idCounter;

function randomId(prefix) {
  const bytes = new Uint8Array(12);
  globalThis.crypto.getRandomValues(bytes);
  return prefix + Array.from(bytes, (b) => b.toString(36).padStart(2, '0')).join('').slice(0, 24);
}

const invalid = (msg) => new EdgeLLMError(ErrorCode.INVALID_REQUEST, msg);

function optNumber(p, name, lo, hi, { int = false } = {}) {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi || (int && !Number.isInteger(v))) {
    throw invalid(`${name} must be ${int ? 'an integer' : 'a number'} in [${lo}, ${hi}], got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * The OpenAI parameters as the JSON text the core checks (src/protocol, through the worker): the
 * JS-only ones (AbortSignal, the router's) left out; undefined fields are absent, as in the
 * openai SDK; a non-finite number is refused here (JSON would turn it into null, i.e. absent).
 */
function paramsJson(params) {
  const body = {};
  for (const [k, v] of Object.entries(params)) if (!ROUTER_PARAMS.includes(k)) body[k] = v;
  try {
    return JSON.stringify(body, (k, v) => {
      if (typeof v === 'number' && !Number.isFinite(v)) throw invalid(`${k || 'a parameter'} must be a finite number, got ${v}`);
      if (typeof v === 'bigint') throw invalid(`${k} must be a number, got a BigInt`);
      return v;
    });
  } catch (e) {
    if (e instanceof EdgeLLMError) throw e;
    throw invalid(`the parameters are not JSON: ${e && e.message ? e.message : e}`);
  }
}

/** Energy options (createEngine({energy})) as sent to the core, which validates the numbers. */
function energyOptions(e) {
  if (e === undefined || e === null) return null;
  if (typeof e !== 'object') throw invalid('energy must be an object like {watts_per_busy_core: 1.33}');
  return { ...e };
}

function usageOf(r, pressure) {
  const usage = {
    prompt_tokens: r.prompt_tokens,
    completion_tokens: r.completion_tokens,
    total_tokens: r.prompt_tokens + r.completion_tokens,
    // OpenAI's field: prompt tokens the engine's KV cache already held from the previous
    // request (the earlier turns of the conversation), not prefilled again.
    prompt_tokens_details: { cached_tokens: r.cached_tokens ?? 0 },
    ttft_ms: r.ttft_ms,
    tpot_ms: r.tpot_ms,
    prefill_tokens_per_s: r.prefill_tokens_per_s,
    decode_tokens_per_s: r.decode_tokens_per_s,
  };
  // Decode memory traffic: weights one decode step reads, K/V the last one read, mean bytes per
  // step (weights + K/V) and the achieved bandwidth (decode_bytes_per_token × decode tok/s / 1e9).
  for (const k of ['decode_weight_bytes_per_token', 'decode_kv_bytes_last_token', 'decode_bytes_per_token', 'decode_gb_s']) {
    if (r[k] !== undefined) usage[k] = r[k];
  }
  // Which output head the decode steps used (screened / full) and the candidate counts.
  if (r.head) usage.head = r.head;
  // The KV cache at the end of the generation: tokens_held, evicted, bytes, budget_bytes, ...
  if (r.kv) usage.kv = r.kv;
  // The memory ledger's snapshot at the end of the request (local runs).
  if (r.memory) usage.memory = r.memory;
  // edgellm's extension, in one sub-object so OpenAI's fields stay exactly OpenAI's: CPU time
  // per phase and the energy estimate (src/work.rs), decode speed per window (sustained.js)
  // and the compute pressure seen during the request (device-signals.js).
  if (r.compute) usage.compute = { ...r.compute, sustained: r.sustained ?? null, pressure: pressure ?? { state: 'unknown', last: 'unknown' } };
  return usage;
}

/** The `kv` option (createEngine / load) → the worker's KvOptions (validated), or null. */
function kvOptions(kv) {
  if (kv === undefined || kv === null) return null;
  if (typeof kv !== 'object') throw invalid('kv must be an object like {tokens: 1024, dtype: "q8", policy: "window-sinks", sinks: 4}');
  const out = {};
  for (const name of ['tokens', 'bytes', 'sinks']) {
    const v = optNumber(kv, name, name === 'sinks' ? 0 : 1, Number.MAX_SAFE_INTEGER, { int: true });
    if (v !== undefined) out[name] = v;
  }
  if (out.tokens !== undefined && out.bytes !== undefined) throw invalid('kv: give tokens or bytes, not both');
  if (kv.dtype !== undefined && kv.dtype !== null) {
    if (!['f16', 'q8', 'int8'].includes(kv.dtype)) throw invalid(`kv.dtype must be 'f16' or 'q8', got ${JSON.stringify(kv.dtype)}`);
    out.dtype = kv.dtype === 'int8' ? 'q8' : kv.dtype;
  }
  if (kv.policy !== undefined && kv.policy !== null) {
    if (!['window-sinks', 'error'].includes(kv.policy)) throw invalid(`kv.policy must be 'window-sinks' or 'error', got ${JSON.stringify(kv.policy)}`);
    out.policy = kv.policy;
  }
  const unknown = Object.keys(kv).filter((k) => !['tokens', 'bytes', 'sinks', 'dtype', 'policy'].includes(k));
  if (unknown.length) throw invalid(`kv: unknown option ${unknown.join(', ')}`);
  return out;
}

/**
 * An async-iterable stream of chunks (OpenAI SDK style: `for await (const chunk of stream)`).
 * `abort()` or leaving the loop early stops the generation in the worker.
 */
export class CompletionStream {
  #queue = [];
  #waiters = [];
  #done = false;
  #error = null;
  #onCancel;

  constructor(onCancel) {
    this.#onCancel = onCancel;
    // The openai SDK's handle: `stream.controller.abort()` stops the generation like abort().
    this.controller = new AbortController();
    this.controller.signal.addEventListener('abort', () => this.abort(), { once: true });
  }

  /** @internal */ _push(chunk) {
    if (this.#done) return;
    const w = this.#waiters.shift();
    if (w) w.resolve({ value: chunk, done: false });
    else this.#queue.push(chunk);
  }

  /** @internal */ _end(error) {
    if (this.#done) return;
    this.#done = true;
    this.#error = error || null;
    // Chunks already queued are still delivered, unless the end is an abort (chunks stop at once).
    if (error && error.code === ErrorCode.ABORTED) this.#queue.length = 0;
    const waiters = this.#waiters.splice(0);
    for (const w of waiters) {
      if (this.#error) w.reject(this.#error);
      else w.resolve({ value: undefined, done: true });
    }
    if (waiters.length) this.#error = null; // delivered: later next() calls report done
  }

  /** Stops the generation; a pending or later `next()` rejects with ABORTED. */
  abort() {
    if (!this.#done) {
      this._end(abortedError('generation'));
      this.controller.abort();
      this.#onCancel();
    }
  }

  [Symbol.asyncIterator]() {
    return {
      next: () => {
        if (this.#queue.length) return Promise.resolve({ value: this.#queue.shift(), done: false });
        if (this.#done) {
          if (this.#error) {
            const e = this.#error;
            this.#error = null; // throw once, then report done
            return Promise.reject(e);
          }
          return Promise.resolve({ value: undefined, done: true });
        }
        return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
      },
      return: () => {
        if (!this.#done) {
          this.#done = true;
          this.#queue.length = 0;
          this.controller.abort();
          this.#onCancel();
        }
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }

  /** A web ReadableStream of the same chunks. */
  toReadableStream() {
    const it = this[Symbol.asyncIterator]();
    return new ReadableStream({
      async pull(c) {
        const r = await it.next();
        if (r.done) c.close();
        else c.enqueue(r.value);
      },
      cancel: () => it.return(),
    });
  }
}

export class Engine {
  #spawn;
  #normalizeSource;
  #opts;
  #worker = null; // adapter: {post, terminate, setBusy?}
  #ready = null; // Promise of the init result
  #pending = new Map(); // id → {onEvent, resolve, reject}
  #lastLoad = null; // {source, opts} of the last successful load, for a restart
  #reloadNeeded = false;
  #terminated = false;
  #router = null;
  #lastModel = null; // ModelInfo of the last successful load (kept across crashes)
  #lastLoadError = null; // code of the last failed load (e.g. OVER_MEMORY_BUDGET)
  #memoryOpts; // the core's MemoryOptions: budget and pressure thresholds
  #lastMemory = null; // the latest MemorySnapshot from the worker
  #listeners = new Map(); // event name → Set of callbacks
  #energy; // the power model sent to the core (null: its default)
  #abandoned = new Map(); // id of an aborted operation → its grace timer (see #watchAbort)
  #sustained; // {window_ms, throttle_fraction} of the decode-speed windows
  #device; // DeviceSignals: compute pressure (observed once used), battery, network
  #lastLong = null; // usage.compute.sustained of the last long local request
  #lastLongAt = 0; // when it ended (performance.now())

  /** Info about the loaded model (null when none). */
  model = null;
  /** Result of the worker's init: {version, protocol, cache, simd, simd_tier, threads}. */
  info = null;
  /** Number of times the worker was restarted after a crash. */
  restarts = 0;

  constructor(spawn, normalizeSource, options = {}) {
    this.#spawn = spawn;
    this.#normalizeSource = normalizeSource;
    this.#opts = { cache: true, initTimeoutMs: 60_000, progressIntervalMs: 50, ...options };
    // Which wasm build the worker loads (tier.js): 'auto' (default), 'relaxed', 'simd128'.
    if (this.#opts.simd !== undefined && !SIMD_OPTIONS.includes(this.#opts.simd)) {
      throw invalid(`simd must be one of ${SIMD_OPTIONS.map((v) => `'${v}'`).join(', ')}; got ${JSON.stringify(this.#opts.simd)}`);
    }
    // Threads (tier.js): 'auto' (default: every core where the page is cross-origin isolated
    // and the threaded build is served, else 1) or a count.
    this.#opts.threads = threadsOption(this.#opts.threads);
    // The memory ledger's budget (default: from navigator.deviceMemory, see memory.js) and
    // pressure thresholds; `memoryBudget` is the older name of memory.budget_bytes.
    this.#memoryOpts = memoryOptions(this.#opts.memory, this.#opts.memoryBudget);
    this.#energy = energyOptions(this.#opts.energy);
    this.#sustained = sustainedOptions(this.#opts.sustained);
    this.#device = new DeviceSignals();
    this.#device.pressure.onChange((state) => this.#emit('pressure', { reason: 'state', state, sustained: null }));
    const self = this;
    this.chat = {
      completions: {
        create(params, options) {
          return self.#create('chat', params, options);
        },
      },
    };
    this.completions = {
      create(params, options) {
        return self.#create('completion', params, options);
      },
    };
    if (this.#opts.route) this.#router = new Router(this.#routerHooks(), this.#opts.route);
    // Saved conversations: the KV cache of the current conversation, to resume it after a
    // reload (sessions.js; the core's snapshot format in src/snapshot.rs).
    this.session = {
      save: (key) => this.#request({ type: Req.SESSION, action: 'save', key }),
      restore: (key) => this.#request({ type: Req.SESSION, action: 'restore', key }),
      list: () => this.#request({ type: Req.SESSION, action: 'list' }),
      delete: (key) => this.#request({ type: Req.SESSION, action: 'delete', key }),
    };
    this.cache = {
      list: () => this.#request({ type: Req.CACHE, action: 'list' }),
      delete: (url) => this.#request({ type: Req.CACHE, action: 'delete', url: this.#normalizeSource(url).url }),
      clear: () => this.#request({ type: Req.CACHE, action: 'clear' }),
    };
  }

  // ── worker lifecycle ─────────────────────────────────────────────────────────────────────
  /** Starts the worker (if needed) and waits for the wasm engine to be ready. */
  async start() {
    if (this.#terminated) throw new EdgeLLMError(ErrorCode.TERMINATED, 'the engine was terminated');
    if (!this.#ready) {
      const worker = this.#spawn({
        onMessage: (msg) => this.#onMessage(worker, msg),
        onFatal: (err) => this.#onFatal(worker, err),
      });
      this.#worker = worker;
      this.#ready = this.#send(worker, { type: Req.INIT, wasmUrl: this.#opts.wasmUrl, simd: this.#opts.simd, threads: this.#opts.threads, cache: { enabled: !!this.#opts.cache, dir: this.#opts.cacheDir }, memory: this.#memoryOpts, energy: this.#energy }, null, this.#opts.initTimeoutMs)
        .then((info) => {
          if (info.protocol !== PROTOCOL_VERSION) throw new EdgeLLMError(ErrorCode.ENGINE_INIT_FAILED, `worker speaks protocol ${info.protocol}, client ${PROTOCOL_VERSION}`);
          this.info = info;
          return info;
        })
        .catch((e) => {
          if (this.#worker === worker) this.#kill(worker);
          throw e.code === ErrorCode.ENGINE_CRASHED ? new EdgeLLMError(ErrorCode.ENGINE_INIT_FAILED, e.message, { detail: e.detail }) : e;
        });
    }
    return this.#ready;
  }

  #kill(worker) {
    if (this.#worker === worker) {
      this.#worker = null;
      this.#ready = null;
    }
    try {
      worker.terminate();
    } catch {
      /* already gone */
    }
  }

  #onFatal(worker, err) {
    if (this.#worker !== worker) return;
    this.#kill(worker);
    const e = err instanceof EdgeLLMError ? err : new EdgeLLMError(ErrorCode.ENGINE_CRASHED, `the engine worker died: ${err && err.message ? err.message : err}`);
    for (const p of this.#pending.values()) p.reject(e);
    this.#pending.clear();
    if (this.model || this.#reloadNeeded) {
      this.model = null;
      this.#reloadNeeded = !!this.#lastLoad;
    }
    this.restarts++;
    if (this.#opts.onCrash) {
      try {
        this.#opts.onCrash(e);
      } catch {
        /* the callback's problem */
      }
    }
  }

  #onMessage(worker, msg) {
    if (this.#worker !== worker || !msg) return;
    if (msg.type === Ev.MEMORY) {
      this.#lastMemory = msg.snapshot;
      this.#emit('memory', msg.snapshot);
      return;
    }
    if (msg.type === Ev.LOG) {
      const fn = this.#opts.onLog;
      if (fn) fn(msg.level, msg.message);
      else if (msg.level === 'warn' || msg.level === 'error') console.warn(`[edgellm] ${msg.message}`);
      return;
    }
    if (msg.type === Ev.ERROR && msg.fatal) {
      const err = errorFromPayload(msg.error);
      const p = msg.id !== null && msg.id !== undefined ? this.#pending.get(msg.id) : null;
      if (p) {
        this.#pending.delete(msg.id);
        p.reject(err);
      }
      this.#onFatal(worker, err);
      return;
    }
    if ((msg.type === Ev.RESULT || msg.type === Ev.ERROR) && this.#abandoned.has(msg.id)) {
      clearTimeout(this.#abandoned.get(msg.id)); // the worker did stop: it is not stuck
      this.#abandoned.delete(msg.id);
    }
    const p = this.#pending.get(msg.id);
    if (!p) return; // settled already (aborted) or unknown
    if (msg.type === Ev.RESULT) {
      this.#pending.delete(msg.id);
      p.resolve(msg.value);
    } else if (msg.type === Ev.ERROR) {
      this.#pending.delete(msg.id);
      p.reject(errorFromPayload(msg.error));
    } else if (p.onEvent) {
      p.onEvent(msg);
    }
  }

  /** Posts one operation and resolves with its result. */
  #send(worker, msg, onEvent, timeoutMs, signal, id = nextId()) {
    return new Promise((resolve, reject) => {
      let timer = null;
      let onAbort = null;
      const cleanup = () => {
        if (timer) clearTimeout(timer);
        if (signal && onAbort) signal.removeEventListener('abort', onAbort);
        if (this.#worker === worker && this.#worker.setBusy) this.#worker.setBusy(this.#pending.size > 0);
      };
      const entry = {
        onEvent,
        resolve: (v) => {
          cleanup();
          resolve(v);
        },
        reject: (e) => {
          cleanup();
          reject(e);
        },
        id,
      };
      if (signal) {
        if (signal.aborted) return reject(abortedError(msg.type));
        onAbort = () => this.#abortOp(id, abortedError(msg.type));
        signal.addEventListener('abort', onAbort, { once: true });
      }
      this.#pending.set(id, entry);
      if (worker.setBusy) worker.setBusy(true);
      if (timeoutMs) {
        timer = setTimeout(() => {
          if (this.#pending.get(id) === entry) {
            const e = new EdgeLLMError(ErrorCode.ENGINE_INIT_FAILED, `the engine worker did not answer ${msg.type} within ${timeoutMs} ms`);
            this.#pending.delete(id);
            entry.reject(e);
            this.#onFatal(worker, e);
          }
        }, timeoutMs);
      }
      try {
        worker.post({ ...msg, id });
      } catch (e) {
        this.#pending.delete(id);
        const hint = /File-backed Blob/i.test(String(e && e.message)) ? ' (under Node, pass the file path instead)' : '';
        entry.reject(new EdgeLLMError(ErrorCode.INVALID_REQUEST, `could not send ${msg.type} to the worker: ${e.message}${hint}`, { cause: e }));
      }
    });
  }

  /** Settles the caller at once; the worker stops at its next yield point. */
  #abortOp(id, err) {
    const p = this.#pending.get(id);
    if (!p) return;
    this.#pending.delete(id);
    if (this.#worker) {
      try {
        this.#worker.post({ type: Req.ABORT, target: id });
      } catch {
        /* worker gone */
      }
      this.#watchAbort(this.#worker, id);
    }
    p.reject(err);
  }

  /**
   * A worker stuck inside one wasm call cannot even read the ABORT. If it has not answered the
   * aborted operation within `abortGraceMs` (default 5000), it is terminated as crashed: the
   * next request starts a new worker (and reloads the model).
   */
  #watchAbort(worker, id) {
    const grace = this.#opts.abortGraceMs ?? 5000;
    const timer = setTimeout(() => {
      this.#abandoned.delete(id);
      if (this.#worker === worker) {
        this.#onFatal(worker, new EdgeLLMError(ErrorCode.ENGINE_CRASHED, `the engine worker did not stop within ${grace} ms of an abort; it was restarted`));
      }
    }, grace);
    if (typeof timer === 'object' && timer.unref) timer.unref(); // Node: never keeps the process alive
    this.#abandoned.set(id, timer);
  }

  async #request(msg, onEvent, signal) {
    await this.start();
    return this.#send(this.#worker, msg, onEvent, 0, signal);
  }

  /** Terminates the worker. The engine cannot be used afterwards. */
  terminate() {
    this.#terminated = true;
    this.#device.pressure.stop();
    const w = this.#worker;
    if (w) {
      this.#kill(w);
      const e = new EdgeLLMError(ErrorCode.TERMINATED, 'the engine was terminated');
      for (const p of this.#pending.values()) p.reject(e);
      this.#pending.clear();
    }
    this.model = null;
  }

  /** The worker's state, answered even while an operation runs. */
  status() {
    return this.#request({ type: Req.STATUS });
  }

  // ── loading ──────────────────────────────────────────────────────────────────────────────
  /**
   * Loads a model from a URL, a Blob/File or (Node) a file path.
   * @returns {Promise<object>} ModelInfo
   */
  async load(source, opts = {}) {
    const src = this.#normalizeSource(source);
    const { onProgress, signal } = opts;
    const msg = {
      type: Req.LOAD,
      source: src,
      cache: opts.cache ?? !!this.#opts.cache,
      sha256: opts.sha256 ? String(opts.sha256).toLowerCase() : undefined,
      budget: opts.memoryBudget ?? this.#opts.memoryBudget,
      kv: kvOptions(opts.kv !== undefined ? opts.kv : this.#opts.kv),
      progressIntervalMs: opts.progressIntervalMs ?? this.#opts.progressIntervalMs,
    };
    this.model = null;
    this.#reloadNeeded = false;
    const onEvent = onProgress
      ? (ev) => {
          if (ev.type === Ev.PROGRESS) onProgress({ phase: ev.phase, loaded: ev.loaded, total: ev.total, fraction: ev.total ? ev.loaded / ev.total : null });
        }
      : null;
    let info;
    try {
      info = await this.#request(msg, onEvent, signal);
    } catch (e) {
      this.#lastLoadError = e && e.code ? e.code : ErrorCode.INTERNAL;
      throw e;
    }
    this.model = info;
    this.#lastModel = info;
    this.#lastLoadError = null;
    this.#lastLoad = { source, opts: { cache: msg.cache, sha256: msg.sha256, memoryBudget: msg.budget, kv: msg.kv } };
    return info;
  }

  /** Frees the model's memory in the worker (the worker and the wasm instance stay). */
  async unload() {
    this.#lastLoad = null;
    this.#reloadNeeded = false;
    this.model = null;
    if (!this.#worker) return;
    await this.#request({ type: Req.UNLOAD });
  }

  /** After a crash: reload the last model in the fresh worker before the next request. */
  async #ensureModel() {
    if (this.#reloadNeeded && this.#lastLoad) {
      const { source, opts } = this.#lastLoad;
      await this.load(source, opts);
    }
  }

  // ── memory ledger ────────────────────────────────────────────────────────────────────────
  /**
   * Subscribes to an event; returns a function that unsubscribes. Events: 'memory' (a
   * MemorySnapshot, on every pressure-level change and at the end of each load and request);
   * 'pressure' ({reason: 'window', state, sustained} each time a local request's decode-speed
   * window closes; {reason: 'state', state, sustained: null} when the compute pressure changes).
   */
  on(event, fn) {
    if (typeof fn !== 'function') throw invalid('on(event, fn): fn must be a function');
    if (!EVENTS.includes(event)) throw invalid(`unknown event ${JSON.stringify(event)} (events: ${EVENTS.map((e) => `'${e}'`).join(', ')})`);
    if (event === 'pressure') this.#device.pressure.start();
    if (!this.#listeners.has(event)) this.#listeners.set(event, new Set());
    this.#listeners.get(event).add(fn);
    return () => this.off(event, fn);
  }

  off(event, fn) {
    const set = this.#listeners.get(event);
    if (set) set.delete(fn);
  }

  #emit(event, value) {
    const set = this.#listeners.get(event);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        fn(value);
      } catch (e) {
        console.warn(`[edgellm] a '${event}' listener threw: ${e && e.message ? e.message : e}`);
      }
    }
  }

  /**
   * The device's compute pressure now and the sustained-speed figures of the last long local
   * request: `{state, supported, last_long}` (state 'unknown' where the API is absent).
   */
  pressure() {
    const p = this.#device.pressure;
    return { state: p.state, supported: p.supported, last_long: this.#lastLong };
  }

  /** The latest memory snapshot (null before the engine reported one). */
  memory() {
    return this.#lastMemory;
  }

  /** Asks the worker for a fresh snapshot (answered between steps, even during a generation). */
  async refreshMemory() {
    await this.#request({ type: Req.MEMORY, action: 'get' });
    return this.#lastMemory;
  }

  /** Changes the budget and/or thresholds (`{budget_bytes, elevated, critical}`); resolves with a snapshot. */
  async setMemoryOptions(options = {}) {
    const merged = memoryOptions({ ...this.#memoryOpts, ...options });
    await this.#request({ type: Req.MEMORY, action: 'set', options: merged });
    this.#memoryOpts = merged;
    return this.#lastMemory;
  }

  /** The budget and thresholds in force. */
  get memoryOptions() {
    return { ...this.#memoryOpts };
  }

  /**
   * Estimates each memory term of a model from its header alone (a few MB read with Range
   * requests or Blob.slice; nothing is loaded): `{fits, budget_bytes, terms: {weights, kv,
   * activations, runtime}, total, load_peak, peak, kv, batch, parts, model}`.
   * @param {string|URL|Blob|{url:string, headers?:object}} source
   * @param {{kv?: object|null, ctx?: number, batch?: number, sampling?: boolean, budget_bytes?: number, signal?: AbortSignal}} [options]
   */
  async estimate(source, options = {}) {
    const src = this.#normalizeSource(source);
    const o = options || {};
    const kv = kvOptions(o.kv !== undefined ? o.kv : this.#opts.kv);
    const req = {};
    if (kv) req.kv = kv;
    if (o.ctx !== undefined) req.ctx = optNumber(o, 'ctx', 1, 1 << 24, { int: true });
    if (o.batch !== undefined) req.batch = optNumber(o, 'batch', 1, 1 << 16, { int: true });
    if (o.sampling !== undefined) req.sampling = !!o.sampling;
    req.budget_bytes = o.budget_bytes !== undefined ? optNumber(o, 'budget_bytes', 1, Number.MAX_SAFE_INTEGER, { int: true }) : this.#memoryOpts.budget_bytes;
    return this.#request({ type: Req.ESTIMATE, source: src, options: req }, null, o.signal);
  }

  #memoryNeed() {
    const m = this.#lastMemory;
    if (!m || !this.model || m.total.estimated === null) return null;
    return Math.max(m.total.estimated, m.load_peak.estimated ?? 0);
  }

  // ── generation ───────────────────────────────────────────────────────────────────────────
  /** Requests go through the router when one is configured (createEngine({route}) or a per-request `route`). */
  #create(kind, params, options = {}) {
    if (!this.#router && params && typeof params === 'object' && params.route) {
      this.#router = new Router(this.#routerHooks(), { mode: 'local-only' });
    }
    if (this.#router) return this.#router.create(kind, params, options);
    return this.#createLocal(kind, params, options);
  }

  #routerHooks() {
    return {
      local: (kind, params, options) => this.#createLocal(kind, params, options),
      countTokens: (kind, params) => this.#countTokens(kind, params),
      validate: (kind, params) => this.#parse(kind, params),
      localState: () => ({
        model: this.model,
        reloadable: this.#reloadNeeded && !!this.#lastLoad,
        lastModel: this.#lastModel,
        lastLoadError: this.#lastLoadError,
        memoryBudget: this.#memoryOpts.budget_bytes,
        // The loaded model's estimated peak (the ledger's), for the router's memory check.
        memoryNeed: this.#memoryNeed(),
        // The last long local request slowed down (sustained.js), within THROTTLE_MEMORY_MS;
        // null: none measured, or long enough ago for the device to have cooled down.
        throttled: this.#lastLong && performance.now() - this.#lastLongAt < THROTTLE_MEMORY_MS ? this.#lastLong.throttled : null,
      }),
      deviceSignals: () => this.#device,
      sustained: () => this.#sustained,
      makeStream: (onCancel) => new CompletionStream(onCancel),
    };
  }

  /**
   * Replaces the routing configuration (the `route` option of createEngine); null turns routing
   * off (every request runs locally, as without the option). Measured rates start afresh.
   */
  setRoute(config) {
    this.#router = config ? new Router(this.#routerHooks(), config) : null;
    return this.#router;
  }

  /** The router (null when none is configured): `router.estimates.snapshot()`, `router.lastRoute`. */
  get router() {
    return this.#router;
  }

  async #countTokens(kind, params) {
    const { request } = await this.#parse(kind, params);
    return this.#request({ type: Req.COUNT, request });
  }

  /**
   * Checks OpenAI parameters with the core's rules (the same as edgellm serve: src/protocol) in
   * the worker; resolves with {request, stream, include_usage}, or rejects INVALID_REQUEST with
   * `detail` (the rule's code) and `param` (the parameter at fault).
   */
  async #parse(kind, params) {
    if (!params || typeof params !== 'object') throw invalid('create() needs a parameters object');
    strictBoolean(params, 'private'); // no router here: nothing leaves the device, but "true" is still refused
    const text = paramsJson(params);
    await this.start();
    const parsed = await this.#send(this.#worker, { type: Req.PARSE, kind, params: text }, null, 0);
    // OpenAI semantics: without a seed, sampling differs from run to run.
    const r = parsed.request;
    if ((r.seed === null || r.seed === undefined) && r.temperature !== 0) r.seed = globalThis.crypto.getRandomValues(new Uint32Array(1))[0];
    return parsed;
  }

  /**
   * Counts the prompt's tokens as the local engine would see them (chat template applied).
   * @returns {Promise<{prompt_tokens: number|null, max_context: number, fits: boolean}>}
   */
  async countTokens(params) {
    if (!params || typeof params !== 'object') throw invalid('countTokens() needs {messages} or {prompt}');
    if (!this.model) throw new EdgeLLMError(ErrorCode.MODEL_NOT_LOADED, 'no model is loaded: call engine.load() first');
    return this.#countTokens(Array.isArray(params.messages) ? 'chat' : 'completion', params);
  }

  async #createLocal(kind, params, options = {}) {
    const { request, stream: streamed, include_usage: includeUsage } = await this.#parse(kind, params);
    const signal = params.signal || options.signal;
    if (signal && signal.aborted) throw abortedError('generation');
    await this.#ensureModel();
    if (signal && signal.aborted) throw abortedError('generation');

    const id = randomId(kind === 'chat' ? 'chatcmpl-' : 'cmpl-');
    const created = Math.floor(Date.now() / 1000);
    const model = (this.model && this.model.name) || 'edgellm';
    const object = kind === 'chat' ? 'chat.completion' : 'text_completion';
    const chunkObject = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    const msg = { type: Req.GENERATE, request, sustained: this.#sustained };
    // The compute pressure seen while this request runs (the worst state), for usage.compute.
    const seen = this.#device.pressure.track();
    const finish = (r) => {
      const usage = usageOf(r, seen.end());
      if (r.sustained && r.sustained.long) {
        this.#lastLong = r.sustained;
        this.#lastLongAt = performance.now();
      }
      return usage;
    };
    const onSustained = (ev) => {
      if (ev.type === Ev.SUSTAINED) this.#emit('pressure', { reason: 'window', state: this.#device.pressure.state, sustained: ev.sustained });
    };

    if (!streamed) {
      let r;
      try {
        r = await this.#request(msg, onSustained, signal);
      } catch (e) {
        seen.end();
        throw e;
      }
      const choice =
        kind === 'chat'
          ? { index: 0, message: { role: 'assistant', content: r.text }, logprobs: r.logprobs ?? null, finish_reason: r.finish_reason }
          : { index: 0, text: r.text, logprobs: r.logprobs ?? null, finish_reason: r.finish_reason };
      return { id, object, created, model, choices: [choice], usage: finish(r) };
    }

    // Streaming: resolve once the worker has accepted the request (tokenized the prompt), like
    // an HTTP response whose headers arrived; chunks follow.
    await this.start();
    const worker = this.#worker;
    let opId = null;
    const stream = new CompletionStream(() => {
      if (opId !== null) this.#abortOp(opId, abortedError('generation'));
    });
    const chunk = (delta, finish_reason, logprobs = null) => {
      const choice = kind === 'chat' ? { index: 0, delta, logprobs, finish_reason } : { index: 0, text: delta.content || '', logprobs, finish_reason };
      return { id, object: chunkObject, created, model, choices: [choice] };
    };
    return new Promise((resolve, reject) => {
      let started = false;
      const onEvent = (ev) => {
        if (ev.type === Ev.STARTED) {
          started = true;
          if (kind === 'chat') stream._push(chunk({ role: 'assistant', content: '' }, null));
          resolve(stream);
        } else if (ev.type === Ev.TOKEN && (ev.text || ev.logprobs)) {
          stream._push(chunk({ content: ev.text }, null, ev.logprobs ?? null));
        } else onSustained(ev);
      };
      opId = nextId();
      const p = this.#send(worker, msg, onEvent, 0, signal, opId);
      p.then(
        (r) => {
          // OpenAI's shape: usage only with include_usage, on one more chunk with no choices.
          const usage = finish(r);
          stream._push(chunk({}, r.finish_reason));
          if (includeUsage) stream._push({ id, object: chunkObject, created, model, choices: [], usage });
          stream._end();
        },
        (e) => {
          seen.end();
          stream._end(e);
          if (!started) reject(e);
        },
      );
    });
  }

  /**
   * Test hook, never set by an option: from the `after_tokens`-th decode step of every later
   * generation on, the worker waits `ms` after each step (to force the sustained-speed windows
   * down and `throttled` on). `{ms: 0}` turns it off.
   */
  async _debugDecodeDelay({ ms, after_tokens = 0 } = {}) {
    return this.#request({ type: Req.DEBUG, action: 'decode-delay', ms, after_tokens });
  }

  /** Test hook: makes the wasm engine panic (the client then restarts the worker). */
  async _debugPanic() {
    return this.#request({ type: Req.DEBUG, action: 'panic' });
  }

  /**
   * Test hook (the fault matrix): arms one real fault in the worker — a wasm trap ('panic') or a
   * blocked thread ('stall', `ms`) at the `after`-th load chunk, prefill chunk or decode step of
   * the next operation reaching `at`. See test-faults.js.
   */
  async _debugFault(spec) {
    return this.#request({ type: Req.DEBUG, action: 'fault', spec });
  }
}
