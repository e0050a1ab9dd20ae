package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/crdt/crdtpb"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"

	"github.com/mcpswarm/mcpswarm/internal/memnet"
)

// rawClient dials n's gRPC server as the node named name holding key (no
// credential when key is nil).
func rawClient(t *testing.T, n *tnode, name string, key []byte) peerv1.PeerServiceClient {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(n.dialClient),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64 << 20))}
	if key != nil {
		k, err := deriveKeys(key)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(peerCreds{name: name, cred: credential(k.peer, name)}))
	}
	cc, err := grpc.NewClient("passthrough:///"+n.cfg.GRPCAddr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return peerv1.NewPeerServiceClient(cc)
}

func awaitLog(t *testing.T, n *tnode, substr string) {
	t.Helper()
	eventually(t, 5*time.Second, func() error {
		if !strings.Contains(n.logs.String(), substr) {
			return fmt.Errorf("log of %s lacks %q", n.name, substr)
		}
		return nil
	})
}

func TestRefusesCallsWithoutCredential(t *testing.T) {
	n := startNode(t, memnet.New(), "n0", "")
	ctx := context.Background()
	for name, cl := range map[string]peerv1.PeerServiceClient{
		"none":      rawClient(t, n, "", nil),
		"wrong-key": rawClient(t, n, "mallory", bytes.Repeat([]byte{9}, 32)),
	} {
		_, err := cl.ExchangeDigest(ctx, &peerv1.ExchangeDigestRequest{Sender: "mallory@1"})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: ExchangeDigest: %v, want Unauthenticated", name, err)
		}
		st, err := cl.Replicate(ctx)
		if err == nil {
			_ = st.Send(&peerv1.ReplicateRequest{Sender: "mallory@1", Deltas: []*peerv1.Delta{{
				Registry: "tools", OriginName: "mallory", OriginEpoch: 1, From: 0, To: 1, Puts: []*peerv1.Put{{Key: "evil", Value: []byte("x"), Seq: 1}}}}})
			_, err = st.Recv()
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: Replicate: %v, want Unauthenticated", name, err)
		}
		_, err = cl.ReadResource(ctx, &peerv1.ReadResourceRequest{Session: "s"})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: ReadResource: %v, want Unauthenticated", name, err)
		}
	}
	awaitLog(t, n, "refusing peer call")
	if got := n.regs["tools"].Len(); got != 0 {
		t.Errorf("%d entries applied from unauthenticated calls", got)
	}
	if metric(t, n.prom, "mcpswarm_cluster_rejected_total", "reason", "unauthenticated") < 6 {
		t.Error("refusals not counted")
	}
}

func TestIgnoresDeltaForUnknownOrigin(t *testing.T) {
	n := startNode(t, memnet.New(), "n0", "")
	cl := rawClient(t, n, "mallory", testKey)
	st, err := cl.Replicate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// A member relaying data of an origin nobody knows.
	if err := st.Send(&peerv1.ReplicateRequest{Sender: "mallory@1", Deltas: []*peerv1.Delta{{
		Registry: "tools", OriginName: "ghost", OriginEpoch: 5, From: 0, To: 1, Puts: []*peerv1.Put{{Key: "k", Value: []byte("v"), Seq: 1}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	// A sender claiming another node's name.
	if err := st.Send(&peerv1.ReplicateRequest{Sender: "n9@1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("sender mismatch: %v, want PermissionDenied", err)
	}
	// A stream whose first message does not name its sender.
	st3, err := cl.Replicate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st3.Send(&peerv1.ReplicateRequest{Deltas: []*peerv1.Delta{{
		Registry: "tools", OriginName: "mallory", OriginEpoch: 1, From: 0, To: 1, Puts: []*peerv1.Put{{Key: "anon", Value: []byte("v"), Seq: 1}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st3.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("anonymous first batch: %v, want PermissionDenied", err)
	}
	// Data for this node's own origin, and a malformed delta.
	st2, err := cl.Replicate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st2.Send(&peerv1.ReplicateRequest{Sender: "mallory@1", Deltas: []*peerv1.Delta{
		{Registry: "tools", OriginName: n.c.Origin().Name, OriginEpoch: n.c.Origin().Epoch, From: 0, To: 1, Puts: []*peerv1.Put{{Key: "mine", Value: []byte("v"), Seq: 1}}},
		{Registry: "tools", OriginName: "mallory", OriginEpoch: 1, From: 3, To: 1},
		{Registry: "nope", OriginName: "mallory", OriginEpoch: 1, From: 0, To: 1, Puts: []*peerv1.Put{{Key: "k", Seq: 1}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st2.Recv(); err != nil {
		t.Fatal(err)
	}
	_ = st2.CloseSend()
	awaitLog(t, n, "reason=\"unknown origin\"")
	awaitLog(t, n, "reason=\"own origin\"")
	awaitLog(t, n, "reason=\"malformed delta\"")
	awaitLog(t, n, "reason=\"unknown registry\"")
	awaitLog(t, n, "reason=\"sender mismatch\"")
	if got := dump(n.regs["tools"]); got != "" {
		t.Errorf("applied:\n%s", got)
	}
}

// TestCutsStreamOnBadRef checks the per-stream declarations of Replicate:
// deltas by ref are applied once declared; an unknown ref, a conflicting
// redeclaration or too many declarations cut the stream with
// InvalidArgument and nothing of that request is applied.
func TestCutsStreamOnBadRef(t *testing.T) {
	n := startNode(t, memnet.New(), "n0", "")
	cl := rawClient(t, n, "mallory", testKey)
	putByRef := func(seq uint64) *peerv1.Delta {
		return &peerv1.Delta{OriginRef: 1, RegistryRef: 1, From: seq - 1, To: seq,
			Puts: []*peerv1.Put{{Key: fmt.Sprintf("k%d", seq), Value: []byte("v"), Seq: seq}}}
	}
	// open starts a stream whose first request declares mallory@1 and
	// "tools" and writes k1 by ref.
	open := func() grpc.BidiStreamingClient[peerv1.ReplicateRequest, peerv1.ReplicateResponse] {
		t.Helper()
		st, err := cl.Replicate(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&peerv1.ReplicateRequest{Sender: "mallory@1",
			Origins:    []*peerv1.OriginDecl{{Ref: 1, Name: "mallory", Epoch: 1}},
			Registries: []*peerv1.RegistryDecl{{Ref: 1, Name: "tools"}},
			Deltas:     []*peerv1.Delta{putByRef(1)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatalf("declaring request: %v", err)
		}
		return st
	}
	mallory := crdt.Origin{Name: "mallory", Epoch: 1}
	st := open()
	if _, ok := n.regs["tools"].Get(mallory, "k1"); !ok {
		t.Fatalf("delta by ref not applied:\n%s", dump(n.regs["tools"]))
	}
	// Later requests use the refs without declaring again.
	if err := st.Send(&peerv1.ReplicateRequest{Deltas: []*peerv1.Delta{putByRef(2)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("request by ref: %v", err)
	}
	if _, ok := n.regs["tools"].Get(mallory, "k2"); !ok {
		t.Fatalf("second delta by ref not applied:\n%s", dump(n.regs["tools"]))
	}
	_ = st.CloseSend()

	tooMany := &peerv1.ReplicateRequest{Deltas: []*peerv1.Delta{putByRef(3)}}
	for i := range crdtpb.MaxStreamDecls {
		tooMany.Origins = append(tooMany.Origins, &peerv1.OriginDecl{Ref: uint32(i + 2), Name: fmt.Sprintf("o%d", i), Epoch: 1})
	}
	for name, req := range map[string]*peerv1.ReplicateRequest{
		"unknown ref": {Deltas: []*peerv1.Delta{putByRef(3), {OriginRef: 2, RegistryRef: 1, From: 3, To: 3}}},
		"conflicting redeclaration": {Deltas: []*peerv1.Delta{putByRef(3)},
			Registries: []*peerv1.RegistryDecl{{Ref: 1, Name: "sessions"}}},
		"too many declarations": tooMany,
	} {
		st := open()
		if err := st.Send(req); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
		if _, ok := n.regs["tools"].Get(mallory, "k3"); ok {
			t.Fatalf("%s: a delta of the refused request was applied", name)
		}
	}
	awaitLog(t, n, "reason=\"bad stream reference\"")
	if got := metric(t, n.prom, "mcpswarm_cluster_rejected_total", "reason", "bad stream reference"); got != 3 {
		t.Errorf("%v bad stream references counted, want 3", got)
	}
}

func TestRefusesOversizedMessage(t *testing.T) {
	n := startNode(t, memnet.New(), "n0", "", func(c *Config) { c.MaxMessageBytes = 1 << 20; c.SnapshotChunkBytes = 64 << 10 })
	cl := rawClient(t, n, "mallory", testKey)
	st, err := cl.Replicate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 2<<20)
	if err := st.Send(&peerv1.ReplicateRequest{Sender: "mallory@1", Deltas: []*peerv1.Delta{{
		Registry: "tools", OriginName: "mallory", OriginEpoch: 1, From: 0, To: 1, Puts: []*peerv1.Put{{Key: "big", Value: big, Seq: 1}}}}}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("oversized batch: %v, want ResourceExhausted", err)
	}
	_, err = cl.ExchangeDigest(context.Background(), &peerv1.ExchangeDigestRequest{Sender: "mallory@1",
		Digests: []*peerv1.Digest{{Registry: string(big)}}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("oversized digest: %v, want ResourceExhausted", err)
	}
	awaitLog(t, n, "reason=\"oversized message\"")
	if n.regs["tools"].Len() != 0 {
		t.Error("oversized delta applied")
	}
}

func TestCutsStalledStream(t *testing.T) {
	n := startNode(t, memnet.New(), "n0", "", func(c *Config) { c.StreamIdle = 300 * time.Millisecond })
	cl := rawClient(t, n, "mallory", testKey)
	st, err := cl.Replicate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = st.Recv() // we never send: the server must give up
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("stalled stream ended with %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stalled stream cut after %v", d)
	}
	awaitLog(t, n, "reason=\"stalled stream\"")
}

func TestCatchUpNeverSendsOriginItsOwnData(t *testing.T) {
	nodes := startCluster(t, 3)
	for _, n := range nodes {
		putN(t, n, "e", 3)
	}
	eventually(t, 5*time.Second, func() error { return converged(nodes, nil) })
	// Ask n1, as n0, for everything including n0's own origin.
	cl := rawClient(t, nodes[1], "n0", testKey)
	var wants []*peerv1.Digest
	for _, reg := range testRegistries {
		d := &peerv1.Digest{Registry: reg}
		for _, n := range nodes {
			d.Versions = append(d.Versions, &peerv1.Version{OriginName: n.c.Origin().Name, OriginEpoch: n.c.Origin().Epoch, Seq: 0})
		}
		wants = append(wants, d)
	}
	st, err := cl.CatchUp(context.Background(), &peerv1.CatchUpRequest{Sender: nodes[0].c.Origin().String(), Wants: wants})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for {
		item, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if d := item.GetDelta(); d != nil {
			got[crdt.Origin{Name: d.GetOriginName(), Epoch: d.GetOriginEpoch()}.String()]++
		}
		if c := item.GetSnapshot(); c != nil {
			got[crdt.Origin{Name: c.GetOriginName(), Epoch: c.GetOriginEpoch()}.String()]++
		}
	}
	if got[nodes[0].c.Origin().String()] != 0 {
		t.Errorf("n1 sent n0's data back to n0: %v", got)
	}
	if got[nodes[2].c.Origin().String()] == 0 {
		t.Errorf("n1 did not serve n2's data: %v", got)
	}
	// Over the whole run, no node received its own data from anyone: only
	// the writer ever sends its deltas, and relays skip the origin.
	for _, n := range nodes {
		if strings.Contains(n.logs.String(), "reason=\"own origin\"") {
			t.Errorf("%s was sent its own data", n.name)
		}
	}
}

func TestForwardingNeedsHandler(t *testing.T) {
	nodes := startCluster(t, 2)
	cc, err := nodes[0].c.PeerConn("n1")
	if err != nil {
		t.Fatal(err)
	}
	cl := peerv1.NewPeerServiceClient(cc)
	_, err = cl.ReadResource(context.Background(), &peerv1.ReadResourceRequest{Session: "s", Uri: "u"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("without handler: %v, want Unavailable", err)
	}
	nodes[1].c.SetForwardHandler(echoHandler{})
	resp, err := cl.ReadResource(context.Background(), &peerv1.ReadResourceRequest{Session: "s", Uri: "u"})
	if err != nil || string(resp.GetContents()) != "s/u" {
		t.Fatalf("ReadResource = %v, %v", resp, err)
	}
	if _, err := nodes[0].c.PeerConn("nobody"); err == nil {
		t.Error("PeerConn to an unknown name succeeded")
	}
}

type echoHandler struct{}

func (echoHandler) CallTool(*peerv1.CallToolRequest, grpc.ServerStreamingServer[peerv1.CallToolResponse]) error {
	return status.Error(codes.Unimplemented, "no tools")
}

func (echoHandler) ReadResource(_ context.Context, req *peerv1.ReadResourceRequest) (*peerv1.ReadResourceResponse, error) {
	return &peerv1.ReadResourceResponse{Contents: []byte(req.GetSession() + "/" + req.GetUri())}, nil
}

func (echoHandler) DeliverClientMessage(context.Context, *peerv1.DeliverClientMessageRequest) (*peerv1.DeliverClientMessageResponse, error) {
	return &peerv1.DeliverClientMessageResponse{}, nil
}
