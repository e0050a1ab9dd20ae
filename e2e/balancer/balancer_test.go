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
