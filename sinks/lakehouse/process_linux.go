package lakehouse

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the child killed when cdclake dies, however it dies.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
