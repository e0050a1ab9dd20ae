package mcpswarm

// NetworkOf returns the Network n runs on (nil: sockets), so a test's
// clients can reach a node that has no socket.
func NetworkOf(n *Node) Network { return n.opts.network }
