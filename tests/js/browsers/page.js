// The one page API the cross-engine tests use, whatever drives the browser. A driver supplies
// four primitives (navigate, run an expression that resolves to a string, take a screenshot,
// the errors its protocol reports); this class builds the rest on them the same way for every
// engine:
//
//   await page.goto(url)
//   await page.evaluate(fn, arg)        fn runs in the page; its (awaited) result comes back as
//                                       JSON — the same values in every engine (undefined → null)
//   await page.waitFor(fn, arg, opts)   polls fn until truthy; bounded
//   page.errors()                       console errors / uncaught errors seen so far
//   await page.screenshot(file)
//
// `fn` is sent as source text, so it must not close over Node variables: pass them in `arg`.
import fs from 'node:fs';

/** The in-page wrapper: awaits fn(arg), returns {v} or {e} as one JSON string. */
export function wrapCall(fn, arg) {
  const src = typeof fn === 'function' ? fn.toString() : String(fn);
  return `(async () => {
    try {
      const v = await (${src})(${JSON.stringify(arg === undefined ? null : arg)});
      return JSON.stringify({ v: v === undefined ? null : v });
    } catch (e) {
      return JSON.stringify({ e: { message: String(e && e.message || e), name: e && e.name || null, code: e && e.code || null, stack: String(e && e.stack || '') } });
    }
  })()`;
}

/**
 * The driver primitives for a playwright-core or puppeteer-core page (the two share this much
 * API): console errors and uncaught errors are collected from the protocol's events.
 */
export function scriptedPageDriver(page) {
  const errors = [];
  page.on('console', (m) => {
    // With the URL it is about: the browser's own "Failed to load resource" messages name none.
    const at = m.location() && m.location().url;
    if (m.type() === 'error') errors.push(`console.error: ${m.text()}${at ? ` (${at})` : ''}`);
  });
  page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
  return {
    goto: async (url) => {
      await page.goto(url, { timeout: 60_000 });
    },
    run: (expr) => page.evaluate(expr),
    screenshot: () => page.screenshot(),
    nativeErrors: () => errors.slice(),
  };
}

export class Page {
  /**
   * @param {string} engine  'chromium' | 'firefox' | 'webkit'
   * @param {{goto(url: string): Promise<void>, run(expr: string, timeoutMs: number): Promise<string>,
   *          screenshot(): Promise<Buffer>, nativeErrors(): string[]}} driver
   */
  constructor(engine, driver) {
    this.engine = engine;
    this.driver = driver;
  }

  async goto(url) {
    await this.driver.goto(url);
  }

  async evaluate(fn, arg, { timeoutMs = 180_000 } = {}) {
    let timer;
    const out = await Promise.race([
      this.driver.run(wrapCall(fn, arg), timeoutMs),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${this.engine}: page.evaluate did not settle within ${timeoutMs} ms`)), timeoutMs + 5000);
      }),
    ]).finally(() => clearTimeout(timer));
    const r = JSON.parse(out);
    if (r.e) {
      const err = new Error(`${this.engine}: in the page: ${r.e.message}`);
      err.code = r.e.code;
      err.pageStack = r.e.stack;
      throw err;
    }
    return r.v;
  }

  async waitFor(fn, arg, { timeoutMs = 30_000, stepMs = 100, what = 'a page condition' } = {}) {
    const t0 = Date.now();
    let last = null;
    for (;;) {
      // Short polls, and a failed poll is retried: right after a navigation a script can be lost
      // with the document it started in (WebKitWebDriver then never answers it).
      try {
        const v = await this.evaluate(fn, arg, { timeoutMs: 10_000 });
        if (v) return v;
        last = null;
      } catch (e) {
        last = e;
      }
      if (Date.now() - t0 > timeoutMs) throw new Error(`${this.engine}: timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last poll: ${last.message})` : ''}`);
      await new Promise((r) => setTimeout(r, stepMs));
    }
  }

  /** Errors the driver's protocol saw plus what the page's own capture (pages/capture.js) saw. */
  async errors() {
    let inPage = [];
    try {
      inPage = (await this.evaluate(() => (window.__capturedErrors || []).slice(), null, { timeoutMs: 10_000 })) || [];
    } catch {
      /* the page is gone: report what the driver has */
    }
    return [...new Set([...this.driver.nativeErrors(), ...inPage])];
  }

  async screenshot(file) {
    fs.writeFileSync(file, await this.driver.screenshot());
  }
}
