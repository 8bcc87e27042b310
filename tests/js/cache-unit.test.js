// The model cache's trust rules (pkg/src/cache.js) on the Node directory cache, no model
// needed: an entry is used only with a verified record, and a load that never finished (the
// engine crashed or was killed mid-load) evicts the entry instead of crashing again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { FsCache, HEARTBEAT_MS, STALE_MS } from '../../pkg/src/cache.js';

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

/** A second engine (another tab) on the same cache directory. */
const engineCache = (dir, engine, worker = 1) => FsCache.open(fs, path, dir, { engine, worker });
const markers = (dir) => fs.readdirSync(dir).filter((n) => n.endsWith('.loading'));
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
/** The file-name key of the one entry in `dir`. */
const entryKey = (dir) => fs.readdirSync(dir).find((n) => n.endsWith('.json')).slice(0, -5);

test('two engines load one entry at once: a load in progress is not a crash', async (t) => {
  const { dir } = await freshCache();
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const a = await engineCache(dir, 'aaaa');
  const b = await engineCache(dir, 'bbbb');
  await store(a);
  const hitA = await a.lookup(URL_);
  await hitA.begin();
  // Longer than STALE_MS: A's beats keep its marker fresh.
  await sleep(STALE_MS + 2 * HEARTBEAT_MS);
  const hitB = await b.lookup(URL_);
  assert.ok(hitB && !hitB.stale, JSON.stringify(hitB));
  await hitB.begin();
  assert.equal(markers(dir).length, 2, 'one marker per load');
  await hitA.done();
  await hitB.done();
  await sleep(2 * HEARTBEAT_MS);
  assert.deepEqual(markers(dir), [], 'no beat brings a marker back after done');
  const again = await a.lookup(URL_);
  assert.ok(again && !again.stale, 'the entry stayed');
});

test('a marker whose engine stopped beating, or an earlier worker of this engine, is a crash', async (t) => {
  const { dir } = await freshCache();
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // Another engine's load that stopped (its tab crashed): its marker goes stale.
  const a = await engineCache(dir, 'aaaa');
  await store(a);
  const hitA = await a.lookup(URL_);
  await hitA.begin();
  await hitA.stop(); // the engine dies: no more beats, nothing removes the marker
  const b = await engineCache(dir, 'bbbb');
  const early = await b.lookup(URL_);
  assert.ok(early && !early.stale, 'within STALE_MS it may still be a live load');
  await sleep(STALE_MS + HEARTBEAT_MS);
  const late = await b.lookup(URL_);
  assert.equal(late.stale, true);
  assert.match(late.reason, /did not finish/);
  assert.deepEqual(fs.readdirSync(dir), [], 'evicted with its marker');
  // The same engine's next worker: the earlier worker's marker is a crash at once, even while
  // fresh (an engine reloaded right after a crash must not load the entry again).
  await store(a);
  const first = await (await engineCache(dir, 'cccc', 1)).lookup(URL_);
  await first.begin();
  await first.stop();
  const next = await (await engineCache(dir, 'cccc', 2)).lookup(URL_);
  assert.equal(next.stale, true);
  assert.deepEqual(fs.readdirSync(dir), []);
  // An older version's marker (the URL alone) is a crash too.
  await store(a);
  const key = entryKey(dir);
  fs.writeFileSync(path.join(dir, `${key}.loading`), URL_);
  assert.equal((await b.lookup(URL_)).stale, true);
  assert.deepEqual(fs.readdirSync(dir), []);
});

test('an eviction during the first marker write stops the beats for good', async (t) => {
  const { dir } = await freshCache();
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const a = await engineCache(dir, 'aaaa');
  await store(a);
  const hit = await a.lookup(URL_);
  const begun = hit.begin();
  await a.evict(URL_); // while begin() writes its first beat
  await begun;
  await sleep(3 * HEARTBEAT_MS);
  assert.deepEqual(markers(dir), [], 'no beat after the eviction');
});

test('a marker caught half written is read again, not taken for a crash', async (t) => {
  const { dir } = await freshCache();
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const a = await engineCache(dir, 'aaaa');
  await store(a);
  const key = entryKey(dir);
  // Another engine's marker, empty for a moment (a storage without atomic replace).
  const name = path.join(dir, `${key}.bbbb-1.loading`);
  fs.writeFileSync(name, '');
  setTimeout(() => fs.writeFileSync(name, JSON.stringify({ url: URL_, engine: 'bbbb', worker: 1, beat: Date.now() })), 30);
  const hit = await a.lookup(URL_);
  assert.ok(hit && !hit.stale, JSON.stringify(hit));
  fs.rmSync(name);
});
