package swarm

import (
	"encoding/json"
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
	return mergeRequests(c.rec, e.reqs), true
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

// cancelledMessage is the message of a task read as Cancelled because a
// client asked for it.
const cancelledMessage = "cancelled at the client's request"

// mergeRequests returns rec as the requests for it make it read.
func mergeRequests(rec task.Record, reqs map[string]taskReq) task.Record {
	if rec.Status.Terminal() || len(reqs) == 0 {
		return rec
	}
	answered := map[string]bool{}
	for _, r := range reqs {
		if r.req.Cancel {
			rec.Status, rec.Message, rec.InputRequests = task.Cancelled, cancelledMessage, nil
			return rec
		}
		if len(r.req.Responses) == 0 {
			continue
		}
		var keys map[string]json.RawMessage
		if json.Unmarshal(r.req.Responses, &keys) == nil {
			for k := range keys {
				answered[k] = true
			}
		}
	}
	if rec.Status != task.InputRequired || len(answered) == 0 || len(rec.InputRequests) == 0 {
		return rec
	}
	var pending map[string]json.RawMessage
	if json.Unmarshal(rec.InputRequests, &pending) != nil {
		return rec
	}
	n := len(pending)
	for k := range answered {
		delete(pending, k)
	}
	if len(pending) == n {
		return rec
	}
	if len(pending) == 0 {
		rec.Status, rec.InputRequests = task.Working, nil
		return rec
	}
	b, err := json.Marshal(pending)
	if err != nil {
		return rec
	}
	rec.InputRequests = b
	return rec
}
