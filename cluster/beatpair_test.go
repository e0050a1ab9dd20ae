package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mcpswarm/mcpswarm/internal/memnet"
)

// withoutBeatPair makes a node advertise what the previous version did:
// everything but CapBeatPair.
func withoutBeatPair(c *Config) {
	c.Capabilities = slices.DeleteFunc(DefaultCapabilities(), func(n string) bool { return n == CapBeatPair })
}

// beatClock starts the nodes' cluster clock on a multiple of every
// heartbeat period (17 s is one of 500 ms and 680 ms), so that advancing it
// by one period is one tick.
func beatClock() *clockwork.FakeClock {
	return clockwork.NewFakeClockAt(time.Unix(17*105_882_352, 0))
}

// heardAt is when n last renewed its lease on o's writes.
func heardAt(n, o *tnode) time.Time {
	l := n.c.repl.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heard[o.c.Origin()]
}

// heartbeats sums the heartbeats the nodes sent (event "sent") or had
// answered ("answered").
func heartbeats(tb testing.TB, nodes []*tnode, event string) float64 {
	sum := 0.0
	for _, n := range nodes {
		sum += metric(tb, n.prom, "mcpswarm_cluster_heartbeats_total", "event", event)
	}
	return sum
}

// linkBeats is how many heartbeats n sent on its streams to o.
func linkBeats(n, o *tnode) uint64 {
	sent, _ := linkAnswers(n, o)
	return sent
}

// linkAnswers is how many heartbeats n sent on its streams to o, and how
// many answers it got; a link re-dialled (a member that flapped dead and
// alive) counts afresh.
func linkAnswers(n, o *tnode) (sent, answered uint64) {
	n.c.repl.linksMu.Lock()
	defer n.c.repl.linksMu.Unlock()
	if l := n.c.repl.links[o.name]; l != nil {
		return l.beats.Load(), l.answers.Load()
	}
	return 0, 0
}

// unanswered returns an error naming a stream with a heartbeat in flight.
func unanswered(nodes []*tnode) error {
	for _, n := range nodes {
		for _, o := range nodes {
			if s, a := linkAnswers(n, o); o != n && (s == 0 || s != a) {
				return fmt.Errorf("%s sent %s %d heartbeats, %d answered", n.name, o.name, s, a)
			}
		}
	}
	return nil
}

// eager reports whether n's stream to o must heartbeat every period: unless
// both read positions in answers and o, the smaller name, heartbeats.
func eager(n, o *tnode) bool {
	pairs := func(t *tnode) bool { return ownCapabilities(t.cfg).Has(CapBeatPair) }
	return !(pairs(n) && pairs(o) && o.name < n.name)
}

// beatRun drives idle nodes tick by tick on their cluster clock.
type beatRun struct {
	nodes []*tnode
	clock *clockwork.FakeClock
	ticks uint64
	base  map[[2]string]uint64 // linkBeats when the count started
}

// startBeats waits until every stream is open (it sent its opening
// position and had it answered, so it waits for the next tick: a stream
// still opening at a tick would heartbeat only at the one after).
func startBeats(tb testing.TB, nodes []*tnode, clock *clockwork.FakeClock) *beatRun {
	tb.Helper()
	eventually(tb, 20*time.Second, func() error { return unanswered(nodes) })
	run := &beatRun{nodes: nodes, clock: clock, base: map[[2]string]uint64{}}
	for _, n := range nodes {
		for _, o := range nodes {
			if o != n {
				run.base[[2]string{n.name, o.name}] = linkBeats(n, o)
			}
		}
	}
	return run
}

// tick advances the cluster clock by one heartbeat period and waits until
// every stream that must heartbeat every period has, every node has
// renewed its lease on every other at that instant (both directions of
// every pair) and every heartbeat sent was answered, so the next tick
// finds none in flight. Every node must be in sync.
func (run *beatRun) tick(tb testing.TB) {
	tb.Helper()
	run.clock.Advance(heartbeatEvery(run.nodes[0].cfg))
	run.ticks++
	at := run.clock.Now()
	eventually(tb, 20*time.Second, func() error {
		for _, n := range run.nodes {
			for _, o := range run.nodes {
				if o == n {
					continue
				}
				if heardAt(n, o).Before(at) {
					return fmt.Errorf("%s last renewed its lease on %s at %v, not at the tick %v", n.name, o.name, heardAt(n, o), at)
				}
				if got := linkBeats(n, o) - run.base[[2]string{n.name, o.name}]; eager(n, o) && got < run.ticks {
					return fmt.Errorf("%s sent %s %d heartbeats in %d periods", n.name, o.name, got, run.ticks)
				}
			}
		}
		return unanswered(run.nodes)
	})
	for _, n := range run.nodes {
		if err := n.c.InSync(); err != nil {
			tb.Fatalf("%s at the tick %v: %v", n.name, at, err)
		}
	}
}

// heartbeatsPerPair runs ticks heartbeat periods on nodes at rest and
// returns the heartbeats sent per pair of nodes per period (each is one
// request and one answer on the wire).
func heartbeatsPerPair(tb testing.TB, nodes []*tnode, clock *clockwork.FakeClock, ticks int) float64 {
	tb.Helper()
	run := startBeats(tb, nodes, clock)
	for range 3 {
		run.tick(tb)
	}
	before := heartbeats(tb, nodes, "sent")
	for range ticks {
		run.tick(tb)
	}
	pairs := len(nodes) * (len(nodes) - 1) / 2
	return (heartbeats(tb, nodes, "sent") - before) / float64(pairs*ticks)
}

func TestBeatPairHeartbeatsOneStreamOfEachPair(t *testing.T) {
	const ticks = 20
	for _, tc := range []struct {
		name     string
		opts     []func(*Config)
		min, max float64 // heartbeats per pair per period
	}{
		// Each of a pair's two streams heartbeats every period.
		{"previous version", []func(*Config){withoutBeatPair}, 2, 2},
		// One stream every period; the other keeps itself open every
		// StreamIdle/2 (LocalConfig: every other period), one tick either
		// way at the window's ends.
		{"beat-pair", nil, 1 + float64(ticks/2-1)/ticks, 1 + float64(ticks/2+1)/ticks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := beatClock()
			nodes := startCluster(t, 3, append([]func(*Config){func(c *Config) { c.Clock = clock }}, tc.opts...)...)
			got := heartbeatsPerPair(t, nodes, clock, ticks)
			t.Logf("%.2f heartbeats per pair per period, %.2f messages per pair per second", got, 2*got/heartbeatEvery(nodes[0].cfg).Seconds())
			if got < tc.min || got > tc.max {
				t.Fatalf("%.2f heartbeats per pair per period, want %.2f to %.2f", got, tc.min, tc.max)
			}
		})
	}
}

// A node of the previous version (no CapBeatPair) reads no position in an
// answer: it must get every heartbeat, whichever of the pair's names is the
// smaller, and the leases both ways stay fresh (tick fails otherwise).
func TestBeatPairMixedPairKeepsBothLeasesFresh(t *testing.T) {
	clock := beatClock()
	onClock := func(c *Config) { c.Clock = clock }
	nw := memnet.New()
	// n1 is the previous version: the smaller name of its pair with n2,
	// the larger of its pair with n0. n0 and n2 pair up.
	n0 := startNode(t, nw, "n0", "", onClock)
	n1 := startNode(t, nw, "n1", "", onClock, joinTo(n0), withoutBeatPair)
	n2 := startNode(t, nw, "n2", "", onClock, joinTo(n0))
	nodes := []*tnode{n0, n1, n2}
	awaitMembers(t, nodes, 20*time.Second)
	const ticks = 20
	got := heartbeatsPerPair(t, nodes, clock, ticks)
	// Five streams every period, n2's to n0 every other one.
	want := (5*ticks + ticks/2) / 3.0 / ticks
	if got < want-1.0/ticks || got > want+1.0/ticks {
		t.Fatalf("%.3f heartbeats per pair per period, want %.3f: only n2's stream to n0 may be quiet", got, want)
	}
}

// Each stream of a pair renews both leases: when the heartbeats of the
// smaller node's stream stop arriving (its writes to the larger one are
// held up), the larger node, which no longer answers any, heartbeats its
// own stream every period, and the smaller one's answers renew the lease
// the other way. Before, each lease had one stream: the larger node's
// lease on the smaller one lapsed with the smaller one's heartbeats.
func TestBeatPairEitherStreamRenewsBothLeases(t *testing.T) {
	clock := beatClock()
	onClock := func(c *Config) { c.Clock = clock }
	g := newGate()
	nw := memnet.New()
	n0 := startNode(t, nw, "n0", "", onClock, g.option)
	n1 := startNode(t, nw, "n1", "", onClock, joinTo(n0))
	nodes := []*tnode{n0, n1}
	awaitMembers(t, nodes, 20*time.Second)
	run := startBeats(t, nodes, clock)
	run.tick(t)
	run.tick(t)

	g.block() // what n0 sends on the connection it dialed to n1 is held up
	defer g.release()
	quiet := linkBeats(n1, n0)
	every := heartbeatEvery(n0.cfg)
	const ticks = 4 // within StreamIdle (4.4 periods): no stream is cut yet
	for i := 1; i <= ticks; i++ {
		clock.Advance(every)
		at := clock.Now()
		if i >= 2 {
			// n1 last answered n0 before the hold-up, more than quietFor
			// ago from here on: it heartbeats, n0 answers.
			eventually(t, 20*time.Second, func() error {
				for _, p := range [][2]*tnode{{n0, n1}, {n1, n0}} {
					if h := heardAt(p[0], p[1]); h.Before(at) {
						return fmt.Errorf("%s last renewed its lease on %s at %v, not at the tick %v", p[0].name, p[1].name, h, at)
					}
				}
				return nil
			})
		}
		for _, n := range nodes {
			if err := n.c.InSync(); err != nil {
				t.Fatalf("%s %v after n0's heartbeats stopped arriving: %v", n.name, time.Duration(i)*every, err)
			}
		}
	}
	if got := linkBeats(n1, n0) - quiet; got < ticks-1 {
		t.Fatalf("n1 sent n0 %d heartbeats in the %d periods after n0's stopped arriving, want one a period from the second", got, ticks)
	}
}

// A pair of nodes at rest exchanges at most 3.3 heartbeat messages a second
// on LAN timers and 4.5 on loopback ones (a heartbeat every 680 ms, two
// fifths of the 1.7 s lease, answered; the pair's other stream kept open
// every StreamIdle/2), where it exchanged 4.4 and 6 with a heartbeat every
// 500 ms, a third of a 1.5 s lease: what a node does per peer at rest
// (docs/bench/idle.md). The lease leaves a heartbeat the same room to be
// late as it did, a full second.
func TestIdleHeartbeatMessagesPerPairPerSecond(t *testing.T) {
	for _, tc := range []struct {
		name       string
		streamIdle time.Duration
		max        float64
	}{{"lan", DefaultConfig().StreamIdle, 3.3}, {"loopback", LocalConfig().StreamIdle, 4.5}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := beatClock()
			nodes := startCluster(t, 3, func(c *Config) {
				c.Clock, c.StreamIdle, c.Lease = clock, tc.streamIdle, DefaultConfig().Lease
			})
			// 22 periods: two of the LAN timers' keep-opens, one every eleventh.
			perPeriod := heartbeatsPerPair(t, nodes, clock, 22)
			got := 2 * perPeriod / heartbeatEvery(nodes[0].cfg).Seconds()
			t.Logf("%.2f heartbeat messages per pair per second", got)
			if got > tc.max {
				t.Fatalf("%.2f heartbeat messages per pair per second at rest, want at most %.1f", got, tc.max)
			}
			if lapse := DefaultConfig().Lease - heartbeatEvery(nodes[0].cfg); lapse < time.Second {
				t.Fatalf("a heartbeat may be %v late before the lease runs out, want a second", lapse)
			}
		})
	}
}

// BenchmarkIdleHeartbeats runs a swarm at rest on the in-memory network,
// one heartbeat period of its cluster clock per iteration, and reports the
// replication streams' heartbeat messages (heartbeats and their answers)
// per pair of nodes per second: with beat-pair, one stream of a pair
// heartbeats and the other sends a message every StreamIdle/2 (every
// other period on loopback timers, every eleventh on LAN ones). Run with
// -benchtime=40x or more: the quiet streams send once in several periods.
func BenchmarkIdleHeartbeats(b *testing.B) {
	for _, size := range []int{3, 24} {
		for _, timers := range []struct {
			name       string
			streamIdle time.Duration
		}{{"loopback", LocalConfig().StreamIdle}, {"lan", DefaultConfig().StreamIdle}} {
			for _, version := range []struct {
				name string
				opts []func(*Config)
			}{{"previous", []func(*Config){withoutBeatPair}}, {"beat-pair", nil}} {
				b.Run(fmt.Sprintf("n=%d/%s/%s", size, timers.name, version.name), func(b *testing.B) {
					clock := beatClock()
					opts := append([]func(*Config){func(c *Config) { c.Clock = clock; c.StreamIdle = timers.streamIdle }}, version.opts...)
					nw := memnet.New()
					nodes := []*tnode{startNode(b, nw, "n00", "", opts...)}
					for i := 1; i < size; i++ {
						nodes = append(nodes, startNode(b, nw, fmt.Sprintf("n%02d", i), "", append([]func(*Config){joinTo(nodes[0])}, opts...)...))
					}
					awaitMembers(b, nodes, time.Minute)
					run := startBeats(b, nodes, clock)
					for range 3 {
						run.tick(b)
					}
					before := heartbeats(b, nodes, "sent")
					b.ResetTimer()
					for range b.N {
						run.tick(b)
					}
					b.StopTimer()
					pairs := float64(size * (size - 1) / 2)
					secs := (time.Duration(b.N) * heartbeatEvery(nodes[0].cfg)).Seconds()
					b.ReportMetric(2*(heartbeats(b, nodes, "sent")-before)/pairs/secs, "msgs/pair/s")
					b.ReportMetric(0, "ns/op") // wall time per period says nothing here
				})
			}
		}
	}
}
