package standby

import (
	"fmt"
	"maps"
	"slices"
)

// Answer is how an owner answers a write once its snapshot was shipped.
type Answer int

const (
	// Replicated: every placed standby holds the write; answer it now
	// (fsync follows in the background).
	Replicated Answer = iota
	// Alone: no standby is placed (a lone node); answer on the owner's
	// own fsync.
	Alone
	// Degraded: a standby missed the write but is known down and the
	// owner is in the cluster's majority; answer on the owner's own fsync.
	Degraded
	// Fenced: a standby missed the write and the owner cannot rule out
	// that it is the one cut off; refuse the write (it may have reached a
	// standby).
	Fenced
	// Demoted: a standby holds a later epoch: another node owns the
	// session; refuse the write (it was not applied there).
	Demoted
)

func (a Answer) String() string {
	switch a {
	case Replicated:
		return "replicated"
	case Alone:
		return "alone"
	case Degraded:
		return "degraded"
	case Fenced:
		return "fenced"
	case Demoted:
		return "demoted"
	}
	return fmt.Sprintf("Answer(%d)", int(a))
}

// Verdict is the acknowledgement rule: it decides from out, what became of
// a write's snapshot, how the owner answers the write. down reports
// whether a standby that missed it (with why) is known not to be running;
// inMajority reports whether the owner is in the cluster's majority (nil)
// and is asked only when a standby missed the write. why explains a
// Fenced or Demoted answer. Verdict does no I/O: the same inputs give the
// same answer.
//
// A standby that missed the write may only be left behind when it is known
// down: one merely unreachable may be on the majority's side of a
// partition, about to take the session over without this write.
func Verdict(out Outcome, down func(node string, why error) bool, inMajority func() error) (a Answer, why error) {
	switch {
	case out.Stale != nil:
		return Demoted, out.Stale
	case out.Replicated():
		return Replicated, nil
	case len(out.Placed) == 0:
		return Alone, nil
	}
	for _, node := range slices.Sorted(maps.Keys(out.Missed)) {
		if miss := out.Missed[node]; !down(node, miss) {
			return Fenced, fmt.Errorf("standby %s did not acknowledge (%w) and is not known down", node, miss)
		}
	}
	if err := inMajority(); err != nil {
		return Fenced, err
	}
	return Degraded, nil
}
