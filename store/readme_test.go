package store_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeShowsExample keeps the README's library example identical to
// example_test.go, which go test compiles and runs: the README's code
// compiles as printed and prints what it says.
func TestReadmeShowsExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## The library, in one runnable example\n\n```go\n"
	_, rest, ok := strings.Cut(string(readme), heading)
	if !ok {
		t.Fatalf("README.md has no %q", heading)
	}
	block, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("README.md: the example's code block does not end")
	}
	if block != string(example) {
		t.Errorf("README.md's example differs from store/example_test.go:\n%s", firstDiff(block, string(example)))
	}
}

// firstDiff shows the first line where two texts differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + itoa(i+1) + ":\n  README:  " + x + "\n  example: " + y
		}
	}
	return ""
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
