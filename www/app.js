// The demo page: a private chat with a model that runs in this tab, and the engine's numbers in
// plain sight. It imports the package the way an app would (here straight from ../pkg, no
// bundler, no framework).
//
//   ?model=<url> pre-fills the model, &autoload=1 loads it at once, &server=<base URL> and
//   &mode=<route mode> set the router (see settings.js).
//
// Models: the catalog (catalog.js, drawn by catalog-view.js) or any GGUF by URL or file; the
// chosen one is remembered and, when it is in the browser's cache, loaded again at start.
// Conversations (conversations.js) are saved in this browser; the open one comes back after a
// reload. With the engine's session API (engine.session, where the package has it) the open
// conversation's KV cache is saved after each answer and restored after a reload.
//
// For tests and the console: window.edgellmApp = { engine, state, settings, store, lastUsage,
// lastRoute, lastMemory, lastError, lastModel, lastReply, progress, ledger, offlineReady, meter,
// session }.

// A namespace import: optional exports (defaultMemoryBudget) are used when the package has them.
import * as edgellm from '../pkg/src/index.js';
import { RateChart } from './chart.js';
import { renderLedger, renderBasic } from './gauge.js';
import { loadSettings, saveSettings, sanitize, chatSettings, withChat, chatDefaults, chatKey, CHAT_KEYS, KV_TOKENS } from './settings.js';
import { CATALOG, entryUrl, entryForUrl } from './catalog.js';
import { CatalogView } from './catalog-view.js';
import { ConversationStore } from './conversations.js';
import { userBubble, answerBlock, answerFigures, badge, energyBadge, reusedTokens, el } from './transcript.js';
import { fmtMs, fmtTpot, fmtRate, fmtInt, fmtBytes, fmtSpeed, fmtDuration, DASH, sustainedText } from './format.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
let settings = loadSettings(params, (url) => window.confirm(`This link asks to send your chats that are not marked Private to ${url}. Allow it?`));
saveSettings(settings);
const store = new ConversationStore();
let conv = store.open || store.create();

const app = {
  engine: null,
  state: 'starting',
  settings,
  store,
  lastUsage: null,
  lastRoute: null,
  lastMemory: null,
  lastError: null,
  lastModel: null,
  lastReply: null,
  progress: [],
  ledger: false,
  kvSupported: false,
  offlineReady: false,
  chart: null,
  meter: null, // { tokens, budget, source: 'usage' | 'count' }
  session: { saved: null, restored: null, error: null }, // the engine.session calls and their outcome
};
window.edgellmApp = app;

const chart = new RateChart($('tps-chart'), $('tps-summary'));
app.chart = chart;
const views = new Map(); // turn → { user: HTMLElement, answer: answerBlock api }
let current = null; // the running request: { ac, stream, conv }
let loadController = null;
let lastSource = null; // what was loaded last (URL string or File), for "apply and reload"
let loadedOpts = null; // the load options (memory budget, KV) the current model was loaded with
let loadedEntry = null; // the catalog entry loaded now (null: another model or none)

/** The URL whose chat settings (and catalog mark) apply: the chosen model's, or null while a
 * model opened from a local file is loaded — it takes the custom settings, not those of the
 * model last chosen by URL. */
function chatUrl() {
  return lastSource && typeof lastSource !== 'string' && app.engine && app.engine.model ? null : settings.model_url;
}

// ── state and status ──────────────────────────────────────────────────────────────────────
const remoteUsable = () => !!settings.server_url.trim() && settings.mode !== 'local-only' && !settings.private && navigator.onLine !== false;
const idle = () => app.state === 'ready' || (app.state === 'empty' && remoteUsable());

function setState(s) {
  app.state = s;
  document.body.dataset.state = s;
  const canSend = idle();
  const busy = s === 'loading' || s === 'starting' || s === 'generating';
  $('prompt').disabled = !(canSend || s === 'generating');
  $('prompt').placeholder = canSend || s === 'generating' ? 'Message (Enter sends)' : s === 'loading' ? 'Loading the model…' : 'Choose a model to start…';
  $('send').disabled = !canSend;
  $('stop').disabled = s !== 'generating';
  $('regenerate').disabled = !canSend || !conv.turns.length;
  $('load-url').disabled = busy;
  $('estimate').disabled = busy;
  $('model-file').disabled = busy;
  $('cancel-load').hidden = s !== 'loading';
  $('cache-clear').disabled = busy;
  $('conv-new').disabled = s === 'generating';
  catalogView.setBusy(busy);
  document.body.classList.toggle('can-act', canSend);
}

function status(text, err) {
  const e = $('status');
  e.textContent = text;
  e.classList.toggle('error', !!err);
  if (err) e.dataset.code = err.code || 'INTERNAL';
  else delete e.dataset.code;
}

const errInfo = (e) => ({ code: (e && e.code) || 'INTERNAL', message: (e && e.message) || String(e), detail: e && e.detail });

// ── engine ──────────────────────────────────────────────────────────────────────────────
// The memory budget and the KV cache options go with each load (they size the session), so a
// change takes effect when the model is loaded again.
// With the memory ledger (engine.setMemoryOptions) the budget applies at once instead.
const liveBudget = () => !!(app.engine && typeof app.engine.setMemoryOptions === 'function');
const budgetBytes = () => (settings.memory_mb > 0 ? Math.round(settings.memory_mb * 1e6) : undefined);

function wantedLoadOpts() {
  return {
    memoryBudget: liveBudget() ? undefined : budgetBytes(),
    kv: { tokens: settings.kv_tokens, dtype: settings.kv_dtype },
  };
}

/** The ledger's budget: the setting, or the package's default for this device (0 in the setting). */
async function applyMemoryBudget() {
  if (!liveBudget()) return;
  const want = budgetBytes() ?? (typeof edgellm.defaultMemoryBudget === 'function' ? edgellm.defaultMemoryBudget() : undefined);
  if (!want || (app.engine.memoryOptions && app.engine.memoryOptions.budget_bytes === want)) return;
  try {
    showMemory(await app.engine.setMemoryOptions({ budget_bytes: want }));
  } catch (e) {
    status(`${e.code || 'ERROR'}: ${e.message}`, e);
  }
}
const sameOpts = (a, b) => JSON.stringify(a) === JSON.stringify(b);

function routeOptions() {
  const offline = navigator.onLine === false;
  const url = settings.server_url.trim();
  const local = { maxContextTokens: settings.kv_tokens };
  if (!url || offline) return { mode: settings.mode === 'remote-only' && !offline ? 'remote-only' : 'local-only', local };
  return { mode: settings.mode, remote: { baseURL: url, ...(settings.api_key ? { apiKey: settings.api_key } : {}) }, local };
}

function applyRoute() {
  if (app.engine) {
    try {
      app.engine.setRoute(routeOptions());
    } catch (e) {
      status(`${e.code || 'ERROR'}: ${e.message}`, e);
    }
  }
  paintWhere();
  if (app.state === 'empty' || app.state === 'ready') setState(app.state);
}

async function startEngine() {
  const engine = await edgellm.createEngine({
    // The worker starts from www/ so that the page's service worker controls it (offline).
    workerUrl: new URL('engine-worker.js', import.meta.url),
    ...(budgetBytes() ? { memory: { budget_bytes: budgetBytes() } } : {}),
    route: routeOptions(),
    onCrash: (e) => status(`The engine crashed and was restarted: ${e.message}`, e),
  });
  app.engine = engine;
  $('estimate').hidden = typeof engine.estimate !== 'function';
  for (const row of catalogView.rows.values()) row.fit.hidden = typeof engine.estimate !== 'function';
  app.ledger = typeof engine.on === 'function' && typeof engine.memory === 'function';
  if (app.ledger) {
    engine.on('memory', (s) => {
      if (app.engine === engine) showMemory(s);
    });
  }
  // Compute pressure and the sustained decode speed (usage.compute; older packages lack both).
  if (typeof engine.pressure === 'function') {
    engine.on('pressure', () => {
      if (app.engine === engine) paintPressure();
    });
    paintPressure();
  }
  paintEngineInfo();
  return engine;
}

function paintEngineInfo() {
  const e = app.engine;
  const parts = [];
  const simd = e && e.info ? e.info.simd_tier || (e.info.simd ? 'on' : e.info.simd === false ? 'off' : '?') : '?';
  if (e && e.info) parts.push(`edgellm ${e.info.version}`, `SIMD ${simd}`, `model cache: ${e.info.cache}`);
  parts.push(`cross-origin isolated: ${self.crossOriginIsolated ? 'yes' : 'no'}`);
  parts.push(app.offlineReady ? 'offline: ready' : 'offline: not yet');
  if (e && e.session) parts.push('conversation resume: yes');
  $('engine-info').textContent = parts.join(' · ');
}

// ── memory and KV ─────────────────────────────────────────────────────────────────────────
function showMemory(s) {
  if (!s) return;
  app.lastMemory = s;
  renderLedger($('memory'), s);
}

/** After a load or a request: the ledger's latest snapshot, or (no ledger) what status() reports. */
async function refreshMemory() {
  const engine = app.engine;
  if (!engine) return;
  try {
    if (app.ledger) {
      showMemory(typeof engine.refreshMemory === 'function' ? await engine.refreshMemory() : engine.memory());
      return;
    }
    const st = await engine.status();
    if (app.engine !== engine) return;
    app.lastMemory = null;
    renderBasic($('memory'), {
      wasm_memory_bytes: st.wasm_memory_bytes,
      weights_bytes: st.model ? st.model.weights_bytes : null,
      budget_bytes: loadedOpts && loadedOpts.memoryBudget ? loadedOpts.memoryBudget : null,
    });
  } catch {
    /* the engine is restarting: the next event repaints */
  }
}

/** The local KV budget in tokens: the setting, capped by the model's context. */
const kvBudget = () => Math.min(settings.kv_tokens, (app.engine && app.engine.model && app.engine.model.max_context) || Infinity);

/** KV occupancy: the engine's own figures (usage.kv / model.kv) when it reports them. */
function showKv(usage, kvStats) {
  const kv = kvStats || (usage && usage.kv);
  const root = $('kv');
  const note = $('kv-note');
  if (kv) {
    root.dataset.source = 'engine';
    $('kv-held-label').textContent = 'tokens held';
    $('kv-held').textContent = `${fmtInt(kv.tokens_held)}${kv.budget_tokens ? ` / ${fmtInt(kv.budget_tokens)}` : ''}`;
    $('kv-held').dataset.value = String(kv.tokens_held);
    $('kv-evicted').textContent = fmtInt(kv.evicted);
    $('kv-evicted').dataset.value = String(kv.evicted);
    $('kv-budget').textContent = `${fmtBytes(kv.bytes)} of ${fmtBytes(kv.budget_bytes)}${kv.dtype ? ` · ${kv.dtype}` : ''}`;
    $('kv-budget').dataset.value = String(kv.budget_bytes);
    const f = kv.budget_bytes ? kv.bytes / kv.budget_bytes : 0;
    $('kv-fill').style.width = `${Math.min(100, f * 100).toFixed(2)}%`;
    note.textContent = kv.policy === 'window-sinks' ? `When full, the first ${kv.sinks} tokens and the most recent ones stay; older ones are evicted.` : '';
    note.hidden = !note.textContent;
    return;
  }
  if (!usage) return;
  // This engine build reports no KV occupancy: show the positions the answer used, which is what
  // its cache held at the end, against the budget the router enforces.
  const held = usage.prompt_tokens + usage.completion_tokens;
  const budget = kvBudget();
  root.dataset.source = 'usage';
  $('kv-held-label').textContent = 'positions used';
  $('kv-held').textContent = fmtInt(held);
  $('kv-held').dataset.value = String(held);
  $('kv-evicted').textContent = DASH;
  $('kv-evicted').dataset.value = '';
  $('kv-budget').textContent = `${fmtInt(budget)} tokens`;
  $('kv-budget').dataset.value = '';
  $('kv-fill').style.width = `${Math.min(100, (held / budget) * 100).toFixed(2)}%`;
  note.textContent = 'Occupancy from the answer’s token counts: this engine build does not report its KV cache (bytes, evictions).';
  note.hidden = false;
}

// ── the token meter: this conversation against the KV budget ─────────────────────────────
function paintMeter(tokens, source) {
  const budget = kvBudget();
  const m = $('meter');
  if (typeof tokens !== 'number' || !Number.isFinite(budget)) {
    app.meter = null;
    m.dataset.tokens = '';
    m.dataset.budget = Number.isFinite(budget) ? String(budget) : '';
    $('meter-text').textContent = Number.isFinite(budget) ? `– of ${fmtInt(budget)} tokens` : DASH;
    $('meter-fill').style.width = '0%';
    m.classList.remove('near', 'over');
    return;
  }
  app.meter = { tokens, budget, source };
  m.dataset.tokens = String(tokens);
  m.dataset.budget = String(budget);
  m.dataset.source = source;
  const f = tokens / budget;
  $('meter-text').textContent = `${fmtInt(tokens)} of ${fmtInt(budget)} tokens`;
  $('meter-fill').style.width = `${Math.min(100, f * 100).toFixed(2)}%`;
  m.classList.toggle('near', f >= 0.75 && f < 1);
  m.classList.toggle('over', f >= 1);
}

/** The whole conversation as chat messages (what the next request would extend). */
function historyMessages(upTo) {
  const msgs = [];
  const system = chatSettings(settings, chatUrl()).system.trim();
  if (system) msgs.push({ role: 'system', content: system });
  for (const t of conv.turns) {
    if (t === upTo) break;
    if (t.assistant === null || t.raw) continue; // a failed turn is left out of the context
    msgs.push({ role: 'user', content: t.user }, { role: 'assistant', content: t.assistant });
  }
  return msgs;
}

let meterSeq = 0;
/** Counts the conversation's tokens with the engine (chat template applied), when it is idle. */
async function countMeter() {
  const seq = ++meterSeq;
  const engine = app.engine;
  const msgs = historyMessages(null);
  if (!engine || !engine.model || typeof engine.countTokens !== 'function' || !msgs.some((m) => m.role === 'user')) {
    paintMeter(msgs.some((m) => m.role === 'user') ? null : 0, 'count');
    return;
  }
  if (app.state !== 'ready') return;
  try {
    const r = await engine.countTokens({ messages: msgs });
    if (seq === meterSeq && typeof r.prompt_tokens === 'number') paintMeter(r.prompt_tokens, 'count');
  } catch {
    /* no count (engine restarting): the next answer's usage repaints */
  }
}

// ── conversation resume (engine.session, feature-detected) ────────────────────────────────
const SESSION_SKIP = ['SESSION_NOT_FOUND', 'SESSION_MISMATCH', 'SESSION_CORRUPT'];
const hasSession = (name) => !!(app.engine && app.engine.session && typeof app.engine.session[name] === 'function');

async function sessionCall(name, id) {
  if (!hasSession(name)) return false;
  try {
    await app.engine.session[name](id);
    app.session[name === 'save' ? 'saved' : name === 'restore' ? 'restored' : 'deleted'] = id;
    return true;
  } catch (e) {
    // Not found / another model or KV setting / a damaged entry: the next request prefills.
    app.session.error = errInfo(e);
    if (!SESSION_SKIP.includes(e && e.code)) status(`Conversation resume (${name}): ${e.code || 'ERROR'}: ${e.message}`);
    return false;
  }
}

// ── loading ───────────────────────────────────────────────────────────────────────────────
const PHASE = { download: 'Downloading', cache: 'Reading from this browser’s cache', file: 'Reading the file' };
let pendingProgress = null;
let speedSamples = [];

function paintProgress() {
  const p = pendingProgress;
  pendingProgress = null;
  if (!p) return;
  const t = performance.now();
  speedSamples.push({ t, loaded: p.loaded, phase: p.phase });
  speedSamples = speedSamples.filter((s) => s.phase === p.phase && t - s.t <= 2000);
  const first = speedSamples[0];
  const speed = t - first.t > 200 ? ((p.loaded - first.loaded) / (t - first.t)) * 1000 : null;
  $('progress').value = p.fraction ?? 0;
  $('progress').setAttribute('aria-valuetext', `${PHASE[p.phase] || p.phase}: ${fmtBytes(p.loaded)} of ${p.total ? fmtBytes(p.total) : 'unknown'}`);
  $('progress-text').textContent = `${PHASE[p.phase] || p.phase} ${fmtBytes(p.loaded)} / ${p.total ? fmtBytes(p.total) : '?'}`;
  $('progress-speed').textContent = speed ? fmtSpeed(speed) : '';
  $('progress-eta').textContent = speed && p.total ? `ETA ${fmtDuration((p.total - p.loaded) / speed)}` : '';
}

/** Loads a URL (a catalog entry's or any) or a File. */
async function load(source, label) {
  if (!app.engine) return;
  if (current) stop();
  loadController = new AbortController();
  const entry = typeof source === 'string' ? entryForUrl(source) : null;
  setState('loading');
  status(`Loading ${label}…`);
  app.progress = [];
  speedSamples = [];
  $('load-progress').hidden = false;
  $('progress').value = 0;
  $('progress-text').textContent = '';
  $('progress-speed').textContent = '';
  $('progress-eta').textContent = '';
  $('model-info').hidden = true;
  $('estimate-result').hidden = true;
  const t0 = performance.now();
  try {
    const opts = wantedLoadOpts();
    const info = await app.engine.load(source, {
      ...opts,
      ...(entry ? { sha256: entry.sha256 } : {}),
      signal: loadController.signal,
      onProgress: (p) => {
        app.progress.push({ phase: p.phase, loaded: p.loaded, total: p.total });
        if (!pendingProgress) requestAnimationFrame(paintProgress);
        pendingProgress = p;
      },
    });
    app.lastModel = info;
    app.lastError = null;
    lastSource = source;
    loadedOpts = opts;
    loadedEntry = entry;
    if (typeof source === 'string') {
      settings.model_url = source;
      saveSettings(settings);
    }
    pendingProgress = null; // a frame still pending must not repaint the finished bar
    $('progress').value = 1;
    $('progress-text').textContent = `${fmtBytes(info.file_size)} in ${(info.load_ms / 1000).toFixed(1)} s`;
    $('progress-speed').textContent = info.load_ms > 0 ? fmtSpeed((info.file_size / info.load_ms) * 1000) : '';
    $('progress-eta').textContent = '';
    paintModel(info, entry);
    paintSettings();
    paintCatalogChoice();
    app.kvSupported = !!info.kv;
    if (info.kv) showKv(null, info.kv);
    // The catalog's "cached" marks are painted before the page says ready, so a ready page
    // never shows a model it just stored as not cached.
    await refreshCache();
    status(`Ready in ${((performance.now() - t0) / 1000).toFixed(1)} s. Ask something.`);
    setState('ready');
    engineNote();
    refreshMemory();
    checkOffline();
    await countMeter();
    if (conv.turns.length) await sessionCall('restore', conv.id);
    $('prompt').focus();
  } catch (e) {
    app.lastError = errInfo(e);
    status(`${e.code || 'ERROR'}: ${e.message}`, e);
    const still = app.engine && app.engine.model;
    $('load-progress').hidden = true;
    if (still) {
      // Refused before the engine replaced the loaded model (an unreachable URL, not a GGUF,
      // over the budget, cancelled while the header was read): it is still there.
      paintModel(still, loadedEntry, { fold: false }); // the catalog stays open for another try
    } else {
      // Failed after the engine freed the old model: the header and the model's facts must
      // not go on naming it.
      $('model-summary').textContent = 'no model loaded: choose one to start';
      $('model-info').hidden = true;
      loadedEntry = null;
    }
    paintSettings(); // a file model kept, or none left: whose chat settings apply follows it
    setState(still ? 'ready' : 'empty');
  } finally {
    loadController = null;
    paintCatalogChoice();
  }
}

/** engine.estimate(): every memory term of a model from its header alone (a few MB read). */
async function estimateFit() {
  const url = $('model-url').value.trim();
  const out = $('estimate-result');
  if (!url || !app.engine || typeof app.engine.estimate !== 'function') return;
  out.hidden = false;
  out.className = 'estimate';
  out.textContent = 'Reading the model’s header…';
  try {
    const e = await app.engine.estimate(url, { kv: wantedLoadOpts().kv });
    const t = e.terms;
    out.dataset.peak = String(e.peak);
    out.dataset.fits = String(e.fits);
    out.classList.add(e.fits ? 'fits' : 'no-fit');
    out.textContent =
      `Needs about ${fmtBytes(e.peak)} here (weights ${fmtBytes(t.weights)} · KV ${fmtBytes(t.kv)} · activations ${fmtBytes(t.activations)} · runtime ${fmtBytes(t.runtime)})` +
      (e.budget_bytes ? ` — ${e.fits ? 'fits' : 'does not fit'} the ${fmtBytes(e.budget_bytes)} budget.` : '.');
  } catch (err) {
    out.classList.add('no-fit');
    out.textContent = `${err.code || 'ERROR'}: ${err.message}`;
  }
}

function paintModel(info, entry, { fold = true } = {}) {
  $('model-info').hidden = false;
  $('model-name').textContent = entry ? entry.name : info.name;
  const p = info.n_params ? `${info.n_params >= 1e9 ? (info.n_params / 1e9).toFixed(1) + 'B' : Math.round(info.n_params / 1e6) + 'M'} params` : null;
  $('model-facts').textContent = [entry ? entry.kind : null, info.architecture, info.quantization, p, fmtBytes(info.file_size), `context ${info.max_context}`, `loaded in ${(info.load_ms / 1000).toFixed(1)} s`].filter(Boolean).join(' · ');
  const tag = $('model-source');
  tag.hidden = false;
  tag.dataset.source = info.source;
  tag.textContent = info.source === 'cache' ? 'loaded from cache' : info.source === 'file' ? 'from a local file' : app.engine.info.cache !== 'none' ? 'downloaded · now cached' : 'downloaded';
  $('model-summary').textContent = `${entry ? entry.name : info.name} · ${entry ? entry.kind : 'custom'} · loaded`;
  // Once a model runs, the catalog folds away to give the conversation the room.
  if (fold && (window.matchMedia('(max-width: 900px)').matches || entry)) $('catalog').open = false;
}

// ── the catalog ───────────────────────────────────────────────────────────────────────────
const catalogView = new CatalogView($('catalog-list'), {
  onLoad: (entry) => load(entryUrl(entry), entry.name),
  onFit: fitEntry,
  onDelete: deleteEntry,
});

function paintCatalogChoice() {
  const url = chatUrl();
  const chosen = url && entryForUrl(url);
  catalogView.paintChoice(chosen ? chosen.id : null, loadedEntry && app.engine && app.engine.model ? loadedEntry.id : null);
}

async function refreshCache() {
  if (!app.engine) return [];
  try {
    const list = app.engine.info.cache !== 'none' ? await app.engine.cache.list() : [];
    catalogView.paintCache(list, $('cache-usage'));
    return list;
  } catch {
    return [];
  }
}

async function fitEntry(entry) {
  if (!app.engine || typeof app.engine.estimate !== 'function') return;
  catalogView.paintFit(entry, null);
  try {
    catalogView.paintFit(entry, await app.engine.estimate(entryUrl(entry), { kv: wantedLoadOpts().kv }));
  } catch (e) {
    catalogView.paintFit(entry, null, e);
  }
}

async function deleteEntry(entry) {
  try {
    await app.engine.cache.delete(entryUrl(entry));
    status(`${entry.name} was deleted from this browser’s storage${loadedEntry === entry && app.engine.model ? ' (it stays loaded until the page closes)' : ''}.`);
  } catch (e) {
    status(`${e.code || 'ERROR'}: ${e.message}`, e);
  }
  await refreshCache();
  checkOffline();
}

async function clearCache() {
  try {
    await app.engine.cache.clear();
    status('Every cached model was deleted from this browser’s storage.');
  } catch (e) {
    status(`${e.code || 'ERROR'}: ${e.message}`, e);
  }
  await refreshCache();
  checkOffline();
}

// ── conversations ─────────────────────────────────────────────────────────────────────────
function paintConversations() {
  const list = $('conv-list');
  list.replaceChildren();
  for (const c of store.items) {
    const li = el('li', 'conv');
    li.dataset.id = c.id;
    li.classList.toggle('open', c.id === conv.id);
    const open = el('button', 'conv-open', c.title);
    open.type = 'button';
    open.title = c.title;
    if (c.id === conv.id) open.setAttribute('aria-current', 'true');
    open.addEventListener('click', () => switchTo(c.id));
    const rename = el('button', 'tool conv-rename', 'Rename');
    rename.type = 'button';
    rename.setAttribute('aria-label', `Rename “${c.title}”`);
    rename.addEventListener('click', () => renameConversation(c, li, open));
    const del = el('button', 'tool conv-delete', 'Delete');
    del.type = 'button';
    del.setAttribute('aria-label', `Delete “${c.title}”`);
    del.addEventListener('click', () => deleteConversation(c.id));
    li.append(open, rename, del);
    list.append(li);
  }
  $('chat-h').textContent = conv.title;
}

function renameConversation(c, li, open) {
  const input = el('input', 'conv-rename-input');
  input.type = 'text';
  input.value = c.title;
  input.setAttribute('aria-label', 'New name');
  const done = (commit) => {
    if (commit && input.value.trim()) store.rename(c.id, input.value);
    paintConversations();
  };
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') done(true);
    else if (e.key === 'Escape') done(false);
  });
  input.addEventListener('blur', () => done(true));
  open.replaceWith(input);
  input.focus();
  input.select();
}

async function switchTo(id) {
  if (id === conv.id) return;
  if (current) stop();
  const c = store.select(id);
  if (!c) return;
  conv = c;
  renderConversation();
  await countMeter();
  if (app.engine && app.engine.model && conv.turns.length) await sessionCall('restore', conv.id);
}

function newConversation() {
  if (current) stop();
  const empty = store.items.find((c) => !c.turns.length);
  conv = empty ? store.select(empty.id) : store.create();
  renderConversation();
  paintMeter(0, 'count');
  $('prompt').focus();
}

async function deleteConversation(id) {
  if (current && current.conv.id === id) stop();
  store.delete(id);
  await sessionCall('delete', id);
  conv = store.open || store.create();
  renderConversation();
  await countMeter();
}

/** Draws the open conversation from its stored turns. */
function renderConversation() {
  views.clear();
  for (const n of [...$('transcript').children]) if (n.id !== 'welcome') n.remove();
  $('welcome').hidden = conv.turns.length > 0;
  for (const t of conv.turns) {
    addTurnView(t);
    if (t.assistant !== null || t.error) views.get(t).answer.fill();
  }
  paintConversations();
  setState(app.state);
  scrollDown(true);
}

function addTurnView(turn) {
  const user = userBubble(turn, { onEdit: (text) => editTurn(turn, text), canEdit: idle });
  $('transcript').append(user);
  const answer = answerBlock(turn, { onRegenerate: () => regenerateTurn(turn), canRegenerate: idle });
  views.set(turn, { user, answer });
  $('transcript').append(answer.block);
  return views.get(turn);
}

/** Drops the turns after `turn` (their DOM too): an edit or a regenerate replaces them. */
function truncateAfter(turn) {
  const i = conv.turns.indexOf(turn);
  for (const t of conv.turns.slice(i + 1)) {
    const v = views.get(t);
    if (v) {
      v.user.remove();
      v.answer.block.remove();
      views.delete(t);
    }
  }
  conv.turns.length = i + 1;
}

function editTurn(turn, text) {
  if (!idle()) return;
  truncateAfter(turn);
  turn.user = text;
  const v = views.get(turn);
  const fresh = userBubble(turn, { onEdit: (t) => editTurn(turn, t), canEdit: idle });
  v.user.replaceWith(fresh);
  v.user = fresh;
  store.save(conv);
  paintConversations();
  run(turn);
}

function regenerateTurn(turn) {
  if (!idle()) return;
  truncateAfter(turn);
  run(turn);
}

// ── chat ──────────────────────────────────────────────────────────────────────────────────
function scrollDown(force) {
  const t = $('transcript');
  if (force || t.scrollHeight - t.scrollTop - t.clientHeight < 80) t.scrollTop = t.scrollHeight;
}

function showUsage(u, route) {
  app.lastUsage = u;
  const m = $('metrics');
  m.dataset.usage = u ? JSON.stringify(u) : '';
  const set = (id, text, v) => {
    $(id).textContent = u ? text : DASH;
    $(id).dataset.value = u && typeof v === 'number' ? String(v) : '';
  };
  set('u-ttft', u && fmtMs(u.ttft_ms), u && u.ttft_ms);
  set('u-tpot', u && fmtTpot(u.tpot_ms), u && u.tpot_ms);
  set('u-prefill', u && fmtRate(u.prefill_tokens_per_s), u && u.prefill_tokens_per_s);
  set('u-decode', u && fmtRate(u.decode_tokens_per_s), u && u.decode_tokens_per_s);
  const reused = reusedTokens(u);
  set('u-prompt', u && (reused !== null ? `${fmtInt(u.prompt_tokens)} (${fmtInt(reused)} reused)` : fmtInt(u.prompt_tokens)), u && u.prompt_tokens);
  set('u-completion', u && fmtInt(u.completion_tokens), u && u.completion_tokens);
  const rb = $('metrics-route');
  if (u && route) {
    rb.hidden = false;
    rb.textContent = route.target === 'remote' ? 'on the server' : 'on this device';
    rb.className = `badge route ${route.target === 'remote' ? 'remote' : 'local'}`;
  } else rb.hidden = true;
}

/** The numbers panel's pressure state and the sustained/peak ratio of the last long answer. */
function paintPressure(u) {
  const e = app.engine;
  if (!e || typeof e.pressure !== 'function') return;
  const p = e.pressure();
  const seen = u && u.compute && u.compute.pressure ? u.compute.pressure.state : null;
  const pr = $('u-pressure');
  pr.textContent = p.supported ? (seen && seen !== p.state ? `${p.state} (worst ${seen})` : p.state) : 'unknown (no API)';
  pr.dataset.value = p.state;
  const s = $('u-sustained');
  s.textContent = sustainedText(p.last_long);
  s.dataset.value = p.last_long && typeof p.last_long.ratio === 'number' ? String(p.last_long.ratio) : '';
}

function send() {
  const text = $('prompt').value;
  if (!text.trim() || $('send').disabled) return;
  $('prompt').value = '';
  const turn = { user: text, assistant: null, raw: chatSettings(settings, chatUrl()).raw };
  $('welcome').hidden = true;
  conv.turns.push(turn);
  addTurnView(turn);
  store.save(conv);
  paintConversations();
  run(turn);
}

function regenerate() {
  const turn = conv.turns[conv.turns.length - 1];
  if (turn && !$('regenerate').disabled) regenerateTurn(turn);
}

/** What is kept of an answer's usage in the saved conversation (figures, reuse, route). */
function keptUsage(u) {
  if (!u) return null;
  const keep = ['prompt_tokens', 'completion_tokens', 'ttft_ms', 'tpot_ms', 'prefill_tokens_per_s', 'decode_tokens_per_s', 'prompt_tokens_details'];
  const out = Object.fromEntries(keep.filter((k) => u[k] !== undefined).map((k) => [k, u[k]]));
  // The energy badge's figures (not the windows or pressure: they describe that moment).
  if (u.compute) out.compute = { cpu_ms: u.compute.cpu_ms, energy_j: u.compute.energy_j, watts_per_busy_core: u.compute.watts_per_busy_core, cpu_clock: u.compute.cpu_clock };
  return out;
}

/** Whether `turn`'s request must stay on this device: Private is on, or (a chat, which sends
 * the earlier turns along) an earlier turn was sent while it was. A turn sent under Private is
 * marked so (and stored so): switching Private off later does not let it leave. */
function staysLocal(turn) {
  if (settings.private) turn.private = true;
  if (turn.private) return true;
  return !turn.raw && conv.turns.slice(0, conv.turns.indexOf(turn)).some((t) => t.private);
}

async function run(turn) {
  const chat = chatSettings(settings, chatUrl());
  const raw = turn.raw;
  const v = views.get(turn) || addTurnView(turn);
  // A fresh answer block in place of the old one (regenerate, edit).
  const answer = answerBlock(turn, { onRegenerate: () => regenerateTurn(turn), canRegenerate: idle });
  v.answer.block.replaceWith(answer.block);
  v.answer = answer;
  const { out, meta, routeSlot, figures } = answer;
  out.setAttribute('aria-busy', 'true');
  answer.start();
  out.classList.add('pending');
  turn.assistant = null;
  delete turn.usage;
  delete turn.route;
  delete turn.flag;
  delete turn.flagError;
  delete turn.error;
  scrollDown(true);

  setState('generating');
  let charted = false; // the chart keeps the previous answer until this one's first token
  const offline = navigator.onLine === false;
  const ac = new AbortController();
  const runConv = conv;
  current = { ac, stream: null, conv: runConv };
  let reply = '';
  let usage = null;
  let route = null;
  let finish = null;
  let streamError = null;
  const showRoute = (r) => {
    if (!r || route) return;
    route = r;
    app.lastRoute = r;
    routeSlot.replaceChildren(badge(r, offline));
  };
  const flag = (text, isError) => {
    turn.flag = text;
    turn.flagError = !!isError;
    answer.flag(text, isError);
  };
  try {
    const common = {
      stream: true,
      max_tokens: chat.max_tokens,
      temperature: chat.temperature,
      top_p: chat.top_p,
      min_p: chat.min_p,
      repetition_penalty: chat.repetition_penalty,
      stream_options: { include_usage: true },
      private: staysLocal(turn),
      signal: ac.signal,
    };
    const stream = raw
      ? await app.engine.completions.create({ prompt: turn.user, ...common })
      : await app.engine.chat.completions.create({ messages: [...historyMessages(turn), { role: 'user', content: turn.user }], ...common });
    current.stream = stream;
    for await (const chunk of stream) {
      showRoute(chunk.route);
      const c = chunk.choices && chunk.choices[0];
      const delta = c ? (raw ? c.text : c.delta && c.delta.content) : '';
      if (delta) {
        if (!reply) out.classList.remove('pending');
        reply += delta;
        answer.push(delta);
        if (!charted) {
          chart.reset();
          charted = true;
        }
        chart.tick();
        scrollDown();
      }
      if (c && c.finish_reason) finish = c.finish_reason;
      if (chunk.error) streamError = chunk.error;
      if (chunk.usage) usage = chunk.usage;
    }
    answer.end();
    turn.assistant = reply;
    turn.finish = finish;
    app.lastReply = reply;
    app.lastError = null;
    if (route) turn.route = { target: route.target, reason: route.reason, ...(route.fallback_from ? { fallback_from: route.fallback_from } : {}) };
    if (usage) {
      turn.usage = keptUsage(usage);
      figures.textContent = answerFigures(usage);
      answer.energySlot.replaceChildren(...[energyBadge(usage)].filter(Boolean));
      showUsage(usage, route);
      paintPressure(usage);
      if (!route || route.target === 'local') showKv(usage);
      // At once from the usage (the prompt and the answer); the engine's count of the whole
      // conversation, template included, replaces it once the engine is idle (finally below).
      if (!raw) paintMeter(usage.prompt_tokens + usage.completion_tokens, 'usage');
    }
    if (finish === 'length') flag('max tokens reached');
    if (streamError) {
      flag(`${streamError.code}: ${streamError.message}`, true);
      status(`The answer broke off: ${streamError.code}`, streamError);
    } else status(route && route.target === 'remote' ? 'Answered by the server.' : 'Answered on this device.');
  } catch (e) {
    answer.end();
    app.lastError = errInfo(e);
    if (e.route) showRoute(e.route);
    if (e.code === 'ABORTED') {
      turn.assistant = reply; // the partial answer stays in the conversation
      app.lastReply = reply;
      flag('stopped');
      status('Stopped.');
    } else {
      turn.error = { code: e.code || 'INTERNAL', message: e.message, ...(e.detail ? { detail: e.detail } : {}) };
      answer.error(turn.error);
      status(`${e.code || 'ERROR'}: ${e.message}`, e);
    }
  } finally {
    out.classList.remove('pending');
    out.removeAttribute('aria-busy');
    current = null;
    store.save(runConv);
    setState(app.engine && app.engine.model ? 'ready' : 'empty');
    scrollDown();
    refreshMemory();
  }
  if (runConv === conv && !raw) await countMeter();
  // The conversation's KV cache, for a resume after a reload (local answers only).
  if (turn.assistant !== null && (!route || route.target === 'local') && runConv === conv) await sessionCall('save', runConv.id);
}

function stop() {
  if (!current) return;
  current.ac.abort();
  if (current.stream) current.stream.abort();
}

function clearChat() {
  if (current) stop();
  conv.turns.length = 0;
  store.save(conv);
  renderConversation();
  paintMeter(0, 'count');
  $('prompt').focus();
}

// ── routing pill ──────────────────────────────────────────────────────────────────────────
function paintWhere() {
  const pill = $('where-pill');
  const url = settings.server_url.trim();
  let text;
  let cls;
  if (settings.private) [text, cls] = ['Private · nothing leaves this device', 'local'];
  else if (navigator.onLine === false) [text, cls] = ['Offline · this device only', 'local'];
  else if (!url || settings.mode === 'local-only') [text, cls] = ['Local · nothing leaves this device', 'local'];
  else if (settings.mode === 'prefer-local') [text, cls] = ['This device first · server when needed', 'mixed'];
  else if (settings.mode === 'prefer-remote') [text, cls] = ['Server first · this device as fallback', 'remote'];
  else [text, cls] = ['Server only', 'remote'];
  pill.textContent = text;
  pill.className = `pill pill-${cls}`;
}

// ── offline readiness ─────────────────────────────────────────────────────────────────────
async function checkOffline() {
  if (!('serviceWorker' in navigator) || !self.caches) return;
  try {
    await navigator.serviceWorker.ready;
    const need = [new URL('../pkg/wasm/edgellm_bg.wasm', import.meta.url), new URL('engine-worker.js', import.meta.url), new URL('app.js', import.meta.url)];
    const shell = (await Promise.all(need.map((u) => caches.match(u.href)))).every(Boolean);
    let model = false;
    if (app.engine && app.engine.info && app.engine.info.cache !== 'none') {
      const list = await app.engine.cache.list();
      const want = settings.model_url ? new URL(settings.model_url, location.href).href : null;
      model = list.some((e) => e.url === want);
    }
    app.offlineReady = shell && model;
    document.body.dataset.offlineReady = app.offlineReady ? '1' : '0';
    $('offline-pill').hidden = !app.offlineReady;
    paintEngineInfo();
  } catch {
    /* no service worker (private window, file://): online only */
  }
}

// ── settings forms ────────────────────────────────────────────────────────────────────────
// The page's own settings, and the chat settings of the chosen model (settings.js).
const FIELDS = [
  ['kv-tokens', 'kv_tokens'],
  ['kv-dtype', 'kv_dtype'],
  ['memory-mb', 'memory_mb'],
  ['server-url', 'server_url'],
  ['api-key', 'api_key'],
];
const CHAT_FIELDS = [
  ['system', 'system'],
  ['temperature', 'temperature'],
  ['top-p', 'top_p'],
  ['min-p', 'min_p'],
  ['repetition-penalty', 'repetition_penalty'],
  ['max-tokens', 'max_tokens'],
];

function paintSettings() {
  for (const [id, key] of FIELDS) $(id).value = String(settings[key]);
  const chat = chatSettings(settings, chatUrl());
  for (const [id, key] of CHAT_FIELDS) $(id).value = String(chat[key]);
  $('raw').checked = chat.raw;
  $('private').checked = settings.private;
  const radio = document.querySelector(`input[name=mode][value="${settings.mode}"]`);
  if (radio) radio.checked = true;
  const url = chatUrl();
  const entry = url && entryForUrl(url);
  $('settings-for').textContent = `for ${entry ? entry.name : 'this model'}`;
}

function readSettings() {
  let s = { ...settings };
  for (const [id, key] of FIELDS) s[key] = $(id).value;
  s.private = $('private').checked;
  const m = document.querySelector('input[name=mode]:checked');
  if (m) s.mode = m.value;
  s = sanitize(s);
  const chat = {};
  for (const [id, key] of CHAT_FIELDS) chat[key] = $(id).value;
  chat.raw = $('raw').checked;
  for (const k of CHAT_KEYS) if (!(k in chat)) chat[k] = chatSettings(settings, chatUrl())[k];
  return withChat(s, chat, chatUrl());
}

function engineNote() {
  const changed = !!(app.engine && app.engine.model && loadedOpts && !sameOpts(loadedOpts, wantedLoadOpts()));
  const note = $('engine-note');
  const kvNote = app.engine && app.engine.model && !app.kvSupported ? 'This engine build takes no KV options: the KV budget only steers the router.' : '';
  note.textContent = [changed ? `The ${liveBudget() ? '' : 'memory budget and '}KV options take effect when the model is loaded again.` : '', kvNote].filter(Boolean).join(' ');
  note.hidden = !note.textContent;
  $('engine-apply').hidden = !(changed && lastSource && app.state === 'ready');
}

function onSettingsInput() {
  const before = settings;
  settings = readSettings();
  app.settings = settings;
  saveSettings(settings);
  const routeKeys = ['mode', 'server_url', 'api_key', 'kv_tokens', 'private'];
  if (routeKeys.some((k) => before[k] !== settings[k])) applyRoute();
  if (before.memory_mb !== settings.memory_mb) applyMemoryBudget();
  if (before.kv_tokens !== settings.kv_tokens && app.meter) paintMeter(app.meter.tokens, app.meter.source);
  if (chatSettings(before, chatUrl()).system !== chatSettings(settings, chatUrl()).system) countMeter();
  engineNote();
}

function bindSettings() {
  Object.assign($('kv-tokens'), { min: String(KV_TOKENS.min), max: String(KV_TOKENS.max) });
  paintSettings();
  for (const [id] of [...FIELDS, ...CHAT_FIELDS]) {
    $(id).addEventListener('input', onSettingsInput);
    $(id).addEventListener('change', () => {
      onSettingsInput();
      paintSettings();
    });
  }
  for (const id of ['raw', 'private']) $(id).addEventListener('change', onSettingsInput);
  for (const r of document.querySelectorAll('input[name=mode]')) r.addEventListener('change', onSettingsInput);
  $('reset-settings').addEventListener('click', () => {
    settings = withChat(settings, chatDefaults(chatKey(chatUrl())), chatUrl());
    app.settings = settings;
    saveSettings(settings);
    paintSettings();
    countMeter();
  });
  $('engine-apply').addEventListener('click', () => {
    if (lastSource) load(lastSource, typeof lastSource === 'string' ? lastSource : lastSource.name);
  });
}

// ── events ────────────────────────────────────────────────────────────────────────────────
$('url-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const url = $('model-url').value.trim();
  if (url) load(url, url);
});
$('model-file').addEventListener('change', () => {
  const f = $('model-file').files[0];
  if (f) load(f, f.name);
});
$('routing-form').addEventListener('submit', (e) => e.preventDefault());
$('estimate').addEventListener('click', estimateFit);
$('cancel-load').addEventListener('click', () => loadController && loadController.abort());
$('cache-clear').addEventListener('click', clearCache);
$('conv-new').addEventListener('click', newConversation);
$('chat-form').addEventListener('submit', (e) => {
  e.preventDefault();
  send();
});
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
});
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && current) {
    e.preventDefault();
    stop();
  }
});
$('stop').addEventListener('click', stop);
$('regenerate').addEventListener('click', regenerate);
$('clear').addEventListener('click', clearChat);
for (const chip of document.querySelectorAll('.chip')) {
  chip.addEventListener('click', () => {
    $('prompt').value = chip.textContent;
    $('prompt').focus();
  });
}
window.addEventListener('online', applyRoute);
window.addEventListener('offline', applyRoute);

// Drop a .gguf anywhere on the page.
let dragDepth = 0;
const hasFiles = (e) => e.dataTransfer && [...e.dataTransfer.types].includes('Files');
document.addEventListener('dragenter', (e) => {
  if (!hasFiles(e)) return;
  dragDepth++;
  $('drop-overlay').hidden = false;
});
document.addEventListener('dragleave', () => {
  if (--dragDepth <= 0) {
    dragDepth = 0;
    $('drop-overlay').hidden = true;
  }
});
document.addEventListener('dragover', (e) => {
  if (hasFiles(e)) e.preventDefault();
});
document.addEventListener('drop', (e) => {
  if (!hasFiles(e)) return;
  e.preventDefault();
  dragDepth = 0;
  $('drop-overlay').hidden = true;
  const f = e.dataTransfer.files[0];
  if (!f) return;
  if (['loading', 'starting', 'generating'].includes(app.state)) return status('Busy: drop the file again when the engine is idle.');
  load(f, f.name);
});

// ── start ─────────────────────────────────────────────────────────────────────────────────
bindSettings();
paintWhere();
renderConversation();
paintCatalogChoice();
paintMeter(conv.turns.length ? null : 0, 'count');
$('model-url').value = entryForUrl(settings.model_url) ? '' : settings.model_url;
setState('starting');
status('Starting the engine…');
if ('serviceWorker' in navigator) {
  navigator.serviceWorker.register('sw.js').catch((e) => status(`Offline mode unavailable: ${e.message}`));
}
startEngine()
  .then(async (engine) => {
    if (app.ledger) refreshMemory();
    const list = await refreshCache();
    const want = settings.model_url ? new URL(settings.model_url, location.href).href : null;
    // A chosen catalog model comes back by itself when it is in this browser (no network
    // needed); any other model (a URL typed once) waits for its Load button.
    const cached = engine.info.cache !== 'none' && !!entryForUrl(settings.model_url) && list.some((e) => e.url === want);
    if (want && (params.get('autoload') || cached)) {
      load(settings.model_url, entryForUrl(settings.model_url)?.name || settings.model_url); // straight to 'loading'
      return;
    }
    setState('empty');
    status(`Engine ready. Choose a model: it is downloaded once, then kept in this browser. ${CATALOG[0].name} is the one for chat.`);
    checkOffline();
  })
  .catch((e) => {
    app.lastError = errInfo(e);
    status(`${e.code || 'ERROR'}: ${e.message}`, e);
    setState('failed');
  });
