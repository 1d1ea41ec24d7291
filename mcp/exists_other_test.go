//go:build !unix

package mcp_test

import "os"

// exists reports whether a process has this pid: one that can be found.
func exists(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
