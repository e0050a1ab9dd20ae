package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/internal/testenv"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// netLab is a private network of network namespaces: one per node, each
// with a veth into a bridge in a hub namespace, and one veth from the
// test's own namespace into the bridge so the test reaches every node.
// Cutting a node's hub-side link partitions it from everyone.
type netLab struct {
	t      *testing.T
	tag    string // prefix of every namespace and link name
	subnet string // "10.A.B."
}

// newNetLab builds the lab for nodes nodes, or skips the test where
// namespaces cannot be made (not root, no ip(8)).
func newNetLab(t *testing.T, nodes int) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(t, "network namespaces need root: run the test as root (CI does)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Skip(t, "no ip(8): install iproute2 (`make test` does, as root with apt-get)")
	}
	l := &netLab{t: t, tag: fmt.Sprintf("mw%04x", rand.IntN(1<<16)),
		subnet: fmt.Sprintf("10.%d.%d.", 200+rand.IntN(50), rand.IntN(256))}
	t.Cleanup(l.teardown)
	hub := l.ns("hub")
	l.ip("netns", "add", hub)
	l.ip("-n", hub, "link", "set", "lo", "up")
	l.ip("-n", hub, "link", "add", "br0", "type", "bridge")
	l.ip("-n", hub, "link", "set", "br0", "up")
	for i := 1; i <= nodes; i++ {
		ns, in, out := l.ns(fmt.Sprint(i)), l.link("a", i), l.link("b", i)
		l.ip("netns", "add", ns)
		l.ip("-n", ns, "link", "set", "lo", "up")
		l.ip("link", "add", in, "type", "veth", "peer", "name", out)
		l.ip("link", "set", in, "netns", ns)
		l.ip("link", "set", out, "netns", hub)
		l.ip("-n", hub, "link", "set", out, "master", "br0")
		l.ip("-n", hub, "link", "set", out, "up")
		l.ip("-n", ns, "addr", "add", l.addr(i)+"/24", "dev", in)
		l.ip("-n", ns, "link", "set", in, "up")
	}
	// The test's own way in: .254 on a veth into the bridge.
	in, out := l.link("a", 0), l.link("b", 0)
	l.ip("link", "add", in, "type", "veth", "peer", "name", out)
	l.ip("link", "set", out, "netns", hub)
	l.ip("-n", hub, "link", "set", out, "master", "br0")
	l.ip("-n", hub, "link", "set", out, "up")
	l.ip("addr", "add", l.subnet+"254/24", "dev", in)
	l.ip("link", "set", in, "up")
	return l
}

func (l *netLab) ns(name string) string          { return l.tag + name }
func (l *netLab) link(side string, i int) string { return fmt.Sprintf("%s%s%d", l.tag, side, i) }
func (l *netLab) addr(i int) string              { return fmt.Sprintf("%s%d", l.subnet, i) }

// ip runs ip(8) and fails the test on an error.
func (l *netLab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// cut takes node i's link to the bridge down (up again when heal).
func (l *netLab) cut(i int, heal bool) {
	l.t.Helper()
	state := "down"
	if heal {
		state = "up"
	}
	l.ip("-n", l.ns("hub"), "link", "set", l.link("b", i), state)
}

// teardown deletes the namespaces (which deletes the links in them) and the
// test's own veth.
func (l *netLab) teardown() {
	_ = exec.Command("ip", "link", "del", l.link("a", 0)).Run()
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, l.tag) {
			_ = exec.Command("ip", "netns", "del", name).Run()
		}
	}
}

// member makes node i of the lab: it runs in namespace i, on address i,
// with a real cluster key and policy (a non-loopback node cannot use
// --dev) and the LAN timers that a non-loopback node gets.
func (l *netLab) member(t *testing.T, bin string, i int, extra ...string) *member {
	m := newMember(t, bin, fmt.Sprintf("node%d", i), extra...)
	a := l.addr(i)
	m.HTTP, m.GRPC, m.Gossip = a+":8080", a+":9090", a+":7946"
	m.wrap = []string{"ip", "netns", "exec", l.ns(fmt.Sprint(i))}
	m.prod = true
	return m
}

// A partition longer than the dead grace heals within seconds: the
// cut-off node's sessions, deleted on the others after the grace (and the
// others' on it), are listed everywhere again within 5 s of the link coming
// back. Real processes in network namespaces; the grace is shortened with
// --dead-grace (MCPSWARM_PARTITION_GRACE, default 3s) and the cut lasts
// until both sides have deleted each other's entries and then
// MCPSWARM_PARTITION_EXTRA longer (default 2s), so it always outlasts the
// grace; the 45 s cut and 30 s grace are
// MCPSWARM_PARTITION_GRACE=30s MCPSWARM_PARTITION_EXTRA=10s.
func TestPartitionLongerThanGraceHeals(t *testing.T) {
	if testing.Short() {
		t.Skip("holds a partition past the dead grace")
	}
	lab := newNetLab(t, 3)
	bin := ensureBinary(t)
	grace, extra := envDuration(t, "MCPSWARM_PARTITION_GRACE", 3*time.Second), envDuration(t, "MCPSWARM_PARTITION_EXTRA", 2*time.Second)
	keyFile := writeClusterKey(t)
	policy := filepath.Join(repoRoot(t), "deploy", "local-policy.yaml")
	ms := make([]*member, 3)
	for i := range ms {
		ms[i] = lab.member(t, bin, i+1, "--cluster-key-file", keyFile, "--policy", policy, "--dead-grace", grace.String())
		if i == 0 {
			ms[i].start()
		} else {
			ms[i].start(ms[0].Gossip)
		}
	}
	names := []string{"node1", "node2", "node3"}
	for _, m := range ms {
		if _, err := m.await(30*time.Second, m.seesAlive(names...)); err != nil {
			t.Fatal(err)
		}
	}
	ids := []string{"p1", "p2", "p3"}
	for i, m := range ms {
		c := m.mcpClient(t, "alice-local-token")
		if _, err := callTool(t.Context(), c, "swarm_start", map[string]any{"app": "counter", "id": ids[i]}); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms {
		if _, err := m.await(10*time.Second, listsOnly(m, keyFile, ids...)); err != nil {
			t.Fatal(err)
		}
	}

	lab.cut(3, false)
	cutAt := time.Now()
	// Each side deletes the other's entries once the grace has passed;
	// the majority has meanwhile promoted p3's standby, so it keeps all
	// three sessions, and node3 keeps its own stale copy of p3 only.
	for i, want := range [][]string{ids, ids, {"p3"}} {
		if _, err := ms[i].await(time.Minute+3*grace, listsOnly(ms[i], keyFile, want...)); err != nil {
			t.Fatalf("the partition did not split the sessions as expected: %v", err)
		}
	}
	// node3, alone, never takes over the majority's sessions, even once
	// its grace has forgotten them.
	if err := logged(ms[2], "promoted")(t.Context()); err == nil {
		t.Fatal("node3, cut off from the majority, promoted a standby copy")
	}
	for _, i := range []int{0, 2} {
		if _, err := ms[i].await(time.Minute+3*grace, logged(ms[i], "deleting entries of dead origin")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(extra)
	t.Logf("cut node3 off for %v (grace %v)", time.Since(cutAt).Round(100*time.Millisecond), grace)

	lab.cut(3, true)
	healed := time.Now()
	for _, m := range ms {
		took, err := m.await(5*time.Second, listsOnly(m, keyFile, ids...))
		if err != nil {
			t.Fatalf("not healed within 5 s: %v", err)
		}
		t.Logf("%s lists every session %v after the link came back", m.Name, took.Round(time.Millisecond))
	}
	t.Logf("healed in %v", time.Since(healed).Round(time.Millisecond))
	// node3 met p3's later epoch and stopped its stale copy.
	if _, err := ms[2].await(10*time.Second, logged(ms[2], "demoted")); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		m.stop()
	}
}

// envDuration reads a duration from env var name, or returns def.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, s)
	}
	return d
}

// listsOnly is a condition: m's admin API lists exactly the sessions ids.
// It asks from inside m's namespace, with the CLI, so it sees a node that
// is cut off from the bridge.
func listsOnly(m *member, keyFile string, ids ...string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		argv := append(slices.Clone(m.wrap), m.bin, "sessions", "--json", "--timeout", "2s", "--addr", m.GRPC, "--cluster-key-file", keyFile)
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
		if err != nil {
			return fmt.Errorf("mcpswarm sessions on %s: %w", m.Name, err)
		}
		var resp adminv1.ListSessionsResponse
		if err := protojson.Unmarshal(out, &resp); err != nil {
			return fmt.Errorf("decoding the sessions of %s: %w", m.Name, err)
		}
		var got []string
		for _, s := range resp.GetSessions() {
			got = append(got, s.GetId())
		}
		slices.Sort(got)
		if strings.Join(got, ",") != strings.Join(ids, ",") {
			return fmt.Errorf("lists sessions %v, want %v", got, ids)
		}
		return nil
	}
}

// logged is a condition: m's log contains s.
func logged(m *member, s string) func(context.Context) error {
	return func(context.Context) error {
		if strings.Contains(m.Log.String(), s) {
			return nil
		}
		return errors.New("has not logged " + s)
	}
}

// writeClusterKey writes a fresh cluster key to a file of the test's and
// returns its path, for nodes started with --cluster-key-file.
func writeClusterKey(t *testing.T) string {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "cluster.key")
	key, err := mcpswarm.GenerateClusterKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyFile
}
