// Saved conversations (engine.session.save / restore / list / delete), run inside the worker.
//
// An entry is two files beside the model cache: `<name>.kv` (the core's snapshot bytes: tokens,
// KV rows, the model's sha256, the KV settings and a sha256 checksum, see src/snapshot.rs) and
// `<name>.json` (its record: key, tokens, bytes, model_sha256, saved_at), `<name>` being a hash
// of the key. As in cache.js, the record is written only after the bytes and removed before
// they are replaced, so a record always describes complete bytes; the core verifies them again
// on restore (SESSION_CORRUPT / SESSION_MISMATCH). Browsers: OPFS directory `edgellm-sessions`;
// Node: the directory `<cacheDir>-sessions`; without a cache: memory only (lost with the worker).

import { keyOf } from './cache.js';
import { readJson, removeFile, writeFile } from './opfs-files.js';

const DIR = 'edgellm-sessions';

function validRecord(r, key) {
  return r && typeof r === 'object' && r.key === key && Number.isSafeInteger(r.bytes) && Number.isSafeInteger(r.tokens) && typeof r.model_sha256 === 'string';
}

/** The records among file `names` (sync or async iterable), read by `readRecord(name)`. */
async function listRecords(names, readRecord) {
  const out = [];
  for await (const n of names) {
    if (!n.endsWith('.json')) continue;
    const r = await readRecord(n.slice(0, -5));
    if (r && typeof r.key === 'string') out.push(r);
  }
  return out;
}

/** Keeps entries in memory (no persistent cache configured). */
class MemorySessions {
  constructor() {
    this.kind = 'memory';
    this.entries = new Map();
  }
  async put(key, bytes, record) {
    this.entries.set(key, { bytes: bytes.slice(), record });
  }
  async get(key) {
    return this.entries.get(key) || null;
  }
  async list() {
    return [...this.entries.values()].map((e) => e.record);
  }
  async delete(key) {
    return this.entries.delete(key);
  }
}

class OpfsSessions {
  constructor(dir) {
    this.kind = 'opfs';
    this.dir = dir;
  }
  #remove(name) {
    return removeFile(this.dir, name);
  }
  #write(name, data) {
    return writeFile(this.dir, name, data);
  }
  #readRecord(name) {
    return readJson(this.dir, `${name}.json`);
  }
  async put(key, bytes, record) {
    const name = await keyOf(key);
    await this.#remove(`${name}.json`);
    await this.#write(`${name}.kv`, bytes);
    await this.#write(`${name}.json`, JSON.stringify(record));
  }
  async get(key) {
    const name = await keyOf(key);
    const record = await this.#readRecord(name);
    if (!validRecord(record, key)) return null;
    try {
      const f = await (await this.dir.getFileHandle(`${name}.kv`)).getFile();
      return { record, bytes: new Uint8Array(await f.arrayBuffer()) };
    } catch {
      return null;
    }
  }
  async list() {
    return listRecords(this.dir.keys(), (name) => this.#readRecord(name));
  }
  async delete(key) {
    const name = await keyOf(key);
    const had = await this.#remove(`${name}.json`);
    await this.#remove(`${name}.kv`);
    return had;
  }
}

class FsSessions {
  constructor(fs, path, dir) {
    this.kind = 'fs';
    this.fs = fs;
    this.path = path;
    this.dir = dir;
  }
  #file(n) {
    return this.path.join(this.dir, n);
  }
  async #readRecord(name) {
    try {
      return JSON.parse(await this.fs.promises.readFile(this.#file(`${name}.json`), 'utf8'));
    } catch {
      return null;
    }
  }
  async put(key, bytes, record) {
    const name = await keyOf(key);
    await this.fs.promises.mkdir(this.dir, { recursive: true });
    await this.fs.promises.rm(this.#file(`${name}.json`), { force: true });
    await this.fs.promises.writeFile(this.#file(`${name}.kv`), bytes);
    const tmp = this.#file(`${name}.json.tmp`);
    await this.fs.promises.writeFile(tmp, JSON.stringify(record));
    await this.fs.promises.rename(tmp, this.#file(`${name}.json`));
  }
  async get(key) {
    const name = await keyOf(key);
    const record = await this.#readRecord(name);
    if (!validRecord(record, key)) return null;
    try {
      const b = await this.fs.promises.readFile(this.#file(`${name}.kv`));
      return { record, bytes: new Uint8Array(b.buffer, b.byteOffset, b.byteLength) };
    } catch {
      return null;
    }
  }
  async list() {
    let names = [];
    try {
      names = await this.fs.promises.readdir(this.dir);
    } catch {
      return [];
    }
    return listRecords(names, (name) => this.#readRecord(name));
  }
  async delete(key) {
    const name = await keyOf(key);
    const had = (await this.#readRecord(name)) !== null;
    await this.fs.promises.rm(this.#file(`${name}.json`), { force: true });
    await this.fs.promises.rm(this.#file(`${name}.kv`), { force: true });
    return had;
  }
}

/** The session store that goes with the model cache `cache` (cache.js). */
export async function openSessionStore(cache) {
  try {
    if (cache && cache.kind === 'opfs') {
      const root = await navigator.storage.getDirectory();
      return new OpfsSessions(await root.getDirectoryHandle(DIR, { create: true }));
    }
    if (cache && cache.kind === 'fs') return new FsSessions(cache.fs, cache.path, `${String(cache.dir).replace(/[\\/]+$/, '')}-sessions`);
  } catch {
    /* no persistent storage: memory below */
  }
  return new MemorySessions();
}
