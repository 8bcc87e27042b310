// For the cross-engine threads check: writes into the SharedArrayBuffer it is sent, with Atomics,
// and says so. Served from the page's own origin (a cross-origin-isolated page's workers must be).
self.onmessage = (e) => {
  const a = new Int32Array(e.data);
  Atomics.add(a, 0, 41);
  Atomics.notify(a, 0);
  self.postMessage('done');
};
