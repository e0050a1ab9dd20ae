package mcpswarm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// newTask is a working task of alice's run by node.
func newTask(id, node string, ttl time.Duration) task.Record {
	now := time.Now()
	return task.Record{ID: id, Principal: "alice", Node: node, Tool: "slow", Form: task.Extension,
		Status: task.Working, Created: now, Updated: now, TTL: ttl, PollInterval: time.Second}
}

// mustCreate creates rec in n's task table.
func mustCreate(t *testing.T, n *mcpswarm.Node, rec task.Record) {
	t.Helper()
	if err := mcpswarm.TaskStore(n).Create(context.Background(), rec); err != nil {
		t.Fatalf("creating task %s on %s: %v", rec.ID, mcpswarm.NodeName(n), err)
	}
}

// mustPut puts rec in n's task table.
func mustPut(t *testing.T, n *mcpswarm.Node, rec task.Record) {
	t.Helper()
	rec.Updated = time.Now()
	if err := mcpswarm.TaskStore(n).Put(context.Background(), rec); err != nil {
		t.Fatalf("putting task %s (%s) on %s: %v", rec.ID, rec.Status, mcpswarm.NodeName(n), err)
	}
}

// readNow reads task id on n without waiting and fails unless it is known
// with status want.
func readNow(t *testing.T, n *mcpswarm.Node, id string, want task.Status) task.Record {
	t.Helper()
	rec, ok := mcpswarm.TaskStore(n).Get(id)
	if !ok {
		t.Fatalf("%s does not know task %s", mcpswarm.NodeName(n), id)
	}
	if rec.Status != want {
		t.Fatalf("%s reads task %s as %s, want %s", mcpswarm.NodeName(n), id, rec.Status, want)
	}
	return rec
}

// A task created on node1 is read on node2 and node3 the moment Create
// returns, and listed among its principal's tasks there; another principal
// lists nothing.
func TestATaskCreatedOnOneNodeIsReadOnEveryNodeAtOnce(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	for i := range 5 {
		id := fmt.Sprintf("t%d", i)
		mustCreate(t, nodes[0], newTask(id, "node1", time.Hour))
		for _, n := range nodes[1:] {
			rec := readNow(t, n, id, task.Working)
			if rec.Principal != "alice" || rec.Node != "node1" || rec.Tool != "slow" {
				t.Fatalf("%s reads %+v", mcpswarm.NodeName(n), rec)
			}
		}
	}
	for _, n := range nodes {
		if got := len(mcpswarm.TaskStore(n).Of("alice")); got != 5 {
			t.Fatalf("%s lists %d of alice's tasks, want 5", mcpswarm.NodeName(n), got)
		}
		if got := mcpswarm.TaskStore(n).Of("bob"); len(got) != 0 {
			t.Fatalf("%s lists bob's tasks %v", mcpswarm.NodeName(n), got)
		}
	}
	if got := mcpswarm.TaskStore(nodes[1]).Of("alice"); got[0].ID != "t4" || got[4].ID != "t0" {
		t.Fatalf("alice's tasks are not newest first: %s … %s", got[0].ID, got[4].ID)
	}
}

// The limit per principal counts the tasks created on every node: a
// principal at its limit is refused on any node with ErrTooMany.
func TestTheTaskLimitPerPrincipalCountsEveryNode(t *testing.T) {
	e := newSwarmEnv(t)
	e.tweak = func(c *mcpswarm.Config) { c.TaskLimits.PerPrincipal = 2 }
	nodes := e.cluster(3)
	mustCreate(t, nodes[0], newTask("a", "node1", time.Hour))
	mustCreate(t, nodes[1], newTask("b", "node2", time.Hour))
	err := mcpswarm.TaskStore(nodes[2]).Create(context.Background(), newTask("c", "node3", time.Hour))
	if !errors.Is(err, task.ErrTooMany) {
		t.Fatalf("a third task of alice's answered %v, want ErrTooMany", err)
	}
	bobs := newTask("d", "node3", time.Hour)
	bobs.Principal = "bob"
	mustCreate(t, nodes[2], bobs)
}

// A cancel asked on node3 reaches node1, which runs the task, through its
// Watch, and every node reads the task as cancelled once Ask returns; the
// runner's late completion cannot turn it back.
func TestACancelAskedAnywhereReachesTheRunner(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	asked := make(chan task.Request, 1)
	stop := mcpswarm.TaskStore(nodes[0]).Watch(func(ev task.Event) {
		if ev.Request != nil {
			select {
			case asked <- *ev.Request:
			default:
			}
		}
	})
	defer stop()
	rec := newTask("c1", "node1", time.Hour)
	mustCreate(t, nodes[0], rec)
	if err := mcpswarm.TaskStore(nodes[2]).Ask(context.Background(), task.Request{Task: "c1", Cancel: true}); err != nil {
		t.Fatalf("asking to cancel from node3: %v", err)
	}
	for _, n := range nodes {
		readNow(t, n, "c1", task.Cancelled)
	}
	select {
	case req := <-asked:
		if req.Task != "c1" || !req.Cancel {
			t.Fatalf("node1 heard %+v", req)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("node1, the runner, never heard the cancel")
	}
	rec.Status, rec.Result = task.Completed, json.RawMessage(`{"content":[]}`)
	mustPut(t, nodes[0], rec)
	for _, n := range nodes {
		readNow(t, n, "c1", task.Cancelled)
	}
	eventually(t, 5*time.Second, "node3 removes its request once the task ended", func() bool {
		return mcpswarm.TaskRequests(nodes[0], "c1") == 0 && mcpswarm.TaskRequests(nodes[2], "c1") == 0
	})
}

// The runner and the survivor that would adopt its tasks crash together:
// the next live member by name adopts them.
func TestTheNextSurvivorAdoptsWhenTheFirstIsLostToo(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(4)
	mustCreate(t, nodes[0], newTask("running", "node1", time.Hour))
	e.kill("node1")
	e.kill("node2")
	survivors := nodes[2:]
	await(t, 2*deadBound+5*time.Second, "node3 alone holds the task, failed", func() error {
		for _, n := range survivors {
			rec, ok := mcpswarm.TaskStore(n).Get("running")
			if !ok {
				t.Fatalf("%s lost the task", mcpswarm.NodeName(n))
			}
			if rec.Status != task.Failed {
				return fmt.Errorf("%s reads it %s", mcpswarm.NodeName(n), rec.Status)
			}
			if got := mcpswarm.TaskHolders(n, "running"); !slices.Equal(got, []string{"node3"}) {
				return fmt.Errorf("%s sees it held by %v", mcpswarm.NodeName(n), got)
			}
		}
		return nil
	})
}

// The runner is cut off long enough for the others to take it for dead:
// node2 settles its running task failed. Once the cut heals, the runner
// yields to that settlement — it is told to stop the task, and removes
// its copy — so every node reads the task failed, held once, and never
// anything else after it.
func TestACutOffRunnerYieldsToTheSettlement(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	stopped := make(chan struct{})
	var once sync.Once
	stop := mcpswarm.TaskStore(n1).Watch(func(ev task.Event) {
		if ev.Request != nil && ev.Request.Task == "running" && ev.Request.Cancel {
			once.Do(func() { close(stopped) })
		}
	})
	defer stop()
	mustCreate(t, n1, newTask("running", "node1", time.Hour))
	logs := []*statusLog{watchStatus(t, n2, "running"), watchStatus(t, n3, "running")}

	e.cut("node1")
	for _, n := range []*mcpswarm.Node{n2, n3} {
		eventually(t, 15*time.Second, mcpswarm.NodeName(n)+" sees node1 dead", func() bool {
			st := mcpswarm.MemberState(n, "node1")
			return st == "dead" || st == ""
		})
	}
	eventually(t, 5*time.Second, "node3 reads the task failed", func() bool {
		rec, _ := mcpswarm.TaskStore(n3).Get("running")
		return rec.Status == task.Failed
	})
	e.heal("node1")
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("node1 was never told to stop the task settled in its absence")
	}
	// Held once, by one survivor: node2, or node1 when membership flapped
	// as the cut healed and node1, the first by name, adopted node2's
	// settlement as it was (the copy of the smaller name is read then, and
	// node2 removes its own).
	await(t, 10*time.Second, "every node reads the task failed, held once by the same node", func() error {
		var holder []string
		for _, n := range nodes {
			rec, _ := mcpswarm.TaskStore(n).Get("running")
			if rec.Status != task.Failed {
				return fmt.Errorf("%s reads it %q", mcpswarm.NodeName(n), rec.Status)
			}
			got := mcpswarm.TaskHolders(n, "running")
			if len(got) != 1 || (holder != nil && !slices.Equal(got, holder)) {
				return fmt.Errorf("%s sees it held by %v", mcpswarm.NodeName(n), got)
			}
			holder = got
		}
		return nil
	})
	for i, l := range logs {
		l.terminalKept(t, mcpswarm.NodeName(nodes[i+1]))
	}
}

// The runner completes a task while node2, the survivor that will adopt
// it, is cut off; then the runner dies and the cut heals. node2 adopts
// the completion node3 held, not the working record it last heard: it
// never reads the task as anything but working, then completed, and the
// copy it holds is the completed one.
func TestTheAdopterTakesTheRunnersLastRecordFromAPeer(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	rec := newTask("late", "node1", time.Hour)
	mustCreate(t, n1, rec)
	log2 := watchStatus(t, n2, "late")

	e.cut("node2")
	rec.Status, rec.Result = task.Completed, json.RawMessage(`{"content":[]}`)
	mustPut(t, n1, rec)
	readNow(t, n3, "late", task.Completed)
	if got, _ := mcpswarm.TaskStore(n2).Get("late"); got.Status != task.Working {
		t.Fatalf("node2, cut off, reads %s", got.Status)
	}
	e.kill("node1")
	eventually(t, 15*time.Second, "node3 sees node1 dead", func() bool {
		st := mcpswarm.MemberState(n3, "node1")
		return st == "dead" || st == ""
	})
	e.heal("node2")
	await(t, 20*time.Second, "node2 holds the completed task", func() error {
		for _, n := range []*mcpswarm.Node{n2, n3} {
			if got := mcpswarm.TaskCopies(n, "late"); len(got) != 1 || got["node2"] != task.Completed {
				return fmt.Errorf("%s sees the copies %v", mcpswarm.NodeName(n), got)
			}
		}
		return nil
	})
	for _, n := range []*mcpswarm.Node{n2, n3} {
		readNow(t, n, "late", task.Completed)
	}
	log2.terminalKept(t, "node2")
}

// A task waiting on two inputs reads, on every node, with only the one
// left once a tasks/update answering the other is acknowledged, and as
// working once both are answered.
func TestAPartialInputResponseShowsOnEveryNodeAtOnce(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	rec := newTask("in1", "node1", time.Hour)
	mustCreate(t, nodes[0], rec)
	rec.Status = task.InputRequired
	rec.InputRequests = json.RawMessage(`{"k1":{"method":"elicitation/create"},"k2":{"method":"roots/list"}}`)
	mustPut(t, nodes[0], rec)
	ask := func(from *mcpswarm.Node, responses string) {
		t.Helper()
		if err := mcpswarm.TaskStore(from).Ask(context.Background(), task.Request{Task: "in1", Responses: json.RawMessage(responses)}); err != nil {
			t.Fatalf("answering from %s: %v", mcpswarm.NodeName(from), err)
		}
	}
	ask(nodes[1], `{"k1":{"action":"accept"}}`)
	for _, n := range nodes {
		got := readNow(t, n, "in1", task.InputRequired)
		var pending map[string]json.RawMessage
		if err := json.Unmarshal(got.InputRequests, &pending); err != nil || len(pending) != 1 || pending["k2"] == nil {
			t.Fatalf("%s reads the pending inputs %s, want only k2", mcpswarm.NodeName(n), got.InputRequests)
		}
	}
	ask(nodes[2], `{"k2":{"roots":[]}}`)
	for _, n := range nodes {
		if got := readNow(t, n, "in1", task.Working); len(got.InputRequests) != 0 {
			t.Fatalf("%s still reads inputs %s", mcpswarm.NodeName(n), got.InputRequests)
		}
	}
}

// statusLog records every status a node reports for a task through
// Watch, so a test can check that a terminal status never changes.
type statusLog struct {
	mu  sync.Mutex
	all []task.Status
}

func watchStatus(t *testing.T, n *mcpswarm.Node, id string) *statusLog {
	l := &statusLog{}
	stop := mcpswarm.TaskStore(n).Watch(func(ev task.Event) {
		if ev.Task.ID == id && !ev.Gone && ev.Request == nil {
			l.mu.Lock()
			l.all = append(l.all, ev.Task.Status)
			l.mu.Unlock()
		}
	})
	t.Cleanup(stop)
	return l
}

// terminalKept fails unless every status after the first terminal one is
// that one.
func (l *statusLog) terminalKept(t *testing.T, who string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.IndexFunc(l.all, task.Status.Terminal)
	if i < 0 {
		return
	}
	for _, s := range l.all[i:] {
		if s != l.all[i] {
			t.Fatalf("%s reported %v: a terminal status changed", who, l.all)
		}
	}
}

// The runner of two tasks crashes: the one it completed stays readable on
// the survivors throughout; the one it was running ends failed, naming the
// lost node, on every survivor; exactly one survivor (node2, the first
// live member by name) holds both, and neither status moves again, not
// even when the runner restarts from its data dir with its old records.
func TestTasksOutliveTheirRunner(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	n2, n3 := nodes[1], nodes[2]
	done := newTask("done", "node1", time.Hour)
	mustCreate(t, nodes[0], done)
	done.Status, done.Result = task.Completed, json.RawMessage(`{"content":[{"type":"text","text":"42"}]}`)
	mustPut(t, nodes[0], done)
	mustCreate(t, nodes[0], newTask("running", "node1", time.Hour))
	logs := []*statusLog{watchStatus(t, n2, "running"), watchStatus(t, n3, "running")}

	killed := time.Now()
	e.kill("node1")
	await(t, deadBound+5*time.Second, "the running task fails on both survivors", func() error {
		for _, n := range []*mcpswarm.Node{n2, n3} {
			got := readNow(t, n, "done", task.Completed)
			if string(got.Result) != string(done.Result) {
				t.Fatalf("%s reads the result %s", mcpswarm.NodeName(n), got.Result)
			}
			rec, ok := mcpswarm.TaskStore(n).Get("running")
			if !ok {
				t.Fatalf("%s lost the running task", mcpswarm.NodeName(n))
			}
			if rec.Status != task.Failed {
				return fmt.Errorf("%s reads it %s", mcpswarm.NodeName(n), rec.Status)
			}
			if rec.Error == nil || !strings.Contains(rec.Error.Message, "(node1) was lost") {
				t.Fatalf("%s reads the failure %+v", mcpswarm.NodeName(n), rec.Error)
			}
		}
		return nil
	})
	t.Logf("the running task reads failed on both survivors %v after the crash", time.Since(killed).Round(time.Millisecond))
	await(t, 5*time.Second, "node2 alone holds both tasks", func() error {
		for _, n := range []*mcpswarm.Node{n2, n3} {
			for _, id := range []string{"done", "running"} {
				if got := mcpswarm.TaskHolders(n, id); !slices.Equal(got, []string{"node2"}) {
					return fmt.Errorf("%s sees %s held by %v", mcpswarm.NodeName(n), id, got)
				}
			}
		}
		return nil
	})
	err := mcpswarm.TaskStore(n2).Put(context.Background(), task.Record{ID: "running", Status: task.Completed})
	if err == nil || !strings.Contains(err.Error(), "terminal status never changes") {
		t.Fatalf("completing the failed task answered %v", err)
	}

	// The runner comes back from its data dir with its old records: each
	// task stays as it was and ends up held once.
	n1 := e.start("node1", n2.GossipAddr())
	all := []*mcpswarm.Node{n1, n2, n3}
	eventually(t, 10*time.Second, "node2 knows the restarted node1", func() bool {
		return mcpswarm.Incarnation(n2, "node1") == mcpswarm.Incarnation(n1, "node1")
	})
	await(t, 10*time.Second, "each task held once after node1's return", func() error {
		for _, n := range all {
			readNow(t, n, "done", task.Completed)
			readNow(t, n, "running", task.Failed)
			if err := heldOnce(n, "done", "running"); err != nil {
				return err
			}
		}
		return nil
	})
	for i, l := range logs {
		l.terminalKept(t, mcpswarm.NodeName(nodes[i+1]))
	}
}

// The runner crashes and restarts from its data dir at once: its
// completed task stays readable on every node throughout and is held once,
// and the one it was running ends failed, naming it.
func TestARestartedRunnerKeepsItsTasksOnce(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	n2 := nodes[1]
	done := newTask("done", "node1", time.Hour)
	mustCreate(t, nodes[0], done)
	done.Status = task.Completed
	mustPut(t, nodes[0], done)
	mustCreate(t, nodes[0], newTask("running", "node1", time.Hour))
	logs := []*statusLog{watchStatus(t, n2, "running"), watchStatus(t, nodes[2], "running")}

	e.kill("node1")
	n1 := e.start("node1", n2.GossipAddr())
	all := []*mcpswarm.Node{n1, n2, nodes[2]}
	await(t, deadBound+10*time.Second, "every node reads the running task failed, held once", func() error {
		for _, n := range all {
			readNow(t, n, "done", task.Completed)
			rec, ok := mcpswarm.TaskStore(n).Get("running")
			if !ok {
				t.Fatalf("%s lost the running task", mcpswarm.NodeName(n))
			}
			if rec.Status != task.Failed {
				return fmt.Errorf("%s reads it %s", mcpswarm.NodeName(n), rec.Status)
			}
			if rec.Error == nil || !strings.Contains(rec.Error.Message, "(node1) was lost") {
				t.Fatalf("%s reads the failure %+v", mcpswarm.NodeName(n), rec.Error)
			}
			if err := heldOnce(n, "done", "running"); err != nil {
				return err
			}
		}
		return nil
	})
	for i, l := range logs {
		l.terminalKept(t, mcpswarm.NodeName(all[i+1]))
	}
}

// A lone node crashes and restarts from its data dir: the tasks it wrote
// are there, the finished one as it was, the one it was running failed.
func TestTaskRecordsSurviveACrash(t *testing.T) {
	e := newSwarmEnv(t)
	n := e.start("node1")
	done := newTask("done", "node1", time.Hour)
	mustCreate(t, n, done)
	done.Status, done.Result = task.Completed, json.RawMessage(`{"content":[]}`)
	mustPut(t, n, done)
	mustCreate(t, n, newTask("running", "node1", time.Hour))
	e.kill("node1")
	n = e.start("node1")
	if got := readNow(t, n, "done", task.Completed); string(got.Result) != string(done.Result) {
		t.Fatalf("the restarted node reads the result %s", got.Result)
	}
	await(t, 5*time.Second, "the interrupted task is failed", func() error {
		if rec, _ := mcpswarm.TaskStore(n).Get("running"); rec.Status != task.Failed {
			return fmt.Errorf("it reads %s", rec.Status)
		}
		return nil
	})
}

// A task past its TTL is unknown on every node, and its holder removes
// it from the table.
func TestAnExpiredTaskIsUnknownAndRemoved(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	mustCreate(t, nodes[0], newTask("brief", "node1", 500*time.Millisecond))
	mustCreate(t, nodes[0], newTask("long", "node1", time.Hour))
	if err := mcpswarm.TaskStore(nodes[1]).Ask(context.Background(), task.Request{Task: "brief", Cancel: true}); err != nil {
		t.Fatalf("asking: %v", err)
	}
	await(t, 10*time.Second, "the brief task is gone from every node's table", func() error {
		for _, n := range nodes {
			if _, ok := mcpswarm.TaskStore(n).Get("brief"); ok {
				return fmt.Errorf("%s still knows it", mcpswarm.NodeName(n))
			}
			if got := mcpswarm.TaskHolders(n, "brief"); len(got) > 0 {
				return fmt.Errorf("%s sees it held by %v", mcpswarm.NodeName(n), got)
			}
			if got := mcpswarm.TaskStore(n).Of("alice"); len(got) != 1 {
				return fmt.Errorf("%s lists %d of alice's tasks", mcpswarm.NodeName(n), len(got))
			}
		}
		return nil
	})
	for _, n := range nodes {
		readNow(t, n, "long", task.Working)
	}
}

// heldOnce says which of the tasks ids n sees held by other than exactly
// one node.
func heldOnce(n *mcpswarm.Node, ids ...string) error {
	for _, id := range ids {
		if got := mcpswarm.TaskHolders(n, id); len(got) != 1 {
			return fmt.Errorf("%s sees %s held by %v", mcpswarm.NodeName(n), id, got)
		}
	}
	return nil
}
