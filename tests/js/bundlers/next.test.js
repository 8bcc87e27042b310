// The packed package in a fresh Next.js app (App Router, a client component; no next.config):
// `next dev` and `next build` + `next start` (Turbopack, Next's default), each page run in
// Chromium. The model comes from the test server (CORS), as from any model host.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { TOOLS, bundlerSkip, setUp, DEMO_JS, freePort, startTool, runTool, runPage, assertDemo } from './apps.js';

const skip = bundlerSkip({ tools: true });
const NEXT = path.join(TOOLS, 'node_modules/next/dist/bin/next');

const LAYOUT = `export default function RootLayout({ children }) {
  return <html lang="en"><body>{children}</body></html>;
}
`;

// React runs effects twice in development (Strict Mode): one engine per page, not two.
const PAGE = `'use client';
import { useEffect, useState } from 'react';
import { createEngine } from 'edgellm';
import { demo, failure } from './demo.js';

let run = null;

export default function Page() {
  const [out, setOut] = useState(null);
  useEffect(() => {
    run ??= demo(createEngine, new URLSearchParams(location.search)).catch(failure);
    run.then((r) => setOut(JSON.stringify(r)));
  }, []);
  useEffect(() => {
    if (out) document.body.dataset.done = '1';
  }, [out]);
  return <pre id="out">{out}</pre>;
}
`;

const s = setUp('next', skip);
let app;
let models; // the model's host (CORS)

before(async () => {
  if (skip) return;
  app = s.makeApp({ 'app/layout.js': LAYOUT, 'app/page.js': PAGE, 'app/demo.js': DEMO_JS });
  // The app's own lock file would make Turbopack take the app as the workspace root, which the
  // shared tools (tests/js/bundlers/node_modules) are outside of.
  fs.rmSync(path.join(app.dir, 'package-lock.json'), { force: true });
  models = await s.serve(null, { cors: true });
});

const pageUrl = (origin) => `${origin}/?model=${encodeURIComponent(`${models.origin}/models/good.gguf`)}`;

test('next dev → a client component runs the model in Chromium', { skip, timeout: 300_000 }, async () => {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const dev = await startTool([NEXT, 'dev', '-H', '127.0.0.1', '-p', String(port)], { cwd: app.dir, url: `${origin}/`, timeoutMs: 180_000 });
  try {
    assertDemo(assert, await runPage(s.browser, pageUrl(origin)), s.want);
  } finally {
    await dev.stop();
  }
});

test('next build + next start → the production page runs the model in Chromium', { skip, timeout: 400_000 }, async () => {
  fs.rmSync(path.join(app.dir, '.next'), { recursive: true, force: true });
  runTool([NEXT, 'build'], { cwd: app.dir });
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const server = await startTool([NEXT, 'start', '-H', '127.0.0.1', '-p', String(port)], { cwd: app.dir, url: `${origin}/` });
  try {
    assertDemo(assert, await runPage(s.browser, pageUrl(origin)), s.want);
  } finally {
    await server.stop();
  }
});
