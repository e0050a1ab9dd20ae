package mcp

import (
	"context"
	"slices"
	"strings"
	"time"
)

// fakeRegistry is a cluster's connection registry reduced to what a test
// sets: whose notifications this node must not send (notHere), which
// subscriptions were made through other nodes (remote, keyed "connID
// uri"), and each principal's connections across the cluster (held).
// lookups, when set, counts the record and placement reads, as they copy
// records in the swarm.
type fakeRegistry struct {
	notHere map[string]bool
	remote  map[string]bool
	held    map[string][]ConnActivity
	lookups *int
}

func (f fakeRegistry) count() {
	if f.lookups != nil {
		*f.lookups++
	}
}

func (f fakeRegistry) NotifyHere(id string) bool {
	f.count()
	return !f.notHere[id]
}

func (f fakeRegistry) Get(id string) (ConnInfo, bool) {
	f.count()
	ci := ConnInfo{}
	for k, on := range f.remote {
		if conn, uri, _ := strings.Cut(k, " "); on && conn == id {
			ci.Subscriptions = append(ci.Subscriptions, uri)
		}
	}
	return ci, len(ci.Subscriptions) > 0
}

func (f fakeRegistry) OfPrincipal(p string, _ int) []ConnActivity { return slices.Clone(f.held[p]) }

func (fakeRegistry) Put(ConnInfo)                                               {}
func (fakeRegistry) Delete(string)                                              {}
func (fakeRegistry) Revoked(string) bool                                        { return false }
func (fakeRegistry) RevokedBefore() time.Time                                   { return time.Time{} }
func (fakeRegistry) MintSerial() bool                                           { return false }
func (fakeRegistry) StreamChanged(string, bool)                                 {}
func (fakeRegistry) CanServe(string) error                                      { return nil }
func (fakeRegistry) SpendState(context.Context, string, string, time.Time) bool { return false }

var _ Connections = fakeRegistry{}
