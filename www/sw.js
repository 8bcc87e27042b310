// The demo's service worker: keeps the app shell (www/ and the pkg/ files it imports, the wasm
// included) so the page starts without a network. The model itself is not here: the engine
// keeps it in the Origin Private File System and verifies it when loading.
//
// On install it walks the module graph from the page's entry files — static imports, dynamic
// imports with a literal path and `new URL('…', import.meta.url)` — so files added to the package
// later are found without a list to maintain. Requests for shell files are answered network
// first (a fresh copy replaces the cached one), from the cache when the network fails or hangs.
// Everything else (models, Range requests, other origins, the router's server) passes through.

const CACHE = 'edgellm-shell-v1';
const SCOPE = new URL(self.registration.scope);
const ROOTS = [SCOPE.pathname, new URL('../pkg/', SCOPE).pathname];
// The threaded builds are named at run time (pkg/src/worker-url.js derives them from the
// SIMD128 build's URL, so that a bundler never needs the optional files): no reference leads the
// walk to them, hence named here (skipped where they were not built). Without them an offline
// reload ran the single-thread SIMD128 build.
const ENTRIES = ['./', 'index.html', 'app.js', 'style.css', 'engine-worker.js', '../pkg/wasm/threads/edgellm_bg.wasm', '../pkg/wasm/threads/edgellm_relaxed_bg.wasm'].map((p) => new URL(p, SCOPE).href);
const NETWORK_TIMEOUT_MS = 4000;

const inShell = (url) => url.origin === SCOPE.origin && ROOTS.some((r) => url.pathname.startsWith(r)) && !/\.gguf$/i.test(url.pathname);

/** URLs referenced by a JS module or an HTML page (relative ones only). */
function references(text, type) {
  const out = [];
  const add = (spec, base) => {
    if (!spec || /^(data|blob|https?):/i.test(spec)) return;
    if (base === 'module' && !/^(\.{1,2}\/|\/)/.test(spec)) return; // a bare specifier
    out.push(spec);
  };
  if (/html/.test(type)) {
    for (const m of text.matchAll(/\b(?:src|href)\s*=\s*"([^"#?]+)"/g)) add(m[1], 'html');
    return out;
  }
  for (const m of text.matchAll(/\bfrom\s*['"]([^'"\n]+)['"]/g)) add(m[1], 'module');
  for (const m of text.matchAll(/\bimport\s*\(?\s*['"]([^'"\n]+)['"]/g)) add(m[1], 'module');
  for (const m of text.matchAll(/new\s+URL\(\s*['"]([^'"\n]+)['"]\s*,\s*import\.meta\.url\s*\)/g)) add(m[1], 'url');
  return out;
}

async function precache() {
  const cache = await caches.open(CACHE);
  const seen = new Set();
  const queue = [...ENTRIES];
  while (queue.length) {
    const href = queue.shift();
    if (seen.has(href)) continue;
    seen.add(href);
    const url = new URL(href);
    if (!inShell(url)) continue;
    let res;
    try {
      res = await fetch(href, { cache: 'no-cache' });
    } catch {
      continue;
    }
    if (res.status !== 200) continue; // a path mentioned in a comment, say
    await cache.put(href, res.clone());
    const type = res.headers.get('content-type') || '';
    if (/javascript|html/.test(type)) for (const ref of references(await res.text(), type)) queue.push(new URL(ref, href).href);
  }
}

self.addEventListener('install', (event) => {
  event.waitUntil(precache().then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    (async () => {
      for (const k of await caches.keys()) if (k.startsWith('edgellm-shell-') && k !== CACHE) await caches.delete(k);
      await self.clients.claim();
    })(),
  );
});

async function cached(cache, req) {
  const hit = await cache.match(req);
  if (hit || req.mode !== 'navigate') return hit;
  return (await cache.match(req, { ignoreSearch: true })) || cache.match(new URL('index.html', SCOPE).href);
}

async function networkFirst(req) {
  const cache = await caches.open(CACHE);
  // A navigation request cannot be re-created with options: fetch it as it is.
  const net = fetch(req).then((res) => {
    if (res.status === 200 && res.type === 'basic') cache.put(req, res.clone()).catch(() => {});
    return res;
  });
  net.catch(() => {}); // a late failure after the timeout answered is nobody's business
  const copy = await cached(cache, req);
  if (!copy) return net.catch(() => Response.error());
  // With a copy at hand, a network that fails or hangs does not hold the page up.
  const timeout = new Promise((resolve) => setTimeout(() => resolve(copy), NETWORK_TIMEOUT_MS));
  return Promise.race([net, timeout]).catch(() => copy);
}

self.addEventListener('fetch', (event) => {
  const req = event.request;
  if (req.method !== 'GET' || req.headers.has('range')) return;
  const url = new URL(req.url);
  if (!inShell(url)) return;
  event.respondWith(networkFirst(req));
});
