package seal

import (
	"errors"
	"testing"
	"time"
)

// With a revocation floor (the cluster's bound on how many revocations it
// keeps), an id issued in or before the floor's second is refused as
// expired — its client initializes again — and a later one is not.
func TestIDsAtOrBelowTheRevocationFloorAreRefused(t *testing.T) {
	ids, err := NewSessionIDs(make([]byte, 32), "n1")
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now().Truncate(time.Second)
	ids.now = func() time.Time { return t1.Add(300 * time.Millisecond) }
	old := ids.Mint("alice")
	ids.now = func() time.Time { return t1.Add(time.Second) }
	fresh := ids.Mint("alice")
	if _, err := ids.Open(old, "alice"); err != nil {
		t.Fatalf("without a floor: %v", err)
	}
	ids.SetCluster(revocations{floor: t1})
	if _, err := ids.Open(old, "alice"); !errors.Is(err, ErrSessionIDExpired) {
		t.Fatalf("an id issued in the floor's second: %v; want ErrSessionIDExpired", err)
	}
	if _, err := ids.Open(fresh, "alice"); err != nil {
		t.Fatalf("an id issued after the floor's second: %v", err)
	}
	ids.SetCluster(revocations{})
	if _, err := ids.Open(old, "alice"); err != nil {
		t.Fatalf("with a zero floor: %v", err)
	}
}

// revocations is a cluster's revocation state as the ids see it: nothing
// revoked one by one, a floor, and serial ids allowed or not.
type revocations struct {
	floor  time.Time
	serial bool
}

func (r revocations) Revoked(string) bool      { return false }
func (r revocations) RevokedBefore() time.Time { return r.floor }
func (r revocations) MintSerial() bool         { return r.serial }
