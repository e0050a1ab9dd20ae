package crdt

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// MaxOriginNameLen is the longest node name an Origin may carry.
const MaxOriginNameLen = 64

// Origin is one writer incarnation: a node name and the epoch it drew at
// start. Epochs of the same name are ordered: a larger epoch is a newer
// incarnation.
type Origin struct {
	Name  string
	Epoch uint64
}

// String returns the origin as "name@epoch", the epoch in decimal.
func (o Origin) String() string {
	return o.Name + "@" + strconv.FormatUint(o.Epoch, 10)
}

// IsZero reports whether o is the zero Origin.
func (o Origin) IsZero() bool { return o.Name == "" && o.Epoch == 0 }

// Valid reports whether o has a well-formed name ([A-Za-z0-9._-]{1,64}) and
// a non-zero epoch.
func (o Origin) Valid() bool { return ValidName(o.Name) && o.Epoch > 0 }

// Compare orders origins as their string forms order, except that epochs
// of the same name compare numerically. Digest, Lookup and Range list
// origins in this order; since a map holds one epoch per name, it is the
// order of their strings. It returns -1, 0 or +1.
func (o Origin) Compare(p Origin) int {
	if o.Name == p.Name {
		return cmp.Compare(o.Epoch, p.Epoch)
	}
	if !ValidName(o.Name) || !ValidName(p.Name) {
		return strings.Compare(o.String(), p.String())
	}
	// Valid names hold no '@', so when one name is a prefix of the other the
	// strings differ where the shorter one has its '@'.
	n := min(len(o.Name), len(p.Name))
	if c := strings.Compare(o.Name[:n], p.Name[:n]); c != 0 {
		return c
	}
	if len(o.Name) == n {
		return cmp.Compare('@', p.Name[n])
	}
	return cmp.Compare(o.Name[n], '@')
}

// ParseOrigin parses "name@epoch" strictly: the name is 1 to 64 characters
// of [A-Za-z0-9._-] and the epoch a decimal number greater than zero, without
// sign or leading zeros.
func ParseOrigin(s string) (Origin, error) {
	at := strings.IndexByte(s, '@')
	if at < 0 {
		return Origin{}, fmt.Errorf("parsing origin %q: missing '@': %w", s, ErrInvalidOrigin)
	}
	name, ep := s[:at], s[at+1:]
	if !ValidName(name) {
		return Origin{}, fmt.Errorf("parsing origin %q: name must be 1 to %d characters of [A-Za-z0-9._-]: %w", s, MaxOriginNameLen, ErrInvalidOrigin)
	}
	if ep == "" || ep[0] == '0' || ep[0] == '+' {
		return Origin{}, fmt.Errorf("parsing origin %q: epoch must be a decimal number above zero: %w", s, ErrInvalidOrigin)
	}
	epoch, err := strconv.ParseUint(ep, 10, 64)
	if err != nil {
		return Origin{}, fmt.Errorf("parsing origin %q: epoch must be a decimal number above zero: %w", s, ErrInvalidOrigin)
	}
	return Origin{Name: name, Epoch: epoch}, nil
}

// ValidName reports whether s is a valid node name: 1 to MaxOriginNameLen
// characters of [A-Za-z0-9._-]. It is the node-name rule of the whole
// node — flags, membership, peer credentials and origins — because a node's
// name is its origin's name.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxOriginNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

func checkOrigin(o Origin) error {
	if !o.Valid() {
		return fmt.Errorf("checking origin %q: %w", o.String(), ErrInvalidOrigin)
	}
	return nil
}
