package swarm

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpswarm/mcpswarm/session"
)

// Registry names.
const (
	regSessions = "sessions"
	regTools    = "tools"
	regTasks    = "tasks"
)

// sessionRecord is a session as every node sees it (registry "sessions",
// key: session id). Only its owner writes it.
type sessionRecord struct {
	App       string    `json:"app"`
	Principal string    `json:"principal"`
	Created   time.Time `json:"created"`
	Status    string    `json:"status"`
	// Node is the owner's name.
	Node string `json:"node"`
	// Rev counts changes per resource ("widgets", "model/<key>", …) so
	// other nodes can tell their subscribers that a resource changed.
	Rev map[string]uint64 `json:"rev,omitempty"`
	// Handoff is the session's handoff generation (session.Info.Handoff):
	// a record of a later generation supersedes any earlier one.
	Handoff uint64 `json:"handoff,omitempty"`
	// MovedTo, set on a sender's forwarding record after a handoff, names
	// the adopter: calls that still find this record go there.
	MovedTo string `json:"moved_to,omitempty"`
	// Standbys are the nodes holding the owner's newest snapshot of the
	// session, in placement order: when the owner dies, the first of them
	// alive takes the session over under Handoff+1.
	Standbys []string `json:"standbys,omitempty"`
	// Behind names the placed standbys that miss the newest snapshot,
	// with when each fell out of sync (Unix milliseconds). It changes only
	// when the in-sync set does, so it costs no publish per write.
	Behind map[string]int64 `json:"behind,omitempty"`
}

// behind is r.Behind as times.
func (r sessionRecord) behind() map[string]time.Time {
	if len(r.Behind) == 0 {
		return nil
	}
	out := make(map[string]time.Time, len(r.Behind))
	for node, ms := range r.Behind {
		out[node] = time.UnixMilli(ms)
	}
	return out
}

func (r sessionRecord) info(id string) session.Info {
	return session.Info{ID: id, App: r.App, Principal: r.Principal, Created: r.Created, Status: r.Status, Handoff: r.Handoff}
}

// toolsRecord is a session's sticky tool set (registry "tools", key: session
// id), written by the owner whenever the set changes.
type toolsRecord struct {
	Principal string         `json:"principal"`
	Tools     []session.Tool `json:"tools"`
}

func decodeSession(b []byte) (sessionRecord, error) {
	var r sessionRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decoding session record: %w", err)
	}
	return r, nil
}

func decodeTools(b []byte) (toolsRecord, error) {
	var r toolsRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decoding tools record: %w", err)
	}
	return r, nil
}

// earlier reports whether creation a (by origin ao) precedes creation b (by
// origin bo): the earlier timestamp wins, and the origin string breaks ties,
// so every node resolves a duplicate id the same way.
func earlier(a time.Time, ao string, b time.Time, bo string) bool {
	if !a.Equal(b) {
		return a.Before(b)
	}
	return ao < bo
}
