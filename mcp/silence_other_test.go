//go:build !unix

package mcp_test

// silenceStdout does nothing where the test cannot point standard output
// elsewhere.
func silenceStdout() {}
