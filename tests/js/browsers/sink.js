// The off-device sink: every browser under test uses this 127.0.0.1 server as its proxy for all
// hosts but 127.0.0.1, so any request that would have left the machine (a page's fetch, a
// browser's own telemetry, update or connectivity check) arrives here instead and is recorded
// (plain HTTP: method + absolute URL; HTTPS: the CONNECT target) and refused. A test then asserts
// the log is empty: "zero requests off-device", seen from outside the browser. Started and
// stopped by the browser launcher (index.js).
import http from 'node:http';

import { listenOnLoopback } from '../loopback.js';

export async function startSink() {
  const log = [];
  const server = http.createServer((req, res) => {
    log.push({ method: req.method, target: req.url });
    res.writeHead(502, { 'Content-Type': 'text/plain', Connection: 'close' });
    res.end('off-device request refused by the test sink\n');
  });
  server.on('connect', (req, socket) => {
    log.push({ method: 'CONNECT', target: req.url });
    socket.destroy();
  });
  const { port, origin, close } = await listenOnLoopback(server);
  return { port, url: origin, log, close };
}
