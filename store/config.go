package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolcas/toolcas/hook"
)

// TypeStore is the store's type name in a hook's configuration.
const TypeStore = "toolcas.store.Store"

type params struct {
	// Dir is the store's directory, or its s3:// URL (see Open).
	Dir        string `json:"dir"`
	Durability string `json:"durability,omitempty"`
	// ReadOnly opens an existing store read-only (ReadOnly), for a read-back
	// tool in a sandbox that cannot write.
	ReadOnly bool `json:"read_only,omitempty"`
	// AutoMaintenance, when false, stops writes from starting maintenance
	// on their own (WithoutAutoMaintenance); unset or true, they do.
	AutoMaintenance *bool `json:"auto_maintenance,omitempty"`
}

func init() {
	hook.RegisterStore(TypeStore, loadStore)
}

// loadStore opens the store a hook's configuration names.
func loadStore(raw json.RawMessage) (hook.Store, error) {
	var p params
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return nil, fmt.Errorf("%s: %w", TypeStore, err)
	}
	if p.Dir == "" {
		return nil, fmt.Errorf("%s: no dir", TypeStore)
	}
	var opts []Option
	if p.Durability != "" {
		var err error
		if opts, err = DurabilityOptions(p.Durability); err != nil {
			return nil, fmt.Errorf("%s: %w", TypeStore, err)
		}
	}
	if p.AutoMaintenance != nil && !*p.AutoMaintenance {
		opts = append(opts, WithoutAutoMaintenance())
	}
	if p.ReadOnly {
		return Open(context.Background(), p.Dir, append(opts, ReadOnly())...)
	}
	return Open(context.Background(), p.Dir, append(opts, WithCreate())...)
}

// StoreConfig returns the store's configuration, for saving a hook.
func (s *Store) StoreConfig() (string, any) {
	p := params{Dir: s.Location(), Durability: s.Durability(), ReadOnly: s.readOnly}
	if s.auto.off && !s.readOnly {
		off := false
		p.AutoMaintenance = &off
	}
	return TypeStore, p
}
