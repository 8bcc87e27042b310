// Saved conversations in the worker (sessions.js stores them beside the model cache; the bytes
// are the core's snapshot format, src/snapshot.rs). A snapshot is tied to the model's sha256:
// restoring it under another model is refused here, and the core checks it again.

import { EdgeLLMError, ErrorCode } from '../errors.js';
import { openSessionStore } from '../sessions.js';
import { isWellFormed } from '../strict.js';

/** Bytes a restore may copy into wasm memory: the budget less what is live (no budget: any). */
function restoreRoom(rt) {
  const s = rt.engine.memory_snapshot ? JSON.parse(rt.call(() => rt.engine.memory_snapshot())) : null;
  if (!s || !s.budget_bytes) return Infinity;
  return Math.max(0, s.budget_bytes - (s.heap_live_bytes ?? s.wasm_memory_bytes ?? 0));
}

export async function sessionOp(rt, msg) {
  rt.requireEngine();
  if (!rt.sessions) rt.sessions = await openSessionStore(rt.cache);
  const key = msg.key;
  if (msg.action !== 'list' && (typeof key !== 'string' || key === '')) throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'a session key must be a non-empty string');
  // A lone surrogate has no UTF-8 form: such a key would be stored under U+FFFD's name and
  // share it with another key (a title cut inside an emoji).
  if (msg.action !== 'list' && !isWellFormed(key)) throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'a session key must be well-formed Unicode (it holds a lone surrogate)');
  switch (msg.action) {
    case 'save': {
      rt.requireModel();
      const bytes = rt.call(() => rt.engine.session_save());
      const tokens = rt.call(() => rt.engine.session_tokens());
      const record = { key, tokens, bytes: bytes.byteLength, model_sha256: rt.model.sha256, saved_at: new Date().toISOString() };
      await rt.sessions.put(key, bytes, record);
      return { key, tokens, bytes: bytes.byteLength };
    }
    case 'restore': {
      rt.requireModel();
      // The bytes are copied into wasm memory, which never shrinks: a saved session larger
      // than what the budget leaves is refused before it is read.
      const entry = await rt.sessions.get(key, restoreRoom(rt));
      if (!entry) throw new EdgeLLMError(ErrorCode.SESSION_NOT_FOUND, `no saved session ${JSON.stringify(key)}`);
      if (entry.record.model_sha256 !== rt.model.sha256) {
        throw new EdgeLLMError(ErrorCode.SESSION_MISMATCH, `session ${JSON.stringify(key)} was saved with model sha256 ${entry.record.model_sha256}; the loaded model is ${rt.model.sha256}`);
      }
      // The core checks the checksum, the model and the KV settings again; on error the
      // session is unchanged and the next request simply prefills.
      const tokens = rt.call(() => rt.engine.session_restore(entry.bytes));
      return { key, tokens };
    }
    case 'list':
      return (await rt.sessions.list()).map((r) => ({ key: r.key, tokens: r.tokens, bytes: r.bytes, model_sha256: r.model_sha256, saved_at: r.saved_at }));
    case 'delete':
      return { key, deleted: await rt.sessions.delete(key) };
    default:
      throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `unknown session action ${msg.action}`);
  }
}
