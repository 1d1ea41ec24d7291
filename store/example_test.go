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

// The library in ten lines, as the README shows it: open a store, build a
// hook with a policy per tool, offload a step's results, and read them back
// through the tool the agent calls.
func Example() {
	dir, _ := os.MkdirTemp("", "toolcas-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	results := []hook.Result{{Tool: "read_file", CallID: "call-1", Parts: []hook.Part{hook.Text(strings.Repeat("x := 1\n", 1000))}}}

	s, err := store.Open(ctx, dir, store.WithCreate())
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	h, _ := hook.New(s, policy.MustStrategies(
		policy.For("web_search", policy.Always),
		policy.ForGroup([]string{"read_file", "grep"}, policy.OverChars(4000)),
		policy.Default(policy.OverChars(8000))))
	out, _ := h.Offload(ctx, hook.Step{Run: "run-7", Number: 3}, results)
	rt, _ := hook.NewReadTool(s) // register rt.Schema() with the LLM API
	back := rt.Call(ctx, "run-7", "call-2", []byte(`{"ref": "run-7/3_read_file_call-1.txt", "limit": 2}`))

	fmt.Println(strings.SplitN(out[0].Parts[0].Text, " at ", 2)[0])
	fmt.Println(back.Parts[0].Text)
	// Output:
	// Tool result offloaded to text (7000 characters)
	// [run-7/3_read_file_call-1.txt: lines 1-2 of 1000; more with offset=2]
	// 1	x := 1
	// 2	x := 1
}
