// Saved conversations, in localStorage (this browser only; text is small next to its quota).
// A conversation is { id, title, created, updated, turns: [{ user, assistant, raw, usage,
// route, finish, flag }] }: `assistant` null = no answer (failed, or not asked yet). The
// list and which one is open survive a reload. Every change is written at once.

const KEY = 'edgellm-demo/conversations/v1';
const TITLE_MAX = 60;

function randomId() {
  const b = new Uint8Array(9);
  crypto.getRandomValues(b);
  return 'c' + Array.from(b, (x) => x.toString(36).padStart(2, '0')).join('');
}

/** A title from the first message: its first line, shortened at a word. */
export function titleFrom(text) {
  const line = (text || '').trim().split('\n')[0].replace(/\s+/g, ' ');
  if (line.length <= TITLE_MAX) return line || 'New conversation';
  const cut = line.slice(0, TITLE_MAX);
  return `${cut.slice(0, cut.lastIndexOf(' ') > 20 ? cut.lastIndexOf(' ') : TITLE_MAX).trimEnd()}…`;
}

const validTurn = (t) => t && typeof t.user === 'string' && (t.assistant === null || typeof t.assistant === 'string');

export class ConversationStore {
  constructor(storage = globalThis.localStorage) {
    this.storage = storage;
    this.items = []; // newest first
    this.openId = null;
    this.#read();
  }

  #read() {
    let data = null;
    try {
      data = JSON.parse(this.storage.getItem(KEY) || 'null');
    } catch {
      data = null; // unreadable: start afresh rather than fail the page
    }
    if (!data || !Array.isArray(data.items)) return;
    this.items = data.items
      .filter((c) => c && typeof c.id === 'string' && Array.isArray(c.turns))
      .map((c) => ({ id: c.id, title: typeof c.title === 'string' ? c.title : 'Conversation', titled: !!c.titled, created: c.created || 0, updated: c.updated || 0, turns: c.turns.filter(validTurn) }));
    this.openId = this.items.some((c) => c.id === data.open) ? data.open : null;
  }

  #write() {
    try {
      this.storage.setItem(KEY, JSON.stringify({ open: this.openId, items: this.items }));
      return true;
    } catch {
      return false; // quota or disabled storage: kept for this visit
    }
  }

  get(id) {
    return this.items.find((c) => c.id === id) || null;
  }

  get open() {
    return this.get(this.openId);
  }

  create() {
    const now = Date.now();
    const c = { id: randomId(), title: 'New conversation', titled: false, created: now, updated: now, turns: [] };
    this.items.unshift(c);
    this.openId = c.id;
    this.#write();
    return c;
  }

  select(id) {
    if (!this.get(id)) return null;
    this.openId = id;
    this.#write();
    return this.open;
  }

  rename(id, title) {
    const c = this.get(id);
    const t = (title || '').trim().slice(0, 120);
    if (!c || !t) return false;
    c.title = t;
    c.titled = true;
    this.#write();
    return true;
  }

  delete(id) {
    const i = this.items.findIndex((c) => c.id === id);
    if (i < 0) return false;
    this.items.splice(i, 1);
    if (this.openId === id) this.openId = this.items.length ? this.items[0].id : null;
    this.#write();
    return true;
  }

  /** Saves a conversation's turns (its title follows the first message unless renamed); newest first. */
  save(c) {
    c.updated = Date.now();
    if (!c.titled && c.turns.length) c.title = titleFrom(c.turns[0].user);
    const i = this.items.indexOf(c);
    if (i > 0) {
      this.items.splice(i, 1);
      this.items.unshift(c);
    }
    return this.#write();
  }
}
