// Byte sources for model loading, run inside the worker. Each reader is an async generator of
// Uint8Array chunks that holds at most one chunk at a time: nothing here ever buffers the file.
//
//   readUrl   streamed fetch; a dropped connection (read error, or a body shorter than its
//             Content-Length) is resumed with `Range: bytes=<received>-` (+ `If-Range` when the
//             server gave an ETag). Bounded: `maxStalls` consecutive attempts that deliver no new
//             byte end in NETWORK. Chunks of at most `maxChunk` (DEFAULT_CHUNK) bytes.
//   readBlob  a Blob / File (also an OPFS file) read with Blob.slice, `chunkSize` at a time.
//   readPath  (Node) a file path, read into one reused buffer.

import { EdgeLLMError, ErrorCode, abortedError } from './errors.js';

export const DEFAULT_CHUNK = 4 << 20;

function throwIfAborted(signal) {
  if (signal && signal.aborted) throw abortedError('load');
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(abortedError('load'));
    const t = setTimeout(() => {
      if (signal) signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(abortedError('load'));
    };
    if (signal) signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Content-Length of a response as the size of the file, or null when it cannot be trusted. */
function bodyLength(res) {
  const enc = res.headers.get('content-encoding');
  if (enc && enc !== 'identity') return null;
  const n = Number(res.headers.get('content-length'));
  return Number.isFinite(n) && n >= 0 && res.headers.get('content-length') !== null ? n : null;
}

/** Whether a resumed response's ETag names another version than the first response's (both
 * given; a weak and a strong tag of the same value are the same version). */
function changed(first, now) {
  if (!first || !now) return false;
  const bare = (t) => t.replace(/^W\//, '');
  return bare(first) !== bare(now);
}

/** `Content-Range: bytes a-b/n` → {start, total}; null when absent or malformed. */
export function parseContentRange(v) {
  const m = /^bytes\s+(\d+)-(\d+)\/(\d+|\*)$/i.exec((v || '').trim());
  if (!m) return null;
  return { start: Number(m[1]), end: Number(m[2]), total: m[3] === '*' ? null : Number(m[3]) };
}

/** `reader.read()`, or a rejection once `ms` pass with no data (the reader is then cancelled):
 * a connection that goes silent without closing (a mobile network) never ends a read. */
function readWithin(reader, ms) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      reject(new Error(`no data for ${ms} ms`));
      reader.cancel().catch(() => {});
    }, ms);
    reader.read().then(
      (r) => {
        clearTimeout(t);
        resolve(r);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

/**
 * @param {string} url
 * @param {{headers?: Record<string,string>, signal?: AbortSignal, maxStalls?: number,
 *          idleTimeoutMs?: number,
 *          retryDelayMs?: number, onStart?: (info: {total: number|null, etag: string|null}) => void,
 *          onResume?: (info: {offset: number, attempt: number, reason: string}) => void,
 *          fetchImpl?: typeof fetch}} [opts]
 */
export async function* readUrl(url, opts = {}) {
  const {
    headers = {},
    signal,
    maxStalls = 4,
    // A body silent this long is a stalled connection: the read fails and the download resumes
    // (a Range request from where it stopped), as when the connection drops.
    idleTimeoutMs = 30_000,
    retryDelayMs = 200,
    onStart,
    onResume,
    fetchImpl = globalThis.fetch.bind(globalThis),
    maxChunk = DEFAULT_CHUNK,
  } = opts;
  let offset = 0;
  let total = null;
  let etag = null;
  let started = false;
  let stalls = 0;
  let lastError = null;
  let link = null;

  try {
    for (;;) {
      throwIfAborted(signal);
      const h = { ...headers };
      if (offset > 0) {
        h['Range'] = `bytes=${offset}-`;
        if (etag && !etag.startsWith('W/')) h['If-Range'] = etag;
      }
      let res;
      // A server that takes the connection but sends no headers for idleTimeoutMs is stalled too:
      // this attempt's own signal ends the fetch then (and follows the caller's for its body).
      if (link) link.dispose();
      link = linkedSignal(signal);
      let headersLate = false;
      const headersTimer = setTimeout(() => {
        headersLate = true;
        link.abort(new Error(`no response headers within ${idleTimeoutMs} ms`));
      }, idleTimeoutMs);
      try {
        // no-store: the model is kept in our own verified cache; a second copy in the HTTP cache
        // would only cost disk and could be served stale.
        res = await fetchImpl(url, { headers: h, signal: link.signal, cache: 'no-store', credentials: 'same-origin' });
      } catch (e) {
        throwIfAborted(signal);
        lastError = headersLate ? new Error(`no response headers within ${idleTimeoutMs} ms`) : e;
        // A first request that fails outright (refused, DNS, CORS) is final; a stalled one is
        // retried like a stalled body.
        if (!started && !headersLate) {
          throw new EdgeLLMError(ErrorCode.NETWORK, `could not fetch ${url}: ${e && e.message ? e.message : e}`, { cause: e, detail: 'FETCH_FAILED' });
        }
        if (++stalls > maxStalls) break;
        if (onResume) onResume({ offset, attempt: stalls, reason: String(lastError.message) });
        await sleep(retryDelayMs * stalls, signal);
        continue;
      } finally {
        clearTimeout(headersTimer);
      }

      let skip = 0;
      if (!started) {
        if (!res.ok) {
          if (res.body) res.body.cancel().catch(() => {});
          throw new EdgeLLMError(ErrorCode.NETWORK, `HTTP ${res.status} ${res.statusText || ''} for ${url}`.trim(), { status: res.status, detail: 'HTTP_STATUS' });
        }
        total = bodyLength(res);
        etag = res.headers.get('etag');
        started = true;
        if (onStart) onStart({ total, etag });
      } else if (changed(etag, res.headers.get('etag'))) {
        // Another version of the file (a new ETag), whatever the status: its bytes must not be
        // spliced after the old version's.
        if (res.body) res.body.cancel().catch(() => {});
        throw new EdgeLLMError(ErrorCode.NETWORK, `${url} changed during download (ETag ${etag} → ${res.headers.get('etag')})`, { status: res.status, detail: 'RESOURCE_CHANGED' });
      } else if (res.status === 206) {
        const cr = parseContentRange(res.headers.get('content-range'));
        if (!cr || cr.start !== offset || (total !== null && cr.total !== null && cr.total !== total)) {
          if (res.body) res.body.cancel().catch(() => {});
          throw new EdgeLLMError(ErrorCode.NETWORK, `resume of ${url} at byte ${offset} got a mismatched Content-Range (${res.headers.get('content-range')})`, { status: 206, detail: 'RANGE_MISMATCH' });
        }
      } else if (res.status === 200) {
        // The server ignored Range (or If-Range said the file changed). Same length: re-read and
        // skip what we have. A different length means a different file: fail rather than splice.
        const len = bodyLength(res);
        if (total !== null && len !== null && len !== total) {
          if (res.body) res.body.cancel().catch(() => {});
          throw new EdgeLLMError(ErrorCode.NETWORK, `${url} changed during download (${total} → ${len} bytes)`, { status: 200, detail: 'RESOURCE_CHANGED' });
        }
        skip = offset;
      } else if (TRANSIENT_STATUS.has(res.status)) {
        // The server is busy or restarting (429, 502, 503, 504): the bytes received are kept and
        // the resume tried again, after its Retry-After (up to RETRY_AFTER_MAX_MS) if longer.
        if (res.body) res.body.cancel().catch(() => {});
        lastError = new Error(`HTTP ${res.status} resuming at byte ${offset}`);
        if (++stalls > maxStalls) break;
        if (onResume) onResume({ offset, attempt: stalls, reason: lastError.message });
        await sleep(Math.max(retryDelayMs * stalls, retryAfterMs(res.headers.get('retry-after'))), signal);
        continue;
      } else {
        if (res.body) res.body.cancel().catch(() => {});
        throw new EdgeLLMError(ErrorCode.NETWORK, `HTTP ${res.status} resuming ${url} at byte ${offset}`, { status: res.status, detail: 'HTTP_STATUS' });
      }

      const before = offset;
      const reader = res.body.getReader();
      let failed = null;
      try {
        for (;;) {
          let r;
          try {
            r = await readWithin(reader, idleTimeoutMs);
          } catch (e) {
            failed = e;
            break;
          }
          if (r.done) break;
          let chunk = r.value;
          if (skip > 0) {
            if (chunk.byteLength <= skip) {
              skip -= chunk.byteLength;
              continue;
            }
            chunk = chunk.subarray(skip);
            skip = 0;
          }
          if (total !== null && offset + chunk.byteLength > total) {
            throw new EdgeLLMError(ErrorCode.NETWORK, `${url} sent more bytes than its Content-Length (${total})`, { detail: 'BODY_TOO_LONG' });
          }
          // Never more than maxChunk at a time: the consumer copies each chunk into wasm memory,
          // which never shrinks, and some engines hand over whatever the network has buffered in
          // one read (WebKitGTK 2.50: 10+ MB pieces of a loopback download, which grew wasm memory
          // by 112 MB over the estimate). Views, not copies.
          for (let at = 0; at < chunk.byteLength; at += maxChunk) {
            const piece = chunk.subarray(at, Math.min(chunk.byteLength, at + maxChunk));
            offset += piece.byteLength;
            yield piece;
          }
        }
      } finally {
        // Runs on normal end, on error, and when the consumer stops early (generator return()).
        reader.cancel().catch(() => {});
      }
      throwIfAborted(signal);
      if (!failed && (total === null || offset === total)) return; // complete
      lastError = failed || new Error(`connection closed at byte ${offset} of ${total}`);
      if (offset > before) stalls = 0;
      if (++stalls > maxStalls) break;
      if (onResume) onResume({ offset, attempt: stalls, reason: String(lastError && lastError.message ? lastError.message : lastError) });
      await sleep(retryDelayMs * stalls, signal);
    }
  } finally {
    if (link) link.dispose();
  }
  throw new EdgeLLMError(
    ErrorCode.NETWORK,
    `download of ${url} failed at byte ${offset}${total !== null ? ` of ${total}` : ''} after ${maxStalls} resume attempts: ${lastError && lastError.message ? lastError.message : lastError}`,
    { detail: 'CONNECTION_LOST', cause: lastError },
  );
}

/** Statuses a resume request is retried after (the download so far is kept). */
const TRANSIENT_STATUS = new Set([429, 502, 503, 504]);
/** The longest Retry-After honoured (a longer one waits this long, then tries). */
const RETRY_AFTER_MAX_MS = 30_000;

/** Milliseconds a Retry-After header asks for (seconds or an HTTP date; 0 when absent or bad). */
function retryAfterMs(value) {
  if (!value) return 0;
  const secs = Number(value);
  const ms = Number.isFinite(secs) ? secs * 1000 : Date.parse(value) - Date.now();
  return Number.isFinite(ms) ? Math.min(Math.max(ms, 0), RETRY_AFTER_MAX_MS) : 0;
}

/** An AbortController that also aborts when `outer` does; `dispose()` stops following it. */
function linkedSignal(outer) {
  const ctl = new AbortController();
  const follow = () => ctl.abort(outer.reason);
  if (outer) {
    if (outer.aborted) follow();
    else outer.addEventListener('abort', follow, { once: true });
  }
  return {
    signal: ctl.signal,
    abort: (reason) => ctl.abort(reason),
    dispose: () => outer && outer.removeEventListener('abort', follow),
  };
}

/** @param {Blob} blob */
export async function* readBlob(blob, { signal, chunkSize = DEFAULT_CHUNK } = {}) {
  for (let off = 0; off < blob.size; off += chunkSize) {
    throwIfAborted(signal);
    let buf;
    try {
      buf = await blob.slice(off, Math.min(blob.size, off + chunkSize)).arrayBuffer();
    } catch (e) {
      throwIfAborted(signal);
      // A File whose backing file changed or vanished (NotReadableError) lands here.
      throw new EdgeLLMError(ErrorCode.NETWORK, `could not read the file at byte ${off}: ${e && e.message ? e.message : e}`, { detail: 'FILE_READ', cause: e });
    }
    yield new Uint8Array(buf);
  }
}

/** Node only: `fs` is passed in so this module stays importable in browsers. */
export async function* readPath(fs, path, { signal, chunkSize = DEFAULT_CHUNK } = {}) {
  let fh;
  try {
    fh = await fs.promises.open(path, 'r');
  } catch (e) {
    throw new EdgeLLMError(ErrorCode.NETWORK, `could not open ${path}: ${e.message}`, { detail: e.code === 'ENOENT' ? 'FILE_NOT_FOUND' : 'FILE_READ', cause: e });
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new EdgeLLMError(ErrorCode.NETWORK, `could not read ${path}: not a file`, { detail: 'FILE_READ' });
    const { size } = st;
    const buf = new Uint8Array(Math.min(chunkSize, Math.max(size, 1)));
    let off = 0;
    while (off < size) {
      throwIfAborted(signal);
      const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, size - off), off);
      if (bytesRead === 0) throw new EdgeLLMError(ErrorCode.GGUF_TRUNCATED, `${path} shrank while being read`, { detail: 'FILE_READ' });
      off += bytesRead;
      // The consumer copies the chunk into wasm memory before asking for the next one, so the
      // buffer can be reused.
      yield buf.subarray(0, bytesRead);
    }
  } finally {
    await fh.close().catch(() => {});
  }
}

export async function pathSize(fs, path) {
  try {
    const st = await fs.promises.stat(path);
    if (!st.isFile()) throw Object.assign(new Error('not a file'), { code: 'EISDIR' });
    return st.size;
  } catch (e) {
    throw new EdgeLLMError(ErrorCode.NETWORK, `could not open ${path}: ${e.message}`, { detail: e.code === 'ENOENT' ? 'FILE_NOT_FOUND' : 'FILE_READ', cause: e });
  }
}
