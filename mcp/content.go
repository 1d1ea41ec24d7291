package mcp

import (
	"net/url"
	"path"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
)

// splitContent maps a tool result's content blocks to the parts the hook
// stores: text, image and audio blocks, and embedded resources, text or
// blob. A resource link is already a pointer, and stays in the result as
// it is; so does any block a tool result should not hold.
func splitContent(content []sdk.Content) (parts []hook.Part, kept []sdk.Content) {
	for _, c := range content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, hook.Text(c.Text))
		case *sdk.ImageContent:
			parts = append(parts, hook.Image(c.MIMEType, c.Data))
		case *sdk.AudioContent:
			parts = append(parts, hook.File(c.MIMEType, "", c.Data))
		case *sdk.EmbeddedResource:
			if c.Resource == nil {
				kept = append(kept, c)
				continue
			}
			r := c.Resource
			name := uriBase(r.URI)
			if r.Blob != nil {
				parts = append(parts, hook.File(r.MIMEType, name, r.Blob))
			} else {
				parts = append(parts, hook.Part{Kind: hook.KindText, Text: r.Text, MIME: r.MIMEType, Filename: name})
			}
		default:
			kept = append(kept, c)
		}
	}
	return parts, kept
}

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
