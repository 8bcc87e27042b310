// What each browser engine gets from the package, as the cross-engine tests measured it here.
// The single source of these facts: engines.test.js asserts every engine against its row, and
// checks that pkg/README.md's "Browser support" table says exactly this (support-table.js).
//
//   tier            engine.info.simd_tier: the wasm build the worker picked (pkg/src/tier.js)
//   relaxedProbe    why: 'exact' (the probe ran and was exact) | 'no-validate' (the engine does
//                   not accept the relaxed-SIMD opcode) | 'inexact' (it ran, wrongly)
//   threads         what a cross-origin-isolated page (COOP + COEP) gets: 'yes' = crossOriginIsolated,
//                   SharedArrayBuffer, a shared WebAssembly.Memory written by a worker with Atomics
//   cache           engine.info.cache: 'opfs' (models persist in the Origin Private File System)
//                   | 'none' (no navigator.storage.getDirectory: every load downloads)
//   performanceMemory  whether performance.memory exists (the ledger never needs it: it measures
//                   wasm memory and its own allocator, the same in every engine)
//   ownBackground   requests the browser itself makes, whatever the page does, that no flag turns
//                   off (they reach the recording sink and are refused there, so nothing leaves
//                   the machine); anything else in the sink's log fails the test
// Chromium 156 calls Google's service hosts itself, whatever the page does: the sign-in
// IdentityManager lists accounts at start-up (no switch disables it), the component updater and
// its clock check run despite --disable-component-update, and other services come and go with
// the version. The page and the package never name such a host.
const CHROMIUM_OWN = [/^CONNECT [a-z0-9.-]+\.(google\.com|googleapis\.com|gstatic\.com):443$/, /^(GET|POST) http:\/\/[a-z0-9.-]+\.(google\.com|googleapis\.com)\//];

export const SUPPORT = Object.freeze({
  chromium: Object.freeze({ label: 'Chromium', tier: 'relaxed-simd', relaxedProbe: 'exact', threads: 'yes', cache: 'opfs', performanceMemory: true, ownBackground: CHROMIUM_OWN }),
  firefox: Object.freeze({ label: 'Firefox ESR', tier: 'relaxed-simd', relaxedProbe: 'exact', threads: 'yes', cache: 'opfs', performanceMemory: false, ownBackground: [] }),
  webkit: Object.freeze({ label: 'WebKitGTK', tier: 'simd128', relaxedProbe: 'no-validate', threads: 'no', cache: 'none', performanceMemory: false, ownBackground: [] }),
});
