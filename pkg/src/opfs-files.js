// Small file operations on an OPFS directory handle, shared by the model cache (cache.js) and
// the saved conversations (sessions.js), so both write the same way everywhere: through
// `createWritable` where the browser has it, else through a sync access handle (workers in
// browsers that lack `createWritable`).

/** Reads `name` as JSON; null when it is absent or not JSON. */
export async function readJson(dir, name) {
  try {
    return JSON.parse(await (await (await dir.getFileHandle(name)).getFile()).text());
  } catch {
    return null;
  }
}

/** Replaces `name` with `data` (a string or bytes). */
export async function writeFile(dir, name, data) {
  const fh = await dir.getFileHandle(name, { create: true });
  if (typeof fh.createWritable === 'function') {
    const w = await fh.createWritable({ keepExistingData: false });
    await w.write(data);
    await w.close();
  } else {
    const h = await fh.createSyncAccessHandle();
    h.truncate(0);
    h.write(typeof data === 'string' ? new TextEncoder().encode(data) : data, { at: 0 });
    h.flush();
    h.close();
  }
}

/** Removes `name`; true when it was there. */
export async function removeFile(dir, name) {
  try {
    await dir.removeEntry(name);
    return true;
  } catch {
    return false;
  }
}
