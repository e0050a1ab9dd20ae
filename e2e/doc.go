// Package e2e holds end-to-end tests that build and start the real
// mcpswarm binary on ephemeral loopback ports and drive it from outside:
// the TypeScript SDK interop test here, and the official MCP conformance
// suite through conformance/run.sh (`make conformance`).
//
// The Node-based tests need `npm ci --prefix e2e`; without e2e/node_modules
// or a node binary they skip and say so.
package e2e
