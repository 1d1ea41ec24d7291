package cas

import "os"

// LockTempFile takes the exclusive lock that marks a temp file as being
// written, as the store's own puts do, so that a cleaner using
// TryLockTempFile leaves it alone however long its content takes. The lock
// ends when the file is closed or the process dies. Where files cannot be
// locked it does nothing.
func LockTempFile(f *os.File) error { return lockTemp(f) }

// TryLockTempFile takes a temp file's lock without waiting: ErrTempInUse
// means a live writer holds it. A cleaner removes a temp file only while
// it holds this lock.
func TryLockTempFile(f *os.File) error { return tryLockTemp(f) }

// TempFileUnlinked reports whether an open temp file's name was removed
// since it was opened: a cleaner took it between its creation and its
// writer's lock, and the writer must make another.
func TempFileUnlinked(f *os.File) bool { return unlinked(f) }

// TempLocking reports whether temp files are locked on this system; where
// they are not, a cleaner must go by a temp file's age alone.
const TempLocking = tempLocking
