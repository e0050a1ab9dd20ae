package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp"
)

// keepalive is how often an idle stream sends a comment, so proxies and
// the browser keep it open; it carries no data (the page never polls).
const keepalive = 15 * time.Second

// stream serves Server-Sent Events: the snapshot now, then again after
// every change subscribe reports, skipping snapshots equal to the last one
// sent. Changes arriving while a snapshot is built coalesce into one more.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, event string, snapshot func(context.Context) any, subscribe func(notify func()) (cancel func())) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported by this connection", http.StatusInternalServerError)
		return
	}
	if !h.open() {
		http.Error(w, "the node is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer h.streams.Done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(h.ctx, cancel)
	defer stop()

	changed := make(chan struct{}, 1)
	unsubscribe := subscribe(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	defer unsubscribe()

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()

	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	var last []byte
	for {
		// The credential is checked again before every push: a JWT that
		// expires ends the stream (the page reconnects and is sent to the
		// login page).
		if _, _, err := h.identify(r); err != nil {
			return
		}
		b, err := json.Marshal(snapshot(ctx))
		if err != nil {
			h.log.Error("encoding a UI snapshot", "event", event, "err", err)
			return
		}
		if !bytes.Equal(b, last) {
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
				return
			}
			fl.Flush()
			last = b
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// swarmView is what the swarm page shows.
type swarmView struct {
	Node      string        `json:"node"`
	Principal string        `json:"principal"`
	Admin     bool          `json:"admin"`
	Members   []memberView  `json:"members"`
	Sessions  []sessionMeta `json:"sessions"`
}

type memberView struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Version string `json:"version"`
	Self    bool   `json:"self"`
	// Lag is how many of this node's updates the member has not yet
	// acknowledged (nil: unknown, or this node itself).
	Lag *float64 `json:"lag,omitempty"`
}

// sessionMeta is a session as the pages list it.
type sessionMeta struct {
	ID        string    `json:"id"`
	App       string    `json:"app"`
	Owner     string    `json:"owner"`
	Node      string    `json:"node"`
	Created   time.Time `json:"created"`
	Available bool      `json:"available"`
	// Epoch is the ownership epoch; Standbys the nodes that would take the
	// session over if its owner died.
	Epoch    uint64   `json:"epoch,omitempty"`
	Standbys []string `json:"standbys,omitempty"`
	// Behind names the standbys out of sync, with since when: the
	// session's replication lag.
	Behind map[string]time.Time `json:"behind,omitempty"`
}

func (h *Handler) serveSwarmStream(w http.ResponseWriter, r *http.Request) {
	p := whoFrom(r.Context()).principal
	for _, uri := range []string{"swarm://cluster/members", "swarm://cluster/sessions"} {
		if d := h.allowedRead(r.Context(), p, uri); d.Kind != authz.KindAllow {
			writeJSON(w, http.StatusForbidden, map[string]any{"error": "forbidden", "detail": "reading " + uri + " is not allowed: " + d.Detail()})
			return
		}
	}
	snapshot := func(context.Context) any { return h.swarmView(p) }
	subscribe := func(notify func()) func() {
		return h.cfg.Backend.Watch(func(ev mcp.Event) {
			if ev.Kind == mcp.MembersChanged || ev.Kind == mcp.SessionsChanged {
				notify()
			}
		})
	}
	h.stream(w, r, "swarm", snapshot, subscribe)
}

func (h *Handler) swarmView(p authz.Principal) swarmView {
	v := swarmView{Node: h.cfg.Node, Principal: p.Subject, Admin: p.IsAdmin(), Members: []memberView{}, Sessions: []sessionMeta{}}
	var lag map[string]float64
	if h.cfg.ReplicationLag != nil {
		lag = h.cfg.ReplicationLag()
	}
	for _, m := range h.cfg.Backend.Members() {
		mv := memberView{Name: m.Name, State: m.State, Version: m.Version, Self: m.Self}
		if l, ok := lag[m.Name]; ok && !m.Self {
			mv.Lag = &l
		}
		v.Members = append(v.Members, mv)
	}
	for _, s := range h.cfg.Backend.Sessions(p) {
		v.Sessions = append(v.Sessions, sessionMeta{ID: s.ID, App: s.App, Owner: s.Principal, Node: s.Owner, Created: s.Created.UTC(), Available: s.Available, Epoch: s.Handoff, Standbys: s.Standbys, Behind: s.Behind})
	}
	sort.Slice(v.Sessions, func(i, k int) bool {
		if v.Sessions[i].Node != v.Sessions[k].Node {
			return v.Sessions[i].Node < v.Sessions[k].Node
		}
		return v.Sessions[i].ID < v.Sessions[k].ID
	})
	return v
}

// sessionView is what the session page shows.
type sessionView struct {
	Session sessionMeta     `json:"session"`
	Widgets json.RawMessage `json:"widgets,omitempty"`
	// Rows holds the displayed rows of each table, by widget id.
	Rows    map[string]json.RawMessage `json:"rows,omitempty"`
	Actions []Action                   `json:"actions"`
	// Problem says why the view is missing (the owner is unreachable, the
	// session stopped); the page shows it instead of stale widgets.
	Problem string `json:"problem,omitempty"`
}

// journalShown is how many actions the event log shows.
const journalShown = 100

func (h *Handler) serveSessionStream(w http.ResponseWriter, r *http.Request) {
	p := whoFrom(r.Context()).principal
	id := r.PathValue("id")
	if _, err := h.visible(r, p, id); err != nil {
		writeJSON(w, http.StatusForbidden, map[string]any{"error": "forbidden", "detail": err.Error()})
		return
	}
	snapshot := func(ctx context.Context) any { return h.sessionView(ctx, p, id) }
	subscribe := func(notify func()) func() {
		stopWatch := h.cfg.Backend.Watch(func(ev mcp.Event) {
			if ev.Session == id || ev.Kind == mcp.MembersChanged {
				notify()
			}
		})
		stopJournal := h.cfg.Journal.Watch(func(sid string) {
			if sid == id {
				notify()
			}
		})
		return func() { stopWatch(); stopJournal() }
	}
	h.stream(w, r, "view", snapshot, subscribe)
}

// readTimeout bounds the reads one snapshot makes of a remote owner.
const readTimeout = 5 * time.Second

func (h *Handler) sessionView(ctx context.Context, p authz.Principal, id string) sessionView {
	v := sessionView{Actions: h.cfg.Journal.Actions(id, journalShown)}
	if v.Actions == nil {
		v.Actions = []Action{}
	}
	info, ok := h.cfg.Backend.Lookup(id)
	if !ok || !authz.Owns(p, info.Principal) {
		v.Session = sessionMeta{ID: id}
		v.Problem = "The session is not running."
		return v
	}
	v.Session = sessionMeta{ID: id, App: info.App, Owner: info.Principal, Node: info.Owner, Created: info.Created.UTC(), Available: info.Available, Epoch: info.Handoff, Standbys: info.Standbys, Behind: info.Behind}
	if !info.Available {
		v.Problem = "The owner node " + info.Owner + " is unavailable; the view returns when it does."
		return v
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	c := h.authzContext(p)
	raw, err := h.cfg.Backend.ReadResource(ctx, c, id, "widgets")
	if err != nil {
		v.Problem = "Reading the view failed: " + err.Error()
		return v
	}
	v.Widgets = raw
	v.Rows = h.tableRows(ctx, c, id, raw)
	return v
}

// tableRows reads the displayed rows of each table in the tree through its
// get_rows tool, as an agent would, when the tool authorizer allows it.
func (h *Handler) tableRows(ctx context.Context, c authz.Context, id string, tree json.RawMessage) map[string]json.RawMessage {
	var root widget
	if json.Unmarshal(tree, &root) != nil {
		return nil
	}
	var out map[string]json.RawMessage
	root.walk(func(n *widget) {
		if n.Kind != "table" || n.ID == "" || !n.offers("get_rows") {
			return
		}
		tool := id + "." + n.ID + ".get_rows"
		args := map[string]any{"limit": 100}
		if authz.SafeDecide(ctx, h.cfg.Guard.Tools, tool, args, c).Kind != authz.KindAllow {
			return
		}
		res, err := h.cfg.Backend.Call(ctx, c, id, tool, args)
		if err != nil || res.IsError {
			return
		}
		b, err := json.Marshal(res.Structured)
		if err != nil {
			return
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		out[n.ID] = b
	})
	return out
}

// widget is the part of the widgets resource the server looks at.
type widget struct {
	Kind     string   `json:"kind"`
	ID       string   `json:"id"`
	Actions  []string `json:"actions"`
	Children []widget `json:"children"`
}

func (w *widget) walk(fn func(*widget)) {
	fn(w)
	for i := range w.Children {
		w.Children[i].walk(fn)
	}
}

func (w *widget) offers(action string) bool {
	for _, a := range w.Actions {
		if a == action {
			return true
		}
	}
	return false
}
