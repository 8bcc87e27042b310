// The client API (environment-neutral). index.js (browsers) and node.js (Node worker_threads)
// create it with a `spawn` function that starts a worker and a `normalizeSource` function.
//
//   const engine = await createEngine(options)
//   await engine.load(source, { onProgress, signal, cache, sha256 })
//   await engine.chat.completions.create({ messages, stream, max_tokens, ... })
//   await engine.completions.create({ prompt, ... })
//   await engine.unload(); engine.terminate()
//
// This class holds what the caller sees: the options, the loaded model and its reload after a
// crash, the memory ledger's figures, the router. The rest is in client/:
//   worker-link.js       the worker: start, operations, aborts, crash detection
//   local-generation.js  a request run on this device (streamed or not)
//   request-check.js     the OpenAI parameters checked by the core's rules
//   stream.js            the CompletionStream of a streamed request
//   options.js           the caller's options (kv, energy, estimate) checked before anything is sent
//   listeners.js         engine.on / off

import { Req, Ev } from '../protocol.js';
import { EdgeLLMError, ErrorCode, abortedError } from '../errors.js';
import { Router } from '../router.js';
import { memoryOptions } from '../memory.js';
import { SIMD_OPTIONS, threadsOption } from '../tier.js';
import { sustainedOptions, THROTTLE_MEMORY_MS } from '../sustained.js';
import { DeviceSignals } from '../device-signals.js';
import { WorkerLink } from './worker-link.js';
import { CompletionStream } from './stream.js';
import { createLocal } from './local-generation.js';
import { checkRequest } from './request-check.js';
import { invalid, optNumber, energyOptions, kvOptions, estimateOptions, sha256Option } from './options.js';
import { Listeners } from './listeners.js';

export class Engine {
  #normalizeSource;
  #opts;
  #link; // WorkerLink: the worker and its operations
  #lastLoad = null; // {source, opts} of the last successful load, for a restart
  #reloadNeeded = false;
  #router = null;
  #lastModel = null; // ModelInfo of the last successful load (kept across crashes)
  #lastLoadError = null; // code of the last failed load (e.g. OVER_MEMORY_BUDGET)
  #memoryOpts; // the core's MemoryOptions: budget and pressure thresholds
  #lastMemory = null; // the latest MemorySnapshot from the worker
  #listeners = new Listeners();
  #energy; // the power model sent to the core (null: its default)
  #sustained; // {window_ms, throttle_fraction} of the decode-speed windows
  #device; // DeviceSignals: compute pressure (observed once used), battery, network
  #lastLong = null; // usage.compute.sustained of the last long local request
  #lastLongAt = 0; // when it ended (performance.now())
  #local; // what local-generation.js needs of this engine
  #turn = Promise.resolve(); // the call order of operations (see #enter)
  #loads = 0; // loads started, so a late answer about an older one changes nothing
  // This engine in the cache's crash markers (cache.js): a random id, and its worker's number
  // (one more at every start), so a later worker of this engine knows an earlier one's marker
  // for a dead load, and another tab's for a live one.
  #cacheOwner = { engine: Array.from(globalThis.crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, '0')).join(''), worker: 0 };

  /** Info about the loaded model (null when none). */
  model = null;
  /** Result of the worker's init: {version, protocol, cache, simd, simd_tier, threads}. */
  info = null;
  /** Number of times the worker was restarted after a crash. */
  restarts = 0;

  constructor(spawn, normalizeSource, options = {}) {
    this.#normalizeSource = normalizeSource;
    this.#opts = { cache: true, initTimeoutMs: 60_000, progressIntervalMs: 50, ...options };
    // Times in ms: a negative or NaN grace restarted the worker on every abort.
    this.#opts.initTimeoutMs = optNumber(this.#opts, 'initTimeoutMs', 1, 3_600_000);
    this.#opts.abortGraceMs = optNumber(this.#opts, 'abortGraceMs', 0, 3_600_000);
    // The largest request (JSON bytes); default the core's (1 MiB, as edgellm serve's body limit).
    this.#opts.maxRequestBytes = optNumber(this.#opts, 'maxRequestBytes', 1, 2 ** 31, { int: true });
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
    this.#device.pressure.onChange((state) => this.#listeners.emit('pressure', { reason: 'state', state, sustained: null }));
    this.#link = new WorkerLink(spawn, {
      // Read at every (re)start: a restarted worker gets the memory options in force now.
      init: () => ({ wasmUrl: this.#opts.wasmUrl, simd: this.#opts.simd, threads: this.#opts.threads, cache: { enabled: !!this.#opts.cache, dir: this.#opts.cacheDir, owner: { ...this.#cacheOwner, worker: ++this.#cacheOwner.worker } }, memory: this.#memoryOpts, energy: this.#energy }),
      initTimeoutMs: this.#opts.initTimeoutMs,
      abortGraceMs: this.#opts.abortGraceMs,
      onLog: this.#opts.onLog,
      onReady: (info) => (this.info = info),
      onMemory: (snapshot) => {
        this.#lastMemory = snapshot;
        this.#listeners.emit('memory', snapshot);
      },
      onCrash: (e) => this.#onCrash(e),
    });
    this.#local = {
      link: this.#link,
      check: (kind, params) => checkRequest(this.#link, kind, params, this.#opts.maxRequestBytes),
      ensureModel: (signal) => this.#ensureModel(signal),
      enter: () => this.#enter(),
      modelName: () => this.model && this.model.name,
      sustained: this.#sustained,
      device: this.#device,
      onSustained: (sustained) => this.#listeners.emit('pressure', { reason: 'window', state: this.#device.pressure.state, sustained }),
      onLong: (sustained) => {
        this.#lastLong = sustained;
        this.#lastLongAt = performance.now();
      },
    };
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
      save: (key) => this.#inOrder(() => this.#request({ type: Req.SESSION, action: 'save', key })),
      restore: (key) => this.#inOrder(() => this.#request({ type: Req.SESSION, action: 'restore', key })),
      // In call order too: a delete() after a save() must not reach the worker first (the
      // session the user deleted would stay stored), nor a list() miss the save before it.
      list: () => this.#inOrder(() => this.#request({ type: Req.SESSION, action: 'list' })),
      delete: (key) => this.#inOrder(() => this.#request({ type: Req.SESSION, action: 'delete', key })),
    };
    this.cache = {
      list: () => this.#inOrder(() => this.#request({ type: Req.CACHE, action: 'list' })),
      delete: (url) => {
        const u = this.#normalizeSource(url).url;
        return this.#inOrder(() => this.#request({ type: Req.CACHE, action: 'delete', url: u }));
      },
      clear: () => this.#inOrder(() => this.#request({ type: Req.CACHE, action: 'clear' })),
    };
  }

  // ── call order ───────────────────────────────────────────────────────────────────────────
  /**
   * Requests reach the worker's queue in the order they were called: a create() checks its
   * parameters with the worker (a round trip) before it queues its generation, and a load(),
   * unload() or session call made meanwhile must not overtake it (the request would run on
   * the other model, or find none). Called synchronously at the call; resolves with `release`,
   * to call once the operation's message is posted (the worker's queue keeps the order from there).
   */
  #enter() {
    let release;
    const mine = new Promise((r) => (release = r));
    const before = this.#turn;
    this.#turn = before.then(() => mine);
    return before.then(() => release);
  }

  /** `post()` run in call order (see #enter): it posts its message before it first awaits,
   * so the next call may go on once it returns; then its answer. */
  async #inOrder(post) {
    const release = await this.#enter();
    let answer;
    try {
      answer = post();
    } finally {
      release();
    }
    return answer;
  }

  // ── worker lifecycle ─────────────────────────────────────────────────────────────────────
  /** Starts the worker (if needed) and waits for the wasm engine to be ready. */
  async start() {
    return this.#link.start();
  }

  /** The worker crashed (worker-link.js): the model is gone; the next request reloads it. */
  #onCrash(e) {
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

  #request(msg, onEvent, signal) {
    return this.#link.request(msg, onEvent, signal);
  }

  /** Terminates the worker. The engine cannot be used afterwards. */
  terminate() {
    this.#device.pressure.stop();
    this.#link.terminate();
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
    return this.#inOrder(() => this.#load(source, opts));
  }

  /** The load itself (the reload after a crash calls it inside a request that already holds
   * the call order); it posts its message before its first await. */
  async #load(source, opts) {
    const src = this.#normalizeSource(source);
    const { onProgress, signal } = opts;
    const msg = {
      type: Req.LOAD,
      source: src,
      cache: opts.cache ?? !!this.#opts.cache,
      sha256: sha256Option(opts.sha256),
      budget: opts.memoryBudget ?? this.#opts.memoryBudget,
      kv: kvOptions(opts.kv !== undefined ? opts.kv : this.#opts.kv),
      progressIntervalMs: opts.progressIntervalMs ?? this.#opts.progressIntervalMs,
    };
    // Aborted before it started: nothing changes.
    if (signal && signal.aborted) throw abortedError('load');
    const gen = ++this.#loads;
    this.model = null;
    this.#reloadNeeded = false;
    const onEvent = onProgress
      ? (ev) => {
          if (ev.type !== Ev.PROGRESS) return;
          try {
            onProgress({ phase: ev.phase, loaded: ev.loaded, total: ev.total, fraction: ev.total ? ev.loaded / ev.total : null });
          } catch (e) {
            // The callback's problem: the load goes on (it escaped as an uncaught exception).
            if (this.#opts.onLog) this.#opts.onLog('warn', `onProgress threw: ${e && e.message ? e.message : e}`);
          }
        }
      : null;
    let info;
    try {
      info = await this.#request(msg, onEvent, signal);
    } catch (e) {
      this.#lastLoadError = e && e.code ? e.code : ErrorCode.INTERNAL;
      // A load the worker refused before it replaced anything (bad KV options, the source
      // unreachable, not a GGUF, over the memory budget) left the model that was loaded: the
      // engine says so at once (`kept_model`; the router would otherwise send requests away as
      // if there were no local model). A load aborted here rejects before the worker answers:
      // then it is asked, not awaited (a stuck worker answers nothing, and the rejection must
      // not wait for it).
      if (e && e.kept_model) {
        if (gen === this.#loads) this.model = e.kept_model;
      } else {
        this.#request({ type: Req.STATUS }).then(
          (st) => {
            if (gen === this.#loads && !this.model && st && st.loaded && st.model) this.model = st.model;
          },
          () => {},
        );
      }
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
    await this.#inOrder(() => {
      this.#lastLoad = null;
      this.#reloadNeeded = false;
      this.model = null;
      return this.#link.worker ? this.#request({ type: Req.UNLOAD }) : undefined;
    });
  }

  /** After a crash: reload the last model in the fresh worker before the next request (`signal`:
   * the request's, which aborts the reload). A reload that fails stays due: the next request
   * tries again (a cache entry the crash evicted is then downloaded again). */
  async #ensureModel(signal) {
    if (this.#reloadNeeded && this.#lastLoad) {
      const { source, opts } = this.#lastLoad;
      try {
        await this.#load(source, { ...opts, signal });
      } catch (e) {
        if (!this.model) this.#reloadNeeded = true;
        throw e;
      }
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
    this.#listeners.check(event, fn);
    if (event === 'pressure') this.#device.pressure.start();
    this.#listeners.add(event, fn);
    return () => this.off(event, fn);
  }

  off(event, fn) {
    this.#listeners.remove(event, fn);
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
    const req = estimateOptions(o, { kv: this.#opts.kv, budget_bytes: this.#memoryOpts.budget_bytes });
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
    if (this.#router) return this.#router.create(kind, params, options);
    // A per-request `route` on an engine without one: a router for this request only (the
    // engine's later requests stay unrouted, without a `route` field).
    if (params && typeof params === 'object' && params.route) return new Router(this.#routerHooks(), { mode: 'local-only' }).create(kind, params, options);
    return createLocal(this.#local, kind, params, options);
  }

  #routerHooks() {
    return {
      local: (kind, params, options) => createLocal(this.#local, kind, params, options),
      countTokens: (kind, params) => this.#countTokens(kind, params),
      validate: (kind, params) => checkRequest(this.#link, kind, params, this.#opts.maxRequestBytes),
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
      makeStream: (onCancel, signal) => new CompletionStream(onCancel, signal),
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
    const { request } = await checkRequest(this.#link, kind, params, this.#opts.maxRequestBytes);
    return this.#request({ type: Req.COUNT, request });
  }

  /**
   * Counts the prompt's tokens as a local generation would run them (the core's count_tokens).
   * @returns {Promise<{prompt_tokens: number, max_context: number, fits: boolean, code: string|null}>}
   */
  async countTokens(params) {
    if (!params || typeof params !== 'object') throw invalid('countTokens() needs {messages} or {prompt}');
    // After terminate() there is no model either, but the reason to give is TERMINATED.
    if (this.#link.terminated) throw new EdgeLLMError(ErrorCode.TERMINATED, 'the engine was terminated');
    if (!this.model) throw new EdgeLLMError(ErrorCode.MODEL_NOT_LOADED, 'no model is loaded: call engine.load() first');
    return this.#countTokens(Array.isArray(params.messages) ? 'chat' : 'completion', params);
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
