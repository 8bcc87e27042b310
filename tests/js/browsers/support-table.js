// Reads the "Browser support" table of pkg/README.md back into support.js's terms, so a test can
// hold the README to what the cross-engine tests measured. A row's first cell names the engine's
// key in backticks (e.g. "Firefox ESR (`firefox`)"); the tier and cache cells start with the
// backticked value; the threads cell starts with yes / no; the version cell starts with the
// version the browser reports, to the precision the table gives (e.g. 156 or 2.50.6).
const SECTION = /^## Browser support\s*$/m;

export function readSupportTable(readme) {
  const start = readme.search(SECTION);
  if (start < 0) throw new Error('pkg/README.md has no "## Browser support" section');
  const lines = readme.slice(start).split('\n').slice(1);
  const table = [];
  for (const l of lines) {
    if (/^## /.test(l)) break;
    if (/^\|/.test(l)) table.push(l);
    else if (table.length) break;
  }
  if (table.length < 3) throw new Error('the "Browser support" section has no table');
  const cells = (l) => l.replace(/^\||\|$/g, '').split('|').map((c) => c.trim());
  const head = cells(table[0]).map((h) => h.toLowerCase());
  const col = (name) => {
    const i = head.indexOf(name);
    if (i < 0) throw new Error(`the browser-support table has no "${name}" column (columns: ${head.join(', ')})`);
    return i;
  };
  const [iEngine, iVersion, iTier, iThreads, iCache] = ['engine', 'version tested', 'tier', 'threads', 'cache'].map(col);
  const tick = (c) => (/`([^`]+)`/.exec(c) || [null, null])[1];
  const rows = {};
  for (const l of table.slice(2)) {
    const c = cells(l);
    const key = tick(c[iEngine]);
    if (!key) throw new Error(`browser-support row without an engine key in backticks: ${l}`);
    rows[key] = { version: (/^[\d.]*\d/.exec(c[iVersion]) || [null])[0], tier: tick(c[iTier]), threads: (/^(yes|no)\b/i.exec(c[iThreads]) || [null, null])[1], cache: tick(c[iCache]) };
  }
  return rows;
}
