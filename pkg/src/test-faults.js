// Test-only hooks inside the worker: fault injection for the fault matrix
// (tests/js/faults.test.js), and a decode slow-down for the sustained-speed tests.
//
// `engine._debugFault(spec)` arms ONE fault; it fires at the `after`-th load chunk, prefill chunk
// or decode step of whatever operation reaches that point next, then disarms. A restarted worker
// starts unarmed. The faults are real, not simulated answers: 'panic' traps the wasm instance
// through its `debug_panic` export (what an out-of-bounds access or a failed allocation does),
// 'pool-panic' traps a pool worker of the threaded build inside its part of the next job (the
// engine's caller must then crash cleanly, not wait for it for ever),
// and 'stall' blocks the worker's thread synchronously for `ms` (what a wasm call that never
// returns does: the worker cannot even read an abort). So the client's crash, abort-grace and
// restart paths and the cache's eviction rules run exactly as they would in the field.
import { EdgeLLMError, ErrorCode } from './errors.js';

export const FAULT_POINTS = Object.freeze(['load', 'prefill', 'decode']);
export const FAULT_KINDS = Object.freeze(['panic', 'stall', 'pool-panic']);
const MAX_STALL_MS = 60_000; // a stall is bounded even if nobody aborts it

const invalid = (m) => new EdgeLLMError(ErrorCode.INVALID_REQUEST, `debug fault: ${m}`);

export class FaultPlan {
  #armed = null;
  #seen = 0;

  /** @param {{at: 'load'|'prefill'|'decode', after?: number, fault: 'panic'|'stall', ms?: number}} spec */
  arm(spec) {
    if (!spec || typeof spec !== 'object') throw invalid('spec must be an object');
    const { at, fault } = spec;
    const after = spec.after ?? 1;
    if (!FAULT_POINTS.includes(at)) throw invalid(`at must be one of ${FAULT_POINTS.join(', ')}`);
    if (!FAULT_KINDS.includes(fault)) throw invalid(`fault must be one of ${FAULT_KINDS.join(', ')}`);
    if (!Number.isSafeInteger(after) || after < 1) throw invalid('after must be an integer ≥ 1');
    const ms = fault === 'stall' ? spec.ms ?? MAX_STALL_MS : 0;
    if (!Number.isFinite(ms) || ms < 0 || ms > MAX_STALL_MS) throw invalid(`ms must be in [0, ${MAX_STALL_MS}]`);
    this.#armed = { at, after, fault, ms };
    this.#seen = 0;
    return { ...this.#armed };
  }

  /** Called at every fault point; returns the armed fault when it is due there, else null. */
  due(point) {
    const a = this.#armed;
    if (!a || a.at !== point) return null;
    this.#seen++;
    if (this.#seen < a.after) return null;
    this.#armed = null;
    return a;
  }
}

/** Blocks the calling thread for `ms` (a busy wait: plain workers have no blocking sleep). */
export function stallThread(ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    /* the worker is stuck here, as inside a wasm call that does not return */
  }
}

/**
 * `engine._debugDecodeDelay({ms, after_tokens})`: from the `after_tokens`-th decode step of every
 * later generation on, the worker waits `ms` after each step, so a test can force the
 * sustained-speed windows down (`throttled`). Returns the delay, or null (ms 0: off).
 */
export function decodeDelaySpec(msg) {
  const ms = Number(msg.ms);
  const after = Number(msg.after_tokens ?? 0);
  if (!Number.isFinite(ms) || ms < 0 || ms > 10_000 || !Number.isInteger(after) || after < 0) {
    throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'decode-delay: ms in [0, 10000], after_tokens a non-negative integer');
  }
  return ms > 0 ? { ms, after_tokens: after } : null;
}
