package versitygw

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Launch starts a server on a new directory under dir, for a program
// rather than a test (a benchmark): the caller stops it with Stop. It
// fails when no binary is found (see Binary).
func Launch(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, fmt.Errorf("versitygw: %w; %s", err, Install)
	}
	s := &Server{
		Bin:       bin,
		Dir:       filepath.Join(dir, "gw"),
		logPath:   filepath.Join(dir, "versitygw.log"),
		AccessKey: "toolcasbenchroot",
		SecretKey: "toolcas-bench-secret-" + fmt.Sprint(time.Now().UnixNano()),
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 {
		addr, err := freePort()
		if err != nil {
			return nil, err
		}
		s.Addr = addr
		if lastErr = s.launch(); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("versitygw: %v\n%s", lastErr, s.logTail())
}
