package deploy

import (
	"strings"
	"testing"
	"time"
)

// The manifest's timers come back as serve flags whose durations parse:
// what the LAN e2e tests and bench/realscale pass to their nodes.
func TestManifestTimersAreTheStatefulSetsProbeInterval(t *testing.T) {
	flags, err := ManifestTimers()
	if err != nil {
		t.Fatal(err)
	}
	if len(flags) != 1 {
		t.Fatalf("ManifestTimers() = %q, want one flag", flags)
	}
	v, ok := strings.CutPrefix(flags[0], "--probe-interval=")
	if !ok {
		t.Fatalf("ManifestTimers() = %q, want --probe-interval=…", flags)
	}
	if d, err := time.ParseDuration(v); err != nil || d <= 0 {
		t.Fatalf("the manifest's probe interval %q is not a positive duration (%v)", v, err)
	}
}
