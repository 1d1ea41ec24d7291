//go:build !linux

package store

// lockHolders lists no process here: the holders of a lock are read from
// Linux's /proc/locks, which other systems do not have, so that a wait
// that gave up names the lock but not who holds it.
func lockHolders(string) []int { return nil }
