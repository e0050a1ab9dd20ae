package standby

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A copy's journal record decodes to the copy, whatever its owner's name
// holds, as json.Marshal's encoding of it did.
func TestHolderRecordDecodesToTheCopy(t *testing.T) {
	for _, owner := range []string{"node1", `no"de\1`, "nœud-é", "tab\there", ""} {
		c := Copy{Owner: owner, Epoch: 7, Seq: 1 << 40, Snapshot: json.RawMessage(`{"n":1,"s":"a \"b\""}`)}
		var got Copy
		if err := json.Unmarshal(appendCopy(nil, c), &got); err != nil {
			t.Fatalf("owner %q: the record does not decode: %v", owner, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("owner %q: decoded %+v, want %+v", owner, got, c)
		}
	}
}

// A snapshot that is not JSON is refused: held, it would make the copy's
// record undecodable when the standby restarts.
func TestHolderRefusesASnapshotThatIsNotJSON(t *testing.T) {
	_, h := newService(t)
	if _, err := h.Hold(Copy{Session: "ct", Owner: "node1", Epoch: 1, Seq: 1, Snapshot: []byte(`{"n":`)}); err == nil {
		t.Fatal("a truncated snapshot was held")
	}
	if _, ok := h.Get("ct"); ok {
		t.Error("the refused snapshot is held")
	}
}
