package e2e

import (
	"bufio"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// leaseToken is a bearer token of deploy/local-policy.yaml.
const leaseToken = "alice-local-token"

// A node cut off from the others does not serve a connection with state
// older than a change a client was told about: a DELETE taken by node1
// while node3 is partitioned away is answered only once node3's lease has
// lapsed, and from then on node3 answers that connection 503 with
// Retry-After instead of serving the revoked session; once healed and
// caught up it answers 404 (revoked), as every node does. Real processes
// in network namespaces (root).
func TestCutOffNodeRefusesInsteadOfServingStaleState(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes in network namespaces")
	}
	lab := newNetLab(t, 3)
	bin := ensureBinary(t)
	keyFile := writeClusterKey(t)
	policy := filepath.Join(repoRoot(t), "deploy", "local-policy.yaml")
	ms := make([]*member, 3)
	for i := range ms {
		// A long grace: node3 must not forget the others (and so decide it
		// is alone) while the test looks at it.
		ms[i] = lab.member(t, bin, i+1, "--cluster-key-file", keyFile, "--policy", policy, "--dead-grace", "2m")
		if i == 0 {
			ms[i].start()
		} else {
			ms[i].start(ms[0].Gossip)
		}
	}
	for _, m := range ms {
		if _, err := m.await(30*time.Second, m.seesAlive("node1", "node2", "node3")); err != nil {
			t.Fatal(err)
		}
	}
	n1, n3 := ms[0], ms[2]
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	a := leasePost(t, nil, n1, "", init)
	sid := a.header.Get("Mcp-Session-Id")
	if a.status != http.StatusOK || sid == "" {
		t.Fatalf("initialize on node1 answered %d, session id %q", a.status, sid)
	}
	awaitStatus(t, n3, nil, sid, ping, http.StatusOK, 10*time.Second)

	lab.cut(3, false)
	start := time.Now()
	var del int
	for {
		// node1 may itself refuse for a moment (it cannot tell yet whether
		// it or node3 is cut off): retry as a client would.
		del = leaseDelete(t, n1, sid)
		if del != http.StatusServiceUnavailable || time.Since(start) > 30*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if del != http.StatusOK {
		t.Fatalf("DELETE on node1 during the cut answered %d", del)
	}
	t.Logf("DELETE answered %v after the cut", time.Since(start).Round(time.Millisecond))
	// From now on node3 holds the revoked session's old state: it must
	// refuse, not serve it. It is asked from inside its own namespace.
	for range 5 {
		got := leasePost(t, n3.wrap, n3, sid, ping)
		if got.status != http.StatusServiceUnavailable {
			t.Fatalf("cut-off node3 answered %d for the session node1 deleted, want 503 (it would serve stale state)", got.status)
		}
		if ra, err := strconv.Atoi(got.header.Get("Retry-After")); err != nil || ra < 1 {
			t.Fatalf("node3's 503 has Retry-After %q, want whole seconds ≥ 1", got.header.Get("Retry-After"))
		}
		time.Sleep(200 * time.Millisecond)
	}

	lab.cut(3, true)
	healed := time.Now()
	awaitStatus(t, n3, nil, sid, ping, http.StatusNotFound, 30*time.Second)
	t.Logf("node3 answers 404 for the deleted session %v after the link came back", time.Since(healed).Round(time.Millisecond))
	for _, m := range ms {
		m.stop()
	}
}

type leaseAnswer struct {
	status int
	header http.Header
}

// leasePost posts body to m's /mcp with session id sid (empty: none),
// with curl run under wrap (nil: from the test's namespace), and returns
// the status and headers.
func leasePost(t *testing.T, wrap []string, m *member, sid, body string) leaseAnswer {
	t.Helper()
	argv := append(slices.Clone(wrap), "curl", "-sS", "-o", "/dev/null", "-D", "-", "--max-time", "10",
		"-X", "POST", "-H", "Content-Type: application/json", "-H", "Accept: application/json, text/event-stream",
		"-H", "Mcp-Protocol-Version: 2025-11-25", "-H", "Authorization: Bearer "+leaseToken, "--data", body)
	if sid != "" {
		argv = append(argv, "-H", "Mcp-Session-Id: "+sid)
	}
	argv = append(argv, m.BaseURL()+"/mcp")
	out, err := exec.CommandContext(t.Context(), argv[0], argv[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(out))), nil)
	if err != nil {
		t.Fatalf("reading curl's headers %q: %v", out, err)
	}
	resp.Body.Close()
	return leaseAnswer{status: resp.StatusCode, header: resp.Header}
}

// leaseDelete ends session sid on m and returns the status.
func leaseDelete(t *testing.T, m *member, sid string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodDelete, m.BaseURL()+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+leaseToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("DELETE on %s: %v", m.Name, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// awaitStatus polls m until body with session sid answers want; a 503
// (not caught up yet) is waited through, any other answer fails the test.
func awaitStatus(t *testing.T, m *member, wrap []string, sid, body string, want int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := leasePost(t, wrap, m, sid, body)
		switch {
		case got.status == want:
			return
		case got.status != http.StatusServiceUnavailable:
			t.Fatalf("%s answered %d, want %d", m.Name, got.status, want)
		case time.Now().After(deadline):
			t.Fatalf("%s still answered 503 after %v, want %d", m.Name, d, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
