package swarm

import (
	"errors"
	"fmt"
	"time"
)

// StaleError says this node may hold older state of a connection than a
// peer wrote: it must not serve the connection now. The front answers 503
// with RetryAfter as the Retry-After header.
type StaleError struct {
	ConnID string
	Retry  time.Duration
	Cause  error
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("connection %s cannot be served by this node yet: %v", e.ConnID, e.Cause)
}

func (e *StaleError) Unwrap() error { return e.Cause }

// RetryAfter is how long the client should wait before asking again.
func (e *StaleError) RetryAfter() time.Duration { return e.Retry }

// CanServe implements mcp.Connections: it reports whether this node may
// serve connection connID. It fails while the node may be missing a live
// peer's writes (cluster.InSync: it has not heard from that peer within the
// lease, e.g. cut off by a partition). A writer whose change this node
// missed answers its client only once this node's lease has lapsed, so a
// connection's state read here is never older than a change some client
// was told about.
//
// Every connection is refused, not only those the node has records of: a
// change it missed may be the first record of that connection.
func (c *Conns) CanServe(connID string) error {
	err := c.s.cl.InSync()
	if err == nil {
		return nil
	}
	retry := time.Second
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		retry = ra.RetryAfter()
	}
	return &StaleError{ConnID: connID, Retry: retry, Cause: err}
}
