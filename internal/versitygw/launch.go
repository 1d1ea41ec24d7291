package versitygw

// Launch starts a server on a new directory under dir, for a program
// rather than a test (a benchmark): the caller stops it with Stop. It
// fails when no binary is found (see Binary).
func Launch(dir string) (*Server, error) { return start(dir, "bench") }
