package mcp

import (
	"net/url"
	"path"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
)

// uriBase returns the last element of a URI's path, a file name to store a
// resource under, or "" when it has none.
func uriBase(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	p := u.Path
	if p == "" {
		p = u.Opaque
	}
	b := path.Base(p)
	if b == "." || b == "/" || b == "" || strings.ContainsAny(b, "\x00\r\n") {
		return ""
	}
	return b
}

// contentOf maps the read tool's result parts back to content blocks:
// text as text, images as images, audio as audio, any other file as an
// embedded blob resource named by uri.
func contentOf(parts []hook.Part, uri string) []sdk.Content {
	out := make([]sdk.Content, 0, len(parts))
	for _, p := range parts {
		switch {
		case p.Kind == hook.KindText:
			out = append(out, &sdk.TextContent{Text: p.Text})
		case p.Kind == hook.KindImage:
			out = append(out, &sdk.ImageContent{MIMEType: or(p.MIME, "application/octet-stream"), Data: p.Data})
		case strings.HasPrefix(p.MIME, "audio/"):
			out = append(out, &sdk.AudioContent{MIMEType: p.MIME, Data: p.Data})
		default:
			out = append(out, &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{
				URI: uri, MIMEType: or(p.MIME, "application/octet-stream"), Blob: nonNil(p.Data)}})
		}
	}
	return out
}

// mimeOf is the MIME type a part is served under.
func mimeOf(kind hook.Kind, m string) string {
	if m != "" {
		return m
	}
	if kind == hook.KindText {
		return "text/plain"
	}
	return "application/octet-stream"
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
