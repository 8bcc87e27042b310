// This machine's host names, once for the page (a link's router server, www/settings.js) and for
// www/serve.js (the Host names it answers to): IPv4 and IPv6 loopback and `localhost`, the IPv6
// one bare (a `--host` argument) and bracketed (a URL's hostname).
export const LOOPBACK_HOSTS = Object.freeze(['127.0.0.1', 'localhost', '[::1]', '::1']);

/** Whether `url` names this machine. */
export function isLoopbackUrl(url) {
  try {
    return LOOPBACK_HOSTS.includes(new URL(url).hostname);
  } catch {
    return false;
  }
}
