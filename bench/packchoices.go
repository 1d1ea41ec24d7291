package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/policy"
)

// packChoices measures, on the results a real trace offloads, what the ways
// of packing them give: each blob compressed alone; frames of several sizes
// filled in the order the results came or grouped (tool, run, key, as packs
// group them); the three useful zstd levels; a dictionary trained on half
// the blobs. Sizes are exact and the same on every machine; times are what
// this machine took. This is how the pack format's choices were made.
func packChoices(w io.Writer, path string, threshold int) error {
	rt, err := loadRealTrace(path)
	if err != nil {
		return err
	}
	type blob struct {
		tool, run string
		step      int
		data      []byte
	}
	var blobs []blob
	seen := map[cas.Digest]bool{}
	var logical int64
	for {
		st, ok, err := rt.Next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		for _, r := range st.Results {
			text := r.Parts[0].Text
			if policy.TextSize(text) <= threshold {
				continue
			}
			logical += int64(len(text))
			d := cas.Sum([]byte(text))
			if seen[d] {
				continue
			}
			seen[d] = true
			blobs = append(blobs, blob{r.Tool, st.Run, st.Number, []byte(text)})
		}
	}
	var unique int64
	for _, b := range blobs {
		unique += int64(len(b.data))
	}
	grouped := slices.Clone(blobs)
	slices.SortStableFunc(grouped, func(a, b blob) int {
		return cmp.Or(strings.Compare(a.tool, b.tool), strings.Compare(a.run, b.run), cmp.Compare(a.step, b.step))
	})
	datas := func(bs []blob) [][]byte {
		out := make([][]byte, len(bs))
		for i, b := range bs {
			out[i] = b.data
		}
		return out
	}
	fmt.Fprintf(w, "# Pack choices on %s\n\n", path)
	fmt.Fprintf(w, "%d results over %d characters: %s, %d unique blobs of %s (dedup %.2f ×). "+
		"Ratio = unique bytes / compressed bytes (a dictionary's own size counted in).\n\n",
		len(blobs), threshold, mib(logical), len(blobs), mib(unique), float64(logical)/float64(max(unique, 1)))
	fmt.Fprintln(w, "| frames | order | level | dictionary | ratio | time |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | ---: | ---: |")
	levels := []zstd.EncoderLevel{zstd.SpeedDefault, zstd.SpeedBetterCompression, zstd.SpeedBestCompression}
	row := func(frames, order string, lvl zstd.EncoderLevel, dictName string, fr [][]byte, d []byte) error {
		opts := []zstd.EOption{zstd.WithEncoderLevel(lvl), zstd.WithEncoderConcurrency(1)}
		if d != nil {
			opts = append(opts, zstd.WithEncoderDict(d))
		}
		enc, err := zstd.NewWriter(nil, opts...)
		if err != nil {
			return err
		}
		t0 := time.Now()
		n := len(d)
		for _, f := range fr {
			n += len(enc.EncodeAll(f, nil))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.2f | %.0f ms |\n", frames, order, lvl, dictName,
			float64(unique)/float64(max(n, 1)), float64(time.Since(t0).Microseconds())/1000)
		return nil
	}
	for _, lvl := range levels {
		if err := row("one per blob", "–", lvl, "none", datas(blobs), nil); err != nil {
			return err
		}
	}
	for _, size := range []int{256 << 10, cas.FrameSize, 4 << 20} {
		for _, order := range []struct {
			name string
			bs   []blob
		}{{"as written", blobs}, {"grouped", grouped}} {
			for _, lvl := range levels {
				if err := row(fmt.Sprintf("%d KiB", size>>10), order.name, lvl, "none", frames(datas(order.bs), size), nil); err != nil {
					return err
				}
			}
		}
	}
	half := datas(blobs[:len(blobs)/2])
	for _, ds := range []int{32 << 10, 112 << 10} {
		d, err := dict.BuildZstdDict(half, dict.Options{MaxDictSize: ds, HashBytes: 6, ZstdLevel: zstd.SpeedBestCompression})
		if err != nil {
			fmt.Fprintf(w, "| – | – | – | %d KiB: %v | – | – |\n", ds>>10, err)
			continue
		}
		name := fmt.Sprintf("%d KiB, trained on half", ds>>10)
		if err := row("one per blob", "–", zstd.SpeedBestCompression, name, datas(blobs), d); err != nil {
			return err
		}
		for _, size := range []int{64 << 10, cas.FrameSize} {
			if err := row(fmt.Sprintf("%d KiB", size>>10), "grouped", zstd.SpeedBestCompression, name, frames(datas(grouped), size), d); err != nil {
				return err
			}
		}
	}
	return nil
}

// frames concatenates blobs into frames of at most size bytes, as packs
// fill them: a blob never straddles two frames.
func frames(blobs [][]byte, size int) [][]byte {
	var out [][]byte
	var cur []byte
	for _, b := range blobs {
		if len(cur) > 0 && len(cur)+len(b) > size {
			out = append(out, cur)
			cur = nil
		}
		cur = append(cur, b...)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
