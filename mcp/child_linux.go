package mcp

import (
	"os/exec"
	"syscall"
)

// setDeathSignal puts the child in its own process group and asks the
// kernel to send it SIGTERM when the proxy dies, however it dies.
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}

func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }
