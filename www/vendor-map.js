// Browser modules the page imports from npm packages (pinned in package.json, installed by
// `./build.sh setup`): the URL path under the repository root -> the file that serves it. Read by
// the page's servers (www/serve.js, tests/js/server.js), so the page needs no build step and no
// CDN, and both servers agree.
export const VENDOR = Object.freeze({ 'www/vendor/smd.js': 'node_modules/streaming-markdown/smd.js' });
