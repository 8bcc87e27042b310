// The PARSE request: the OpenAI parameters checked by the core's rules (src/protocol, the same as
// edgellm serve's). It is answered at once, beside a running operation (protocol.js IMMEDIATE),
// so it replies itself instead of going through the queue.

import { EdgeLLMError, ErrorCode, toEdgeError } from '../errors.js';
import { Ev } from '../protocol.js';
import { Fatal } from './wasm-call.js';

export function parseOp(rt, msg) {
  try {
    if (rt.dead) throw rt.dead;
    rt.requireEngine();
    const value = rt.json(() => {
      try {
        return rt.bindings.parse_openai_request(msg.kind, msg.params);
      } catch (e) {
        // A broken rule: its code and the parameter at fault travel with the error.
        if (e && typeof e.rule === 'string') throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, e.message, { detail: e.rule, ...(e.param ? { param: e.param } : {}) });
        throw e;
      }
    });
    rt.queue.reply(msg.id, value);
  } catch (e) {
    const err = toEdgeError(e);
    if (e instanceof Fatal) rt.dead = err;
    rt.env.post({ type: Ev.ERROR, id: msg.id, error: err.toJSON(), ...(e instanceof Fatal || e === rt.dead ? { fatal: true } : {}) });
  }
}
