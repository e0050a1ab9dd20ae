package crdt

import (
	"errors"
	"testing"
)

func TestParseOrigin(t *testing.T) {
	good := map[string]Origin{
		"a@1":                               {Name: "a", Epoch: 1},
		"node-1.pod_x@18446744073709551615": {Name: "node-1.pod_x", Epoch: 18446744073709551615},
	}
	for s, want := range good {
		got, err := ParseOrigin(s)
		if err != nil || got != want {
			t.Errorf("ParseOrigin(%q) = %v, %v; want %v", s, got, err, want)
		}
		if got.String() != s {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), s)
		}
	}
	long := make([]byte, MaxOriginNameLen+1)
	for i := range long {
		long[i] = 'x'
	}
	for _, s := range []string{"", "a", "@1", "a@", "a@0", "a@01", "a@+1", "a@-1", "a@1x", "a@18446744073709551616",
		"a b@1", "a@b@1", "ä@1", string(long) + "@1", "a@ 1"} {
		if o, err := ParseOrigin(s); !errors.Is(err, ErrInvalidOrigin) {
			t.Errorf("ParseOrigin(%q) = %v, %v; want ErrInvalidOrigin", s, o, err)
		}
	}
}

func TestOriginCompareMatchesStrings(t *testing.T) {
	os := []Origin{{"a", 9}, {"a", 10}, {"a.b", 3}, {"a-b", 1}, {"b", 1}}
	for _, x := range os {
		for _, y := range os {
			want := 0
			switch {
			case x.String() < y.String() && x.Name != y.Name:
				want = -1
			case x.String() > y.String() && x.Name != y.Name:
				want = 1
			case x.Name == y.Name && x.Epoch < y.Epoch:
				want = -1
			case x.Name == y.Name && x.Epoch > y.Epoch:
				want = 1
			}
			if got := x.Compare(y); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", x, y, got, want)
			}
		}
	}
}
