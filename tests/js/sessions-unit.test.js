// The saved-conversation store (pkg/src/sessions.js) without a model: two writers of one key,
// one of them slowed between its bytes and its record, must not leave one's record beside the
// other's bytes; a lock file a crashed writer left is taken over; a live one is waited for.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { openSessionStore } from '../../pkg/src/sessions.js';
import { keyOf } from '../../pkg/src/cache.js';

const record = (key, bytes) => ({ key, tokens: 1, bytes, model_sha256: 'm', saved_at: 0 });

/** A store in a fresh directory whose fs waits `slowMs` before writing a record that says
 * `slowBytes` bytes (the writer slowed between its bytes and its record). */
function store(slowBytes = -1, slowMs = 0) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-sessions-unit-'));
  const promises = Object.create(fs.promises);
  promises.writeFile = async (file, data) => {
    if (typeof data === 'string' && data.includes(`"bytes":${slowBytes},`)) await new Promise((r) => setTimeout(r, slowMs));
    return fs.promises.writeFile(file, data);
  };
  const cache = { kind: 'fs', fs: { ...fs, promises }, path, dir: path.join(dir, 'models') };
  return { dir, sessions: path.join(dir, 'models-sessions'), open: () => openSessionStore(cache) };
}

test('two writers of one key: the record always describes the bytes beside it', async () => {
  const s = store(10, 300);
  try {
    const [a, b] = [await s.open(), await s.open()];
    // a starts first and is slowed before its record; b runs meanwhile.
    const first = a.put('k', new Uint8Array(10), record('k', 10));
    await new Promise((r) => setTimeout(r, 50));
    await Promise.all([first, b.put('k', new Uint8Array(20), record('k', 20))]);
    const got = await a.get('k');
    assert.equal(got.bytes.byteLength, got.record.bytes, 'bytes and record agree');
    assert.deepEqual(fs.readdirSync(s.sessions).filter((n) => !/\.(kv|json)$/.test(n)), [], 'no lock or temporary file left');
  } finally {
    fs.rmSync(s.dir, { recursive: true, force: true });
  }
});

test("a crashed writer's lock is taken over; a live one is waited for", async () => {
  const s = store();
  try {
    const st = await s.open();
    await st.put('k', new Uint8Array(4), record('k', 4));
    const lock = path.join(s.sessions, `${await keyOf('k')}.lock`);
    // Left 60 s ago: stale, removed, and the save goes on at once.
    fs.writeFileSync(lock, '');
    const old = new Date(Date.now() - 60_000);
    fs.utimesSync(lock, old, old);
    const t0 = Date.now();
    await st.put('k', new Uint8Array(5), record('k', 5));
    assert.ok(Date.now() - t0 < 2000);
    assert.equal((await st.get('k')).bytes.byteLength, 5);
    // Held now: the save waits for it.
    fs.writeFileSync(lock, '');
    let done = false;
    const saving = st.put('k', new Uint8Array(6), record('k', 6)).then(() => (done = true));
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(done, false, 'waits while the lock is held');
    fs.rmSync(lock);
    await saving;
    assert.equal((await st.get('k')).bytes.byteLength, 6);
    assert.equal(fs.existsSync(lock), false);
  } finally {
    fs.rmSync(s.dir, { recursive: true, force: true });
  }
});
