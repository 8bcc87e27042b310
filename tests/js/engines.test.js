// The cross-engine browser suite: the same test bodies (browsers/steps.js) in Chromium
// (playwright-core), Firefox ESR (puppeteer-core, WebDriver BiDi) and WebKitGTK (selenium-webdriver
// + WebKitWebDriver + MiniBrowser under Xvfb), each engine checked against what it is known to get
// (browsers/support.js, the table in pkg/README.md). The full browser suite (browser.test.js,
// memory.test.js, router-browser.test.js, demo.test.js, ...) runs in Chromium; this is the subset
// every engine runs: platform facts, load + progress + cache, greedy text vs the native CLI, abort,
// the memory ledger, the KV budget, router privacy, and nothing leaving 127.0.0.1.
//
// EDGELLM_BROWSERS=firefox,webkit picks engines (default: all three). Under ./build.sh test
// (EDGELLM_REQUIRE_MODEL=1) a browser that is missing or does not start fails; it never skips.
// EDGELLM_SCREENSHOTS=dir saves a screenshot of the page when a step fails.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { startServer } from './server.js';
import { ROOT, MODEL, REQUIRED, modelMissing, wasmMissing, cliPath, cliCanGenerate } from './helpers.js';
import { ENGINES, launchBrowser, missingBinaries } from './browsers/index.js';
import { startRemoteStub } from './browsers/remote-stub.js';
import { STEPS, checkQuotaTooSmall } from './browsers/steps.js';
import { SUPPORT } from './browsers/support.js';
import { readSupportTable } from './browsers/support-table.js';

const selected = (process.env.EDGELLM_BROWSERS || ENGINES.join(',')).split(',').map((s) => s.trim()).filter(Boolean);
for (const e of selected) if (!ENGINES.includes(e)) throw new Error(`EDGELLM_BROWSERS: unknown engine ${e} (one of ${ENGINES.join(', ')})`);
const skipAll = modelMissing() || wasmMissing();
const noCli = cliCanGenerate() ? false : REQUIRED ? false : `native CLI with 'generate' not built (${cliPath() || 'none'})`;
const shots = process.env.EDGELLM_SCREENSHOTS || null;
const ISOLATION = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };
const figures = {};

const readme = () => readSupportTable(fs.readFileSync(path.join(ROOT, 'pkg/README.md'), 'utf8'));

test('pkg/README.md: the browser-support table says what support.js (and so these tests) say', () => {
  const rows = readme();
  assert.deepEqual(Object.keys(rows).sort(), Object.keys(SUPPORT).sort());
  for (const [engine, want] of Object.entries(SUPPORT)) {
    const got = rows[engine];
    assert.equal(got.tier, want.tier, `${engine}: tier`);
    assert.equal(got.threads, want.threads, `${engine}: threads`);
    assert.equal(got.cache, want.cache, `${engine}: cache`);
  }
});

let web;
let isolated;
before(async () => {
  if (skipAll) return;
  [web, isolated] = await Promise.all([startServer({ root: ROOT, modelPath: MODEL }), startServer({ root: ROOT, modelPath: MODEL, headers: ISOLATION })]);
});
after(async () => {
  await Promise.all([web && web.close(), isolated && isolated.close()]);
  if (Object.keys(figures).length) console.log(`cross-engine figures: ${JSON.stringify(figures)}`);
});

for (const engine of selected) {
  const missing = missingBinaries(engine);
  // Not installed: a skip in a development checkout, a failure (from launchBrowser) under ./build.sh test.
  const skip = skipAll || (missing.length > 0 && !REQUIRED ? `${engine}: ${missing.join(', ')} not installed (./build.sh setup)` : false);
  describe(engine, { skip }, () => {
    const report = (figures[engine] = {});
    const ctx = { engine, expect: SUPPORT[engine], report };
    let failed = null;
    before(async () => {
      const t0 = Date.now();
      ctx.browser = await launchBrowser(engine);
      report.version = ctx.browser.version;
      report.launch_ms = Date.now() - t0;
      // The router's server: one per engine, so its count is this engine's alone.
      Object.assign(ctx, { page: ctx.browser.page, web, isolated, remote: await startRemoteStub() });
    });
    after(async () => {
      if (ctx.browser) await ctx.browser.close();
      if (ctx.remote) await ctx.remote.close();
    });
    test('the version pkg/README.md says was tested is the one running', () => {
      const row = readme()[engine];
      assert.ok(row && row.version, `pkg/README.md has no version for ${engine}`);
      assert.ok(ctx.browser.version.startsWith(row.version), `${engine} ${ctx.browser.version} runs; pkg/README.md says ${row.version} was tested: re-measure the row`);
    });
    for (const step of STEPS) {
      // Steps share one page: after a failure the rest would only report its consequences.
      test(step.name, { skip: step.needsCli && noCli }, async (t) => {
        if (failed) return t.skip(`an earlier step failed: ${failed}`);
        try {
          await step.run(ctx);
        } catch (e) {
          failed = step.name;
          if (shots && ctx.page) {
            fs.mkdirSync(shots, { recursive: true });
            await ctx.page.screenshot(path.join(shots, `${engine}-${STEPS.indexOf(step)}.png`)).catch(() => {});
          }
          throw e;
        }
      });
    }
  });
}

// Quota behaviour, where a test can set the quota (a Firefox preference; WebKitGTK has no OPFS):
// a full origin still loads the model, uncached.
const QUOTA_KIB = 100 << 10; // a 100 MiB limit: Firefox grants one origin 20 % of it, 20 MiB
describe('firefox with a storage quota smaller than the model', { skip: !selected.includes('firefox') ? 'firefox not selected' : skipAll || (missingBinaries('firefox').length > 0 && !REQUIRED ? 'firefox not installed' : false) }, () => {
  const ctx = { report: (figures.firefox_small_quota = {}) };
  before(async () => {
    ctx.browser = await launchBrowser('firefox', { prefs: { 'dom.quotaManager.temporaryStorage.fixedLimit': QUOTA_KIB } });
    Object.assign(ctx, { page: ctx.browser.page, web, remote: await startRemoteStub() });
  });
  after(async () => {
    if (ctx.browser) await ctx.browser.close();
    if (ctx.remote) await ctx.remote.close();
  });
  test('the OPFS write fails: the model loads from the network, nothing is kept, the engine says why', () => checkQuotaTooSmall(ctx));
});
