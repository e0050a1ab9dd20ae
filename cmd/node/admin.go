package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/mcpswarm/mcpswarm"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
)

func adminCommands() []command {
	return []command{
		{"members", "list cluster members (admin API)", adminRun(listMembers, false)},
		{"sessions", "list sessions across the swarm (admin API)", adminRun(listSessions, false)},
		{"tools", "list derived tools, optionally of one session: tools [SESSION]", adminRun(listTools, false)},
		{"conns", "list MCP client connections (admin API)", adminRun(listConns, false)},
		{"stop-session", "stop a session: stop-session ID", adminRun(stopSession, false)},
		{"drain", "drain the node: no new sessions, then leave", adminRun(drain, false)},
		{"forget-member", "strike a lost member off on every node, once it is gone for good: forget-member NAME", adminRun(forgetMember, false)},
		{"watch", "stream membership and registry events", adminRun(watch, true)},
	}
}

type adminCall func(ctx context.Context, c adminv1.AdminServiceClient, args []string, out io.Writer, asJSON bool) error

// adminRun wraps an admin call with the shared flags and the authenticated
// connection; streaming calls run until interrupted instead of under --timeout.
func adminRun(call adminCall, streaming bool) func(context.Context, []string, environment) int {
	return func(ctx context.Context, args []string, env environment) int {
		fs := flag.NewFlagSet("admin", flag.ContinueOnError)
		fs.SetOutput(env.stderr)
		addr := fs.String("addr", "127.0.0.1:9090", "the node's gRPC address (env MCPSWARM_ADDR)")
		keyFile := fs.String("cluster-key-file", "", "cluster key file (env MCPSWARM_CLUSTER_KEY_FILE)")
		dev := fs.Bool("dev", false, "use the public development key (nodes started with --dev and no key file)")
		tlsCA := fs.String("tls-ca", "", "CA bundle to verify a node whose gRPC listener runs TLS (env MCPSWARM_TLS_CA)")
		tlsCert := fs.String("tls-cert", "", "client certificate signed by the CA, which a TLS node requires (env MCPSWARM_TLS_CERT)")
		tlsKey := fs.String("tls-key", "", "private key of --tls-cert (env MCPSWARM_TLS_KEY)")
		asJSON := fs.Bool("json", false, "print JSON")
		timeout := fs.Duration("timeout", 10*time.Second, "deadline for the call (not for watch)")
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if err := (settings{fs: fs, getenv: env.getenv}).resolve(); err != nil {
			fmt.Fprintf(env.stderr, "mcpswarm: %v\n", err)
			return 2
		}
		var key []byte
		switch {
		case *keyFile != "":
			k, err := mcpswarm.LoadClusterKey(*keyFile)
			if err != nil {
				fmt.Fprintf(env.stderr, "mcpswarm: --cluster-key-file: %v\n", err)
				return 2
			}
			key = k
		case *dev:
			key = mcpswarm.DevClusterKey()
		default:
			fmt.Fprintln(env.stderr, "mcpswarm: --cluster-key-file: the admin API needs the cluster key (or --dev for development nodes)")
			return 2
		}
		tc := insecure.NewCredentials()
		if *tlsCA != "" {
			cfg, err := mcpswarm.ClientTLS(*tlsCA, *tlsCert, *tlsKey)
			if err != nil {
				fmt.Fprintf(env.stderr, "mcpswarm: --tls-ca: %v\n", err)
				return 2
			}
			tc = credentials.NewTLS(cfg)
		}
		conn, err := grpc.NewClient(*addr,
			grpc.WithTransportCredentials(tc),
			grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(key), Secure: *tlsCA != ""}))
		if err != nil {
			fmt.Fprintf(env.stderr, "mcpswarm: --addr: %v\n", err)
			return 2
		}
		defer conn.Close()
		callCtx := ctx
		if !streaming {
			var cancel context.CancelFunc
			callCtx, cancel = context.WithTimeout(ctx, *timeout)
			defer cancel()
		}
		if err := call(callCtx, adminv1.NewAdminServiceClient(conn), fs.Args(), env.stdout, *asJSON); err != nil {
			fmt.Fprintf(env.stderr, "mcpswarm: %v\n", err)
			return 1
		}
		return 0
	}
}

func printJSON(out io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, string(b))
	return err
}

func listMembers(ctx context.Context, c adminv1.AdminServiceClient, _ []string, out io.Writer, asJSON bool) error {
	resp, err := c.ListMembers(ctx, &adminv1.ListMembersRequest{})
	if err != nil {
		return fmt.Errorf("listing members: %w", err)
	}
	if asJSON {
		return printJSON(out, resp)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tGRPC\tGOSSIP\tVERSION\t")
	for _, m := range resp.GetMembers() {
		name := m.GetName()
		if m.GetSelf() {
			name += " (self)"
		}
		state := strings.ToLower(strings.TrimPrefix(m.GetState().String(), "MEMBER_STATE_"))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", name, state, m.GetGrpcAddress(), m.GetGossipAddress(), m.GetVersion())
	}
	for _, name := range resp.GetLost() {
		fmt.Fprintf(tw, "%s\tlost\t-\t-\t-\t\n", name)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(resp.GetLost()) > 0 {
		_, err := fmt.Fprintln(out, "lost: died without leaving and counted against the majority until heard from again;\n"+
			"once one is gone for good: mcpswarm forget-member NAME")
		return err
	}
	return nil
}

func listSessions(ctx context.Context, c adminv1.AdminServiceClient, _ []string, out io.Writer, asJSON bool) error {
	resp, err := c.ListSessions(ctx, &adminv1.ListSessionsRequest{})
	if err != nil {
		return fmt.Errorf("listing sessions: %w", err)
	}
	if asJSON {
		return printJSON(out, resp)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAPP\tPRINCIPAL\tOWNER\tEPOCH\tSTANDBYS\tSTATUS\t")
	now := time.Now()
	for _, s := range resp.GetSessions() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", s.GetId(), s.GetApp(), s.GetPrincipal(), s.GetOwnerNode(), s.GetEpoch(), standbyColumn(s, now), s.GetStatus())
	}
	return tw.Flush()
}

// standbyColumn lists a session's in-sync standbys, then those out of sync
// with how long they have been behind (its replication lag); "-" for none.
func standbyColumn(s *adminv1.Session, now time.Time) string {
	out := slices.Clone(s.GetStandbys())
	behind := slices.Sorted(maps.Keys(s.GetBehind()))
	for _, node := range behind {
		lag := now.Sub(s.GetBehind()[node].AsTime()).Round(time.Second)
		out = append(out, fmt.Sprintf("%s(behind %s)", node, max(lag, 0)))
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func listTools(ctx context.Context, c adminv1.AdminServiceClient, args []string, out io.Writer, asJSON bool) error {
	req := &adminv1.ListToolsRequest{}
	if len(args) > 0 {
		req.Session = args[0]
	}
	resp, err := c.ListTools(ctx, req)
	if err != nil {
		return fmt.Errorf("listing tools: %w", err)
	}
	if asJSON {
		return printJSON(out, resp)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSESSION\tSENSITIVE\tDESCRIPTION\t")
	for _, t := range resp.GetTools() {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t\n", t.GetName(), t.GetSession(), t.GetSensitive(), t.GetDescription())
	}
	return tw.Flush()
}

func listConns(ctx context.Context, c adminv1.AdminServiceClient, _ []string, out io.Writer, asJSON bool) error {
	resp, err := c.ListConnections(ctx, &adminv1.ListConnectionsRequest{})
	if err != nil {
		return fmt.Errorf("listing connections: %w", err)
	}
	if asJSON {
		return printJSON(out, resp)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHOME\tPRINCIPAL\tPROTOCOL\tTRANSPORT\t")
	for _, x := range resp.GetConnections() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", x.GetId(), x.GetHomeNode(), x.GetPrincipal(), x.GetProtocolVersion(), x.GetTransport())
	}
	return tw.Flush()
}

func stopSession(ctx context.Context, c adminv1.AdminServiceClient, args []string, out io.Writer, _ bool) error {
	if len(args) != 1 {
		return errors.New("stop-session needs exactly one session id")
	}
	if _, err := c.StopSession(ctx, &adminv1.StopSessionRequest{Id: args[0]}); err != nil {
		return fmt.Errorf("stopping session %s: %w", args[0], err)
	}
	fmt.Fprintf(out, "stopped %s\n", args[0])
	return nil
}

func drain(ctx context.Context, c adminv1.AdminServiceClient, _ []string, out io.Writer, asJSON bool) error {
	resp, err := c.Drain(ctx, &adminv1.DrainRequest{})
	if err != nil {
		return fmt.Errorf("draining: %w", err)
	}
	if asJSON {
		return printJSON(out, resp)
	}
	how := ""
	if moves := resp.GetMoves(); len(moves) > 0 {
		took := make([]time.Duration, len(moves))
		for i, m := range moves {
			took[i] = m.GetTook().AsDuration()
		}
		slices.Sort(took)
		how = fmt.Sprintf(" (%d by promoting a standby; each in %v median, %v max)",
			resp.GetSessionsPromoted(), took[len(took)/2].Round(10*time.Microsecond), took[len(took)-1].Round(10*time.Microsecond))
	}
	fmt.Fprintf(out, "draining: %d sessions moved to other nodes%s, %d kept here, %d lost\n",
		resp.GetSessionsMoved(), how, resp.GetSessionsKept(), resp.GetSessionsStopped())
	return nil
}

func forgetMember(ctx context.Context, c adminv1.AdminServiceClient, args []string, out io.Writer, asJSON bool) error {
	if len(args) != 1 {
		return errors.New("forget-member needs exactly one member name")
	}
	resp, err := c.ForgetMember(ctx, &adminv1.ForgetMemberRequest{Name: args[0]})
	if err != nil {
		return fmt.Errorf("forgetting %s: %w", args[0], err)
	}
	if asJSON {
		if err := printJSON(out, resp); err != nil {
			return err
		}
	}
	var failed []string
	for _, o := range resp.GetNodes() {
		switch o.GetResult() {
		case adminv1.ForgetResult_FORGET_RESULT_FORGOTTEN:
			if !asJSON {
				fmt.Fprintf(out, "%s: forgot %s\n", o.GetNode(), args[0])
			}
		case adminv1.ForgetResult_FORGET_RESULT_NOT_LOST:
			if !asJSON {
				fmt.Fprintf(out, "%s: did not count %s\n", o.GetNode(), args[0])
			}
		default:
			failed = append(failed, o.GetNode())
			if !asJSON {
				fmt.Fprintf(out, "%s: FAILED: %s\n", o.GetNode(), o.GetDetail())
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("forgetting %s: not done on %s", args[0], strings.Join(failed, ", "))
	}
	return nil
}

func watch(ctx context.Context, c adminv1.AdminServiceClient, _ []string, out io.Writer, asJSON bool) error {
	stream, err := c.WatchEvents(ctx, &adminv1.WatchEventsRequest{})
	if err != nil {
		return fmt.Errorf("watching events: %w", err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watching events: %w", err)
		}
		if asJSON {
			b, _ := json.Marshal(map[string]string{"time": ev.GetTime().AsTime().Format(time.RFC3339Nano), "kind": ev.GetKind(), "key": ev.GetKey(), "change": ev.GetChange(), "detail": ev.GetDetail()})
			fmt.Fprintln(out, string(b))
			continue
		}
		fmt.Fprintf(out, "%s %-10s %-8s %s %s\n", ev.GetTime().AsTime().Format(time.TimeOnly), ev.GetKind(), ev.GetChange(), ev.GetKey(), ev.GetDetail())
	}
}
