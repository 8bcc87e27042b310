// The model catalog in the page: one row per catalog entry (catalog.js) with its facts, a
// "cached" mark from the engine's cache (engine.cache.list), "Will it fit?" (engine.estimate:
// the header only), Load and Delete (engine.cache.delete), plus the storage the cache takes
// and Clear all (engine.cache.clear). The page passes callbacks; this file only draws.

import { CATALOG, entryUrl } from './catalog.js';
import { fmtBytes } from './format.js';

const ctxText = (n) => (n >= 1024 ? `${Math.round(n / 1024)}k` : String(n));

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

export class CatalogView {
  /**
   * @param {HTMLElement} list  the <ul> of entries
   * @param {{ onLoad(entry), onFit(entry), onDelete(entry) }} actions
   */
  constructor(list, actions) {
    this.list = list;
    this.rows = new Map();
    for (const entry of CATALOG) {
      const li = el('li', 'cat-entry');
      li.dataset.entry = entry.id;
      li.dataset.kind = entry.kind;
      const head = el('div', 'cat-head');
      const name = el('span', 'cat-name', entry.name);
      const kind = el('span', `tag kind-${entry.kind}`, entry.kind);
      kind.title = entry.kind === 'chat' ? 'Instruction-tuned: for chat' : 'Base model: continues text (raw completion)';
      const cached = el('span', 'tag cat-cached', 'cached');
      cached.hidden = true;
      const loaded = el('span', 'tag cat-loaded', 'loaded');
      loaded.hidden = true;
      head.append(name, kind, cached, loaded);
      const facts = el('div', 'cat-facts muted', `${fmtBytes(entry.bytes)} · ${entry.quantization} · context ${ctxText(entry.context)} · ${entry.about}`);
      const actionsRow = el('div', 'cat-actions');
      const load = el('button', 'primary cat-load', 'Load');
      load.type = 'button';
      load.addEventListener('click', () => actions.onLoad(entry));
      const fit = el('button', 'cat-fit', 'Will it fit?');
      fit.type = 'button';
      fit.title = 'Estimate the memory this model needs here, from its header only';
      fit.addEventListener('click', () => actions.onFit(entry));
      const del = el('button', 'cat-delete', 'Delete');
      del.type = 'button';
      del.title = 'Delete this model from this browser’s storage';
      del.hidden = true;
      del.addEventListener('click', () => actions.onDelete(entry));
      const fitOut = el('span', 'estimate cat-fit-result');
      fitOut.hidden = true;
      actionsRow.append(load, fit, del, fitOut);
      li.append(head, facts, actionsRow);
      list.append(li);
      this.rows.set(entry.id, { li, cached, loaded, load, fit, del, fitOut });
    }
  }

  /** Cached marks and the storage line from engine.cache.list() records ({url, size}). */
  paintCache(records, usageEl) {
    const byUrl = new Map(records.map((r) => [r.url, r]));
    for (const entry of CATALOG) {
      const row = this.rows.get(entry.id);
      const hit = byUrl.get(new URL(entryUrl(entry), location.href).href);
      row.cached.hidden = !hit;
      row.del.hidden = !hit;
      row.li.dataset.cached = hit ? '1' : '0';
    }
    const total = records.reduce((s, r) => s + (r.size || 0), 0);
    usageEl.dataset.bytes = String(total);
    usageEl.textContent = records.length ? `${records.length} model${records.length > 1 ? 's' : ''} in this browser: ${fmtBytes(total)}` : 'No model kept in this browser yet.';
  }

  /** Which entry is chosen (remembered) and which one is loaded now. */
  paintChoice(chosenId, loadedId) {
    for (const [id, row] of this.rows) {
      row.li.classList.toggle('chosen', id === chosenId);
      row.li.setAttribute('aria-current', id === chosenId ? 'true' : 'false');
      row.loaded.hidden = id !== loadedId;
      row.load.textContent = id === loadedId ? 'Reload' : 'Load';
    }
  }

  setBusy(busy) {
    for (const row of this.rows.values()) {
      row.load.disabled = busy;
      row.del.disabled = busy;
    }
  }

  /** "Will it fit?": the estimate's text, or an error. */
  paintFit(entry, e, err) {
    const out = this.rows.get(entry.id).fitOut;
    out.hidden = false;
    out.className = 'estimate cat-fit-result';
    if (err) {
      out.classList.add('no-fit');
      out.textContent = `${err.code || 'ERROR'}: ${err.message}`;
      return;
    }
    if (!e) {
      out.textContent = 'Reading the header…';
      return;
    }
    out.dataset.peak = String(e.peak);
    out.dataset.fits = String(e.fits);
    out.classList.add(e.fits ? 'fits' : 'no-fit');
    out.textContent = `needs about ${fmtBytes(e.peak)}${e.budget_bytes ? ` · ${e.fits ? 'fits' : 'does not fit'} the ${fmtBytes(e.budget_bytes)} budget` : ''}`;
  }
}
