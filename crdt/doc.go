// Package crdt is the owner-partitioned delta-state map that every mcpswarm
// registry replicates.
//
// Every entry has exactly one writer, its origin (a node incarnation,
// name@epoch). A Map holds, per origin, a sequence number and the entries
// that origin wrote, each tagged with the dot (origin, seq) of its last
// write. Local writes produce deltas; remote deltas are applied when they
// continue what the map holds for their origin, and a gap is reported so the
// caller can ask for catch-up (DeltaSince from a bounded per-origin log, or a
// Snapshot of that one origin's partition). Removals carry only the removed
// dot: a replica that has seen an origin up to seq s knows every removal up
// to s, so no tombstones are kept.
//
// The package is a deterministic state machine: no I/O, no clocks, no
// goroutines. Time enters only through Tick, which ages the memory of dropped
// origins. A Map is not safe for concurrent use; callers serialise access.
package crdt
