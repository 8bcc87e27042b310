// The worker's operation queue: one operation runs at a time, in arrival order (the engine has one
// model and one generation), and each ends in exactly one RESULT or ERROR message. An abort stops
// the running operation at its next yield point, or drops a queued one before it starts. A
// `Fatal` error (wasm-call.js) marks the engine dead: the queue stops and later requests are
// refused at once (runtime.js), until the client restarts the worker.

import { Ev } from '../protocol.js';
import { abortedError, toEdgeError } from '../errors.js';
import { Fatal } from './wasm-call.js';

export class OperationQueue {
  /**
   * @param {{post: (msg: object) => void, run: (msg: object, signal: AbortSignal) => Promise<any>,
   *          isDead: () => boolean, onFatal: (err: Error) => void}} host
   */
  constructor(host) {
    this.host = host;
    this.waiting = [];
    this.running = null; // {id, type, controller}
  }

  push(msg) {
    this.waiting.push(msg);
    this.#pump();
  }

  async #pump() {
    if (this.running) return;
    const { post, run, isDead, onFatal } = this.host;
    while (this.waiting.length && !isDead()) {
      const msg = this.waiting.shift();
      const controller = new AbortController();
      this.running = { id: msg.id, type: msg.type, controller };
      try {
        const value = await run(msg, controller.signal);
        if (controller.signal.aborted) throw abortedError(msg.type);
        this.reply(msg.id, value);
      } catch (e) {
        const err = controller.signal.aborted && !(e instanceof Fatal) ? abortedError(msg.type) : toEdgeError(e);
        if (e instanceof Fatal) onFatal(err);
        post({ type: Ev.ERROR, id: msg.id, error: err.toJSON(), ...(e instanceof Fatal ? { fatal: true } : {}) });
      } finally {
        this.running = null;
      }
    }
  }

  abort(target) {
    if (this.running && this.running.id === target) {
      this.running.controller.abort();
      return;
    }
    const i = this.waiting.findIndex((m) => m.id === target);
    if (i >= 0) {
      const [m] = this.waiting.splice(i, 1);
      this.host.post({ type: Ev.ERROR, id: m.id, error: abortedError(m.type).toJSON() });
    }
  }

  reply(id, value) {
    this.host.post({ type: Ev.RESULT, id, value: value === undefined ? null : value });
  }
}
