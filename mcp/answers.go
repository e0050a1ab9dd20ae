package mcp

import (
	"bytes"
	"net/http"
)

// mcp-go's answers to a client response nobody here waits for: the request
// ended (400), or this node holds no stream for the connection (404; the
// connection's id was already verified, so it exists, elsewhere).
var (
	noPendingRequest = []byte("No pending sampling request found")
	noActiveSession  = []byte("No active session found")
)

// serveClientAnswer hands a client's answer to a server-initiated request
// (an elicitation/create, sampling or roots answer) to mcp-go. An answer that
// arrives after its request ended (the call was cancelled or timed out, so
// the user answered a stale question) is acknowledged with 202 and dropped:
// mcp-go answers it 400, or 404 on a node without the connection's GET
// stream, and the official Go SDK then fails the client's next, unrelated
// call with that error, or (on 404) closes the client.
func (s *Server) serveClientAnswer(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{header: http.Header{}, status: http.StatusOK}
	s.stream.ServeHTTP(rec, r)
	if (rec.status == http.StatusBadRequest && bytes.Contains(rec.body.Bytes(), noPendingRequest)) ||
		(rec.status == http.StatusNotFound && bytes.Contains(rec.body.Bytes(), noActiveSession)) {
		s.log.Debug("late answer to a request that already ended; dropped", "conn", r.Header.Get(headerSessionID))
		w.WriteHeader(http.StatusAccepted)
		return
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.status)
	_, _ = w.Write(rec.body.Bytes())
}
