package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// check returns every way the report fails to add up: sums, ratios, and
// stores that must store exactly what the agent produced.
func check(rep Report) []string {
	var bad []string
	for _, set := range [][]replayResult{rep.Repeat, rep.NoRepeat} {
		for i, r := range set {
			var parts, logical int64
			for _, t := range r.ByTool {
				parts += t.Parts
				logical += t.Logical
			}
			if parts != int64(r.Parts) || logical != r.LogicalBytes {
				bad = append(bad, fmt.Sprintf("%s/%s: per-tool rows sum to %d parts, %d bytes; totals say %d, %d", r.Trace, r.Store, parts, logical, r.Parts, r.LogicalBytes))
			}
			if r.StoredBytes > 0 && math.Abs(r.DedupRatio-float64(r.LogicalBytes)/float64(r.StoredBytes)) > 1e-9 {
				bad = append(bad, fmt.Sprintf("%s/%s: ratio %v is not logical/stored", r.Trace, r.Store, r.DedupRatio))
			}
			switch r.Store {
			case storeDirFull, storeDirNone, storeFloorFull, storeFloorNone:
				if r.StoredBytes != r.LogicalBytes {
					bad = append(bad, fmt.Sprintf("%s/%s stores %d bytes for %d logical", r.Trace, r.Store, r.StoredBytes, r.LogicalBytes))
				}
			case storeCASFull, storeCASNone:
				if r.StoredBytes != r.UniqueBytes {
					bad = append(bad, fmt.Sprintf("%s/%s stores %d bytes for %d unique", r.Trace, r.Store, r.StoredBytes, r.UniqueBytes))
				}
				if !r.VerifyOK {
					bad = append(bad, fmt.Sprintf("%s/%s: verify failed", r.Trace, r.Store))
				}
			}
			if n := len(r.Curve); n == 0 || r.Curve[n-1].Logical != r.LogicalBytes {
				bad = append(bad, fmt.Sprintf("%s/%s: the curve does not end at the logical bytes", r.Trace, r.Store))
			}
			if len(r.Latencies) != r.Steps {
				bad = append(bad, fmt.Sprintf("%s/%s: %d latencies for %d steps", r.Trace, r.Store, len(r.Latencies), r.Steps))
			}
			if i > 0 {
				f := set[0]
				if r.Results != f.Results || r.Offloaded != f.Offloaded || r.Parts != f.Parts || r.LogicalBytes != f.LogicalBytes || r.UniqueBytes != f.UniqueBytes {
					bad = append(bad, fmt.Sprintf("%s: %s and %s replayed different traces", r.Trace, f.Store, r.Store))
				}
			}
		}
	}
	if rep.Real != nil {
		bad = append(bad, rep.Real.check()...)
	}
	return bad
}

func find(rs []replayResult, store string) *replayResult {
	for i := range rs {
		if rs[i].Store == store {
			return &rs[i]
		}
	}
	return nil
}

// headline states the comparisons the report exists for.
func headline(rep Report) []string {
	var out []string
	cf, cn := find(rep.Repeat, storeCASFull), find(rep.Repeat, storeCASNone)
	df, dn := find(rep.Repeat, storeDirFull), find(rep.Repeat, storeDirNone)
	if cf != nil && df != nil {
		out = append(out, fmt.Sprintf("Dedup ratio %.2f: the CAS store keeps %s where the directory store keeps %s, %s saved (%.0f %%).",
			cf.DedupRatio, mib(cf.StoredBytes), mib(df.StoredBytes), mib(df.StoredBytes-cf.StoredBytes),
			100*float64(df.StoredBytes-cf.StoredBytes)/float64(max(df.StoredBytes, 1))))
		out = append(out, fmt.Sprintf("On disk, with the index and every block the file system allocated: %s against %s (%.2f ×), in %d files against %d.",
			mib(cf.BlockBytes), mib(df.BlockBytes), float64(df.BlockBytes)/float64(max(cf.BlockBytes, 1)), cf.Files, df.Files))
		out = append(out, fmt.Sprintf("Throughput, durable: CAS %.0f results/s against directory %.0f (%.2f ×); hook latency p99 %.2f ms against %.2f ms.",
			cf.PerSecond, df.PerSecond, cf.PerSecond/df.PerSecond, cf.P99, df.P99))
	}
	if cn != nil && dn != nil {
		out = append(out, fmt.Sprintf("Throughput, no fsync: CAS %.0f results/s against directory %.0f (%.2f ×); p99 %.2f ms against %.2f ms.",
			cn.PerSecond, dn.PerSecond, cn.PerSecond/dn.PerSecond, cn.P99, dn.P99))
	}
	if n := len(rep.RepeatRounds) / max(len(rep.Repeat), 1); n > 1 {
		perSecond := func(r replayResult) float64 { return r.PerSecond }
		fmin, fmed := roundRatios(rep.RepeatRounds, storeCASFull, storeDirFull, perSecond)
		nmin, nmed := roundRatios(rep.RepeatRounds, storeCASNone, storeDirNone, perSecond)
		out = append(out, fmt.Sprintf("Over %d rounds, the stores taking turns (the tables show each store's median round): CAS against directory throughput, durable %.2f × min, %.2f × median; no fsync %.2f × min, %.2f × median.",
			n, fmin, fmed, nmin, nmed))
	}
	ncf, ndf := find(rep.NoRepeat, storeCASFull), find(rep.NoRepeat, storeDirFull)
	if ncf != nil && ndf != nil {
		out = append(out, fmt.Sprintf("Where dedup cannot help (no repetition): CAS %.0f results/s against directory %.0f (%.2f ×), on disk %s against %s.",
			ncf.PerSecond, ndf.PerSecond, ncf.PerSecond/ndf.PerSecond, mib(ncf.BlockBytes), mib(ndf.BlockBytes)))
	}
	return out
}

func storeTable(b *strings.Builder, rs []replayResult) {
	b.WriteString("| store | offloaded | logical | stored (data) | index | on disk (blocks) | files / dirs | dedup | results/s | step latency p50 / p90 / p99 (ms) | peak RSS | verify | gc |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rs {
		verify, gc := "–", "–"
		if r.VerifySeconds > 0 {
			verify = fmt.Sprintf("%.0f MB/s", r.VerifyMBps)
			gc = fmt.Sprintf("%.0f ms", r.GCSeconds*1000)
		}
		fmt.Fprintf(b, "| %s | %d of %d | %s | %s | %s | %s | %d / %d | %.2f | %.0f | %.2f / %.2f / %.2f | %.0f MiB | %s | %s |\n",
			r.Store, r.Offloaded, r.Results, mib(r.LogicalBytes), mib(r.StoredBytes), mib(r.IndexBytes), mib(r.BlockBytes),
			r.Files, r.Dirs, r.DedupRatio, r.PerSecond, r.P50, r.P90, r.P99, float64(r.PeakRSSKiB)/1024, verify, gc)
	}
}

func markdown(rep Report) string {
	var b strings.Builder
	m := rep.Machine
	fmt.Fprintf(&b, "# toolcas benchmark report\n\n")
	fmt.Fprintf(&b, "- Command: `%s` (took %.0f s)\n- Date: %s\n", rep.Command, rep.Seconds, rep.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Machine: %s, %d cores, %d GiB, Linux %s, stores on %s\n- Go: %s (%s)\n",
		m.CPU, m.Cores, m.MemoryGiB, m.Kernel, m.FileSystem, m.GoVersion, m.OS)
	if rep.LoadBefore != "" {
		fmt.Fprintf(&b, "- Load average (1, 5, 15 min): %s at the start, %s at the end\n", rep.LoadBefore, rep.LoadAfter)
	}
	if len(rep.Repeat) > 0 {
		fmt.Fprintf(&b, "- Trace: %d runs × %d steps of a scripted coding agent over the Go source tree (seed %d, Zipf exponent %.2f);"+
			" each store replays it through the offload hook in its own process.\n\n", rep.Trace.Runs, rep.Trace.Steps, rep.Trace.Seed, rep.Trace.Zipf)
		b.WriteString("## In short\n\n")
		for _, h := range headline(rep) {
			b.WriteString("- " + h + "\n")
		}
		b.WriteString("\n## The trace, replayed into each store\n\n")
		for _, r := range rep.Repeat {
			fmt.Fprintf(&b, "- `%s`: %s\n", r.Store, storeNotes[r.Store])
		}
		b.WriteString("\n")
		storeTable(&b, rep.Repeat)
		b.WriteString("\n![Bytes on disk over the steps](bytes.png)\n\n![Step latency](latency.png)\n\n")
	} else {
		b.WriteString("\n")
	}
	if cf := find(rep.Repeat, storeCASFull); cf != nil {
		b.WriteString("## Where dedup helped (CAS store, per tool)\n\n| tool | parts | logical | stored | ratio |\n| --- | ---: | ---: | ---: | ---: |\n")
		for _, t := range cf.ByTool {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %.2f |\n", t.Tool, t.Parts, mib(t.Logical), mib(t.Stored), float64(t.Logical)/float64(max(t.Stored, 1)))
		}
		b.WriteString("\nA tool's stored bytes count each blob it uses once; tools sharing blobs add up to more than the total.\n\n")
	}
	if len(rep.NoRepeat) > 0 {
		fmt.Fprintf(&b, "## The cost when dedup cannot help\n\nThe same agent with no repetition at all (every result differs), %d runs × %d steps:\n\n", rep.NoRepeat[0].Steps/rep.Trace.Steps, rep.Trace.Steps)
		storeTable(&b, rep.NoRepeat)
		b.WriteString("\n")
	}
	if rep.Real != nil {
		rep.Real.section(&b)
	}
	if len(rep.Targets) > 0 {
		b.WriteString("## The speed targets\n\nEach measured beside its baseline in the same process, alternating in rounds.\n\n| what | target | measured | met |\n| --- | --- | --- | --- |\n")
		for _, t := range rep.Targets {
			met := "yes"
			if !t.Met {
				met = "**no**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.What, t.Target, t.Measured, met)
		}
		b.WriteString("\n")
	}
	b.WriteString("## Consistency\n\n")
	if len(rep.Checks) == 0 {
		b.WriteString("Every check passed: per-tool rows sum to the totals, dedup ratio = logical / stored, the directory and floor stores store exactly the logical bytes, the CAS stores exactly the unique bytes, verify found every CAS store whole, and every store replayed the same trace.\n")
	} else {
		for _, c := range rep.Checks {
			b.WriteString("- " + c + "\n")
		}
	}
	return b.String()
}

// summary is what a terminal shows at the end of a run.
func summary(rep Report) string {
	var b strings.Builder
	for _, h := range headline(rep) {
		b.WriteString(h + "\n")
	}
	for _, t := range rep.Targets {
		met := "met"
		if !t.Met {
			met = "MISSED"
		}
		fmt.Fprintf(&b, "%-6s  %s: %s (target %s)\n", met, t.What, t.Measured, t.Target)
	}
	fmt.Fprintf(&b, "took %.0f s\n", rep.Seconds)
	return b.String()
}

func writeReport(dir string, rep Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "REPORT.md"), []byte(markdown(rep)), 0o644); err != nil {
		return err
	}
	slim := rep
	slim.Repeat = withoutLatencies(rep.Repeat)
	slim.NoRepeat = withoutLatencies(rep.NoRepeat)
	if rep.Real != nil {
		real := *rep.Real
		real.Results = withoutLatencies(real.Results)
		slim.Real = &real
	}
	b, err := json.MarshalIndent(slim, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if len(rep.Repeat) == 0 {
		return nil
	}
	if err := bytesChart(filepath.Join(dir, "bytes.png"), rep.Repeat); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if err := latencyChart(filepath.Join(dir, "latency.png"), rep.Repeat); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return nil
}

func withoutLatencies(rs []replayResult) []replayResult {
	out := make([]replayResult, len(rs))
	for i, r := range rs {
		r.Latencies = nil
		out[i] = r
	}
	return out
}

var palette = map[string]color.RGBA{
	storeCASFull:   {0x1b, 0x9e, 0x77, 255},
	storeCASNone:   {0x66, 0xc2, 0xa5, 255},
	storeDirFull:   {0xd9, 0x5f, 0x02, 255},
	storeDirNone:   {0xfc, 0x8d, 0x62, 255},
	storeFloorFull: {0x75, 0x70, 0xb3, 255},
	storeFloorNone: {0x8d, 0xa0, 0xcb, 255},
}

func line(p *plot.Plot, name string, pts plotter.XYs, dashed bool) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = palette[name]
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	if name == "" {
		l.Color = color.Black
	}
	p.Add(l)
	if name == "" {
		name = "logical (what the agent produced)"
	}
	p.Legend.Add(name, l)
	return nil
}

// bytesChart draws the bytes on disk after each step, per store.
func bytesChart(path string, rs []replayResult) error {
	p := plot.New()
	p.Title.Text = "Bytes on disk over the steps"
	p.X.Label.Text = "step"
	p.Y.Label.Text = "MiB on disk (blocks)"
	p.Legend.Top, p.Legend.Left = true, true
	for i, r := range rs {
		pts := make(plotter.XYs, len(r.Curve))
		for k, c := range r.Curve {
			pts[k] = plotter.XY{X: float64(c.Step), Y: float64(c.OnDisk) / (1 << 20)}
		}
		if err := line(p, r.Store, pts, strings.HasSuffix(r.Store, "none")); err != nil {
			return err
		}
		if i == 0 {
			lp := make(plotter.XYs, len(r.Curve))
			for k, c := range r.Curve {
				lp[k] = plotter.XY{X: float64(c.Step), Y: float64(c.Logical) / (1 << 20)}
			}
			if err := line(p, "", lp, true); err != nil {
				return err
			}
		}
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// latencyChart draws, per store, the share of steps done within each time.
func latencyChart(path string, rs []replayResult) error {
	p := plot.New()
	p.Title.Text = "Step latency (one Offload call), cumulative"
	p.X.Label.Text = "milliseconds (log scale)"
	p.Y.Label.Text = "share of steps done within"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs = -vg.Points(5)
	p.Legend.YOffs = vg.Points(20)
	for _, r := range rs {
		xs := append([]float64(nil), r.Latencies...)
		sort.Float64s(xs)
		pts := make(plotter.XYs, 0, len(xs))
		for i, x := range xs {
			pts = append(pts, plotter.XY{X: math.Max(x, 0.001), Y: float64(i+1) / float64(len(xs))})
		}
		if len(pts) == 0 {
			continue
		}
		if err := line(p, r.Store, pts, strings.HasSuffix(r.Store, "none")); err != nil {
			return err
		}
	}
	p.Legend.Padding = vg.Points(2)
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
