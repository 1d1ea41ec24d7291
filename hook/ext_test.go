package hook

import "testing"

func TestH5ChooseExt(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	pdf := []byte("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n")
	for _, tc := range []struct {
		name string
		part Part
		want string
	}{
		{"text", Text("hello"), ".txt"},
		{"text with a MIME type", Part{Kind: KindText, Text: "x", MIME: "text/markdown"}, ".txt"},
		{"filename suffix", File("application/pdf", "q3.report.PDF", pdf), ".PDF"},
		{"last suffix only", File("", "archive.tar.gz", nil), ".gz"},
		{"filename wins over MIME", File("application/pdf", "data.csv", pdf), ".csv"},
		{"jpeg", Image("image/jpeg", nil), ".jpg"},
		{"png", Image("image/png", nil), ".png"},
		{"pdf MIME", File("application/pdf", "", nil), ".pdf"},
		{"MIME with parameters", File("text/csv; charset=utf-8", "", nil), ".csv"},
		{"unknown MIME", File("application/x-made-up", "", []byte("whatever")), ".bin"},
		{"sniffed png", Image("", png), ".png"},
		{"sniffed pdf", File("", "", pdf), ".pdf"},
		{"nothing known", File("", "", []byte{0, 1, 2, 3}), ".bin"},
		{"empty", File("", "", nil), ".bin"},
		{"dot file", File("", ".bashrc", []byte{0}), ".bin"},
		{"trailing dot", File("", "name.", []byte{0}), ".bin"},
		{"traversal", File("", "../../x", []byte{0}), ".bin"},
		{"traversal with suffix", File("", "../../x.sh", nil), ".sh"},
		{"suffix in a directory", File("", "a.d/b", []byte{0}), ".bin"},
		{"windows path", File("", `C:\Users\x\evil.exe`, nil), ".exe"},
		{"unsafe suffix", File("", "x.p$p", []byte{0}), ".bin"},
		{"suffix with space", File("", "x.t xt", []byte{0}), ".bin"},
		{"long suffix", File("", "x.abcdefghijklmnopq", []byte{0}), ".bin"},
		{"unicode suffix", File("", "x.tëxt", []byte{0}), ".bin"},
		{"MIME with a path", File("image/../../etc/passwd", "", png), ".bin"},
	} {
		if got := ChooseExt(tc.part); got != tc.want {
			t.Errorf("%s: ChooseExt = %q, want %q", tc.name, got, tc.want)
		}
	}
}
