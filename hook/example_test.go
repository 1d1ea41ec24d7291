package hook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// Offload a step's tool results: the large one becomes a pointer, the small
// one stays.
func Example_offload() {
	store := hook.NewMemStore() // store.Open(ctx, "tool_results", store.WithCreate()) for the CAS store on disk
	h, err := hook.New(store, policy.MustStrategies(policy.Default(policy.OverChars(100))))
	if err != nil {
		log.Fatal(err)
	}
	results := []hook.Result{
		{Tool: "read_file", CallID: "call-1", Parts: []hook.Part{hook.Text(strings.Repeat("package main\n", 20))}},
		{Tool: "get_time", CallID: "call-2", Parts: []hook.Part{hook.Text("12:00")}},
	}
	out, err := h.Offload(context.Background(), hook.Step{Run: "run-7", Number: 3}, results)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range out {
		fmt.Printf("%s: pointer=%v\n", r.Tool, hook.IsPointer(r))
	}
	fmt.Println(hook.References(out[0])[0].Key)
	// Output:
	// read_file: pointer=true
	// get_time: pointer=false
	// run-7/3_read_file_call-1.txt
}

// Read an offloaded result back, a page of lines at a time, as the agent does
// through the read-back tool.
func Example_readBack() {
	store := hook.NewMemStore()
	h, _ := hook.New(store, policy.MustStrategies(policy.Default(policy.Always)))
	log := "ok 1\nok 2\nFAIL TestFlaky\nok 4\n"
	out, _ := h.Offload(context.Background(), hook.Step{Run: "run-7", Number: 4},
		[]hook.Result{{Tool: "run_tests", CallID: "call-9", Parts: []hook.Part{hook.Text(log)}}})
	key := hook.References(out[0])[0].Key

	tool, _ := hook.NewReadTool(store)
	args, _ := json.Marshal(hook.ReadArgs{Ref: key, Pattern: "FAIL"})
	r := tool.Call(context.Background(), "run-7", "call-10", args)
	fmt.Println(r.Parts[0].Text)
	// Output:
	// [run-7/4_run_tests_call-9.txt: matches 1-1 of 1 lines matching "FAIL", of 4 lines]
	// 3	FAIL TestFlaky
}

// Configure a policy per tool: exact names first, then the first group that
// names the tool, then the wildcard.
func Example_policies() {
	strategies, err := policy.NewStrategies(
		policy.For("web_search", policy.Always),
		policy.For("get_time", policy.Never),
		policy.ForGroup([]string{"read_file", "list_dir"}, policy.OverChars(4000)),
		policy.Default(policy.OverChars(8000)),
	)
	if err != nil {
		log.Fatal(err)
	}
	for _, tool := range []string{"web_search", "list_dir", "grep"} {
		p, _ := strategies.For(tool)
		fmt.Printf("%s: %v\n", tool, p)
	}
	cfg, _ := json.Marshal(strategies)
	fmt.Println(len(cfg) > 0)
	// Output:
	// web_search: Always
	// list_dir: OverChars(4000)
	// grep: OverChars(8000)
	// true
}
