// Package balancer is a load balancer with no stickiness, for end-to-end
// tests: every HTTP request goes to the next backend in turn, whatever
// session header it carries. Put it in front of several nodes to check that
// a client cannot tell them apart.
package balancer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// RoundRobin forwards each request to the next backend. Responses stream
// (server-sent events reach the client as they are written).
type RoundRobin struct {
	proxies []*httputil.ReverseProxy
	hosts   []string

	mu   sync.Mutex
	next int
	seen []int
}

// New returns a balancer over backends, given as host:port (HTTP).
func New(backends []string) (*RoundRobin, error) {
	if len(backends) == 0 {
		return nil, errors.New("balancer: no backend")
	}
	rr := &RoundRobin{seen: make([]int, len(backends))}
	for _, b := range backends {
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" || port == "" || strings.ContainsAny(b, "/?#@") {
			return nil, fmt.Errorf("balancer: backend %q is not host:port", b)
		}
		u, err := url.Parse("http://" + b)
		if err != nil {
			return nil, fmt.Errorf("balancer: backend %q is not host:port", b)
		}
		p := &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(u) // Host becomes the backend's, as a real proxy on loopback
				r.Out.Header["X-Forwarded-For"] = r.In.Header["X-Forwarded-For"]
			},
			FlushInterval: -1,
		}
		rr.proxies = append(rr.proxies, p)
		rr.hosts = append(rr.hosts, b)
	}
	return rr, nil
}

// pick returns the index of the next backend and counts it.
func (rr *RoundRobin) pick() int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	i := rr.next
	rr.next = (rr.next + 1) % len(rr.proxies)
	rr.seen[i]++
	return i
}

// maxBody bounds a buffered request body.
const maxBody = 8 << 20

// ServeHTTP forwards r to the next backend. The request body is read
// whole first, as nginx does by default (proxy_request_buffering): with the
// body streamed through, Go's transport now and then cut the backend's
// streaming answer ("use of closed network connection" mid-body) when the
// backend answered before the client's body was fully relayed.
func (rr *RoundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			http.Error(w, "balancer: reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Del("Transfer-Encoding")
		r.TransferEncoding = nil
	}
	rr.proxies[rr.pick()].ServeHTTP(w, r)
}

// Seen returns how many requests each backend received, in backend order.
func (rr *RoundRobin) Seen() map[string]int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	out := make(map[string]int, len(rr.hosts))
	for i, h := range rr.hosts {
		out[h] = rr.seen[i]
	}
	return out
}
