// Starting a test HTTP server the one allowed way: on 127.0.0.1, a free port, every socket
// tracked so close() ends kept-alive connections too (a browser keeps them open).
/** @param {import('node:http').Server} server  @returns {Promise<{port: number, origin: string, close(): Promise<void>}>} */
export async function listenOnLoopback(server) {
  const sockets = new Set();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
