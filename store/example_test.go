package store_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

// Example opens a store, builds a hook with a policy per tool, offloads a
// step's tool results, and reads one back through the tool the agent calls.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "tool_results")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(ctx, dir, store.WithCreate())
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	h, err := hook.New(s, policy.MustStrategies(
		policy.For("web_search", policy.Always),
		policy.ForGroup([]string{"read_file", "grep"}, policy.OverChars(4000)),
		policy.Default(policy.OverChars(8000))))
	if err != nil {
		log.Fatal(err)
	}

	// The latest step's tool results: a large file read and a short grep.
	results := []hook.Result{
		{Tool: "read_file", CallID: "call-1", Parts: []hook.Part{hook.Text(strings.Repeat("x := 1\n", 1000))}},
		{Tool: "grep", CallID: "call-2", Parts: []hook.Part{hook.Text("main.go:3: x := 1")}},
	}
	out, err := h.Offload(ctx, hook.Step{Run: "run-7", Number: 3}, results)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range out {
		// A pointer names a path in the temp directory: print its start.
		text, _, _ := strings.Cut(r.Parts[0].Text, " at ")
		fmt.Printf("%s: %s\n", r.Tool, text)
	}

	// The agent reads a result back when it needs it, through the
	// read-back tool (register rt.Schema() with the LLM API).
	rt, err := hook.NewReadTool(s)
	if err != nil {
		log.Fatal(err)
	}
	back := rt.Call(ctx, "run-7", "call-3", []byte(`{"ref": "run-7/3_read_file_call-1.txt", "limit": 2}`))
	fmt.Println(back.Parts[0].Text)
	// Output:
	// read_file: Tool result offloaded to text (7000 characters)
	// grep: main.go:3: x := 1
	// [run-7/3_read_file_call-1.txt: lines 1-2 of 1000; more with offset=2]
	// 1	x := 1
	// 2	x := 1
}
