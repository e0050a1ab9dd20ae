// Package seal mints and opens the MCP front's sealed tokens, AES-GCM under
// the session key the cluster shares: connection ids (Mcp-Session-Id),
// which any node validates and nobody can forge, and 2026-07-28 request
// states, each accepted once. It has no I/O of its own: what the cluster
// knows of revocations and spent states comes through the interfaces it
// is given.
package seal
