// The session page: the widget tree rendered from the widgets resource (the
// same view the tools are derived from), live over SSE; clicks and typing
// post actions that run as the derived tool calls would.
import { el, live, age, clock, standbys } from './common.js';

const body = document.body;
const sid = body.dataset.session;
const csrf = body.dataset.csrf;
const view = document.getElementById('view');
const log = document.getElementById('log');
const problem = document.getElementById('problem');
const meta = document.getElementById('meta');
const result = document.getElementById('result');
const askBox = document.getElementById('ask');

let rows = {};
// Text typed but not yet sent, by widget id: a re-render keeps it.
const pending = new Map();
const timers = new Map();

// Actions reach the server one at a time, in the order the person made
// them: typing that is still being debounced is sent before a click.
let chain = Promise.resolve();
function act(widget, action, args = {}, approve = false) {
  if (action !== 'type_into') flushTyping();
  const p = chain.then(() => post(widget, action, args, approve));
  chain = p.catch(() => {});
  return p;
}

function flushTyping() {
  for (const [id, t] of timers) {
    clearTimeout(t);
    timers.delete(id);
    sendTyped(id, pending.get(id));
  }
}

async function post(widget, action, args, approve) {
  const res = await fetch(`/ui/api/sessions/${encodeURIComponent(sid)}/act`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
    body: JSON.stringify({ widget, action, args, approve }),
  });
  let r = {};
  try { r = await res.json(); } catch { r = { error: `HTTP ${res.status}` }; }
  if (r.ask) return ask(r.ask, () => post(widget, action, args, true));
  result.textContent = r.ok ? `${r.tool}: ok` : `${r.tool || action}: ${r.refusal || r.error || 'failed'}`;
  result.className = r.ok ? 'hint' : 'error';
  return r;
}

// ask puts an authorizer's Ask to the person in the page.
function ask(prompt, onYes) {
  document.getElementById('ask-text').textContent = prompt;
  askBox.hidden = false;
  return new Promise((resolve) => {
    const done = (yes) => {
      askBox.hidden = true;
      document.getElementById('ask-yes').onclick = null;
      document.getElementById('ask-no').onclick = null;
      if (yes) resolve(onYes());
      else { result.textContent = 'declined'; result.className = 'error'; resolve({}); }
    };
    document.getElementById('ask-yes').onclick = () => done(true);
    document.getElementById('ask-no').onclick = () => done(false);
  });
}

function typed(id, text) {
  pending.set(id, text);
  clearTimeout(timers.get(id));
  timers.set(id, setTimeout(() => { timers.delete(id); sendTyped(id, text); }, 120));
}

async function sendTyped(id, text) {
  await act(id, 'type_into', { text });
  if (pending.get(id) === text && !timers.has(id)) pending.delete(id);
}

const can = (w, a) => Array.isArray(w.actions) && w.actions.includes(a);
const st = (w) => w.state || {};

function attrs(w, extra = {}) {
  return { class: `w w-${w.kind}`, dataset: w.id ? { wid: w.id, kind: w.kind } : { kind: w.kind }, ...extra };
}

function textField(w, tag) {
  const s = st(w);
  const masked = s.masked === true || w.kind === 'password_field';
  const input = el(tag, {
    type: tag === 'input' ? (masked ? 'password' : 'text') : undefined,
    placeholder: s.placeholder || undefined,
    autocomplete: 'off',
    disabled: !can(w, 'type_into'),
    value: pending.has(w.id) ? pending.get(w.id) : (masked ? '' : (s.value ?? '')),
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
    el('div', { class: 'buttons' },
      el('button', { type: 'button', text: 'Confirm', disabled: !can(w, 'confirm'), onclick: () => act(w.id, 'confirm') }),
      el('button', { type: 'button', text: 'Dismiss', disabled: !can(w, 'dismiss'), onclick: () => act(w.id, 'dismiss') }))),
  table: (w) => table(w),
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

function kids(w) { return (w.children || []).map(render); }

function render(w) {
  const r = renderers[w.kind];
  return r ? r(w) : el('div', attrs(w), kids(w));
}

function table(w) {
  const s = st(w);
  const data = rows[w.id] || {};
  const cols = s.columns || [];
  const sort = s.sort || {};
  return el('table', attrs(w, { class: `w w-table grid` }),
    el('thead', {}, el('tr', {}, cols.map((c) => el('th', {},
      c.sortable && can(w, 'sort')
        ? el('button', { type: 'button', class: 'link', text: c.title + (sort.column === c.key ? (sort.direction === 'desc' ? ' ▼' : ' ▲') : ''),
          onclick: () => act(w.id, 'sort', { column: c.key, direction: sort.column === c.key && sort.direction !== 'desc' ? 'desc' : 'asc' }) })
        : c.title)))),
    el('tbody', {}, (data.rows || []).map((r) => el('tr', {
      class: r.key === s.selected ? 'selected' : undefined, dataset: { key: r.key },
      onclick: can(w, 'select_row') ? () => act(w.id, 'select_row', { key: r.key }) : undefined,
    }, cols.map((c) => el('td', { text: r.cells?.[c.key] ?? '' }))))),
    el('caption', { class: 'hint', text: `${s.total} rows` }));
}

function treeItems(w, items) {
  return el('ul', {}, items.map((it) => el('li', { class: it.id === st(w).selected ? 'selected' : undefined },
    it.has_children ? el('button', { type: 'button', class: 'link', text: it.expanded ? '▾' : '▸', disabled: !can(w, 'expand'),
      onclick: () => act(w.id, it.expanded ? 'collapse' : 'expand', { node: it.id }) }) : el('span', { class: 'leaf', text: '·' }),
    el('button', { type: 'button', class: 'link', text: it.label, disabled: !can(w, 'select_node'), onclick: () => act(w.id, 'select_node', { node: it.id }) }),
    it.children ? treeItems(w, it.children) : null)));
}

const sourceName = { agent: 'agent via MCP', page: 'person via page' };

function show(v) {
  rows = v.rows || {};
  const s = v.session;
  meta.textContent = s.app ? `${s.app} · owner ${s.owner} · on node ${s.node} · epoch ${s.epoch || 0} · standbys ${standbys(s)} · ${age(s.created)}` : '';
  problem.hidden = !v.problem;
  problem.textContent = v.problem || '';
  // Keep focus and caret in the field the person is typing in.
  const a = document.activeElement;
  const focused = a && a.dataset && a.dataset.wid ? { wid: a.dataset.wid, start: a.selectionStart, end: a.selectionEnd } : null;
  view.replaceChildren(...(v.widgets ? [render(v.widgets)] : []));
  if (focused) {
    const n = view.querySelector(`input[data-wid="${CSS.escape(focused.wid)}"], textarea[data-wid="${CSS.escape(focused.wid)}"]`);
    if (n) { n.focus(); try { n.setSelectionRange(focused.start, focused.end); } catch { /* not a text field */ } }
  }
  log.replaceChildren(...v.actions.slice().reverse().map((e) => el('li', { class: `src-${e.source}${e.error ? ' failed' : ''}`, dataset: { source: e.source } },
    el('time', { text: clock(e.at) }), ' ',
    el('span', { class: 'src', text: sourceName[e.source] || e.source }), ' ',
    el('b', { class: 'principal', text: e.principal }), ' ',
    el('code', { class: 'tool', text: e.tool }),
    el('span', { class: 'hint', text: ` via node ${e.node}` }),
    e.error ? el('div', { class: 'error', text: e.error }) : null)));
}

live(`/ui/api/sessions/${encodeURIComponent(sid)}`, 'view', show);
