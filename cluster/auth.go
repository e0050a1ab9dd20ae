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
	"sync"

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
func authenticate(ctx context.Context, v *PeerVerifier) (string, error) {
	// ValueFromIncomingContext reads the two keys without copying the
	// call's whole metadata, as FromIncomingContext would.
	return v.verify(metadata.ValueFromIncomingContext(ctx, MDPeerName), metadata.ValueFromIncomingContext(ctx, MDPeerCredential))
}

// maxVerifiedNames bounds the credentials a PeerVerifier remembers: far
// more members than a cluster has, and only names whose credential
// verified are remembered, so a caller without the key adds nothing.
const maxVerifiedNames = 1024

// PeerVerifier checks peer credentials. Every forwarded call and
// replication stream presents one, so the credential of each name is
// computed (an HMAC under the derived peer key) the first time that name's
// credential verifies and compared in constant time afterwards, instead of
// deriving the key and computing the HMAC on every call. Safe for
// concurrent use.
type PeerVerifier struct {
	peerKey []byte
	mu      sync.RWMutex
	known   map[string]string // name -> its credential, each verified once
}

// NewPeerVerifier returns a verifier of the credentials derived from
// clusterKey (the node's gRPC gate checks them before the cluster's
// handlers check them again).
func NewPeerVerifier(clusterKey []byte) (*PeerVerifier, error) {
	k, err := deriveKeys(clusterKey)
	if err != nil {
		return nil, err
	}
	return newPeerVerifier(k.peer), nil
}

func newPeerVerifier(peerKey []byte) *PeerVerifier {
	return &PeerVerifier{peerKey: peerKey, known: make(map[string]string)}
}

// Verify checks the peer credential in the metadata of a call and returns
// the calling member's name.
func (v *PeerVerifier) Verify(md metadata.MD) (string, error) {
	return v.verify(md.Get(MDPeerName), md.Get(MDPeerCredential))
}

func (v *PeerVerifier) verify(names, creds []string) (string, error) {
	if len(names) != 1 || len(creds) != 1 {
		return "", errNoCredential
	}
	name := names[0]
	if !crdt.ValidName(name) {
		return "", errBadCredential
	}
	v.mu.RLock()
	want, cached := v.known[name]
	v.mu.RUnlock()
	if !cached {
		want = credential(v.peerKey, name)
	}
	if !hmac.Equal([]byte(want), []byte(creds[0])) {
		return "", errBadCredential
	}
	if !cached {
		v.mu.Lock()
		if len(v.known) < maxVerifiedNames {
			v.known[name] = want
		}
		v.mu.Unlock()
	}
	return name, nil
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
		name, err := authenticate(ctx, c.verifier)
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
		name, err := authenticate(ss.Context(), c.verifier)
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
