// The client's connection to its engine worker: starting it (INIT, with a timeout), posting
// operations and settling each with its RESULT or ERROR, aborts, and crash detection. A worker
// is "crashed" when it reports a fatal error, dies, does not answer INIT in time, or does not
// stop within `abortGraceMs` of an abort (stuck inside one wasm call, it cannot even read the
// ABORT): it is then terminated, every pending operation rejects, and `onCrash` tells the engine,
// whose next request starts a fresh worker (engine.js reloads the model). After a stuck abort,
// the operations queued behind the stuck one never ran: their errors are marked `notStarted`,
// and a generation so rejected is sent again (local-generation.js).

import { Req, Ev, PROTOCOL_VERSION } from '../protocol.js';
import { EdgeLLMError, ErrorCode, errorFromPayload, abortedError } from '../errors.js';

/**
 * Errors of operations rejected by a stuck-abort restart before they ever reached the engine
 * (the worker was blocked inside the aborted operation's wasm call, so nothing queued behind it
 * ran): local-generation.js sends such a request again on the new worker.
 */
export const notStarted = new WeakSet();

let idCounter = 0;
/** Operation ids, unique in the page (they key the pending map and the worker's ABORT). */
export const nextId = () => ++idCounter;

export class WorkerLink {
  #spawn;
  #hooks;
  #worker = null; // adapter: {post, terminate, setBusy?}
  #ready = null; // Promise of the init result
  #pending = new Map(); // id → {onEvent, resolve, reject}
  #abandoned = new Map(); // id of an aborted operation → its grace timer (see #watchAbort)
  #terminated = false;

  /**
   * @param {(handlers: {onMessage: Function, onFatal: Function}) => object} spawn
   * @param {{init: () => object, initTimeoutMs: number, abortGraceMs?: number,
   *          onReady: (info: object) => void, onMemory: (snapshot: object) => void,
   *          onLog?: (level: string, message: string) => void, onCrash: (err: EdgeLLMError) => void}} hooks
   */
  constructor(spawn, hooks) {
    this.#spawn = spawn;
    this.#hooks = hooks;
  }

  /** The worker now (null before start and after a crash). */
  get worker() {
    return this.#worker;
  }

  /** Whether terminate() was called (every later operation rejects TERMINATED). */
  get terminated() {
    return this.#terminated;
  }

  /** Starts the worker (if needed) and waits for the wasm engine to be ready. */
  start() {
    if (this.#terminated) return Promise.reject(new EdgeLLMError(ErrorCode.TERMINATED, 'the engine was terminated'));
    if (!this.#ready) {
      const worker = this.#spawn({
        onMessage: (msg) => this.#onMessage(worker, msg),
        onFatal: (err) => this.#onFatal(worker, err),
      });
      this.#worker = worker;
      this.#ready = this.send(worker, { type: Req.INIT, ...this.#hooks.init() }, null, this.#hooks.initTimeoutMs)
        .then((info) => {
          if (info.protocol !== PROTOCOL_VERSION) throw new EdgeLLMError(ErrorCode.ENGINE_INIT_FAILED, `worker speaks protocol ${info.protocol}, client ${PROTOCOL_VERSION}`);
          this.#hooks.onReady(info);
          return info;
        })
        .catch((e) => {
          if (this.#worker === worker) this.#kill(worker);
          throw e.code === ErrorCode.ENGINE_CRASHED ? new EdgeLLMError(ErrorCode.ENGINE_INIT_FAILED, e.message, { detail: e.detail }) : e;
        });
    }
    return this.#ready;
  }

  /** Starts the worker if needed, then posts one operation. */
  async request(msg, onEvent, signal) {
    await this.start();
    return this.send(this.#worker, msg, onEvent, 0, signal);
  }

  /** Terminates the worker for good: pending operations reject TERMINATED, start() refuses. */
  terminate() {
    this.#terminated = true;
    const w = this.#worker;
    if (w) {
      this.#kill(w);
      this.#rejectAll(new EdgeLLMError(ErrorCode.TERMINATED, 'the engine was terminated'));
    }
  }

  /** Rejects every pending operation with `e` (`unstarted`: a copy marked `notStarted` for those that never heard from the worker). */
  #rejectAll(e, unstarted = false) {
    for (const p of this.#pending.values()) {
      if (unstarted && !p.heard) {
        const copy = new EdgeLLMError(e.code, e.message, { detail: e.detail });
        notStarted.add(copy);
        p.reject(copy);
      } else p.reject(e);
    }
    this.#pending.clear();
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

  #onFatal(worker, err, stuckAbort = false) {
    if (this.#worker !== worker) return;
    this.#kill(worker);
    const e = err instanceof EdgeLLMError ? err : new EdgeLLMError(ErrorCode.ENGINE_CRASHED, `the engine worker died: ${err && err.message ? err.message : err}`);
    this.#hooks.onCrash(e);
    this.#rejectAll(e, stuckAbort);
  }

  #onMessage(worker, msg) {
    if (this.#worker !== worker || !msg) return;
    if (msg.type === Ev.MEMORY) {
      this.#hooks.onMemory(msg.snapshot);
      return;
    }
    if (msg.type === Ev.LOG) {
      const fn = this.#hooks.onLog;
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
    } else {
      p.heard = true;
      if (p.onEvent) p.onEvent(msg);
    }
  }

  /** Posts one operation to `worker` and resolves with its result; other events go to `onEvent`. */
  send(worker, msg, onEvent, timeoutMs, signal, id = nextId()) {
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
        onAbort = () => this.abortOp(id, abortedError(msg.type));
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
  abortOp(id, err) {
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
   * If the worker has not answered the aborted operation within `abortGraceMs` (default 5000),
   * it is terminated as crashed: the next request starts a new worker (and reloads the model).
   */
  #watchAbort(worker, id) {
    const grace = this.#hooks.abortGraceMs ?? 5000;
    const timer = setTimeout(() => {
      this.#abandoned.delete(id);
      if (this.#worker === worker) {
        this.#onFatal(worker, new EdgeLLMError(ErrorCode.ENGINE_CRASHED, `the engine worker did not stop within ${grace} ms of an abort; it was restarted`), true);
      }
    }, grace);
    if (typeof timer === 'object' && timer.unref) timer.unref(); // Node: never keeps the process alive
    this.#abandoned.set(id, timer);
  }
}
