package cluster

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/mcpswarm/mcpswarm/crdt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Metadata keys of the peer credential carried by every peer RPC.
const (
	// MDPeerName names the calling node.
	MDPeerName = "x-mcpswarm-peer-name"
	// MDPeerCredential is hex(HMAC-SHA256(peerKey, "peer:"+name)).
	MDPeerCredential = "x-mcpswarm-peer"
)

// peerMethodPrefix selects the methods the interceptors guard.
const peerMethodPrefix = "/mcpswarm.peer.v1.PeerService/"

// HKDF labels: one key per purpose, never reused across purposes.
const (
	labelGossip = "mcpswarm gossip encryption v1"
	labelPeer   = "mcpswarm peer credential v1"
)

// keys are the secrets derived from the cluster key.
type keys struct {
	gossip []byte // AES-256 key for memberlist
	peer   []byte // HMAC key for the peer credential
}

func deriveKeys(clusterKey []byte) (keys, error) {
	g, err := hkdf.Key(sha256.New, clusterKey, nil, labelGossip, 32)
	if err != nil {
		return keys{}, fmt.Errorf("deriving gossip key: %w", err)
	}
	p, err := hkdf.Key(sha256.New, clusterKey, nil, labelPeer, 32)
	if err != nil {
		return keys{}, fmt.Errorf("deriving peer key: %w", err)
	}
	return keys{gossip: g, peer: p}, nil
}

// credential computes the credential a node named name presents.
func credential(peerKey []byte, name string) string {
	m := hmac.New(sha256.New, peerKey)
	m.Write([]byte("peer:" + name))
	return hex.EncodeToString(m.Sum(nil))
}

// peerCreds attaches the credential to every outgoing peer RPC.
type peerCreds struct {
	name, cred string
	secure     bool
}

func (p peerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{MDPeerName: p.name, MDPeerCredential: p.cred}, nil
}

func (p peerCreds) RequireTransportSecurity() bool { return p.secure }

// errNoCredential and friends are the reasons a peer call is refused.
var (
	errNoCredential  = errors.New("missing peer credential")
	errBadCredential = errors.New("invalid peer credential")
)

type peerNameKey struct{}

// callerName returns the authenticated peer name put in ctx by the
// interceptors.
func callerName(ctx context.Context) string {
	s, _ := ctx.Value(peerNameKey{}).(string)
	return s
}

// authenticate checks the credential in ctx and returns the caller's name.
func authenticate(ctx context.Context, peerKey []byte) (string, error) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return "", errNoCredential
	}
	names, creds := md.Get(MDPeerName), md.Get(MDPeerCredential)
	if len(names) != 1 || len(creds) != 1 {
		return "", errNoCredential
	}
	if !crdt.ValidName(names[0]) {
		return "", errBadCredential
	}
	want := credential(peerKey, names[0])
	if !hmac.Equal([]byte(want), []byte(creds[0])) {
		return "", errBadCredential
	}
	return names[0], nil
}

func (c *Cluster) refuse(ctx context.Context, method string, err error) error {
	addr := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	c.log.Warn("refusing peer call", slog.String("method", method), slog.String("remote", addr), slog.String("reason", err.Error()))
	c.metrics.rejected.WithLabelValues("unauthenticated").Inc()
	return status.Error(codes.Unauthenticated, err.Error())
}

// UnaryInterceptor enforces the cluster credential on peer.v1 methods and
// passes every other method through.
func (c *Cluster) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !strings.HasPrefix(info.FullMethod, peerMethodPrefix) {
			return handler(ctx, req)
		}
		name, err := authenticate(ctx, c.keys.peer)
		if err != nil {
			return nil, c.refuse(ctx, info.FullMethod, err)
		}
		return handler(context.WithValue(ctx, peerNameKey{}, name), req)
	}
}

// StreamInterceptor enforces the cluster credential on peer.v1 streaming
// methods and passes every other method through.
func (c *Cluster) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !strings.HasPrefix(info.FullMethod, peerMethodPrefix) {
			return handler(srv, ss)
		}
		name, err := authenticate(ss.Context(), c.keys.peer)
		if err != nil {
			return c.refuse(ss.Context(), info.FullMethod, err)
		}
		return handler(srv, &authedStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), peerNameKey{}, name)})
	}
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }
