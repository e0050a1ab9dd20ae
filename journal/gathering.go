package journal

// reprobeEvery is how many rounds a gathering that stopped probing waits
// before it probes again, so rounds grow when more writers arrive. One
// probe that finds no writer more costs one round one Gather.
const reprobeEvery = 64

// gathering decides how many writes a Sync round waits for before it
// commits, from what the rounds before it held: PostgreSQL's
// commit_delay, with its siblings judged by the rounds themselves. It is
// pure logic; the journal feeds it every committed round.
//
// After a round of several writes, the next round probes for one writer
// more than that. A probe that the timer ends (no writer more came) stops
// the probing: later rounds wait only for as many writes as the round
// before held, which a steady set of writers refills at once, so a fixed
// number of concurrent writers does not pay a Gather on every round. A
// round that grows past what it waited for, or reprobeEvery rounds, start
// the probing again.
type gathering struct {
	last   int  // writes the last committed round held
	calm   bool // a probe found no writer more: wait for last, not last+1
	rounds int  // rounds committed since the probing stopped
}

// want returns how many writes the round being gathered, holding have,
// waits for; 0 means it commits now.
func (g *gathering) want(have int) int {
	w := g.last + 1
	if g.calm {
		w = g.last
	}
	if g.last <= 1 || have >= w {
		return 0
	}
	return w
}

// committed records a round of n writes, and whether its wait for want's
// answer ended by the timer, short of it.
func (g *gathering) committed(n int, timedOut bool) {
	switch {
	case timedOut && !g.calm:
		g.calm, g.rounds = true, 0
	case g.calm:
		g.rounds++
		if n > g.last || g.rounds >= reprobeEvery {
			g.calm = false
		}
	}
	g.last = n
}
