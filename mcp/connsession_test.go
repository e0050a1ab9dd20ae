package mcp

import (
	"reflect"
	"testing"

	"github.com/mark3labs/mcp-go/server"
)

// TestViewSessionForwardsEveryMethod pins that the per-request view session
// implements every optional session interface mcp-go v1.2.1 probes with a
// type assertion: one it lacked would silently switch a feature off (no
// elicitation, no roots, no log level) for every request. The list is every
// `SessionWith*` interface in mcp-go's server package; resource
// subscriptions are the exception, because the front answers
// resources/subscribe itself (beforeRequest) and records them in the
// cluster-wide connection registry, not in mcp-go's per-node session.
func TestViewSessionForwardsEveryMethod(t *testing.T) {
	view := reflect.TypeFor[*viewSession]()
	for _, c := range []struct {
		iface   reflect.Type
		forward bool
	}{
		{reflect.TypeFor[server.ClientSession](), true},
		{reflect.TypeFor[server.SessionWithTools](), true},
		{reflect.TypeFor[server.SessionWithLogging](), true},
		{reflect.TypeFor[server.SessionWithResources](), true},
		{reflect.TypeFor[server.SessionWithResourceTemplates](), true},
		{reflect.TypeFor[server.SessionWithClientInfo](), true},
		{reflect.TypeFor[server.SessionWithElicitation](), true},
		{reflect.TypeFor[server.SessionWithSampling](), true},
		{reflect.TypeFor[server.SessionWithRoots](), true},
		{reflect.TypeFor[server.SessionWithStreamableHTTPConfig](), true},
		{reflect.TypeFor[server.SessionWithSubscriptionFilter](), true},
		{reflect.TypeFor[server.SessionWithProtocolVersion](), true},
		{reflect.TypeFor[server.SessionWithResourceSubscriptions](), false},
		{reflect.TypeFor[server.SessionWithResourceSubscriptionsErr](), false},
	} {
		if got := view.Implements(c.iface); got != c.forward {
			t.Errorf("*viewSession implements %s = %v, want %v", c.iface.Name(), got, c.forward)
		}
	}
}
