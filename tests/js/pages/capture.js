// Loaded first (a classic script) by the cross-engine test page: records console.error calls
// and uncaught errors in window.__capturedErrors, in every engine alike (WebKitWebDriver reports
// no console messages; the other drivers' reports are merged with these by browsers/page.js).
(function () {
  const seen = (window.__capturedErrors = []);
  const text = (a) => (a && a.message ? a.message : typeof a === 'object' ? JSON.stringify(a) : String(a));
  const orig = console.error.bind(console);
  console.error = (...args) => {
    seen.push(`console.error: ${args.map(text).join(' ')}`);
    orig(...args);
  };
  window.addEventListener('error', (e) => seen.push(`uncaught: ${e.message}`));
  window.addEventListener('unhandledrejection', (e) => seen.push(`unhandled rejection: ${text(e.reason)}`));
})();
