package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"google.golang.org/grpc"

	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
)

// fakeAdmin answers ListMembers and ForgetMember with canned replies.
type fakeAdmin struct {
	adminv1.AdminServiceClient
	members *adminv1.ListMembersResponse
	forget  *adminv1.ForgetMemberResponse
	asked   *adminv1.ForgetMemberRequest
}

func (f *fakeAdmin) ListMembers(context.Context, *adminv1.ListMembersRequest, ...grpc.CallOption) (*adminv1.ListMembersResponse, error) {
	return f.members, nil
}

func (f *fakeAdmin) ForgetMember(_ context.Context, req *adminv1.ForgetMemberRequest, _ ...grpc.CallOption) (*adminv1.ForgetMemberResponse, error) {
	f.asked = req
	return f.forget, nil
}

// The members listing shows the lost members after the view's, and says
// what they mean and how to strike one off.
func TestMembersListingShowsLostMembers(t *testing.T) {
	f := &fakeAdmin{members: &adminv1.ListMembersResponse{
		Members: []*adminv1.Member{{Name: "node1", State: adminv1.MemberState_MEMBER_STATE_ALIVE, Self: true, GrpcAddress: "10.0.0.1:9090"}},
		Lost:    []string{"node2", "node3"},
	}}
	var out bytes.Buffer
	if err := listMembers(context.Background(), f, nil, &out, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[2], "node2") || !strings.HasPrefix(lines[3], "node3") {
		t.Fatalf("listing:\n%s\nwant node2 and node3 after node1", out.String())
	}
	for _, l := range lines[2:4] {
		if fields := strings.Fields(l); fields[1] != "lost" {
			t.Errorf("line %q: state %q, want lost", l, fields[1])
		}
	}
	if !strings.Contains(out.String(), "mcpswarm forget-member NAME") {
		t.Errorf("listing:\n%s\nsays nothing of forget-member", out.String())
	}

	out.Reset()
	f.members.Lost = nil
	if err := listMembers(context.Background(), f, nil, &out, false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "lost") {
		t.Errorf("listing without lost members mentions them:\n%s", out.String())
	}
}

// forget-member asks the whole cluster (local unset), prints what each
// node did, and fails when a node did not do it.
func TestForgetMemberReportsEachNode(t *testing.T) {
	f := &fakeAdmin{forget: &adminv1.ForgetMemberResponse{Nodes: []*adminv1.ForgetOutcome{
		{Node: "node1", Result: adminv1.ForgetResult_FORGET_RESULT_FORGOTTEN},
		{Node: "node4", Result: adminv1.ForgetResult_FORGET_RESULT_NOT_LOST},
	}}}
	var out bytes.Buffer
	if err := forgetMember(context.Background(), f, []string{"node2"}, &out, false); err != nil {
		t.Fatalf("forget-member: %v", err)
	}
	if f.asked.GetName() != "node2" || f.asked.GetLocal() {
		t.Fatalf("asked %v, want node2 cluster-wide", f.asked)
	}
	if want := "node1: forgot node2\nnode4: did not count node2\n"; out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}

	f.forget.Nodes = append(f.forget.Nodes, &adminv1.ForgetOutcome{Node: "node5", Result: adminv1.ForgetResult_FORGET_RESULT_FAILED, Detail: "not reached: dead"})
	out.Reset()
	err := forgetMember(context.Background(), f, []string{"node2"}, &out, false)
	if err == nil || !strings.Contains(err.Error(), "not done on node5") {
		t.Fatalf("forget-member with a node not reached: %v, want an error naming node5", err)
	}
	if !strings.Contains(out.String(), "node5: FAILED: not reached: dead") {
		t.Fatalf("printed %q, without node5's failure", out.String())
	}

	out.Reset()
	if err := forgetMember(context.Background(), f, []string{"node2"}, &out, true); err == nil {
		t.Fatal("forget-member --json with a node not reached succeeded")
	}
	// protojson varies its spacing on purpose: read it, do not match it.
	var printed struct {
		Nodes []struct{ Node, Result string }
	}
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil || len(printed.Nodes) != 3 || printed.Nodes[2].Result != "FORGET_RESULT_FAILED" {
		t.Fatalf("--json printed %s (%v)", out.String(), err)
	}
	if err := forgetMember(context.Background(), f, nil, &out, false); err == nil {
		t.Fatal("forget-member without a name succeeded")
	}
}

// Against a running node, forget-member refuses the node itself and a
// name nobody counts lost, with the reason on stderr and exit code 1; it
// needs the cluster key like every admin command.
func TestForgetMemberRefusalsAgainstANode(t *testing.T) {
	args := serveArgs(t)
	httpAddr, grpcAddr := args[5], args[7]
	cmd := exec.Command(binary, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitHTTP(t, "http://"+httpAddr+"/healthz")

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"forget-member", "--dev", "--addr", grpcAddr, "t1"}, 1, "t1 is this node"},
		{[]string{"forget-member", "--dev", "--addr", grpcAddr, "ghost"}, 1, "ghost is not a lost member on any node reached (lost on t1: none)"},
		{[]string{"forget-member", "--addr", grpcAddr, "ghost"}, 2, "the admin API needs the cluster key"},
	} {
		code, stderr := runBinary(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("mcpswarm %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.want)
		}
	}
}
