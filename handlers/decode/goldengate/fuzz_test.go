package goldengate

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/decode/decodetest"
)

// fixtureFiles are the fuzz seeds: every fixture.
func fixtureFiles() []string {
	var out []string
	for _, fx := range fixtures {
		out = append(out, filepath.Join(fixtureDir, fx.name+".ndjson"))
	}
	return out
}

// FuzzDataStreams fuzzes the Data Streams decoder with its default and
// custom options (decodetest.Fuzz).
func FuzzDataStreams(f *testing.F) {
	decodetest.Fuzz(f, func() ([]decode.Decoder, error) {
		d1, err1 := NewDataStreams(Options{})
		d2, err2 := NewDataStreams(customOptions)
		return []decode.Decoder{d1, d2}, errors.Join(err1, err2)
	}, fixtureFiles()...)
}

// FuzzBigData fuzzes the Big Data JSON formatter decoder.
func FuzzBigData(f *testing.F) {
	decodetest.Fuzz(f, func() ([]decode.Decoder, error) {
		d, err := NewBigData(BigDataOptions{})
		return []decode.Decoder{d}, err
	}, fixtureFiles()...)
}
