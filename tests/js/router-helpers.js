// Helpers for the router tests: the real server (`edgellm serve`, the native binary) as a child
// process on 127.0.0.1, and small fake / proxy servers for failure cases. Everything listens on
// 127.0.0.1 and is stopped by the test file that started it.
import http from 'node:http';
import { spawn, execFileSync } from 'node:child_process';

import { MODEL, cliPath } from './helpers.js';

/** Whether the built CLI has the `serve` command. */
export function cliCanServe(cli = cliPath()) {
  if (!cli) return false;
  try {
    return /^\s+serve\b/m.test(execFileSync(cli, ['help'], { encoding: 'utf8' }));
  } catch {
    return false;
  }
}

const live = new Set();
process.on('exit', () => {
  for (const p of live) p.kill('SIGKILL');
});

/**
 * Starts `edgellm serve --model MODEL --port 0 ...args`; resolves once it listens.
 * @returns {Promise<{url: string, baseURL: string, proc: import('node:child_process').ChildProcess,
 *   health: () => Promise<any>, kill: (sig?: string) => Promise<void>, rss_kib: () => number}>}
 */
export async function startEdgeServer(args = [], { timeoutMs = 60_000 } = {}) {
  const cli = cliPath();
  if (!cli) throw new Error('native CLI not built');
  const proc = spawn(cli, ['serve', '--model', MODEL, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(proc);
  let out = '';
  let err = '';
  proc.stderr.on('data', (d) => (err += d));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`edgellm serve did not start within ${timeoutMs} ms: ${err}`)), timeoutMs);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`edgellm serve exited (${code}): ${err}`));
    });
  });
  const exited = new Promise((r) => proc.on('exit', r));
  return {
    url,
    baseURL: `${url}/v1`,
    proc,
    stderr: () => err,
    async health() {
      const r = await fetch(`${url}/health`);
      return r.json();
    },
    async kill(sig = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(sig);
      await exited;
      live.delete(proc);
    },
  };
}

/** Counts the requests a server received, not counting the /health calls used to read it. */
export async function serverRequests(srv) {
  const h = await srv.health();
  return h.requests.total - h.requests.health;
}

/** A throwaway HTTP server on 127.0.0.1: `handler(req, res, body)`; `log` lists method + path. */
export async function startFake(handler) {
  const log = [];
  const sockets = new Set();
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      log.push(`${req.method} ${req.url}`);
      handler(req, res, Buffer.concat(chunks).toString('utf8'));
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    baseURL: `${url}/v1`,
    log,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

/** A proxy to `target` that can rewrite JSON answers of some paths (`rewrite[path](json)`). */
export async function startProxy(target, rewrite = {}) {
  return startFake((req, res, body) => {
    const u = new URL(req.url, target);
    const headers = { ...req.headers, host: u.host };
    delete headers['content-length'];
    const up = http.request(u, { method: req.method, headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (r) => {
      const fix = rewrite[u.pathname];
      if (!fix) {
        res.writeHead(r.statusCode, r.headers);
        r.pipe(res);
        return;
      }
      const parts = [];
      r.on('data', (c) => parts.push(c));
      r.on('end', () => {
        let text = Buffer.concat(parts).toString('utf8');
        try {
          text = JSON.stringify(fix(JSON.parse(text)));
        } catch {
          /* leave it */
        }
        const h = { ...r.headers, 'content-length': String(Buffer.byteLength(text)) };
        delete h['transfer-encoding'];
        res.writeHead(r.statusCode, h);
        res.end(text);
      });
    });
    up.on('error', () => res.destroy());
    up.end(body);
  });
}

/** A port nothing listens on (bound, then released). */
export async function closedPort() {
  const s = http.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const port = s.address().port;
  await new Promise((r) => s.close(r));
  return port;
}

/** A fetch that records every URL it is asked for (the client-side request log). */
export function countingFetch(log) {
  return (url, init) => {
    log.push(`${(init && init.method) || 'GET'} ${url}`);
    return fetch(url, init);
  };
}
