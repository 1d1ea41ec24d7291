package toolcasanthropic_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	toolcasanthropic "github.com/toolcas/toolcas/adapters/anthropic"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

const logLines = 300

// loopScript drives a whole tool loop: a big log and a screenshot, then the
// read-back tool on every key their pointers name, then an answer.
func loopScript(msgs []message) []map[string]any {
	seed, turns := "", 0
	for _, m := range msgs {
		if m.Role == "assistant" {
			turns++
		} else if seed == "" {
			seed = m.Content[0].Text
		}
	}
	switch turns {
	case 0:
		return []map[string]any{toolUse("toolu_1", "fetch_log", map[string]any{"seed": seed}), toolUse("toolu_2", "screenshot", map[string]any{})}
	case 1:
		var out []map[string]any
		for _, b := range msgs[len(msgs)-1].Content {
			for _, k := range pointerKeys(b.resultText()) {
				out = append(out, toolUse(fmt.Sprintf("toolu_%d", 3+len(out)), hook.ReadToolName, map[string]any{"ref": k, "limit": hook.MaxReadLimit}))
			}
		}
		return out
	}
	return []map[string]any{text("done")}
}

type fixture struct {
	api    *scriptedAPI
	client anthropic.Client
	hook   *hook.Hook
	store  *store.Store
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir(), store.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hook.New(st, policy.MustStrategies(policy.For("screenshot", policy.Always), policy.Default(policy.OverChars(2000))))
	if err != nil {
		t.Fatal(err)
	}
	api := &scriptedAPI{next: loopScript}
	return &fixture{api: api, client: newClient(t, api), hook: h, store: st}
}

func (f *fixture) run(ctx context.Context, run, seed string) error {
	off, err := toolcasanthropic.New(f.hook, f.store, toolcasanthropic.WithRun(run))
	if err != nil {
		return err
	}
	r := off.NewToolRunner(&f.client.Beta.Messages, []anthropic.BetaTool{logTool{logLines}, screenshotTool{}}, anthropic.BetaToolRunnerParams{
		BetaMessageNewParams: anthropic.BetaMessageNewParams{
			Model: "scripted", MaxTokens: 1024,
			Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(seed))},
		},
		DisableThread: true,
	})
	_, err = r.RunToCompletion(ctx)
	return err
}

// checkRun asserts what the model was sent in one run: after the tools,
// pointers and never the big results; after the read-back tool, the exact
// bytes of the log and of the screenshot.
func checkRun(t *testing.T, reqs [][]message, seed string) []string {
	t.Helper()
	var mine [][]message
	for _, r := range reqs {
		if r[0].Content[0].Text == seed {
			mine = append(mine, r)
		}
	}
	if len(mine) != 3 {
		t.Fatalf("run %s: model got %d requests, want 3 (tools, read back, answer)", seed, len(mine))
	}
	want := bigLog(seed, logLines)
	var keys []string
	for _, b := range mine[1][len(mine[1])-1].Content {
		if b.Type != "tool_result" {
			continue
		}
		for _, c := range b.resultBlocks() {
			if c.Type != "text" {
				t.Errorf("run %s: result of %s sent the model a %s block", seed, b.ToolUseID, c.Type)
			}
		}
		txt := b.resultText()
		if !strings.HasPrefix(txt, "Tool result offloaded to") || strings.Contains(txt, "line 00150") {
			t.Errorf("run %s: result of %s sent the model %.120q, want a pointer", seed, b.ToolUseID, txt)
		}
		keys = append(keys, pointerKeys(txt)...)
	}
	var reads []block
	for _, b := range mine[2][len(mine[2])-1].Content {
		if b.Type == "tool_result" {
			reads = append(reads, b)
		}
	}
	if len(reads) != 3 || len(keys) != 3 {
		t.Fatalf("run %s: %d read-back results for keys %q, want 3", seed, len(reads), keys)
	}
	for i, k := range keys {
		switch {
		case strings.HasSuffix(k, ".png"):
			var img []byte
			for _, c := range reads[i].resultBlocks() {
				if c.Type == "image" && c.Source != nil {
					img, _ = base64.StdEncoding.DecodeString(c.Source.Data)
				}
			}
			if !bytes.Equal(img, pngBytes) {
				t.Errorf("run %s: read back %s: image of %d bytes, want the screenshot's %d", seed, k, len(img), len(pngBytes))
			}
		case strings.Contains(k, "fetch_log"):
			if got, err := unpage(reads[i].resultText()); err != nil || got != want {
				t.Errorf("run %s: read back %s: %d bytes (%v), want the log's exact %d", seed, k, len(got), err, len(want))
			}
		default:
			if got, _ := unpage(reads[i].resultText()); got != "the page as rendered" {
				t.Errorf("run %s: read back %s = %q", seed, k, got)
			}
		}
	}
	return keys
}

func TestToolRunnerLoop(t *testing.T) {
	f := newFixture(t)
	if err := f.run(context.Background(), "run-7", "s7"); err != nil {
		t.Fatal(err)
	}
	keys := checkRun(t, f.api.requests(), "s7")
	want := strings.Join([]string{
		hook.Key{Run: "run-7", Step: 1, Tool: "fetch_log", CallID: "toolu_1", Part: -1, Ext: ".txt"}.String(),
		hook.Key{Run: "run-7", Step: 1, Tool: "screenshot", CallID: "toolu_2", Part: 0, Ext: ".txt"}.String(),
		hook.Key{Run: "run-7", Step: 1, Tool: "screenshot", CallID: "toolu_2", Part: 1, Ext: ".png"}.String(),
	}, " ")
	if got := strings.Join(keys, " "); got != want {
		t.Errorf("keys = %s, want %s", got, want)
	}
}

// Concurrent runs, each its own runner and Offloader, share one hook, one
// store on disk and one API.
func TestConcurrentRuns(t *testing.T) {
	f := newFixture(t)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f.run(context.Background(), fmt.Sprintf("run-%d", i), fmt.Sprintf("s%d", i)) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		keys := checkRun(t, f.api.requests(), fmt.Sprintf("s%d", i))
		if want := (hook.Key{Run: fmt.Sprintf("run-%d", i), Step: 1, Tool: "fetch_log", CallID: "toolu_1", Part: -1, Ext: ".txt"}).String(); keys[0] != want {
			t.Errorf("run %d: key %s", i, keys[0])
		}
	}
}

// A read of another run's key, or of nothing, is an error result the model
// reads, not a failed loop.
func TestReadToolRefuses(t *testing.T) {
	f := newFixture(t)
	if err := f.run(context.Background(), "run-1", "s1"); err != nil {
		t.Fatal(err)
	}
	off, err := toolcasanthropic.New(f.hook, f.store, toolcasanthropic.WithRun("run-2"))
	if err != nil {
		t.Fatal(err)
	}
	other := hook.Key{Run: "run-1", Step: 1, Tool: "fetch_log", CallID: "toolu_1", Part: -1, Ext: ".txt"}.String()
	if out, err := toolcasanthropic.Must(toolcasanthropic.New(f.hook, f.store, toolcasanthropic.WithRun("run-1"))).ReadTool().Execute(context.Background(), []byte(`{"ref": "`+other+`"}`)); err != nil {
		t.Fatalf("read %s from its own run: %v, %v", other, out, err)
	}
	for _, in := range []string{`{"ref": "` + other + `"}`, `{}`, `{"ref": 3}`} {
		if out, err := off.ReadTool().Execute(context.Background(), []byte(in)); err == nil {
			t.Errorf("read %s from run-2 = %v, want an error", in, out)
		}
	}
	if _, err := toolcasanthropic.New(f.hook, f.store, toolcasanthropic.WithRun("bad\x00run")); err == nil {
		t.Error("New with a run name holding NUL succeeded")
	}
}

// Two calls of one tool with the same input in one turn get their own
// tool_use ids.
func TestSameCallTwice(t *testing.T) {
	f := newFixture(t)
	f.api.next = func(msgs []message) []map[string]any {
		if len(msgs) == 1 {
			return []map[string]any{toolUse("toolu_a", "fetch_log", map[string]any{"seed": "x"}), toolUse("toolu_b", "fetch_log", map[string]any{"seed": "x"})}
		}
		return []map[string]any{text("done")}
	}
	if err := f.run(context.Background(), "run-9", "twice"); err != nil {
		t.Fatal(err)
	}
	reqs := f.api.requests()
	var keys []string
	for _, b := range reqs[1][len(reqs[1])-1].Content {
		keys = append(keys, pointerKeys(b.resultText())...)
	}
	if len(keys) != 2 || keys[0] == keys[1] {
		t.Errorf("keys %q, want one per tool_use id", keys)
	}
}

// pdfTool returns a PDF document block.
type pdfTool struct{ data []byte }

func (pdfTool) Name() string        { return "fetch_report" }
func (pdfTool) Description() string { return "returns a report" }
func (pdfTool) InputSchema() anthropic.BetaToolInputSchemaParam {
	return anthropic.BetaToolInputSchemaParam{}
}
func (t pdfTool) Execute(context.Context, json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	return []anthropic.BetaToolResultBlockParamContentUnion{{OfDocument: &anthropic.BetaRequestDocumentBlockParam{
		Source: anthropic.BetaRequestDocumentBlockSourceUnionParam{OfBase64: &anthropic.BetaBase64PDFSourceParam{Data: base64.StdEncoding.EncodeToString(t.data)}}}}}, nil
}

// A PDF goes to the store like text and images, and comes back as the same
// document; an unbound Offloader keys it by a hash of the input.
func TestPDFUnbound(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	off := toolcasanthropic.Must(toolcasanthropic.New(f.hook, f.store, toolcasanthropic.WithRun("run-p")))
	pdf := append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte("stream of a long report\n"), 200)...)
	out, err := off.Wrap(pdfTool{pdf})[0].Execute(ctx, []byte(`{}`))
	if err != nil || len(out) != 1 || out[0].OfText == nil || !strings.HasPrefix(out[0].OfText.Text, "Tool result offloaded to application/pdf") {
		t.Fatalf("Execute = %+v, %v; want one text block, a pointer", out, err)
	}
	key := pointerKeys(out[0].OfText.Text)[0]
	if !strings.HasPrefix(key, "run-p/0_fetch_report_in-") || !strings.HasSuffix(key, ".pdf") {
		t.Errorf("key %s, want run-p/0_fetch_report_in-<hash>.pdf", key)
	}
	back, err := off.ReadTool().Execute(ctx, []byte(`{"ref": "`+key+`"}`))
	if err != nil || len(back) != 2 || back[1].OfDocument == nil {
		t.Fatalf("read back = %+v, %v; want a header and a document", back, err)
	}
	if got, _ := base64.StdEncoding.DecodeString(back[1].OfDocument.Source.OfBase64.Data); !bytes.Equal(got, pdf) {
		t.Errorf("read back %d bytes, want the PDF's exact %d", len(got), len(pdf))
	}
}
