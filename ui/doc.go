// Package ui serves the node's web UI at /ui: a swarm page (members,
// sessions per node) and a session page (the widget tree rendered as HTML,
// driven by clicks and typing), both live over Server-Sent Events.
//
// The UI adds no second way into a session. It reads through the same
// mcp.Backend the MCP front uses (the swarm view: replicated registries,
// reads forwarded to the owner node), and every click goes through the same
// checks as a tools/call: the rate limit, the sensitive-tool guard, the
// tool authorizer (an Ask asks the person in the page), the ownership check
// and the routing to the owner node. Identity comes only from the bearer
// token the person pasted into the login page, kept in an HttpOnly,
// SameSite=Strict cookie and verified on every request; under --dev with no
// token configured the page is open on loopback.
//
// Actions are journaled per session in a replicated registry ("uiactions"),
// each by the node it entered through, so the event log beside a session
// shows agent (MCP) and person (page) actions whichever node they used.
package ui
