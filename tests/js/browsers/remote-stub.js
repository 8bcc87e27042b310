// The router's "server" in the cross-engine tests: a 127.0.0.1 endpoint that counts every
// request (CORS preflights included) and refuses it with a 503. Private requests must add
// nothing to the count; a public one that cannot run locally must add something.
import http from 'node:http';

import { listenOnLoopback } from '../loopback.js';

export async function startRemoteStub() {
  let count = 0;
  const server = http.createServer((req, res) => {
    count++;
    req.resume();
    const cors = {
      'Access-Control-Allow-Origin': req.headers.origin || '*',
      'Access-Control-Allow-Headers': 'authorization, content-type',
      'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
    };
    if (req.method === 'OPTIONS') {
      res.writeHead(204, cors);
      return res.end();
    }
    res.writeHead(503, { ...cors, 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'the cross-engine stub serves nothing', type: 'server_error', code: 'unavailable' } }));
  });
  const { origin, close } = await listenOnLoopback(server);
  return { origin, baseURL: `${origin}/v1`, count: () => count, close };
}
