// The stream a streamed `create()` resolves with: chunks pushed by the worker's TOKEN events,
// read OpenAI SDK style (`for await (const chunk of stream)`), or as a web ReadableStream.
// Ending it early (abort(), the controller, leaving the loop) calls `onCancel`, which stops the
// generation in the worker.

import { ErrorCode, abortedError } from '../errors.js';

/**
 * An async-iterable stream of chunks (OpenAI SDK style: `for await (const chunk of stream)`).
 * `abort()` or leaving the loop early stops the generation in the worker.
 */
export class CompletionStream {
  #queue = [];
  #waiters = [];
  /** Producers waiting for the consumer to catch up (see `_room`). */
  #roomWaiters = [];
  #done = false;
  #error = null;
  #onCancel;
  /** Removes the listener on the request's signal (a signal may outlive many streams). */
  #detach = () => {};

  /** `signal`: the request's own AbortSignal, if any: aborting it ends the stream at once, as
   * `abort()` does (chunks already queued are dropped; the next read rejects ABORTED), rather
   * than when the worker or the network confirms. */
  constructor(onCancel, signal) {
    this.#onCancel = onCancel;
    // The openai SDK's handle: `stream.controller.abort()` stops the generation like abort().
    this.controller = new AbortController();
    this.controller.signal.addEventListener('abort', () => this.abort(), { once: true });
    if (signal) {
      if (signal.aborted) this.abort();
      else {
        const onAbort = () => this.abort();
        signal.addEventListener('abort', onAbort, { once: true });
        this.#detach = () => signal.removeEventListener('abort', onAbort);
      }
    }
  }

  /** @internal */ _push(chunk) {
    if (this.#done) return;
    const w = this.#waiters.shift();
    if (w) w.resolve({ value: chunk, done: false });
    else this.#queue.push(chunk);
  }

  /** @internal Resolves once fewer than `high` chunks wait for the consumer, or the stream has
   * ended: a producer awaits it so a slow reader holds back the source (the network, for a
   * routed answer) instead of queueing without bound. */
  _room(high = 64) {
    if (this.#done || this.#queue.length < high) return Promise.resolve();
    return new Promise((resolve) => this.#roomWaiters.push({ resolve, high }));
  }

  #wakeProducers() {
    if (!this.#roomWaiters.length) return;
    const still = [];
    for (const w of this.#roomWaiters) {
      if (this.#done || this.#queue.length < w.high) w.resolve();
      else still.push(w);
    }
    this.#roomWaiters = still;
  }

  /** @internal */ _end(error) {
    if (this.#done) return;
    this.#done = true;
    this.#detach();
    this.#error = error || null;
    // Chunks already queued are still delivered, unless the end is an abort (chunks stop at once).
    if (error && error.code === ErrorCode.ABORTED) this.#queue.length = 0;
    this.#wakeProducers();
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
        if (this.#queue.length) {
          const value = this.#queue.shift();
          this.#wakeProducers();
          return Promise.resolve({ value, done: false });
        }
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
          this.#detach();
          this.#queue.length = 0;
          this.#wakeProducers();
          // Reads still waiting (another loop over the same stream) end with it.
          for (const w of this.#waiters.splice(0)) w.resolve({ value: undefined, done: true });
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
