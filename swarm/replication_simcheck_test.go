package swarm

// The configuration and the check of the replication simulation
// (replication_sim_test.go): porcupine against a counter.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// simConfig is what a schedule's faults and rules are (the -sim flags).
type simConfig struct {
	faults string
	reads  bool
}

func flagConfig() simConfig {
	return simConfig{faults: *simFaults, reads: *simReads}
}

// String is the config as -sim flags, for a rerun.
func (c simConfig) String() string {
	out := "-sim.faults=" + c.faults
	for _, f := range []struct {
		on   bool
		name string
	}{{c.reads, "reads"}} {
		if f.on {
			out += " -sim." + f.name
		}
	}
	return out
}

// survey runs every schedule and reports the failing ones by kind, the
// shortest transcripts first.
func survey(t *testing.T, seeds []int64, cfg simConfig) {
	type fail struct {
		seed   int64
		bad    string
		script string
	}
	var fails []fail
	for _, seed := range seeds {
		s := newSim(seed, cfg)
		s.run()
		if bad := s.check(); bad != "" {
			fails = append(fails, fail{seed, bad, s.transcript()})
		}
	}
	slices.SortFunc(fails, func(a, b fail) int { return len(a.script) - len(b.script) })
	kinds := map[string][]int64{}
	for _, f := range fails {
		kind := f.bad[strings.Index(f.bad, ":")+2 : strings.Index(f.bad, "(")]
		if len(kinds[kind]) < *simShow {
			t.Logf("seed %d: %s\n%s", f.seed, f.bad, f.script)
		}
		kinds[kind] = append(kinds[kind], f.seed)
	}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		t.Logf("%s: %d schedules %v", k, len(kinds[k]), kinds[k])
	}
	if len(fails) > 0 {
		t.Errorf("%d of %d schedules (%s) fail", len(fails), len(seeds), cfg)
	}
}

type counterIn struct {
	write bool
	final bool // a read once all is healed
	what  string
}

// unknown marks the output of a write whose answer never came or was a
// refusal that may have applied.
const unknown = -1

// check runs porcupine on each session's history: its writes and the
// reads every node answers once all is healed must be linearizable (one
// history every node agrees on), and with -sim.reads the reads made
// during the schedule too. It returns what is wrong, or "".
func (s *sim) check() string {
	for _, id := range s.ids {
		var all, one []porcupine.Operation
		for _, op := range s.ops[id] {
			if op.drop {
				continue
			}
			all = append(all, op.Operation)
			if in := op.Input.(counterIn); in.write || in.final {
				one = append(one, op.Operation)
			}
		}
		if res := porcupine.CheckOperationsTimeout(counterModel, one, 10*time.Second); res != porcupine.Ok {
			return fmt.Sprintf("session %s: the writes fork (%s):\n%s", id, res, describe(all))
		}
		if res := porcupine.CheckOperationsTimeout(counterModel, all, 10*time.Second); s.cfg.reads && res != porcupine.Ok {
			return fmt.Sprintf("session %s: a read is stale (%s):\n%s", id, res, describe(all))
		}
	}
	return ""
}

func describe(ops []porcupine.Operation) string {
	var b strings.Builder
	for _, op := range ops {
		ret := "never"
		if op.Return < 1<<62 {
			ret = fmt.Sprint(op.Return)
		}
		fmt.Fprintf(&b, "  [%d..%s] %s -> %v\n", op.Call, ret, op.Input.(counterIn).what, op.Output)
	}
	return b.String()
}

// counterModel is the app: a counter whose writes add one and answer the
// new value, and whose reads answer the value.
var counterModel = porcupine.Model{
	Init: func() any { return 0 },
	Step: func(state, input, output any) (bool, any) {
		v, in, out := state.(int), input.(counterIn), output.(int)
		if in.write {
			return out == unknown || out == v+1, v + 1
		}
		return out == v, v
	},
	DescribeOperation: func(input, output any) string {
		return fmt.Sprintf("%s -> %v", input.(counterIn).what, output)
	},
}
