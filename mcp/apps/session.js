// The mcpswarm session app (MCP Apps, io.modelcontextprotocol/ui). It runs
// in the host's sandboxed iframe and talks only to the host, over
// postMessage JSON-RPC: it opens no connection of its own (its CSP allows
// none). It learns which session to show from the tool input or result the
// host sends, reads the session through the host with swarm_app_view (a
// long poll: each call waits on the server for the next revision), and
// sends the person's actions back as tools/call <session>.<widget>.<action>,
// which the server gates as it gates an agent's call. Everything the server
// sends is shown as text (textContent, DOM properties), never as markup.
(() => {
  'use strict';
  const PROTOCOL = '2026-01-26';
  const APP = { name: 'mcpswarm-session', version: '1.0.0' };
  const WAIT_MS = 20000;

  const $ = (id) => document.getElementById(id);
  const view = $('view');
  const problem = $('problem');
  const result = $('result');
  const live = $('live');

  // --- JSON-RPC with the host -------------------------------------------
  let nextId = 1;
  const pending = new Map();
  const host = window.parent;

  function send(msg) { host.postMessage(Object.assign({ jsonrpc: '2.0' }, msg), '*'); }
  function request(method, params) {
    const id = nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      send({ id, method, params });
    });
  }
  function notify(method, params) { send({ method, params }); }

  const requestHandlers = {
    'ui/resource-teardown': () => { stopped = true; return {}; },
    ping: () => ({}),
  };
  const notificationHandlers = {
    'ui/notifications/tool-input': (p) => { if (p && p.arguments && typeof p.arguments.id === 'string') show(p.arguments.id); },
    'ui/notifications/tool-result': (p) => toolResult(p || {}),
    'ui/notifications/tool-cancelled': () => { if (!sid) setProblem('The tool call was cancelled.'); },
    'ui/notifications/host-context-changed': (p) => applyContext(p || {}),
  };

  window.addEventListener('message', (e) => {
    if (e.source !== host) return;
    const m = e.data;
    if (!m || m.jsonrpc !== '2.0') return;
    if (m.method === undefined && m.id !== undefined) {
      const p = pending.get(m.id);
      if (!p) return;
      pending.delete(m.id);
      if (m.error) p.reject(new Error(m.error.message || 'request failed'));
      else p.resolve(m.result);
      return;
    }
    if (m.id !== undefined) {
      const h = requestHandlers[m.method];
      if (!h) { send({ id: m.id, error: { code: -32601, message: `method not found: ${m.method}` } }); return; }
      try { send({ id: m.id, result: h(m.params) }); } catch (err) { send({ id: m.id, error: { code: -32603, message: String(err) } }); }
      return;
    }
    const h = notificationHandlers[m.method];
    if (h) h(m.params);
  });

  function applyContext(ctx) {
    if (ctx.theme) document.documentElement.classList.toggle('dark', ctx.theme === 'dark');
  }

  // --- which session ----------------------------------------------------
  let sid = '';
  let stopped = false;
  let revision = '';

  function toolResult(p) {
    const sc = p.structuredContent || {};
    if (typeof sc.id === 'string') { show(sc.id); return; }
    if (!sid) setProblem(p.isError ? textOf(p) || 'The tool call failed.' : 'This result names no session.');
  }

  function show(id) {
    if (!/^[A-Za-z0-9_-]{1,32}$/.test(id) || id === sid) return;
    sid = id;
    revision = '';
    $('sid').textContent = id;
    poll(id);
  }

  // poll keeps the view live: each call returns at once when the view
  // differs from the revision shown, else when it changes (or after WAIT_MS).
  async function poll(id) {
    let failures = 0;
    while (!stopped && sid === id) {
      try {
        const r = await request('tools/call', { name: 'swarm_app_view', arguments: { id, since: revision, wait_ms: revision ? WAIT_MS : 0 } });
        if (sid !== id) return;
        if (r && r.isError) throw new Error(textOf(r) || 'swarm_app_view failed');
        const v = (r && r.structuredContent) || {};
        failures = 0;
        setLive(true);
        if (v.revision !== revision) render(v);
      } catch (err) {
        failures++;
        setLive(false);
        if (failures > 2) setProblem(`Reading the session failed: ${err.message}`);
        await sleep(Math.min(5000, 250 * 2 ** failures));
      }
    }
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  function setLive(on) { live.textContent = on ? 'live' : 'reconnecting…'; live.className = on ? 'live on' : 'live off'; }
  function setProblem(text) { problem.hidden = !text; problem.textContent = text || ''; }
  function textOf(r) { return (r.content || []).filter((c) => c && c.type === 'text').map((c) => c.text).join('\n'); }

  // --- actions ------------------------------------------------------------
  // Actions reach the server one at a time, in the order the person made
  // them; typing still being debounced is sent before a click.
  let chain = Promise.resolve();
  const typedText = new Map();
  const timers = new Map();
  const recent = [];

  function act(widget, action, args = {}) {
    if (action !== 'type_into') flushTyping();
    const p = chain.then(() => call(widget, action, args));
    chain = p.catch(() => {});
    return p;
  }

  async function call(widget, action, args) {
    const tool = `${sid}.${widget}.${action}`;
    let text, ok;
    try {
      const r = await request('tools/call', { name: tool, arguments: args });
      ok = !(r && r.isError);
      text = textOf(r || {});
    } catch (err) {
      ok = false;
      text = err.message;
    }
    result.textContent = `${tool}: ${ok ? 'ok' : text || 'failed'}`;
    result.className = ok ? 'hint' : 'error';
    remember(tool, args, ok, text);
  }

  // remember tells the agent, through the host, what the person did here.
  function remember(tool, args, ok, text) {
    recent.push(`${tool}${Object.keys(args).length ? ' ' + JSON.stringify(args) : ''} -> ${ok ? 'ok' : 'error'}${text ? ': ' + text.slice(0, 300) : ''}`);
    while (recent.length > 10) recent.shift();
    const body = `The person acted in the mcpswarm app of session ${sid} (most recent last):\n` + recent.map((l) => `- ${l}`).join('\n');
    request('ui/update-model-context', { content: [{ type: 'text', text: body }] }).catch(() => {});
  }
  function flushTyping() {
    for (const [id, t] of timers) {
      clearTimeout(t);
      timers.delete(id);
      sendTyped(id, typedText.get(id));
    }
  }
  function typed(id, text) {
    typedText.set(id, text);
    clearTimeout(timers.get(id));
    timers.set(id, setTimeout(() => { timers.delete(id); sendTyped(id, text); }, 150));
  }
  async function sendTyped(id, text) {
    await act(id, 'type_into', { text });
    if (typedText.get(id) === text && !timers.has(id)) typedText.delete(id);
  }

  // --- rendering --------------------------------------------------------
  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = String(v);
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'selected') e[k] = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  const can = (w, a) => Array.isArray(w.actions) && w.actions.includes(a);
  const st = (w) => w.state || {};
  const attrs = (w, extra = {}) => ({ class: `w w-${w.kind}`, dataset: w.id ? { wid: w.id, kind: w.kind } : { kind: w.kind }, ...extra });
  const kids = (w) => (w.children || []).map(renderWidget);

  function textField(w, tag) {
    const s = st(w);
    const masked = s.masked === true || w.kind === 'password_field';
    const input = el(tag, {
      type: tag === 'input' ? (masked ? 'password' : 'text') : undefined,
      placeholder: s.placeholder || undefined,
      autocomplete: 'off',
      disabled: !can(w, 'type_into'),
      value: typedText.has(w.id) ? typedText.get(w.id) : (masked ? '' : (s.value ?? '')),
      oninput: (e) => typed(w.id, e.target.value),
    });
    input.dataset.wid = w.id;
    return el('label', attrs(w), el('span', { class: 'label', text: s.label || w.id }), input);
  }

  const renderers = {
    text: (w) => el('p', attrs(w, { text: st(w).text })),
    button: (w) => el('button', attrs(w, { type: 'button', text: st(w).label || w.id, disabled: !can(w, 'click'), onclick: () => act(w.id, 'click') })),
    text_input: (w) => textField(w, 'input'),
    password_field: (w) => textField(w, 'input'),
    text_area: (w) => textField(w, 'textarea'),
    checkbox: (w) => el('label', attrs(w),
      el('input', { type: 'checkbox', checked: !!st(w).checked, disabled: !can(w, 'toggle'), onchange: () => act(w.id, 'toggle') }),
      el('span', { text: st(w).label || w.id })),
    select_list: (w) => el('label', attrs(w), el('span', { class: 'label', text: st(w).label || w.id }),
      el('select', { disabled: !can(w, 'select'), onchange: (e) => act(w.id, 'select', { index: e.target.selectedIndex }) },
        (st(w).options || []).map((o, i) => el('option', { value: String(i), text: o, selected: i === st(w).index })))),
    menu: (w) => el('ul', attrs(w), (st(w).items || []).map((it, i) =>
      el('li', {}, el('button', { type: 'button', text: it, disabled: !can(w, 'select'), onclick: () => act(w.id, 'select', { index: i }) })))),
    tabs: (w) => el('div', attrs(w, { role: 'tablist' }), (st(w).tabs || []).map((t, i) =>
      el('button', { type: 'button', role: 'tab', text: t, 'aria-selected': String(i === st(w).index), disabled: !can(w, 'select_tab'), onclick: () => act(w.id, 'select_tab', { index: i }) }))),
    modal: (w) => el('div', attrs(w, { role: 'dialog' }),
      el('h3', { text: st(w).title }), el('p', { text: st(w).body }), kids(w),
      el('div', {},
        el('button', { type: 'button', text: 'Confirm', disabled: !can(w, 'confirm'), onclick: () => act(w.id, 'confirm') }),
        el('button', { type: 'button', text: 'Dismiss', disabled: !can(w, 'dismiss'), onclick: () => act(w.id, 'dismiss') }))),
    table: (w) => el('div', attrs(w), el('b', { text: (st(w).columns || []).map((c) => c.title).join(' | ') }),
      el('p', { class: 'hint', text: `${st(w).total ?? 0} rows (ask the agent, or use get_rows)` })),
    tree: (w) => el('div', attrs(w), treeItems(w, st(w).items || [])),
    viewport: (w) => el('div', attrs(w), el('p', { class: 'hint', text: `lines ${st(w).start}–${st(w).end} of ${st(w).total}` }), kids(w)),
    scrubber: (w) => {
      const s = st(w);
      return el('div', attrs(w),
        el('button', { type: 'button', text: s.playing ? 'Pause' : 'Play', disabled: !can(w, s.playing ? 'pause' : 'play'), onclick: () => act(w.id, s.playing ? 'pause' : 'play') }),
        el('input', { type: 'range', min: '0', max: String(s.duration || 0), step: 'any', value: String(s.position || 0), disabled: !can(w, 'seek'),
          onchange: (e) => act(w.id, 'seek', { position: Number(e.target.value) }) }),
        el('span', { class: 'hint', text: `${Number(s.position || 0).toFixed(1)} / ${Number(s.duration || 0).toFixed(1)} s` }));
    },
    chart: (w) => el('div', attrs(w), el('b', { text: st(w).title }), el('span', { class: 'hint', text: ` ${st(w).count} points, min ${st(w).min ?? '—'}, max ${st(w).max ?? '—'}` })),
    progress: (w) => el('label', attrs(w), el('span', { class: 'label', text: st(w).label }), el('progress', { value: st(w).value, max: st(w).max || 1 })),
    status_bar: (w) => el('div', attrs(w, { role: 'status' }), (st(w).items || []).map((t) => el('span', { text: t }))),
    box: (w) => el('fieldset', attrs(w), el('legend', { text: st(w).title }), kids(w)),
  };

  function renderWidget(w) {
    const r = renderers[w.kind];
    return r ? r(w) : el('div', attrs(w), kids(w));
  }

  function treeItems(w, items) {
    return el('ul', {}, items.map((it) => el('li', { class: it.id === st(w).selected ? 'selected' : undefined },
      it.has_children ? el('button', { type: 'button', class: 'link', text: it.expanded ? '▾' : '▸', disabled: !can(w, 'expand'),
        onclick: () => act(w.id, it.expanded ? 'collapse' : 'expand', { node: it.id }) }) : el('span', { text: '·' }),
      el('button', { type: 'button', class: 'link', text: it.label, disabled: !can(w, 'select_node'), onclick: () => act(w.id, 'select_node', { node: it.id }) }),
      it.children ? treeItems(w, it.children) : null)));
  }

  function render(v) {
    revision = v.revision || '';
    const s = v.session || {};
    $('meta').textContent = s.app ? `${s.app} · owner node ${s.owner} · via node ${s.node}` : '';
    setProblem(v.problem || '');
    // Keep focus and caret in the field the person is typing in.
    const a = document.activeElement;
    const focused = a && a.dataset && a.dataset.wid ? { wid: a.dataset.wid, start: a.selectionStart, end: a.selectionEnd } : null;
    view.replaceChildren(...(v.widgets && !v.problem ? [renderWidget(v.widgets)] : []));
    view.dataset.revision = revision;
    if (focused) {
      const n = view.querySelector(`input[data-wid="${CSS.escape(focused.wid)}"], textarea[data-wid="${CSS.escape(focused.wid)}"]`);
      if (n) { n.focus(); try { n.setSelectionRange(focused.start, focused.end); } catch { /* not a text field */ } }
    }
  }

  // --- size and start -----------------------------------------------------
  let lastSize = '';
  new ResizeObserver(() => {
    const r = document.documentElement.getBoundingClientRect();
    const size = { width: Math.ceil(r.width), height: Math.ceil(r.height) };
    const key = `${size.width}x${size.height}`;
    if (key === lastSize) return;
    lastSize = key;
    notify('ui/notifications/size-changed', size);
  }).observe(document.documentElement);

  request('ui/initialize', { appInfo: APP, appCapabilities: { availableDisplayModes: ['inline'] }, protocolVersion: PROTOCOL })
    .then((r) => {
      applyContext((r && r.hostContext) || {});
      notify('ui/notifications/initialized', {});
    })
    .catch((err) => setProblem(`The host refused the app: ${err.message}`));
})();
