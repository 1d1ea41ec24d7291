package versitygw

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLaunchRefusesOtherServer has another HTTP server hold the port the
// harness picked, as a process that grabs it between freePort and the
// server's listen would: launch fails instead of handing the tests a
// server that is not ours.
func TestLaunchRefusesOtherServer(t *testing.T) {
	bin, err := Binary()
	if err != nil {
		if Required() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<ListAllMyBucketsResult/>")
	})}
	go other.Serve(l)
	defer other.Close()
	dir := t.TempDir()
	s := &Server{
		Bin: bin, Dir: filepath.Join(dir, "gw"), logPath: filepath.Join(dir, "log"), Addr: l.Addr().String(),
		AccessKey: "toolcastestroot", SecretKey: "not-known-to-the-other-server",
	}
	os.Mkdir(s.Dir, 0o755)
	defer s.Stop()
	if err := s.launch(); err == nil {
		t.Fatalf("launch on a port another server holds succeeded")
	} else {
		t.Logf("launch: %v", err)
	}
	if s.Pid() != 0 {
		t.Errorf("after a failed launch the server process %d is still tracked", s.Pid())
	}
}

const childEnv = "TOOLCAS_TEST_VERSITYGW_CHILD"

// TestServerDiesWithTestBinary starts a server from a child process, kills
// the child with SIGKILL, and waits, polling with a deadline, for the
// server to be gone too.
func TestServerDiesWithTestBinary(t *testing.T) {
	if dir := os.Getenv(childEnv); dir != "" {
		// The server's files go in the parent's directory: this process is
		// killed, and its own temporary directories would stay behind.
		s, err := StartIn(dir)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("PID=%d\n", s.Pid())
		io.ReadAll(os.Stdin) // until the parent kills this process
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("only Linux kills a child with its parent")
	}
	if _, err := Binary(); err != nil {
		if Required() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTestBinary$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PID="); ok {
			pid, _ = strconv.Atoi(v)
			break
		}
	}
	if pid == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the child printed no server pid")
	}
	go io.Copy(io.Discard, out)
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
			}
			t.Fatalf("server %d still runs 5 s after its test binary was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
