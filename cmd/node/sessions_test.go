package main

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
)

// The sessions listing names the in-sync standbys first, then each one out
// of sync with how long it has been behind.
func TestSessionsListingShowsReplicationLag(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		name string
		s    *adminv1.Session
		want string
	}{
		{"no standby", &adminv1.Session{}, "-"},
		{"in sync", &adminv1.Session{Standbys: []string{"node2", "node3"}}, "node2,node3"},
		{"one behind", &adminv1.Session{Standbys: []string{"node2"}, Behind: map[string]*timestamppb.Timestamp{
			"node3": timestamppb.New(now.Add(-12 * time.Second)),
		}}, "node2,node3(behind 12s)"},
		{"all behind", &adminv1.Session{Behind: map[string]*timestamppb.Timestamp{
			"node3": timestamppb.New(now.Add(-2 * time.Second)),
			"node2": timestamppb.New(now.Add(-90 * time.Second)),
		}}, "node2(behind 1m30s),node3(behind 2s)"},
	} {
		if got := standbyColumn(tc.s, now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
