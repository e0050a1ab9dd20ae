// Package mcp is the MCP front of a node: its own JSON-RPC dispatcher and
// transports, with mark3labs/mcp-go's protocol types.
//
// # Transports
//
// Server.Handler serves Streamable HTTP at /mcp (the session-based
// revisions up to 2025-11-25 and the stateless 2026-07-28 one), legacy
// HTTP+SSE at /sse and /message, and, when authentication is configured,
// OAuth protected resource metadata at /.well-known/oauth-protected-resource.
// Server.ServeStdio serves one client over stdin/stdout. A client such as
// Claude Code connects to a node started with `make run` with
//
//	claude mcp add --transport http mcpswarm http://127.0.0.1:8080/mcp
//
// or, in an .mcp.json, {"mcpServers":{"mcpswarm":{"type":"http","url":"http://127.0.0.1:8080/mcp"}}}.
//
// # One path
//
// Every message, on every transport and in every era, is decoded once
// (checkMessage) and served by one dispatcher (rpc.go): an exchange holds
// what the transport learnt (identity, connection, the client's declared
// capabilities, era) and an outbox back to the client; lookupMethod names
// each method's eras and whether the read authorizer guards it. Before
// that, the HTTP handler refuses DNS-rebinding requests (a loopback
// listener reached with a non-loopback Host or Origin), authenticates
// bearer tokens when the guard has an Authenticator (401 with a
// WWW-Authenticate challenge naming the metadata URL), bounds the body
// (Config.MaxBodyBytes), refuses JSON-RPC batches (naming the limit when
// one exceeds Config.MaxBatch) and bodies nested deeper than
// Config.MaxDepth, and validates Mcp-Session-Id on POST, GET and DELETE
// (an id nobody minted, or one bound to another principal, is 404). A read
// denial answers JSON-RPC -32090 with data {error, method, detail}.
//
// # Session ids and principals
//
// Streamable HTTP and SSE connection ids are minted by SessionIDs: AES-GCM
// sealed under Config.SessionKey (shared by the cluster), naming the node
// that minted them and, when the request was authenticated, bound to its
// principal. Any node validates any id. Without authentication a
// connection's principal is conn:<id>, which survives moves and restarts;
// stdio's is "stdio"; an anonymous 2026-07-28 request has none and may only
// read (with Config.Dev it owns sessions as the shared "anonymous").
//
// # Eras
//
// The era is decided per request. A 2026-07-28 notification needs its
// version only in the Mcp-Protocol-Version header (SEP-2575 puts the _meta
// triple on requests); removed methods answer -32601 (HTTP 404); a tool whose
// _meta wire.MetaRequiresCapabilities names a capability the request does not
// declare is refused with -32021 (HTTP 400). Legacy SSE serves only the
// session-based revisions: server/discover there lists those, and a
// 2026-07-28 request is refused with -32022 and the list.
//
// # Views
//
// tools/list is the caller's view: the static and derived tools the tool
// authorizer allows or asks about, entry by entry (an Ask entry carries
// MetaApproval; only Deny hides), and the extension's tools. tools/call
// resolves the called name alone: a static tool, one of the caller's
// derived tools, an extension's tool, or, for a derived name whose session
// the caller does not have, an answer naming the session and pointing to
// swarm_list.
//
// # Calls
//
// Every tools/call passes ownership (authz.Owns), the rate limiter,
// authz.CheckSensitive and the tool authorizer. Ask parks the call and sends
// elicitation/create (a yes/no approval form) to the calling connection if
// it advertised elicitation; the parked call closes exactly once (approval
// runs it; decline, cancel, an error, a timeout or shutdown deny). Clients
// that cannot be asked get the machine-readable authorization_required
// denial. 2026-07-28 requests get an input_required result whose
// requestState is sealed to principal, tool, argument digest and expiry,
// and is accepted once.
//
// # Notifications
//
// What a handler sends its client while it runs (progress, log messages,
// elicitation/create, sampling, roots) goes on the request's own stream:
// the POST's response turns text/event-stream on the first one, and the
// answer is its last event; on SSE and stdio, the connection's stream.
// Backend events become notifications/tools/list_changed (only to the
// principal's connections, once per change, from the node
// Connections.NotifyHere names) and notifications/resources/updated (to
// subscribed connections, with the RFC 6902 patch of a model projection in
// _meta under MetaPatch). On this node they go to the connection's GET
// stream, else ride a running POST of it, else wait (bounded) for its next
// POST (postroute.go). 2026-07-28 clients receive both on their
// subscriptions/listen streams, tagged with the subscription id.
//
// # Tasks
//
// A tools/call of a task-supporting tool may become a task (mcp/task has
// the rules, shapes and service; tasks.go the glue): on 2026-07-28 when
// the request declares the extension and the handler outlives a short
// grace, on 2025-11-25 when params.task asks. The task runs here, detached
// from the request; its record lives in the Store Cluster.Attach returned,
// so any node answers tasks/*. Inside a task, ClientFrom(ctx)'s asks park
// it as input_required until tasks/update answers them.
//
// # Across nodes
//
// Config.Cluster is the seam, typed and attached in one step: New calls
// Cluster.Attach with the front (the Front interface: HoldsStream,
// DeliverResponse, DeliverSSE, what other nodes call here) and gets back the
// Connections registry, the Relay and the task Store. Connections carries what initialize
// taught the home node (capabilities, client info, log level,
// subscriptions) to the node a request lands on, revocations, the node
// holding each GET stream, spent request states, and CanServe (a refusal
// answers 503 with Retry-After). Relay carries a client's answer to a
// server-to-client request, a cancellation or a legacy SSE POST to the node
// that needs it, whose Front method takes it. The package imports nothing
// of the cluster.
//
// # Extending
//
// Config.Extend receives the front's Extension before any transport
// starts; a conformance fixture adds its tools, resources, templates and
// prompts there (server-wide, visible to every connection, each call still
// gated by the tool authorizer). A handler reaches its caller through
// ClientFrom(ctx).
package mcp
