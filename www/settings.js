// The page's settings, remembered across reloads in localStorage (this browser only).
// URL parameters override them for one visit and are then remembered too:
//   ?model=<gguf url>  &server=<OpenAI base URL>  &mode=<route mode>  &autoload=1 (not stored)

const KEY = 'edgellm-demo/settings/v1';

export const DEFAULT_MODEL = new URL('../models/gemma-3-270m-q4_k_m.gguf', import.meta.url).pathname;

export const DEFAULTS = Object.freeze({
  model_url: DEFAULT_MODEL,
  temperature: 0.7,
  top_p: 0.95,
  max_tokens: 128,
  kv_tokens: 4096, // the local KV budget in tokens (prompt + answer); also the router's
  kv_dtype: 'f16',
  memory_mb: 0, // 0: no budget
  raw: false,
  system: '',
  mode: 'prefer-local',
  private: false,
  server_url: '',
  api_key: '',
});

const MODES = ['local-only', 'prefer-local', 'prefer-remote', 'remote-only'];

/** Coerces stored or typed values to the right types; unknown keys are dropped. */
export function sanitize(s) {
  const out = { ...DEFAULTS };
  for (const k of Object.keys(DEFAULTS)) {
    if (!(k in s)) continue;
    const d = DEFAULTS[k];
    const v = s[k];
    if (typeof d === 'number') {
      const n = Number(v);
      if (v !== '' && v !== null && Number.isFinite(n)) out[k] = n;
    } else if (typeof d === 'boolean') out[k] = v === true || v === 'true' || v === '1' || v === 1;
    else if (typeof v === 'string') out[k] = v;
  }
  if (!MODES.includes(out.mode)) out.mode = DEFAULTS.mode;
  if (!['f16', 'q8'].includes(out.kv_dtype)) out.kv_dtype = DEFAULTS.kv_dtype;
  out.temperature = Math.min(2, Math.max(0, out.temperature));
  out.top_p = Math.min(1, Math.max(0, out.top_p));
  out.max_tokens = Math.max(1, Math.round(out.max_tokens));
  out.kv_tokens = Math.max(16, Math.round(out.kv_tokens));
  out.memory_mb = Math.max(0, out.memory_mb);
  return out;
}

export function loadSettings(params = new URLSearchParams(location.search)) {
  let stored = {};
  try {
    stored = JSON.parse(localStorage.getItem(KEY) || '{}') || {};
  } catch {
    stored = {};
  }
  const s = sanitize(stored);
  if (params.get('model')) s.model_url = params.get('model');
  if (params.get('server')) s.server_url = params.get('server');
  if (params.get('mode') && MODES.includes(params.get('mode'))) s.mode = params.get('mode');
  return s;
}

export function saveSettings(s) {
  try {
    localStorage.setItem(KEY, JSON.stringify(s));
  } catch {
    /* storage full or disabled: settings last for this visit */
  }
}
