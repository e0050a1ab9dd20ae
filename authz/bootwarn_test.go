package authz

import (
	"strings"
	"testing"
)

func TestBootWarningsFlagUnauthenticatedNetworkAddresses(t *testing.T) {
	allowAll := "name: open\ntools:\n  - allow: true\nreads:\n  - allow: true\n"
	withTokens := allowAll + "tokens:\n  - {sha256: \"" + strings.Repeat("ab", 32) + "\", subject: alice}\n"
	cases := []struct {
		name string
		c    BootConfig
		warn bool
	}{
		{"allow-all, no tokens, 0.0.0.0", BootConfig{Guard: mustPolicyGuard(t, "p", allowAll), NetworkTransports: true, ListenAddrs: []string{"0.0.0.0:8080"}}, true},
		{"allow-all, no tokens, a pod IP among loopbacks", BootConfig{Guard: mustPolicyGuard(t, "p", allowAll), NetworkTransports: true, ListenAddrs: []string{"127.0.0.1:8080", "10.0.0.5:9090"}}, true},
		{"allow-all, no tokens, loopback only", BootConfig{Guard: mustPolicyGuard(t, "p", allowAll), NetworkTransports: true, ListenAddrs: []string{"127.0.0.1:8080", "[::1]:9090"}}, false},
		{"tokens on 0.0.0.0", BootConfig{Guard: mustPolicyGuard(t, "p", withTokens), NetworkTransports: true, ListenAddrs: []string{"0.0.0.0:8080"}}, false},
		{"stdio only", BootConfig{Guard: mustPolicyGuard(t, "p", allowAll), ListenAddrs: []string{"0.0.0.0:8080"}}, false},
		{"--dev", BootConfig{Guard: guardPtr(DevGuard()), Dev: true, NetworkTransports: true, ListenAddrs: []string{"127.0.0.1:8080"}}, false},
	}
	for i, c := range cases {
		got := BootWarnings(c.c)
		if (len(got) > 0) != c.warn {
			t.Errorf("Test %d (%s): warnings %q; want a warning: %v", i, c.name, got, c.warn)
		}
		if len(got) > 0 && !strings.Contains(got[0], "NO AUTHENTICATION") {
			t.Errorf("Test %d (%s): warning %q does not say what is missing", i, c.name, got[0])
		}
	}
}
