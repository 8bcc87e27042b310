// Chromium A/B: two package roots (each with pkg/), one page, two engines, alternating.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
const [aRoot, bRoot, model, rounds = '4', n = '128', simd = 'relaxed'] = process.argv.slice(2);
const MIME = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };
const page = `<!doctype html><script type="module">
window.mk = async (r, simd, url) => { const { createEngine } = await import('/' + r + '/pkg/src/index.js'); const e = await createEngine({ cache: false, simd }); await e.load(url, { cache: false }); window['e' + r] = e; return e.info.simd_tier; };
window.gen = async (r, params) => { const o = await window['e' + r].completions.create(params); return { tps: o.usage.decode_tokens_per_s, text: o.choices[0].text, head: JSON.stringify(o.usage).slice(0, 0) }; };
window.ready = true;
</script>`;
const server = http.createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  let file = null;
  if (u.pathname === '/page.html') { res.writeHead(200, { 'Content-Type': 'text/html' }); return res.end(page); }
  if (u.pathname === '/model.gguf') file = model;
  const m = /^\/(a|b)\/(pkg\/.*)$/.exec(u.pathname);
  if (m) file = path.join(m[1] === 'a' ? aRoot : bRoot, m[2]);
  if (!file || !fs.existsSync(file)) { res.writeHead(404).end(); return; }
  const size = fs.statSync(file).size;
  const h = { 'Content-Type': MIME[path.extname(file)] || 'application/octet-stream', 'Accept-Ranges': 'bytes', 'Cache-Control': 'no-store' };
  const r = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || '');
  if (r) { const s = +r[1], e = r[2] ? Math.min(+r[2], size - 1) : size - 1; res.writeHead(206, { ...h, 'Content-Range': `bytes ${s}-${e}/${size}`, 'Content-Length': e - s + 1 }); if (req.method === 'HEAD') return res.end(); fs.createReadStream(file, { start: s, end: e }).pipe(res); }
  else { res.writeHead(200, { ...h, 'Content-Length': size }); if (req.method === 'HEAD') return res.end(); fs.createReadStream(file).pipe(res); }
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const port = server.address().port;
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run', '--disable-gpu'] });
const p = await browser.newPage();
p.on('console', (m) => { if (m.type() === 'error') console.log('console', m.text()); });
await p.goto(`http://127.0.0.1:${port}/page.html`);
await p.waitForFunction(() => window.ready);
const url = `http://127.0.0.1:${port}/model.gguf`;
for (const r of ['a', 'b']) console.log(r, await p.evaluate(([r, s, u]) => window.mk(r, s, u), [r, simd, url]));
const prompt = 'The history of the printing press begins in the fifteenth century, when';
const configs = { greedy: { temperature: 0 }, chain: {} };
const res = {}, texts = {};
for (let i = 0; i < +rounds; i++) {
  for (const [cn, c] of Object.entries(configs)) {
    for (const en of i % 2 ? ['b', 'a'] : ['a', 'b']) {
      const o = await p.evaluate(([r, params]) => window.gen(r, params), [en, { prompt, max_tokens: +n, seed: 42 + i, ...c }]);
      (res[`${cn} ${en}`] ??= []).push(o.tps);
      const k = `${cn} ${i}`;
      if (texts[k] === undefined) texts[k] = o.text; else if (texts[k] !== o.text) console.log('TEXT DIFFERS', k);
    }
  }
}
const med = (v) => [...v].sort((x, y) => x - y)[v.length >> 1];
for (const cn of Object.keys(configs)) {
  const a = res[`${cn} a`], b = res[`${cn} b`];
  const wins = a.filter((x, j) => b[j] > x).length;
  console.log(cn, 'A', a.map((x) => x.toFixed(1)).join(' '), '| B', b.map((x) => x.toFixed(1)).join(' '), '| B/A median', (med(b) / med(a)).toFixed(3), `B ahead ${wins}/${a.length}`);
}
await browser.close();
server.close();
