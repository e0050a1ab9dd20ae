package session

import "fmt"

// DefaultMaxTextBytes is the default of ManagerConfig.MaxTextBytes, the
// bound on every string a client hands a widget action: the text typed into
// a field, a node id, a column name. What a client types ends up in the
// session's model, which is held in memory, saved to bbolt and replicated;
// unbounded, 25 fields of 4 MB took one node from 29 MiB to 3.45 GiB (issue
// #13). Apps bound their collections on top (see apps).
const DefaultMaxTextBytes = 8 << 10

// checkTextArgs refuses arguments holding a string longer than max bytes.
func checkTextArgs(args map[string]any, max int) error {
	for key, v := range args {
		if s, ok := v.(string); ok && len(s) > max {
			return fmt.Errorf("argument %q is %d bytes; a widget accepts at most %d (the node's widget-text-bytes setting): %w", key, len(s), max, ErrInvalidArgs)
		}
	}
	return nil
}
