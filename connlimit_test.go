package mcpswarm

import "testing"

// The per-source cap's loopback exemption follows authz.IsLoopback, the one
// loopback rule: v4, v6 and v4-mapped loopback sources are exempt, others not.
func TestLoopbackSourcesAreTheLoopbackRule(t *testing.T) {
	for src, want := range map[string]bool{
		"127.0.0.1": true, "127.9.9.9": true, "::1": true, "::ffff:127.0.0.1": true,
		"10.0.0.1": false, "::": false, "0.0.0.0": false, "fe80::1": false, "": false, "not-an-ip": false,
	} {
		if got := isLoopbackSource(src); got != want {
			t.Errorf("isLoopbackSource(%q) = %v, want %v", src, got, want)
		}
	}
}
