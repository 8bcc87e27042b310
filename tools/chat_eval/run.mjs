#!/usr/bin/env node
// Runs candidate chat defaults (tools/chat_eval/candidates.mjs) over the questions and
// multi-turn exchanges in cases.json with the wasm engine under Node (pkg/, the same build the
// page runs), scores every answer (score.mjs) and prints a Markdown table; the raw answers go
// to out/chat_eval/<model>.json.
//
//   node tools/chat_eval/run.mjs [--model smollm2-135m-instruct|gemma-3-270m|path.gguf]
//        [--candidates id,id,...] [--max-cases N] [--out out/chat_eval] [--rescore]
//
// --rescore: no model run; the answers stored by an earlier run are scored again with the
// current score.mjs and cases.json (for a change of the checks, not of the candidates).
//
// Needs `./build.sh build` (pkg/wasm/) and `./build.sh model`. Bounded: every answer stops at
// its candidate's max_tokens; sampled candidates use a fixed seed per case, so a run repeats.
// Cost: 22 answers per candidate; on this shared 2-core machine (load ~15) 1-4 min per
// candidate for SmolLM2, several times that for Gemma.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createEngine } from '../../pkg/src/node.js';
import { CATALOG } from '../../www/catalog.js';
import { CANDIDATES, samplingOf } from './candidates.mjs';
import { scoreAnswer, summarize } from './score.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : dflt;
};

const modelArg = arg('model', CATALOG[0].id);
const entry = CATALOG.find((e) => e.id === modelArg);
const modelPath = entry ? path.join(ROOT, 'models', entry.file) : path.resolve(modelArg);
if (!fs.existsSync(modelPath)) {
  console.error(`no model at ${modelPath} (run ./build.sh model)`);
  process.exit(2);
}
const wanted = arg('candidates', '');
const candidates = wanted ? wanted.split(',').map((id) => CANDIDATES.find((c) => c.id === id) || { ...JSON.parse(id) }) : CANDIDATES;
const cases = JSON.parse(fs.readFileSync(path.join(ROOT, 'tools/chat_eval/cases.json'), 'utf8'));
const maxCases = Number(arg('max-cases', 1e9));
const outDir = path.resolve(ROOT, arg('out', 'out/chat_eval'));

// Every case as a list of turns: a single question is a one-turn exchange.
const dialogs = [...cases.single.map((c) => ({ id: c.id, turns: [c] })), ...cases.multi].slice(0, maxCases);

fs.mkdirSync(outDir, { recursive: true });
const outFile = path.join(outDir, `${path.basename(modelPath, '.gguf')}.json`);
const expectOf = (id, turn) => dialogs.find((d) => d.id === id).turns[turn].expect;
let results = [];
if (process.argv.includes('--rescore')) {
  results = JSON.parse(fs.readFileSync(outFile, 'utf8')).results.map((r) => {
    const answers = r.answers.map((a) => ({ ...a, ...scoreAnswer(a.text, expectOf(a.case, a.turn), a.finish) }));
    return { ...r, answers, summary: { ...r.summary, ...summarize(answers) } };
  });
} else {
  const engine = await createEngine({ cache: false });
  await engine.load(modelPath, { kv: { tokens: 2048 } });
  console.error(`model ${path.basename(modelPath)}: ${dialogs.length} exchanges, ${dialogs.reduce((n, d) => n + d.turns.length, 0)} answers per candidate`);
  for (const cand of candidates) {
    const t0 = Date.now();
    const scores = [];
    const answers = [];
    let tokens = 0;
    for (const [di, d] of dialogs.entries()) {
      const history = cand.system === null || cand.system === undefined ? [] : [{ role: 'system', content: cand.system }];
      for (const [ti, turn] of d.turns.entries()) {
        history.push({ role: 'user', content: turn.user });
        const r = await engine.chat.completions.create({ messages: history, ...samplingOf(cand), seed: 1000 + di * 10 + ti });
        const text = r.choices[0].message.content;
        const finish = r.choices[0].finish_reason;
        tokens += r.usage.completion_tokens;
        history.push({ role: 'assistant', content: text });
        const s = scoreAnswer(text, turn.expect, finish);
        scores.push(s);
        answers.push({ case: d.id, turn: ti, user: turn.user, text, finish, completion_tokens: r.usage.completion_tokens, ...s });
      }
    }
    const sum = summarize(scores);
    results.push({ candidate: cand, summary: { ...sum, mean_tokens: tokens / scores.length, seconds: (Date.now() - t0) / 1000 }, answers });
    // Written after every candidate: a long run that is stopped keeps what it measured.
    fs.writeFileSync(outFile, JSON.stringify({ model: path.basename(modelPath), when: new Date().toISOString(), results }, null, 1));
    console.error(`${cand.id}: ok ${(sum.ok * 100).toFixed(0)}%  facts ${(sum.facts * 100).toFixed(0)}%  English ${(sum.english * 100).toFixed(0)}%  no-repeat ${(sum.no_repetition * 100).toFixed(0)}%  (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  }
  engine.terminate();
}


if (process.argv.includes('--rescore')) fs.writeFileSync(outFile, JSON.stringify({ model: path.basename(modelPath), when: new Date().toISOString(), results }, null, 1));
const pct = (x) => `${Math.round(x * 100)}%`;
const sys = (s) => (s === null || s === undefined ? '(template default)' : s === '' ? '(empty)' : `"${s}"`);
const samp = (c) => {
  const s = samplingOf(c);
  if (s.temperature === 0) return `greedy${s.repetition_penalty ? `, rep ${s.repetition_penalty}` : ''}`;
  return [`T ${s.temperature}`, s.top_p !== undefined && `top-p ${s.top_p}`, s.min_p !== undefined && `min-p ${s.min_p}`, s.repetition_penalty && `rep ${s.repetition_penalty}`].filter(Boolean).join(', ');
};
// The multi-turn answers on their own: where the old demo's defaults went wrong.
const multiIds = new Set(cases.multi.map((m) => m.id));
const multiOk = (answers) => {
  const m = answers.filter((a) => multiIds.has(a.case));
  return m.length ? m.filter((a) => a.ok).length / m.length : 0;
};
console.log(`| candidate | system | sampling | max tokens | all checks pass | multi-turn answers pass | facts | English | no repetition | ended by itself | mean tokens |`);
console.log(`|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|`);
for (const { candidate: c, summary: s, answers } of results) {
  console.log(`| ${c.id} | ${sys(c.system)} | ${samp(c)} | ${c.max_tokens} | **${pct(s.ok)}** | ${pct(multiOk(answers))} | ${pct(s.facts)} | ${pct(s.english)} | ${pct(s.no_repetition)} | ${pct(s.stopped)} | ${s.mean_tokens.toFixed(0)} |`);
}
console.error(`answers: ${path.relative(ROOT, outFile)}`);
