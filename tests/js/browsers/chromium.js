// Chromium (Debian /usr/bin/chromium) through playwright-core, as the rest of the browser tests.
// The flags are helpers.js's CHROMIUM_ARGS with the proxy pointed at the recording sink instead
// of the dead port 9, so an off-device request is seen, not just refused.
import { CHROMIUM, CHROMIUM_ARGS } from '../helpers.js';
import { scriptedPageDriver } from './page.js';

export const BINARY = CHROMIUM;

export async function launch({ sink, profileDir }) {
  const { chromium } = await import('playwright-core');
  const args = CHROMIUM_ARGS.map((a) => (a.startsWith('--proxy-server=') ? `--proxy-server=${sink.url}` : a));
  const context = await chromium.launchPersistentContext(profileDir, { executablePath: CHROMIUM, headless: true, args });
  const page = context.pages()[0] || (await context.newPage());
  const driver = scriptedPageDriver(page);
  const ua = await page.evaluate(() => navigator.userAgent);
  return { version: (/Chrome\/([\d.]+)/.exec(ua) || [null, 'unknown'])[1], driver, close: () => context.close() };
}
