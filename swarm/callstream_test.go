package swarm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/internal/poll"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
	"github.com/mcpswarm/mcpswarm/session"
)

// gate is a test app's hold on its caller: "hold" waits in Update until the
// test releases it or the call's context ends, and says which.
type gate struct {
	entered   chan string // a hold began, on this session
	release   chan struct{}
	cancelled chan error // a hold ended by its context, with its error
}

// held waits until a hold has begun on the owner.
func (g *gate) held(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the held call never reached the owner's update")
	}
}

func newGate() *gate {
	return &gate{entered: make(chan string, 8), release: make(chan struct{}), cancelled: make(chan error, 8)}
}

type gateApp struct {
	g *gate
}

type gateModel struct {
	Steps int `json:"steps"`
}

func (a *gateApp) Init() (session.Model, error) { return gateModel{}, nil }

func (a *gateApp) Update(session.Model, session.Msg) (session.Model, error) {
	return nil, errors.New("UpdateContext is the update")
}

func (a *gateApp) UpdateContext(ctx context.Context, m session.Model, msg session.Msg) (session.Model, error) {
	gm := m.(gateModel)
	switch msg {
	case "step":
		report := session.ProgressFrom(ctx)
		for i := range 3 {
			report(float64(i+1), 3, fmt.Sprintf("step %d", i+1))
		}
		gm.Steps++
	case "stuck": // an update that ignores its context
		a.g.entered <- "stuck"
		<-a.g.release
		gm.Steps++
	case "hold":
		a.g.entered <- "held"
		select {
		case <-a.g.release:
			gm.Steps++
		case <-ctx.Done():
			a.g.cancelled <- ctx.Err()
			return nil, ctx.Err()
		}
	}
	return gm, nil
}

func (a *gateApp) View(session.Model) session.Node {
	return session.Column{Items: []session.Node{session.Button{ID: "step", OnClick: "step"}, session.Button{ID: "hold", OnClick: "hold"}, session.Button{ID: "stuck", OnClick: "stuck"}}}
}

var alice = authz.Context{Principal: authz.Principal{Subject: "alice", Authenticated: true}, Transport: authz.TransportStreamableHTTP, Node: "entry"}

// twoNodes starts an owner and an entry node that reach each other; the
// owner runs the gate app as "gate".
func twoNodes(t *testing.T, g *gate, ownerCaps []string) (owner, entry testNode) {
	t.Helper()
	owner = startTestNodeWith(t, "owner", nodeOptions{caps: ownerCaps, apps: map[string]func() session.App{
		"gate": func() session.App { return &gateApp{g: g} },
	}})
	entry = startTestNode(t, "entry", false, owner.cl.Self().GossipAddr)
	awaitPeers(t, owner, entry)
	return owner, entry
}

func startOn(t *testing.T, owner, entry testNode, app string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := owner.sw.Start(context.Background(), alice, app, id); err != nil {
			t.Fatal(err)
		}
		await(t, "the entry node sees session "+id, func() bool { _, ok := entry.sw.locate(id); return ok })
	}
}

// TestForwardedCallsShareOneCallsStream: every call an entry node forwards
// to a peer that advertises the Calls stream rides one stream, however
// many run at once, and each gets its own answer.
func TestForwardedCallsShareOneCallsStream(t *testing.T) {
	owner, entry := twoNodes(t, newGate(), nil)
	ids := []string{"c1", "c2", "c3", "c4"}
	startOn(t, owner, entry, "counter", ids...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := ids[w%len(ids)]
			for range 25 {
				res, err := entry.sw.Call(ctx, alice, id, id+".inc.click", nil)
				if err != nil || res.IsError {
					errs <- fmt.Errorf("click on %s: %+v %v", id, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, id := range ids {
		if m, _ := owner.mgr.Model(id); !strings.Contains(string(m), `"count":100`) {
			t.Errorf("%s after 100 forwarded clicks: %s", id, m)
		}
	}
	if n := entry.sw.streams.opened.Load(); n != 1 {
		t.Errorf("%d Calls streams opened for 400 calls, want 1", n)
	}
	if n := entry.sw.streams.fallbacks.Load(); n != 0 {
		t.Errorf("%d calls went through a stream of their own", n)
	}
}

// TestProgressAndCancelCrossTheCallsStream: a forwarded call's progress
// reaches the caller in order before its result, and a caller that gives
// up cancels the call on the owner; the session serves the next call.
func TestProgressAndCancelCrossTheCallsStream(t *testing.T) {
	g := newGate()
	owner, entry := twoNodes(t, g, nil)
	startOn(t, owner, entry, "gate", "g")
	var mu sync.Mutex
	var got []string
	ctx := session.WithProgress(context.Background(), func(p, total float64, msg string) {
		mu.Lock()
		got = append(got, fmt.Sprintf("%g/%g %s", p, total, msg))
		mu.Unlock()
	})
	if res, err := entry.sw.Call(ctx, alice, "g", "g.step.click", nil); err != nil || res.IsError {
		t.Fatalf("step: %+v %v", res, err)
	}
	mu.Lock()
	want := []string{"1/3 step 1", "2/3 step 2", "3/3 step 3"}
	if !slices.Equal(got, want) {
		t.Errorf("progress %q, want %q", got, want)
	}
	mu.Unlock()

	hold, cancel := context.WithCancel(context.Background())
	answered := make(chan error, 1)
	go func() {
		_, err := entry.sw.Call(hold, alice, "g", "g.hold.click", nil)
		answered <- err
	}()
	g.held(t)
	cancel()
	if err := <-answered; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled forwarded call answered %v", err)
	}
	select {
	case err := <-g.cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the owner's call ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the owner's call was not cancelled")
	}
	if res, err := entry.sw.Call(context.Background(), alice, "g", "g.step.click", nil); err != nil || res.IsError {
		t.Fatalf("a call after the cancelled one: %+v %v", res, err)
	}
	if m, _ := owner.mgr.Model("g"); !strings.Contains(string(m), `"steps":2`) {
		t.Errorf("model %s, want the two steps and not the cancelled hold", m)
	}
	if n := entry.sw.streams.opened.Load(); n != 1 {
		t.Errorf("%d streams opened, want 1", n)
	}
}

// TestAForwardedCallStuckInItsUpdateHoldsOnlyItself: the owner runs each
// call on the goroutine that read it, yet a call whose update never
// returns still answers its client at the client's deadline ("may have applied"), other sessions' calls on the same stream
// go on meanwhile, and the session answers again once the update ends.
func TestAForwardedCallStuckInItsUpdateHoldsOnlyItself(t *testing.T) {
	g := newGate()
	owner, entry := twoNodes(t, g, nil)
	startOn(t, owner, entry, "gate", "g", "h")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		_, err := entry.sw.Call(ctx, alice, "g", "g.stuck.click", nil)
		answered <- err
	}()
	g.held(t)
	select {
	case err := <-answered:
		if !errors.Is(err, ErrMayHaveApplied) {
			t.Fatalf("a stuck forwarded call answered %v, want one that may have applied", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a stuck forwarded call never answered its client")
	}
	if res, err := entry.sw.Call(context.Background(), alice, "h", "h.step.click", nil); err != nil || res.IsError {
		t.Fatalf("another session's call while g is stuck: %+v %v", res, err)
	}
	close(g.release)
	await(t, "g's stuck update applied", func() bool {
		m, _ := owner.mgr.Model("g")
		return strings.Contains(string(m), `"steps":1`)
	})
	if res, err := entry.sw.Call(context.Background(), alice, "g", "g.step.click", nil); err != nil || res.IsError {
		t.Fatalf("g after its stuck update: %+v %v", res, err)
	}
	if n := entry.sw.streams.opened.Load(); n != 1 {
		t.Errorf("%d streams opened, want 1", n)
	}
}

// TestCallsStreamRefusesWhatAPeerMustNotAsk: on a Calls stream opened with
// the cluster credential, a message that is neither call nor cancel, a
// second call under a running call's id, a call past the stream's bound, a
// call for a session the named principal does not own and one for no
// session are each refused with their own status, and nothing runs; the
// running call still answers.
func TestCallsStreamRefusesWhatAPeerMustNotAsk(t *testing.T) {
	g := newGate()
	owner, entry := twoNodes(t, g, nil)
	owner.sw.callsLimit = 1
	startOn(t, owner, entry, "gate", "g1", "g2")
	cc, err := entry.cl.PeerConn("owner")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := forwardv1.NewForwardServiceClient(cc).Calls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	call := func(id uint64, principal, sess, tool string) {
		t.Helper()
		c := alice
		c.Principal.Subject = principal
		if err := st.Send(&forwardv1.CallsRequest{Id: id, Op: &forwardv1.CallsRequest_Call{Call: &forwardv1.CallToolRequest{Caller: callerToPB(c), Session: sess, Tool: tool}}}); err != nil {
			t.Fatal(err)
		}
	}
	answers := map[uint64]*forwardv1.CallsResponse{}
	recv := func(n int) {
		t.Helper()
		for range n {
			ev, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			answers[ev.GetId()] = ev
		}
	}
	code := func(id uint64) codes.Code {
		if e := answers[id].GetError(); e != nil {
			return codes.Code(e.GetCode())
		}
		return codes.OK
	}

	if err := st.Send(&forwardv1.CallsRequest{Id: 1}); err != nil {
		t.Fatal(err)
	}
	call(2, "alice", "g1", "g1.hold.click")
	g.held(t)
	call(2, "alice", "g1", "g1.step.click")
	call(3, "alice", "g2", "g2.step.click")
	recv(3)
	if code(1) != codes.InvalidArgument || code(3) != codes.ResourceExhausted {
		t.Fatalf("an empty message: %v; a call past the bound: %v", answers[1], answers[3])
	}
	if e := answers[2].GetError(); codes.Code(e.GetCode()) != codes.InvalidArgument || !strings.Contains(e.GetMessage(), "already running") {
		t.Fatalf("a second call under a running id: %v", answers[2])
	}
	close(g.release)
	recv(1)
	if answers[2].GetResult() == nil {
		t.Fatalf("the held call answered %v", answers[2])
	}

	call(4, "mallory", "g1", "g1.step.click")
	recv(1) // one at a time: the stream's bound is 1 here
	call(5, "alice", "nope", "nope.step.click")
	recv(1)
	if code(4) != codes.PermissionDenied || code(5) != codes.NotFound {
		t.Fatalf("a call for another principal's session: %v; for no session: %v", answers[4], answers[5])
	}
	for id, want := range map[string]string{"g1": `"steps":1`, "g2": `"steps":0`} {
		if m, _ := owner.mgr.Model(id); !strings.Contains(string(m), want) {
			t.Errorf("%s: model %s, want %s", id, m, want)
		}
	}
}

// TestOwnerGoneMidCallOnTheCallsStream: an owner whose server stops while a
// forwarded call runs answers that call "owner unavailable, may have
// applied" (it had the call), and the entry node does not hang.
func TestOwnerGoneMidCallOnTheCallsStream(t *testing.T) {
	g := newGate()
	owner, entry := twoNodes(t, g, nil)
	startOn(t, owner, entry, "gate", "g")
	answered := make(chan error, 1)
	go func() {
		_, err := entry.sw.Call(context.Background(), alice, "g", "g.hold.click", nil)
		answered <- err
	}()
	g.held(t)
	owner.srv.Stop()
	select {
	case err := <-answered:
		if !errors.Is(err, ErrOwnerUnavailable) || !errors.Is(err, ErrMayHaveApplied) {
			t.Fatalf("a call whose owner went away answered %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the call never answered after its owner went away")
	}
}

// TestPeersWithoutTheCallsStream: a peer that does not advertise the Calls
// stream gets a stream per call, and one that advertises it but does not
// serve it (a misconfigured mix) gets the same after one refused attempt;
// both answer every call.
func TestPeersWithoutTheCallsStream(t *testing.T) {
	noStream := slices.DeleteFunc(cluster.DefaultCapabilities(), func(c string) bool { return c == cluster.CapCallStream })
	owner, entry := twoNodes(t, newGate(), noStream)
	startOn(t, owner, entry, "counter", "a")
	for range 3 {
		if res, err := entry.sw.Call(context.Background(), alice, "a", "a.inc.click", nil); err != nil || res.IsError {
			t.Fatalf("a call to a peer without the stream: %+v %v", res, err)
		}
	}
	if n := entry.sw.streams.opened.Load(); n != 0 {
		t.Errorf("%d Calls streams opened to a peer that does not advertise them", n)
	}

	old := startTestNode(t, "old", true)
	cur := startTestNode(t, "cur", false, old.cl.Self().GossipAddr)
	awaitPeers(t, old, cur)
	startOn(t, old, cur, "counter", "b")
	for range 3 {
		if res, err := cur.sw.Call(context.Background(), alice, "b", "b.inc.click", nil); err != nil || res.IsError {
			t.Fatalf("a call to a peer advertising a stream it does not serve: %+v %v", res, err)
		}
	}
	if m, _ := old.mgr.Model("b"); !strings.Contains(string(m), `"count":3`) {
		t.Errorf("model after three clicks: %s", m)
	}
	if n := cur.sw.streams.fallbacks.Load(); n != 3 {
		t.Errorf("%d calls fell back to a stream of their own, want 3", n)
	}
}

// TestForwardedArgumentsAreTheClientsBytes: a forwarded call carries the
// JSON its arguments were decoded from, as the client sent it (the owner
// decodes it; the entry node does not encode the map again), and only for
// the call those bytes belong to.
func TestForwardedArgumentsAreTheClientsBytes(t *testing.T) {
	owner, entry := twoNodes(t, newGate(), nil)
	startOn(t, owner, entry, "todo", "t")
	ctx := session.WithArgumentsJSON(context.Background(), "t.new.type_into", []byte(`{"text":"as sent"}`))
	if res, err := entry.sw.Call(ctx, alice, "t", "t.new.type_into", map[string]any{"text": "as decoded"}); err != nil || res.IsError {
		t.Fatalf("type_into: %+v %v", res, err)
	}
	if m, _ := owner.mgr.Model("t"); !strings.Contains(string(m), `"as sent"`) {
		t.Fatalf("model %s: the owner did not get the client's bytes", m)
	}
	// Bytes kept for another tool are not this call's.
	if res, err := entry.sw.Call(ctx, alice, "t", "t.new.clear", map[string]any{}); err != nil || res.IsError {
		t.Fatalf("clear: %+v %v", res, err)
	}
	if m, _ := owner.mgr.Model("t"); strings.Contains(string(m), `"as sent"`) {
		t.Fatalf("model %s: clear ran with type_into's arguments", m)
	}
}

// TestABurstOfForwardedCallsLeavesNoGoroutinesBehind: the owner runs
// concurrent forwarded calls on goroutines that park afterwards, ready to
// read the next; once the burst is over they linger out, so the nodes
// come back to the goroutines they had before it (the soak's check).
func TestABurstOfForwardedCallsLeavesNoGoroutinesBehind(t *testing.T) {
	g := newGate()
	owner, entry := twoNodes(t, g, nil)
	const n = 8
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("g%d", i)
	}
	startOn(t, owner, entry, "gate", ids...)
	// The stream is opened and every session has run a call once.
	for _, id := range ids {
		if res, err := entry.sw.Call(context.Background(), alice, id, id+".step.click", nil); err != nil || res.IsError {
			t.Fatalf("%s: %+v %v", id, res, err)
		}
	}
	poll.Until(t, 20*time.Second, "the nodes are at rest after the first calls", goroutinesSettle())
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if res, err := entry.sw.Call(context.Background(), alice, id, id+".hold.click", nil); err != nil || res.IsError {
				t.Errorf("%s: %+v %v", id, res, err)
			}
		})
	}
	for range n {
		g.held(t)
	}
	if during := runtime.NumGoroutine(); during < before+n {
		t.Fatalf("%d goroutines with %d calls held, %d before: the burst ran on none of its own", during, n, before)
	}
	close(g.release)
	wg.Wait()
	await(t, fmt.Sprintf("no more than the %d goroutines of before the burst", before), func() bool {
		return runtime.NumGoroutine() <= before
	})
}

// goroutinesSettle returns a condition that holds once the goroutine count
// has not changed for a second (parked workers and readers have lingered
// out): nothing announces that a goroutine has ended, so each poll samples.
func goroutinesSettle() func() error {
	last, since := -1, time.Now()
	return func() error {
		if n := runtime.NumGoroutine(); n != last {
			last, since = n, time.Now()
		}
		if held := time.Since(since); held < time.Second {
			return fmt.Errorf("%d goroutines, unchanged for %v", last, held)
		}
		return nil
	}
}
