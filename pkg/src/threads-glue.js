// The threaded build's JS glue (wasm/threads/edgellm.js, made by `./build.sh build-threads`),
// loaded only when a thread pool starts. Optional, so never a static import: an app whose
// bundler compiles 'edgellm/worker' must build without it. The bundled classic worker
// (scripts/browser_assets.mjs) replaces this module by one that carries the glue inline, or
// resolves to an empty namespace where the package was built without it.
export const loadThreadsGlue = () => import(/* webpackIgnore: true */ /* @vite-ignore */ new URL('../wasm/threads/edgellm.js', import.meta.url).href);
