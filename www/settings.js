// The page's settings, remembered across reloads in localStorage (this browser only).
// URL parameters override them for one visit and are then remembered too:
//   ?model=<gguf url>  &server=<OpenAI base URL>  &mode=<route mode>  &autoload=1 (not stored)
// A link's server is taken only when it is this machine's (what `./build.sh demo` links to) or
// when the user confirms it: one visit to a crafted link must not send later chats elsewhere.
//
// Two kinds: the page's own (model, KV, memory, routing) and the chat settings, kept per model
// (system prompt, sampling, max tokens, raw): a catalog model starts from its measured defaults
// (catalog.js), any other model from CUSTOM_CHAT.

import { CATALOG, DEFAULT_ENTRY, entryUrl, entryForUrl } from './catalog.js';
import { isLoopbackUrl } from './loopback.js';

const KEY = 'edgellm-demo/settings/v2';

export const DEFAULT_MODEL = entryUrl(DEFAULT_ENTRY);

export const DEFAULTS = Object.freeze({
  model_url: DEFAULT_MODEL,
  kv_tokens: 4096, // the local KV budget in tokens (prompt + answer); also the router's
  kv_dtype: 'f16',
  memory_mb: 0, // 0: no budget
  mode: 'prefer-local',
  private: false,
  server_url: '',
  api_key: '',
});

/** Chat settings for a model outside the catalog: the template decides the system prompt; llama.cpp's sampling defaults, no penalty. */
export const CUSTOM_CHAT = Object.freeze({ raw: false, system: '', temperature: 0.7, top_p: 0.95, min_p: 0.05, repetition_penalty: 1, max_tokens: 256 });
export const CHAT_KEYS = Object.keys(CUSTOM_CHAT);

const MODES = ['local-only', 'prefer-local', 'prefer-remote', 'remote-only'];

/** The KV budget's range in tokens (the settings field's min and max are set from it). */
export const KV_TOKENS = Object.freeze({ min: 16, max: 131072 });

/** Which chat settings a model URL uses: its catalog id, or 'custom' (also for null: a model
 * opened from a local file). */
export const chatKey = (url) => ((url && entryForUrl(url)) || { id: 'custom' }).id;

const entryForKey = (key) => CATALOG.find((e) => e.id === key) || null;

/** The defaults of one chat-settings key (a catalog id or 'custom'). */
export function chatDefaults(key) {
  const e = entryForKey(key);
  return { ...(e ? e.defaults : CUSTOM_CHAT) };
}

function coerce(defaults, s) {
  const out = { ...defaults };
  for (const k of Object.keys(defaults)) {
    if (!s || !(k in s)) continue;
    const d = defaults[k];
    const v = s[k];
    if (typeof d === 'number') {
      const n = Number(v);
      if (v !== '' && v !== null && Number.isFinite(n)) out[k] = n;
    } else if (typeof d === 'boolean') out[k] = v === true || v === 'true' || v === '1' || v === 1;
    else if (typeof v === 'string') out[k] = v;
  }
  return out;
}

/** Coerces stored or typed chat settings to the right types and ranges. */
export function sanitizeChat(s, key = 'custom') {
  const out = coerce(chatDefaults(key), s);
  out.temperature = Math.min(2, Math.max(0, out.temperature));
  out.top_p = Math.min(1, Math.max(0, out.top_p));
  out.min_p = Math.min(1, Math.max(0, out.min_p));
  out.repetition_penalty = Math.min(2, Math.max(1, out.repetition_penalty));
  out.max_tokens = Math.min(4096, Math.max(1, Math.round(out.max_tokens)));
  return out;
}

/** Coerces stored or typed values to the right types; unknown keys are dropped. */
export function sanitize(s) {
  const out = coerce(DEFAULTS, s);
  if (!MODES.includes(out.mode)) out.mode = DEFAULTS.mode;
  if (!['f16', 'q8'].includes(out.kv_dtype)) out.kv_dtype = DEFAULTS.kv_dtype;
  out.kv_tokens = Math.min(KV_TOKENS.max, Math.max(KV_TOKENS.min, Math.round(out.kv_tokens)));
  out.memory_mb = Math.max(0, out.memory_mb);
  out.chat = {};
  const chat = s && typeof s.chat === 'object' && s.chat ? s.chat : {};
  for (const [key, v] of Object.entries(chat)) if (key === 'custom' || entryForKey(key)) out.chat[key] = sanitizeChat(v, key);
  return out;
}

/** The chat settings in force for the model at `url` (by default the chosen model; null: a
 * model opened from a file): its stored ones, or its defaults. */
export function chatSettings(s, url = s.model_url) {
  const key = chatKey(url);
  return s.chat[key] || chatDefaults(key);
}

/** Settings with the chat settings of the model at `url` (as `chatSettings`) replaced by `chat`. */
export function withChat(s, chat, url = s.model_url) {
  const key = chatKey(url);
  return { ...s, chat: { ...s.chat, [key]: sanitizeChat(chat, key) } };
}

/** The stored settings with the URL's overrides; `confirmServer(url)` decides on a link's server
 * that is not this machine's (by default it is refused). */
export function loadSettings(params = new URLSearchParams(location.search), confirmServer = () => false) {
  let stored = {};
  try {
    stored = JSON.parse(localStorage.getItem(KEY) || '{}') || {};
  } catch {
    stored = {};
  }
  const s = sanitize(stored);
  if (params.get('model')) s.model_url = params.get('model');
  const server = params.get('server');
  if (server && server !== s.server_url && (isLoopbackUrl(server) || confirmServer(server))) s.server_url = server;
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
