// WebKitGTK (Debian webkit2gtk-driver): selenium-webdriver speaks W3C WebDriver to
// WebKitWebDriver, which starts MiniBrowser in automation mode on an Xvfb display (it has no
// headless mode). MiniBrowser's own --proxy / --ignore-host send every non-loopback request to
// the recording sink. WebKitWebDriver reports no console messages, so errors come from the
// page's own capture (pages/capture.js) only.
import { spawn } from 'node:child_process';
import net from 'node:net';
import fs from 'node:fs';

import { startXvfb } from './xvfb.js';

export const DRIVER = process.env.WEBKIT_DRIVER_PATH || '/usr/bin/WebKitWebDriver';
export const BINARY = process.env.MINIBROWSER_PATH || '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/** `promise`, or a rejection naming `what` after `ms`: selenium's client waits forever. */
function within(ms, what, promise) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`WebKitWebDriver: no answer within ${ms / 1000} s for ${what}`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

async function waitForDriver(url, proc, log) {
  const t0 = Date.now();
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`WebKitWebDriver exited (${proc.exitCode}): ${log()}`);
    try {
      const r = await fetch(`${url}/status`);
      if (r.ok) return;
    } catch {
      /* not listening yet */
    }
    if (Date.now() - t0 > 60_000) throw new Error(`WebKitWebDriver did not answer within 60 s: ${log()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function launch({ sink }) {
  for (const f of [DRIVER, BINARY]) if (!fs.existsSync(f)) throw new Error(`${f} missing (./build.sh setup installs the Debian package webkit2gtk-driver)`);
  const { Builder } = await import('selenium-webdriver');
  const xvfb = await startXvfb();
  let proc = null;
  let driver = null;
  const stop = async () => {
    if (driver) await within(15_000, 'the session to quit', driver.quit()).catch(() => {});
    if (proc && proc.exitCode === null) {
      const gone = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await Promise.race([gone, new Promise((r) => setTimeout(r, 5000))]);
      if (proc.exitCode === null) proc.kill('SIGKILL');
    }
    await xvfb.stop();
  };
  try {
    const port = await freePort();
    proc = spawn(DRIVER, [`--port=${port}`, '--host=local'], { env: { ...process.env, DISPLAY: xvfb.display }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (d) => (out = (out + d).slice(-4000)));
    proc.stderr.on('data', (d) => (out = (out + d).slice(-4000)));
    const url = `http://127.0.0.1:${port}`;
    await waitForDriver(url, proc, () => out);
    const caps = {
      browserName: 'MiniBrowser',
      'webkitgtk:browserOptions': { binary: BINARY, args: ['--automation', `--proxy=${sink.url}`, '--ignore-host=127.0.0.1'] },
    };
    driver = await within(120_000, 'the WebDriver session (MiniBrowser start-up)', new Builder().usingServer(url).withCapabilities(caps).build());
    const version = (await driver.getCapabilities()).get('browserVersion') || 'unknown';
    let scriptTimeout = null;
    return {
      version,
      driver: {
        goto: (u) => driver.get(u),
        run: async (expr, timeoutMs) => {
          if (scriptTimeout !== timeoutMs) {
            await driver.manage().setTimeouts({ script: timeoutMs });
            scriptTimeout = timeoutMs;
          }
          return driver.executeAsyncScript(`const done = arguments[arguments.length - 1]; (${expr}).then(done);`);
        },
        screenshot: async () => Buffer.from(await driver.takeScreenshot(), 'base64'),
        nativeErrors: () => [],
      },
      close: stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
