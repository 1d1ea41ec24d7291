//go:build !unix

package main

// canWrite says nothing where there is no access(2) (Windows): whether dir
// may be written is its ACLs' to say, and the command's own writes report
// a directory it cannot write, without the hint at the read-only commands.
func canWrite(string) error { return nil }
