// `engine.estimate(source)`: each memory term of a model from its header alone. Only the first
// megabytes are read (Range requests for a URL, slices of a Blob or a file), nothing is loaded.

import { EdgeLLMError, ErrorCode, abortedError } from '../errors.js';
import { readBlob, readPath, pathSize } from '../loader.js';
import { readUrlHead } from '../memory.js';
import { skimBegin, skimPush, skimFinish, truncatedHeader } from './header-estimate.js';

// Header reads ask for 1 MiB at a time: most headers fit in one or two.
const HEAD_CHUNK = 1 << 20;

export async function estimateOp(rt, msg, signal) {
  rt.requireEngine();
  const src = msg.source || {};
  let total = null;
  let chunks;
  if (src.kind === 'blob') {
    total = src.blob.size;
    chunks = readBlob(src.blob, { signal, chunkSize: HEAD_CHUNK });
  } else if (src.kind === 'path') {
    if (!rt.env.fs) throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'file paths can only be read under Node');
    total = await pathSize(rt.env.fs, src.path);
    chunks = readPath(rt.env.fs, src.path, { signal, chunkSize: HEAD_CHUNK });
  } else if (src.kind === 'url') {
    chunks = readUrlHead(src.url, { headers: src.headers, signal, onTotal: (t) => (total = t) });
  } else {
    throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'estimate: source must be a URL, a Blob/File, or (Node) a file path');
  }
  skimBegin(rt);
  let complete = false;
  let read = 0;
  for await (const c of chunks) {
    if (signal.aborted) throw abortedError('estimate');
    read += c.byteLength;
    complete = skimPush(rt, c);
    if (complete) break;
  }
  if (!complete) throw truncatedHeader(read);
  return skimFinish(rt, total, msg.options || {}, read);
}
