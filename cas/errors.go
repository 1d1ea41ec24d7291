package cas

import (
	"errors"
	"io/fs"
)

var (
	// ErrNotFound is returned by Store.Open, Store.ReadAll, Store.Stat,
	// Store.Verify and Store.Remove when no blob file has that name. It is
	// the one "not found" of every layer of toolcas: index.ErrNotFound,
	// hook.ErrNotFound and store.ErrNotFound are this error, and
	// errors.Is(err, fs.ErrNotExist) holds for it too.
	ErrNotFound error = notFound{}

	// ErrCorrupt is returned by Store.ReadAll, Store.Verify and reads from a
	// Reader when a blob's bytes do not hash to its name, or when the file at a
	// blob's name is not a regular file.
	ErrCorrupt = errors.New("blob corrupt")

	// ErrInvalidDigest is returned by ParseDigest and ParseHex for text that is
	// not a digest.
	ErrInvalidDigest = errors.New("invalid digest")

	// ErrInvalidExt is returned by CheckExt, and by every Store method given
	// such an extension.
	ErrInvalidExt = errors.New("invalid extension")

	// ErrNoStore is returned by Open when the directory holds no store and
	// WithCreate was not given.
	ErrNoStore = errors.New("no store")

	// ErrNewerFormat is returned by Open when the store's layout marker names a
	// format newer than this build reads.
	ErrNewerFormat = errors.New("store made by a newer toolcas")

	// ErrDiskFull is returned, wrapping the system error, when a write fails
	// because the file system has no space left.
	ErrDiskFull = errors.New("disk full")

	// ErrTempInUse is returned by Store.RemoveTemp for a temp file that a put
	// is still writing: it holds the file's lock.
	ErrTempInUse = errors.New("temp file in use")

	// ErrNotBlobPath is returned by ParseBlobPath for a path that does not
	// name a blob file inside the store.
	ErrNotBlobPath = errors.New("not a blob path")
)

// notFound is ErrNotFound: the same as every other, and an fs.ErrNotExist.
type notFound struct{}

func (notFound) Error() string        { return "not found" }
func (notFound) Is(target error) bool { return target == fs.ErrNotExist }
