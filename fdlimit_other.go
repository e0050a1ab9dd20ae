//go:build !unix

package mcpswarm

// openFileLimit is unknown off unix: the listeners then have no total cap
// unless --http-max-conns sets one.
func openFileLimit() uint64 { return 0 }
