package mcp

import (
	"bytes"
	"net/http"
)

// mcp-go's answer to a client response whose request it no longer waits for.
var noPendingRequest = []byte("No pending sampling request found")

// serveClientAnswer hands a client's answer to a server-initiated request
// (an elicitation/create, sampling or roots answer) to mcp-go. An answer that
// arrives after its request ended (the call was cancelled or timed out, so
// the user answered a stale question) is acknowledged with 202 and dropped:
// mcp-go answers it 400, and the official Go SDK then fails the client's
// next, unrelated call with that error.
func (s *Server) serveClientAnswer(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{header: http.Header{}, status: http.StatusOK}
	s.stream.ServeHTTP(rec, r)
	if rec.status == http.StatusBadRequest && bytes.Contains(rec.body.Bytes(), noPendingRequest) {
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
