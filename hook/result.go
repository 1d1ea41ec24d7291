package hook

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"

	"github.com/toolcas/toolcas/catalog"
)

// Kind is what a part of a tool result holds.
type Kind = catalog.Kind

// The kinds of part.
const (
	KindText  = catalog.KindText
	KindImage = catalog.KindImage
	KindFile  = catalog.KindFile
)

// A Part is one piece of a tool result: text, an image or a file.
type Part struct {
	Kind Kind
	// Text is the content of a text part.
	Text string
	// Data is the decoded payload of an image or file part.
	Data []byte
	// MIME is the media type of an image or file part, when known.
	MIME string
	// Filename is the name a tool gave a file part, when it gave one.
	Filename string
	// Source, when set, holds the content in place of Text or Data, which
	// stay empty: for a part too large to hold in memory.
	Source *Source
}

// A Source is a part's content kept outside memory (a tool result spooled
// to disk, say). A store that streams (store.Store) reads it in bounded
// memory; MemStore and DirStore read it whole.
type Source struct {
	// Open returns a new reader of the content from its first byte: a text
	// part's UTF-8 text, an image or file part's decoded payload. Every
	// reader yields the same bytes.
	Open func() (io.ReadCloser, error)
	// Size is the content's length in bytes.
	Size int64
	// Chars is what the part adds to a policy's size: the code points of
	// a text, the base64 length of a payload (policy.BinarySize).
	Chars int64
	// Head is the content's first bytes (all of it when short), which
	// previews and type sniffing see; HeadLen is how many a source should
	// keep.
	Head []byte
	// Tail, when set, is the content's last bytes (all of it when short),
	// which a head_tail preview shows; HeadLen is how many a source should
	// keep. A text whose Source has no Tail, and is longer than its Head,
	// is previewed by its head alone.
	Tail []byte
}

// HeadLen is how many first bytes of its content a Source keeps in Head:
// enough for a preview of any length a pointer shows, and for sniffing.
const HeadLen = 16 << 10

// readAll returns a part's bytes as stored: the UTF-8 text, or the payload,
// read from its Source when it has one.
func readAll(p Part) ([]byte, error) {
	if p.Source == nil {
		if p.Kind == KindText {
			return []byte(p.Text), nil
		}
		return p.Data, nil
	}
	rc, err := p.Source.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err == nil && int64(len(b)) != p.Source.Size {
		err = fmt.Errorf("source of %d bytes gave %d", p.Source.Size, len(b))
	}
	return b, err
}

// Text returns a text part.
func Text(s string) Part { return Part{Kind: KindText, Text: s} }

// Image returns an image part; mime may be empty.
func Image(mime string, data []byte) Part { return Part{Kind: KindImage, MIME: mime, Data: data} }

// File returns a file part; mime and filename may be empty.
func File(mime, filename string, data []byte) Part {
	return Part{Kind: KindFile, MIME: mime, Filename: filename, Data: data}
}

// ImageBase64 returns an image part from a standard base64 payload, as
// multimodal APIs carry images; invalid base64 is an error.
func ImageBase64(mime, b64 string) (Part, error) {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return Part{}, fmt.Errorf("image payload is not valid base64: %w", err)
	}
	return Image(mime, data), nil
}

// FileBase64 returns a file part from a standard base64 payload.
func FileBase64(mime, filename, b64 string) (Part, error) {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return Part{}, fmt.Errorf("file payload %q is not valid base64: %w", filename, err)
	}
	return File(mime, filename, data), nil
}

// Result is one tool call's result, as any agent framework has it.
type Result struct {
	// Tool, CallID and Arguments are the call the result answers (its
	// origin); they are kept as they are when the result is rewritten.
	Tool      string
	CallID    string
	Arguments json.RawMessage
	// Error marks a failed call, or a call a human rejected.
	Error bool
	Parts []Part
	// Meta carries framework metadata; offloading adds MetaKey.
	Meta map[string]any
}

// MetaKey is the metadata key under which a rewritten result lists what was
// offloaded. A result carrying it is never offloaded again.
const MetaKey = "tool_result_offloaded"

// Reference records where one part of a result went.
type Reference struct {
	Key    string `json:"key"`
	Path   string `json:"path"`
	Digest string `json:"digest"`
}

// IsPointer reports whether a result is a pointer left by offloading, so
// that it is never offloaded again and a compactor pruning old tool results
// keeps it: the pointer is small and is the only way back to the stored
// content. The presence of MetaKey marks a pointer, whatever its value (nil,
// false and an empty list included), as Haystack's pruning compactor
// decides: a framework that rewrote the value must not make the pointer
// prunable.
func IsPointer(r Result) bool {
	_, ok := r.Meta[MetaKey]
	return ok
}

// References returns the references a pointer's metadata records.
func References(r Result) []Reference {
	switch v := r.Meta[MetaKey].(type) {
	case []Reference:
		return append([]Reference(nil), v...)
	case []any:
		var out []Reference
		for _, e := range v {
			switch e := e.(type) {
			case string:
				out = append(out, Reference{Path: e})
			case map[string]any:
				ref := Reference{}
				ref.Key, _ = e["key"].(string)
				ref.Path, _ = e["path"].(string)
				ref.Digest, _ = e["digest"].(string)
				out = append(out, ref)
			}
		}
		return out
	}
	return nil
}

// clone returns a copy of r that shares no map with it.
func (r Result) clone() Result {
	c := r
	c.Parts = append([]Part(nil), r.Parts...)
	c.Meta = maps.Clone(r.Meta)
	return c
}

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
