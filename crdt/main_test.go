package crdt

import (
	"flag"
	"os"
	"testing"
)

// minRapidChecks is the number of cases every property test runs by default
// (rapid's own default is 100). An explicit -rapid.checks or RAPID_CHECKS
// still wins.
const minRapidChecks = "1000"

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := os.Getenv("RAPID_CHECKS") != ""
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "rapid.checks" {
			explicit = true
		}
	})
	if !explicit {
		if err := flag.Set("rapid.checks", minRapidChecks); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
