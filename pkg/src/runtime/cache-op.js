// The CACHE request: `engine.cache.list() / delete(url) / clear()` on the worker's model cache
// (cache.js). Reads and writes of entries during a load are load-sources.js's.

import { EdgeLLMError, ErrorCode } from '../errors.js';

export async function cacheOp(rt, msg) {
  switch (msg.action) {
    case 'list':
      return rt.cache.list();
    case 'delete':
      await rt.cache.evict(msg.url);
      return null;
    case 'clear':
      await rt.cache.clear();
      return null;
    default:
      throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `unknown cache action ${msg.action}`);
  }
}
