#!/usr/bin/env node
// Serves the demo page on 127.0.0.1: www/ and pkg/ from the repository, the page's vendored
// npm modules (VENDOR: www/vendor/* from node_modules, so the page needs no build step and no
// CDN), and every model in models/ under /models/ (the catalog's, www/catalog.js, and any other
// .gguf put there; with Range support, so interrupted downloads resume). Every response carries
// COOP/COEP (the page is cross-origin isolated, as a threaded wasm build needs) and CORP.
//
//   node www/serve.js [--port 8080] [--host 127.0.0.1] [--query 'server=http://127.0.0.1:8081/v1']
//   → open http://127.0.0.1:8080/www/
//
// `--port 0` picks a free port; the first line printed is `edgellm demo: <url>`.
// Needs `./build.sh build` first (it generates pkg/wasm/).
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { VENDOR } from './vendor-map.js';
import { LOOPBACK_HOSTS } from './loopback.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : dflt;
};
const port = Number(arg('port', process.env.PORT || 8080));
const host = arg('host', '127.0.0.1');
const query = arg('query', '');
const MIME = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.json': 'application/json', '.svg': 'image/svg+xml', '.wasm': 'application/wasm', '.gguf': 'application/octet-stream', '.ts': 'text/plain; charset=utf-8' };
// Cross-origin isolation (SharedArrayBuffer for a threaded build); the page's own files are
// same-origin, and a server the router talks to answers with CORS.
// The page's Content-Security-Policy: scripts only its own (no inline script, no eval; wasm
// compiled from bytes), images and fonts only its own or data:/blob: (so text that became
// markup, or a style, could not fetch a remote URL), no plugins, frames or forms. Inline styles
// stay allowed (the gauges and charts set them; a style alone can only fetch through url(),
// which img-src and font-src bound). Requests (connect-src) may go anywhere http(s): the router
// talks to the server the user sets, and a model may load from any URL.
const CSP = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self' blob:; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self'; connect-src 'self' http: https:; object-src 'none'; frame-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const ISOLATION = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp', 'Cross-Origin-Resource-Policy': 'same-origin', 'Content-Security-Policy': CSP };
const ALLOWED = ['www/', 'pkg/', 'models/'];
// Host names this server answers to on a loopback address: a page on another name that
// resolves here (DNS rebinding) gets 403, so it cannot read the files through the page's
// origin. (Bound to another address, on purpose, any name goes.)
const HOSTS = LOOPBACK_HOSTS.includes(host) ? new Set(LOOPBACK_HOSTS) : null;

/** The file a request path names, or null: the decoded path resolved first, then required to
 * lie under one of ALLOWED (an encoded `..%2f` no longer slips past the check), or a VENDOR
 * entry. */
function fileFor(rel) {
  if (rel.includes('\0')) return null;
  if (VENDOR[rel]) return path.join(root, VENDOR[rel]);
  const file = path.resolve(root, rel);
  const inside = path.relative(root, file).split(path.sep).join('/');
  if (inside.startsWith('..') || path.isAbsolute(inside)) return null;
  if (!ALLOWED.some((a) => `${inside}/`.startsWith(a))) return null;
  return rel.endsWith('/') ? path.join(file, 'index.html') : file;
}

const server = http.createServer((req, res) => {
  let hostname = null;
  try {
    hostname = new URL(`http://${req.headers.host}`).hostname;
  } catch {}
  if (HOSTS && !HOSTS.has(hostname)) return send(res, 403, 'unknown host');
  const u = new URL(req.url, 'http://x');
  let rel;
  try {
    rel = decodeURIComponent(u.pathname).replace(/^\/+/, '');
  } catch {
    return send(res, 400, 'bad path');
  }
  if (rel === '' || rel === 'www') {
    res.writeHead(302, { Location: `/www/${u.search}`, ...ISOLATION });
    return res.end();
  }
  const file = fileFor(rel);
  if (!file) return send(res, 404, 'not found');
  let st;
  try {
    st = fs.statSync(file);
  } catch {
    return send(res, 404, 'not found');
  }
  if (!st.isFile()) return send(res, 404, 'not found');
  const etag = `"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`;
  const headers = { 'Content-Type': MIME[path.extname(file)] || 'application/octet-stream', 'Accept-Ranges': 'bytes', ETag: etag, 'Cache-Control': 'no-cache', ...ISOLATION };
  let start = 0;
  let end = st.size - 1;
  let status = 200;
  const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || '');
  if (m && (!req.headers['if-range'] || req.headers['if-range'] === etag)) {
    start = Number(m[1]);
    end = m[2] ? Math.min(Number(m[2]), st.size - 1) : st.size - 1;
    if (start > end) {
      res.writeHead(416, { 'Content-Range': `bytes */${st.size}`, ...ISOLATION });
      return res.end();
    }
    status = 206;
    headers['Content-Range'] = `bytes ${start}-${end}/${st.size}`;
  }
  headers['Content-Length'] = String(st.size === 0 ? 0 : end - start + 1);
  res.writeHead(status, headers);
  if (req.method === 'HEAD' || st.size === 0) return res.end();
  fs.createReadStream(file, { start, end }).pipe(res);
});

function send(res, code, text) {
  res.writeHead(code, { 'Content-Type': 'text/plain', ...ISOLATION });
  res.end(text + '\n');
}

server.listen(port, host, () => {
  console.log(`edgellm demo: http://${host}:${server.address().port}/www/${query ? `?${query}` : ''}`);
  if (!fs.existsSync(path.join(root, 'pkg/wasm/edgellm_bg.wasm'))) console.log('note: pkg/wasm/ is missing: run ./build.sh build first');
  for (const [url, file] of Object.entries(VENDOR)) if (!fs.existsSync(path.join(root, file))) console.log(`note: ${file} is missing (for /${url}): run ./build.sh setup`);
  const models = fs.existsSync(path.join(root, 'models')) ? fs.readdirSync(path.join(root, 'models')).filter((f) => f.endsWith('.gguf')) : [];
  console.log(`models: ${models.length ? models.map((m) => `/models/${m}`).join(', ') : 'none in models/ (run ./build.sh model)'}`);
});
