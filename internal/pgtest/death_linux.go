package pgtest

import "syscall"

// setDeathSignal has the server stopped at once if the test process dies
// before it stops the server itself.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGQUIT }
