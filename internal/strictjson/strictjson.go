// Package strictjson decodes configuration as toolcas reads it: a mistyped
// option is an error rather than ignored.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// Decode decodes one JSON value into v, refusing unknown fields and
// trailing data.
func Decode(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// Canonical maps the type name of a Haystack component (a class, under any
// haystack.* module, that classes names) to toolcas's type for it, and says
// whether it did; any other name is returned as it is.
func Canonical(name string, classes map[string]string) (string, bool) {
	if strings.HasPrefix(name, "haystack.") {
		if ours, ok := classes[name[strings.LastIndexByte(name, '.')+1:]]; ok {
			return ours, true
		}
	}
	return name, false
}
