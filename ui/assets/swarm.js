// The swarm page: members and the sessions of each node, live over SSE.
import { el, live, age, standbys } from './common.js';

const members = document.querySelector('#members tbody');
const nodes = document.getElementById('nodes');

function render(v) {
  const byNode = new Map();
  for (const m of v.members) byNode.set(m.name, []);
  for (const s of v.sessions) {
    if (!byNode.has(s.node)) byNode.set(s.node, []);
    byNode.get(s.node).push(s);
  }
  members.replaceChildren(...v.members.map((m) => el('tr', { dataset: { member: m.name, state: m.state } },
    el('td', {}, m.name, m.self ? el('span', { class: 'tag', text: 'this node' }) : null),
    el('td', {}, el('span', { class: `state state-${m.state}`, text: m.state })),
    el('td', { text: m.version || '—' }),
    el('td', { class: 'num lag', title: 'updates of this node the member has not yet acknowledged', text: m.self ? '—' : (m.lag ?? '—') }),
    el('td', { class: 'num', text: (byNode.get(m.name) || []).length }),
  )));
  nodes.replaceChildren(...[...byNode.entries()].map(([name, list]) => el('div', { class: 'node', dataset: { node: name } },
    el('h3', { text: `node ${name}` }),
    list.length === 0 ? el('p', { class: 'hint', text: 'no sessions' }) :
      el('table', { class: 'grid' },
        el('thead', {}, el('tr', {}, el('th', { text: 'Session' }), el('th', { text: 'App' }), el('th', { text: 'Owner' }), el('th', { text: 'Standbys' }), el('th', { text: 'Epoch' }), el('th', { text: 'Age' }))),
        el('tbody', {}, list.map((s) => el('tr', { dataset: { session: s.id } },
          el('td', {}, el('a', { href: `/ui/sessions/${encodeURIComponent(s.id)}`, text: s.id })),
          el('td', { text: s.app }),
          el('td', { class: 'principal', text: s.owner }),
          el('td', { class: 'standbys', text: standbys(s) }),
          el('td', { class: 'num epoch', text: String(s.epoch || 0) }),
          el('td', { class: 'age', dataset: { created: s.created }, text: age(s.created) }),
        )))),
  )));
}

live('/ui/api/swarm', 'swarm', render);
// Ages tick locally: the server is only asked again when something changes.
setInterval(() => {
  for (const td of document.querySelectorAll('td.age')) td.textContent = age(td.dataset.created);
}, 1000);
