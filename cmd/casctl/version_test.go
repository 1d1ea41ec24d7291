package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"go run", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, "(devel), go1.26.0"},
		{"no version", debug.BuildInfo{GoVersion: "go1.26.0"}, "(devel), go1.26.0"},
		{"release", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3, go1.26.0"},
		{"checkout", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261130121857-0239f3c486c2"},
			Settings: vcs("vcs.revision", "0239f3c486c2d15550fffd43a38249aaa6853269", "vcs.time", "2026-11-30T12:18:57Z", "vcs.modified", "false")},
			"v0.0.0-20261130121857-0239f3c486c2, revision 0239f3c486c2 of 2026-11-30T12:18:57Z, go1.26.0"},
		{"local changes", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "0239f3c4", "vcs.modified", "true")},
			"(devel), revision 0239f3c4 with local changes, go1.26.0"},
	} {
		if got := versionOf(&tc.bi); got != tc.want {
			t.Errorf("%s: versionOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestVersionFromBuildInfo builds casctl with version control stamping on
// and checks that --version reports the revision it was built from. Go
// stamps nothing in some checkouts (a git worktree, for one): the test then
// says so and stops.
func TestVersionFromBuildInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds casctl")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	rev, err := exec.Command(git, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "casctl")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if info, err := exec.Command("go", "version", "-m", bin).Output(); err != nil || !strings.Contains(string(info), "vcs.revision=") {
		t.Skip("go build recorded no revision in this checkout")
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := `^casctl \S+, revision ` + regexp.QuoteMeta(strings.TrimSpace(string(rev))[:12]) + ` of \S+( with local changes)?, go1\.\d+`
	if !regexp.MustCompile(want).Match(out) {
		t.Errorf("casctl --version = %q, want %s", out, want)
	}
}
