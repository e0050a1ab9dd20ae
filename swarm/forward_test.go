package swarm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/mcpswarm/mcpswarm/authz"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
	"github.com/mcpswarm/mcpswarm/session"
)

// withoutMethod registers every service, ForwardService without one of its
// methods: a node of the release before that method.
type withoutMethod struct {
	grpc.ServiceRegistrar
	method string
}

func (w withoutMethod) RegisterService(d *grpc.ServiceDesc, impl any) {
	if d.ServiceName == forwardv1.ForwardService_ServiceDesc.ServiceName {
		c := *d
		c.Methods = nil
		for _, m := range d.Methods {
			if m.MethodName != w.method {
				c.Methods = append(c.Methods, m)
			}
		}
		d = &c
	}
	w.ServiceRegistrar.RegisterService(d, impl)
}

// twoNodes starts owner and entry, entry joined to owner, and waits until
// each reaches the other.
func twoNodes(t *testing.T, owner testNode, entryName string) testNode {
	t.Helper()
	entry := startTestNode(t, entryName, false, owner.cl.Self().GossipAddr)
	ownerName := owner.cl.Self().Name
	await(t, "both nodes reach each other", func() bool {
		_, e1 := owner.cl.PeerConn(entryName)
		_, e2 := entry.cl.PeerConn(ownerName)
		return e1 == nil && e2 == nil
	})
	return entry
}

// TestUnaryAndStreamedForwardsAnswerAlike holds CallToolUnary (a call
// whose client asked for no progress) to CallTool's answers: the same
// results for every forwarded operation, and the same errors, classified
// alike, for a caller who does not own the session, a session the owner
// does not run, and a tool the session does not offer.
func TestUnaryAndStreamedForwardsAnswerAlike(t *testing.T) {
	a := startTestNode(t, "a", false)
	b := twoNodes(t, a, "b")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	alice := authz.Context{Principal: authz.Principal{Subject: "alice", Authenticated: true}, Transport: authz.TransportStreamableHTTP}
	bob := authz.Context{Principal: authz.Principal{Subject: "bob", Authenticated: true}, Transport: authz.TransportStreamableHTTP}
	if _, err := a.sw.Start(ctx, alice, "counter", "un"); err != nil {
		t.Fatal(err)
	}
	await(t, "b sees a's session", func() bool { _, ok := b.sw.locate("un"); return ok })

	type answer struct {
		res session.Result
		err error
	}
	both := func(c authz.Context, id, tool string, args map[string]any) (unary, stream answer) {
		t.Helper()
		unary.res, unary.err = b.sw.forwardVia(ctx, c, "a", id, tool, args, false)
		stream.res, stream.err = b.sw.forwardVia(ctx, c, "a", id, tool, args, true)
		return unary, stream
	}
	same := func(what string, u, s answer) {
		t.Helper()
		if (u.err == nil) != (s.err == nil) || (u.err != nil && u.err.Error() != s.err.Error()) {
			t.Fatalf("%s: unary answered error %v, stream %v", what, u.err, s.err)
		}
		for _, sentinel := range []error{ErrNotOwner, session.ErrNotRunning, ErrOwnerUnavailable, ErrMayHaveApplied} {
			if errors.Is(u.err, sentinel) != errors.Is(s.err, sentinel) {
				t.Fatalf("%s: unary %v and stream %v disagree on %v", what, u.err, s.err, sentinel)
			}
		}
		if u.res.IsError != s.res.IsError || (u.res.Structured == nil) != (s.res.Structured == nil) {
			t.Fatalf("%s: unary answered %+v, stream %+v", what, u.res, s.res)
		}
	}

	u, s := both(alice, "un", "un.inc.click", nil)
	same("a click", u, s)
	if u.err != nil || u.res.IsError {
		t.Fatalf("a click: %+v %v", u.res, u.err)
	}
	if m, _ := a.mgr.Model("un"); !strings.Contains(string(m), `"count":2`) {
		t.Fatalf("two clicks, one per path, left the model %s", m)
	}
	for _, op := range []string{opModel, opScreenshot} {
		u, s := both(alice, "un", op, nil)
		same(op, u, s)
		if u.err != nil || u.res.Text != s.res.Text || u.res.Text == "" {
			t.Fatalf("%s: unary %q %v, stream %q %v", op, u.res.Text, u.err, s.res.Text, s.err)
		}
	}
	u, s = both(alice, "un", opSendKey, map[string]any{"key": "x"})
	same("a key", u, s)

	u, s = both(alice, "un", "un.nothing.click", nil)
	same("a tool the session does not offer", u, s)
	if u.err == nil && !u.res.IsError {
		t.Fatalf("a tool the session does not offer answered %+v", u.res)
	}
	u, s = both(bob, "un", "un.inc.click", nil)
	same("another principal's session", u, s)
	if !errors.Is(u.err, ErrNotOwner) {
		t.Fatalf("bob clicking alice's session: %v", u.err)
	}
	u, s = both(alice, "gone", "gone.inc.click", nil)
	same("a session the owner does not run", u, s)
	if !errors.Is(u.err, session.ErrNotRunning) {
		t.Fatalf("a session a does not run: %v", u.err)
	}
	if m, _ := a.mgr.Model("un"); !strings.Contains(string(m), `"count":2`) {
		t.Fatalf("refused calls changed the model: %s", m)
	}
}

// TestUnaryForwardToAnEarlierReleaseUsesTheStream: an owner of the release
// before CallToolUnary answers Unimplemented without running anything, and
// the call is made once through CallTool, so it applies exactly once.
func TestUnaryForwardToAnEarlierReleaseUsesTheStream(t *testing.T) {
	a := startTestNodeWith(t, "a", func(r grpc.ServiceRegistrar) grpc.ServiceRegistrar { return withoutMethod{r, "CallToolUnary"} })
	b := twoNodes(t, a, "b")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	alice := authz.Context{Principal: authz.Principal{Subject: "alice", Authenticated: true}, Transport: authz.TransportStreamableHTTP}
	if _, err := a.sw.Start(ctx, alice, "counter", "er"); err != nil {
		t.Fatal(err)
	}
	await(t, "b sees a's session", func() bool { _, ok := b.sw.locate("er"); return ok })
	if res, err := b.sw.Call(ctx, alice, "er", "er.inc.click", nil); err != nil || res.IsError {
		t.Fatalf("a click forwarded to the earlier release: %+v %v", res, err)
	}
	if m, _ := a.mgr.Model("er"); !strings.Contains(string(m), `"count":1`) {
		t.Fatalf("one click through the fallback left the model %s", m)
	}
}
