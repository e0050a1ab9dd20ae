package mcpswarm

// fdReserve is what the listener caps leave of the descriptor limit for
// everything else: gossip's TCP streams and UDP socket, outgoing gRPC to
// every peer, the bbolt file, DNS lookups and logs. Half the limit when the
// limit is small.
const fdReserve = 256

// Shares of the descriptors left after the reserve.
const (
	grpcConnsPerSource = 64   // a peer holds a few; an admin CLI one
	grpcMaxConns       = 1024 // peers and admin clients are few
)

// fdBudget splits the process's descriptor limit between the HTTP and gRPC
// listeners: gRPC gets a quarter (at most grpcMaxConns), HTTP the rest,
// after keeping the reserve free. nofile 0 (unknown) gives caps of 0, that
// is none.
func fdBudget(nofile uint64) (httpConns, grpcConns int) {
	if nofile == 0 {
		return 0, 0
	}
	reserve := min(uint64(fdReserve), nofile/2)
	left := int(min(nofile-reserve, 1<<30))
	grpcConns = max(1, min(left/4, grpcMaxConns))
	httpConns = max(1, left-grpcConns)
	return httpConns, grpcConns
}
