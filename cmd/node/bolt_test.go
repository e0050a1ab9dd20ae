package main

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// assertBoltClosed opens every bbolt file in dir with a short lock timeout:
// bbolt holds an exclusive flock while a database is open, so the open only
// succeeds if the node closed its file.
func assertBoltClosed(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.db"))
	if len(files) == 0 {
		t.Fatalf("no bbolt file in %s", dir)
	}
	for _, f := range files {
		db, err := bolt.Open(f, 0o600, &bolt.Options{Timeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatalf("bbolt file %s still locked after exit: %v", f, err)
		}
		_ = db.Close()
	}
}
