package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// size humanises a byte count: 18 KiB.
func size(n int64) string {
	if n < 0 {
		return "-" + humanize.IBytes(uint64(-n))
	}
	return humanize.IBytes(uint64(n))
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table returns a writer that aligns tab-separated columns.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

var daysRE = regexp.MustCompile(`(\d+(?:\.\d+)?)d`)

// parseDuration accepts Go durations (90m, 1h30m) and days (7d, 1d12h).
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	conv := daysRE.ReplaceAllStringFunc(s, func(m string) string {
		f, _ := strconv.ParseFloat(strings.TrimSuffix(m, "d"), 64)
		return strconv.FormatFloat(f*24, 'f', -1, 64) + "h"
	})
	d, err := time.ParseDuration(conv)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want Go syntax such as 90m or 1h30m, or days such as 7d)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %q", s)
	}
	return d, nil
}

// durationFlag is a flag.Value taking parseDuration's syntax.
type durationFlag struct{ d *time.Duration }

// String is the flag's default in help: nothing for zero, which says no
// more than the flag's absence.
func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return ""
	}
	return fmtDuration(*f.d)
}

// fmtDuration prints a duration without its zero units: 1h, 1h30m, 36h.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}
func (f durationFlag) Type() string { return "duration" }

// progress returns a progress bar on stderr when it is a terminal and
// output is for humans, else nil. A nil bar ignores every call.
func progress(w io.Writer, jsonOut bool, total int64, what string, bytes bool) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if jsonOut || !ok || !term.IsTerminal(int(f.Fd())) || total <= 0 {
		return nil
	}
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(bytes),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return humanize.Time(t)
}

// age is how long ago t was, in the largest unit that fits: 40s, 5m, 3h,
// 12d; a table's column stays narrow.
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// count says n things: "1 key", "3 keys", "0 keys". Every count casctl
// prints for people goes through it (or plural).
func count[N ~int | ~int64](n N, thing string) string {
	return fmt.Sprintf("%d %s", n, plural(n, thing))
}

// plural is a thing's name as n of them are said: "key" for one, "keys"
// for any other number. Every thing casctl counts takes an s.
func plural[N ~int | ~int64](n N, thing string) string {
	if n == 1 {
		return thing
	}
	return thing + "s"
}

// names lists what xs say of themselves.
func names[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}
