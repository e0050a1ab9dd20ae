package mcpswarm

import "runtime/debug"

// version is set at link time by the Makefile (-X); empty means "read the
// module build info".
var version string

// Version reports the node's version: the linked-in version, else the module
// version, else "dev".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
