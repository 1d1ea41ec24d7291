package catalog

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestStatsReport(t *testing.T) {
	st := Stats{Runs: 2, Parts: 7, Blobs: 5, LogicalBytes: 9000, StoredBytes: 6000, SavedBytes: 3000, DedupRatio: 1.5,
		IndexBytes: 4096, PackedBlobs: 3, PackedBytes: 2500, Packs: 1, PackRawBytes: 2600, PackFileBytes: 1300,
		CompressionRatio: 2, Removals: 4, RemovedParts: 11,
		ByTool: []GroupStats{{Name: "bash", Parts: 5, LogicalBytes: 7000, StoredBytes: 5000}, {Name: "read", Parts: 2, LogicalBytes: 2000, StoredBytes: 1000}},
		ByRun:  []GroupStats{{Name: "run-1", Parts: 7}}}
	got := st.Report()
	want := StatsReport{Runs: 2, Parts: 7, Blobs: 5, LogicalBytes: 9000, StoredBytes: 6000, SavedBytes: 3000, DedupRatio: 1.5,
		IndexBytes: 4096, LooseBytes: 3500, PackedBlobs: 3, PackedBytes: 2500, Packs: 1, PackRawBytes: 2600, PackFileBytes: 1300,
		CompressionRatio: 2, Removals: 4, RemovedParts: 11,
		ByTool: []ToolReport{{Tool: "bash", Parts: 5, LogicalBytes: 7000, StoredBytes: 5000}, {Tool: "read", Parts: 2, LogicalBytes: 2000, StoredBytes: 1000}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Report() = %+v, want %+v", got, want)
	}
}

func TestStatsReportOfNothingListsNoTools(t *testing.T) {
	b, err := json.Marshal(Stats{}.Report())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	// Scripts iterate over by_tool: an empty store gives an empty list, not null.
	if tools, ok := m["by_tool"].([]any); !ok || len(tools) != 0 {
		t.Errorf("by_tool of an empty store = %#v, want []", m["by_tool"])
	}
}
