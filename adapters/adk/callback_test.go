package toolcasadk_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/loadartifactstool"
	"google.golang.org/genai"

	toolcasadk "github.com/toolcas/toolcas/adapters/adk"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

const logLines = 300

// loopScript drives a whole agent loop: a tool whose result map holds a
// big log, a tool that saves a screenshot as an artifact; then the
// read-back tool on the log's pointer and load_artifacts on the
// screenshot; then an answer.
func loopScript(contents []*genai.Content) *genai.Content {
	turns := 0
	var last []*genai.FunctionResponse
	for _, c := range contents {
		if c.Role == "model" {
			turns++
		}
		if r := responses(c); len(r) > 0 {
			last = r
		}
	}
	switch turns {
	case 0:
		seed := userText(contents)
		return calls(
			&genai.FunctionCall{ID: "fc-1", Name: "fetch_log", Args: map[string]any{"seed": seed}},
			&genai.FunctionCall{ID: "fc-2", Name: "screenshot", Args: map[string]any{"seed": seed}})
	case 1:
		var key string
		for _, r := range last {
			if r.Name == "fetch_log" {
				key = pointerKey(fmt.Sprint(r.Response["log"]))
			}
		}
		// load_artifacts first: adk-go adds the artifacts to the next
		// request only when its response opens the last content.
		return calls(
			&genai.FunctionCall{ID: "fc-3", Name: "load_artifacts", Args: map[string]any{"artifact_names": []any{"shot.png"}}},
			&genai.FunctionCall{ID: "fc-4", Name: hook.ReadToolName, Args: map[string]any{"ref": key, "limit": hook.MaxReadLimit}})
	}
	return answer("done")
}

type fixture struct {
	llm    *scriptedLLM
	runner *runner.Runner
	store  *store.Store
}

// newFixture builds an agent over one store on disk, offloading through the
// agent's AfterToolCallbacks, or through a runner plugin when viaPlugin.
func newFixture(t testing.TB, viaPlugin bool) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), store.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hook.New(st, policy.MustStrategies(policy.Default(policy.OverChars(2000))))
	if err != nil {
		t.Fatal(err)
	}
	arts, err := toolcasadk.NewArtifactService(st)
	if err != nil {
		t.Fatal(err)
	}
	llm := &scriptedLLM{next: loopScript}
	cfg := llmagent.Config{
		Name: "assistant", Description: "reads logs", Model: llm,
		Tools: []tool.Tool{fetchLogTool(logLines), screenshotTool(), loadartifactstool.New(), toolcasadk.MustReadTool(st)},
	}
	var plugins []*plugin.Plugin
	if viaPlugin {
		p, err := toolcasadk.Plugin(h)
		if err != nil {
			t.Fatal(err)
		}
		plugins = append(plugins, p)
	} else {
		cfg.AfterModelCallbacks = []llmagent.AfterModelCallback{toolcasadk.AfterModel()}
		cfg.AfterToolCallbacks = []llmagent.AfterToolCallback{toolcasadk.AfterTool(h)}
	}
	a, err := llmagent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{
		AppName: "logs", Agent: a, SessionService: session.InMemoryService(), ArtifactService: arts,
		AutoCreateSession: true, PluginConfig: runner.PluginConfig{Plugins: plugins},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{llm: llm, runner: r, store: st}
}

func (f *fixture) run(ctx context.Context, sessionID, seed string) error {
	for _, err := range f.runner.Run(ctx, "user-1", sessionID, genai.NewContentFromText(seed, "user"), agent.RunConfig{}) {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkSession asserts what the model was sent in one session: after the
// tools, the log's pointer and never the log; after the read-back tool,
// the exact bytes of the log, and the screenshot's exact bytes.
func checkSession(t *testing.T, reqs [][]*genai.Content, seed string) string {
	t.Helper()
	var mine [][]*genai.Content
	for _, r := range reqs {
		if userText(r) == seed {
			mine = append(mine, r)
		}
	}
	if len(mine) != 3 {
		t.Fatalf("session %s: model got %d requests, want 3 (tools, read back, answer)", seed, len(mine))
	}
	want := bigLog(seed, logLines)
	var key string
	for _, c := range mine[1] {
		for _, r := range responses(c) {
			if r.Name != "fetch_log" {
				continue
			}
			log, _ := r.Response["log"].(string)
			if !strings.HasPrefix(log, "Tool result offloaded to") || strings.Contains(log, "line 00150") {
				t.Errorf("session %s: the model was sent log %.120q, want a pointer", seed, log)
			}
			if r.Response["status"] != "ok" {
				t.Errorf("session %s: small value status = %v, want it left as it was", seed, r.Response["status"])
			}
			key = pointerKey(log)
		}
	}
	var page string
	var image []byte
	for _, c := range mine[2] {
		for _, r := range responses(c) {
			if r.Name == hook.ReadToolName {
				page, _ = r.Response["result"].(string)
			}
		}
		for _, p := range c.Parts {
			if p.InlineData != nil {
				image = p.InlineData.Data
			}
		}
	}
	if got, err := unpage(page); err != nil || got != want {
		t.Errorf("session %s: read back %s: %d bytes (%v), want the log's exact %d", seed, key, len(got), err, len(want))
	}
	if !bytes.Equal(image, pngBytes) {
		t.Errorf("session %s: load_artifacts sent the model %d image bytes, want the screenshot's %d", seed, len(image), len(pngBytes))
	}
	return key
}

func TestAgentLoop(t *testing.T) {
	f := newFixture(t, false)
	if err := f.run(context.Background(), "sess-7", "s7"); err != nil {
		t.Fatal(err)
	}
	if key := checkSession(t, f.llm.requests(), "s7"); key != "sess-7/1_fetch_log_fc-1.log.txt" {
		t.Errorf("key = %q, want sess-7/1_fetch_log_fc-1.log.txt", key)
	}
}

// Concurrent sessions share one runner, with the plugin, and one store on
// disk; each reads back only its own log.
func TestConcurrentSessions(t *testing.T) {
	f := newFixture(t, true)
	// adk-go v2.2.0's Runner.Run sets its root agent's mode on the first
	// run without a lock (a data race of its own when the first runs are
	// concurrent); one run first sets it.
	if err := f.run(context.Background(), "sess-first", "first"); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f.run(context.Background(), fmt.Sprintf("sess-%d", i), fmt.Sprintf("s%d", i)) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("session %d: %v", i, errs[i])
		}
		want := fmt.Sprintf("sess-%d/1_fetch_log_fc-1.log.txt", i)
		if key := checkSession(t, f.llm.requests(), fmt.Sprintf("s%d", i)); key != want {
			t.Errorf("session %d: key %q, want %q", i, key, want)
		}
	}
}

// A session id that cannot name a run offloads under a run named by its
// hash, the same every time.
func TestRunOfSession(t *testing.T) {
	for _, tc := range []struct{ session, want string }{
		{"sess-7", "sess-7"},
		{"", hook.DefaultRun},
		// Any UTF-8 up to 256 bytes without NUL is a run as it is.
		{"a session/with spaces and a very long name over forty bytes", "a session/with spaces and a very long name over forty bytes"},
	} {
		if got := toolcasadk.Run(tc.session); got != tc.want {
			t.Errorf("Run(%q) = %q, want %q", tc.session, got, tc.want)
		}
	}
	odd := strings.Repeat("a session id no run can be, ", 10) + "\x00"
	got := toolcasadk.Run(odd)
	if hook.CheckRun(got) != nil || !strings.HasPrefix(got, "s-") || got != toolcasadk.Run(odd) || got == toolcasadk.Run(odd+"!") {
		t.Errorf("Run(%q) = %q, want a stable valid run of its own", odd, got)
	}
}
