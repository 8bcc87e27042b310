// The conversation's DOM: one user bubble (with Edit) and one answer block (Markdown, with
// Copy and Regenerate, the route badge and the answer's figures) per turn. The page (app.js)
// owns the turns and the requests; this file only builds and rebuilds nodes.

import { StreamRenderer, copyText } from './markdown.js';
import { routeText, fmtMs, fmtTpot, fmtRate, energyText, energyTitle } from './format.js';

export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function button(cls, text, title, onClick) {
  const b = el('button', cls, text);
  b.type = 'button';
  if (title) b.title = title;
  b.addEventListener('click', onClick);
  return b;
}

export function badge(route, offline) {
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

/** The prompt tokens the engine took from its KV cache instead of prefilling (OpenAI's field). */
export const reusedTokens = (u) => (u && u.prompt_tokens_details && typeof u.prompt_tokens_details.cached_tokens === 'number' ? u.prompt_tokens_details.cached_tokens : null);

/** The energy badge of an answer (usage.compute), or null when the route reported none. */
export function energyBadge(u) {
  const c = u && u.compute;
  const text = energyText(c);
  if (!text) return null;
  const b = el('span', 'badge energy', text);
  b.title = energyTitle(c);
  b.dataset.energyJ = String(c.energy_j.total);
  b.dataset.cpuMs = String(c.cpu_ms.total);
  return b;
}

export function answerFigures(u) {
  const reused = reusedTokens(u);
  return (
    `TTFT ${fmtMs(u.ttft_ms)} · TPOT ${fmtTpot(u.tpot_ms)} · prefill ${fmtRate(u.prefill_tokens_per_s)} · decode ${fmtRate(u.decode_tokens_per_s)} · ${u.completion_tokens} tokens` +
    (reused !== null ? ` · ${reused} of ${u.prompt_tokens} prompt tokens reused` : '')
  );
}

/**
 * A user bubble. `onEdit(text)` is called with the edited text when the user sends it.
 * @returns {HTMLElement}
 */
export function userBubble(turn, { onEdit, canEdit }) {
  const wrap = el('div', 'turn-user');
  const msg = el('div', 'msg user', turn.user);
  const tools = el('div', 'msg-tools');
  const edit = button('tool edit', 'Edit', 'Edit this message and send it again (the conversation after it is replaced)', () => {
    if (!canEdit()) return;
    const box = el('form', 'edit-box');
    const ta = el('textarea', 'edit-text');
    ta.value = turn.user;
    ta.rows = Math.min(8, Math.max(2, turn.user.split('\n').length));
    ta.setAttribute('aria-label', 'Edit the message');
    const save = el('button', 'primary', 'Send');
    save.type = 'submit';
    const cancel = button('', 'Cancel', null, () => box.replaceWith(msg, tools));
    const row = el('div', 'edit-row');
    row.append(cancel, save);
    box.append(ta, row);
    box.addEventListener('submit', (e) => {
      e.preventDefault();
      if (!ta.value.trim() || !canEdit()) return;
      onEdit(ta.value);
    });
    ta.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        box.requestSubmit();
      } else if (e.key === 'Escape') {
        e.stopPropagation();
        box.replaceWith(msg, tools);
      }
    });
    msg.replaceWith(box);
    tools.remove();
    ta.focus();
  });
  tools.append(edit);
  wrap.append(msg, tools);
  return wrap;
}

/**
 * An answer block; `fill(text)` renders a stored answer, `stream()` returns a sink for deltas.
 * Copy copies the answer's Markdown source; Regenerate asks again from this turn.
 */
export function answerBlock(turn, { onRegenerate, canRegenerate }) {
  const block = el('div', 'answer');
  const out = el('div', 'msg assistant');
  const meta = el('div', 'meta');
  const routeSlot = el('span', 'route-slot');
  const energySlot = el('span', 'energy-slot');
  const figures = el('span', 'figures');
  const copy = button('tool copy-answer', 'Copy', 'Copy this answer', () => copyText(turn.assistant || '', copy));
  const regen = button('tool regen', 'Regenerate', 'Ask again for this answer (the conversation after it is replaced)', () => canRegenerate() && onRegenerate());
  meta.append(routeSlot, energySlot, figures, copy, regen);
  block.append(out, meta);
  let renderer = null;
  let plain = null;
  const api = {
    block,
    out,
    meta,
    routeSlot,
    energySlot,
    figures,
    /** Starts a streamed answer: Markdown unless raw. */
    start() {
      out.replaceChildren();
      if (turn.raw) {
        plain = document.createTextNode('');
        out.append(plain);
      } else renderer = new StreamRenderer(out);
    },
    push(delta) {
      if (plain) plain.appendData(delta);
      else renderer.push(delta);
    },
    end() {
      if (renderer) renderer.end();
    },
    /** Draws a stored turn: text, figures, route, flags. */
    fill() {
      api.start();
      if (turn.assistant) api.push(turn.assistant);
      api.end();
      if (turn.usage) figures.textContent = answerFigures(turn.usage);
      if (turn.usage) energySlot.replaceChildren(...[energyBadge(turn.usage)].filter(Boolean));
      if (turn.route) routeSlot.replaceChildren(badge(turn.route, false));
      if (turn.flag) api.flag(turn.flag, turn.flagError);
      if (turn.error) api.error(turn.error);
    },
    flag(text, isError) {
      meta.insertBefore(el('span', isError ? 'flag error' : 'flag', text), copy);
    },
    error(e) {
      block.classList.add('error');
      out.dataset.code = e.code || 'INTERNAL';
      const box = el('div', 'error-box');
      box.append(el('strong', 'code', e.code || 'ERROR'), document.createTextNode(` ${e.message}`));
      if (e.detail) box.append(el('span', 'detail', ` (${e.detail})`));
      out.append(box);
    },
  };
  return api;
}
