package toolcasadk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"google.golang.org/adk/v2/artifact"
	"google.golang.org/genai"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/store"
)

// userScope is the session of artifacts whose name starts with "user:",
// which every session of the user shares, as adk-go's services do.
const userScope = "user"

// ArtifactService is an artifact.Service keeping artifacts in a toolcas
// store. An artifact (app, user, session, file name) is a key of the
// session's run: the app is its tool column, user and file name its call
// column (Key). Each Save is a new version of the key; versions are
// numbered as adk-go numbers them, the newest left plus one. Delete removes
// index rows and leaves the bytes to gc. Identical bytes are stored once,
// whatever artifacts hold them.
type ArtifactService struct {
	st *store.Store
}

var _ artifact.Service = (*ArtifactService)(nil)

// NewArtifactService returns an artifact service over st.
func NewArtifactService(st *store.Store) (*ArtifactService, error) {
	if st == nil {
		return nil, errors.New("toolcasadk: artifact service with no store")
	}
	return &ArtifactService{st: st}, nil
}

// Key returns the key an artifact's versions are written under.
func (s *ArtifactService) Key(app, user, session, name string) hook.Key {
	if strings.HasPrefix(name, "user:") {
		session = userScope
	}
	return hook.Key{Run: Run(session), Tool: app, CallID: user + "/" + name, Part: -1, Ext: hook.ChooseExt(hook.File("", name, nil))}
}

var errNotFound = fmt.Errorf("artifact not found: %w", fs.ErrNotExist)

// Save stores a new version of an artifact: its text, or its inline data
// with MIME type and display name.
func (s *ArtifactService) Save(ctx context.Context, req *artifact.SaveRequest) (*artifact.SaveResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("request validation failed: %w", err)
	}
	k := s.Key(req.AppName, req.UserID, req.SessionID, req.FileName)
	p := hook.Text(req.Part.Text)
	if d := req.Part.InlineData; d != nil {
		p = hook.File(d.MIMEType, d.DisplayName, d.Data)
		if strings.HasPrefix(d.MIMEType, "image/") {
			p = hook.Image(d.MIMEType, d.Data)
			p.Filename = d.DisplayName
		}
	}
	if err := k.Check(); err != nil {
		return nil, fmt.Errorf("toolcasadk: save artifact %s: %w", req.FileName, err)
	}
	stored, err := s.st.Write(ctx, []hook.Item{{Key: k, Part: p}})
	if err != nil {
		return nil, fmt.Errorf("toolcasadk: save artifact %s: %w", req.FileName, err)
	}
	return &artifact.SaveResponse{Version: int64(stored[0].Version)}, nil
}

// versions returns the rows of an artifact, newest first.
func (s *ArtifactService) versions(ctx context.Context, app, user, session, name string) ([]store.Part, error) {
	k := s.Key(app, user, session, name)
	rows, err := s.st.List(ctx, store.ListOptions{Run: k.Run, Tool: app, AllVersions: true})
	if err != nil {
		return nil, fmt.Errorf("toolcasadk: artifact %s: %w", name, err)
	}
	rows = slices.DeleteFunc(rows, func(p store.Part) bool { return p.CallID != k.CallID || p.Step != 0 || p.Part != -1 })
	slices.SortFunc(rows, func(a, b store.Part) int { return b.Version - a.Version })
	return rows, nil
}

// version returns the row of one version, or of the newest when v is 0.
func (s *ArtifactService) version(ctx context.Context, app, user, session, name string, v int64) (store.Part, error) {
	rows, err := s.versions(ctx, app, user, session, name)
	if err != nil {
		return store.Part{}, err
	}
	for _, r := range rows {
		if v <= 0 || int64(r.Version) == v {
			return r, nil
		}
	}
	return store.Part{}, errNotFound
}

// Load returns a version of an artifact, the newest when none is asked for.
func (s *ArtifactService) Load(ctx context.Context, req *artifact.LoadRequest) (*artifact.LoadResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("request validation failed: %w", err)
	}
	row, err := s.version(ctx, req.AppName, req.UserID, req.SessionID, req.FileName, req.Version)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := s.st.Copy(ctx, &buf, row); err != nil {
		return nil, fmt.Errorf("toolcasadk: load artifact %s: %w", req.FileName, err)
	}
	if row.Kind == hook.KindText {
		return &artifact.LoadResponse{Part: &genai.Part{Text: buf.String()}}, nil
	}
	return &artifact.LoadResponse{Part: &genai.Part{InlineData: &genai.Blob{Data: buf.Bytes(), MIMEType: row.MIME, DisplayName: row.Filename}}}, nil
}

// Delete removes a version of an artifact, or all of them when none is
// named: their index rows go, their bytes stay until gc finds them unused.
// Deleting what does not exist is not an error.
func (s *ArtifactService) Delete(ctx context.Context, req *artifact.DeleteRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("request validation failed: %w", err)
	}
	rows, err := s.versions(ctx, req.AppName, req.UserID, req.SessionID, req.FileName)
	if err != nil || len(rows) == 0 {
		return err
	}
	if _, err := s.st.DeleteVersion(ctx, rows[0].Key, int(req.Version)); err != nil {
		return fmt.Errorf("toolcasadk: delete artifact %s: %w", req.FileName, err)
	}
	return nil
}

// List returns the names of a session's artifacts and of its user's,
// sorted.
func (s *ArtifactService) List(ctx context.Context, req *artifact.ListRequest) (*artifact.ListResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("request validation failed: %w", err)
	}
	names := []string{}
	prefix := req.UserID + "/"
	for _, run := range []string{Run(req.SessionID), Run(userScope)} {
		rows, err := s.st.List(ctx, store.ListOptions{Run: run, Tool: req.AppName})
		if err != nil {
			return nil, fmt.Errorf("toolcasadk: list artifacts: %w", err)
		}
		for _, r := range rows {
			if name, ok := strings.CutPrefix(r.CallID, prefix); ok && r.Step == 0 && r.Part == -1 && !strings.Contains(name, "/") {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return &artifact.ListResponse{FileNames: slices.Compact(names)}, nil
}

// Versions lists the versions of an artifact, newest first.
func (s *ArtifactService) Versions(ctx context.Context, req *artifact.VersionsRequest) (*artifact.VersionsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("request validation failed: %w", err)
	}
	rows, err := s.versions(ctx, req.AppName, req.UserID, req.SessionID, req.FileName)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errNotFound
	}
	vs := make([]int64, len(rows))
	for i, r := range rows {
		vs[i] = int64(r.Version)
	}
	return &artifact.VersionsResponse{Versions: vs}, nil
}

// GetArtifactVersion describes a version of an artifact, the newest when
// none is asked for: its MIME type ("text/plain" for text, as adk-go's
// services say), when it was saved, and the path of its bytes as a file
// URI.
func (s *ArtifactService) GetArtifactVersion(ctx context.Context, req *artifact.GetArtifactVersionRequest) (*artifact.GetArtifactVersionResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("request validation failed: %w", err)
	}
	row, err := s.version(ctx, req.AppName, req.UserID, req.SessionID, req.FileName, req.Version)
	if err != nil {
		return nil, err
	}
	mime := row.MIME
	if row.Kind == hook.KindText {
		mime = "text/plain"
	}
	return &artifact.GetArtifactVersionResponse{ArtifactVersion: &artifact.ArtifactVersion{
		Version:      int64(row.Version),
		MimeType:     mime,
		CreateTime:   row.CreatedAt,
		CanonicalURI: "file://" + s.st.Path(row.Blob),
	}}, nil
}
