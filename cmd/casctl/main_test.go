package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/internal/pgtest"
	"github.com/toolcas/toolcas/internal/procstat"
	"github.com/toolcas/toolcas/store"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"casctl": func() {
			// CASCTL_TEST_TERMINAL=stdin,stdout plays a person at a
			// terminal on those streams (TestTerminal uses a real one).
			if v := os.Getenv("CASCTL_TEST_TERMINAL"); v != "" {
				fake := map[any]bool{}
				for _, name := range strings.Split(v, ",") {
					fake[map[string]any{"stdin": os.Stdin, "stdout": os.Stdout}[name]] = true
				}
				isTerminal = func(f any) bool { return fake[f] }
			}
			// As main does: Ctrl-C cancels the command's context.
			ctx, stop := interruptContext()
			code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
			stop()
			if f := os.Getenv("CASCTL_TEST_PEAK_RSS"); f != "" {
				os.WriteFile(f, []byte(strconv.FormatInt(procstat.PeakRSSKiB(), 10)), 0o644)
			}
			os.Exit(code)
		},
	})
}

// TestScripts drives the built casctl as scripts do: testdata/script/*.txtar.
func TestScripts(t *testing.T) {
	pg := &scriptCluster{}
	t.Cleanup(pg.stop)
	s3 := &scriptS3{t: t}
	testscript.Run(t, testscript.Params{
		Dir:       filepath.Join("testdata", "script"),
		Condition: scriptCondition,
		Setup: func(env *testscript.Env) error {
			env.Setenv("CASCTL_STORE", "")
			// The demo finds the Go installation through the go command.
			if goroot, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
				env.Setenv("PATH", filepath.Join(strings.TrimSpace(string(goroot)), "bin")+string(os.PathListSeparator)+env.Getenv("PATH"))
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode":  cmdExitCode,
			"jsonkeys":  cmdJSONKeys,
			"jsonget":   cmdJSONGet,
			"flipbyte":  cmdFlipByte,
			"truncate":  cmdTruncate,
			"collide":   cmdCollide,
			"sharekeys": cmdShareKeys,
			"mkpng":     cmdMkPNG,
			"suggested": cmdSuggested,
			"pgdb":      pg.cmdPGDB,
			"s3store":   s3.cmdS3Store,
			"jsonset":   cmdJSONSet,
			"s3object":  cmdS3Object,
		},
	})
}

// exitcode N command args...: run a command and check its exit code.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N command args...")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("%v", err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// jsonValue reads FILE and walks PATH (".a.b[2].c", "." for the whole).
func jsonValue(ts *testscript.TestScript, file, path string) (any, error) {
	var v any
	if err := json.Unmarshal([]byte(ts.ReadFile(file)), &v); err != nil {
		ts.Fatalf("%s is not JSON: %v", file, err)
	}
	for _, step := range strings.FieldsFunc(path, func(r rune) bool { return r == '.' }) {
		name, idx, hasIdx := strings.Cut(step, "[")
		if name != "" {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: %s is not an object", path, name)
			}
			if v, ok = m[name]; !ok {
				return nil, fmt.Errorf("%s: no field %q", path, name)
			}
		}
		if hasIdx {
			i, err := strconv.Atoi(strings.TrimSuffix(idx, "]"))
			ts.Check(err)
			a, ok := v.([]any)
			if !ok || i >= len(a) {
				return nil, fmt.Errorf("%s: no element %d", path, i)
			}
			v = a[i]
		}
	}
	return v, nil
}

// jsonkeys FILE PATH key...: the object at PATH has exactly these keys.
func cmdJSONKeys(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: jsonkeys FILE PATH key...")
	}
	v, err := jsonValue(ts, args[0], args[1])
	ts.Check(err)
	m, ok := v.(map[string]any)
	if !ok {
		ts.Fatalf("%s is not an object", args[1])
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	want := append([]string(nil), args[2:]...)
	sort.Strings(got)
	sort.Strings(want)
	same := strings.Join(got, " ") == strings.Join(want, " ")
	if same == neg {
		ts.Fatalf("keys at %s = %v, want %v", args[1], got, want)
	}
}

// jsonget FILE PATH [VAR]: print the value at PATH, and set VAR to it;
// negated, check that PATH is not there.
func cmdJSONGet(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: jsonget FILE PATH [VAR]")
	}
	v, err := jsonValue(ts, args[0], args[1])
	if neg {
		if err == nil {
			ts.Fatalf("%s is there: %v", args[1], v)
		}
		return
	}
	ts.Check(err)
	s := fmt.Sprint(v)
	if b, err := json.Marshal(v); err == nil {
		if _, isString := v.(string); !isString {
			s = string(b)
		}
	}
	fmt.Fprintln(ts.Stdout(), s)
	if len(args) == 3 {
		ts.Setenv(args[2], s)
	}
}

// flipbyte FILE OFFSET: corrupt a file in place.
func cmdFlipByte(ts *testscript.TestScript, neg bool, args []string) {
	path := ts.MkAbs(args[0])
	off, err := strconv.Atoi(args[1])
	ts.Check(err)
	b, err := os.ReadFile(path)
	ts.Check(err)
	b[off] ^= 0x01
	os.Chmod(path, 0o644)
	ts.Check(os.WriteFile(path, b, 0o444))
}

// truncate FILE N: cut a file to N bytes.
func cmdTruncate(ts *testscript.TestScript, neg bool, args []string) {
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	path := ts.MkAbs(args[0])
	os.Chmod(path, 0o644)
	ts.Check(os.Truncate(path, int64(n)))
}

// collide DIR [VAR]: record, in the store at DIR, two parts whose digests share
// their first 12 hex digits, which no real content does, to test ambiguous
// prefixes. The shared prefix is printed, and set in VAR.
func cmdCollide(ts *testscript.TestScript, neg bool, args []string) {
	ctx := context.Background()
	s, err := store.Open(ctx, ts.MkAbs(args[0]), store.WithCreate())
	ts.Check(err)
	ts.Check(s.Close())
	// Rows no write makes: the index itself, under the store.
	ix, err := index.Open(ctx, filepath.Join(ts.MkAbs(args[0]), store.IndexFile))
	ts.Check(err)
	defer ix.Close()
	d1 := cas.Sum([]byte("collide"))
	d2 := d1
	d2[31] ^= 0xff
	var ps []index.NewPart
	for i, d := range []cas.Digest{d1, d2} {
		ps = append(ps, index.NewPart{Key: fmt.Sprintf("c/%d_t_x.txt", i), Run: "c", Step: i, Tool: "t", CallID: "x", Part: -1,
			Kind: catalog.KindText, Bytes: 1, Chars: 1, Blob: cas.Blob{Digest: d, Ext: ".txt"}})
	}
	_, err = ix.Record(ctx, ps)
	ts.Check(err)
	fmt.Fprintln(ts.Stdout(), d1.Hex()[:12])
	if len(args) > 1 {
		ts.Setenv(args[1], d1.Hex()[:12])
	}
}

// sharekeys DIR RUN N FILE: store FILE's content under N keys of RUN, step
// 0 to N-1, in the store at DIR; prints the blob's path.
func cmdShareKeys(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 4 {
		ts.Fatalf("usage: sharekeys DIR RUN N FILE")
	}
	ctx := context.Background()
	s, err := store.Open(ctx, ts.MkAbs(args[0]))
	ts.Check(err)
	defer s.Close()
	n, err := strconv.Atoi(args[2])
	ts.Check(err)
	text := ts.ReadFile(args[3])
	items := make([]hook.Item, n)
	for i := range items {
		items[i] = hook.Item{Key: hook.Key{Run: args[1], Step: i, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"}, Part: hook.Text(text)}
	}
	st, err := s.Write(ctx, items)
	ts.Check(err)
	fmt.Fprintln(ts.Stdout(), st[0].Path)
}

// mkpng FILE: write a small real PNG image.
func cmdMkPNG(ts *testscript.TestScript, neg bool, args []string) {
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	f, err := os.Create(ts.MkAbs(args[0]))
	ts.Check(err)
	ts.Check(png.Encode(f, img))
	ts.Check(f.Close())
}

// suggested FILE: run every casctl command that FILE (a demo's output)
// suggests after "Explore further", and fail if any fails.
func cmdSuggested(ts *testscript.TestScript, neg bool, args []string) {
	_, after, ok := strings.Cut(ts.ReadFile(args[0]), "Explore further")
	if !ok {
		ts.Fatalf("%s suggests nothing", args[0])
	}
	n := 0
	for _, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "  casctl ") {
			continue
		}
		for _, c := range strings.Split(strings.TrimSpace(line), " && ") {
			f := strings.Fields(c)
			fmt.Fprintf(ts.Stdout(), "$ %s\n", c)
			if err := ts.Exec(f[0], f[1:]...); err != nil {
				ts.Fatalf("suggested %q: %v", c, err)
			}
			n++
		}
	}
	if n < 5 {
		ts.Fatalf("only %d suggestions", n)
	}
}

// scriptCondition answers the scripts' own conditions: [postgres] holds
// when PostgreSQL's server binaries are installed, or when
// $TOOLCAS_REQUIRE_SERVERS is 1, so that a missing server then fails the
// script rather than skipping it.
func scriptCondition(cond string) (bool, error) {
	if cond == "s3" {
		return s3Available(), nil
	}
	if cond != "postgres" {
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	_, err := pgtest.FindBin()
	return err == nil || os.Getenv(pgtest.RequireEnv) == "1", nil
}

// scriptCluster is the PostgreSQL cluster the scripts' databases are made
// in, started by the first pgdb and stopped when TestScripts ends.
type scriptCluster struct {
	once sync.Once
	c    *pgtest.Cluster
	err  error
}

func (p *scriptCluster) stop() {
	if p.c != nil {
		p.c.Stop()
	}
}

// pgdb VAR: create a new PostgreSQL database and set VAR to its URL.
func (p *scriptCluster) cmdPGDB(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: pgdb VAR")
	}
	p.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		p.c, p.err = pgtest.Start(ctx)
	})
	if p.err != nil {
		ts.Fatalf("PostgreSQL test cluster: %v", p.err)
	}
	url, err := p.c.NewDatabase(context.Background(), "script")
	ts.Check(err)
	ts.Setenv(args[0], url)
}
