package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/rpcwire"
)

// tally is what all soak clients did, counted atomically.
type tally struct {
	cycles     atomic.Int64 // sessions started, driven, verified and stopped
	calls      atomic.Int64 // answered requests (MCP and DELETE)
	clicks     atomic.Int64 // acknowledged counter clicks
	typed      atomic.Int64 // acknowledged type_into calls
	verified   atomic.Int64 // sessions whose model held every acknowledged write
	lagRetries atomic.Int64 // unexpected answers: the node asked did not know the client's session or its tool yet
	behind     atomic.Int64 // expected answers: 503 Retry-After from a node behind a peer, retried

	mu         sync.Mutex
	unexpected []string // the first unexpected errors, for the report
	nUnexp     int64
	lost       []string // sessions whose model lacked an acknowledged write
	nLost      int64
}

const keepErrors = 20

func (t *tally) unexpectedErr(what string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nUnexp++
	if len(t.unexpected) < keepErrors {
		t.unexpected = append(t.unexpected, fmt.Sprintf("%s: %v", what, err))
	}
}

func (t *tally) lostWrite(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nLost++
	if len(t.lost) < keepErrors {
		t.lost = append(t.lost, what)
	}
}

// worker is one soak client: its own principal (token) and its own HTTP
// connections to every node.
type worker struct {
	idx   int
	token string
	urls  []string // every node's /mcp
	hc    *http.Client
	rng   *rand.Rand
	think time.Duration // mean pause between calls
	tag   byte          // first letter of the session ids: one id space per phase
	lat   *latencies
	t     *tally
	seq   int
}

func (w *worker) url() string { return w.urls[w.rng.IntN(len(w.urls))] }

// pause waits a random think time (uniform on [0, 2·mean]).
func (w *worker) pause(ctx context.Context) {
	if w.think <= 0 {
		return
	}
	d := time.Duration(w.rng.Int64N(int64(2 * w.think)))
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// run repeats session cycles until the deadline; a cycle under way when it
// passes is finished, so every session the client started is stopped.
func (w *worker) run(ctx context.Context, deadline time.Time) {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		w.cycle(ctx)
		w.pause(ctx)
	}
	w.hc.CloseIdleConnections()
}

// cycle opens an MCP connection on a random node, starts a session through
// a random node, drives it through random nodes, reads its model back and
// checks every acknowledged write is in it, stops it and closes the
// connection.
func (w *worker) cycle(ctx context.Context) {
	w.seq++
	c := &conn{hc: w.hc, token: w.token, behind: &w.t.behind}
	if err := w.timed(func() error { return c.initialize(ctx, w.url()) }); err != nil {
		w.t.unexpectedErr("initialize", err)
		return
	}
	defer func() {
		if err := w.timed(func() error { return c.close(ctx, w.url()) }); err != nil {
			w.t.unexpectedErr("DELETE", err)
		}
	}()
	// Ids are one namespace across principals: the tag, three base-36 digits
	// of the client and three of its cycle (7 characters, the maximum).
	id := string(w.tag) + base36(w.idx, 3) + base36(w.seq%46656, 3)
	app := "counter"
	if w.rng.IntN(4) == 0 {
		app = "login"
	}
	w.pause(ctx)
	if _, err := w.call(ctx, c, time.Time{}, "swarm_start", map[string]any{"app": app, "id": id}); err != nil {
		w.t.unexpectedErr("swarm_start "+id, err)
		return
	}
	started := time.Now()
	var ok bool
	if app == "counter" {
		ok = w.driveCounter(ctx, c, id, started)
	} else {
		ok = w.driveLogin(ctx, c, id, started)
	}
	if ok {
		w.t.verified.Add(1)
	}
	w.pause(ctx)
	if _, err := w.call(ctx, c, started, "swarm_stop", map[string]any{"id": id}); err != nil {
		w.t.unexpectedErr("swarm_stop "+id, err)
		return
	}
	w.t.cycles.Add(1)
}

// driveCounter clicks + a random number of times and checks the count.
func (w *worker) driveCounter(ctx context.Context, c *conn, id string, started time.Time) bool {
	acked := 0
	for range 3 + w.rng.IntN(10) {
		w.pause(ctx)
		if _, err := w.call(ctx, c, started, id+".inc.click", nil); err != nil {
			w.t.unexpectedErr(id+".inc.click", err)
			continue
		}
		acked++
		w.t.clicks.Add(1)
	}
	w.pause(ctx)
	var m struct {
		Model struct {
			Count *int `json:"count"`
		} `json:"model"`
	}
	if err := w.getModel(ctx, c, id, started, &m); err != nil {
		w.t.unexpectedErr("swarm_get_model "+id, err)
		return false
	}
	if m.Model.Count == nil || *m.Model.Count != acked {
		got := "no count"
		if m.Model.Count != nil {
			got = strconv.Itoa(*m.Model.Count)
		}
		w.t.lostWrite(fmt.Sprintf("counter %s: %d clicks acknowledged, model says %s", id, acked, got))
		return false
	}
	return true
}

// driveLogin types into the username field several times and checks the
// model holds the last acknowledged text.
func (w *worker) driveLogin(ctx context.Context, c *conn, id string, started time.Time) bool {
	last := ""
	for i := range 2 + w.rng.IntN(5) {
		w.pause(ctx)
		text := fmt.Sprintf("user-%d-%d-%d", w.idx, w.seq, i)
		if _, err := w.call(ctx, c, started, id+".username.type_into", map[string]any{"text": text}); err != nil {
			w.t.unexpectedErr(id+".username.type_into", err)
			continue
		}
		last = text
		w.t.typed.Add(1)
	}
	w.pause(ctx)
	var m struct {
		Model struct {
			Username *string `json:"username"`
		} `json:"model"`
	}
	if err := w.getModel(ctx, c, id, started, &m); err != nil {
		w.t.unexpectedErr("swarm_get_model "+id, err)
		return false
	}
	if m.Model.Username == nil || *m.Model.Username != last {
		got := "no username"
		if m.Model.Username != nil {
			got = strconv.Quote(*m.Model.Username)
		}
		w.t.lostWrite(fmt.Sprintf("login %s: last acknowledged text %q, model says %s", id, last, got))
		return false
	}
	return true
}

func (w *worker) getModel(ctx context.Context, c *conn, id string, started time.Time, into any) error {
	raw, err := w.call(ctx, c, started, "swarm_get_model", map[string]any{"id": id})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("reading the model: %w", err)
	}
	return nil
}

// call calls a tool through a random node. A node answering that it does
// not know the session, or its tool, is an unexpected error: a start and a
// call that changed the tool set are answered only once every live peer
// has them (docs/ARCHITECTURE.md, "Consistency of connection state"). Before that
// guarantee this answer was expected within 30 s of the start and retried;
// it is still counted apart (started zero: a call before any start).
func (w *worker) call(ctx context.Context, c *conn, started time.Time, name string, args map[string]any) (json.RawMessage, error) {
	var res json.RawMessage
	err := w.timed(func() error {
		var err error
		res, err = c.callTool(ctx, w.url(), name, args)
		return err
	})
	if err != nil && !started.IsZero() && notYetReplicated(err) {
		w.t.lagRetries.Add(1)
	}
	return res, err
}

// timed runs one request and records its latency, or its failure.
func (w *worker) timed(f func() error) error {
	t0 := time.Now()
	err := f()
	if err != nil {
		w.lat.failed()
		return err
	}
	w.lat.add(time.Since(t0))
	w.t.calls.Add(1)
	return nil
}

// notYetReplicated reports whether err is a node's answer for a session it
// has not heard of, or whose tools it has not heard of yet: the tool is
// unknown there, the session is "not running (or is not yours)", or the
// session "has no tool" of that name.
func notYetReplicated(err error) bool {
	var te *toolError
	if errors.As(err, &te) {
		return strings.Contains(te.Text, "not running") || strings.Contains(te.Text, "has no tool")
	}
	var re *rpcwire.Error
	if errors.As(err, &re) {
		return strings.Contains(re.Message, "not found") || strings.Contains(re.Message, "not running")
	}
	return false
}

// base36 writes n in base 36 with at least width digits.
func base36(n, width int) string {
	s := strconv.FormatInt(int64(n), 36)
	for len(s) < width {
		s = "0" + s
	}
	return s
}
