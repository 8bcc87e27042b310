// The model cache's trust rules (pkg/src/cache.js) on the Node directory cache, no model
// needed: an entry is used only with a verified record, and a load that never finished (the
// engine crashed or was killed mid-load) evicts the entry instead of crashing again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { FsCache } from '../../pkg/src/cache.js';

const URL_ = 'https://models.test/m.gguf';
const BYTES = new Uint8Array(4096).map((_, i) => i & 255);
const SHA = 'a'.repeat(64);

async function freshCache() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-cache-unit-'));
  return { dir, cache: await FsCache.open(fs, path, dir) };
}

async function store(cache) {
  const w = await cache.writer(URL_);
  w.write(BYTES);
  await w.commit({ size: BYTES.length, sha256: SHA, etag: null });
}

test('an entry is used only through a verified record', async (t) => {
  const { dir, cache } = await freshCache();
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  await store(cache);
  const hit = await cache.lookup(URL_);
  assert.equal(hit.size, BYTES.length);
  assert.equal(hit.record.verified, true);
  // A record without the verified mark (an older version's, or forged): evicted, not parsed.
  const json = fs.readdirSync(dir).find((n) => n.endsWith('.json'));
  const rec = JSON.parse(fs.readFileSync(path.join(dir, json), 'utf8'));
  delete rec.verified;
  fs.writeFileSync(path.join(dir, json), JSON.stringify(rec));
  assert.equal(await cache.lookup(URL_), null);
  assert.deepEqual(fs.readdirSync(dir), [], 'evicted');
});

test('a load from the cache that never finished evicts the entry: one crash, never a loop', async (t) => {
  const { dir, cache } = await freshCache();
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  await store(cache);
  // A successful load: begin, done; the entry stays.
  let hit = await cache.lookup(URL_);
  await hit.begin();
  await hit.done();
  hit = await cache.lookup(URL_);
  assert.ok(hit && !hit.stale);
  // The engine dies between begin and done (nothing runs to evict): the marker remains.
  await hit.begin();
  const next = await cache.lookup(URL_);
  assert.equal(next.stale, true);
  assert.match(next.reason, /did not finish/);
  assert.deepEqual(fs.readdirSync(dir), [], 'the entry and its marker are gone');
  assert.equal(await cache.lookup(URL_), null, 'the next load downloads again');
});

test('a wrong-size entry is evicted before it is read', async (t) => {
  const { dir, cache } = await freshCache();
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  await store(cache);
  const gguf = fs.readdirSync(dir).find((n) => n.endsWith('.gguf'));
  fs.truncateSync(path.join(dir, gguf), 100);
  assert.equal((await cache.lookup(URL_)).stale, true);
  assert.deepEqual(fs.readdirSync(dir), []);
});
