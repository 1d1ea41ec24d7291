package hook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

func readSetup(t *testing.T) (*hook.MemStore, *hook.ReadTool, []hook.Reference) {
	t.Helper()
	s := hook.NewMemStore()
	h := mustHook(t, s)
	var lines []string
	for i := 1; i <= 500; i++ {
		lines = append(lines, fmt.Sprintf("line %d %s", i, map[bool]string{true: "ERROR disk", false: "ok"}[i%100 == 0]))
	}
	out := offload(t, h, hook.Step{Run: "run-a", Number: 1},
		result("run_tests", "c1", hook.Text(strings.Join(lines, "\n")+"\n")),
		result("screenshot", "c2", hook.Image("image/png", pngBytes)),
	)
	offload(t, h, hook.Step{Run: "run-b", Number: 1}, result("run_tests", "c1", hook.Text("run b's secret log")))
	rt, err := hook.NewReadTool(s)
	if err != nil {
		t.Fatal(err)
	}
	return s, rt, append(hook.References(out[0]), hook.References(out[1])...)
}

func read(t *testing.T, rt *hook.ReadTool, run string, a hook.ReadArgs) string {
	t.Helper()
	r, err := rt.Read(context.Background(), run, a)
	if err != nil {
		t.Fatalf("Read(%+v): %v", a, err)
	}
	return r.Parts[0].Text
}

func TestH22ReadToolPages(t *testing.T) {
	_, rt, refs := readSetup(t)
	got := read(t, rt, "run-a", hook.ReadArgs{Ref: refs[0].Key})
	lines := strings.Split(got, "\n")
	if lines[0] != "[run-a/1_run_tests_c1.txt: lines 1-200 of 500; more with offset=200]" || len(lines) != 201 {
		t.Errorf("first page header %q, %d lines", lines[0], len(lines))
	}
	if lines[1] != "1\tline 1 ok" || lines[200] != "200\tline 200 ERROR disk" {
		t.Errorf("numbered lines: %q ... %q", lines[1], lines[200])
	}
	got = read(t, rt, "run-a", hook.ReadArgs{Ref: refs[0].Path, Offset: 490, Limit: 50})
	lines = strings.Split(got, "\n")
	if lines[0] != "[run-a/1_run_tests_c1.txt: lines 491-500 of 500]" || len(lines) != 11 || lines[10] != "500\tline 500 ERROR disk" {
		t.Errorf("last page = %q", got)
	}
	got = read(t, rt, "run-a", hook.ReadArgs{Ref: refs[0].Key, Pattern: "ERROR", Limit: 2})
	want := "[run-a/1_run_tests_c1.txt: matches 1-2 of 5 lines matching \"ERROR\", of 500 lines; more with offset=2]\n100\tline 100 ERROR disk\n200\tline 200 ERROR disk"
	if got != want {
		t.Errorf("pattern =\n%s\nwant\n%s", got, want)
	}
	if got := read(t, rt, "run-a", hook.ReadArgs{Ref: refs[0].Key, Pattern: "nothing"}); !strings.Contains(got, "no line of 500 matches") {
		t.Errorf("no match = %q", got)
	}
	if got := read(t, rt, "run-a", hook.ReadArgs{Ref: refs[0].Key, Offset: 9999}); !strings.Contains(got, "of 500") {
		t.Errorf("offset past the end = %q", got)
	}
}

func TestH22ReadToolBinary(t *testing.T) {
	_, rt, refs := readSetup(t)
	r, err := rt.Read(context.Background(), "run-a", hook.ReadArgs{Ref: refs[1].Key})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Parts) != 2 || r.Parts[1].Kind != hook.KindImage || !bytes.Equal(r.Parts[1].Data, pngBytes) || r.Parts[1].MIME != "image/png" {
		t.Fatalf("binary read = %+v", r.Parts)
	}
	if want := fmt.Sprintf("image/png, %d bytes of binary content", len(pngBytes)); !strings.Contains(r.Parts[0].Text, want) {
		t.Errorf("header %q does not say %q", r.Parts[0].Text, want)
	}
	if _, err := rt.Read(context.Background(), "run-a", hook.ReadArgs{Ref: refs[1].Key, Pattern: "x"}); err == nil {
		t.Error("pattern over binary content accepted")
	}
}

func TestH22ReadToolRefusals(t *testing.T) {
	_, rt, refs := readSetup(t)
	for _, tc := range []struct {
		run  string
		a    hook.ReadArgs
		want string
	}{
		{"run-b", hook.ReadArgs{Ref: refs[0].Key}, "not found in run run-b"},
		{"run-b", hook.ReadArgs{Ref: refs[0].Path}, "not found in run run-b"},
		{"run-b", hook.ReadArgs{Ref: refs[0].Digest}, "not found in run run-b"},
		{"run-a", hook.ReadArgs{Ref: "/etc/passwd"}, "/etc/passwd"},
		{"run-a", hook.ReadArgs{Ref: "../../etc/passwd"}, "../../etc/passwd"},
		{"run-a", hook.ReadArgs{}, "no ref"},
		{"run-a", hook.ReadArgs{Ref: refs[0].Key, Offset: -1}, "offset -1"},
		{"run-a", hook.ReadArgs{Ref: refs[0].Key, Limit: 5000}, "limit 5000"},
		{"run-a", hook.ReadArgs{Ref: refs[0].Key, Pattern: "(["}, "pattern"},
	} {
		_, err := rt.Read(context.Background(), tc.run, tc.a)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(run %s, %+v) = %v, want an error saying %q", tc.run, tc.a, err, tc.want)
		}
	}
}

func TestH22ReadToolCallAndSchema(t *testing.T) {
	s, rt, refs := readSetup(t)
	r := rt.Call(context.Background(), "run-a", "call-r", json.RawMessage(fmt.Sprintf(`{"ref": %q, "limit": 3}`, refs[0].Key)))
	if r.Error || r.Tool != hook.ReadToolName || r.CallID != "call-r" || !strings.Contains(r.Parts[0].Text, "lines 1-3 of 500") {
		t.Errorf("Call = %+v", r)
	}
	bad := rt.Call(context.Background(), "run-a", "call-s", json.RawMessage(`{"reference": "x"}`))
	if !bad.Error || !strings.Contains(bad.Parts[0].Text, "reference") {
		t.Errorf("Call with a wrong argument = %+v", bad)
	}
	// Its own results are never offloaded again, whatever the policy says.
	h := mustHook(t, s, policy.Default(policy.Always))
	out := offload(t, h, hook.Step{Run: "run-a", Number: 2}, r)
	if hook.IsPointer(out[0]) {
		t.Error("the read tool's result was offloaded")
	}
	var schema struct {
		Name       string `json:"name"`
		Parameters struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(rt.Schema(), &schema); err != nil {
		t.Fatal(err)
	}
	// No argument is required: without ref, the tool searches.
	if schema.Name != hook.ReadToolName || schema.Parameters.Type != "object" || len(schema.Parameters.Properties) != 9 || schema.Parameters.Properties["query"] == nil ||
		len(schema.Parameters.Required) != 0 {
		t.Errorf("schema = %s", rt.Schema())
	}
	for name, typ := range map[string]string{"ignore_case": "boolean", "fixed": "boolean", "tool": "string"} {
		var p struct{ Type string }
		if err := json.Unmarshal(schema.Parameters.Properties[name], &p); err != nil || p.Type != typ {
			t.Errorf("schema's %s = %s, want a %s", name, schema.Parameters.Properties[name], typ)
		}
	}
	// The description says when to search rather than read.
	for _, want := range []string{"leave ref out and give pattern", "KEY:LINE:text", "but not which result"} {
		if !strings.Contains(rt.Description(), want) {
			t.Errorf("description does not say %q: %s", want, rt.Description())
		}
	}
}
