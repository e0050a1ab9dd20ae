// Drives headless Chromium for the Go browser tests (e2e/ui_test.go).
// Protocol: one JSON request per stdin line {id, op, ...}; one JSON answer
// per stdout line {id, ok, value?, error?}. Requests run concurrently, so a
// test can start a wait, act elsewhere, then collect the wait's result.
// Times are wall-clock milliseconds (Date.now()) so Go can compare them
// with its own clock on the same machine.
import { chromium } from 'playwright-core';
import { createInterface } from 'node:readline';

// Playwright gives the browser a fresh, empty profile directory of its own
// (and removes it on close).
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic',
    '--no-first-run', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
// Each named person gets an isolated context (own cookies).
const contexts = new Map();
const pages = new Map();

async function contextFor(person) {
  if (!contexts.has(person)) contexts.set(person, await browser.newContext({ viewport: { width: 1280, height: 800 } }));
  return contexts.get(person);
}

async function page(name) {
  const p = pages.get(name);
  if (!p) throw new Error(`no page ${name}`);
  return p;
}

const ops = {
  async open({ page: name, person }) {
    const ctx = await contextFor(person || name);
    const p = await ctx.newPage();
    p.on('pageerror', (e) => process.stderr.write(`[${name}] page error: ${e.message}\n`));
    p.on('console', (m) => { if (m.type() === 'error') process.stderr.write(`[${name}] console: ${m.text()}\n`); });
    pages.set(name, p);
    return true;
  },
  async goto({ page: name, url }) {
    const p = await page(name);
    // Chromium aborts a navigation with ERR_NETWORK_CHANGED when any
    // interface on the machine changes (other jobs create and remove
    // network namespaces here); a GET is safe to repeat.
    for (let attempt = 1; ; attempt++) {
      try {
        const r = await p.goto(url, { waitUntil: 'domcontentloaded' });
        return r ? r.status() : 0;
      } catch (e) {
        if (attempt >= 5 || !String(e && e.message).includes('ERR_NETWORK_CHANGED')) throw e;
        process.stderr.write(`[${name}] retrying ${url} after ERR_NETWORK_CHANGED\n`);
      }
    }
  },
  async fill({ page: name, selector, text }) {
    await (await page(name)).fill(selector, text);
    return true;
  },
  async type({ page: name, selector, text }) {
    await (await page(name)).locator(selector).pressSequentially(text, { delay: 15 });
    return true;
  },
  async click({ page: name, selector }) {
    await (await page(name)).click(selector);
    return true;
  },
  async submit({ page: name, selector }) {
    const p = await page(name);
    await Promise.all([p.waitForNavigation({ waitUntil: 'domcontentloaded' }), p.click(selector)]);
    return p.url();
  },
  // wait resolves when the expression is truthy in the page; value is the
  // wall-clock time (ms) it was first seen true.
  async wait({ page: name, js, timeout }) {
    const p = await page(name);
    // A function, not a string: Playwright evaluates a string predicate
    // with eval, which the UI's Content-Security-Policy forbids.
    const predicate = new Function(`return (${js});`);
    await p.waitForFunction(predicate, undefined, { timeout: timeout || 10000, polling: 10 });
    return Date.now();
  },
  async eval({ page: name, js }) {
    return (await page(name)).evaluate(js);
  },
  async close({ page: name }) {
    await (await page(name)).close();
    pages.delete(name);
    return true;
  },
  async screenshot({ page: name, path }) {
    await (await page(name)).screenshot({ path, fullPage: true });
    return path;
  },
};

const rl = createInterface({ input: process.stdin });
const reply = (m) => process.stdout.write(JSON.stringify(m) + '\n');
let closing = false;
async function close() {
  if (closing) return;
  closing = true;
  try { await browser.close(); } catch { /* already gone */ }
  process.exit(0);
}
rl.on('line', (line) => {
  let req;
  try { req = JSON.parse(line); } catch (e) { reply({ id: 0, ok: false, error: `bad request: ${e.message}` }); return; }
  const op = ops[req.op];
  if (!op) { reply({ id: req.id, ok: false, error: `unknown op ${req.op}` }); return; }
  op(req).then((value) => reply({ id: req.id, ok: true, value }), (e) => reply({ id: req.id, ok: false, error: String(e && e.message || e) }));
});
rl.on('close', close);
reply({ id: 0, ok: true, value: 'ready' });
