package hook

import (
	"mime"
	"path"
	"strings"

	"github.com/gabriel-vasile/mimetype"

	"github.com/toolcas/toolcas/cas"
)

// fallbackExt is the extension of a part whose type nothing tells.
const fallbackExt = ".bin"

// ChooseExt returns the extension a part is stored under, so that file tools
// that go by extension open it correctly: ".txt" for text; else the last
// suffix of the file name, when it is a safe extension; else the usual
// extension of the MIME type (image/jpeg gives .jpg); else, when no MIME
// type is given, that of the type the bytes sniff as; else ".bin". Nothing
// of an unsafe file name ("../../x", "a/b.c/d", ".bashrc") reaches the
// extension.
func ChooseExt(p Part) string {
	if p.Kind == KindText {
		return ".txt"
	}
	if ext := filenameExt(p.Filename); ext != "" {
		return ext
	}
	if p.MIME != "" {
		if ext := mimeExt(p.MIME); ext != "" {
			return ext
		}
		return fallbackExt
	}
	head := p.Data
	if p.Source != nil {
		head = p.Source.Head
	}
	if len(head) > 0 {
		if m := mimetype.Detect(head); m != nil && !m.Is("application/octet-stream") {
			if cas.CheckExt(m.Extension()) == nil {
				return m.Extension()
			}
		}
	}
	return fallbackExt
}

// filenameExt returns the last suffix of a file name's final element, as
// Python's PurePath.suffix does, or "" when it has none or it is not a valid
// extension.
func filenameExt(name string) string {
	name = strings.ReplaceAll(name, "\\", "/")
	base := path.Base(name)
	if base == "." || base == "/" || base == ".." {
		return ""
	}
	i := strings.LastIndexByte(base, '.')
	if i <= 0 || i == len(base)-1 {
		return ""
	}
	ext := base[i:]
	if cas.CheckExt(ext) != nil {
		return ""
	}
	return ext
}

// mimeExt returns the usual extension of a media type, or "".
func mimeExt(m string) string {
	mt, _, err := mime.ParseMediaType(m)
	if err != nil {
		return ""
	}
	if t := mimetype.Lookup(mt); t != nil && cas.CheckExt(t.Extension()) == nil {
		return t.Extension()
	}
	if exts, err := mime.ExtensionsByType(mt); err == nil && len(exts) > 0 {
		for _, e := range exts {
			if cas.CheckExt(e) == nil {
				return e
			}
		}
	}
	return ""
}
