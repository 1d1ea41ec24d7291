package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/trace"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
	"github.com/toolcas/toolcas/tokens"
)

// contextRun is what -context measures: each run of a trace replayed as
// a conversation under each configuration, counting what every model
// call sends.
type contextRun struct {
	trace      string
	tokens     int // OverTokens threshold
	stepBudget int
	windows    []int // the trigger's, one configuration of each compactor per window
	compactAt  float64
	compactTo  float64
	dir        string
	out        string
	json       bool
	command    string
}

// contextConfig is one configuration's totals over the trace.
type contextConfig struct {
	Name string `json:"configuration"`
	// TokensSent sums, over every model call of every run, the tokens of
	// the conversation sent: what users pay for input.
	TokensSent int64 `json:"tokens_sent"`
	// MaxContext is the largest conversation sent in one call.
	MaxContext int `json:"max_context"`
	// Offloaded counts the results that are pointers in the runs' final
	// conversations: what the agent can read back.
	Offloaded int `json:"offloaded"`
	// ReadBack counts the offloaded parts read back and compared with the
	// original, byte for byte; Lost those that differed or failed.
	ReadBack int `json:"read_back"`
	Lost     int `json:"lost"`
	// Compactions counts the conversations a trigger compacted, and
	// Window is that trigger's (0 without one).
	Compactions int `json:"compactions"`
	Window      int `json:"window,omitempty"`
	// PerCall is the mean conversation sent at the n-th call of a run,
	// over the runs that have an n-th call.
	PerCall []float64 `json:"per_call"`
}

// contextReport is what -context writes.
type contextReport struct {
	Command string          `json:"command"`
	Date    time.Time       `json:"date"`
	Trace   string          `json:"trace"`
	Runs    int             `json:"runs"`
	Calls   int             `json:"calls"`
	Counter string          `json:"counter"`
	Setup   string          `json:"setup"`
	Configs []contextConfig `json:"configurations"`
	Targets []target        `json:"targets"`
}

// memoCounter counts a conversation message by message with an exact
// counter, each message once whatever the number of calls that send it:
// a call's tokens are the sum of its messages', each rendered alone.
type memoCounter struct {
	c    compact.Counter
	seen map[string]int
}

func (m *memoCounter) Count(msgs []compact.Message) int {
	n := 0
	for _, msg := range msgs {
		key := compact.Render([]compact.Message{msg})
		v, ok := m.seen[key]
		if !ok {
			v = m.c.Count([]compact.Message{msg})
			m.seen[key] = v
		}
		n += v
	}
	return n
}

func runContext(ctx context.Context, cr contextRun, stdout, stderr io.Writer) error {
	rt, err := loadRealTrace(cr.trace)
	if err != nil {
		return usageError{err}
	}
	exact, err := compact.NewCounter(tokens.O200kBase)
	if err != nil {
		return err
	}
	o200k := exact.Text
	counter := &memoCounter{c: exact, seen: map[string]int{}}
	runs := groupRuns(rt.steps)
	rep := contextReport{Command: cr.command, Date: time.Now().UTC().Truncate(time.Second), Trace: filepath.Base(cr.trace),
		Runs: len(runs), Counter: tokens.O200kBase,
		Setup: fmt.Sprintf("OverTokens(%d) and a step budget of %d tokens; a trigger on a window of %s tokens at %.2g, to %.2g; the offloading compactor leaves short pointers (size and key) for results over 50 tokens, and shortens the hook's pointers of steps the model has read to the same form; the pruning compactor Haystack's defaults",
			cr.tokens, cr.stepBudget, joinInts(cr.windows, " or "), cr.compactAt, cr.compactTo)}
	for _, r := range runs {
		rep.Calls += len(r) + 1
	}
	type config struct {
		name    string
		policy  *policy.Strategies // nil: nothing offloaded by the hook
		budget  bool
		short   bool // the hook leaves short pointers
		trigger func(s *store.Store, run string) (compact.Compactor, error)
		window  int // the trigger's
	}
	// The compactor offloads results the model has read already: short
	// pointers (size and key) stand for them, and a result of more than
	// 50 tokens is worth one. It shortens the hook's pointers of those
	// results to the same form.
	offloading := func(s *store.Store, run string) (compact.Compactor, error) {
		return compact.NewOffloading(s, run, compact.Options{MinTokens: 50}, hook.WithShortPointers())
	}
	pruning := func(*store.Store, string) (compact.Compactor, error) {
		return compact.NewToolResultPruning(compact.Options{}, "")
	}
	tokenPolicy := policy.MustStrategies(policy.Default(policy.OverTokens{Max: cr.tokens, Counter: o200k}))
	configs := []config{
		{name: "nothing offloaded"},
		{name: "Haystack's default (over 8,000 characters)", policy: policy.MustStrategies(policy.Default(policy.OverChars(8000)))},
		{name: fmt.Sprintf("toolcas: over %d tokens, step budget %d", cr.tokens, cr.stepBudget), policy: tokenPolicy, budget: true},
	}
	for _, w := range cr.windows {
		configs = append(configs, config{name: fmt.Sprintf("toolcas + trigger (window %d), offloading compactor", w), policy: tokenPolicy, budget: true, trigger: offloading, window: w})
	}
	for _, w := range cr.windows {
		configs = append(configs, config{name: fmt.Sprintf("trigger (window %d), pruning compactor", w), trigger: pruning, window: w})
	}
	// What offloading can do at best: the model sees no result, only a
	// short pointer to each, from the call after it on.
	configs = append(configs, config{name: "floor: every result offloaded at once, short pointers", policy: policy.MustStrategies(policy.Default(policy.Always)), short: true})
	for i, c := range configs {
		fmt.Fprintf(stderr, "context: %s…\n", c.name)
		s, err := store.Open(ctx, filepath.Join(cr.dir, fmt.Sprintf("context-%d", i)), store.WithCreate(), store.WithDurability(cas.SyncNone))
		if err != nil {
			return err
		}
		var opts []hook.Option
		if c.budget {
			opts = append(opts, hook.WithStepBudget(cr.stepBudget, o200k))
		}
		if c.short {
			opts = append(opts, hook.WithShortPointers())
		}
		var h *hook.Hook
		if c.policy != nil {
			if h, err = hook.New(s, c.policy, opts...); err != nil {
				s.Close()
				return err
			}
		}
		res := contextConfig{Name: c.name, Window: c.window}
		var perCall [][2]float64 // sum, runs
		for _, steps := range runs {
			var tr *compact.Trigger
			if c.trigger != nil {
				comp, err := c.trigger(s, steps[0].Run)
				if err != nil {
					s.Close()
					return err
				}
				if tr, err = compact.NewTrigger(comp, c.window, compact.CompactAt(cr.compactAt), compact.CompactTo(cr.compactTo), compact.WithCounter(counter)); err != nil {
					s.Close()
					return usageError{err}
				}
			}
			if err := replayConversation(ctx, s, h, tr, counter, steps, &res, &perCall); err != nil {
				s.Close()
				return fmt.Errorf("%s, run %s: %w", c.name, steps[0].Run, err)
			}
		}
		for _, pc := range perCall {
			res.PerCall = append(res.PerCall, pc[0]/pc[1])
		}
		if err := s.Close(); err != nil {
			return err
		}
		rep.Configs = append(rep.Configs, res)
		fmt.Fprintf(stderr, "  %d tokens sent, largest context %d, %d offloaded, %d parts read back, %d lost\n",
			res.TokensSent, res.MaxContext, res.Offloaded, res.ReadBack, res.Lost)
	}
	rep.Targets = contextTargets(rep)
	if cr.out != "" {
		if err := writeSection(cr.out, "context.json", rep, "CONTEXT.md", contextMarkdown(rep)); err != nil {
			return err
		}
		if err := contextChart(filepath.Join(cr.out, "context.png"), rep); err != nil {
			return err
		}
	}
	if cr.json {
		type row struct {
			Configuration string `json:"configuration"`
			TokensSent    int64  `json:"tokens_sent"`
			MaxContext    int    `json:"max_context"`
			Offloaded     int    `json:"offloaded"`
		}
		rows := make([]row, len(rep.Configs))
		for i, c := range rep.Configs {
			rows[i] = row{c.Name, c.TokensSent, c.MaxContext, c.Offloaded}
		}
		e := json.NewEncoder(stdout)
		e.SetIndent("", "  ")
		return e.Encode(rows)
	}
	for _, c := range rep.Configs {
		fmt.Fprintf(stdout, "%-48s %14d tokens sent  largest %6d  offloaded %5d\n", c.Name, c.TokensSent, c.MaxContext, c.Offloaded)
	}
	for _, t := range rep.Targets {
		fmt.Fprintf(stdout, "%-58s %-28s %s %s\n", t.What, t.Target, t.Measured, map[bool]string{true: "met", false: "NOT MET"}[t.Met])
	}
	return nil
}

// groupRuns returns the steps of each run, runs in the order they first
// appear.
func groupRuns(steps []trace.Step) [][]trace.Step {
	var out [][]trace.Step
	at := map[string]int{}
	for _, st := range steps {
		i, ok := at[st.Run]
		if !ok {
			i = len(out)
			at[st.Run] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], st)
	}
	return out
}

// replayConversation plays one run as a conversation: before each step a
// model call sends everything so far (the trigger, when there is one,
// compacting it first), then the step's call and results are appended,
// the hook offloading what its policy picks; a last call follows the last
// step. It adds to res what the calls sent, and reads every offloaded part
// back at the end.
func replayConversation(ctx context.Context, s *store.Store, h *hook.Hook, tr *compact.Trigger, counter compact.TokenCounter,
	steps []trace.Step, res *contextConfig, perCall *[][2]float64) error {
	run := steps[0].Run
	msgs := []compact.Message{
		{Role: compact.RoleSystem, Text: "You are a software engineering agent. Run commands to solve the task."},
		{Role: compact.RoleUser, Text: "Solve the task of " + run + "."},
	}
	originals := map[string][]hook.Part{}
	call := func(n int) error {
		if tr != nil {
			out, _, changed, err := tr.Before(ctx, msgs, 0)
			if err != nil {
				return err
			}
			if changed {
				msgs = out
				res.Compactions++
			}
		}
		sent := counter.Count(msgs)
		res.TokensSent += int64(sent)
		res.MaxContext = max(res.MaxContext, sent)
		for len(*perCall) <= n {
			*perCall = append(*perCall, [2]float64{})
		}
		(*perCall)[n][0] += float64(sent)
		(*perCall)[n][1]++
		return nil
	}
	for n, st := range steps {
		if err := call(n); err != nil {
			return err
		}
		results := st.Results
		a := compact.Message{Role: compact.RoleAssistant, Step: st.Number}
		for _, r := range results {
			a.ToolCalls = append(a.ToolCalls, compact.ToolCall{Tool: r.Tool, ID: r.CallID})
		}
		msgs = append(msgs, a)
		out := results
		if h != nil {
			var err error
			if out, err = h.Offload(ctx, hook.Step{Run: run, Number: st.Number}, results); err != nil {
				return err
			}
		}
		for i := range out {
			r := out[i]
			originals[fmt.Sprint(st.Number, "/", r.CallID)] = results[i].Parts
			msgs = append(msgs, compact.Message{Role: compact.RoleTool, Result: &r, Step: st.Number})
		}
	}
	if err := call(len(steps)); err != nil {
		return err
	}
	for _, m := range msgs {
		if !m.IsToolResult() || !hook.IsPointer(*m.Result) {
			continue
		}
		res.Offloaded++
		orig := originals[fmt.Sprint(m.Step, "/", m.Result.CallID)]
		refs := hook.References(*m.Result)
		if len(refs) != len(orig) {
			res.Lost += max(len(orig), 1)
			continue
		}
		for k, ref := range refs {
			c, err := s.Read(ctx, run, ref.Key)
			res.ReadBack++
			if err != nil || !bytes.Equal(c.Data, []byte(orig[k].Text)) {
				res.Lost++
			}
		}
	}
	return nil
}

// contextTargets are the goals, for the offloading compactor at each
// window.
func contextTargets(rep contextReport) []target {
	var nothing, haystack *contextConfig
	var trig []*contextConfig
	for i := range rep.Configs {
		switch c := &rep.Configs[i]; {
		case strings.HasPrefix(c.Name, "nothing"):
			nothing = c
		case strings.HasPrefix(c.Name, "Haystack"):
			haystack = c
		case strings.HasSuffix(c.Name, "offloading compactor"):
			trig = append(trig, c)
		}
	}
	if nothing == nil || haystack == nil || trig == nil {
		return nil
	}
	var out []target
	for _, c := range trig {
		w := fmt.Sprintf("trigger (window %d)", c.Window)
		r1 := float64(c.TokensSent) / float64(nothing.TokensSent)
		r2 := float64(c.TokensSent) / float64(haystack.TokensSent)
		out = append(out,
			target{What: fmt.Sprintf("tokens sent, %s + offloading vs nothing offloaded", w), Target: "≤ 0.3 ×", Measured: fmt.Sprintf("%.3f ×", r1), Value: r1, Met: r1 <= 0.3},
			target{What: fmt.Sprintf("tokens sent, %s + offloading vs Haystack's default", w), Target: "≤ 0.6 ×", Measured: fmt.Sprintf("%.3f ×", r2), Value: r2, Met: r2 <= 0.6})
	}
	lost := 0
	read := 0
	for _, c := range rep.Configs {
		lost += c.Lost
		read += c.ReadBack
	}
	return append(out, target{What: "offloaded parts read back byte for byte", Target: "all", Measured: fmt.Sprintf("%d of %d", read-lost, read), Value: float64(lost), Met: lost == 0 && read > 0})
}

// joinInts writes ns as "4096, 8192 or 16384".
func joinInts(ns []int, last string) string {
	var b strings.Builder
	for i, n := range ns {
		switch {
		case i == 0:
		case i == len(ns)-1:
			b.WriteString(last)
		default:
			b.WriteString(", ")
		}
		fmt.Fprint(&b, n)
	}
	return b.String()
}

func contextMarkdown(rep contextReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Context: the tokens a conversation sends\n\n`%s`, %s.\n\n", rep.Command, rep.Date.Format("2006-01-02"))
	fmt.Fprintf(&b, "Each of the %d runs of `%s` replayed as a conversation: a system prompt and a task, then, for each step, "+
		"a model call that sends everything so far, an assistant message calling the step's tools, and their results; a last "+
		"call after the last step (%d calls in all). Tokens are counted with %s, each message once as rendered alone (Haystack's "+
		"rendering); a call's tokens are the sum of its messages'. Setup: %s. Every offloaded part is read back from the store "+
		"at the end of its run and compared with the original.\n\n", rep.Runs, rep.Trace, rep.Calls, rep.Counter, rep.Setup)
	fmt.Fprintln(&b, "| configuration | tokens sent | × nothing | largest context | offloaded at the end | compactions | parts read back | lost |")
	fmt.Fprintln(&b, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	base := float64(rep.Configs[0].TokensSent)
	for _, c := range rep.Configs {
		fmt.Fprintf(&b, "| %s | %d | %.3f | %d | %d | %d | %d | %d |\n", c.Name, c.TokensSent, float64(c.TokensSent)/base, c.MaxContext, c.Offloaded, c.Compactions, c.ReadBack, c.Lost)
	}
	if len(rep.Targets) > 0 {
		fmt.Fprintln(&b, "\n| goal | target | measured | met |\n| --- | --- | --- | --- |")
		for _, t := range rep.Targets {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.What, t.Target, t.Measured, map[bool]string{true: "yes", false: "**no**"}[t.Met])
		}
	}
	b.WriteString("\n![Mean tokens sent at each call](context.png)\n")
	return b.String()
}

// contextChart draws, per configuration, the mean tokens sent at each call.
func contextChart(path string, rep contextReport) error {
	p := plot.New()
	p.Title.Text = "Tokens sent at each model call (mean over the runs)"
	p.X.Label.Text = "call"
	p.Y.Label.Text = "tokens"
	p.Legend.Top, p.Legend.Left = true, true
	colors := []color.RGBA{{0x1f, 0x77, 0xb4, 255}, {0xff, 0x7f, 0x0e, 255}, {0x2c, 0xa0, 0x2c, 255}, {0xd6, 0x27, 0x28, 255}, {0x94, 0x67, 0xbd, 255},
		{0x8c, 0x56, 0x4b, 255}, {0xe3, 0x77, 0xc2, 255}, {0x7f, 0x7f, 0x7f, 255}, {0xbc, 0xbd, 0x22, 255}, {0x17, 0xbe, 0xcf, 255}}
	for i, c := range rep.Configs {
		pts := make(plotter.XYs, len(c.PerCall))
		for k, v := range c.PerCall {
			pts[k] = plotter.XY{X: float64(k + 1), Y: v}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = colors[i%len(colors)]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(c.Name, l)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
