// Strict option checks shared by the client and the router: a flag that guards privacy or
// parsing accepts only a real boolean, so `private: "true"`, `1` or `"yes"` is an
// INVALID_REQUEST, never silently read as "not private".

import { EdgeLLMError, ErrorCode } from './errors.js';

/** `p[name]` when it is a boolean, `undefined` when absent (or null); anything else throws. */
export function strictBoolean(p, name) {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') {
    throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `${name} must be true or false, got ${JSON.stringify(v)}`);
  }
  return v;
}
