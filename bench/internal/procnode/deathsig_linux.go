package procnode

import "syscall"

// dieWithParent has the kernel SIGKILL the node when the program that
// started it dies, even by SIGKILL, when no deferred Stop can run: a bench
// killed mid-run leaves no nodes behind.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
