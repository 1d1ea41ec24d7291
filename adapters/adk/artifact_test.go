package toolcasadk_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"

	"google.golang.org/adk/v2/artifact"
	"google.golang.org/genai"

	toolcasadk "github.com/toolcas/toolcas/adapters/adk"
	"github.com/toolcas/toolcas/store"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir(), store.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newArtifacts(t *testing.T, st *store.Store) *toolcasadk.ArtifactService {
	t.Helper()
	s, err := toolcasadk.NewArtifactService(st)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// artifactScenario runs the same calls against a service and writes down
// what each returned, so that two services can be compared line by line.
func artifactScenario(ctx context.Context, s artifact.Service) []string {
	var out []string
	note := func(op string, v any, err error) {
		if err != nil {
			v = fmt.Sprintf("error (not exist: %v)", errors.Is(err, fs.ErrNotExist))
		}
		out = append(out, fmt.Sprintf("%s: %v", op, v))
	}
	part := func(p *genai.Part) string {
		if p == nil {
			return "nil"
		}
		if p.InlineData != nil {
			return fmt.Sprintf("inline %s %q %q", p.InlineData.MIMEType, p.InlineData.DisplayName, p.InlineData.Data)
		}
		return fmt.Sprintf("text %q", p.Text)
	}
	save := func(app, user, sess, name string, p *genai.Part) {
		r, err := s.Save(ctx, &artifact.SaveRequest{AppName: app, UserID: user, SessionID: sess, FileName: name, Part: p})
		var v any
		if r != nil {
			v = r.Version
		}
		note("save "+app+"/"+user+"/"+sess+"/"+name, v, err)
	}
	load := func(sess, name string, version int64) {
		r, err := s.Load(ctx, &artifact.LoadRequest{AppName: "app", UserID: "u1", SessionID: sess, FileName: name, Version: version})
		var v any
		if r != nil {
			v = part(r.Part)
		}
		note(fmt.Sprintf("load %s/%s@%d", sess, name, version), v, err)
	}
	list := func(app, user, sess string) {
		r, err := s.List(ctx, &artifact.ListRequest{AppName: app, UserID: user, SessionID: sess})
		var v any
		if r != nil {
			v = r.FileNames
		}
		note("list "+app+"/"+user+"/"+sess, v, err)
	}
	versions := func(sess, name string) {
		r, err := s.Versions(ctx, &artifact.VersionsRequest{AppName: "app", UserID: "u1", SessionID: sess, FileName: name})
		var v any
		if r != nil {
			v = r.Versions
		}
		note("versions "+sess+"/"+name, v, err)
	}
	meta := func(sess, name string, version int64) {
		r, err := s.GetArtifactVersion(ctx, &artifact.GetArtifactVersionRequest{AppName: "app", UserID: "u1", SessionID: sess, FileName: name, Version: version})
		var v any
		if r != nil {
			v = fmt.Sprintf("version %d %s", r.ArtifactVersion.Version, r.ArtifactVersion.MimeType)
		}
		note(fmt.Sprintf("meta %s/%s@%d", sess, name, version), v, err)
	}
	del := func(sess, name string, version int64) {
		err := s.Delete(ctx, &artifact.DeleteRequest{AppName: "app", UserID: "u1", SessionID: sess, FileName: name, Version: version})
		note(fmt.Sprintf("delete %s/%s@%d", sess, name, version), "ok", err)
	}
	png := &genai.Part{InlineData: &genai.Blob{Data: pngBytes, MIMEType: "image/png", DisplayName: "shot"}}
	pdf := &genai.Part{InlineData: &genai.Blob{Data: []byte("%PDF-1.4 a report"), MIMEType: "application/pdf"}}
	notes := &genai.Part{InlineData: &genai.Blob{Data: []byte("plain words\n"), MIMEType: "text/plain"}}

	save("app", "u1", "s1", "a.txt", genai.NewPartFromText("first"))
	save("app", "u1", "s1", "a.txt", genai.NewPartFromText("second"))
	save("app", "u1", "s1", "b.png", png)
	save("app", "u1", "s1", "report", pdf)
	save("app", "u1", "s1", "notes", notes)
	save("app", "u1", "s1", "user:prefs.json", genai.NewPartFromText(`{"theme":"dark"}`))
	save("app", "u1", "s2", "a.txt", genai.NewPartFromText("first"))
	save("other", "u1", "s1", "a.txt", genai.NewPartFromText("another app"))
	save("app", "u2", "s1", "a.txt", genai.NewPartFromText("another user"))
	save("app", "u1", "s1", "dir/a.txt", genai.NewPartFromText("x"))
	save("app", "u1", "s1", "", genai.NewPartFromText("x"))
	save("app", "u1", "s1", "empty", &genai.Part{})

	load("s1", "a.txt", 0)
	load("s1", "a.txt", 1)
	load("s1", "a.txt", 9)
	load("s1", "b.png", 0)
	load("s1", "report", 0)
	load("s1", "notes", 0)
	load("s1", "user:prefs.json", 0)
	load("s2", "user:prefs.json", 0)
	load("s2", "a.txt", 0)
	load("s3", "a.txt", 0)
	load("s1", "missing", 0)

	list("app", "u1", "s1")
	list("app", "u1", "s2")
	list("app", "u1", "s3")
	list("app", "u2", "s1")
	list("other", "u1", "s1")
	list("app", "u1", "")

	versions("s1", "a.txt")
	versions("s1", "b.png")
	versions("s1", "missing")
	meta("s1", "a.txt", 0)
	meta("s1", "a.txt", 1)
	meta("s1", "b.png", 0)
	meta("s1", "report", 0)
	meta("s1", "notes", 0)
	meta("s1", "a.txt", 5)

	del("s1", "a.txt", 2)
	versions("s1", "a.txt")
	load("s1", "a.txt", 0)
	save("app", "u1", "s1", "a.txt", genai.NewPartFromText("third"))
	versions("s1", "a.txt")
	del("s1", "a.txt", 0)
	versions("s1", "a.txt")
	load("s1", "a.txt", 0)
	list("app", "u1", "s1")
	save("app", "u1", "s1", "a.txt", genai.NewPartFromText("again"))
	versions("s1", "a.txt")
	del("s1", "never", 0)
	del("s1", "user:prefs.json", 0)
	list("app", "u1", "s2")
	del("s1", "dir/x", 0)
	return out
}

// The toolcas service does what adk-go's in-memory service does, call for
// call.
func TestArtifactServiceMatchesInMemory(t *testing.T) {
	ctx := context.Background()
	want := artifactScenario(ctx, artifact.InMemoryService())
	got := artifactScenario(ctx, newArtifacts(t, openStore(t)))
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("toolcas %s\n     in-memory %s", got[i], want[i])
		}
	}
	if testing.Verbose() {
		t.Log("\n" + strings.Join(want, "\n"))
	}
}

// Delete removes index rows and leaves the bytes to gc, which removes them
// once no row holds them; bytes another artifact holds stay.
func TestArtifactDeleteLeavesBytesToGC(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := newArtifacts(t, st)
	for _, name := range []string{"a.png", "b.png"} {
		if _, err := s.Save(ctx, &artifact.SaveRequest{AppName: "app", UserID: "u", SessionID: "s", FileName: name,
			Part: &genai.Part{InlineData: &genai.Blob{Data: pngBytes, MIMEType: "image/png"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Save(ctx, &artifact.SaveRequest{AppName: "app", UserID: "u", SessionID: "s", FileName: "c.txt", Part: genai.NewPartFromText("only here")}); err != nil {
		t.Fatal(err)
	}
	meta, err := s.GetArtifactVersion(ctx, &artifact.GetArtifactVersionRequest{AppName: "app", UserID: "u", SessionID: "s", FileName: "c.txt"})
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(meta.ArtifactVersion.CanonicalURI, "file://")
	for _, name := range []string{"a.png", "c.txt"} {
		if err := s.Delete(ctx, &artifact.DeleteRequest{AppName: "app", UserID: "u", SessionID: "s", FileName: name}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("bytes of a deleted artifact gone before gc: %v", err)
	}
	res, err := st.GC(ctx, store.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedBlobs != 1 {
		t.Errorf("gc removed %d blobs, want 1 (c.txt's; a.png's bytes are b.png's too)", res.RemovedBlobs)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after gc, %s: %v, want it gone", path, err)
	}
	r, err := s.Load(ctx, &artifact.LoadRequest{AppName: "app", UserID: "u", SessionID: "s", FileName: "b.png"})
	if err != nil || string(r.Part.InlineData.Data) != string(pngBytes) {
		t.Errorf("b.png after gc: %v, %v; want its bytes", r, err)
	}
}

// Concurrent saves of one artifact get distinct versions, 1 to n.
func TestArtifactConcurrentSaves(t *testing.T) {
	ctx := context.Background()
	s := newArtifacts(t, openStore(t))
	const n = 16
	got := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := s.Save(ctx, &artifact.SaveRequest{AppName: "app", UserID: "u", SessionID: "s", FileName: "log.txt",
				Part: genai.NewPartFromText(fmt.Sprintf("version from writer %d", i))})
			if r != nil {
				got[i] = r.Version
			}
			errs[i] = err
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		seen[got[i]] = true
	}
	for v := int64(1); v <= n; v++ {
		if !seen[v] {
			t.Errorf("versions %v: %d missing", got, v)
		}
	}
	for i := range n {
		r, err := s.Load(ctx, &artifact.LoadRequest{AppName: "app", UserID: "u", SessionID: "s", FileName: "log.txt", Version: got[i]})
		if err != nil || r.Part.Text != fmt.Sprintf("version from writer %d", i) {
			t.Errorf("version %d: %v, %v; want writer %d's text", got[i], r, err, i)
		}
	}
}
