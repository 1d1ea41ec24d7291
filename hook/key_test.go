package hook

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestKeyString(t *testing.T) {
	for _, tc := range []struct {
		k    Key
		want string
	}{
		{Key{Run: "run-7", Step: 2, Tool: "search", CallID: "call-123", Part: -1, Ext: ".txt"}, "run-7/2_search_call-123.txt"},
		{Key{Run: "r", Step: 0, Tool: "read_file", CallID: "", Index: 3, Part: -1, Ext: ".txt"}, "r/0_read_file_call3.txt"},
		{Key{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: 2, Ext: ".png"}, "r/1_t_c_2.png"},
		{Key{Run: "r", Step: 1, Tool: "t", CallID: "toolu_01A", Part: -1, Ext: ".txt"}, "r/1_t_toolu%5F01A.txt"},
		{Key{Run: "r", Step: 1, Tool: "a/b", CallID: "../x", Part: -1, Ext: ".txt"}, "r/1_a%2Fb_..%2Fx.txt"},
		{Key{Run: "r", Step: 1, Tool: "q'\"%~", CallID: "c", Part: -1, Ext: ".txt"}, "r/1_q%27%22%25%7E_c.txt"},
		{Key{Run: "r", Step: 1, Tool: "nl\nnul\x00", CallID: "c", Part: -1, Ext: ".txt"}, "r/1_nl%0Anul%00_c.txt"},
		{Key{Run: "r", Step: 1, Tool: "bad\xffutf8", CallID: "c", Part: -1, Ext: ".txt"}, "r/1_bad%FFutf8_c.txt"},
		{Key{Run: "r", Step: 1, Tool: "rtl\u202eevil", CallID: "c", Part: -1, Ext: ".txt"}, "r/1_rtl%E2%80%AEevil_c.txt"},
		{Key{Run: "r", Step: 1, Tool: "ünï", CallID: "c", Part: -1, Ext: ".txt"}, "r/1_ünï_c.txt"},
		// An id that would read as a part number or as an id-less call.
		{Key{Run: "r", Step: 1, Tool: "t", CallID: "0", Part: -1, Ext: ".txt"}, "r/1_t_%30.txt"},
		{Key{Run: "r", Step: 1, Tool: "t", CallID: "call0", Part: -1, Ext: ".txt"}, "r/1_t_%63all0.txt"},
	} {
		if got := tc.k.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.k, got, tc.want)
		}
	}
}

func TestKeyShortensLongNames(t *testing.T) {
	long := strings.Repeat("a", 65)
	k := Key{Run: "r", Step: 1, Tool: "t", CallID: long, Part: -1, Ext: ".txt"}
	got := k.String()
	if !strings.HasPrefix(got, "r/1_t_aaaaaaaaaaaaaaaa~") || len(got) != len("r/1_t_")+16+1+8+4 {
		t.Errorf("long call id renders %q", got)
	}
	k.CallID = long[:64]
	if got := k.String(); got != "r/1_t_"+long[:64]+".txt" {
		t.Errorf("64-byte call id renders %q, want it whole", got)
	}
	// The cut never splits an escape or a character.
	k.CallID = strings.Repeat("é/", 40)
	got = k.String()
	short := strings.TrimSuffix(strings.TrimPrefix(got, "r/1_t_"), ".txt")
	prefix := short[:strings.IndexByte(short, '~')]
	if !utf8.ValidString(prefix) || strings.HasSuffix(prefix, "%") || strings.HasSuffix(prefix, "%2") {
		t.Errorf("cut split something: %q", prefix)
	}
}

func TestCheckRun(t *testing.T) {
	for _, run := range []string{"default", "run-7", "A.b_c-9", strings.Repeat("r", 40)} {
		if err := CheckRun(run); err != nil {
			t.Errorf("CheckRun(%q) = %v", run, err)
		}
	}
	for _, run := range []string{"", ".", "..", "../x", "a/b", "-x", ".hidden", "a b", "é", strings.Repeat("r", 41), "a\x00"} {
		if err := CheckRun(run); err == nil {
			t.Errorf("CheckRun(%q) accepted", run)
		}
	}
}

// FuzzKeyString checks that a rendered key is always one line of at most
// 200 bytes that stays in its run's directory, and that distinct tool names
// and call ids never render alike.
func FuzzKeyString(f *testing.F) {
	for _, s := range [][2]string{
		{"search", "call-123"}, {"read_file", "call_abc"}, {"a_b", "c"}, {"a", "b_c"}, {"t", ""}, {"t", "call0"},
		{"t", "0"}, {"a/b'c\"d\ne", "../../x"}, {strings.Repeat("t", 300), strings.Repeat("c", 10000)},
		{"\xff\xfe", "\u202e\u2028"}, {"%41", "A"}, {"~", "~"},
	} {
		f.Add(s[0], s[1], s[0]+"x", s[1])
	}
	f.Fuzz(func(t *testing.T, tool1, call1, tool2, call2 string) {
		k1 := Key{Run: "run-12345678901234567890123456789012345", Step: MaxStep, Tool: tool1, CallID: call1, Index: MaxIndex, Part: MaxPart, Ext: ".abcdefghijklmnop"}
		k2 := k1
		k2.Tool, k2.CallID = tool2, call2
		s1, s2 := k1.String(), k2.String()
		for _, s := range []string{s1, s2} {
			if len(s) > 200 {
				t.Fatalf("key of %d bytes: %q", len(s), s)
			}
			if !utf8.ValidString(s) {
				t.Fatalf("key is not UTF-8: %q", s)
			}
			for _, r := range s {
				if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' || r == '\u0085' {
					t.Fatalf("key has a line-breaking or control character: %q", s)
				}
			}
			if strings.Count(s, "/") != 1 || strings.ContainsAny(s, "\\'\"") {
				t.Fatalf("key escapes its directory or has quotes: %q", s)
			}
		}
		same := tool1 == tool2 && call1 == call2
		if !same && s1 == s2 {
			t.Fatalf("(%q, %q) and (%q, %q) both render %q", tool1, call1, tool2, call2, s1)
		}
		if same && s1 != s2 {
			t.Fatal("rendering is not deterministic")
		}
	})
}
