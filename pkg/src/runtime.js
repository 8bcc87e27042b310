// The worker side: hosts one wasm engine and serves the protocol of protocol.js.
// Environment-neutral: worker.js (browser) and worker-node.js (Node worker_threads) pass in
// `post`, `initWasm`, `openCache` and (Node) `fs`.
//
// This file holds the engine's state and hands each request to the module of its concern:
//   runtime/queue.js           one operation at a time; abort; RESULT/ERROR replies
//   runtime/wasm-call.js       every wasm call: core errors → EdgeLLMError, traps → ENGINE_CRASHED
//   runtime/load-sources.js    load from a Blob, a path or a URL (model cache, network)
//   runtime/stream-load.js     a model's chunks into the engine's loader, with progress
//   runtime/admission.js       the ledger admits the header before the load allocates
//   runtime/header-estimate.js the header skim both a load and an estimate run
//   runtime/estimate.js        engine.estimate(): the memory terms from the header alone
//   runtime/generate.js        the prefill/decode loop, token counts
//   runtime/memory-events.js   the ledger's snapshots as `memory` events
//   runtime/session-op.js      saved conversations; runtime/cache-op.js: model cache upkeep
//   runtime/parse-op.js        the core's OpenAI parameter rules, answered at once
//
// Everything heavy runs in small steps with an `await` between them (a network/file chunk, a
// prefill chunk, a decode step), so `abort` and `status` messages are handled while an
// operation runs.

import { PROTOCOL_VERSION, Req, Ev, IMMEDIATE } from './protocol.js';
import { EdgeLLMError, ErrorCode } from './errors.js';
import { FaultPlan, decodeDelaySpec, stallThread } from './test-faults.js';
import { NoCache } from './cache.js';
import { OperationQueue } from './runtime/queue.js';
import { callWasm } from './runtime/wasm-call.js';
import { loadOp } from './runtime/load-sources.js';
import { estimateOp } from './runtime/estimate.js';
import { generateOp, countOp } from './runtime/generate.js';
import { MemoryEvents } from './runtime/memory-events.js';
import { sessionOp } from './runtime/session-op.js';
import { cacheOp } from './runtime/cache-op.js';
import { parseOp } from './runtime/parse-op.js';

export class Runtime {
  /**
   * @param {{post: (msg: object) => void,
   *          initWasm: (wasmUrl: string|undefined, simd: 'auto'|'relaxed'|'simd128'|undefined,
   *                     log: (level: string, message: string) => void) => Promise<{bindings: any, exports: any}>,
   *          openCache: (cfg: {enabled: boolean, dir?: string}) => Promise<any>, fs?: any}} env
   */
  constructor(env) {
    this.env = env;
    this.bindings = null;
    this.exports = null;
    this.engine = null;
    this.model = null;
    this.cache = new NoCache();
    this.sessions = null;
    this.dead = null; // the fatal error once the wasm instance trapped
    this.memory = new MemoryEvents(this);
    this.faults = new FaultPlan(); // test-only (test-faults.js): unarmed unless a test arms it
    this.queue = new OperationQueue({
      post: (msg) => this.env.post(msg),
      run: (msg, signal) => this.#run(msg, signal),
      isDead: () => !!this.dead,
      onFatal: (err) => (this.dead = err),
    });
  }

  // ── message entry ────────────────────────────────────────────────────────────────────────
  handle(msg) {
    if (!msg || typeof msg !== 'object') return;
    if (IMMEDIATE.has(msg.type)) {
      if (msg.type === Req.ABORT) this.queue.abort(msg.target);
      else if (msg.type === Req.STATUS) this.queue.reply(msg.id, this.#status());
      else if (msg.type === Req.PARSE) parseOp(this, msg);
      return;
    }
    if (this.dead) {
      this.env.post({ type: Ev.ERROR, id: msg.id, error: this.dead.toJSON(), fatal: true });
      return;
    }
    this.queue.push(msg);
  }

  /** A fatal error raised outside any operation (uncaught exception in the worker). */
  fatal(e) {
    const err = e instanceof EdgeLLMError ? e : new EdgeLLMError(ErrorCode.ENGINE_CRASHED, `worker error: ${e && e.message ? e.message : e}`);
    this.dead = err;
    const running = this.queue.running;
    this.env.post({ type: Ev.ERROR, id: running ? running.id : null, error: err.toJSON(), fatal: true });
  }

  #status() {
    const running = this.queue.running;
    return {
      loaded: !!this.model,
      model: this.model,
      busy: !!running,
      running: running ? running.type : null,
      queued: this.queue.waiting.length,
      wasm_memory_bytes: this.exports && this.exports.memory ? this.exports.memory.buffer.byteLength : 0,
      memory_level: this.memory.last ? this.memory.last.level : null,
      dead: !!this.dead,
    };
  }

  #run(msg, signal) {
    switch (msg.type) {
      case Req.INIT:
        return this.#init(msg);
      case Req.LOAD:
        return loadOp(this, msg, signal);
      case Req.GENERATE:
        return generateOp(this, msg, signal);
      case Req.COUNT:
        return countOp(this, msg);
      case Req.UNLOAD:
        this.unload();
        return null;
      case Req.CACHE:
        return cacheOp(this, msg);
      case Req.ESTIMATE:
        return estimateOp(this, msg, signal);
      case Req.MEMORY:
        return this.memory.op(msg);
      case Req.SESSION:
        return sessionOp(this, msg);
      case Req.DEBUG:
        return this.#debug(msg);
      default:
        throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `unknown message type ${JSON.stringify(msg.type)}`);
    }
  }

  // ── what every operation module uses ─────────────────────────────────────────────────────
  /** Runs a wasm call (wasm-call.js): core errors → EdgeLLMError, traps → Fatal. */
  call(fn) {
    return callWasm(this.bindings, fn);
  }

  /**
   * A wasm call that answers JSON text, parsed. JSON text rather than serde-wasm-bindgen values:
   * measured smaller and, but for a plain step event (~2 µs a token), not slower; the figures
   * are above `json()` in src/wasm/mod.rs (bench/wasm_boundary.mjs).
   */
  json(fn) {
    const s = this.call(fn);
    return typeof s === 'string' ? JSON.parse(s) : s;
  }

  log(level, message) {
    this.env.post({ type: Ev.LOG, level, message });
  }

  requireEngine() {
    if (!this.engine) throw new EdgeLLMError(ErrorCode.ENGINE_INIT_FAILED, 'the engine was not initialised');
  }

  requireModel() {
    if (!this.model) throw new EdgeLLMError(ErrorCode.MODEL_NOT_LOADED, 'no model is loaded: call engine.load() first');
  }

  unload() {
    if (this.engine) this.call(() => this.engine.unload());
    this.model = null;
  }

  /** Fires the test fault armed for this point, if it is due (test-faults.js). */
  faultPoint(point) {
    const f = this.faults.due(point);
    if (!f) return;
    if (f.fault === 'panic') this.call(() => this.bindings.debug_panic());
    else if (f.fault === 'pool-panic') this.bindings.debug_pool_panic();
    else stallThread(f.ms);
  }

  // ── init ─────────────────────────────────────────────────────────────────────────────────
  async #init(msg) {
    if (!this.bindings) {
      try {
        const { bindings, exports, threads } = await this.env.initWasm(msg.wasmUrl, msg.simd, (level, message) => this.log(level, message), msg.threads);
        this.bindings = bindings;
        this.exports = exports;
        this.threads = threads || 1;
      } catch (e) {
        if (e instanceof EdgeLLMError) throw e; // e.g. RELAXED_SIMD_UNSUPPORTED from the tier choice
        throw new EdgeLLMError(ErrorCode.ENGINE_INIT_FAILED, `could not start the wasm engine: ${e && e.message ? e.message : e}`, { cause: e });
      }
      this.engine = this.call(() => new this.bindings.WasmEngine());
      // The pool's workers are parked: from now on every forward pass is split over them.
      if (this.threads > 1) this.call(() => this.engine.set_threads(this.threads));
    }
    if (msg.memory) this.call(() => this.engine.set_memory_options(JSON.stringify(msg.memory)));
    // The power model of usage.compute.energy_j (validated by the core: INVALID_REQUEST).
    if (msg.energy && this.engine.set_power_model) this.call(() => this.engine.set_power_model(JSON.stringify(msg.energy)));
    this.memory.post('init');
    try {
      this.cache = await this.env.openCache(msg.cache || { enabled: false });
      this.sessions = null; // opened beside the cache on first use
    } catch (e) {
      this.log('warn', `model cache unavailable: ${e && e.message ? e.message : e}`);
      this.cache = new NoCache();
    }
    return {
      version: this.call(() => this.bindings.version()),
      protocol: PROTOCOL_VERSION,
      cache: this.cache.kind,
      simd: this.bindings.simd_enabled ? !!this.call(() => this.bindings.simd_enabled()) : null,
      // The build that runs: 'relaxed-simd' | 'simd128' | 'scalar' (null: a wasm without the export).
      simd_tier: this.bindings.simd_tier ? this.call(() => this.bindings.simd_tier()) : null,
      // Threads every forward pass runs on (1: a single-thread build).
      threads: this.engine.threads ? this.call(() => this.engine.threads()) : 1,
      // The default of the client's `maxRequestBytes` (the core's, as `edgellm serve`'s).
      max_request_bytes: this.call(() => this.bindings.default_max_request_bytes()),
    };
  }

  // ── test hooks (test-faults.js) ──────────────────────────────────────────────────────────
  #debug(msg) {
    if (msg.action === 'panic') return this.call(() => this.bindings.debug_panic());
    if (msg.action === 'fault') {
      if (msg.spec && msg.spec.fault === 'pool-panic' && !(this.threads > 1)) {
        throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'debug fault: pool-panic needs the threaded build on more than one thread');
      }
      return this.faults.arm(msg.spec);
    }
    // engine._debugDecodeDelay: generate.js waits after each decode step.
    if (msg.action === 'decode-delay') {
      this.decodeDelay = decodeDelaySpec(msg);
      return null;
    }
    throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `unknown debug action ${msg.action}`);
  }
}
