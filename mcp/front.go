package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	wellKnownPRM          = "/.well-known/oauth-protected-resource"
)

// front is the HTTP handler of the front: DNS-rebinding protection,
// authentication, body/batch/nesting limits, session id validation on
// every method, and the read authorizer, all before a method runs.
func (s *Server) front() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", s.serveStreamable)
	mux.HandleFunc("/sse", s.serveSSE)
	mux.HandleFunc("/message", s.serveSSEMessage)
	if s.cfg.Guard.Authenticator != nil {
		mux.HandleFunc(wellKnownPRM, s.serveMetadata)
		mux.HandleFunc(wellKnownPRM+"/mcp", s.serveMetadata)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rejectRebinding(w, r) {
			return
		}
		if strings.HasPrefix(r.URL.Path, "/.well-known/") {
			mux.ServeHTTP(w, r)
			return
		}
		id := identity{}
		if a := s.cfg.Guard.Authenticator; a != nil {
			p, err := a.Authenticate(r)
			switch {
			case err == nil:
				id.principal, id.authed = p, true
			case errors.Is(err, authz.ErrNoToken) && !a.Required():
			default:
				a.Challenge(w, err, s.metadataURL(r))
				return
			}
		}
		mux.ServeHTTP(w, r.WithContext(withIdentity(r.Context(), id)))
	})
}

func (s *Server) resourceURL(r *http.Request) string {
	if s.cfg.ResourceURL != "" {
		return s.cfg.ResourceURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/mcp"
}

func (s *Server) metadataURL(r *http.Request) string {
	u, err := url.Parse(s.resourceURL(r))
	if err != nil {
		return wellKnownPRM
	}
	u.Path = wellKnownPRM + u.Path
	return u.String()
}

func (s *Server) serveMetadata(w http.ResponseWriter, r *http.Request) {
	authz.ProtectedResourceMetadataHandler(s.resourceURL(r), s.cfg.AuthServers, nil).ServeHTTP(w, r)
}

// isLoopback is authz.IsLoopback for a Host header or URL host, where a
// name other than localhost simply is not loopback.
func isLoopback(hostport string) bool {
	ok, _ := authz.IsLoopback(hostport)
	return ok
}

// rejectRebinding refuses a request that reached a loopback listener with a
// non-loopback Host or Origin: a DNS-rebinding page in a browser.
func rejectRebinding(w http.ResponseWriter, r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !authz.IsLoopbackAddr(local) {
		return false
	}
	if !isLoopback(r.Host) {
		http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
		return true
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !isLoopback(u.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: invalid Origin header %q", o), http.StatusForbidden)
			return true
		}
	}
	return false
}

func writeRPCError(w http.ResponseWriter, status int, e *rpcError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(e.marshal(), '\n'))
}

// readBody reads a POST body within the size limit and checks it; on
// failure it has answered the request.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, wire.Envelope, bool) {
	body, err := readAllSized(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), r.ContentLength)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.metrics.rejected("body_too_large")
			writeRPCError(w, http.StatusRequestEntityTooLarge, &rpcError{Code: codeInvalidRequest,
				Message: fmt.Sprintf("request body exceeds the limit of %d bytes", s.cfg.MaxBodyBytes)})
			return nil, wire.Envelope{}, false
		}
		writeRPCError(w, http.StatusBadRequest, &rpcError{Code: codeParseError, Message: "reading the request body failed"})
		return nil, wire.Envelope{}, false
	}
	env, rerr := checkMessage(body, s.cfg.MaxBatch, s.cfg.MaxDepth)
	if rerr != nil {
		s.metrics.rejected("bad_message")
		writeRPCError(w, http.StatusBadRequest, rerr)
		return nil, wire.Envelope{}, false
	}
	if rerr, status := s.init.check(r, env); rerr != nil {
		s.metrics.rejected("initialize_limit")
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "60")
		}
		writeRPCError(w, status, rerr)
		return nil, wire.Envelope{}, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return body, env, true
}

// readAllSized is io.ReadAll starting from a buffer of the declared
// length (plus one byte to see the end) instead of 512 bytes: a typical
// call's body is far smaller. The declared length is only a hint, bounded
// here and by rd; a body longer than it grows the buffer as io.ReadAll does.
func readAllSized(rd io.Reader, declared int64) ([]byte, error) {
	if declared < 0 || declared >= 64<<10 {
		return io.ReadAll(rd)
	}
	b := make([]byte, 0, declared+1)
	for {
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// modernRequest reports whether a POST speaks 2026-07-28 or later: the
// header or the body's _meta names a modern version.
func modernRequest(r *http.Request, params json.RawMessage) bool {
	if mcp.IsModernProtocol(r.Header.Get(headerProtocolVersion)) {
		return true
	}
	if !mayHaveKey(params, "_meta") {
		return false // decoding would find no _meta: skip it
	}
	var p struct {
		Meta *mcp.Meta `json:"_meta"`
	}
	if len(params) > 0 && json.Unmarshal(params, &p) == nil && p.Meta != nil {
		return mcp.IsModernProtocol(p.Meta.ProtocolVersion())
	}
	return false
}

// mayHaveKey reports whether encoding/json could match an object key of b
// to the field tag key (lower-case ASCII letters other than k and s, which
// have non-ASCII case folds, and punctuation): b holds key under ASCII
// case folding, or an escape (a key may spell it with \u sequences).
// False means decoding b would leave that field unset.
func mayHaveKey(b []byte, key string) bool {
	if bytes.IndexByte(b, '\\') >= 0 {
		return true
	}
	for i := 0; i+len(key) <= len(b); i++ {
		j := 0
		for j < len(key) && b[i+j]|0x20 == key[j]|0x20 {
			j++
		}
		if j == len(key) {
			return true
		}
	}
	return false
}

// checkSessionID validates the Mcp-Session-Id of a legacy request; on
// failure it has answered 404 (or 400 when the header is missing).
func (s *Server) checkSessionID(w http.ResponseWriter, r *http.Request, id string) bool {
	if id == "" {
		http.Error(w, "Bad Request: Mcp-Session-Id header required", http.StatusBadRequest)
		return false
	}
	if _, err := s.ids.Open(id, boundSubject(r.Context())); err != nil {
		s.metrics.rejected("session_id")
		http.Error(w, "Invalid session ID", http.StatusNotFound)
		return false
	}
	if s.ids.Terminated(id) {
		http.Error(w, "Session terminated", http.StatusNotFound)
		return false
	}
	if boundSubject(r.Context()) != "" {
		s.init.conns.touch(id, time.Now())
	}
	return s.canServe(w, id)
}

// HoldsStream reports whether this node holds connection id's GET stream
// (so it is the node that must send the connection's notifications).
func (s *Server) HoldsStream(id string) bool { return s.streams.holdsGET(id) }

// DeliverResponse takes a client's JSON-RPC message another node's Relay
// forwarded here: a response to a request this node sent, which it hands
// to the call waiting for it, or a notifications/cancelled, which cancels
// the call if it runs here. It returns 202 when delivered.
func (s *Server) DeliverResponse(_ context.Context, connID string, body []byte) (int, error) {
	if _, err := s.ids.Claims(connID); err != nil {
		return http.StatusNotFound, fmt.Errorf("delivering a forwarded response: %w", err)
	}
	env, rerr := checkMessage(body, s.cfg.MaxBatch, s.cfg.MaxDepth)
	switch {
	case rerr != nil:
		return http.StatusBadRequest, fmt.Errorf("delivering a forwarded response: %w", rerr)
	case env.Method == string(mcp.MethodNotificationCancelled):
		s.calls.Cancel(connID, env.Params)
		return http.StatusAccepted, nil
	case env.IsResponse():
		if _, local, tagged := wire.ParseRelayID(env.ID); tagged && s.asks.answer(connID, local, env) {
			return http.StatusAccepted, nil
		}
		return http.StatusBadRequest, fmt.Errorf("delivering a forwarded response (id %s): %w", env.ID, errNoAnswer)
	}
	return http.StatusBadRequest, fmt.Errorf("delivering a forwarded message: %q is neither a response nor a cancellation", env.Method)
}

// statusRecorder is a minimal http.ResponseWriter for DeliverResponse.
type statusRecorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *statusRecorder) Header() http.Header { return r.header }

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	r.wrote = true
	return r.body.Write(p)
}
