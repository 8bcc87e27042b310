// What the benchmarks share: the static server (127.0.0.1 only, Range-capable, serving pkg/ and
// bench/ under `root` plus a few fixed paths: `files`, URL path → file, e.g. the model) and the
// headless Chromium flags (kept off every host but 127.0.0.1).
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const MIME = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json', '.gguf': 'application/octet-stream' };

/** The headers that make a page cross-origin isolated (SharedArrayBuffer: both engines' threads). */
export const ISOLATION = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };

export function startStaticServer(root, files, extraHeaders = {}) {
  const fixed = new Set(Object.values(files));
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    let file = files[u.pathname];
    if (!file && /^\/(pkg|bench)\//.test(u.pathname)) file = path.join(root, path.normalize(decodeURIComponent(u.pathname)).replace(/^\/+/, ''));
    if (!file || (!file.startsWith(root) && !fixed.has(file)) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      res.writeHead(404).end();
      return;
    }
    const size = fs.statSync(file).size;
    const headers = { 'Content-Type': MIME[path.extname(file)] || 'application/octet-stream', 'Accept-Ranges': 'bytes', 'Cache-Control': 'no-store', ...extraHeaders };
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || '');
    if (m) {
      const start = +m[1];
      const end = m[2] ? Math.min(+m[2], size - 1) : size - 1;
      res.writeHead(206, { ...headers, 'Content-Range': `bytes ${start}-${end}/${size}`, 'Content-Length': end - start + 1 });
      if (req.method === 'HEAD') return res.end();
      fs.createReadStream(file, { start, end }).pipe(res);
    } else {
      res.writeHead(200, { ...headers, 'Content-Length': size });
      if (req.method === 'HEAD') return res.end();
      fs.createReadStream(file).pipe(res);
    }
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(server)));
}

export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run', '--disable-gpu', '--enable-precise-memory-info', '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1', '--proxy-server=http://127.0.0.1:9', '--proxy-bypass-list=127.0.0.1'];
