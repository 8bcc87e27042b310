// The memory gauge: a stacked bar of weights / KV / activations / runtime against the budget,
// estimated and measured side by side, coloured by the pressure level. Fed with the engine's
// memory-ledger snapshot (`engine.on('memory')` / `engine.memory()`):
//
//   { level, budget_bytes, wasm_memory_bytes, high_water_bytes,
//     terms: { weights|kv|activations|runtime: { estimated, measured } },
//     total: { estimated, measured }, load_peak: { estimated, measured } }
//
// Without a ledger (an engine build that has none) it shows only what the engine does report:
// the wasm memory (measured, from status()) and the weights (estimated from the GGUF header),
// and says that the split is not available — no invented figures.
//
// Every figure shown is also in a data-value attribute (raw bytes), for the demo test.

import { fmtBytes } from './format.js';

export const TERMS = ['weights', 'kv', 'activations', 'runtime'];
const LABEL = { weights: 'weights', kv: 'KV cache', activations: 'activations', runtime: 'runtime' };
const num = (v) => typeof v === 'number' && Number.isFinite(v);
const DASH_NONE = '–';

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-')) e.setAttribute(k, String(v));
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

const cell = (value, attrs = {}) => el('td', { 'data-value': num(value) ? value : '', ...attrs }, fmtBytes(value));

function bar(kind, parts, scale, budget) {
  const b = el('div', { class: 'bar', role: 'img' });
  let sum = 0;
  const words = [];
  for (const [term, v] of parts) {
    if (!num(v) || v <= 0) continue;
    sum += v;
    words.push(`${LABEL[term] || term} ${fmtBytes(v)}`);
    b.append(el('span', { class: `seg seg-${term}`, style: `width:${((v / scale) * 100).toFixed(3)}%`, title: `${LABEL[term] || term}: ${fmtBytes(v)}` }));
  }
  if (num(budget) && budget > 0) b.append(el('span', { class: 'budget-mark', style: `left:${Math.min(100, (budget / scale) * 100).toFixed(3)}%` }));
  b.setAttribute('aria-label', `${kind}: ${words.join(', ') || 'nothing yet'}${num(budget) ? `; budget ${fmtBytes(budget)}` : ''}`);
  return { el: b, sum };
}

/** Renders a ledger snapshot into `root`. */
export function renderLedger(root, s) {
  const level = s.level || 'ok';
  root.dataset.ledger = '1';
  root.dataset.level = level;
  root.className = `gauge level-${level}`;
  const est = TERMS.map((t) => [t, s.terms && s.terms[t] ? s.terms[t].estimated : null]);
  const meas = TERMS.map((t) => [t, s.terms && s.terms[t] ? s.terms[t].measured : null]);
  const tEst = s.total && s.total.estimated;
  const tMeas = s.total && s.total.measured;
  const budget = num(s.budget_bytes) ? s.budget_bytes : null;
  const pct = budget && num(tMeas) ? ` · ${((tMeas / budget) * 100).toFixed(tMeas / budget < 0.1 ? 1 : 0)}% of ${fmtBytes(budget)} budget` : budget ? ` · budget ${fmtBytes(budget)}` : ' · no budget';
  const head = el('div', { class: 'gauge-head' }, el('span', { class: `level-pill level-${level}`, 'data-field': 'level' }, level), el('span', { class: 'gauge-sum' }, `${fmtBytes(tMeas)} in use${pct}`));
  // Against the budget (what pressure means), then the split at a scale where every term shows.
  const budgetScale = Math.max(1, ...[budget, tEst, tMeas, s.wasm_memory_bytes].filter(num));
  const splitScale = Math.max(1, ...[tEst, tMeas, ...est.map((x) => x[1]), ...meas.map((x) => x[1])].filter(num));
  const rows = el('div', { class: 'bars' });
  rows.append(el('div', { class: 'bar-row' }, el('span', { class: 'bar-label' }, 'of budget'), bar('measured, against the budget', meas, budgetScale, budget).el));
  for (const [kind, parts] of [
    ['estimated', est],
    ['measured', meas],
  ]) {
    rows.append(el('div', { class: 'bar-row split' }, el('span', { class: 'bar-label' }, kind), bar(kind, parts, splitScale, null).el));
  }
  const legend = el('ul', { class: 'legend' }, ...TERMS.map((t) => el('li', {}, el('span', { class: `swatch seg-${t}` }), LABEL[t])));
  const table = el('table', { class: 'terms' });
  table.append(el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, ''), el('th', { scope: 'col' }, 'estimated'), el('th', { scope: 'col' }, 'measured'))));
  const tb = el('tbody');
  for (const t of TERMS) {
    const v = (s.terms && s.terms[t]) || {};
    tb.append(el('tr', { 'data-term': t }, el('th', { scope: 'row' }, el('span', { class: `swatch seg-${t}` }), LABEL[t]), cell(v.estimated, { 'data-kind': 'estimated' }), cell(v.measured, { 'data-kind': 'measured' })));
  }
  for (const [key, label] of [
    ['total', 'total'],
    ['load_peak', 'load peak'],
  ]) {
    const v = s[key] || {};
    tb.append(el('tr', { 'data-term': key, class: 'sum' }, el('th', { scope: 'row' }, label), cell(v.estimated, { 'data-kind': 'estimated' }), cell(v.measured, { 'data-kind': 'measured' })));
  }
  table.append(tb);
  const fact = (field, label, v, none = DASH_NONE) => [el('dt', {}, label), el('dd', { 'data-field': field, 'data-value': num(v) ? v : '' }, num(v) ? fmtBytes(v) : none)];
  const facts = el('dl', { class: 'facts' }, ...fact('budget_bytes', 'budget', budget, 'none'), ...fact('wasm_memory_bytes', 'wasm memory (what the tab pays)', s.wasm_memory_bytes), ...fact('high_water_bytes', 'high water', s.high_water_bytes));
  root.replaceChildren(head, rows, legend, table, facts);
}

/** Without a ledger: measured wasm memory and the header's weight estimate only. */
export function renderBasic(root, { wasm_memory_bytes, weights_bytes, budget_bytes }) {
  root.dataset.ledger = '0';
  root.dataset.level = '';
  root.className = 'gauge level-none';
  const scale = Math.max(1, ...[wasm_memory_bytes, weights_bytes, budget_bytes].filter(num));
  const rest = num(wasm_memory_bytes) && num(weights_bytes) ? Math.max(0, wasm_memory_bytes - weights_bytes) : null;
  const head = el('div', { class: 'gauge-head' }, el('span', { class: 'gauge-sum' }, `${fmtBytes(wasm_memory_bytes)} of wasm memory${num(budget_bytes) ? ` · budget ${fmtBytes(budget_bytes)}` : ''}`));
  const b = bar(
    'wasm memory',
    [
      ['weights', weights_bytes],
      ['other', rest],
    ],
    scale,
    budget_bytes,
  );
  const rows = el('div', { class: 'bars' }, el('div', { class: 'bar-row' }, el('span', { class: 'bar-label' }, 'wasm'), b.el));
  const facts = el(
    'dl',
    { class: 'facts' },
    el('dt', {}, 'weights (header)'),
    el('dd', { 'data-field': 'weights_bytes', 'data-value': num(weights_bytes) ? weights_bytes : '' }, fmtBytes(weights_bytes)),
    el('dt', {}, 'wasm memory'),
    el('dd', { 'data-field': 'wasm_memory_bytes', 'data-value': num(wasm_memory_bytes) ? wasm_memory_bytes : '' }, fmtBytes(wasm_memory_bytes)),
    el('dt', {}, 'budget'),
    el('dd', { 'data-field': 'budget_bytes', 'data-value': num(budget_bytes) ? budget_bytes : '' }, num(budget_bytes) ? fmtBytes(budget_bytes) : 'none'),
  );
  const note = el('p', { class: 'note' }, 'This engine build reports no per-term memory ledger (KV, activations, runtime): only its wasm memory and the weights’ size from the header.');
  root.replaceChildren(head, rows, facts, note);
}
