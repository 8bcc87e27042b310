// A small streaming renderer for model text: fenced code blocks (```lang), `inline code` and
// **bold**. It only ever appends DOM nodes (text goes in through Text nodes, never innerHTML),
// so streamed tokens extend the answer in place and nothing the model writes can become markup
// or script.
//
//   const r = new StreamRenderer(element);
//   r.push(delta); ... r.end();

const FENCE = /^ {0,3}```/;
// A line start that may still turn into a fence: hold it back until it is decided.
const MAYBE_FENCE = /^ {0,3}`{0,2}$/;

export class StreamRenderer {
  constructor(root) {
    this.root = root;
    this.line = ''; // the current line, held back while it may be a fence
    this.holding = true; // at a line start: deciding whether the line is a fence
    this.code = null; // <code> of the open code block
    this.prose = null; // the current prose element
    this.inline = null; // an open <code> (inline) or <strong>
    this.star = false; // one '*' seen, waiting for the next character
    this.afterFence = false; // drop one newline right after a closing fence
    this.run = ''; // characters waiting to be appended to the current target
  }

  push(text) {
    for (const c of text) this.#char(c);
    this.#flush();
  }

  end() {
    if (this.holding && this.line) {
      if (FENCE.test(this.line)) this.#fence(this.line);
      else this.#emit(this.line);
    }
    this.line = '';
    if (this.star) {
      this.star = false;
      this.#text('*');
    }
    this.#flush();
  }

  #char(c) {
    if (!this.holding) {
      this.#emitChar(c);
      if (c === '\n') this.holding = true;
      return;
    }
    this.line += c;
    if (c === '\n') {
      const line = this.line;
      this.line = '';
      if (FENCE.test(line)) this.#fence(line);
      else this.#emit(line);
      return;
    }
    if (MAYBE_FENCE.test(this.line) || FENCE.test(this.line)) return; // undecided, or a fence line
    const line = this.line;
    this.line = '';
    this.holding = false;
    this.#emit(line);
  }

  #emit(s) {
    for (const c of s) this.#emitChar(c);
  }

  #fence(line) {
    this.#flush();
    this.#closeInline();
    if (this.code) {
      this.code = null;
      this.prose = null;
      this.afterFence = true;
      return;
    }
    const lang = line.replace(FENCE, '').trim().split(/\s+/)[0] || '';
    const box = document.createElement('div');
    box.className = 'code';
    const head = document.createElement('div');
    head.className = 'code-head';
    if (lang) head.dataset.lang = lang;
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.className = 'copy';
    copy.setAttribute('aria-label', 'Copy code');
    const pre = document.createElement('pre');
    const code = document.createElement('code');
    if (lang) code.dataset.lang = lang;
    pre.append(code);
    copy.addEventListener('click', () => {
      const done = () => {
        copy.dataset.copied = '1';
        setTimeout(() => delete copy.dataset.copied, 1500);
      };
      if (navigator.clipboard) navigator.clipboard.writeText(code.textContent).then(done, () => {});
    });
    head.append(copy);
    box.append(head, pre);
    this.root.append(box);
    this.code = code;
    this.prose = null;
  }

  #emitChar(c) {
    if (this.code) {
      this.#text(c);
      return;
    }
    if (this.afterFence) {
      this.afterFence = false;
      if (c === '\n') return;
    }
    if (this.star) {
      this.star = false;
      if (c === '*') {
        this.#toggle('strong');
        return;
      }
      this.#text('*');
    }
    if (c === '*' && !(this.inline && this.inline.tagName === 'CODE')) {
      this.star = true;
      return;
    }
    if (c === '`') {
      if (this.inline && this.inline.tagName === 'CODE') this.#closeInline();
      else this.#open('code');
      return;
    }
    if (c === '\n') this.#closeInline();
    this.#text(c);
  }

  #toggle(tag) {
    if (this.inline && this.inline.tagName === tag.toUpperCase()) this.#closeInline();
    else this.#open(tag);
  }

  #open(tag) {
    this.#flush();
    this.#closeInline();
    const el = document.createElement(tag);
    if (tag === 'code') el.className = 'inline';
    this.#proseEl().append(el);
    this.inline = el;
  }

  #closeInline() {
    if (!this.inline) return;
    this.#flush();
    this.inline = null;
  }

  #proseEl() {
    if (!this.prose) {
      this.prose = document.createElement('div');
      this.prose.className = 'prose';
      this.root.append(this.prose);
    }
    return this.prose;
  }

  #text(c) {
    this.run += c;
  }

  /** Appends the pending characters to the current target (code block, inline element or prose). */
  #flush() {
    if (!this.run) return;
    const target = this.code || this.inline || this.#proseEl();
    const last = target.lastChild;
    if (last && last.nodeType === 3) last.appendData(this.run);
    else target.append(document.createTextNode(this.run));
    this.run = '';
  }
}
