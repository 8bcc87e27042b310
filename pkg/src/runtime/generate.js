// One generation in the worker: prefill in chunks, then one decode step per call, with an
// `await` between them so that `abort` and `status` messages are handled while it runs. The
// OpenAI objects (chunks, response, usage) are built by the core (src/protocol/response.rs, the
// same code as edgellm serve's); this loop adds what only a local run has: the KV cache, the
// memory ledger and the decode speed per time window (sustained.js).

import { EdgeLLMError, ErrorCode, abortedError } from '../errors.js';
import { Ev } from '../protocol.js';
import { DecodeWindows } from '../sustained.js';

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

export async function generateOp(rt, msg, signal) {
  rt.requireEngine();
  rt.requireModel();
  const id = msg.id;
  const begin = rt.json(() => rt.engine.generate_begin(JSON.stringify(msg.request)));
  // `msg.openai` = {envelope: {kind, id, created, model, prompt_chars}, stream, include_usage}.
  const oa = msg.openai;
  const envelope = JSON.stringify(oa.envelope);
  const chunks = oa.stream ? rt.call(() => new rt.bindings.OpenAiStream(envelope, !!oa.include_usage)) : null;
  rt.env.post({ type: Ev.STARTED, id, prompt_tokens: begin.prompt_tokens, cached_tokens: begin.cached_tokens });
  let active = true;
  // Decode speed per time window (sustained.js), measured here where the tokens are made.
  const windows = new DecodeWindows(msg.sustained || {});
  const delay = rt.decodeDelay;
  let steps = 0;
  try {
    // Prefill in chunks; each call returns {done}.
    for (;;) {
      await yieldToEventLoop();
      if (signal.aborted) throw abortedError('generation');
      const p = rt.json(() => rt.engine.prefill_chunk());
      rt.faultPoint('prefill');
      rt.memory.poll();
      if (p.done) break;
    }
    // Decode, one token per call.
    for (;;) {
      await yieldToEventLoop();
      if (signal.aborted) throw abortedError('generation');
      const ev = rt.json(() => rt.engine.decode_step());
      rt.memory.poll();
      // The step's chunks: a choice's role with its first, its text and calls, its finish.
      const out = chunks ? JSON.parse(rt.call(() => chunks.step(JSON.stringify(ev)))) : [];
      if ((ev.token !== null && ev.token !== undefined) || out.length) rt.env.post({ type: Ev.TOKEN, id, text: ev.text || '', token: ev.token ?? null, choice: ev.choice || 0, ...(out.length ? { chunks: out } : {}) });
      if (ev.token !== null && ev.token !== undefined && windows.token(now()) !== null) rt.env.post({ type: Ev.SUSTAINED, id, sustained: windows.summary() });
      if (ev.done) break;
      rt.faultPoint('decode'); // after the token went out: a crash here loses nothing emitted
      if (delay && ++steps > delay.after_tokens) await new Promise((r) => setTimeout(r, delay.ms));
    }
    const raw = rt.call(() => rt.engine.generate_end());
    const result = JSON.parse(raw);
    result.sustained = windows.summary();
    active = false;
    rt.memory.post('request');
    if (rt.memory.last) result.memory = rt.memory.last;
    // The core's usage plus what only a local run has: the KV cache, the memory ledger and the
    // decode speed per window (usage.compute.sustained; the client adds the compute pressure).
    const usage = rt.json(() => rt.bindings.openai_usage(raw));
    usage.kv = result.kv;
    if (result.memory) usage.memory = result.memory;
    if (usage.compute) usage.compute.sustained = result.sustained;
    const u = JSON.stringify(usage);
    result.openai = chunks ? { chunks: rt.json(() => chunks.end(u)) } : { response: rt.json(() => rt.bindings.openai_completion(envelope, raw, u)) };
    return result;
  } finally {
    if (chunks && !rt.dead) chunks.free();
    // A failed or aborted generation reports the ledger too.
    if (active && !rt.dead) rt.memory.post('request');
    if (active && !rt.dead) {
      try {
        rt.engine.generate_cancel();
      } catch {
        /* already reset */
      }
    }
  }
}

/** COUNT: the prompt's tokens as generate would run them, and whether it fits (the core's count_tokens: no model call). */
export function countOp(rt, msg) {
  rt.requireEngine();
  rt.requireModel();
  return rt.json(() => rt.engine.count_tokens(JSON.stringify(msg.request)));
}
