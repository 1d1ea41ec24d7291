//go:build !linux

package store

import (
	"errors"
	"os"
)

// fallocate is Linux's; elsewhere the reserve is written.
func fallocate(*os.File, int64) error { return errors.ErrUnsupported }
