// The live decode chart: tokens per second over the time of one answer, as the page receives
// them. Each point is the rate over the last WINDOW tokens; the dashed line is the sustained rate
// (all tokens since the first one over the time since it), the dot marks the peak. A canvas,
// redrawn at most once per frame.

const WINDOW = 8;

export class RateChart {
  constructor(canvas, summary) {
    this.canvas = canvas;
    this.summary = summary;
    this.reset();
    this.pending = false;
    new ResizeObserver(() => this.#schedule()).observe(canvas);
    // Colours come from CSS variables: repaint when the colour scheme changes.
    matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => this.#schedule());
  }

  reset() {
    this.times = []; // ms (performance.now) of each token, first one included
    this.points = []; // {t: s since first token, r: tok/s}
    this.peak = null;
    this.sustained = null;
    this.#schedule();
  }

  /** One more token arrived at `t` (performance.now()). */
  tick(t = performance.now()) {
    const ts = this.times;
    ts.push(t);
    const n = ts.length;
    if (n >= 2) {
      const k = Math.min(WINDOW, n - 1);
      const dt = (t - ts[n - 1 - k]) / 1000;
      if (dt > 0) {
        const r = k / dt;
        this.points.push({ t: (t - ts[0]) / 1000, r });
        if (this.peak === null || r > this.peak.r) this.peak = { t: (t - ts[0]) / 1000, r };
      }
      const all = (t - ts[0]) / 1000;
      if (all > 0) this.sustained = (n - 1) / all;
    }
    this.#schedule();
  }

  #schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.draw();
    });
  }

  draw() {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.round(c.clientWidth * dpr));
    const h = Math.max(1, Math.round(c.clientHeight * dpr));
    if (c.width !== w || c.height !== h) {
      c.width = w;
      c.height = h;
    }
    const g = c.getContext('2d');
    const css = getComputedStyle(c);
    const color = (name, dflt) => css.getPropertyValue(name).trim() || dflt;
    const fg = color('--chart-fg', '#5b6270');
    const grid = color('--chart-grid', '#e3e6ec');
    const line = color('--chart-line', '#4f46e5');
    const fill = color('--chart-fill', 'rgba(79,70,229,.12)');
    const sus = color('--chart-sustained', '#0a7f4f');
    g.setTransform(1, 0, 0, 1, 0, 0);
    g.clearRect(0, 0, w, h);
    g.scale(dpr, dpr);
    const W = w / dpr;
    const H = h / dpr;
    const padL = 34;
    const padB = 16;
    const padT = 8;
    const padR = 8;
    const pts = this.points;
    const maxR = Math.max(1, ...pts.map((p) => p.r), this.sustained || 0);
    const yMax = niceCeil(maxR * 1.15);
    const tMax = Math.max(1, pts.length ? pts[pts.length - 1].t : 0);
    const x = (t) => padL + (t / tMax) * (W - padL - padR);
    const y = (r) => padT + (1 - r / yMax) * (H - padT - padB);
    g.font = '10px system-ui, sans-serif';
    g.fillStyle = fg;
    g.strokeStyle = grid;
    g.lineWidth = 1;
    for (let i = 0; i <= 2; i++) {
      const r = (yMax * i) / 2;
      const yy = Math.round(y(r)) + 0.5;
      g.beginPath();
      g.moveTo(padL, yy);
      g.lineTo(W - padR, yy);
      g.stroke();
      g.textAlign = 'right';
      g.textBaseline = 'middle';
      g.fillText(fmtAxis(r), padL - 4, yy);
    }
    g.textAlign = 'left';
    g.textBaseline = 'alphabetic';
    g.fillText('0 s', padL, H - 3);
    g.textAlign = 'right';
    g.fillText(`${tMax.toFixed(tMax < 10 ? 1 : 0)} s`, W - padR, H - 3);
    if (pts.length) {
      g.beginPath();
      g.moveTo(x(0), y(0));
      for (const p of pts) g.lineTo(x(p.t), y(p.r));
      g.lineTo(x(pts[pts.length - 1].t), y(0));
      g.closePath();
      g.fillStyle = fill;
      g.fill();
      g.beginPath();
      pts.forEach((p, i) => (i ? g.lineTo(x(p.t), y(p.r)) : g.moveTo(x(p.t), y(p.r))));
      g.strokeStyle = line;
      g.lineWidth = 1.75;
      g.stroke();
      if (this.peak) {
        g.fillStyle = line;
        g.beginPath();
        g.arc(x(this.peak.t), y(this.peak.r), 3, 0, Math.PI * 2);
        g.fill();
      }
    }
    if (this.sustained) {
      g.setLineDash([4, 3]);
      g.strokeStyle = sus;
      g.lineWidth = 1.5;
      g.beginPath();
      g.moveTo(padL, y(this.sustained));
      g.lineTo(W - padR, y(this.sustained));
      g.stroke();
      g.setLineDash([]);
    }
    if (this.summary) {
      const peak = this.peak ? this.peak.r.toFixed(1) : '–';
      const s = this.sustained ? this.sustained.toFixed(1) : '–';
      this.summary.textContent = pts.length ? `peak ${peak} · sustained ${s} tok/s (${this.times.length} chunks)` : 'streams in with the next answer';
      this.canvas.setAttribute('aria-label', pts.length ? `Decode speed over the answer: peak ${peak}, sustained ${s} tokens per second` : 'Decode speed chart (empty)');
    }
  }
}

function niceCeil(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

const fmtAxis = (r) => (r >= 10 || r === 0 ? r.toFixed(0) : r.toFixed(1));
