// The engine's Web Worker, started from www/ (createEngine({ workerUrl })) rather than from
// pkg/src/ so that it lies inside the service worker's scope: the worker's own imports and the
// wasm it fetches then come from the offline cache too. It is the package's worker, unchanged.
import '../pkg/src/worker.js';
