package cas

import (
	"encoding/json"
	"fmt"
)

// marker is the content of MarkerFile.
type marker struct {
	Format     int    `json:"format"`
	Hash       string `json:"hash"`
	ShardWidth int    `json:"shard_width"`
}

// MarkerContent returns the content of a new store's layout marker, the
// same bytes for every writer, whatever holds the store.
func MarkerContent() []byte {
	b, _ := json.MarshalIndent(marker{Format: Format, Hash: "blake3", ShardWidth: 2}, "", "  ")
	return append(b, '\n')
}

// CheckMarker checks a layout marker's content: nil when this build reads
// the store, an error wrapping ErrNewerFormat when a newer build wrote it,
// and an error naming the problem when it is damaged or names another
// layout. file names the marker and store the store in the messages.
func CheckMarker(data []byte, file, store string) error {
	var m marker
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s is damaged: %w", file, err)
	}
	if m.Format > Format {
		return fmt.Errorf("%w: %s has format %d, this build reads formats up to %d; upgrade toolcas",
			ErrNewerFormat, store, m.Format, Format)
	}
	if m.Hash != "blake3" || m.ShardWidth != 2 || m.Format < 1 {
		return fmt.Errorf("%s names hash %q, shard width %d, format %d; this build reads blake3, width 2, format %d",
			file, m.Hash, m.ShardWidth, m.Format, Format)
	}
	return nil
}
