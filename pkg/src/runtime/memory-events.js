// The memory ledger's reports from the worker: a `memory` event with the core's snapshot at the
// end of each load and request, on every pressure-level change (polled after every chunk and
// step), and on `engine.refreshMemory()` / `setMemoryOptions()`. Beside the core's figures it
// counts the model bytes the worker holds in JS memory (admission.js keeps the header's chunks).

import { EdgeLLMError, ErrorCode } from '../errors.js';
import { Ev } from '../protocol.js';

export class MemoryEvents {
  /** @param {import('../runtime.js').Runtime} rt */
  constructor(rt) {
    this.rt = rt;
    this.jsBuffers = 0; // bytes of model data the worker holds outside wasm memory right now
    this.jsBuffersPeak = 0; // their peak during the last load (the header's chunks, while admitting it)
    this.last = null; // the latest snapshot posted
  }

  /** Reports a pressure-level change (checked after every chunk and step). */
  poll() {
    const { engine } = this.rt;
    if (!engine || !engine.memory_poll) return;
    const s = this.rt.call(() => engine.memory_poll());
    if (s) this.post('level', JSON.parse(s));
  }

  /** Posts the ledger's snapshot as a `memory` event and keeps it as the latest. A level
   *  change since the last poll (made after the last step, e.g. by the stream's own buffers,
   *  or by the step that failed) is announced first as a `level` event: a listener that
   *  follows the levels sees every change, whatever event carries the snapshot next. */
  post(reason, snapshot) {
    const { engine } = this.rt;
    if (!engine || this.rt.dead || !engine.memory_snapshot) return;
    try {
      if (reason !== 'level') this.poll();
      snapshot = snapshot || JSON.parse(engine.memory_snapshot());
    } catch {
      return; // the instance is broken: the crash is reported on its own
    }
    snapshot.js_buffers_bytes = this.jsBuffers;
    snapshot.js_buffers_peak_bytes = this.jsBuffersPeak;
    snapshot.reason = reason;
    this.last = snapshot;
    this.rt.env.post({ type: Ev.MEMORY, snapshot });
  }

  /** The MEMORY request: `get` a fresh snapshot, or `set` the budget and thresholds first. */
  op(msg) {
    const rt = this.rt;
    rt.requireEngine();
    if (msg.action === 'set') rt.call(() => rt.engine.set_memory_options(JSON.stringify(msg.options)));
    else if (msg.action !== 'get') throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `unknown memory action ${msg.action}`);
    this.post(msg.action === 'set' ? 'options' : 'read');
    return this.last;
  }
}
