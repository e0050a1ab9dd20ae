package balancer

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Requests go to each backend in turn, whatever header they carry, and an
// event stream reaches the client before the backend finishes it.
func TestRoundRobinSpreadsAndStreams(t *testing.T) {
	release := make(chan struct{})
	var backends []string
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/stream" {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "data: first from %d\n\n", i)
				w.(http.Flusher).Flush()
				<-release
				return
			}
			fmt.Fprintf(w, "backend %d host %s", i, r.Host)
		}))
		t.Cleanup(srv.Close)
		backends = append(backends, strings.TrimPrefix(srv.URL, "http://"))
	}
	rr, err := New(backends)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(rr)
	t.Cleanup(front.Close)
	for i := range 6 {
		req, _ := http.NewRequest(http.MethodGet, front.URL+"/", nil)
		req.Header.Set("Mcp-Session-Id", "sticky-please")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := fmt.Sprintf("backend %d host %s", i%3, backends[i%3])
		if string(b) != want {
			t.Fatalf("request %d answered %q, want %q", i, b, want)
		}
	}
	resp, err := http.Get(front.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(resp.Body).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if !strings.HasPrefix(s, "data: first from") {
			t.Fatalf("stream began with %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first event did not arrive while the backend held the stream open")
	}
	close(release)
	for _, n := range rr.Seen() {
		if n < 2 {
			t.Fatalf("uneven spread: %v", rr.Seen())
		}
	}
}

func TestNewRefusesBadBackends(t *testing.T) {
	if _, err := New(nil); err == nil {
		t.Fatal("no backend accepted")
	}
	if _, err := New([]string{"http://x:1/path"}); err == nil {
		t.Fatal("a URL accepted as host:port")
	}
}

// A POST body reaches the backend whole, with its length, and a body past
// the bound is refused.
func TestBodiesAreBufferedAndBounded(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- fmt.Sprintf("%d %s", r.ContentLength, b)
	}))
	t.Cleanup(srv.Close)
	rr, err := New([]string{strings.TrimPrefix(srv.URL, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(rr)
	t.Cleanup(front.Close)
	// A reader of unknown length makes the client send it chunked.
	resp, err := http.Post(front.URL, "application/json", io.MultiReader(strings.NewReader(`{"a":`), strings.NewReader(`1}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := <-got; s != `7 {"a":1}` {
		t.Fatalf("the backend got %q", s)
	}
	resp, err = http.Post(front.URL, "application/json", strings.NewReader(strings.Repeat("x", maxBody+1)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("an oversized body answered %d", resp.StatusCode)
	}
}
