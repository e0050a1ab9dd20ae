package cluster

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"

	"github.com/mcpswarm/mcpswarm/internal/memnet"
)

// whoAsked answers ReadResource with the authenticated caller's name.
type whoAsked struct {
	forwardv1.UnimplementedForwardServiceServer
}

func (whoAsked) ReadResource(ctx context.Context, _ *forwardv1.ReadResourceRequest) (*forwardv1.ReadResourceResponse, error) {
	return &forwardv1.ReadResourceResponse{MimeType: PeerName(ctx)}, nil
}

// TestAddedServicesNeedThePeerCredential: a service added with AddService
// is reached by a member over PeerConn (the cluster's own connection),
// which names the caller, and refuses anyone without the cluster's peer
// credential, even on a server with none of the cluster's interceptors.
func TestAddedServicesNeedThePeerCredential(t *testing.T) {
	b := startNode(t, memnet.New(), "n0", "")

	ep := b.net.Node("a")
	lis, err := ep.ListenGRPC()
	if err != nil {
		t.Fatal(err)
	}
	cfg := LocalConfig()
	cfg.Name, cfg.GRPCAddr, cfg.Key, cfg.NoSync = "a", ep.GRPCAddr, testKey, true
	cfg.GossipAddr, cfg.Dialer = ep.GossipAddr, ep.Dial
	cfg.Memberlist = func(mc *memberlist.Config) { LocalMemberlist(mc); mc.Transport = ep.Transport() }
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Join = []string{b.gossip()}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.AddService(func(r grpc.ServiceRegistrar) { forwardv1.RegisterForwardServiceServer(r, whoAsked{}) })
	srv := grpc.NewServer() // no interceptors: the added service guards itself
	a.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	if err := a.Start(context.Background()); err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = a.Stop(ctx)
		srv.Stop()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var cc grpc.ClientConnInterface
	eventually(t, 20*time.Second, func() error {
		var err error
		cc, err = b.c.PeerConn("a")
		return err
	})
	resp, err := forwardv1.NewForwardServiceClient(cc).ReadResource(ctx, &forwardv1.ReadResourceRequest{})
	if err != nil || resp.GetMimeType() != "n0" {
		t.Fatalf("a member's call over PeerConn: %v %v, want the caller named n0", resp, err)
	}

	for name, key := range map[string][]byte{"none": nil, "wrong-key": bytes.Repeat([]byte{9}, 32)} {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(b.dialClient)}
		if key != nil {
			k, err := deriveKeys(key)
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, grpc.WithPerRPCCredentials(peerCreds{name: "n0", cred: credential(k.peer, "n0")}))
		}
		raw, err := grpc.NewClient("passthrough:///"+cfg.GRPCAddr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		fc := forwardv1.NewForwardServiceClient(raw)
		if _, err := fc.ReadResource(ctx, &forwardv1.ReadResourceRequest{}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: unary call: %v, want Unauthenticated", name, err)
		}
		stream, err := fc.CallTool(ctx, &forwardv1.CallToolRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: streaming call: %v, want Unauthenticated", name, err)
		}
		_ = raw.Close()
	}
}
