// A virtual X display for WebKitGTK's MiniBrowser (it has no headless mode). Xvfb picks a free
// display number itself (-displayfd) and writes it to a pipe; started and stopped by the test.
import { spawn } from 'node:child_process';
import fs from 'node:fs';

export const XVFB = process.env.XVFB_PATH || '/usr/bin/Xvfb';

/** Starts Xvfb; resolves with { display: ':N', stop() }. Bounded: 30 s. */
export async function startXvfb() {
  if (!fs.existsSync(XVFB)) throw new Error(`no Xvfb at ${XVFB} (./build.sh setup installs the Debian package xvfb)`);
  // fd 3: Xvfb writes the display number there once it accepts connections.
  const proc = spawn(XVFB, ['-displayfd', '3', '-screen', '0', '1280x1024x24', '-nolisten', 'tcp'], { stdio: ['ignore', 'ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d));
  const display = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`Xvfb did not report a display within 30 s: ${stderr}`)), 30_000);
    proc.stdio[3].on('data', (d) => {
      out += d;
      const m = /^(\d+)\n/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(`:${m[1]}`);
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`Xvfb exited (${code}) before reporting a display: ${stderr}`));
    });
  });
  return {
    display,
    async stop() {
      if (proc.exitCode !== null) return;
      const gone = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await Promise.race([gone, new Promise((r) => setTimeout(r, 5000))]);
      if (proc.exitCode === null) proc.kill('SIGKILL');
    },
  };
}
