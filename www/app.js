// The demo page: a private chat with a model that runs in this tab, and the engine's numbers in
// plain sight. It imports the package the way an app would (here straight from ../pkg, no
// bundler, no framework).
//
//   ?model=<url> pre-fills the model URL, &autoload=1 loads it at once, &server=<base URL> and
//   &mode=<route mode> set the router (see settings.js).
//
// For tests and the console: window.edgellmApp = { engine, state, settings, lastUsage, lastRoute,
// lastMemory, lastError, lastModel, lastReply, progress, ledger, offlineReady }.

// A namespace import: optional exports (defaultMemoryBudget) are used when the package has them.
import * as edgellm from '../pkg/src/index.js';
import { StreamRenderer } from './markdown.js';
import { RateChart } from './chart.js';
import { renderLedger, renderBasic } from './gauge.js';
import { loadSettings, saveSettings, sanitize, DEFAULTS } from './settings.js';
import { fmtMs, fmtTpot, fmtRate, fmtInt, fmtBytes, fmtSpeed, fmtDuration, routeText, targetText, DASH } from './format.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
let settings = loadSettings(params);
saveSettings(settings);

const app = {
  engine: null,
  state: 'starting',
  settings,
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
};
window.edgellmApp = app;

const chart = new RateChart($('tps-chart'), $('tps-summary'));
app.chart = chart;
const turns = []; // { user, assistant: string|null, userEl, block }
let current = null; // the running request: { ac, stream }
let loadController = null;
let lastSource = null; // what was loaded last (URL string or File), for "apply and reload"
let loadedOpts = null; // the load options (memory budget, KV) the current model was loaded with

// ── state and status ──────────────────────────────────────────────────────────────────────
const remoteUsable = () => !!settings.server_url.trim() && settings.mode !== 'local-only' && !settings.private && navigator.onLine !== false;

function setState(s) {
  app.state = s;
  document.body.dataset.state = s;
  const canSend = s === 'ready' || (s === 'empty' && remoteUsable());
  const busy = s === 'loading' || s === 'starting' || s === 'generating';
  $('prompt').disabled = !(canSend || s === 'generating');
  $('prompt').placeholder = canSend || s === 'generating' ? 'Message (Enter sends)' : s === 'loading' ? 'Loading the model…' : 'Load a model to start…';
  $('send').disabled = !canSend;
  $('stop').disabled = s !== 'generating';
  $('regenerate').disabled = !canSend || !turns.length;
  $('load-url').disabled = busy;
  $('estimate').disabled = busy;
  $('model-file').disabled = busy;
  $('cancel-load').hidden = s !== 'loading';
}

function status(text, err) {
  const el = $('status');
  el.textContent = text;
  el.classList.toggle('error', !!err);
  if (err) el.dataset.code = err.code || 'INTERNAL';
  else delete el.dataset.code;
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
  app.ledger = typeof engine.on === 'function' && typeof engine.memory === 'function';
  if (app.ledger) {
    engine.on('memory', (s) => {
      if (app.engine === engine) showMemory(s);
    });
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
  const budget = Math.min(settings.kv_tokens, (app.engine && app.engine.model && app.engine.model.max_context) || Infinity);
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

async function load(source, label) {
  if (!app.engine) return;
  loadController = new AbortController();
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
    if (typeof source === 'string') {
      settings.model_url = source;
      saveSettings(settings);
    }
    pendingProgress = null; // a frame still pending must not repaint the finished bar
    $('progress').value = 1;
    $('progress-text').textContent = `${fmtBytes(info.file_size)} in ${(info.load_ms / 1000).toFixed(1)} s`;
    $('progress-speed').textContent = info.load_ms > 0 ? fmtSpeed((info.file_size / info.load_ms) * 1000) : '';
    $('progress-eta').textContent = '';
    paintModel(info);
    app.kvSupported = !!info.kv;
    if (info.kv) showKv(null, info.kv);
    status(`Ready in ${((performance.now() - t0) / 1000).toFixed(1)} s. Ask something.`);
    setState('ready');
    engineNote();
    refreshMemory();
    checkOffline();
    $('prompt').focus();
  } catch (e) {
    app.lastError = errInfo(e);
    status(`${e.code || 'ERROR'}: ${e.message}`, e);
    setState(app.engine && app.engine.model ? 'ready' : 'empty');
  } finally {
    loadController = null;
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

function paintModel(info) {
  $('model-info').hidden = false;
  $('model-name').textContent = info.name;
  const params = info.n_params ? `${info.n_params >= 1e9 ? (info.n_params / 1e9).toFixed(1) + 'B' : Math.round(info.n_params / 1e6) + 'M'} params` : null;
  $('model-facts').textContent = [info.architecture, info.quantization, params, fmtBytes(info.file_size), `context ${info.max_context}`, `loaded in ${(info.load_ms / 1000).toFixed(1)} s`].filter(Boolean).join(' · ');
  const tag = $('model-source');
  tag.hidden = false;
  tag.dataset.source = info.source;
  tag.textContent = info.source === 'cache' ? 'loaded from cache' : info.source === 'file' ? 'from a local file' : app.engine.info.cache !== 'none' ? 'downloaded · now cached' : 'downloaded';
}

// ── chat ──────────────────────────────────────────────────────────────────────────────────
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function scrollDown(force) {
  const t = $('transcript');
  if (force || t.scrollHeight - t.scrollTop - t.clientHeight < 80) t.scrollTop = t.scrollHeight;
}

function messagesFor(turn) {
  const msgs = [];
  if (settings.system.trim()) msgs.push({ role: 'system', content: settings.system.trim() });
  for (const t of turns) {
    if (t === turn) break;
    if (t.assistant === null || t.raw) continue; // a failed turn is left out of the context
    msgs.push({ role: 'user', content: t.user }, { role: 'assistant', content: t.assistant });
  }
  msgs.push({ role: 'user', content: turn.user });
  return msgs;
}

function badge(route, offline) {
  const b = el('span', `badge route ${route.target || 'none'}`);
  b.textContent = routeText(route) + (offline ? ' · offline' : '');
  b.dataset.target = route.target || '';
  b.dataset.reason = route.reason;
  if (route.fallback_from) {
    b.dataset.fallbackFrom = route.fallback_from;
    if (route.error) b.title = `${route.fallback_from} failed first: ${route.error.code} ${route.error.message}`;
  }
  return b;
}

function answerFigures(u) {
  return `TTFT ${fmtMs(u.ttft_ms)} · TPOT ${fmtTpot(u.tpot_ms)} · prefill ${fmtRate(u.prefill_tokens_per_s)} · decode ${fmtRate(u.decode_tokens_per_s)} · ${u.completion_tokens} tokens`;
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
  set('u-prompt', u && fmtInt(u.prompt_tokens), u && u.prompt_tokens);
  set('u-completion', u && fmtInt(u.completion_tokens), u && u.completion_tokens);
  const rb = $('metrics-route');
  if (u && route) {
    rb.hidden = false;
    rb.textContent = route.target === 'remote' ? 'on the server' : 'on this device';
    rb.className = `badge route ${route.target === 'remote' ? 'remote' : 'local'}`;
  } else rb.hidden = true;
}

function send() {
  const text = $('prompt').value;
  if (!text.trim() || $('send').disabled) return;
  $('prompt').value = '';
  const turn = { user: text, assistant: null, raw: settings.raw };
  turn.userEl = el('div', 'msg user', text);
  $('welcome').hidden = true;
  $('transcript').append(turn.userEl);
  turns.push(turn);
  run(turn);
}

function regenerate() {
  const turn = turns[turns.length - 1];
  if (!turn || $('regenerate').disabled) return;
  if (turn.block) turn.block.remove();
  turn.assistant = null;
  run(turn);
}

async function run(turn) {
  const raw = turn.raw;
  const block = el('div', 'answer');
  const out = el('div', 'msg assistant');
  out.setAttribute('aria-busy', 'true');
  const meta = el('div', 'meta');
  const routeSlot = el('span', 'route-slot');
  const figures = el('span', 'figures');
  meta.append(routeSlot, figures);
  block.append(out, meta);
  turn.block = block;
  $('transcript').append(block);
  scrollDown(true);
  const renderer = raw ? null : new StreamRenderer(out);
  const plain = raw ? document.createTextNode('') : null;
  if (plain) out.append(plain);
  out.classList.add('pending');

  setState('generating');
  let charted = false; // the chart keeps the previous answer until this one's first token
  const offline = navigator.onLine === false;
  const ac = new AbortController();
  current = { ac, stream: null };
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
  try {
    const common = {
      stream: true,
      max_tokens: settings.max_tokens,
      temperature: settings.temperature,
      top_p: settings.top_p,
      stream_options: { include_usage: true },
      private: settings.private,
      signal: ac.signal,
    };
    const stream = raw
      ? await app.engine.completions.create({ prompt: turn.user, ...common })
      : await app.engine.chat.completions.create({ messages: messagesFor(turn), ...common });
    current.stream = stream;
    for await (const chunk of stream) {
      showRoute(chunk.route);
      const c = chunk.choices && chunk.choices[0];
      const delta = c ? (raw ? c.text : c.delta && c.delta.content) : '';
      if (delta) {
        if (!reply) out.classList.remove('pending');
        reply += delta;
        if (plain) plain.appendData(delta);
        else renderer.push(delta);
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
    if (renderer) renderer.end();
    turn.assistant = reply;
    app.lastReply = reply;
    app.lastError = null;
    if (usage) {
      figures.textContent = answerFigures(usage);
      showUsage(usage, route);
      if (!route || route.target === 'local') showKv(usage);
    }
    if (finish === 'length') meta.append(el('span', 'flag', 'max tokens reached'));
    if (streamError) {
      meta.append(el('span', 'flag error', `${streamError.code}: ${streamError.message}`));
      status(`The answer broke off: ${streamError.code}`, streamError);
    } else status(route && route.target === 'remote' ? 'Answered by the server.' : 'Answered on this device.');
  } catch (e) {
    if (renderer) renderer.end();
    app.lastError = errInfo(e);
    if (e.route) showRoute(e.route);
    if (e.code === 'ABORTED') {
      turn.assistant = reply; // the partial answer stays in the conversation
      app.lastReply = reply;
      meta.append(el('span', 'flag', 'stopped'));
      status('Stopped.');
    } else {
      block.classList.add('error');
      out.dataset.code = e.code || 'INTERNAL';
      const box = el('div', 'error-box');
      box.append(el('strong', 'code', e.code || 'ERROR'), document.createTextNode(` ${e.message}`));
      if (e.detail) box.append(el('span', 'detail', ` (${e.detail})`));
      out.append(box);
      status(`${e.code || 'ERROR'}: ${e.message}`, e);
    }
  } finally {
    out.classList.remove('pending');
    out.removeAttribute('aria-busy');
    current = null;
    setState(app.engine && app.engine.model ? 'ready' : 'empty');
    scrollDown();
    refreshMemory();
  }
}

function stop() {
  if (!current) return;
  current.ac.abort();
  if (current.stream) current.stream.abort();
}

function clearChat() {
  if (current) stop();
  turns.length = 0;
  for (const n of [...$('transcript').children]) if (n.id !== 'welcome') n.remove();
  $('welcome').hidden = false;
  setState(app.state);
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

// ── settings form ─────────────────────────────────────────────────────────────────────────
const FIELDS = [
  ['temperature', 'temperature'],
  ['top-p', 'top_p'],
  ['max-tokens', 'max_tokens'],
  ['kv-tokens', 'kv_tokens'],
  ['kv-dtype', 'kv_dtype'],
  ['memory-mb', 'memory_mb'],
  ['system', 'system'],
  ['server-url', 'server_url'],
  ['api-key', 'api_key'],
];

function paintSettings() {
  for (const [id, key] of FIELDS) $(id).value = String(settings[key]);
  $('raw').checked = settings.raw;
  $('private').checked = settings.private;
  const radio = document.querySelector(`input[name=mode][value="${settings.mode}"]`);
  if (radio) radio.checked = true;
}

function readSettings() {
  const s = { ...settings };
  for (const [id, key] of FIELDS) s[key] = $(id).value;
  s.raw = $('raw').checked;
  s.private = $('private').checked;
  const m = document.querySelector('input[name=mode]:checked');
  if (m) s.mode = m.value;
  return sanitize(s);
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
  engineNote();
}

function bindSettings() {
  paintSettings();
  for (const [id] of FIELDS) {
    $(id).addEventListener('input', onSettingsInput);
    $(id).addEventListener('change', () => {
      onSettingsInput();
      paintSettings();
    });
  }
  for (const id of ['raw', 'private']) $(id).addEventListener('change', onSettingsInput);
  for (const r of document.querySelectorAll('input[name=mode]')) r.addEventListener('change', onSettingsInput);
  $('reset-settings').addEventListener('click', () => {
    settings = sanitize({ ...DEFAULTS, model_url: settings.model_url });
    app.settings = settings;
    saveSettings(settings);
    paintSettings();
    applyRoute();
    engineNote();
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
$('model-url').value = settings.model_url;
setState('starting');
status('Starting the engine…');
if ('serviceWorker' in navigator) {
  navigator.serviceWorker.register('sw.js').catch((e) => status(`Offline mode unavailable: ${e.message}`));
}
startEngine()
  .then(async (engine) => {
    if (app.ledger) refreshMemory();
    if (params.get('autoload') && settings.model_url) {
      load(settings.model_url, settings.model_url); // straight to 'loading': no idle state between
      return;
    }
    setState('empty');
    let cached = false;
    try {
      const want = new URL(settings.model_url, location.href).href;
      cached = engine.info.cache !== 'none' && (await engine.cache.list()).some((e) => e.url === want);
    } catch {
      /* no cache: a download */
    }
    status(cached ? 'The model is in this browser’s cache: it loads without the network.' : 'Engine ready. Load a model: it is downloaded once, then kept in this browser.');
    checkOffline();
  })
  .catch((e) => {
    app.lastError = errInfo(e);
    status(`${e.code || 'ERROR'}: ${e.message}`, e);
    setState('failed');
  });
