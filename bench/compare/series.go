package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// series is one thing being measured: which server(s), and what each client
// calls.
type series struct {
	key, label string
	servers    []*proc // whose CPU is charged to the series
	// connect opens n clients, each with its own session state where the
	// series needs one, ready to call.
	connect func(ctx context.Context, n int) ([]worker, error)
}

// baseline is the series every ratio is taken against.
const baseline = "mcpgo"

func allSeries(f *fleet, idle int) []series {
	plain := plainCalls
	all := []series{
		{key: "mcpgo", label: "bare mcp-go v1.2.1", servers: []*proc{f.mcpgo}, connect: plain(f.mcpgo, "increment")},
		{key: "mcpgo-durable", label: "bare mcp-go v1.2.1 whose tool first puts a 1,300-byte record (a `counter` snapshot's size) into mcpswarm's journal in `sync` mode (group commit; answered after its fdatasync): the most a durable click can reach on this machine",
			servers: []*proc{f.mcpgoDurable}, connect: plain(f.mcpgoDurable, "increment")},
		{key: "gosdk", label: "go-sdk v1.8.0", servers: []*proc{f.gosdk}, connect: plain(f.gosdk, "increment")},
		{key: "static", label: "mcpswarm static tool (swarm_list)", servers: []*proc{f.single}, connect: plain(f.single, "swarm_list")},
		{key: "click", label: "mcpswarm click, local session on a lone node (no standby: `replica` answers after the owner's fsync, as `sync`)", servers: []*proc{f.single}, connect: clicks(f.single, f.single, "w")},
		{key: "replica", label: "mcpswarm click, local session on node A of a two-node cluster, its standby on B (durability `replica`: answered after the standby's acknowledgement; CPU of A and B)",
			servers: []*proc{f.nodeA, f.nodeB}, connect: clicks(f.nodeA, f.nodeA, "r")},
		{key: "process", label: "mcpswarm click, local session on P of a two-node cluster (P, Q) started with `--durability process --session-replicas 0` (answered after write(2), no standby): the reference of `replica`",
			servers: []*proc{f.process, f.processPeer}, connect: clicks(f.process, f.process, "p")},
		{key: "forward", label: "mcpswarm click, forwarded (client on B, session on A)", servers: []*proc{f.nodeA, f.nodeB}, connect: clicks(f.nodeA, f.nodeB, "f")},
		{key: "spread", label: "mcpswarm click, forwarded both ways (clients spread over A and B, each session on the other node)",
			servers: []*proc{f.nodeA, f.nodeB}, connect: spreadClicks(f.nodeA, f.nodeB)},
		{key: "crowded", label: fmt.Sprintf("mcpswarm click, local session, on a node also holding %d idle connections with a session each", idle),
			servers: []*proc{f.crowded}, connect: clicks(f.crowded, f.crowded, "w")},
	}
	if f.singleB != nil {
		all = append(all, series{key: "click-b", label: "the `click` series on a lone node of the -mcpswarm-b binary (a change against its base, in the same rounds)",
			servers: []*proc{f.singleB}, connect: clicks(f.singleB, f.singleB, "w")})
	}
	return all
}

// plainCalls opens n clients of p that each call tool without arguments.
func plainCalls(p *proc, tool string) func(context.Context, int) ([]worker, error) {
	return func(ctx context.Context, n int) ([]worker, error) {
		ws := make([]worker, n)
		for i := range ws {
			c := newClient(p.baseURL + "/mcp")
			if err := c.initialize(ctx); err != nil {
				return nil, err
			}
			if _, err := c.callTool(ctx, tool, nil); err != nil {
				return nil, err
			}
			ws[i] = worker{c: c, tool: tool}
		}
		return ws, nil
	}
}

// clicks opens n clients that each start their own `counter` session on
// owner and then click its + button through via (the same node for a local
// click; the other node of the cluster for a forwarded one, with the same
// connection id, which every node of the cluster accepts).
func clicks(owner, via *proc, prefix string) func(context.Context, int) ([]worker, error) {
	return func(ctx context.Context, n int) ([]worker, error) {
		ws := make([]worker, n)
		for i := range ws {
			c := newClient(owner.baseURL + "/mcp")
			if err := c.initialize(ctx); err != nil {
				return nil, err
			}
			id := fmt.Sprintf("%s%d", prefix, i)
			if _, err := c.callTool(ctx, "swarm_start", map[string]any{"app": "counter", "id": id}); err != nil {
				return nil, err
			}
			c.url = via.baseURL + "/mcp"
			tool := id + ".inc.click"
			// On another node the session appears once replication has
			// carried it over: retry until the click lands.
			deadline := time.Now().Add(20 * time.Second)
			for {
				_, err := c.callTool(ctx, tool, nil)
				if err == nil {
					break
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					return nil, fmt.Errorf("first click of %s through %s: %w", id, via.name, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			ws[i] = worker{c: c, tool: tool}
		}
		return ws, nil
	}
}

// spreadClicks opens n clients alternately on a and b, each driving a
// session it started on the other node (ids s<i>n0: session ids are at
// most 7 lowercase letters or digits), so every call is forwarded and both
// nodes serve fronts and sessions alike.
func spreadClicks(a, b *proc) func(context.Context, int) ([]worker, error) {
	return func(ctx context.Context, n int) ([]worker, error) {
		ws := make([]worker, 0, n)
		for i := range n {
			owner, via := a, b
			if i%2 == 1 {
				owner, via = b, a
			}
			w, err := clicks(owner, via, fmt.Sprintf("s%dn", i))(ctx, 1)
			if err != nil {
				return nil, err
			}
			ws = append(ws, w...)
		}
		return ws, nil
	}
}

// memFig is one server's memory per idle MCP connection (and session).
type memFig struct {
	Server       string  `json:"server"`
	Idle         int     `json:"idle"`
	BaseKB       int64   `json:"base_rss_kb"`
	PerConnKB    float64 `json:"kb_per_idle_connection"`
	PerSessionKB float64 `json:"kb_per_idle_session,omitempty"`
}

// idleMemory opens n MCP connections to p (initialize + initialized, then
// the TCP connections are closed, so only the server's MCP state remains)
// and reads how much the RSS grew; with sessions it then starts one
// `counter` session on each of them and reads the growth again.
func idleMemory(ctx context.Context, p *proc, n int, sessions bool) (memFig, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	defer tr.CloseIdleConnections()
	open := func(k int) ([]*client, error) {
		cs := make([]*client, k)
		for i := range cs {
			cs[i] = newClientWith(p.baseURL+"/mcp", hc)
			if err := cs[i].initialize(ctx); err != nil {
				return nil, err
			}
		}
		return cs, nil
	}
	settle := func() (int64, error) {
		tr.CloseIdleConnections()
		time.Sleep(time.Second)
		return p.rssKB()
	}
	// Warm the server up so its first-use allocations are not charged to
	// the connections.
	if _, err := open(max(20, n/10)); err != nil {
		return memFig{}, err
	}
	base, err := settle()
	if err != nil {
		return memFig{}, err
	}
	cs, err := open(n)
	if err != nil {
		return memFig{}, err
	}
	conns, err := settle()
	if err != nil {
		return memFig{}, err
	}
	m := memFig{Server: p.name, Idle: n, BaseKB: base, PerConnKB: float64(conns-base) / float64(n)}
	if sessions {
		for i, c := range cs {
			if _, err := c.callTool(ctx, "swarm_start", map[string]any{"app": "counter", "id": fmt.Sprintf("m%d", i)}); err != nil {
				return memFig{}, err
			}
		}
		sess, err := settle()
		if err != nil {
			return memFig{}, err
		}
		m.PerSessionKB = float64(sess-conns) / float64(n)
	}
	return m, nil
}

// seriesInfo names a series in the report.
type seriesInfo struct {
	Key   string `json:"key"`
	Label string `json:"label"`
}

func describeSeries(all []series) []seriesInfo {
	out := make([]seriesInfo, len(all))
	for i, s := range all {
		out[i] = seriesInfo{Key: s.key, Label: s.label}
	}
	return out
}
