package versitygw

import (
	"os/exec"
	"syscall"
)

// setPdeathsig has the kernel kill the server when the thread that started
// it ends, as it does when the test binary is killed, so that no server
// outlives its tests.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
