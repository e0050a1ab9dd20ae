// Package cluster keeps a node's registries converged with its peers.
//
// Membership comes from hashicorp/memberlist (SWIM with Lifeguard): nodes
// join by seed addresses or "dns:NAME" (re-resolved while alone), gossip is
// encrypted with a key derived from the cluster key, and each node's
// metadata carries its gRPC address, epoch, state and version. Events feed
// a view (Members, WatchMembers) that also marks a peer suspect when its
// gRPC calls fail while memberlist still reports it alive.
//
// Data never rides gossip. Each node pushes its own deltas to every peer on
// a long-lived mcpswarm.peer.v1 Replicate stream, batched for a few
// milliseconds, through a bounded queue per peer: a slow peer loses batches,
// never blocks writes, and repairs by catch-up. Heartbeats on the stream
// carry the sender's position, so a receiver notices a gap within one
// heartbeat. A node's streams heartbeat together, on one timer ticking at
// the multiples of the period (beat.go): a swarm at rest wakes once a
// period for all its heartbeats, not once per stream. A stream declares each origin and registry once and then names
// them by small refs (crdtpb.StreamEncoder, StreamDecoder); a bad ref cuts
// the stream. Every AntiEntropy period a node exchanges digests with one
// random peer and pulls what it lacks: deltas from the origin's bounded log
// or, past it, a snapshot of that origin's partition in chunks. Only owners
// push; relays happen only by pull, and never toward the origin itself.
//
// A dead or departed member's entries are hidden at once and deleted after
// DeadGrace; a restarted node has a new epoch, and its old epoch is dropped
// as soon as the new one is seen. Every peer call carries a credential
// derived from the cluster key; calls without it are refused.
//
// The node's own entries are stored (Storage: bbolt in DataDir, or memory)
// in the same transaction as the change, and restored under the new epoch
// by Start before the node joins.
//
// Files: config.go (Config, DefaultConfig, LocalConfig), membership.go
// (memberlist delegates, metadata, the view), auth.go (credential and
// interceptors), peer.go (client side: links, push streams, catch-up),
// server.go (PeerService), replicate.go (the single-goroutine replication
// loop), registry.go (Registry), store.go (Storage, MemoryStorage,
// BoltStorage), codec.go (crdtpb), metrics.go.
package cluster
