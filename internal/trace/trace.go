// Package trace generates the tool calls of a scripted long-running coding
// agent, for the demo and the benchmarks: several runs of many steps calling
// read_file, grep, list_dir, run_tests, web_fetch and screenshot over the Go
// installation's own source tree, with the repetition real agents show. The
// same seed and tree give the same trace.
package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/toolcas/toolcas/hook"
)

// Tools lists every tool the agent calls.
var Tools = []string{"read_file", "grep", "list_dir", "run_tests", "web_fetch", "screenshot"}

// Config shapes a trace.
type Config struct {
	Seed  uint64
	Runs  int
	Steps int
	// Root is the source tree the agent works on; empty means the Go
	// installation's src directory.
	Root string
	// Tools restricts the tools called; empty means all of Tools.
	Tools []string
	// Zipf is the exponent of the popularity of files, directories and
	// patterns (default 1.1): higher means the same few come back more.
	Zipf float64
	// NoRepeat makes every result differ from every other, to show the cost
	// of the store when dedup cannot help.
	NoRepeat bool
	// MaxFiles caps the files considered (default 4000).
	MaxFiles int
	// RunPrefix starts the run names (default "run").
	RunPrefix string
}

// Call is one tool call and its result.
type Call struct {
	Run    string
	Step   int
	Result hook.Result
}

// Step is the block of tool results of one step.
type Step struct {
	Run     string
	Number  int
	Results []hook.Result
}

// Trace yields the steps of every run in order.
type Trace struct {
	cfg     Config
	root    string
	files   []string // relative to root, sorted then shuffled by seed
	dirs    []string
	pages   []string
	log     []string // the test log's lines
	pngs    [][]byte
	rng     *rand.Rand
	run     int
	step    int
	counter int
	tools   []string
}

// GoRoot returns the running toolchain's GOROOT.
func GoRoot() (string, error) {
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if r := strings.TrimSpace(string(out)); r != "" {
			return r, nil
		}
	}
	//lint:ignore SA1019 the fallback when the go command is not on PATH
	if r := runtime.GOROOT(); r != "" {
		return r, nil
	}
	return "", errors.New("trace: cannot find the Go installation (is the go command on PATH?)")
}

// New scans the source tree and returns the trace's first step ready.
func New(cfg Config) (*Trace, error) {
	if cfg.Runs <= 0 || cfg.Steps <= 0 {
		return nil, fmt.Errorf("trace: %d runs of %d steps: both must be positive", cfg.Runs, cfg.Steps)
	}
	if cfg.Zipf == 0 {
		cfg.Zipf = 1.1
	}
	if cfg.Zipf <= 1 {
		return nil, fmt.Errorf("trace: Zipf exponent %v must be over 1", cfg.Zipf)
	}
	if cfg.MaxFiles == 0 {
		cfg.MaxFiles = 4000
	}
	if cfg.RunPrefix == "" {
		cfg.RunPrefix = "run"
	}
	tools := cfg.Tools
	if len(tools) == 0 {
		tools = Tools
	}
	for _, t := range tools {
		if !contains(Tools, t) {
			return nil, fmt.Errorf("trace: unknown tool %q (known: %s)", t, strings.Join(Tools, ", "))
		}
	}
	root := cfg.Root
	if root == "" {
		gr, err := GoRoot()
		if err != nil {
			return nil, err
		}
		root = filepath.Join(gr, "src")
	}
	t := &Trace{cfg: cfg, root: root, rng: rand.New(rand.NewPCG(cfg.Seed, 0x70c1ca5)), tools: tools}
	if err := t.scan(); err != nil {
		return nil, err
	}
	t.log = testLog(t.rng)
	for i := range 3 {
		t.pngs = append(t.pngs, screenshot(i, -1))
	}
	return t, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// scan lists the tree's Go files and directories, sorted, then shuffled by
// the seed so that popularity does not follow the alphabet.
func (t *Trace) scan() error {
	dirSet := map[string]bool{}
	err := filepath.WalkDir(t.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			rel, _ := filepath.Rel(t.root, path)
			t.files = append(t.files, rel)
			dirSet[filepath.Dir(rel)] = true
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("trace: scan %s: %w", t.root, err)
	}
	if len(t.files) == 0 {
		return fmt.Errorf("trace: no Go files under %s", t.root)
	}
	sort.Strings(t.files)
	t.rng.Shuffle(len(t.files), func(i, j int) { t.files[i], t.files[j] = t.files[j], t.files[i] })
	if len(t.files) > t.cfg.MaxFiles {
		t.files = t.files[:t.cfg.MaxFiles]
	}
	for d := range dirSet {
		t.dirs = append(t.dirs, d)
	}
	sort.Strings(t.dirs)
	t.rng.Shuffle(len(t.dirs), func(i, j int) { t.dirs[i], t.dirs[j] = t.dirs[j], t.dirs[i] })
	t.pages = append([]string(nil), t.dirs...)
	return nil
}

// Root returns the source tree the trace reads.
func (t *Trace) Root() string { return t.root }

// Files returns how many files the agent may read.
func (t *Trace) Files() int { return len(t.files) }

// zipf picks an index in [0, n) with probability falling as 1/(i+1)^s.
func (t *Trace) zipf(n int) int {
	if t.cfg.NoRepeat {
		t.counter++
		return t.counter % n
	}
	// Inverse transform on the continuous approximation.
	s := t.cfg.Zipf
	u := t.rng.Float64()
	hn := (math.Pow(float64(n)+1, 1-s) - 1) / (1 - s)
	x := math.Pow(u*hn*(1-s)+1, 1/(1-s)) - 1
	i := int(x)
	if i < 0 {
		i = 0
	}
	if i >= n {
		i = n - 1
	}
	return i
}

// Next returns the next step, and false when every run is done.
func (t *Trace) Next() (Step, bool, error) {
	if t.run >= t.cfg.Runs {
		return Step{}, false, nil
	}
	st := Step{Run: fmt.Sprintf("%s-%d", t.cfg.RunPrefix, t.run+1), Number: t.step}
	calls := 1 + t.rng.IntN(3)
	for i := range calls {
		tool := t.tools[t.rng.IntN(len(t.tools))]
		r, err := t.call(tool)
		if err != nil {
			return Step{}, false, err
		}
		r.CallID = fmt.Sprintf("call-%d-%d-%d", t.run+1, t.step, i)
		st.Results = append(st.Results, r)
	}
	t.step++
	if t.step == t.cfg.Steps {
		t.step = 0
		t.run++
	}
	return st, true, nil
}

func (t *Trace) call(tool string) (hook.Result, error) {
	r := hook.Result{Tool: tool}
	switch tool {
	case "read_file":
		rel := t.files[t.zipf(len(t.files))]
		b, err := os.ReadFile(filepath.Join(t.root, rel))
		if err != nil {
			return r, fmt.Errorf("trace: read_file: %w", err)
		}
		r.Arguments = args("path", rel)
		r.Parts = []hook.Part{hook.Text(string(b))}
	case "grep":
		pattern := grepPatterns[t.zipf(len(grepPatterns))]
		dir := t.dirs[t.zipf(len(t.dirs))]
		out, err := t.grep(pattern, dir)
		if err != nil {
			return r, err
		}
		r.Arguments = args("pattern", pattern, "path", dir)
		r.Parts = []hook.Part{hook.Text(out)}
	case "list_dir":
		dir := t.dirs[t.zipf(len(t.dirs))]
		out, err := t.listDir(dir)
		if err != nil {
			return r, err
		}
		r.Arguments = args("path", dir)
		r.Parts = []hook.Part{hook.Text(out)}
	case "run_tests":
		r.Arguments = args("pkg", "./...")
		r.Parts = []hook.Part{hook.Text(t.testRun())}
	case "web_fetch":
		dir := t.pages[t.zipf(len(t.pages))]
		page, err := t.page(dir)
		if err != nil {
			return r, err
		}
		r.Arguments = args("url", "https://pkg.go.dev/"+filepath.ToSlash(dir))
		r.Parts = []hook.Part{hook.Text(page)}
	case "screenshot":
		var img []byte
		switch {
		case t.cfg.NoRepeat:
			t.counter++
			img = screenshot(0, t.counter)
		case t.rng.IntN(10) < 8:
			img = t.pngs[0]
		default:
			img = t.pngs[1+t.rng.IntN(2)]
		}
		r.Arguments = args("window", "editor")
		r.Parts = []hook.Part{hook.Image("image/png", img)}
	}
	return r, nil
}

func args(kv ...string) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %q", kv[i], kv[i+1])
	}
	b.WriteByte('}')
	return []byte(b.String())
}

var grepPatterns = []string{
	"func New", "TODO", "errors.New", "sync.Mutex", "context.Context", "panic(", "return nil, err",
	"unsafe.Pointer", "go:linkname", "func (", "defer ", "Deprecated:", "fmt.Errorf", "atomic.",
}

// grep returns the lines of the directory's Go files containing pattern, as
// path:line:text, at most 300 of them.
func (t *Trace) grep(pattern, dir string) (string, error) {
	entries, err := os.ReadDir(filepath.Join(t.root, dir))
	if err != nil {
		return "", fmt.Errorf("trace: grep: %w", err)
	}
	var b strings.Builder
	n := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := os.Open(filepath.Join(t.root, dir, e.Name()))
		if err != nil {
			return "", fmt.Errorf("trace: grep: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for line := 1; sc.Scan() && n < 300; line++ {
			if strings.Contains(sc.Text(), pattern) {
				fmt.Fprintf(&b, "%s:%d:%s\n", filepath.ToSlash(filepath.Join(dir, e.Name())), line, sc.Text())
				n++
			}
		}
		f.Close()
	}
	if n == 0 {
		return "", nil
	}
	if t.cfg.NoRepeat {
		t.counter++
		fmt.Fprintf(&b, "(search %d)\n", t.counter)
	}
	return b.String(), nil
}

func (t *Trace) listDir(dir string) (string, error) {
	entries, err := os.ReadDir(filepath.Join(t.root, dir))
	if err != nil {
		return "", fmt.Errorf("trace: list_dir: %w", err)
	}
	var b strings.Builder
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		kind := "file"
		if e.IsDir() {
			kind = "dir"
		}
		fmt.Fprintf(&b, "%-40s %-4s %8d\n", e.Name(), kind, info.Size())
	}
	if t.cfg.NoRepeat {
		t.counter++
		fmt.Fprintf(&b, "(listing %d)\n", t.counter)
	}
	return b.String(), nil
}

// page returns a documentation page for a package: its Go files in an HTML
// frame, as a fetched pkg.go.dev page is large and mostly the same each time.
func (t *Trace) page(dir string) (string, error) {
	entries, err := os.ReadDir(filepath.Join(t.root, dir))
	if err != nil {
		return "", fmt.Errorf("trace: web_fetch: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><title>%s - Go Packages</title></head><body>\n<main>\n", dir)
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || b.Len() > 256<<10 {
			continue
		}
		src, err := os.ReadFile(filepath.Join(t.root, dir, e.Name()))
		if err != nil {
			return "", fmt.Errorf("trace: web_fetch: %w", err)
		}
		fmt.Fprintf(&b, "<section id=%q><pre>\n", e.Name())
		b.Write(bytes.ReplaceAll(bytes.ReplaceAll(src, []byte("&"), []byte("&amp;")), []byte("<"), []byte("&lt;")))
		b.WriteString("</pre></section>\n")
	}
	b.WriteString("</main></body></html>\n")
	if t.cfg.NoRepeat {
		t.counter++
		fmt.Fprintf(&b, "<!-- fetch %d -->\n", t.counter)
	}
	return b.String(), nil
}

// testLog is the output of a long test run over many packages.
func testLog(rng *rand.Rand) []string {
	var lines []string
	for p := range 60 {
		pkg := fmt.Sprintf("example.com/agent/internal/pkg%02d", p)
		for tc := range 12 {
			name := fmt.Sprintf("Test%s%02d", []string{"Parse", "Render", "Store", "Fetch", "Index", "Merge"}[tc%6], tc)
			lines = append(lines, "=== RUN   "+name, fmt.Sprintf("--- PASS: %s (0.%02ds)", name, rng.IntN(90)))
		}
		lines = append(lines, "PASS", fmt.Sprintf("ok  \t%s\t0.%03ds", pkg, 100+rng.IntN(800)))
	}
	return lines
}

// testRun returns the test log: the same most of the time; one run in five
// a test fails, changing one line.
func (t *Trace) testRun() string {
	lines := t.log
	if t.cfg.NoRepeat || t.rng.IntN(5) == 0 {
		lines = append([]string(nil), t.log...)
		i := 1 + 2*t.rng.IntN(len(lines)/2-1)
		if strings.HasPrefix(lines[i], "--- PASS") {
			lines[i] = strings.Replace(lines[i], "--- PASS", "--- FAIL", 1)
		}
		if t.cfg.NoRepeat {
			t.counter++
			lines[i] += fmt.Sprintf(" [attempt %d]", t.counter)
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// screenshot draws an editor window: variant picks the theme; a
// non-negative unique puts a mark in it that no other screenshot has.
func screenshot(variant, unique int) []byte {
	const w, h = 480, 300
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	bg := []color.RGBA{{30, 30, 36, 255}, {250, 250, 250, 255}, {0, 43, 54, 255}}[variant%3]
	fg := []color.RGBA{{200, 200, 190, 255}, {40, 40, 40, 255}, {131, 148, 150, 255}}[variant%3]
	for y := range h {
		for x := range w {
			img.Set(x, y, bg)
		}
	}
	// Lines of "code": antialiased glyph-like pixels, the shades drawn from
	// a generator seeded by the variant, so that the PNG weighs what a
	// screenshot does.
	shade := rand.New(rand.NewPCG(uint64(variant), 42))
	for line := 0; line*12+16 < h; line++ {
		indent := 8 + 16*(line%4)
		length := 40 + (line*37)%400
		for y := line*12 + 6; y < line*12+16; y++ {
			for x := indent; x < indent+length && x < w; x++ {
				if (x/7+line)%6 == 0 {
					continue
				}
				a := shade.Uint32N(256)
				mix := func(f, b uint8) uint8 { return uint8((uint32(f)*a + uint32(b)*(255-a)) / 255) }
				img.Set(x, y, color.RGBA{mix(fg.R, bg.R), mix(fg.G, bg.G), mix(fg.B, bg.B), 255})
			}
		}
	}
	if unique >= 0 {
		for bit := range 32 {
			if unique>>bit&1 == 1 {
				img.Set(w-1-bit, h-1, color.RGBA{255, 0, 0, 255})
			}
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	return buf.Bytes()
}
