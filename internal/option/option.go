// Package option makes the functional options of the library's
// constructors (cas.Open, index.Open, store.Open, s3blob.Open, the MCP
// proxy): each sets a field of its constructor's configuration, and one
// that makes no sense is an error that says why, never a silent default.
package option

import "fmt"

// Set returns an option that only sets: it cannot be wrong.
func Set[C any](set func(*C)) func(*C) error {
	return func(c *C) error {
		set(c)
		return nil
	}
}

// Check returns an option that sets when ok, and otherwise fails with the
// error that format and args make, setting nothing.
func Check[C any](ok bool, set func(*C), format string, args ...any) func(*C) error {
	return func(c *C) error {
		if !ok {
			return fmt.Errorf(format, args...)
		}
		set(c)
		return nil
	}
}
