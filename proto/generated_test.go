// Package proto_test checks that the committed generated Go code matches the
// .proto sources, so a proto edit without `make proto` fails the build.
package proto_test

import (
	"context"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

func TestGeneratedCodeMatchesProtos(t *testing.T) {
	for _, tc := range []struct {
		path      string
		generated protoreflect.FileDescriptor
	}{
		{"mcpswarm/peer/v1/peer.proto", peerv1.File_mcpswarm_peer_v1_peer_proto},
		{"mcpswarm/forward/v1/forward.proto", forwardv1.File_mcpswarm_forward_v1_forward_proto},
		{"mcpswarm/admin/v1/admin.proto", adminv1.File_mcpswarm_admin_v1_admin_proto},
	} {
		t.Run(tc.path, func(t *testing.T) {
			c := protocompile.Compiler{
				Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{"."}}),
			}
			files, err := c.Compile(context.Background(), tc.path)
			if err != nil {
				t.Fatalf("compiling %s: %v", tc.path, err)
			}
			want := protodesc.ToFileDescriptorProto(files[0])
			got := protodesc.ToFileDescriptorProto(tc.generated)
			for _, fd := range []*descriptorpb.FileDescriptorProto{want, got} {
				fd.SourceCodeInfo = nil
			}
			if !proto.Equal(want, got) {
				t.Fatalf("generated code for %s is stale: run `make proto` and commit the result", tc.path)
			}
		})
	}
}
