package debezium_test

import (
	"path/filepath"
	"testing"

	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/decode/debezium"
	"github.com/cdclake/cdclake/handlers/decode/decodetest"
)

// FuzzDecode runs arbitrary messages through the unwrap stage, Detect,
// Decode and Columns (decodetest.Fuzz), seeded with every fixture.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*.ndjson"))
	decodetest.Fuzz(f, func() ([]decode.Decoder, error) {
		d, err := debezium.New(debezium.Options{})
		return []decode.Decoder{d}, err
	}, files...)
}
