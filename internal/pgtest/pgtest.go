// Package pgtest runs a private PostgreSQL cluster for tests: initdb in a
// temporary directory, the server on a free loopback port, one fresh
// database for each test, and the server stopped by its pid at the end.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// RequireEnv names the variable that, set to 1, turns a missing PostgreSQL
// into a test failure instead of a skip: CI sets it.
const RequireEnv = "TOOLCAS_REQUIRE_SERVERS"

// ErrNoServer is returned by Start when no PostgreSQL server binaries are
// found.
var ErrNoServer = errors.New("PostgreSQL server binaries (initdb, postgres) not found: install them with apt-get install -y postgresql-15, or set TOOLCAS_PG_BIN to their directory")

// User is the cluster's superuser, which logs in over loopback without a
// password.
const User = "toolcas"

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	bin, dir, data, sock string
	port                 int
	cred                 *credential

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}

	admin *sql.DB
	seq   atomic.Int64
}

// FindBin returns the directory holding initdb and postgres:
// $TOOLCAS_PG_BIN when it is set (and nothing else), else PostgreSQL 15's
// Debian directory, else the directory initdb or pg_ctl on PATH links to.
// Where clusters cannot run (Windows) it returns an error that names the
// platform and is ErrNoServer.
func FindBin() (string, error) {
	if err := platformErr(); err != nil {
		return "", err
	}
	dirs := []string{"/usr/lib/postgresql/15/bin"}
	if d := os.Getenv("TOOLCAS_PG_BIN"); d != "" {
		dirs = []string{d}
	}
	for _, name := range []string{"initdb", "pg_ctl"} {
		if os.Getenv("TOOLCAS_PG_BIN") != "" {
			break
		}
		if p, err := exec.LookPath(name); err == nil {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				dirs = append(dirs, filepath.Dir(r))
			}
		}
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoServer
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Start makes a new cluster in a temporary directory and starts its server
// on a free loopback port. Run as root, the server runs as the user
// postgres, which PostgreSQL requires.
func Start(ctx context.Context) (*Cluster, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	base := baseDir()
	removeStale(base)
	dir, err := os.MkdirTemp(base, dirPrefix)
	if err != nil {
		return nil, err
	}
	// Who made the directory: once that process is gone, a later Start
	// removes what it left (see removeStale).
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir, data: filepath.Join(dir, "data"), sock: filepath.Join(dir, "sock")}
	fail := func(err error) (*Cluster, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Mkdir(c.sock, 0o700); err != nil {
		return fail(err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fail(fmt.Errorf("pgtest: running as root, and PostgreSQL will not: %w", err))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &credential{Uid: uint32(uid), Gid: uint32(gid)}
		for _, p := range []string{dir, c.sock} {
			if err := os.Chown(p, uid, gid); err != nil {
				return fail(err)
			}
		}
	}
	initdb := c.command(ctx, "initdb", "-D", c.data, "-U", User, "-E", "UTF8", "--locale=C", "--no-sync",
		"--auth-local=trust", "--auth-host=scram-sha-256")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("pgtest: initdb: %v\n%s", err, out))
	}
	// The superuser logs in without a password; every other role needs its
	// own, so that tests can log in with a wrong one.
	hba := "local all all trust\nhost all " + User + " 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(c.data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return fail(err)
	}
	var last error
	for range 3 { // the free port may be taken before the server binds it
		if c.port, err = freePort(); err != nil {
			return fail(err)
		}
		if last = c.start(ctx); last == nil {
			break
		}
	}
	if last != nil {
		return fail(last)
	}
	c.admin, err = sql.Open("pgx", c.URL("postgres"))
	if err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// dirPrefix starts the name of every cluster's directory, and ownerFile
// names the file in it that holds the pid of the process that made it.
const (
	dirPrefix = "toolcas-pg-"
	ownerFile = "owner.pid"
)

// baseDir is where the clusters' directories go: the temp directory, or
// /tmp as root, since the server's user must reach it (not under a $TMPDIR
// in root's home).
func baseDir() string {
	if os.Geteuid() == 0 {
		return "/tmp"
	}
	return os.TempDir()
}

// removeStale removes the cluster directories under base that a test
// process killed before it could stop its server left behind: those whose
// maker (owner.pid) or whose server (data/postmaster.pid) names a process
// that no longer exists, unless the other still lives, and those with
// neither file that nothing has touched for staleAge. A directory whose
// maker lives is kept, whatever its server's state.
func removeStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
	for _, d := range dirs {
		owner, ownerKnown := pidIn(filepath.Join(d, ownerFile))
		if ownerKnown && alive(owner) {
			continue
		}
		server, serverKnown := pidIn(filepath.Join(d, "data", "postmaster.pid"))
		if serverKnown && alive(server) {
			continue
		}
		if !ownerKnown && !serverKnown {
			// Being made right now, or left long ago by a build that wrote
			// no owner.pid: only the second is old.
			if fi, err := os.Stat(d); err != nil || time.Since(fi.ModTime()) < staleAge {
				continue
			}
		}
		os.RemoveAll(d)
	}
}

// staleAge is how long a cluster directory that names no process must
// have been left untouched before removeStale takes it for abandoned.
const staleAge = time.Hour

// pidIn reads the pid on the first line of file.
func pidIn(file string) (int, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil && pid > 0
}

func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = sysProcAttr(c.cred)
	return cmd
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the server and waits until it takes connections, polling
// with a deadline.
func (c *Cluster) start(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(c.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := c.command(context.Background(), "postgres", "-D", c.data, "-p", strconv.Itoa(c.port), "-k", c.sock,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	setDeathSignal(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c.mu.Lock()
	c.cmd, c.exited = cmd, exited
	c.mu.Unlock()

	// The server is asked through its own Unix socket, which no other
	// cluster serves, rather than the TCP port, which another cluster may
	// have taken since it was found free; then the TCP port is checked to
	// lead to this server's data directory.
	db, err := sql.Open("pgx", fmt.Sprintf("postgres://%s@/postgres?host=%s&port=%d&connect_timeout=2", User, url.QueryEscape(c.sock), c.port))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			return c.checkTCP(ctx)
		}
		select {
		case <-exited:
			return fmt.Errorf("pgtest: postgres exited at start: %s", c.Log())
		case <-ctx.Done():
			c.signal(syscall.SIGQUIT)
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.signal(syscall.SIGQUIT)
			return fmt.Errorf("pgtest: postgres not ready after 60s: %v\n%s", err, c.Log())
		}
	}
}

// checkTCP makes sure that the cluster's TCP URL reaches this server, by
// its data directory, and not another one listening on the same port.
func (c *Cluster) checkTCP(ctx context.Context) error {
	db, err := sql.Open("pgx", c.URL("postgres")+"&connect_timeout=5")
	if err != nil {
		return err
	}
	defer db.Close()
	var dir string
	if err := db.QueryRowContext(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
		c.signal(syscall.SIGQUIT)
		return fmt.Errorf("pgtest: 127.0.0.1:%d: %w", c.port, err)
	}
	if want, _ := filepath.EvalSymlinks(c.data); dir != c.data && dir != want {
		c.signal(syscall.SIGQUIT)
		return fmt.Errorf("pgtest: 127.0.0.1:%d serves %s, not this cluster's %s", c.port, dir, c.data)
	}
	return nil
}

// Log returns the end of the server's log.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Port returns the server's TCP port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// URL returns the URL of database db, for the superuser.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", User, c.port, db)
}

// Pid returns the server's process id, 0 when it is not running.
func (c *Cluster) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// NewDatabase creates an empty database whose name starts with hint, and
// returns its URL. Its default collation is ICU's en-US where the server
// has ICU, as a database made on a typical server would sort text (case
// folded, punctuation ignored), not the cluster's bytewise C.
func (c *Cluster) NewDatabase(ctx context.Context, hint string) (string, error) {
	name := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(hint), "_"), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	name = fmt.Sprintf("t%d_%s", c.seq.Add(1), name)
	_, err := c.admin.ExecContext(ctx, `CREATE DATABASE "`+name+`" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`)
	if err != nil && os.Getenv(RequireEnv) == "1" {
		return "", fmt.Errorf("pgtest: create database %s with ICU's en-US collation, which %s=1 requires (tests of collation would prove nothing on C): %w", name, RequireEnv, err)
	}
	if err != nil {
		_, err = c.admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`)
	}
	if err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	if os.Getenv(RequireEnv) == "1" {
		var provider string
		if err := c.admin.QueryRowContext(ctx, `SELECT datlocprovider::text FROM pg_database WHERE datname = $1`, name).Scan(&provider); err != nil || provider != "i" {
			return "", fmt.Errorf("pgtest: database %s has locale provider %q (%v), want ICU (i), which %s=1 requires", name, provider, err, RequireEnv)
		}
	}
	return c.URL(name), nil
}

// Exec runs a statement as the superuser in the postgres database, for
// roles and other cluster-wide settings of a test.
func (c *Cluster) Exec(ctx context.Context, q string) error {
	_, err := c.admin.ExecContext(ctx, q)
	return err
}

func (c *Cluster) signal(sig syscall.Signal) (<-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil, errors.New("pgtest: server not running")
	}
	return c.exited, c.cmd.Process.Signal(sig)
}

// stop sends sig to the server's pid and waits for it to exit.
func (c *Cluster) stop(sig syscall.Signal) error {
	exited, err := c.signal(sig)
	if err != nil {
		return err
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		c.signal(syscall.SIGKILL)
		<-exited
	}
	c.mu.Lock()
	c.cmd = nil
	c.mu.Unlock()
	return nil
}

// Crash stops the server at once, as pg_ctl stop -m immediate does
// (SIGQUIT to its pid): open connections break, and the next start
// recovers from the write-ahead log.
func (c *Cluster) Crash() error { return c.stop(syscall.SIGQUIT) }

// Restart starts the stopped server again on the same port.
func (c *Cluster) Restart(ctx context.Context) error { return c.start(ctx) }

// Stop stops the server (a fast shutdown, SIGINT to its pid) and removes
// the cluster's directory.
func (c *Cluster) Stop() error {
	if c.admin != nil {
		c.admin.Close()
	}
	var err error
	if c.Pid() != 0 {
		err = c.stop(syscall.SIGINT)
	}
	if rerr := os.RemoveAll(c.dir); err == nil {
		err = rerr
	}
	return err
}

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Shared returns the test binary's cluster, started at its first use, or
// skips tb when PostgreSQL is not installed (fails it when $TOOLCAS_REQUIRE_SERVERS
// is 1). The test binary's TestMain calls StopShared after its tests.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.c, shared.err = Start(ctx)
	})
	if shared.err != nil {
		if errors.Is(shared.err, ErrNoServer) && os.Getenv(RequireEnv) != "1" {
			tb.Skipf("skipping PostgreSQL test: %v", shared.err)
		}
		tb.Fatalf("PostgreSQL test cluster: %v", shared.err)
	}
	return shared.c
}

// StopShared stops the cluster Shared started, if it did.
func StopShared() {
	if shared.c != nil {
		shared.c.Stop()
	}
}

// Database creates a fresh database in the shared cluster for tb and
// returns its URL.
func Database(tb testing.TB) string {
	tb.Helper()
	c := Shared(tb)
	u, err := c.NewDatabase(context.Background(), tb.Name())
	if err != nil {
		tb.Fatal(err)
	}
	return u
}
