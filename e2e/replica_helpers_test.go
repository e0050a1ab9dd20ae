package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/deploy"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
)

// replicaCluster is three real nodes on loopback (loopback timers) with
// the local policy, a fresh cluster key and the default
// --session-replicas (1): node2 is the seed, so node1 can be lost and come
// back through it.
type replicaCluster struct {
	t      *testing.T
	nodes  []*member
	admins []adminv1.AdminServiceClient
}

func newReplicaCluster(t *testing.T) *replicaCluster {
	t.Helper()
	bin, key, args := replicaNodeArgs(t)
	var ms []*member
	for i := range 3 {
		m := newMember(t, bin, fmt.Sprintf("node%d", i+1), args...)
		m.prod = true
		ms = append(ms, m)
	}
	return startReplicaCluster(t, ms, key)
}

// replicaNodeArgs returns the binary, a fresh cluster key and the serve
// flags every node of a replica cluster takes: that key, the local policy,
// and info logs (not the launcher's debug: the log tail on a failure shows
// the failover).
func replicaNodeArgs(t *testing.T) (bin string, key []byte, args []string) {
	t.Helper()
	bin = ensureBinary(t)
	keyFile := writeClusterKey(t)
	key, err := mcpswarm.LoadClusterKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(repoRoot(t), "deploy", "local-policy.yaml")
	return bin, key, []string{"--cluster-key-file", keyFile, "--policy", policy, "--log-level", "info"}
}

// manifestTimers are the failure-detection flags the Kubernetes manifest
// passes (deploy/k8s/statefulset.yaml), read from it so the LAN tests
// measure the failover a cluster deployed with it gets.
func manifestTimers(t *testing.T) []string {
	t.Helper()
	flags, err := deploy.ManifestTimers()
	if err != nil {
		t.Fatal(err)
	}
	return flags
}

// startReplicaCluster starts the three members, node2 first as the seed,
// and waits until each sees all three; key is their cluster key.
func startReplicaCluster(t *testing.T, ms []*member, key []byte) *replicaCluster {
	t.Helper()
	c := &replicaCluster{t: t, nodes: ms}
	for _, m := range ms {
		c.admins = append(c.admins, m.admin(t, key))
	}
	c.nodes[1].start()
	c.nodes[0].start(c.nodes[1].Gossip)
	c.nodes[2].start(c.nodes[1].Gossip)
	for _, m := range c.nodes {
		if _, err := m.await(30*time.Second, m.seesAlive("node1", "node2", "node3")); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// startCounters starts counter sessions prefix0..prefixN-1 through node
// owner (so it owns them) and waits until each names a standby.
func (c *replicaCluster) startCounters(owner int, prefix string, n int) []string {
	c.t.Helper()
	cl := dialMCP(c.t, c.nodes[owner].BaseURL())
	defer cl.Close()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s%d", prefix, i)
		if res, err := cl.call("swarm_start", map[string]any{"app": "counter", "id": id}); err != nil || res.IsError {
			c.t.Fatalf("swarm_start %s on %s: %v %s", id, c.nodes[owner].Name, err, textOf(res))
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		if _, err := c.nodes[owner].await(10*time.Second, func(ctx context.Context) error {
			s, err := c.session(ctx, owner, id)
			if err != nil {
				return err
			}
			if s.GetOwnerNode() != c.nodes[owner].Name || len(s.GetStandbys()) == 0 {
				return fmt.Errorf("%s: owner %q, standbys %v", id, s.GetOwnerNode(), s.GetStandbys())
			}
			return nil
		}); err != nil {
			c.t.Fatal(err)
		}
	}
	return ids
}

// session is node i's admin view of session id.
func (c *replicaCluster) session(ctx context.Context, i int, id string) (*adminv1.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := c.admins[i].ListSessions(ctx, &adminv1.ListSessionsRequest{})
	if err != nil {
		return nil, err
	}
	for _, s := range resp.GetSessions() {
		if s.GetId() == id {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%s does not list session %s", c.nodes[i].Name, id)
}

// countVia reads session id's count through cl; an error is the call's.
func countVia(cl *mcpClient, id string) (int64, error) {
	res, err := cl.call("swarm_get_model", map[string]any{"id": id})
	if err != nil {
		return 0, err
	}
	if res.IsError {
		return 0, errors.New(textOf(res))
	}
	m := countRe.FindStringSubmatch(textOf(res))
	if m == nil {
		return 0, fmt.Errorf("model of %s has no count: %s", id, textOf(res))
	}
	return strconv.ParseInt(m[1], 10, 64)
}

// awaitCount waits until session id is readable through node i and
// returns its count.
func (c *replicaCluster) awaitCount(i int, id string) int64 {
	c.t.Helper()
	var cl *mcpClient
	defer func() {
		if cl != nil {
			_ = cl.Close()
		}
	}()
	var n int64
	if _, err := c.nodes[i].await(30*time.Second, func(ctx context.Context) error {
		var err error
		if cl == nil { // a node catching up refuses new connections for a moment
			if cl, err = tryDialMCP(ctx, c.nodes[i].BaseURL()); err != nil {
				return err
			}
		}
		n, err = countVia(cl, id)
		return err
	}); err != nil {
		c.t.Fatalf("reading %s: %v", id, err)
	}
	return n
}

// toolsOf lists the tools of session id that cl sees, sorted.
func toolsOf(t *testing.T, cl *mcpClient, id string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res, err := cl.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var out []string
	for _, tool := range res.Tools {
		if strings.HasPrefix(tool.Name, id+".") {
			out = append(out, tool.Name)
		}
	}
	slices.Sort(out)
	return out
}

// repClicker clicks one counter session through one node every few
// milliseconds, counting what was acknowledged and what may have applied.
type repClicker struct {
	id    string
	cl    *mcpClient
	acked atomic.Int64
	// maybe counts failed calls that may still have applied: transport
	// errors and answers saying so.
	maybe atomic.Int64
	// refused counts failed calls whose answer says nothing applied.
	refused atomic.Int64
	// mark is when the test disturbed the cluster (unix ns; 0: not yet);
	// back is when the first click after it was acknowledged, and
	// ackedSentAfter counts acknowledged clicks sent after it.
	mark, back, ackedSentAfter atomic.Int64

	mu    sync.Mutex
	fails []repFailure // in order
}

// repFailure is a failed call: when its answer came and what it said.
type repFailure struct {
	at   time.Time
	text string
}

func (f repFailure) String() string { return f.at.Format("15:04:05.000") + " " + f.text }

// click runs until stop closes.
func (k *repClicker) click(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		sent := time.Now()
		res, err := k.cl.call(k.id+".inc.click", nil)
		now := time.Now()
		switch {
		case err != nil:
			k.maybe.Add(1)
			k.fail(now, "transport: "+err.Error())
		case res.IsError:
			if mayHaveApplied(textOf(res)) {
				k.maybe.Add(1)
			} else {
				k.refused.Add(1)
			}
			k.fail(now, textOf(res))
		default:
			k.acked.Add(1)
			if m := k.mark.Load(); m != 0 && k.back.Load() == 0 && now.UnixNano() > m {
				k.back.Store(now.UnixNano())
			}
			if m := k.mark.Load(); m != 0 && sent.UnixNano() > m {
				k.ackedSentAfter.Add(1)
			}
		}
		// A pause between clicks, longer after a failure (a client backs
		// off): eight clients flat out would starve the nodes of the
		// shared test machine.
		pause := 5 * time.Millisecond
		if err != nil || res.IsError {
			pause = 20 * time.Millisecond
		}
		select {
		case <-stop:
			return
		case <-time.After(pause):
		}
	}
}

func (k *repClicker) fail(at time.Time, s string) {
	k.mu.Lock()
	k.fails = append(k.fails, repFailure{at, s})
	k.mu.Unlock()
}

func (k *repClicker) failures() []repFailure {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.fails)
}

// mayHaveApplied reports whether a failed call's answer leaves open that
// the click applied. Only an answer that says it was not applied (or that
// names a refusal before anything ran) counts as not applied.
func mayHaveApplied(s string) bool {
	switch {
	case strings.Contains(s, "may still have applied"), strings.Contains(s, "may have reached"), strings.Contains(s, "may have applied"):
		return true
	case strings.Contains(s, "was not applied"), strings.Contains(s, "not applied here"), strings.Contains(s, "nothing ran"),
		strings.HasPrefix(s, "owner unavailable: node ") && strings.Contains(s, "is hidden until"):
		return false
	}
	return true
}

// clickers starts one clicker per session through node i; stop ends them
// and wait returns once they have.
func (c *replicaCluster) clickers(i int, ids []string) (ks []*repClicker, stop func()) {
	c.t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, id := range ids {
		k := &repClicker{id: id, cl: dialMCP(c.t, c.nodes[i].BaseURL())}
		c.t.Cleanup(func() { _ = k.cl.Close() })
		ks = append(ks, k)
	}
	for _, k := range ks {
		wg.Go(func() { k.click(done) })
	}
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	c.t.Cleanup(stop)
	return ks, stop
}

// awaitAcked waits until every clicker has n more acknowledged clicks
// than when it was called.
func awaitAcked(t *testing.T, ks []*repClicker, n int64, d time.Duration) {
	t.Helper()
	from := make([]int64, len(ks))
	for i, k := range ks {
		from[i] = k.acked.Load()
	}
	deadline := time.Now().Add(d)
	for i, k := range ks {
		for k.acked.Load() < from[i]+n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d clicks acknowledged in %v, want %d; last failures: %v",
					k.id, k.acked.Load()-from[i], d, n, lastOf(k.failures(), 3))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func lastOf[T any](s []T, n int) []T { return s[max(0, len(s)-n):] }

// checkCount fails the test unless count holds every click k had
// acknowledged and no more than those plus the ones that may have applied.
func checkCount(t *testing.T, k *repClicker, via string, count int64) {
	t.Helper()
	acked, maybe := k.acked.Load(), k.maybe.Load()
	if count < acked {
		t.Errorf("%s read through %s counts %d, but %d clicks were acknowledged: %d lost", k.id, via, count, acked, acked-count)
	}
	if count > acked+maybe {
		t.Errorf("%s read through %s counts %d, more than the %d acknowledged and %d that may have applied: a click applied twice or one that said it did not apply did", k.id, via, count, acked, maybe)
	}
}

// varying matches what differs between answers of one kind: connection
// ids and durations.
var varying = regexp.MustCompile(`s2\.[A-Za-z0-9_-]+|\d+(\.\d+)?m?s\b`)

// failureKinds groups failure texts by their text (ids and durations
// masked), for the log, and returns those that do not tell the client to
// retry or call again.
func failureKinds(ks []*repClicker) (kinds map[string]int, notRetryable []repFailure) {
	kinds = map[string]int{}
	for _, k := range ks {
		for _, f := range k.failures() {
			kinds[varying.ReplaceAllString(strings.ReplaceAll(f.text, k.id, "<id>"), "…")]++
			if low := strings.ToLower(f.text); !strings.Contains(low, "retry") && !strings.Contains(low, "call again") {
				notRetryable = append(notRetryable, f)
			}
		}
	}
	return kinds, notRetryable
}

// percentile returns the p-th percentile (0..100, nearest rank) of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	i := (p*len(s) + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// firstLogged returns how long after from a line of m's JSON log first
// held every part; ok is false when none did.
func firstLogged(m *member, from time.Time, parts ...string) (d time.Duration, ok bool) {
	for _, line := range strings.Split(m.Log.String(), "\n") {
		all := strings.HasPrefix(line, "{")
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		var rec struct {
			Time time.Time `json:"time"`
		}
		if all && json.Unmarshal([]byte(line), &rec) == nil && rec.Time.After(from) {
			return rec.Time.Sub(from), true
		}
	}
	return 0, false
}

// promotions returns how long after from each session of ids was promoted,
// by the "promoted" lines of the nodes' JSON logs (ids not promoted are
// left out).
func (c *replicaCluster) promotions(from time.Time, ids []string) []time.Duration {
	var out []time.Duration
	for _, id := range ids {
		for _, m := range c.nodes {
			for _, line := range strings.Split(m.Log.String(), "\n") {
				if !strings.Contains(line, `"msg":"promoted`) || !strings.Contains(line, `"session":"`+id+`"`) {
					continue
				}
				var rec struct {
					Time time.Time `json:"time"`
				}
				if json.Unmarshal([]byte(line), &rec) == nil {
					out = append(out, rec.Time.Sub(from))
				}
			}
		}
	}
	return out
}

// startLANReplicaCluster starts a node in each of lab's three namespaces
// with the Kubernetes manifest's timers and waits as startReplicaCluster
// does.
func startLANReplicaCluster(t *testing.T, lab *netLab) *replicaCluster {
	t.Helper()
	bin, key, args := replicaNodeArgs(t)
	args = append(args, manifestTimers(t)...)
	var ms []*member
	for i := 1; i <= 3; i++ {
		ms = append(ms, lab.member(t, bin, i, args...))
	}
	return startReplicaCluster(t, ms, key)
}
