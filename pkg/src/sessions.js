// Saved conversations (engine.session.save / restore / list / delete), run inside the worker.
//
// An entry is two files beside the model cache: `<name>.kv` (the core's snapshot bytes: tokens,
// KV rows, the model's sha256, the KV settings and a sha256 checksum, see src/snapshot.rs) and
// `<name>.json` (its record: key, tokens, bytes, model_sha256, saved_at), `<name>` being a hash
// of the key. As in cache.js, the record is written only after the bytes and removed before
// they are replaced, so a record always describes complete bytes; the core verifies them again
// on restore (SESSION_CORRUPT / SESSION_MISMATCH). Every call on one key holds that key's lock
// (browsers: a Web Lock; Node: a `<name>.lock` file made exclusively), so two engines (tabs,
// workers, processes) saving one key at once write one after the other: without it, one's
// record could end up beside the other's bytes. Browsers: OPFS directory `edgellm-sessions`;
// Node: the directory `<cacheDir>-sessions`; without a cache: memory only (lost with the worker).

import { keyOf } from './cache.js';
import { EdgeLLMError, ErrorCode } from './errors.js';
import { readJson, removeFile, writeFile } from './opfs-files.js';

const DIR = 'edgellm-sessions';
/** A record is a few hundred bytes; a larger `.json` is not one of ours. */
const MAX_RECORD_BYTES = 64 << 10;

function validRecord(r, key) {
  return r && typeof r === 'object' && r.key === key && Number.isSafeInteger(r.bytes) && r.bytes >= 0 && Number.isSafeInteger(r.tokens) && r.tokens >= 0 && typeof r.model_sha256 === 'string';
}

/** The checks before a session's bytes are read (`size`: the stored file's), for every store:
 * a record over `maxBytes` (what restoring may copy into wasm memory) is OVER_MEMORY_BUDGET,
 * bytes of another size than the record's are SESSION_CORRUPT — never read whole first. */
function checkStored(key, record, size, maxBytes) {
  if (record.bytes > maxBytes) {
    throw new EdgeLLMError(ErrorCode.OVER_MEMORY_BUDGET, `session ${JSON.stringify(key)} is ${record.bytes} bytes; the memory budget leaves ${maxBytes}`);
  }
  if (size !== record.bytes) {
    throw new EdgeLLMError(ErrorCode.SESSION_CORRUPT, `session ${JSON.stringify(key)}: its stored bytes are ${size} long, its record says ${record.bytes}`);
  }
}

/** How long a `.lock` file may stand before it is taken for one a crashed writer left. */
const STALE_LOCK_MS = 30_000;

/** Runs `fn` holding the Web Lock of session file `name` (OPFS), where the browser has Web Locks. */
function withWebLock(name, fn) {
  const locks = globalThis.navigator && globalThis.navigator.locks;
  return locks && typeof locks.request === 'function' ? locks.request(`edgellm-session:${name}`, fn) : fn();
}

/** Runs `fn` holding the lock file `lock` (fs promises `p`): made with 'wx', so one holder at a
 * time; a lock older than STALE_LOCK_MS is removed (its writer crashed); the wait is bounded
 * (after it, `fn` runs unlocked rather than never), and where no lock can be made (a read-only
 * directory) `fn` runs unlocked, as a read there always could. */
async function withLockFile(p, lock, fn) {
  const deadline = Date.now() + STALE_LOCK_MS + 5_000;
  let held = false;
  while (!held && Date.now() < deadline) {
    try {
      await (await p.open(lock, 'wx')).close();
      held = true;
    } catch (e) {
      if (e.code !== 'EEXIST') break;
      const st = await p.stat(lock).catch(() => null);
      if (st && Date.now() - st.mtimeMs > STALE_LOCK_MS) await p.rm(lock, { force: true, recursive: true });
      else await new Promise((r) => setTimeout(r, 5 + Math.random() * 20));
    }
  }
  try {
    return await fn();
  } finally {
    if (held) await p.rm(lock, { force: true }).catch(() => {});
  }
}

/** A name for a file being written that no other writer uses (two engines saving one key). */
const tmpName = (name) => `${name}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}.tmp`;

/** The records among file `names` (sync or async iterable), read by `readRecord(name)`. */
async function listRecords(names, readRecord) {
  const out = [];
  for await (const n of names) {
    if (!n.endsWith('.json')) continue;
    const r = await readRecord(n.slice(0, -5));
    if (r && typeof r.key === 'string' && validRecord(r, r.key)) out.push(r);
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
  async get(key, maxBytes = Infinity) {
    const e = this.entries.get(key);
    if (e) checkStored(key, e.record, e.bytes.byteLength, maxBytes);
    return e || null;
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
    await withWebLock(name, async () => {
      await this.#remove(`${name}.json`);
      await this.#write(`${name}.kv`, bytes);
      await this.#write(`${name}.json`, JSON.stringify(record));
    });
  }
  async get(key, maxBytes = Infinity) {
    const name = await keyOf(key);
    return withWebLock(name, () => this.#get(key, name, maxBytes));
  }
  async #get(key, name, maxBytes) {
    const record = await this.#readRecord(name);
    if (!validRecord(record, key)) return null;
    let f;
    try {
      f = await (await this.dir.getFileHandle(`${name}.kv`)).getFile();
    } catch {
      return null;
    }
    checkStored(key, record, f.size, maxBytes);
    try {
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
    return withWebLock(name, async () => {
      const had = await this.#remove(`${name}.json`);
      await this.#remove(`${name}.kv`);
      return had;
    });
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
  /** The size of `file` when it is a regular file (a FIFO or a device would block or never
   * end a read; a directory is not ours), else null. Symlinks are followed. */
  async #regularSize(file) {
    try {
      const st = await this.fs.promises.stat(file);
      return st.isFile() ? st.size : null;
    } catch {
      return null;
    }
  }
  async #readRecord(name) {
    const file = this.#file(`${name}.json`);
    const size = await this.#regularSize(file);
    if (size === null || size > MAX_RECORD_BYTES) return null;
    try {
      return JSON.parse(await this.fs.promises.readFile(file, 'utf8'));
    } catch {
      return null;
    }
  }
  /** Whether the directory exists (before it does, nothing is saved, and no lock file can be
   * made there). */
  async #hasDir() {
    return (await this.fs.promises.stat(this.dir).catch(() => null)) !== null;
  }
  #locked(name, fn) {
    return withLockFile(this.fs.promises, this.#file(`${name}.lock`), fn);
  }
  async put(key, bytes, record) {
    const name = await keyOf(key);
    await this.fs.promises.mkdir(this.dir, { recursive: true });
    await this.#locked(name, () => this.#put(name, bytes, record));
  }
  async #put(name, bytes, record) {
    const p = this.fs.promises;
    // The record goes first and comes back last, so it always describes complete bytes; each
    // file is written under a name of its own and renamed into place (never a half-written
    // file, should the lock's wait run out).
    await p.rm(this.#file(`${name}.json`), { force: true });
    for (const [file, data] of [[`${name}.kv`, bytes], [`${name}.json`, JSON.stringify(record)]]) {
      const tmp = this.#file(tmpName(file));
      try {
        await p.writeFile(tmp, data);
        await p.rename(tmp, this.#file(file));
      } finally {
        await p.rm(tmp, { force: true }).catch(() => {});
      }
    }
  }
  async get(key, maxBytes = Infinity) {
    const name = await keyOf(key);
    if (!(await this.#hasDir())) return null;
    return this.#locked(name, () => this.#get(key, name, maxBytes));
  }
  async #get(key, name, maxBytes) {
    const record = await this.#readRecord(name);
    if (!validRecord(record, key)) return null;
    const file = this.#file(`${name}.kv`);
    const size = await this.#regularSize(file);
    if (size === null) return null;
    checkStored(key, record, size, maxBytes);
    try {
      const b = await this.fs.promises.readFile(file);
      if (b.byteLength !== record.bytes) throw new EdgeLLMError(ErrorCode.SESSION_CORRUPT, `session ${JSON.stringify(key)} changed while it was read`);
      return { record, bytes: new Uint8Array(b.buffer, b.byteOffset, b.byteLength) };
    } catch (e) {
      if (e instanceof EdgeLLMError) throw e;
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
    if (!(await this.#hasDir())) return false;
    return this.#locked(name, async () => {
      const had = (await this.#readRecord(name)) !== null;
      // Whatever stands under these names goes (a directory too: it is not ours, and it would
      // keep the entry on disk); a symlink is removed, not what it points to.
      for (const f of [`${name}.json`, `${name}.kv`]) await this.fs.promises.rm(this.#file(f), { force: true, recursive: true });
      return had;
    });
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
