package mcpswarm

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// adminMethodPrefix selects the RPCs guarded by the admin credential.
const adminMethodPrefix = "/mcpswarm.admin.v1."

// AdminToken is the bearer token the admin API accepts: derived from the
// cluster key, so whoever holds the key file may administer the cluster and
// nobody else can.
func AdminToken(clusterKey []byte) string {
	return hex.EncodeToString(DeriveKey(clusterKey, "admin-api"))
}

// AdminCredentials attaches the admin token to every RPC of a client conn.
type AdminCredentials struct {
	Token string
	// Secure makes gRPC refuse to send the token over a plaintext
	// connection (set it when the node runs TLS).
	Secure bool
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c AdminCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + c.Token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (c AdminCredentials) RequireTransportSecurity() bool { return c.Secure }

type adminGuard struct{ token []byte }

func (g adminGuard) check(ctx context.Context, method string) error {
	if !strings.HasPrefix(method, adminMethodPrefix) {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	return g.checkMD(md)
}

// checkMD checks the admin token among a call's headers.
func (g adminGuard) checkMD(md metadata.MD) error {
	vals := md.Get("authorization")
	if len(vals) != 1 || !strings.HasPrefix(vals[0], "Bearer ") {
		return status.Error(codes.Unauthenticated, "admin API needs the admin token derived from the cluster key")
	}
	got := []byte(strings.TrimPrefix(vals[0], "Bearer "))
	if subtle.ConstantTimeCompare(got, g.token) != 1 {
		return status.Error(codes.PermissionDenied, "admin token does not match this cluster's key")
	}
	return nil
}

func (g adminGuard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := g.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (g adminGuard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := g.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}
