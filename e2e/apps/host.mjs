// A minimal MCP Apps host for the Go browser test (e2e/apps_test.go), built
// as the extension's basic-host example is: the host page embeds the View in
// a sandboxed iframe and talks to it through the extension's own AppBridge
// (@modelcontextprotocol/ext-apps/app-bridge); the host's MCP client is the
// TypeScript SDK's, here in Node (the page reaches it through an exposed
// function, as a host's UI reaches its backend). The page is served from a
// made-up origin by request interception, so nothing listens on a socket.
//
// Protocol: as e2e/ui/driver.mjs, one JSON request per stdin line
// {id, op, ...}, one JSON answer per stdout line {id, ok, value?, error?};
// requests run concurrently. Times are wall-clock ms (Date.now()).
import { chromium } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.join(here, '..', 'node_modules');
const ORIGIN = 'http://apps-host.test';
const EXT = 'io.modelcontextprotocol/ui';
const MIME = 'text/html;profile=mcp-app';

// The browser resolves the app-bridge's bare imports through this map.
const importMap = {
  imports: {
    '@modelcontextprotocol/ext-apps/app-bridge': '/m/@modelcontextprotocol/ext-apps/dist/src/app-bridge.js',
    '@modelcontextprotocol/client': '/m/@modelcontextprotocol/client/dist/index.mjs',
    '@modelcontextprotocol/client/_shims': '/m/@modelcontextprotocol/client/dist/shimsBrowser.mjs',
    '@modelcontextprotocol/core': '/m/@modelcontextprotocol/core/dist/index.mjs',
    '@modelcontextprotocol/core/internal': '/m/@modelcontextprotocol/core/dist/internal.mjs',
    'zod': '/m/zod/index.js',
    'zod/v4': '/m/zod/v4/index.js',
    'eventsource': '/m/eventsource/dist/index.js',
    'eventsource-parser': '/m/eventsource-parser/dist/index.js',
    'eventsource-parser/stream': '/m/eventsource-parser/dist/stream.js',
    'pkce-challenge': '/m/pkce-challenge/dist/index.browser.js',
    'jose': '/m/jose/dist/webapi/index.js',
  },
};

const hostPage = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>mcpswarm test host</title>
<script type="importmap">${JSON.stringify(importMap)}</script>
<style>
body { font: 14px system-ui, sans-serif; margin: 1em; background: #eef1f5; }
#apps iframe { width: 640px; border: 1px solid #b9c1ca; border-radius: 8px; background: #fff; display: block; }
#ask { background: #fff6e0; border: 1px solid #e6c36b; padding: .6em 1em; margin: .6em 0; width: 640px; }
h1 { font-size: 1.1em; }
</style></head>
<body>
<h1>MCP Apps test host <small id="who"></small></h1>
<div id="ask" hidden><p id="ask-text"></p><button id="ask-yes">Approve</button> <button id="ask-no">Decline</button></div>
<div id="apps"></div>
<script type="module">
import { AppBridge, PostMessageTransport } from '@modelcontextprotocol/ext-apps/app-bridge';

// cspOf turns a resource's _meta.ui.csp into a policy, as hosts do: what
// is not declared is denied.
function cspOf(csp = {}) {
  const list = (xs, none) => (xs && xs.length ? xs.join(' ') : none);
  return [
    "default-src 'none'",
    "script-src 'unsafe-inline' " + list(csp.resourceDomains, ''),
    "style-src 'unsafe-inline' " + list(csp.resourceDomains, ''),
    'img-src data: ' + list(csp.resourceDomains, ''),
    'connect-src ' + list(csp.connectDomains, "'none'"),
    'frame-src ' + list(csp.frameDomains, "'none'"),
    'base-uri ' + list(csp.baseUriDomains, "'none'"),
  ].join('; ');
}

window.mount = async ({ html, meta, args, result, who }) => {
  document.getElementById('who').textContent = who;
  if (window.bridge) await window.unmount();
  const iframe = document.createElement('iframe');
  iframe.name = 'app';
  iframe.setAttribute('sandbox', 'allow-scripts');
  document.getElementById('apps').append(iframe);
  const bridge = new AppBridge(null, { name: 'mcpswarm-test-host', version: '1.0.0' }, {
    serverTools: {}, serverResources: {}, logging: {}, updateModelContext: { text: {} },
  }, { hostContext: { theme: 'light', displayMode: 'inline', locale: 'en' } });
  bridge.oncalltool = (params) => window.mcpHost('tools/call', params);
  bridge.onreadresource = (params) => window.mcpHost('resources/read', params);
  bridge.onupdatemodelcontext = async (params) => { await window.mcpHost('ui/update-model-context', params); return {}; };
  bridge.onloggingmessage = (params) => { window.mcpHost('log', params); };
  bridge.onsizechange = ({ height }) => { if (height) iframe.style.height = height + 'px'; window.mcpHost('size', { height }); };
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  const doc = html.replace('<head>', '<head><meta http-equiv="Content-Security-Policy" content="' + cspOf(meta && meta.ui && meta.ui.csp) + '">');
  iframe.srcdoc = doc;
  await initialized;
  await bridge.sendToolInput({ arguments: args || {} });
  await bridge.sendToolResult(result);
  window.bridge = bridge;
  return true;
};

window.unmount = async () => {
  const r = await window.bridge.teardownResource({});
  await window.bridge.close();
  window.bridge = null;
  document.querySelector('#apps iframe').remove();
  return r;
};

// askPerson puts an elicitation from the server to the person.
window.askPerson = (message) => new Promise((resolve) => {
  const box = document.getElementById('ask');
  document.getElementById('ask-text').textContent = message;
  box.hidden = false;
  const done = (yes) => { box.hidden = true; resolve(yes); };
  document.getElementById('ask-yes').onclick = () => done(true);
  document.getElementById('ask-no').onclick = () => done(false);
});
window.hostReady = true;
</script>
</body></html>`;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic',
    '--no-first-run', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});

const hosts = new Map();
function hostOf(name) {
  const h = hosts.get(name);
  if (!h) throw new Error(`no host ${name}`);
  return h;
}
function appFrame(h) {
  const f = h.page.frames().find((x) => x.name() === 'app');
  if (!f) throw new Error('the app frame is not mounted');
  return f;
}

const types = { '.js': 'text/javascript', '.mjs': 'text/javascript' };

const ops = {
  // open connects a host: its MCP client (declaring the extension) and its page.
  async open({ host: name, url, token }) {
    const client = new Client({ name: 'mcpswarm-apps-test-host', version: '1.0.0' },
      { capabilities: { elicitation: { form: {} }, extensions: { [EXT]: { mimeTypes: [MIME] } } } });
    const h = { client, modelContext: [], calls: [], asks: [], sizes: [], offOrigin: [], received: [] };
    const context = await browser.newContext({ viewport: { width: 720, height: 900 } });
    await context.route('**/*', async (route) => {
      const u = new URL(route.request().url());
      if (u.origin !== ORIGIN) {
        // Nothing of the host or the app may leave the page.
        h.offOrigin.push(route.request().url());
        return route.abort();
      }
      if (u.pathname === '/') return route.fulfill({ status: 200, contentType: 'text/html', body: hostPage });
      if (u.pathname.startsWith('/m/')) {
        const file = path.join(modules, path.normalize(u.pathname.slice(3)));
        if (!file.startsWith(modules)) return route.fulfill({ status: 403 });
        try {
          return route.fulfill({ status: 200, contentType: types[path.extname(file)] || 'application/octet-stream', body: await readFile(file) });
        } catch {
          return route.fulfill({ status: 404 });
        }
      }
      return route.fulfill({ status: 404 });
    });
    h.page = await context.newPage();
    h.page.on('pageerror', (e) => process.stderr.write(`[${name}] page error: ${e.message}\n`));
    h.page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') process.stderr.write(`[${name}] console ${m.type()}: ${m.text()}\n`); });
    h.page.on('request', (r) => { if (r.frame() && r.frame().name() === 'app') h.offOrigin.push(`app: ${r.url()}`); });
    await h.page.exposeFunction('mcpHost', async (method, params) => {
      switch (method) {
        case 'tools/call': {
          const t0 = Date.now();
          const r = await client.callTool(params, undefined, { timeout: 60000 });
          h.calls.push({ name: params.name, at: t0, ms: Date.now() - t0, isError: !!r.isError });
          h.received.push(JSON.stringify(r));
          if (h.received.length > 5000) h.received.shift();
          return r;
        }
        case 'resources/read': return client.readResource(params);
        case 'ui/update-model-context': h.modelContext.push(params); return {};
        case 'size': h.sizes.push(params); return {};
        default: return {};
      }
    });
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      const message = req.params.message;
      h.asks.push(message);
      const yes = await h.page.evaluate((m) => window.askPerson(m), message);
      if (!yes) return { action: 'decline' };
      const content = {};
      for (const [k, v] of Object.entries(req.params.requestedSchema?.properties || {})) if (v.type === 'boolean') content[k] = true;
      return { action: 'accept', content };
    });
    const transport = new StreamableHTTPClientTransport(new URL(url + '/mcp'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
    await client.connect(transport);
    await h.page.goto(ORIGIN + '/');
    await h.page.waitForFunction(() => window.hostReady === true);
    hosts.set(name, h);
    return client.getServerCapabilities()?.extensions?.[EXT] ? true : false;
  },
  // show calls tool as a host does when the model calls it: the tool's
  // _meta.ui.resourceUri names the View, which is read and mounted, then
  // given the call's input and result. value: what was read.
  async show({ host: name, tool, args, who }) {
    const h = hostOf(name);
    const { tools } = await h.client.listTools();
    const def = tools.find((t) => t.name === tool);
    const uri = def?._meta?.ui?.resourceUri;
    if (!uri) throw new Error(`${tool} names no UI resource: ${JSON.stringify(def?._meta)}`);
    const res = await h.client.readResource({ uri });
    const content = res.contents[0];
    const result = await h.client.callTool({ name: tool, arguments: args || {} });
    await h.page.evaluate((p) => window.mount(p), { html: content.text, meta: content._meta, args, result, who: who || name });
    return { uri, mimeType: content.mimeType, meta: content._meta, result, tools };
  },
  // wait resolves when js (an expression) is truthy in the app frame;
  // value: the wall-clock time it was first seen true.
  async wait({ host: name, js, timeout }) {
    const predicate = new Function(`return (${js});`);
    await appFrame(hostOf(name)).waitForFunction(predicate, undefined, { timeout: timeout || 10000, polling: 5 });
    return Date.now();
  },
  async eval({ host: name, js }) { return appFrame(hostOf(name)).evaluate(js); },
  async click({ host: name, selector }) { await appFrame(hostOf(name)).click(selector); return Date.now(); },
  async type({ host: name, selector, text }) { await appFrame(hostOf(name)).locator(selector).pressSequentially(text, { delay: 10 }); return true; },
  async hostClick({ host: name, selector }) { await hostOf(name).page.click(selector); return true; },
  async hostWait({ host: name, js, timeout }) {
    const predicate = new Function(`return (${js});`);
    await hostOf(name).page.waitForFunction(predicate, undefined, { timeout: timeout || 10000, polling: 5 });
    return Date.now();
  },
  async state({ host: name }) {
    const h = hostOf(name);
    return { modelContext: h.modelContext, calls: h.calls, asks: h.asks, sizes: h.sizes, offOrigin: h.offOrigin };
  },
  // received counts the answers the app got through the host that contain text.
  async received({ host: name, text }) { return hostOf(name).received.filter((r) => r.includes(text)).length; },
  async teardown({ host: name }) { return hostOf(name).page.evaluate(() => window.unmount()); },
  async screenshot({ host: name, path: file }) { await hostOf(name).page.screenshot({ path: file, fullPage: true }); return file; },
};

const rl = createInterface({ input: process.stdin });
const reply = (m) => process.stdout.write(JSON.stringify(m) + '\n');
let closing = false;
async function close() {
  if (closing) return;
  closing = true;
  for (const h of hosts.values()) { try { await h.client.close(); } catch { /* gone */ } }
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
