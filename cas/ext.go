package cas

import "fmt"

// MaxExtLen is the longest extension the store accepts, dot included.
const MaxExtLen = 17

// CheckExt reports whether ext may end a blob's file name: a dot followed by
// 1 to 16 ASCII letters or digits. Extensions come from untrusted file names,
// so nothing else (separators, dots, spaces, control or non-ASCII characters)
// may reach a path.
func CheckExt(ext string) error {
	if len(ext) < 2 || len(ext) > MaxExtLen {
		return fmt.Errorf("%w %q: want a dot and 1 to %d letters or digits", ErrInvalidExt, clip(ext), MaxExtLen-1)
	}
	if ext[0] != '.' {
		return fmt.Errorf("%w %q: does not start with a dot", ErrInvalidExt, clip(ext))
	}
	for i := 1; i < len(ext); i++ {
		c := ext[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return fmt.Errorf("%w %q: %q at offset %d is not an ASCII letter or digit", ErrInvalidExt, clip(ext), c, i)
		}
	}
	return nil
}
