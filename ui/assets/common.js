// Shared helpers of the mcpswarm UI. Everything the server sends is shown
// with textContent or as attribute values set through the DOM: app text is
// text, never markup.

/** el builds an element: attrs become properties or attributes, children are nodes or text. */
export function el(tag, attrs = {}, ...children) {
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

/** live opens an SSE stream and calls onData with each parsed event of the given name. */
export function live(url, event, onData) {
  const badge = document.getElementById('live');
  const es = new EventSource(url);
  es.addEventListener('open', () => { if (badge) { badge.textContent = 'live'; badge.className = 'live on'; } });
  es.addEventListener('error', () => {
    if (badge) { badge.textContent = 'reconnecting…'; badge.className = 'live off'; }
    // The browser gives up on a refused stream (401 after the login
    // expired, 403): send the person to sign in again.
    if (es.readyState === EventSource.CLOSED) location.assign(`/ui/login?next=${encodeURIComponent(location.pathname)}`);
  });
  es.addEventListener(event, (m) => onData(JSON.parse(m.data)));
  return es;
}

/** age formats the time since an ISO date, in whole seconds, minutes or hours. */
export function age(iso, now = Date.now()) {
  const s = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

/** clock formats an ISO time as HH:MM:SS.mmm local time. */
export function clock(iso) {
  const d = new Date(iso);
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

// standbys lists a session's in-sync standbys, then those out of sync with
// how long they have been behind (its replication lag).
export function standbys(s) {
  const behind = Object.entries(s.behind || {}).map(([n, since]) => `${n} (behind ${age(since)})`);
  return [...(s.standbys || []), ...behind].join(', ') || '—';
}
