// Streaming Markdown for model answers: npm `streaming-markdown` (smd, served from node_modules
// by www/serve.js as vendor/smd.js) parses the tokens as they arrive — paragraphs, headings,
// lists, tables, quotes, code — and this file is its renderer: DOM nodes only (text always goes
// in as Text nodes, never as HTML), so nothing the model writes can become markup or script.
// What smd would turn into a request or a script is disarmed here:
//   - links keep their href only for http(s) and mailto URLs (no javascript:, data:, relative);
//     they open in a new tab with no referrer, after a confirmation showing the whole address
//     where the link's text is not that address;
//   - images are never fetched (a remote image would leak the conversation's existence and
//     defeat "Private"): they show as their alt text and URL;
//   - code blocks get a header with the language and a Copy button.
// Hostile text must not break the tab either: nesting stops growing at MAX_DEPTH (each `>` or
// `*_` opens one more element, and a few thousand of them crashed Chromium's renderer), and past
// MARKDOWN_MAX_CHARS an answer's rest is shown as plain text (smd slows down quadratically on
// runs of `*`, backticks or `[a](`: 64 Ki of them ~0.25 s, 200 Ki 10–30 s).
//
//   const r = new StreamRenderer(element);
//   r.push(delta); ... r.end();

import * as smd from './vendor/smd.js';

const SAFE_LINK = /^(https?:|mailto:)/i;

/** Elements nested deeper than this are not made: their content goes into the deepest one. */
export const MAX_DEPTH = 64;

/** Characters of an answer rendered as Markdown; the rest is shown as plain text. */
export const MARKDOWN_MAX_CHARS = 64 * 1024;

function safeHref(value) {
  try {
    const u = new URL(value);
    return SAFE_LINK.test(u.protocol) ? u.href : null;
  } catch {
    return null; // relative or malformed: no link
  }
}

/** A link whose text is not its address asks first, showing the whole address: a model (or a
 * prompt injection) can dress up a URL that carries the conversation in its query. */
function confirmLink(e) {
  const a = e.currentTarget;
  if (!a.href || a.textContent.trim() === a.href || a.textContent.trim() === a.getAttribute('href')) return;
  if (!window.confirm(`Open this address in a new tab?\n\n${a.href}`)) e.preventDefault();
}

/** The code block box: header (language, Copy) + <pre><code>; returns the <code>. */
function codeBox(parent) {
  const box = document.createElement('div');
  box.className = 'code';
  const head = document.createElement('div');
  head.className = 'code-head';
  const copy = document.createElement('button');
  copy.type = 'button';
  copy.className = 'copy';
  copy.setAttribute('aria-label', 'Copy code');
  const pre = document.createElement('pre');
  const code = document.createElement('code');
  pre.append(code);
  copy.addEventListener('click', () => copyText(code.textContent, copy));
  head.append(copy);
  box.append(head, pre);
  parent.append(box);
  return code;
}

/** Copies text to the clipboard and marks the button for a moment. */
export function copyText(text, button) {
  if (!navigator.clipboard) return;
  navigator.clipboard.writeText(text).then(
    () => {
      if (!button) return;
      button.dataset.copied = '1';
      setTimeout(() => delete button.dataset.copied, 1500);
    },
    () => {},
  );
}

/** An smd renderer writing under `root` (smd's default renderer, with the rules above). */
function renderer(root) {
  const data = { nodes: [root], index: 0 };
  const T = smd.Token;
  return {
    data,
    add_token(d, type) {
      const parent = d.nodes[d.index];
      let slot;
      if (type !== T.Document && d.index >= MAX_DEPTH) {
        // Too deep: the token's content joins its parent (end_token pops this entry).
        d.nodes[++d.index] = parent;
        return;
      }
      switch (type) {
        case T.Document:
          return;
        case T.Code_Block:
        case T.Code_Fence:
          slot = codeBox(parent);
          break;
        case T.Image: {
          slot = document.createElement('span');
          slot.className = 'img-ref';
          parent.append(slot);
          break;
        }
        case T.Link:
        case T.Raw_URL:
          slot = document.createElement('a');
          slot.rel = 'noopener noreferrer nofollow';
          slot.target = '_blank';
          slot.referrerPolicy = 'no-referrer';
          slot.addEventListener('click', confirmLink);
          parent.append(slot);
          break;
        case T.Table: {
          const wrap = document.createElement('div');
          wrap.className = 'table-wrap';
          parent.append(wrap);
          slot = wrap.appendChild(document.createElement('table'));
          break;
        }
        case T.Equation_Block:
        case T.Equation_Inline:
          slot = document.createElement(type === T.Equation_Block ? 'div' : 'span');
          slot.className = 'equation';
          parent.append(slot);
          break;
        default: {
          // Everything else as smd draws it (p, h1-6, em, strong, s, code, ul/ol/li, blockquote,
          // hr, br, checkbox, table rows and cells): createElement + appendChild only.
          const tmp = { nodes: [parent], index: 0 };
          smd.default_add_token(tmp, type);
          slot = tmp.nodes[1];
        }
      }
      d.nodes[++d.index] = slot;
    },
    end_token(d) {
      d.index -= 1;
    },
    add_text(d, text) {
      d.nodes[d.index].append(document.createTextNode(text));
    },
    set_attr(d, type, value) {
      const node = d.nodes[d.index];
      switch (type) {
        case smd.Attr.Href: {
          const href = safeHref(value);
          if (href) node.href = href;
          else node.dataset.blockedHref = String(value).slice(0, 200);
          break;
        }
        case smd.Attr.Src:
          node.append(document.createTextNode(` (image not loaded: ${String(value).slice(0, 200)})`));
          break;
        case smd.Attr.Lang: {
          const lang = String(value).trim().split(/\s+/)[0].slice(0, 40);
          if (lang) {
            node.dataset.lang = lang;
            const head = node.closest('.code')?.querySelector('.code-head');
            if (head) head.dataset.lang = lang;
          }
          break;
        }
        case smd.Attr.Start: {
          const n = Number.parseInt(value, 10);
          if (Number.isFinite(n) && n >= 0) node.setAttribute('start', String(n));
          break;
        }
        case smd.Attr.Checked:
          node.checked = true;
          break;
        default:
          break; // an attribute this renderer does not know is dropped
      }
    },
  };
}

export class StreamRenderer {
  constructor(root) {
    const holder = document.createElement('div');
    holder.className = 'md';
    root.append(holder);
    this.root = holder;
    this.parser = smd.parser(renderer(holder));
    this.chars = 0;
    this.plain = null; // the plain-text tail past MARKDOWN_MAX_CHARS
  }

  push(text) {
    if (!text) return;
    if (this.plain) {
      this.plain.append(text);
      return;
    }
    let room = MARKDOWN_MAX_CHARS - this.chars;
    if (text.length <= room) {
      this.chars += text.length;
      smd.parser_write(this.parser, text);
      return;
    }
    // Never split a surrogate pair between the two parts.
    const c = text.charCodeAt(room - 1);
    if (room > 0 && c >= 0xd800 && c <= 0xdbff) room -= 1;
    if (room > 0) smd.parser_write(this.parser, text.slice(0, room));
    this.chars = MARKDOWN_MAX_CHARS;
    smd.parser_end(this.parser);
    this.plain = document.createElement('div');
    this.plain.className = 'md-plain';
    this.root.append(this.plain);
    this.plain.append(text.slice(room));
  }

  end() {
    if (!this.plain) smd.parser_end(this.parser);
  }
}
