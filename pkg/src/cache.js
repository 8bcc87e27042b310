// The model cache, run inside the worker: Origin Private File System in browsers, a directory
// under Node. Entries are keyed by URL.
//
// Trust rule: an entry is two files, `<key>.gguf` (the bytes) and `<key>.json` (its record:
// url, size, sha256, etag, `verified: true`). The record is written only AFTER the whole
// download was received, its sha256 computed and checked, and the engine loaded those very bytes
// (`commit` is called after a successful load), and it is deleted BEFORE a new download starts
// writing the bytes. So a record always vouches for complete bytes that the engine has parsed and
// run: an entry is verified before it is parsed again. On use, the size is checked before
// reading and the sha256 is recomputed while the bytes stream in and compared before the load is
// declared good. A missing or unverified record, a size mismatch or a digest mismatch evicts the
// entry and the model is fetched again.
//
// Crash rule: a load from the cache first writes `<key>.loading` (`hit.begin()`) and removes it
// once the load succeeded (`hit.done()`). If the engine dies in between (a worker crash, an
// out-of-memory kill: nothing runs to evict the entry), the marker is still there at the next
// lookup, which evicts the entry instead of loading it again: a crashing entry costs one crash,
// never a loop.
//
// Several engines (tabs) may load one entry at once, and a load in progress is not a crash:
// each load writes its own marker, `<key>.<owner>.loading` (owner: the engine's random id and
// its worker's number), and rewrites the time in it every HEARTBEAT_MS until done. A lookup
// evicts the entry only for a marker that no live load owns: one left by an earlier worker of
// the same engine (an engine runs one worker at a time: that one is gone), one whose time is
// older than STALE_MS (its engine stopped beating: crashed, killed or closed), or one in an
// older format. A fresh marker of another engine is a load in progress; both read the same
// verified bytes. STALE_MS is short because an engine reloaded after a crash must not take the
// dead load for a live one (that would be a crash loop); a load that misses its beats for
// longer (a worker blocked that long) only costs the other engine a fresh download.

import { readBlob, readPath } from './loader.js';
import { readJson, removeFile, writeFile } from './opfs-files.js';

const DIR = 'edgellm-cache';

/** Hex sha256 of a short string (the URL): the entry's file name. */
export async function keyOf(url) {
  const bytes = new TextEncoder().encode(url);
  const d = await globalThis.crypto.subtle.digest('SHA-256', bytes);
  return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, '0')).join('').slice(0, 40);
}

function validRecord(r, url) {
  return (
    r &&
    typeof r === 'object' &&
    r.url === url &&
    r.verified === true &&
    Number.isSafeInteger(r.size) &&
    r.size >= 0 &&
    /^[0-9a-f]{64}$/.test(r.sha256 || '')
  );
}

const CRASHED = 'a previous load of this entry did not finish (the engine crashed or was killed)';

/** How often a load rewrites its marker's time, and when a marker's time counts as stopped. */
export const HEARTBEAT_MS = 500;
export const STALE_MS = 3000;

/** This engine's identity in crash markers: `engine` random per engine, `worker` its worker's number. */
export function markerOwner(owner) {
  if (owner && typeof owner.engine === 'string' && /^[0-9a-f]{1,32}$/.test(owner.engine) && Number.isSafeInteger(owner.worker)) return owner;
  const id = Array.from(globalThis.crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, '0')).join('');
  return { engine: id, worker: 0 };
}

const markerName = (key, owner) => `${key}.${owner.engine}-${owner.worker}.loading`;
const isMarkerOf = (key, name) => name.startsWith(`${key}.`) && name.endsWith('.loading');

/**
 * What the marker `text` says to `owner` at time `now` (ms): 'live' (another engine's load in
 * progress), 'dead' (no live load owns it) or 'unreadable' (not JSON: an older version's
 * marker, the URL alone — or one caught mid-write).
 */
export function markerVerdict(text, owner, now) {
  let m = null;
  try {
    m = JSON.parse(text);
  } catch {
    return 'unreadable';
  }
  if (!m || typeof m.engine !== 'string' || !Number.isFinite(m.beat)) return 'dead';
  if (m.engine === owner.engine) return 'dead'; // an earlier worker of this engine: gone
  return now - m.beat <= STALE_MS ? 'live' : 'dead';
}

/** How long a lookup waits before reading an unreadable marker again. */
const REREAD_MS = 100;

/**
 * Whether some marker of `readMarkers()` belongs to no live load. One that cannot be read is
 * read again once after REREAD_MS (a write may have been caught half done) before it counts as
 * an older version's, so dead.
 */
async function someMarkerDead(readMarkers, owner) {
  for (let attempt = 0; ; attempt++) {
    const now = Date.now();
    const verdicts = (await readMarkers()).map((m) => markerVerdict(m.text, owner, now));
    if (verdicts.includes('dead')) return true;
    if (!verdicts.includes('unreadable')) return false;
    if (attempt > 0) return true;
    await new Promise((res) => setTimeout(res, REREAD_MS));
  }
}

/**
 * The marker of one load: `begin` writes it and keeps its time fresh; `done` stops and removes
 * it; `stop` only stops the beats, once no write is in flight (a late write must not bring a
 * removed marker back). `write(text)` and `remove()` are the storage's; `beating` (the cache's
 * map of its loads in progress, by key) lets an eviction stop a load's beats first.
 */
function loadMarker(key, url, owner, beating, write, remove) {
  let timer = null;
  let pending = Promise.resolve();
  const beat = () => {
    pending = pending.then(() => write(JSON.stringify({ url, engine: owner.engine, worker: owner.worker, beat: Date.now() }))).catch(() => {});
    return pending;
  };
  const marker = {
    begin: async () => {
      beating.set(key, marker);
      await beat();
      // Not when an eviction stopped this load during that first write.
      if (beating.get(key) === marker) timer = setInterval(beat, HEARTBEAT_MS);
    },
    stop: async () => {
      clearInterval(timer);
      timer = null;
      if (beating.get(key) === marker) beating.delete(key);
      await pending;
    },
    done: async () => {
      await marker.stop();
      await remove();
    },
  };
  return marker;
}

/** No cache: every lookup misses, nothing is written. */
export class NoCache {
  constructor() {
    this.kind = 'none';
  }
  async lookup() {
    return null;
  }
  async writer() {
    return null;
  }
  async evict() {}
  async list() {
    return [];
  }
  async clear() {}
}

/** Origin Private File System (dedicated worker: synchronous access handles when available). */
export class OpfsCache {
  constructor(dir, owner) {
    this.kind = 'opfs';
    this.dir = dir;
    this.owner = markerOwner(owner);
    this.beating = new Map();
  }

  static async open(owner) {
    const root = await navigator.storage.getDirectory();
    return new OpfsCache(await root.getDirectoryHandle(DIR, { create: true }), owner);
  }

  /** The crash markers of `key`: [{name, text}]. */
  async #markers(key) {
    const out = [];
    for await (const [name, handle] of this.dir.entries()) {
      if (handle.kind !== 'file' || !isMarkerOf(key, name)) continue;
      try {
        out.push({ name, text: await (await handle.getFile()).text() });
      } catch {
        /* removed meanwhile */
      }
    }
    return out;
  }

  #readRecord(key) {
    return readJson(this.dir, `${key}.json`);
  }

  #remove(name) {
    return removeFile(this.dir, name);
  }

  async lookup(url) {
    const key = await keyOf(url);
    if (await someMarkerDead(() => this.#markers(key), this.owner)) {
      await this.evict(url);
      return { stale: true, reason: CRASHED };
    }
    const record = await this.#readRecord(key);
    if (!validRecord(record, url)) {
      if (record) await this.evict(url);
      return null;
    }
    let file;
    try {
      file = await (await this.dir.getFileHandle(`${key}.gguf`)).getFile();
    } catch {
      await this.evict(url);
      return null;
    }
    if (file.size !== record.size) {
      await this.evict(url);
      return { stale: true, reason: `cached file has ${file.size} bytes, its record says ${record.size}` };
    }
    return {
      record,
      size: file.size,
      read: (opts) => readBlob(file, opts),
      ...loadMarker(key, url, this.owner, this.beating, (text) => writeFile(this.dir, markerName(key, this.owner), text), () => this.#remove(markerName(key, this.owner))),
    };
  }

  async writer(url) {
    const key = await keyOf(url);
    await this.#remove(`${key}.json`); // un-trust first
    const fh = await this.dir.getFileHandle(`${key}.gguf`, { create: true });
    let offset = 0;
    if (typeof fh.createSyncAccessHandle === 'function') {
      const h = await fh.createSyncAccessHandle();
      h.truncate(0);
      let open = true;
      const close = () => {
        if (open) {
          open = false;
          try {
            h.flush();
          } finally {
            h.close();
          }
        }
      };
      return {
        write: (chunk) => {
          const n = h.write(chunk, { at: offset });
          if (n !== chunk.byteLength) throw new Error(`OPFS short write (${n} of ${chunk.byteLength})`);
          offset += n;
        },
        commit: async (record) => {
          close();
          await this.#writeRecord(key, { ...record, url });
        },
        abort: async () => {
          try {
            close();
          } catch {
            /* ignore */
          }
          await this.#remove(`${key}.gguf`);
        },
      };
    }
    const w = await fh.createWritable({ keepExistingData: false });
    let chain = Promise.resolve();
    return {
      write: (chunk) => {
        // Copy: the caller may reuse its buffer before the asynchronous write runs.
        const copy = chunk.slice();
        chain = chain.then(() => w.write(copy));
        return chain;
      },
      commit: async (record) => {
        await chain;
        await w.close();
        await this.#writeRecord(key, { ...record, url });
      },
      abort: async () => {
        await chain.catch(() => {});
        await w.abort().catch(() => {});
        await this.#remove(`${key}.gguf`);
      },
    };
  }

  async #writeRecord(key, record) {
    await writeFile(this.dir, `${key}.json`, JSON.stringify({ ...record, verified: true, stored_at: new Date().toISOString() }));
  }


  async evict(url) {
    const key = await keyOf(url);
    await this.beating.get(key)?.stop();
    await this.#remove(`${key}.json`);
    await this.#remove(`${key}.gguf`);
    for (const m of await this.#markers(key)) await this.#remove(m.name);
  }

  async list() {
    const out = [];
    for await (const [name, handle] of this.dir.entries()) {
      if (!name.endsWith('.json') || handle.kind !== 'file') continue;
      try {
        out.push(JSON.parse(await (await handle.getFile()).text()));
      } catch {
        /* skip unreadable records */
      }
    }
    return out;
  }

  async clear() {
    for (const m of [...this.beating.values()]) await m.stop();
    const names = [];
    for await (const [name] of this.dir.entries()) names.push(name);
    for (const n of names) await this.#remove(n);
  }
}

/** Node: a directory on disk (`fs`, `path` passed in so this module stays browser-safe). */
export class FsCache {
  constructor(fs, path, dir, owner) {
    this.kind = 'fs';
    this.fs = fs;
    this.path = path;
    this.dir = dir;
    this.owner = markerOwner(owner);
    this.beating = new Map();
  }

  static async open(fs, path, dir, owner) {
    await fs.promises.mkdir(dir, { recursive: true });
    return new FsCache(fs, path, dir, owner);
  }

  /** The crash markers of `key`: [{name, text}]. */
  async #markers(key) {
    const out = [];
    for (const name of await this.fs.promises.readdir(this.dir)) {
      if (!isMarkerOf(key, name)) continue;
      try {
        out.push({ name, text: await this.fs.promises.readFile(this.#file(name), 'utf8') });
      } catch {
        /* removed meanwhile */
      }
    }
    return out;
  }

  #file(name) {
    return this.path.join(this.dir, name);
  }

  async lookup(url) {
    const key = await keyOf(url);
    if (await someMarkerDead(() => this.#markers(key), this.owner)) {
      await this.evict(url);
      return { stale: true, reason: CRASHED };
    }
    let record = null;
    try {
      record = JSON.parse(await this.fs.promises.readFile(this.#file(`${key}.json`), 'utf8'));
    } catch {
      /* none */
    }
    if (!validRecord(record, url)) {
      if (record) await this.evict(url);
      return null;
    }
    let size;
    try {
      size = (await this.fs.promises.stat(this.#file(`${key}.gguf`))).size;
    } catch {
      await this.evict(url);
      return null;
    }
    if (size !== record.size) {
      await this.evict(url);
      return { stale: true, reason: `cached file has ${size} bytes, its record says ${record.size}` };
    }
    const p = this.#file(`${key}.gguf`);
    const marker = this.#file(markerName(key, this.owner));
    return {
      record,
      size,
      read: (opts) => readPath(this.fs, p, opts),
      // Written beside, then renamed over: a reader never sees half a marker.
      ...loadMarker(key, url, this.owner, this.beating, async (text) => {
        await this.fs.promises.writeFile(`${marker}.tmp`, text);
        await this.fs.promises.rename(`${marker}.tmp`, marker);
      }, () => this.fs.promises.rm(marker, { force: true })),
    };
  }

  async writer(url) {
    const key = await keyOf(url);
    await this.fs.promises.rm(this.#file(`${key}.json`), { force: true });
    const p = this.#file(`${key}.gguf`);
    const fd = this.fs.openSync(p, 'w');
    let open = true;
    const close = () => {
      if (open) {
        open = false;
        this.fs.closeSync(fd);
      }
    };
    return {
      write: (chunk) => {
        let done = 0;
        while (done < chunk.byteLength) done += this.fs.writeSync(fd, chunk, done, chunk.byteLength - done);
      },
      commit: async (record) => {
        this.fs.fsyncSync(fd);
        close();
        const text = JSON.stringify({ ...record, url, verified: true, stored_at: new Date().toISOString() });
        const tmp = this.#file(`${key}.json.tmp`);
        await this.fs.promises.writeFile(tmp, text);
        await this.fs.promises.rename(tmp, this.#file(`${key}.json`));
      },
      abort: async () => {
        try {
          close();
        } catch {
          /* ignore */
        }
        await this.fs.promises.rm(p, { force: true });
      },
    };
  }

  async evict(url) {
    const key = await keyOf(url);
    await this.beating.get(key)?.stop();
    await this.fs.promises.rm(this.#file(`${key}.json`), { force: true });
    await this.fs.promises.rm(this.#file(`${key}.gguf`), { force: true });
    for (const m of await this.#markers(key)) await this.fs.promises.rm(this.#file(m.name), { force: true });
  }

  async list() {
    const out = [];
    for (const n of await this.fs.promises.readdir(this.dir)) {
      if (!n.endsWith('.json')) continue;
      try {
        out.push(JSON.parse(await this.fs.promises.readFile(this.#file(n), 'utf8')));
      } catch {
        /* skip */
      }
    }
    return out;
  }

  async clear() {
    for (const m of [...this.beating.values()]) await m.stop();
    for (const n of await this.fs.promises.readdir(this.dir)) await this.fs.promises.rm(this.#file(n), { force: true });
  }
}
