package authz

import (
	"errors"
	"testing"
)

func guardPtr(g Guard) *Guard { return &g }

func mustPolicyGuard(t testing.TB, name, doc string) *Guard {
	t.Helper()
	p, err := ParsePolicy(name, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.Guard()
	if err != nil {
		t.Fatal(err)
	}
	return &g
}

// TestCheckBoot pins the exact refusal messages: cmd/node's boot tests
// assert them through the real binary.
func TestCheckBoot(t *testing.T) {
	embedder, err := NewGuard(AuthorizerFunc(allowEmbedder), ReadAuthorizerFunc(allowEmbedderRead))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		c    BootConfig
		want string // "" = boots
	}{
		{"stdio with nothing configured", BootConfig{Guard: guardPtr(DefaultGuard())}, ""},
		{"stdio, embedder without a guard", BootConfig{}, ""},
		{"network with the framework default", BootConfig{Guard: guardPtr(DefaultGuard()), NetworkTransports: true, ListenAddrs: []string{"0.0.0.0:8080"}},
			"--policy: a network transport needs an operator-configured tool and read policy (got the framework default)"},
		{"network without a guard", BootConfig{NetworkTransports: true},
			"--policy: a network transport needs an operator-configured tool and read policy (no authorizer was given)"},
		{"network, policy without tools and reads", BootConfig{Guard: mustPolicyGuard(t, "limits.yaml", "limits: {call_burst: 1}\n"), NetworkTransports: true},
			`--policy: a network transport needs an operator-configured tool and read policy (policy "limits" has neither a tools: nor a reads: section)`},
		{"network, policy without reads", BootConfig{Guard: mustPolicyGuard(t, "t.yaml", "name: tonly\ntools: []\n"), NetworkTransports: true},
			`--policy: a network transport needs an operator-configured read policy (policy "tonly" has no reads: section)`},
		{"network, policy without tools", BootConfig{Guard: mustPolicyGuard(t, "r.yaml", "name: ronly\nreads: []\n"), NetworkTransports: true},
			`--policy: a network transport needs an operator-configured tool policy (policy "ronly" has no tools: section)`},
		{"network, explicit empty lists", BootConfig{Guard: mustPolicyGuard(t, "e.yaml", "tools: []\nreads: []\n"), NetworkTransports: true}, ""},
		{"network, production policy", BootConfig{Guard: mustProduction(t), NetworkTransports: true, ListenAddrs: []string{"0.0.0.0:8080"}, SensitiveStaticTools: []string{"swarm_start"}}, ""},
		{"network, embedder guard", BootConfig{Guard: &embedder, NetworkTransports: true}, ""},
		{"dev on loopback", BootConfig{Guard: guardPtr(DevGuard()), Dev: true, NetworkTransports: true, ListenAddrs: []string{"127.0.0.1:8080", "[::1]:8080", "localhost:9000"}}, ""},
		{"dev on all interfaces", BootConfig{Guard: guardPtr(DevGuard()), Dev: true, NetworkTransports: true, ListenAddrs: []string{"127.0.0.1:8080", "0.0.0.0:8080"}},
			"--dev: refuses non-loopback address 0.0.0.0:8080"},
		{"dev on an empty host", BootConfig{Guard: guardPtr(DevGuard()), Dev: true, NetworkTransports: true, ListenAddrs: []string{":8080"}},
			"--dev: refuses non-loopback address :8080"},
		{"dev on a LAN address", BootConfig{Guard: guardPtr(DevGuard()), Dev: true, ListenAddrs: []string{"10.0.0.5:8080"}},
			"--dev: refuses non-loopback address 10.0.0.5:8080"},
		{"dev on a hostname", BootConfig{Guard: guardPtr(DevGuard()), Dev: true, ListenAddrs: []string{"node-0.mcpswarm:8080"}},
			`--dev: cannot tell whether address "node-0.mcpswarm:8080" is loopback: host "node-0.mcpswarm" is neither an IP address nor localhost`},
		{"dev on a v4-mapped loopback", BootConfig{Guard: guardPtr(DevGuard()), Dev: true, ListenAddrs: []string{"[::ffff:127.0.0.1]:1"}}, ""},
		{"dev with a policy", BootConfig{Guard: mustProduction(t), Dev: true, ListenAddrs: []string{"127.0.0.1:1"}},
			`--dev: conflicts with policy "production"; --dev runs the built-in development policy, so give one or the other`},
		{"sensitive static tool without an authorizer", BootConfig{SensitiveStaticTools: []string{"swarm_stop"}},
			`--policy: sensitive tool "swarm_stop" needs an authorizer and none was given`},
		{"several sensitive static tools", BootConfig{SensitiveStaticTools: []string{"swarm_start", "swarm_stop"}},
			`--policy: sensitive tools "swarm_start", "swarm_stop" need an authorizer and none was given`},
		{"sensitive tool with the default guard", BootConfig{Guard: guardPtr(DefaultGuard()), SensitiveStaticTools: []string{"swarm_stop"}}, ""},
		{"guard with no tool authorizer", BootConfig{Guard: &Guard{Name: "half", Reads: DefaultGuard().Reads}},
			`--policy: guard "half" has no tool authorizer`},
		{"guard with no authorizers", BootConfig{Guard: &Guard{Name: "empty"}},
			`--policy: guard "empty" has no tool and read authorizer`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBoot(tc.c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("booted; want %q", tc.want)
			case tc.want != "" && err.Error() != tc.want:
				t.Fatalf("error\n got: %s\nwant: %s", err, tc.want)
			}
		})
	}
}

func mustProduction(t testing.TB) *Guard {
	g, err := loadProduction(t).Guard()
	if err != nil {
		t.Fatal(err)
	}
	return &g
}

func TestCheckSensitive(t *testing.T) {
	def := DefaultGuard()
	cases := []struct {
		g         *Guard
		sensitive bool
		want      error
	}{
		{nil, false, nil},
		{nil, true, ErrSensitiveUnguarded},
		{&Guard{}, true, ErrSensitiveUnguarded},
		{&def, true, nil},
		{&def, false, nil},
	}
	for i, tc := range cases {
		if err := CheckSensitive(tc.g, tc.sensitive); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("case %d: %v, want %v", i, err, tc.want)
		}
	}
	if ErrSensitiveUnguarded.Error() != "sensitive_tool_unguarded" {
		t.Errorf("the client-visible code changed: %q", ErrSensitiveUnguarded)
	}
}

func TestIsLoopbackReadsEveryAddressForm(t *testing.T) {
	for _, c := range []struct {
		addr string
		want bool
		err  bool
	}{
		{"127.0.0.1:8080", true, false},
		{"127.0.0.1", true, false},
		{"[::1]:8080", true, false},
		{"[::1]", true, false},
		{"::1", true, false},
		{"LOCALHOST", true, false},
		{"localhost:9000", true, false},
		{"[::ffff:127.0.0.1]:1", true, false},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"10.0.0.5", false, false},
		{"example.com:443", false, true},
	} {
		got, err := IsLoopback(c.addr)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("IsLoopback(%q) = %v, %v; want %v, error %v", c.addr, got, err, c.want, c.err)
		}
	}
}
