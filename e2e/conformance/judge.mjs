// judge.mjs reads the checks.json files one conformance run wrote and decides
// whether the run passed.
//
// Usage: node judge.mjs [--not-scored FILE] RESULTS_DIR SCENARIOS_FILE [EXPECTED_FAILURES_FILE]
//
// RESULTS_DIR holds one directory per scenario (server-<scenario>-<time>/
// checks.json), as `conformance server -o RESULTS_DIR` writes them.
// SCENARIOS_FILE lists the scenarios the run had to cover, one per line.
// A run passes when every listed scenario wrote its checks and no check has
// status FAILURE, except in scenarios named in EXPECTED_FAILURES_FILE (the
// suite's format: a `server:` list). WARNINGs are printed, not counted.
// --not-scored FILE names scenarios the suite runs but does not score for
// the requirement set (extensions and pending scenarios, listed under its
// "Not scored for <revision>" heading): they are reported as INFO lines and
// a separate summary, and do not decide the verdict.
// Prints one line per scenario and a summary; exits 0 on pass, 1 on fail,
// 2 on bad usage.
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';

function usage(msg) {
  console.error(`judge: ${msg}`);
  console.error('usage: node judge.mjs [--not-scored FILE] RESULTS_DIR SCENARIOS_FILE [EXPECTED_FAILURES_FILE]');
  process.exit(2);
}

// parseExpected reads the `server:` list of an expected-failures YAML file.
// Only the subset the suite documents is accepted: top-level keys followed by
// "- name" items, with # comments.
function parseExpected(path) {
  const out = new Set();
  if (!path) return out;
  let section = '';
  for (const raw of readFileSync(path, 'utf8').split('\n')) {
    const line = raw.replace(/#.*/, '').trimEnd();
    if (line.trim() === '') continue;
    const key = line.match(/^([A-Za-z_]+):\s*(\[\])?$/);
    if (key) { section = key[1]; continue; }
    const item = line.match(/^\s+-\s+(\S+)$/);
    if (!item) usage(`${path}: cannot parse line ${JSON.stringify(raw)}`);
    if (section === 'server') out.add(item[1]);
  }
  return out;
}

const args = process.argv.slice(2);
const notScored = new Set();
if (args[0] === '--not-scored') {
  if (!args[1]) usage('--not-scored needs a file');
  for (const n of readFileSync(args[1], 'utf8').split('\n').map((s) => s.trim()).filter(Boolean)) notScored.add(n);
  args.splice(0, 2);
}
const [resultsDir, scenariosFile, expectedFile] = args;
if (!resultsDir || !scenariosFile) usage('missing arguments');
if (!existsSync(resultsDir)) usage(`no results directory ${resultsDir}`);

const listed = readFileSync(scenariosFile, 'utf8').split('\n').map((s) => s.trim()).filter(Boolean);
const scenarios = listed.filter((n) => !notScored.has(n));
const informational = listed.filter((n) => notScored.has(n));
const expected = parseExpected(expectedFile);

// Map each scenario to its result directory: server-<scenario>-<ISO time>.
const dirs = readdirSync(resultsDir);
let failed = 0;
let passedChecks = 0;
let totalChecks = 0;
const problems = [];
for (const name of scenarios) {
  const dir = dirs.find((d) => d.startsWith(`server-${name}-`) && /-\d{4}-\d{2}-\d{2}T/.test(d.slice(`server-${name}`.length)));
  const tolerated = expected.has(name);
  if (!dir || !existsSync(join(resultsDir, dir, 'checks.json'))) {
    console.log(`MISSING  ${name}: no checks.json`);
    if (!tolerated) { failed++; problems.push(`${name}: no checks.json written`); }
    continue;
  }
  let checks;
  try {
    checks = JSON.parse(readFileSync(join(resultsDir, dir, 'checks.json'), 'utf8'));
  } catch (err) {
    console.log(`BROKEN   ${name}: ${err.message}`);
    failed++;
    problems.push(`${name}: unreadable checks.json`);
    continue;
  }
  const graded = checks.filter((c) => c.status === 'SUCCESS' || c.status === 'FAILURE');
  const failures = checks.filter((c) => c.status === 'FAILURE');
  const warnings = checks.filter((c) => c.status === 'WARNING');
  totalChecks += graded.length;
  passedChecks += graded.length - failures.length;
  let verdict = failures.length === 0 ? 'PASS' : tolerated ? 'XFAIL' : 'FAIL';
  console.log(`${verdict.padEnd(8)} ${name}: ${graded.length - failures.length}/${graded.length} checks` +
    (warnings.length ? `, ${warnings.length} warning(s)` : ''));
  for (const w of warnings) console.log(`         warning ${w.id}: ${w.errorMessage ?? w.description}`);
  for (const f of failures) {
    console.log(`         failure ${f.id}: ${f.errorMessage ?? f.description}`);
    if (!tolerated) problems.push(`${name}/${f.id}: ${f.errorMessage ?? f.description}`);
  }
  if (failures.length && !tolerated) failed++;
}
// Scenarios the suite does not score: reported, never counted.
let infoPassed = 0;
for (const name of informational) {
  const dir = dirs.find((d) => d.startsWith(`server-${name}-`) && /-\d{4}-\d{2}-\d{2}T/.test(d.slice(`server-${name}`.length)));
  let checks = [];
  try {
    checks = JSON.parse(readFileSync(join(resultsDir, dir, 'checks.json'), 'utf8'));
  } catch {
    console.log(`INFO     ${name} (not scored): no readable checks.json`);
    continue;
  }
  const graded = checks.filter((c) => c.status === 'SUCCESS' || c.status === 'FAILURE');
  const failures = checks.filter((c) => c.status === 'FAILURE');
  if (failures.length === 0) infoPassed++;
  console.log(`INFO     ${name} (not scored): ${graded.length - failures.length}/${graded.length} checks`);
  for (const f of failures) console.log(`         failure ${f.id}: ${f.errorMessage ?? f.description}`);
}
if (informational.length) console.log(`not scored: ${infoPassed}/${informational.length} scenarios passed`);
console.log(`summary: ${scenarios.length - failed}/${scenarios.length} scenarios passed, ${passedChecks}/${totalChecks} checks passed`);
if (failed) {
  for (const p of problems) console.log(`FAILED ${p}`);
  process.exit(1);
}
