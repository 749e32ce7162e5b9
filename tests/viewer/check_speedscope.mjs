// Checks gilspy's speedscope files against speedscope's own file-format schema (the JSON Schema its npm
// package ships, dist/release/file-format-schema.json, validated with Ajv), and what the schema cannot say:
// every sample's frames exist, each profile's weights add up to its endValue.
//
// usage: node check_speedscope.mjs FILE.speedscope.json
// Prints one JSON line: {"profiles": {name: total weight}, "frames": N}. Exit status 1 when the file breaks
// a rule, 2 when it cannot be read.
import fs from 'node:fs';
import {createRequire} from 'node:module';

import Ajv from 'ajv';

const require = createRequire(import.meta.url);
const schemaPath = require.resolve('speedscope/dist/release/file-format-schema.json');
const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));

const path = process.argv[2];
let doc;
try {
  doc = JSON.parse(fs.readFileSync(path, 'utf8'));
} catch (e) {
  console.log(`ERROR ${path}: ${e.message}`);
  process.exit(2);
}
const ajv = new Ajv({strict: false, allErrors: true});
const validate = ajv.compile(schema);
const problems = [];
if (!validate(doc)) {
  for (const err of validate.errors.slice(0, 10)) problems.push(`schema: ${err.instancePath} ${err.message}`);
}
const frames = doc.shared?.frames ?? [];
const totals = {};
for (const p of doc.profiles ?? []) {
  let sum = 0;
  if (p.samples.length !== p.weights.length) problems.push(`${p.name}: ${p.samples.length} samples, ${p.weights.length} weights`);
  for (const s of p.samples) {
    for (const i of s) if (!(i >= 0 && i < frames.length)) problems.push(`${p.name}: frame ${i} of ${frames.length}`);
  }
  for (const w of p.weights) sum += w;
  if (sum !== p.endValue - p.startValue) problems.push(`${p.name}: weights ${sum}, endValue ${p.endValue}`);
  totals[p.name] = sum;
}
for (const p of problems.slice(0, 20)) console.log(`PROBLEM ${p}`);
console.log(JSON.stringify({profiles: totals, frames: frames.length}));
process.exit(problems.length ? 1 : 0);
