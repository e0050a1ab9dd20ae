package mcpswarm_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpswarm/mcpswarm/ui"
)

// Issue 17: the sessions and tools registries are derived from the
// session journal and rebuilt at every start, and the UI's action log is
// a lossy view, so a click (a resource revision in the session's record,
// an action in the log) writes nothing to the node's bbolt file, where
// each cost a transaction and its fsync; a restart still brings the
// session back, listed, with its tools and its model.
func TestDerivedRegistriesAreNotStoredAndComeBackOnRestart(t *testing.T) {
	e := newSwarmEnv(t)
	n1 := e.start("node1")
	alice := connect(t, n1, connOpts{token: aliceToken})
	if res := alice.call("swarm_start", map[string]any{"app": "counter", "id": "ct"}); res.IsError {
		t.Fatalf("swarm_start: %s", textOf(res))
	}
	for range 5 {
		if res := alice.call("ct.inc.click", nil); res.IsError {
			t.Fatalf("ct.inc.click: %s", textOf(res))
		}
	}
	e.kill("node1")

	db, err := bolt.Open(filepath.Join(e.dataDir["node1"], "node.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			stored[string(name)] = b.Stats().KeyN
			return nil
		})
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if stored["reg/sessions"] != 0 || stored["reg/tools"] != 0 {
		t.Errorf("the bbolt file holds %d session and %d tools records; the derived registries must not be stored", stored["reg/sessions"], stored["reg/tools"])
	}
	if stored["reg/"+ui.RegistryName] != 0 {
		t.Errorf("the bbolt file holds %d UI action records; the action log must not be stored", stored["reg/"+ui.RegistryName])
	}
	if stored["reg/conns"] == 0 {
		t.Errorf("the bbolt file holds no connection record (buckets %v): the file is not the node's store", stored)
	}

	n1 = e.start("node1")
	alice = connect(t, n1, connOpts{token: aliceToken})
	eventually(t, 10*time.Second, "ct is listed again with its tools", func() bool {
		return alice.listed()["ct"] == "node1" && alice.tools()["ct.inc.click"]
	})
	res := alice.call("swarm_get_model", map[string]any{"id": "ct"})
	if res.IsError || !strings.Contains(textOf(res), `"count":5`) {
		t.Fatalf("the restored model is %q, want the count of 5", textOf(res))
	}
}
