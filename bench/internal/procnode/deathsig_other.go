//go:build !linux

package procnode

import "syscall"

// dieWithParent does nothing off Linux: only Linux has a parent-death
// signal; the bench programs' deferred Stop is what ends the nodes there.
func dieWithParent(*syscall.SysProcAttr) {}
