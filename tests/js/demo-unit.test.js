// The demo page's plain-data modules under Node (no browser): saved conversations, chat
// settings per model, the catalog, and the chat_eval scoring that chose the defaults.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ConversationStore, titleFrom } from '../../www/conversations.js';
import { CATALOG, entryUrl, entryForUrl } from '../../www/catalog.js';
import { sanitize, sanitizeChat, chatSettings, withChat, chatKey, CUSTOM_CHAT, KV_TOKENS, loadSettings, saveSettings } from '../../www/settings.js';
import { fmtTpot, fmtRate, fmtMs, DASH } from '../../www/format.js';
import { scoreAnswer, factScore, isEnglish, repetition } from '../../tools/chat_eval/score.mjs';

/** A localStorage stand-in: a Map with the Storage methods the store uses. */
function memoryStorage(initial = {}) {
  const m = new Map(Object.entries(initial));
  return { getItem: (k) => (m.has(k) ? m.get(k) : null), setItem: (k, v) => m.set(k, String(v)), map: m };
}

test('conversations: create, save, rename, delete; all of it survives a new store on the same storage', () => {
  const storage = memoryStorage();
  const a = new ConversationStore(storage);
  const c1 = a.create();
  c1.turns.push({ user: 'What is the capital of France?\nBriefly.', assistant: 'Paris.' });
  a.save(c1);
  assert.equal(c1.title, 'What is the capital of France?');
  const c2 = a.create();
  c2.turns.push({ user: 'Hi', assistant: null });
  a.save(c2);
  assert.equal(a.openId, c2.id);
  assert.ok(a.rename(c1.id, '  Capitals  '));
  assert.equal(a.rename(c1.id, '   '), false, 'an empty name is refused');
  a.select(c1.id);
  const b = new ConversationStore(storage);
  assert.equal(b.openId, c1.id);
  assert.deepEqual(b.items.map((c) => [c.title, c.turns.length]), [['Hi', 1], ['Capitals', 1]]);
  // A renamed title no longer follows the first message.
  b.open.turns[0].user = 'Something else';
  b.save(b.open);
  assert.equal(b.open.title, 'Capitals');
  assert.ok(b.delete(c1.id));
  assert.equal(b.openId, c2.id, 'deleting the open one opens the next');
  assert.deepEqual(new ConversationStore(storage).items.map((c) => c.id), [c2.id]);
});

test('conversations: unreadable or malformed storage starts empty; bad turns are dropped', () => {
  assert.deepEqual(new ConversationStore(memoryStorage({ 'edgellm-demo/conversations/v1': '{not json' })).items, []);
  const s = new ConversationStore(
    memoryStorage({ 'edgellm-demo/conversations/v1': JSON.stringify({ open: 'x', items: [{ id: 'x', title: 't', turns: [{ user: 'ok', assistant: 'a' }, { user: 5 }, null, { user: 'u', assistant: 7 }] }, { id: 3 }] }) }),
  );
  assert.deepEqual(s.items.map((c) => c.turns), [[{ user: 'ok', assistant: 'a' }]]);
  assert.equal(s.openId, 'x');
  // A full storage: the change stays for this visit, nothing throws.
  const full = new ConversationStore({ getItem: () => null, setItem: () => { throw new Error('QuotaExceededError'); } });
  assert.equal(full.save(full.create()), false);
  assert.equal(titleFrom('a '.repeat(80)).endsWith('…'), true);
  assert.ok(titleFrom('a '.repeat(80)).length <= 61);
});

test('catalog: each entry has a URL under models/ and is found again from it', () => {
  for (const e of CATALOG) {
    assert.match(entryUrl(e), new RegExp(`/models/${e.file.replace(/\./g, '\\.')}$`));
    assert.equal(entryForUrl(entryUrl(e), 'file:///'), e);
    assert.ok(['chat', 'base'].includes(e.kind) && e.bytes > 0 && /^[0-9a-f]{64}$/.test(e.sha256));
  }
  assert.equal(CATALOG[0].kind, 'chat', 'the default entry is the chat model');
  assert.equal(entryForUrl('http://x/models/other.gguf'), null);
  assert.equal(entryForUrl('::bad::'), null);
});

test('chat settings are kept per model and start from that model\'s defaults', () => {
  const chatUrl = entryUrl(CATALOG[0]);
  const baseUrl = entryUrl(CATALOG[1]);
  let s = sanitize({ model_url: chatUrl });
  assert.deepEqual(chatSettings(s), { ...CATALOG[0].defaults });
  s = withChat(s, { ...chatSettings(s), temperature: 0 });
  const onBase = { ...s, model_url: baseUrl };
  assert.equal(chatSettings(onBase).raw, true, 'the base model defaults to raw completion');
  assert.equal(chatSettings(sanitize(JSON.parse(JSON.stringify(s)))).temperature, 0, 'remembered through storage');
  assert.equal(chatKey('http://x/other.gguf'), 'custom');
  assert.deepEqual(chatSettings({ ...s, model_url: 'http://x/other.gguf' }), { ...CUSTOM_CHAT });
  // Out-of-range and junk values are clamped or replaced by the defaults.
  const c = sanitizeChat({ temperature: '9', top_p: -1, min_p: 'x', repetition_penalty: 0.5, max_tokens: 1e9, raw: 'true' }, CATALOG[0].id);
  assert.deepEqual([c.temperature, c.top_p, c.min_p, c.repetition_penalty, c.max_tokens, c.raw], [2, 0, CATALOG[0].defaults.min_p, 1, 4096, true]);
  assert.deepEqual(Object.keys(sanitize({ chat: { nope: { temperature: 1 }, custom: {} } }).chat), ['custom'], 'unknown models are dropped');
  // A model opened from a file (no URL) has the custom settings, whichever model is chosen.
  assert.equal(chatKey(null), 'custom');
  assert.deepEqual(chatSettings(s, null), { ...CUSTOM_CHAT });
  const own = withChat(s, { ...CUSTOM_CHAT, temperature: 1.5 }, null);
  assert.equal(chatSettings(own, null).temperature, 1.5);
  assert.equal(chatSettings(own).temperature, 0, "the chosen model's own are untouched");
});

test('the KV budget is kept in its range (a larger one would be applied to the model)', () => {
  const kv = (v) => sanitize({ kv_tokens: v }).kv_tokens;
  assert.deepEqual([kv(200000), kv(1e12), kv(-5), kv(4096.4), kv('x')], [KV_TOKENS.max, KV_TOKENS.max, KV_TOKENS.min, 4096, 4096]);
});

test("a link's server is taken only when it is this machine's or the user confirms it; a link's mode and model apply", () => {
  const mem = new Map();
  globalThis.localStorage = { getItem: (k) => mem.get(k) ?? null, setItem: (k, v) => mem.set(k, String(v)) };
  try {
    saveSettings({ ...loadSettings(new URLSearchParams('')), server_url: 'http://127.0.0.1:8081/v1' });
    const q = (s) => new URLSearchParams(s);
    const asked = [];
    const refuse = (u) => (asked.push(u), false);
    const foreign = loadSettings(q('server=https://collector.example/v1&mode=remote-only&model=https://host.example/m.gguf'), refuse);
    assert.equal(foreign.server_url, 'http://127.0.0.1:8081/v1', 'a refused server is not taken');
    assert.deepEqual(asked, ['https://collector.example/v1']);
    assert.equal(foreign.mode, 'remote-only');
    assert.equal(foreign.model_url, 'https://host.example/m.gguf');
    assert.equal(loadSettings(q('server=https://collector.example/v1')).server_url, 'http://127.0.0.1:8081/v1', 'refused by default');
    assert.equal(loadSettings(q('server=https://team.example/v1'), () => true).server_url, 'https://team.example/v1');
    for (const local of ['http://127.0.0.1:9000/v1', 'http://localhost:9000/v1', 'http://[::1]:9000/v1']) {
      assert.equal(loadSettings(q(`server=${encodeURIComponent(local)}`), refuse).server_url, local, 'this machine: no question');
    }
    assert.equal(asked.length, 1);
  } finally {
    delete globalThis.localStorage;
  }
});

test('chat_eval scoring: facts, language, repetition', () => {
  assert.equal(factScore('The capital of France is Paris.', [['Paris']]), 1);
  assert.equal(factScore('Parisian food', [['Paris']]), 0, 'whole words only');
  assert.equal(factScore('apple, kiwi and a pear', [{ any: ['apple', 'kiwi', 'pear', 'plum'], min: 3 }]), 1);
  assert.equal(factScore('apple and kiwi', [{ any: ['apple', 'kiwi', 'pear'], min: 3 }]), 0);
  assert.equal(isEnglish('The capital of France is Paris.'), true);
  assert.equal(isEnglish("L'Étoile, la Marseillaise, la femme et les enfants sont dans la maison."), false);
  assert.equal(isEnglish('Il capo di Roma e il capo di Napoli, el capo de la España'), false);
  assert.equal(isEnglish("Le Grand Jardin, la Ciampière. France, as you know, is a country with a rich history and culture, and it has many old towns and a long coast."), false, 'a French opening');
  const loop = 'Explain the storage structure. '.repeat(20);
  assert.ok(repetition(loop).ngram > 0.8);
  const s = scoreAnswer(loop, [['storage']], 'length');
  assert.deepEqual([s.facts, s.repetitive, s.stopped, s.ok], [1, true, false, false]);
  assert.equal(scoreAnswer('', [], 'stop').ok, false, 'an empty answer never passes');
});

test('figures usage could not measure (reported as 0) are shown as unknown, not as 0', () => {
  assert.deepEqual([fmtTpot(0), fmtRate(0), fmtRate(null), fmtRate(NaN)], [DASH, DASH, DASH, DASH]);
  assert.deepEqual([fmtTpot(37.26), fmtRate(12.34), fmtMs(0)], ['37.3 ms', '12.3 tok/s', '0 ms']);
});
