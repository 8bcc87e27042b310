// Firefox ESR (Debian firefox-esr) through puppeteer-core over WebDriver BiDi (no geckodriver).
// The profile's preferences (firefox-prefs.js) send every non-loopback request to the recording
// sink and switch off the background services. MOZ_REMOTE_SETTINGS_DEVTOOLS=1: release builds
// ignore the remote-settings server preference without it, and then poll
// firefox.settings.services.mozilla.com from the first second (seen in the sink's log).
import { firefoxPrefs } from './firefox-prefs.js';
import { scriptedPageDriver } from './page.js';

export const BINARY = process.env.FIREFOX_PATH || '/usr/bin/firefox-esr';

export async function launch({ sink, profileDir, prefs = {} }) {
  const { default: puppeteer } = await import('puppeteer-core');
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: BINARY,
    headless: true,
    userDataDir: profileDir,
    extraPrefsFirefox: { ...firefoxPrefs(sink.port), ...prefs },
    env: { ...process.env, MOZ_REMOTE_SETTINGS_DEVTOOLS: '1' },
    protocolTimeout: 600_000,
    timeout: 120_000, // start-up took 15 s on a loaded 2-core machine; the default is 30 s
  });
  const page = (await browser.pages())[0] || (await browser.newPage());
  return { version: (await browser.version()).replace(/^firefox\//, ''), driver: scriptedPageDriver(page), close: () => browser.close() };
}
