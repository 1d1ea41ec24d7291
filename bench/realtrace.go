package main

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/trace"
)

// A real trace is tool output recorded from real agents, replayed step by
// step as the synthetic trace is. Three shapes are read:
//
//   - JSON lines of single tool results:
//     {"run": …, "step": …, "tool": …, "call_id": …, "text": …}
//   - OpenAI chat-completions message lists (a JSON array of messages, an
//     object with "messages", or JSON lines of such objects): the tool
//     results are the "tool"-role messages; the step is the number of
//     assistant messages before them, the tool name comes from the
//     assistant's tool call with the same id
//   - mini-swe-agent trajectories (*.traj.json): an object with "messages",
//     read the same way
//
// A file may be gzipped (.gz); a directory is read file by file, in name
// order, each conversation file being one run named after the file.

// realTrace yields the steps of a real trace in the order recorded.
type realTrace struct {
	steps []trace.Step
	next  int
}

// Next returns the next step, as trace.Trace's Next does.
func (t *realTrace) Next() (trace.Step, bool, error) {
	if t.next >= len(t.steps) {
		return trace.Step{}, false, nil
	}
	t.next++
	return t.steps[t.next-1], true, nil
}

// resultRow is one line of the JSON-lines shape.
type resultRow struct {
	Run    string  `json:"run"`
	Step   *int    `json:"step"`
	Tool   string  `json:"tool"`
	CallID string  `json:"call_id"`
	Text   *string `json:"text"`
}

// chatMessage is one message of a chat-completions conversation.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// loadRealTrace reads a real trace from a file or a directory of files.
func loadRealTrace(path string) (*realTrace, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	files := []string{path}
	if fi.IsDir() {
		files = nil
		des, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		for _, de := range des {
			n := strings.TrimSuffix(de.Name(), ".gz")
			if !de.IsDir() && (strings.HasSuffix(n, ".json") || strings.HasSuffix(n, ".jsonl")) {
				files = append(files, filepath.Join(path, de.Name()))
			}
		}
		sort.Strings(files)
	}
	t := &realTrace{}
	for _, f := range files {
		if err := t.readFile(f); err != nil {
			return nil, err
		}
	}
	if len(t.steps) == 0 {
		return nil, fmt.Errorf("trace: %s holds no tool results", path)
	}
	return t, nil
}

func (t *realTrace) readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReader(f)
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return fmt.Errorf("trace: %s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("trace: %s: %w", path, err)
	}
	run := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".gz"), ".json"), ".jsonl"), ".traj")
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil
	}
	// One JSON value for the whole file: a conversation.
	if json.Valid(trimmed) {
		return t.readValue(trimmed, run, path, 0)
	}
	// Otherwise JSON lines.
	sc := bufio.NewScanner(bytes.NewReader(trimmed))
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := t.readValue(line, fmt.Sprintf("%s-%d", run, n), path, n); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("trace: %s: %w", path, err)
	}
	return nil
}

// readValue reads one JSON value: a result row, a conversation object or a
// message list.
func (t *realTrace) readValue(v []byte, run, path string, line int) error {
	where := path
	if line > 0 {
		where = fmt.Sprintf("%s:%d", path, line)
	}
	if v[0] == '[' {
		var msgs []chatMessage
		if err := json.Unmarshal(v, &msgs); err != nil {
			return fmt.Errorf("trace: %s: not a list of chat messages: %w", where, err)
		}
		t.addConversation(run, msgs)
		return nil
	}
	var probe struct {
		Messages []chatMessage `json:"messages"`
		resultRow
	}
	if err := json.Unmarshal(v, &probe); err != nil {
		return fmt.Errorf("trace: %s: %w", where, err)
	}
	switch {
	case probe.Messages != nil:
		t.addConversation(run, probe.Messages)
	case probe.Text != nil && probe.Run != "" && probe.Step != nil:
		t.addResult(probe.Run, *probe.Step, probe.Tool, probe.CallID, *probe.Text)
	default:
		return fmt.Errorf("trace: %s: neither a tool result (run, step, tool, call_id, text) nor a conversation (messages)", where)
	}
	return nil
}

// addResult appends a tool result, to the last step when it is the same
// run's same step, else as a new step.
func (t *realTrace) addResult(run string, step int, tool, callID, text string) {
	r := hook.Result{Tool: tool, CallID: callID, Parts: []hook.Part{hook.Text(text)}}
	if n := len(t.steps); n > 0 && t.steps[n-1].Run == run && t.steps[n-1].Number == step {
		t.steps[n-1].Results = append(t.steps[n-1].Results, r)
		return
	}
	t.steps = append(t.steps, trace.Step{Run: run, Number: step, Results: []hook.Result{r}})
}

func (t *realTrace) addConversation(run string, msgs []chatMessage) {
	step := 0
	tools := map[string]string{}
	for _, m := range msgs {
		switch m.Role {
		case "assistant":
			step++
			for _, c := range m.ToolCalls {
				tools[c.ID] = c.Function.Name
			}
		case "tool":
			tool := tools[m.ToolCallID]
			if tool == "" {
				tool = cmp.Or(m.Name, "tool")
			}
			t.addResult(run, step, tool, m.ToolCallID, contentText(m.Content))
		}
	}
}

// contentText is a message's text: a string, or the text parts of a list.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}
