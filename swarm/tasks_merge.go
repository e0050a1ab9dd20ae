package swarm

import (
	"slices"
	"time"

	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// What every node reads for a task, from the copies and requests it holds.
// The rules are the same on every node, so nodes holding the same entries
// answer the same:
//
//   - Of the unexpired copies, a terminal one wins over any other, and of
//     two terminal ones the one settled first (earliest Updated, then the
//     smaller holder name): a status read as terminal never changes, even
//     when the runner and a survivor that adopted its task both settled it.
//   - Otherwise a copy of a live origin wins over a lost one, and the newer
//     over the older.
//   - A non-terminal winner reads as Cancelled once any request asks to
//     cancel it, and without the input requests a request answered: when
//     none is left it reads as Working, the runner about to resume it.

// winner returns the copy of e every node reads, nil when e has none that
// is unexpired at now.
func (e *taskEntry) winner(now time.Time) *taskCopy {
	if e == nil {
		return nil
	}
	var best *taskCopy
	for _, c := range e.copies {
		if c.rec.Expired(now) {
			continue
		}
		if best == nil || c.beats(best) {
			best = c
		}
	}
	return best
}

// beats reports whether c is read rather than d.
func (c *taskCopy) beats(d *taskCopy) bool {
	ct, dt := c.rec.Status.Terminal(), d.rec.Status.Terminal()
	if ct != dt {
		return ct
	}
	if ct {
		if !c.rec.Updated.Equal(d.rec.Updated) {
			return c.rec.Updated.Before(d.rec.Updated)
		}
		return c.origin.Name < d.origin.Name
	}
	if c.lost != d.lost {
		return !c.lost
	}
	if !c.rec.Updated.Equal(d.rec.Updated) {
		return c.rec.Updated.After(d.rec.Updated)
	}
	return c.origin.Name < d.origin.Name
}

// view returns the task as every node reads it at now.
func (e *taskEntry) view(now time.Time) (task.Record, bool) {
	c := e.winner(now)
	if c == nil {
		return task.Record{}, false
	}
	return task.Merge(c.rec, e.requests()), true
}

// requests returns e's requests in key order.
func (e *taskEntry) requests() []task.Request {
	if len(e.reqs) == 0 {
		return nil
	}
	keys := make([]string, 0, len(e.reqs))
	for k := range e.reqs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]task.Request, len(keys))
	for i, k := range keys {
		out[i] = e.reqs[k].req
	}
	return out
}

// cancelRequested reports whether a request asks to cancel e's task.
func (e *taskEntry) cancelRequested() bool {
	for _, r := range e.reqs {
		if r.req.Cancel {
			return true
		}
	}
	return false
}
