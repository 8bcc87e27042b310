// The browser engines the cross-engine tests run in, behind one launcher:
//
//   const b = await launchBrowser('firefox');   // 'chromium' | 'firefox' | 'webkit'
//   await b.page.goto(url); await b.page.evaluate(fn, arg); b.offDevice(); await b.close();
//
// Each launch gets a fresh profile and its own recording sink (sink.js) as the proxy for every
// host but 127.0.0.1; `offDevice()` lists what tried to leave the machine. Everything the launch
// starts (browser, driver, Xvfb, sink, profile directory) is stopped by close().
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Page } from './page.js';
import { startSink } from './sink.js';
import * as chromium from './chromium.js';
import * as firefox from './firefox.js';
import * as webkit from './webkit.js';

export const DRIVERS = { chromium, firefox, webkit };
export const ENGINES = Object.keys(DRIVERS);

/** The binaries each engine needs (for a precise "not installed" failure). */
export function missingBinaries(engine) {
  const d = DRIVERS[engine];
  return [d.BINARY, d.DRIVER].filter(Boolean).filter((f) => !fs.existsSync(f));
}

/**
 * @param {string} engine
 * @param {{prefs?: Record<string, any>}} [options]  prefs: extra Firefox preferences (e.g. a
 *        small storage quota); an error for the other engines, which have no such thing
 */
export async function launchBrowser(engine, options = {}) {
  const d = DRIVERS[engine];
  if (!d) throw new Error(`unknown browser engine ${engine} (one of ${ENGINES.join(', ')})`);
  if (options.prefs && engine !== 'firefox') throw new Error(`${engine}: preferences are a Firefox option`);
  const missing = missingBinaries(engine);
  if (missing.length) throw new Error(`${engine}: ${missing.join(', ')} not installed (./build.sh setup installs it)`);
  const sink = await startSink();
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), `edgellm-${engine}-`));
  let b;
  try {
    b = await d.launch({ sink, profileDir, prefs: options.prefs });
  } catch (e) {
    await sink.close();
    fs.rmSync(profileDir, { recursive: true, force: true });
    throw new Error(`${engine}: the browser did not start: ${e.message}`, { cause: e });
  }
  return {
    engine,
    version: b.version,
    page: new Page(engine, b.driver),
    /** Requests that tried to leave 127.0.0.1 so far (method + target). */
    offDevice: () => sink.log.map((l) => `${l.method} ${l.target}`),
    async close() {
      try {
        await b.close();
      } finally {
        await sink.close();
        fs.rmSync(profileDir, { recursive: true, force: true });
      }
    },
  };
}
