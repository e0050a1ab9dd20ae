package mcpswarm

import (
	"google.golang.org/grpc"
)

// build constructs the node's parts in start order.
func (n *Node) build() error {
	n.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(4 << 20),
	)
	n.registerBase()
	n.parts = append(n.parts, n.listeners())
	return nil
}

func (n *Node) readyMembers() []readyzMember { return nil }
