// The test HTTP server: 127.0.0.1 only, started and stopped by each test file.
//
//   /www/, /pkg/, ...           static files from the repository root (a fixed allow-list)
//   /models/good.gguf           the real model; Range + If-Range + ETag; bytes sent are counted
//   /models/drop-once.gguf      the real model, but the first response is cut at `dropAt` bytes
//   /models/drop-always.gguf    every response is cut at absolute byte `dropAt`: resume cannot help
//   /models/missing.gguf        404
//   /models/not-gguf.bin        an HTML page padded to 1 MiB (not a GGUF)
//   /models/truncated.gguf      the first `truncatedLen` bytes of the real model, served whole
//   /models/tiny-truncated.gguf the first 4096 bytes of the real model (ends inside the header)
//   /models/no-length.gguf      the real model with chunked encoding (no Content-Length)
//   /models/slow.gguf           the real model at `slowBytesPerSec` (for abort-during-load)
//   /app/...                    files from `appDir` when given (a bundler test's built app)
//
// `headers` (optional) are added to every static file's response, e.g. COOP/COEP for a
// cross-origin-isolated page.
//
// `stats` counts requests and body bytes per path, for assertions such as "zero network bytes
// for the model after a reload".

import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { VENDOR } from '../../www/vendor-map.js';

import { listenOnLoopback } from './loopback.js';

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.gguf': 'application/octet-stream',
  '.bin': 'application/octet-stream',
};

function parseRange(h, size) {
  const m = /^bytes=(\d*)-(\d*)$/.exec(h || '');
  if (!m || (m[1] === '' && m[2] === '')) return null;
  let start;
  let end;
  if (m[1] === '') {
    start = Math.max(0, size - Number(m[2]));
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(size - 1, Number(m[2]));
  }
  if (start > end || start >= size) return 'unsatisfiable';
  return { start, end };
}

/**
 * @param {{root: string, modelPath: string, dropAt?: number, truncatedLen?: number,
 *          slowBytesPerSec?: number, appDir?: string, staticDirs?: string[], cors?: boolean,
 *          headers?: Record<string, string>}} opts
 */
export async function startServer(opts) {
  const root = path.resolve(opts.root);
  const modelPath = opts.modelPath;
  const modelSize = fs.statSync(modelPath).size;
  const modelMtime = fs.statSync(modelPath).mtimeMs;
  const etag = `"${modelSize.toString(16)}-${Math.floor(modelMtime).toString(16)}"`;
  const dropAt = opts.dropAt ?? 50 << 20;
  const truncatedLen = opts.truncatedLen ?? Math.floor(modelSize * 0.4);
  const slowBytesPerSec = opts.slowBytesPerSec ?? 4 << 20;
  const staticDirs = opts.staticDirs ?? ['www', 'pkg', 'tests/js/pages'];
  const notGguf = Buffer.alloc(1 << 20, ' ');
  Buffer.from('<!doctype html><html><head><title>Not a model</title></head><body>Sorry, this is a web page.</body></html>\n').copy(notGguf);

  const stats = { requests: {}, bytes: {}, log: [] };
  const count = (p, n) => {
    stats.bytes[p] = (stats.bytes[p] || 0) + n;
  };
  let dropOnceDone = false;

  /** Serves [0, len) of `file` with Range support; `cut` = absolute offset to drop the socket at. */
  function serveFile(req, res, p, file, len, { cut = null, chunked = false, rate = null, type = 'application/octet-stream', tag = etag } = {}) {
    const headers = { 'Content-Type': type, 'Accept-Ranges': 'bytes', ETag: tag, 'Cache-Control': 'no-cache' };
    let start = 0;
    let end = len - 1;
    let status = 200;
    const ifRange = req.headers['if-range'];
    const range = req.headers.range && (!ifRange || ifRange === tag) ? parseRange(req.headers.range, len) : null;
    if (range === 'unsatisfiable') {
      res.writeHead(416, { 'Content-Range': `bytes */${len}` });
      return res.end();
    }
    if (range) {
      ({ start, end } = range);
      status = 206;
      headers['Content-Range'] = `bytes ${start}-${end}/${len}`;
    }
    if (!chunked) headers['Content-Length'] = String(end - start + 1);
    res.writeHead(status, headers);
    if (req.method === 'HEAD' || len === 0) return res.end();
    const stop = cut !== null ? Math.min(end, cut - 1) : end;
    if (stop < start) {
      // Nothing to send before the cut: drop right after the headers.
      setTimeout(() => res.socket && res.socket.destroy(), 20);
      return;
    }
    const stream = fs.createReadStream(file, { start, end: stop, highWaterMark: 256 << 10 });
    const finish = () => {
      if (cut !== null && stop < end) {
        // Let the written bytes reach the client, then cut the connection.
        setTimeout(() => res.socket && res.socket.destroy(), 30);
      } else {
        res.end();
      }
    };
    if (rate) {
      stream.on('data', (buf) => {
        stream.pause();
        count(p, buf.length);
        res.write(buf);
        setTimeout(() => stream.resume(), (buf.length / rate) * 1000);
      });
      stream.on('end', finish);
    } else {
      stream.on('data', (buf) => {
        count(p, buf.length);
        if (!res.write(buf)) {
          stream.pause();
          res.once('drain', () => stream.resume());
        }
      });
      stream.on('end', finish);
    }
    stream.on('error', () => res.destroy());
    res.on('close', () => stream.destroy());
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    const p = decodeURIComponent(url.pathname);
    stats.requests[p] = (stats.requests[p] || 0) + 1;
    stats.log.push({ path: p, range: req.headers.range || null, method: req.method });
    if (stats.log.length > 1000) stats.log.shift();
    // `cors`: readable from any origin (a CDN, or a dev server's page fetching the model).
    if (opts.cors) {
      res.setHeader('Access-Control-Allow-Origin', '*');
      res.setHeader('Access-Control-Expose-Headers', 'Content-Length, Content-Range, Accept-Ranges, ETag');
      if (req.method === 'OPTIONS') {
        res.writeHead(204, { 'Access-Control-Allow-Methods': 'GET, HEAD', 'Access-Control-Allow-Headers': req.headers['access-control-request-headers'] || '', 'Access-Control-Max-Age': '600' });
        return res.end();
      }
    }

    if (p.startsWith('/models/')) {
      const name = p.slice('/models/'.length);
      switch (name) {
        case 'good.gguf':
          return serveFile(req, res, p, modelPath, modelSize);
        case 'drop-once.gguf': {
          const first = !dropOnceDone;
          dropOnceDone = true;
          return serveFile(req, res, p, modelPath, modelSize, { cut: first ? dropAt : null });
        }
        case 'drop-always.gguf':
          return serveFile(req, res, p, modelPath, modelSize, { cut: dropAt });
        case 'truncated.gguf':
          return serveFile(req, res, p, modelPath, truncatedLen, { tag: `"t${truncatedLen}"` });
        case 'tiny-truncated.gguf':
          return serveFile(req, res, p, modelPath, 4096, { tag: '"tiny"' });
        case 'no-length.gguf':
          return serveFile(req, res, p, modelPath, modelSize, { chunked: true });
        case 'slow.gguf':
          return serveFile(req, res, p, modelPath, modelSize, { rate: slowBytesPerSec });
        case 'not-gguf.bin':
          res.writeHead(200, { 'Content-Type': 'text/html', 'Content-Length': String(notGguf.length) });
          count(p, notGguf.length);
          return res.end(notGguf);
        default:
          res.writeHead(404, { 'Content-Type': 'text/plain' });
          return res.end('not found\n');
      }
    }

    let file = null;
    if (opts.appDir && (p === '/app' || p.startsWith('/app/'))) {
      const rel = p === '/app' || p === '/app/' ? 'index.html' : p.slice('/app/'.length);
      file = path.join(opts.appDir, rel);
      if (!file.startsWith(path.resolve(opts.appDir))) file = null;
    } else {
      const rel = p.replace(/^\/+/, '');
      if (staticDirs.some((d) => rel === d || rel.startsWith(d + '/'))) {
        file = path.join(root, VENDOR[rel] || rel); // npm modules the page imports (www/vendor-map.js)
        if (!file.startsWith(root)) file = null;
        else if (rel.endsWith('/') || (fs.existsSync(file) && fs.statSync(file).isDirectory())) file = path.join(file, 'index.html');
      }
    }
    if (!file || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      return res.end('not found\n');
    }
    const body = fs.readFileSync(file);
    res.writeHead(200, { ...opts.headers, 'Content-Type': MIME[path.extname(file)] || 'application/octet-stream', 'Content-Length': String(body.length), 'Cache-Control': 'no-cache' });
    count(p, body.length);
    res.end(body);
  });
  const { origin, close } = await listenOnLoopback(server);
  return {
    origin,
    stats,
    modelSize,
    dropAt,
    truncatedLen,
    resetDropOnce() {
      dropOnceDone = false;
    },
    resetStats() {
      stats.requests = {};
      stats.bytes = {};
      stats.log = [];
    },
    close,
  };
}
