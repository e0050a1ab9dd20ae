// Package deploy holds the deployment manifests (k8s/); its Go side reads
// from them the settings that tests and benchmarks copy, so they measure
// what a cluster deployed with the manifests gets.
package deploy

import (
	_ "embed"
	"errors"
	"regexp"
)

//go:embed k8s/statefulset.yaml
var statefulSet []byte

var probeFlag = regexp.MustCompile(`(?m)^\s*- (--probe-interval=\S+)\s*$`)

// ManifestTimers are the failure-detection flags the Kubernetes manifest
// passes to `mcpswarm serve` (k8s/statefulset.yaml). With a non-loopback
// gossip address they make the LAN timers a deployed node runs with.
func ManifestTimers() ([]string, error) {
	m := probeFlag.FindSubmatch(statefulSet)
	if m == nil {
		return nil, errors.New("deploy/k8s/statefulset.yaml passes no --probe-interval")
	}
	return []string{string(m[1])}, nil
}
