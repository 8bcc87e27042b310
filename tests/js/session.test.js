// Conversations that stay fast, through the package under Node 20 with the real model: the next
// chat turn reports the reused prompt tokens (usage.prompt_tokens_details.cached_tokens, streamed
// and not), and engine.session.save / restore / list / delete keep a conversation's KV cache in
// the fs storage beside the model cache, with typed errors for a missing, corrupt or mismatched
// entry after which the engine simply prefills.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { createEngine } from '../../pkg/src/node.js';
import { MODEL, modelMissing, wasmMissing } from './helpers.js';

const skip = modelMissing() || wasmMissing();
let engine;
let cacheDir;

before(async () => {
  if (skip) return;
  cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-session-'));
  engine = await createEngine({ cacheDir });
  await engine.load(MODEL);
});

after(() => {
  if (engine) engine.terminate();
  if (cacheDir) {
    fs.rmSync(cacheDir, { recursive: true, force: true });
    fs.rmSync(`${cacheDir}-sessions`, { recursive: true, force: true });
  }
});

const Q1 = { role: 'user', content: 'Name one planet.' };
const chat = (messages, extra = {}) => engine.chat.completions.create({ messages, max_tokens: 6, temperature: 0, ...extra });
const cached = (u) => u.prompt_tokens_details.cached_tokens;

async function streamed(messages) {
  const s = await chat(messages, { stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage;
  for await (const c of s) {
    if (c.choices[0]) text += c.choices[0].delta.content || '';
    if (c.usage) usage = c.usage;
  }
  return { text, usage };
}

test('the next turn reuses the conversation the KV cache holds', { skip }, async () => {
  const r1 = await chat([Q1]);
  assert.equal(cached(r1.usage), 0);
  const turn2 = [Q1, { role: 'assistant', content: r1.choices[0].message.content }, { role: 'user', content: 'And a moon?' }];
  const r2 = await streamed(turn2);
  assert.ok(cached(r2.usage) >= r1.usage.prompt_tokens, `turn 2 cached ${cached(r2.usage)} of ${r2.usage.prompt_tokens}`);
  assert.ok(cached(r2.usage) < r2.usage.prompt_tokens);
  // From a cold cache (another conversation in between), the same answer.
  await chat([{ role: 'user', content: 'Say hi.' }]);
  const cold = await chat(turn2);
  assert.ok(cached(cold.usage) < r1.usage.prompt_tokens);
  assert.equal(cold.choices[0].message.content, r2.text);
});

test('save, restore, list and delete a conversation; typed errors leave the engine working', { skip }, async () => {
  const r1 = await chat([Q1]);
  const turn2 = [Q1, { role: 'assistant', content: r1.choices[0].message.content }, { role: 'user', content: 'And a moon?' }];
  const saved = await engine.session.save('chat-1');
  assert.equal(saved.key, 'chat-1');
  assert.ok(saved.tokens >= r1.usage.prompt_tokens + 1, `tokens ${saved.tokens}`);
  assert.ok(saved.bytes > saved.tokens * 1000, `bytes ${saved.bytes}`);
  const list = await engine.session.list();
  const entry = list.find((e) => e.key === 'chat-1');
  assert.deepEqual({ key: entry.key, tokens: entry.tokens, bytes: entry.bytes }, saved);
  assert.equal(entry.model_sha256, engine.model.sha256);
  assert.ok(!Number.isNaN(Date.parse(entry.saved_at)));

  // Another conversation takes the cache; restoring brings the saved one back for the next turn.
  const other = await chat([{ role: 'user', content: 'Say hi.' }]);
  const want = await chat(turn2); // cold: the reference answer
  await chat([{ role: 'user', content: 'Say hi.' }]);
  assert.deepEqual(await engine.session.restore('chat-1'), { key: 'chat-1', tokens: saved.tokens });
  const r2 = await chat(turn2);
  assert.ok(cached(r2.usage) >= saved.tokens - 1, `after restore: cached ${cached(r2.usage)} of ${saved.tokens} saved`);
  assert.equal(r2.choices[0].message.content, want.choices[0].message.content);
  assert.ok(other.usage.prompt_tokens > 0);

  // Typed errors; after each the engine generates as before.
  await assert.rejects(engine.session.restore('nope'), { code: 'SESSION_NOT_FOUND' });
  const dir = `${cacheDir}-sessions`;
  const kv = fs.readdirSync(dir).find((n) => n.endsWith('.kv'));
  const bytes = fs.readFileSync(path.join(dir, kv));
  bytes[Math.floor(bytes.length / 2)] ^= 0x40;
  fs.writeFileSync(path.join(dir, kv), bytes);
  await assert.rejects(engine.session.restore('chat-1'), { code: 'SESSION_CORRUPT' });
  const after = await chat(turn2);
  assert.equal(after.choices[0].message.content, want.choices[0].message.content);
  bytes[Math.floor(bytes.length / 2)] ^= 0x40; // repaired
  fs.writeFileSync(path.join(dir, kv), bytes);
  // Other KV settings (int8): the core refuses the snapshot.
  await engine.load(MODEL, { kv: { dtype: 'q8' } });
  await assert.rejects(engine.session.restore('chat-1'), { code: 'SESSION_MISMATCH' });
  assert.ok((await chat([Q1])).choices[0].message.content.length > 0);

  assert.deepEqual(await engine.session.delete('chat-1'), { key: 'chat-1', deleted: true });
  assert.deepEqual(await engine.session.delete('chat-1'), { key: 'chat-1', deleted: false });
  assert.equal((await engine.session.list()).length, 0);
  await assert.rejects(engine.session.save(''), { code: 'INVALID_REQUEST' });
});

test('stored sessions under hostile files, odd keys and racing calls (the sessions probe)', { skip }, async () => {
  const dir = `${cacheDir}-sessions`;
  const kvFile = () => path.join(dir, fs.readdirSync(dir).find((n) => n.endsWith('.kv')));
  const wasm = async () => (await engine.refreshMemory()).wasm_memory_bytes;
  await chat([Q1]);
  // A delete() or list() called after a save() runs after it, as every engine call.
  const save = engine.session.save('order');
  const del = engine.session.delete('order');
  await save;
  assert.deepEqual(await del, { key: 'order', deleted: true });
  const saving = engine.session.save('listed');
  assert.ok((await engine.session.list()).some((e) => e.key === 'listed'));
  const saved = await saving;
  // Bytes of another size than the record's: SESSION_CORRUPT before they are read (a 64 MiB
  // file does not grow wasm memory).
  const good = fs.readFileSync(kvFile());
  const before = await wasm();
  fs.writeFileSync(kvFile(), Buffer.concat([good, Buffer.alloc(64 << 20)]));
  await assert.rejects(engine.session.restore('listed'), { code: 'SESSION_CORRUPT' });
  assert.ok((await wasm()) - before < 8 << 20, `wasm memory grew by ${(await wasm()) - before}`);
  // Not a regular file (a FIFO would block a read for ever, a device never end it): not found.
  fs.rmSync(kvFile());
  const name = path.join(dir, fs.readdirSync(dir).find((n) => n.endsWith('.json')).slice(0, -5));
  fs.symlinkSync('/dev/zero', `${name}.kv`);
  await assert.rejects(engine.session.restore('listed'), { code: 'SESSION_NOT_FOUND' });
  fs.rmSync(`${name}.kv`);
  // A directory where the bytes should be: delete removes the entry and the directory.
  fs.mkdirSync(path.join(`${name}.kv`, 'x'), { recursive: true });
  assert.deepEqual(await engine.session.delete('listed'), { key: 'listed', deleted: true });
  assert.deepEqual(fs.readdirSync(dir), []);
  // A key with a lone surrogate would share U+FFFD's file: refused.
  await assert.rejects(engine.session.save('a\uD800'), { code: 'INVALID_REQUEST' });
  await engine.session.save('a\uFFFD');
  assert.deepEqual((await engine.session.list()).map((e) => e.key), ['a\uFFFD']);
  await engine.session.delete('a\uFFFD');
  // Two engines saving one key at once: every save succeeds, one after the other under the
  // key's lock, so the entry always restores (one engine's record never ends up beside the
  // other's bytes), and no lock file is left behind.
  const second = await createEngine({ cacheDir });
  try {
    await second.load(MODEL, { kv: { dtype: 'q8' } }); // the first engine's settings (the test above)
    await second.chat.completions.create({ messages: [Q1], max_tokens: 2, temperature: 0 });
    for (let round = 0; round < 3; round++) {
      const both = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => (i % 2 ? second : engine).session.save('same')));
      assert.deepEqual(both.map((r) => r.status), Array(6).fill('fulfilled'), JSON.stringify(both.filter((r) => r.reason).map((r) => r.reason.message)));
      const [a, b] = await Promise.all([engine.session.restore('same'), second.session.restore('same')]);
      assert.ok(a.tokens > 0 && b.tokens > 0, `round ${round}`);
      assert.deepEqual(fs.readdirSync(dir).filter((n) => !/\.(kv|json)$/.test(n)), [], 'only the entry\'s two files');
    }
    await engine.session.save('same');
    assert.ok((await engine.session.restore('same')).tokens > 0, 'one writer: the entry restores');
  } finally {
    second.terminate();
  }
  assert.ok(saved.bytes > 0);
  assert.ok((await chat([Q1])).choices[0].message.content.length > 0, 'the engine still answers');
});
