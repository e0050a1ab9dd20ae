package mcpswarm_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm"
)

// BenchmarkTaskCreate measures what a task's handle costs before it is
// returned — Create on a three-node cluster: the record written to bbolt
// and applied by both peers — against the plain replicated write it is
// built on (Registry.Put + AwaitPeers of a session record), on the
// in-memory network and on loopback sockets. The ratio is the task
// table's own overhead (encoding, the limit check, the index).
func BenchmarkTaskCreate(b *testing.B) {
	for _, net := range []string{"memnet", "sockets"} {
		b.Run(net, func(b *testing.B) {
			e := newSwarmEnv(b)
			e.sockets = net == "sockets"
			n1 := e.cluster(3)[0]
			store := mcpswarm.TaskStore(n1)
			ctx := context.Background()
			seq := 0 // ids stay unique across the runs of one cluster
			b.Run("create", func(b *testing.B) {
				for range b.N {
					seq++
					rec := newTask(fmt.Sprintf("t%d", seq), "node1", time.Hour)
					rec.Principal = fmt.Sprintf("p%d", seq) // under the limit per principal
					if err := store.Create(ctx, rec); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("sessions-put", func(b *testing.B) {
				for range b.N {
					seq++
					rec := fmt.Sprintf(`{"app":"counter","principal":"p%d","created":%q,"status":"running","node":"node1"}`,
						seq, time.Now().Format(time.RFC3339Nano))
					if err := mcpswarm.PutAwait(ctx, n1, "sessions", fmt.Sprintf("bench-%d", seq), []byte(rec)); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
