package hook

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestH4KeyString checks keys against Haystack's file names: ordinary call
// ids (letters, digits, '-', '_', '.') appear as they are, under the run.
func TestH4KeyString(t *testing.T) {
	for _, tc := range []struct {
		k    Key
		want string
	}{
		// Haystack's own examples, and real ids from OpenAI, DeepSeek, Anthropic.
		{Key{Run: "r", Step: 2, Tool: "search", CallID: "call_00_yjs8KtEk", Part: -1, Ext: ".txt"}, "r/2_search_call_00_yjs8KtEk.txt"},
		{Key{Run: "r", Step: 1, Tool: "a", CallID: "1", Part: -1, Ext: ".txt"}, "r/1_a_1.txt"},
		{Key{Run: "r", Step: 3, Tool: "search", CallID: "call7", Part: -1, Ext: ".txt"}, "r/3_search_call7.txt"},
		{Key{Run: "r", Step: 1, Tool: "t", CallID: "toolu_01A09q90qw90lq917835lq9", Part: -1, Ext: ".txt"}, "r/1_t_toolu_01A09q90qw90lq917835lq9.txt"},
		{Key{Run: "r", Step: 6, Tool: "bash", CallID: "call_00_yjs8KtEkJwKce4iYBATgWTjG", Part: -1, Ext: ".txt"}, "r/6_bash_call_00_yjs8KtEkJwKce4iYBATgWTjG.txt"},
		{Key{Run: "run-7", Step: 2, Tool: "search", CallID: "call-123", Part: -1, Ext: ".txt"}, "run-7/2_search_call-123.txt"},
		{Key{Run: "r", Step: 0, Tool: "read_file", CallID: "", Index: 3, Part: -1, Ext: ".txt"}, "r/0_read_file_call3.txt"},
		{Key{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: 2, Ext: ".png"}, "r/1_t_c_2.png"},
		{Key{Run: "r", Step: 1, Tool: "t", CallID: "0", Part: -1, Ext: ".txt"}, "r/1_t_0.txt"},
		{Key{Run: "r", Step: 1, Tool: "t", CallID: "call0", Part: -1, Ext: ".txt"}, "r/1_t_call0.txt"},
		{Key{Run: "r", Step: 1, Tool: "t", CallID: "a.b-c", Part: -1, Ext: ".txt"}, "r/1_t_a.b-c.txt"},
		// Only what cannot stand in a one-line key is escaped.
		{Key{Run: "r", Step: 1, Tool: "a/b", CallID: "../x", Part: -1, Ext: ".txt"}, "r/1_a%2Fb_..%2Fx.txt"},
		{Key{Run: "r", Step: 1, Tool: "q'\"%~`\\", CallID: "c", Part: -1, Ext: ".txt"}, "r/1_q%27%22%25%7E%60%5C_c.txt"},
		{Key{Run: "r", Step: 1, Tool: "nl\nnul\x00del\x7f", CallID: "c", Part: -1, Ext: ".txt"}, "r/1_nl%0Anul%00del%7F_c.txt"},
		{Key{Run: "r", Step: 1, Tool: "bad\xffutf8", CallID: "c", Part: -1, Ext: ".txt"}, "r/1_bad%FFutf8_c.txt"},
		{Key{Run: "r", Step: 1, Tool: "rtl\u202eevil", CallID: "c", Part: -1, Ext: ".txt"}, "r/1_rtl%E2%80%AEevil_c.txt"},
		{Key{Run: "r", Step: 1, Tool: "ünï", CallID: "c", Part: -1, Ext: ".txt"}, "r/1_%C3%BCn%C3%AF_c.txt"},
		{Key{Run: "r", Step: 1, Tool: "mcp:fs read", CallID: "c", Part: -1, Ext: ".txt"}, "r/1_mcp:fs read_c.txt"},
		// Run names as real agents have them.
		{Key{Run: "user:42/chat:7", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"}, "user:42%2Fchat:7/1_t_c.txt"},
		{Key{Run: "session-0f8fad5b-d9cb-469f-a165-70867728950e", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"}, "session-0f8fad5b-d9cb-469f-a165-70867728950e/1_t_c.txt"},
		{Key{Run: "..", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"}, "%2E%2E/1_t_c.txt"},
		{Key{Run: ".", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"}, "%2E/1_t_c.txt"},
		{Key{Run: "../x", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"}, "..%2Fx/1_t_c.txt"},
	} {
		if got := tc.k.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.k, got, tc.want)
		}
	}
}

func TestKeyRenderSuffix(t *testing.T) {
	k := Key{Run: "r", Step: 2, Tool: "a", CallID: "b_c", Part: -1, Ext: ".txt"}
	for n, want := range map[int]string{0: "r/2_a_b_c.txt", 1: "r/2_a_b_c.txt", 2: "r/2_a_b_c~2.txt", 13: "r/2_a_b_c~13.txt"} {
		if got := k.Render(n); got != want {
			t.Errorf("Render(%d) = %q, want %q", n, got, want)
		}
	}
	k.Part = 0
	if got := k.Render(2); got != "r/2_a_b_c_0~2.txt" {
		t.Errorf("Render(2) of a part = %q", got)
	}
}

func TestKeySameCall(t *testing.T) {
	a := Key{Run: "r", Step: 3, Tool: "t", CallID: "", Index: 7, Part: -1, Ext: ".txt"}
	b := a
	b.CallID = "call7"
	c := a
	c.Index = 6
	d := a
	d.Ext = ".png"
	switch {
	case !a.SameCall(a), !a.SameCall(d):
		t.Error("a key is not the same call as itself")
	case a.SameCall(b), a.SameCall(c):
		t.Error("different calls taken for the same")
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
	// The cut never splits an escape.
	k.CallID = strings.Repeat("é/", 40)
	got = k.String()
	short := strings.TrimSuffix(strings.TrimPrefix(got, "r/1_t_"), ".txt")
	prefix := short[:strings.IndexByte(short, '~')]
	if u, err := url.PathUnescape(prefix); err != nil || !utf8.ValidString(u) {
		t.Errorf("cut split an escape or a character: %q", prefix)
	}
	// A long run is shortened to one file name, and stays distinct.
	r1 := strings.Repeat("é", 128)
	r2 := strings.Repeat("é", 127) + "e"
	e1, e2 := EscapeRun(r1), EscapeRun(r2)
	if len(e1) > 128 || e1 == e2 || !strings.Contains(e1, "~") {
		t.Errorf("long runs escape to %q and %q", e1, e2)
	}
	for _, r := range []string{r1, strings.Repeat("日本", 60), strings.Repeat("🦀", 60), strings.Repeat("a\xff", 100)} {
		e := EscapeRun(r)
		u, err := url.PathUnescape(e[:strings.LastIndexByte(e, '~')])
		if err != nil || !strings.HasPrefix(r, u) || (utf8.ValidString(r) && !utf8.ValidString(u)) || len(u) == 0 {
			t.Errorf("EscapeRun(%q) = %q: its kept prefix %q splits a character", r, e, u)
		}
	}
	if e := EscapeRun(strings.Repeat("r", 128)); e != strings.Repeat("r", 128) {
		t.Errorf("a 128-byte run is shortened: %q", e)
	}
}

func TestCheckRun(t *testing.T) {
	for _, run := range []string{"default", "run-7", "A.b_c-9", "user:42/chat:7", "..", "a b", "é", "-x",
		"session-0f8fad5b-d9cb-469f-a165-70867728950e", strings.Repeat("r", MaxRunLen)} {
		if err := CheckRun(run); err != nil {
			t.Errorf("CheckRun(%q) = %v", run, err)
		}
	}
	for _, run := range []string{"", strings.Repeat("r", MaxRunLen+1), "a\x00", "\xff"} {
		if err := CheckRun(run); err == nil {
			t.Errorf("CheckRun(%q) accepted", run)
		}
	}
}

// FuzzKeyString checks that a rendered key is always one line of at most
// 1024 bytes in its run's directory, that renders alike only where the
// names are alike or split differently at an underscore, and that escaping
// can be undone.
func FuzzKeyString(f *testing.F) {
	for _, s := range [][3]string{
		{"r", "search", "call-123"}, {"r", "read_file", "call_abc"}, {"r", "a_b", "c"}, {"user:42/chat:7", "a", "b_c"}, {"r", "t", ""},
		{"..", "t", "call0"}, {"r", "t", "0"}, {"r", "a/b'c\"d\ne", "../../x"}, {strings.Repeat("é", 128), strings.Repeat("t", 300), strings.Repeat("c", 10000)},
		{"\u2028", "\xff\xfe", "\u202e\u2028"}, {"%41", "%41", "A"}, {"~", "~", "~"},
	} {
		f.Add(s[0], s[1], s[2], s[1]+"x", s[2])
	}
	f.Fuzz(func(t *testing.T, run, tool1, call1, tool2, call2 string) {
		if CheckRun(run) != nil {
			return
		}
		k1 := Key{Run: run, Step: MaxStep, Tool: tool1, CallID: call1, Index: MaxIndex, Part: MaxPart, Ext: ".abcdefghijklmnop"}
		k2 := k1
		k2.Tool, k2.CallID = tool2, call2
		s1, s2 := k1.Render(999), k2.String()
		for _, s := range []string{s1, s2} {
			if len(s) > 1024 {
				t.Fatalf("key of %d bytes: %q", len(s), s)
			}
			if !utf8.ValidString(s) {
				t.Fatalf("key is not UTF-8: %q", s)
			}
			for i := 0; i < len(s); i++ {
				if s[i] < 0x20 || s[i] >= 0x7f {
					t.Fatalf("key has a control or non-ASCII byte: %q", s)
				}
			}
			if strings.Count(s, "/") != 1 || strings.ContainsAny(s, "\\'\"`") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, "./") {
				t.Fatalf("key escapes its directory or has quotes: %q", s)
			}
			first := s[:strings.IndexByte(s, '/')]
			if len(first) > 128 {
				t.Fatalf("run element of %d bytes: %q", len(first), s)
			}
		}
		// Unless shortened, each escaped name unescapes to the original.
		if e := escape(tool1); !strings.Contains(e, "~") {
			if u, err := url.PathUnescape(e); err != nil || u != tool1 {
				t.Fatalf("escape(%q) = %q, unescapes to %q, %v", tool1, e, u, err)
			}
		}
		if k2.String() != k2.Render(1) {
			t.Fatal("String and Render(1) differ")
		}
	})
}
