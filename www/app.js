// The demo page: load a model by URL or file, chat, show the usage figures.
// It imports the package the way an app would (here straight from ../pkg, no bundler).
// `?model=<url>` pre-fills the URL field; `&autoload=1` loads it at once.
// For tests and the console: `window.edgellmApp` = { engine, state, lastUsage, lastError, lastModel }.

import { createEngine } from '../pkg/src/index.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const app = { engine: null, state: 'starting', lastUsage: null, lastError: null, lastModel: null, progress: [] };
window.edgellmApp = app;

const history = [];
let loadController = null;
let stream = null;

function setState(s) {
  app.state = s;
  document.body.dataset.state = s;
  const ready = s === 'ready';
  $('prompt').disabled = !ready && s !== 'generating';
  $('send').disabled = !ready;
  $('stop').disabled = s !== 'generating';
  $('load-url').disabled = s === 'loading' || s === 'starting' || s === 'generating';
  $('model-file').disabled = $('load-url').disabled;
  $('cancel-load').hidden = s !== 'loading';
}

function status(text, err) {
  const el = $('status');
  el.textContent = text;
  el.className = err ? 'error' : '';
  if (err) el.dataset.code = err.code || 'INTERNAL';
  else delete el.dataset.code;
}

const mb = (n) => (n / 1e6).toFixed(1);
const fmt = (v, unit, digits = 1) => (typeof v === 'number' && Number.isFinite(v) ? `${v.toFixed(digits)} ${unit}` : '–');

// Progress events can come faster than frames: paint at most once per frame.
let pendingProgress = null;
function paintProgress() {
  const p = pendingProgress;
  pendingProgress = null;
  if (!p) return;
  $('progress').value = p.fraction ?? 0;
  $('progress-text').textContent = `${p.phase} ${mb(p.loaded)} / ${p.total ? mb(p.total) : '?'} MB`;
}

async function load(source, label) {
  if (!app.engine) return;
  loadController = new AbortController();
  setState('loading');
  status(`loading ${label}…`);
  $('model-info').textContent = '';
  app.progress = [];
  const t0 = performance.now();
  try {
    const info = await app.engine.load(source, {
      signal: loadController.signal,
      onProgress: (p) => {
        app.progress.push({ phase: p.phase, loaded: p.loaded, total: p.total });
        if (!pendingProgress) requestAnimationFrame(paintProgress);
        pendingProgress = p;
      },
    });
    app.lastModel = info;
    app.lastError = null;
    $('progress').value = 1;
    $('progress-text').textContent = `${mb(info.file_size)} MB`;
    $('model-info').textContent =
      `${info.name} · ${info.architecture} · ${info.quantization ?? '?'} · ${(info.n_params / 1e6).toFixed(0)}M params\n` +
      `${mb(info.file_size)} MB from ${info.source} in ${(info.load_ms / 1000).toFixed(2)} s · sha256 ${info.sha256.slice(0, 16)}…`;
    status(`ready (${((performance.now() - t0) / 1000).toFixed(2)} s)`);
    history.length = 0;
    setState('ready');
  } catch (e) {
    app.lastError = { code: e.code, message: e.message, detail: e.detail };
    status(`${e.code || 'ERROR'}: ${e.message}`, e);
    setState(app.engine.model ? 'ready' : 'empty');
  } finally {
    loadController = null;
  }
}

function bubble(role, text = '') {
  const div = document.createElement('div');
  div.className = `msg ${role}`;
  div.textContent = text;
  $('transcript').append(div);
  return div;
}

function showUsage(u) {
  app.lastUsage = u;
  $('u-prompt').textContent = u ? String(u.prompt_tokens) : '–';
  $('u-completion').textContent = u ? String(u.completion_tokens) : '–';
  $('u-ttft').textContent = u ? fmt(u.ttft_ms, 'ms', 0) : '–';
  $('u-tpot').textContent = u ? fmt(u.tpot_ms, 'ms', 1) : '–';
  $('u-prefill').textContent = u ? fmt(u.prefill_tokens_per_s, 'tok/s') : '–';
  $('u-decode').textContent = u ? fmt(u.decode_tokens_per_s, 'tok/s') : '–';
}

async function send() {
  const text = $('prompt').value;
  if (!text.trim() || app.state !== 'ready') return;
  $('prompt').value = '';
  const raw = $('raw').checked;
  const max_tokens = Number($('max-tokens').value) || 128;
  const temperature = Number($('temperature').value);
  bubble('user', text);
  const out = bubble('assistant');
  const node = document.createTextNode('');
  out.append(node);
  setState('generating');
  showUsage(null);
  let reply = '';
  try {
    const common = { stream: true, max_tokens, temperature, stream_options: { include_usage: true } };
    stream = raw
      ? await app.engine.completions.create({ prompt: text, ...common })
      : await app.engine.chat.completions.create({ messages: [...history, { role: 'user', content: text }], ...common });
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      const delta = c ? (raw ? c.text : c.delta.content) : '';
      if (delta) {
        reply += delta;
        node.appendData(delta);
      }
      if (chunk.usage) showUsage(chunk.usage);
    }
    if (!raw) history.push({ role: 'user', content: text }, { role: 'assistant', content: reply });
    status('ready');
  } catch (e) {
    app.lastError = { code: e.code, message: e.message, detail: e.detail };
    if (e.code === 'ABORTED') {
      out.append(document.createTextNode(' [stopped]'));
      status('stopped');
    } else {
      out.classList.add('error');
      out.append(document.createTextNode(`${e.code}: ${e.message}`));
      status(`${e.code}: ${e.message}`, e);
    }
  } finally {
    stream = null;
    setState(app.engine.model ? 'ready' : 'empty');
  }
}

$('url-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const url = $('model-url').value.trim();
  if (url) load(url, url);
});
$('model-file').addEventListener('change', () => {
  const f = $('model-file').files[0];
  if (f) load(f, f.name);
});
$('cancel-load').addEventListener('click', () => loadController && loadController.abort());
$('chat-form').addEventListener('submit', (e) => {
  e.preventDefault();
  send();
});
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    send();
  }
});
$('stop').addEventListener('click', () => stream && stream.abort());
$('clear').addEventListener('click', () => {
  history.length = 0;
  $('transcript').textContent = '';
  showUsage(null);
});

$('model-url').value = params.get('model') || '';
setState('starting');
status('starting the engine…');
createEngine({ onCrash: (e) => status(`engine crashed and restarted: ${e.message}`, e) })
  .then((engine) => {
    app.engine = engine;
    status(`engine ${engine.info.version} ready (SIMD ${engine.info.simd ? 'on' : 'off'}, cache: ${engine.info.cache}) — load a model`);
    setState('empty');
    if (params.get('autoload') && $('model-url').value) load($('model-url').value, $('model-url').value);
  })
  .catch((e) => {
    app.lastError = { code: e.code, message: e.message };
    status(`${e.code}: ${e.message}`, e);
    setState('failed');
  });
