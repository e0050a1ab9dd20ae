// Package swarm makes one node's MCP front serve the whole cluster. It
// publishes the sessions and tools this node owns into replicated registries
// (cluster.Registry), answers listings from those replicas, and routes every
// call for a session to the node that owns it over the peer gRPC service,
// where ownership is checked again before anything runs.
//
// It sits between cluster (which knows nothing of MCP) and mcp (which knows
// nothing of the cluster): Swarm implements mcp.Backend for the front and
// serves mcpswarm.forward.v1 for peers (legacyHandler answers the peer
// service's deprecated forwarding RPCs). It also fails sessions over to
// their standbys (failover.go), and keeps the cluster-wide task table the
// front's MCP tasks live in (tasks.go: Swarm.Tasks, a task.Store).
package swarm
