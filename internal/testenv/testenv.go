// Package testenv marks the tests that did not run because this machine
// lacks something they need (a tool, root, a file-system feature), so that
// `make test` can list them at its end instead of letting them pass quietly.
package testenv

import "testing"

// Prefix starts the message of every such skip. scripts/testreport finds the
// skips by it; a skip without it (a -short skip, say) is by design and is
// not listed.
const Prefix = "NOT RUN: "

// Skip skips t with Prefix and the reason, which should say what is missing
// and the command that provides it.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Skipf(Prefix+format, args...)
}
