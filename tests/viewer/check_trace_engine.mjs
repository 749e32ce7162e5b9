// Loads gilspy Chrome traces into the DevTools trace engine (the parser behind Chrome DevTools' Performance
// panel, npm @paulirish/trace_engine, pinned in package.json) and checks that the panel would draw every GIL
// event of the file.
//
// usage: node check_trace_engine.mjs TRACE.json [TRACE.json ...]
//
// How the engine builds a thread's track (models/trace/handlers/RendererHandler.js, helpers/TreeHelpers.js):
// it keeps only "X", "B"/"E" and "I" events (not "i": its Phase.INSTANT is "I"; "C" counters reach no track
// at all, only Chrome's own UpdateCounters do), sorts each (pid, tid)'s entries by ts, then nests them into a
// tree with JavaScript doubles. An entry that starts inside the previous one (ts < parent.ts + parent.dur)
// and ends after it is skipped ("endsAfterParent"), and the flame chart draws only tree nodes. So an entry
// is shown exactly when it is a node of its thread's tree, which is what this checks: every "X" and "I"
// event of the file, by object identity, among the tree nodes of its lane. Exit status 1 when one is not,
// or when a trace lacks drop_gil marks or gil_waiters slices; 2 when a trace cannot be read.
import fs from 'node:fs';

import * as Trace from '@paulirish/trace_engine';
import {polyfillDOMRect} from '@paulirish/trace_engine/analyze-trace.mjs';

polyfillDOMRect();
// Debian 12's nodejs is 18, which lacks Array.prototype.toSorted (Node 20); the engine's CLS insight calls it.
if (!Array.prototype.toSorted) {
  Object.defineProperty(Array.prototype, 'toSorted', {value(compare) { return [...this].sort(compare); }});
}

const laneKey = (pid, tid) => `${pid}/${tid}`;

// Every entry the engine placed in a thread's tree, i.e. every entry the Performance panel draws.
function shownEntries(parsedTrace) {
  const shown = new Map();  // lane -> Set of events
  for (const [pid, process] of parsedTrace.Renderer.processes) {
    for (const [tid, thread] of process.threads) {
      const set = new Set();
      const stack = thread.tree ? [...thread.tree.roots] : [];
      while (stack.length) {
        const node = stack.pop();
        set.add(node.entry);
        stack.push(...node.children);
      }
      shown.set(laneKey(pid, tid), set);
    }
  }
  return shown;
}

// "gil_waiters 2" slices are counted under "gil_waiters".
const kindOf = (e) => (e.name.startsWith('gil_waiters') ? 'gil_waiters' : e.name);

async function checkOne(path) {
  const doc = JSON.parse(fs.readFileSync(path, 'utf8'));
  const events = Array.isArray(doc) ? doc : doc.traceEvents;
  if (!Array.isArray(events)) throw new Error(`${path}: no traceEvents array`);
  const model = Trace.TraceModel.Model.createWithAllHandlers();
  await model.parse(events);
  const parsedTrace = model.parsedTrace(0);
  if (!parsedTrace) throw new Error(`${path}: the trace engine parsed no trace`);
  const shown = shownEntries(parsedTrace.data ?? parsedTrace);

  const counts = new Map();  // kind -> {file, shown}
  const missing = [];
  for (const e of events) {
    if (e.ph !== 'X' && e.ph !== 'I' && e.ph !== 'i') continue;
    const kind = `${kindOf(e)} (${e.ph})`;
    const c = counts.get(kind) ?? {file: 0, shown: 0};
    counts.set(kind, c);
    ++c.file;
    if (shown.get(laneKey(e.pid, e.tid))?.has(e)) {
      ++c.shown;
    } else {
      missing.push(e);
    }
  }
  const problems = [];
  for (const [kind, c] of counts) {
    if (c.shown !== c.file) problems.push(`${kind}: ${c.file - c.shown} of ${c.file} not shown`);
  }
  for (const required of ['hold_gil (X)', 'take_gil (X)', 'drop_gil (I)', 'gil_waiters (X)']) {
    if (!counts.get(required)?.file) problems.push(`no ${required} events in the file`);
  }
  const counterSamples = events.filter((e) => e.ph === 'C' && e.name === 'gil_waiters').length;
  const figures = [...counts].map(([kind, c]) => `${kind} ${c.shown}/${c.file}`).join(', ');
  console.log(`${path}: shown/in file: ${figures}; gil_waiters counter samples (no DevTools track): ` +
              `${counterSamples}`);
  for (const e of missing.slice(0, 5)) {
    console.log(`  not shown: ${e.name} pid ${e.pid} tid ${e.tid} ts ${e.ts} dur ${e.dur ?? '-'}`);
  }
  for (const p of problems) console.log(`FAIL ${path}: ${p}`);
  return problems.length === 0;
}

const paths = process.argv.slice(2);
if (!paths.length) {
  console.error('usage: node check_trace_engine.mjs TRACE.json [TRACE.json ...]');
  process.exit(2);
}
let ok = true;
for (const path of paths) {
  try {
    ok = (await checkOne(path)) && ok;
  } catch (e) {
    console.error(`ERROR ${path}: ${e.message}`);
    process.exit(2);
  }
}
process.exit(ok ? 0 : 1);
