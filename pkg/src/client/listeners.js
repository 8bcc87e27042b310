// `engine.on(event, fn)` / `off`: the engine's own events. A listener that throws is reported
// and skipped, never allowed to break the operation that emitted the event.

import { invalid } from './options.js';

/** What `engine.on` accepts. */
const EVENTS = ['memory', 'pressure'];

export class Listeners {
  #byEvent = new Map(); // event name → Set of callbacks

  /** INVALID_REQUEST unless `fn` is a function and `event` one of EVENTS. */
  check(event, fn) {
    if (typeof fn !== 'function') throw invalid('on(event, fn): fn must be a function');
    if (!EVENTS.includes(event)) throw invalid(`unknown event ${JSON.stringify(event)} (events: ${EVENTS.map((e) => `'${e}'`).join(', ')})`);
  }

  add(event, fn) {
    this.check(event, fn);
    if (!this.#byEvent.has(event)) this.#byEvent.set(event, new Set());
    this.#byEvent.get(event).add(fn);
  }

  remove(event, fn) {
    const set = this.#byEvent.get(event);
    if (set) set.delete(fn);
  }

  emit(event, value) {
    const set = this.#byEvent.get(event);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        fn(value);
      } catch (e) {
        console.warn(`[edgellm] a '${event}' listener threw: ${e && e.message ? e.message : e}`);
      }
    }
  }
}
