package debezium_test

import (
	"path/filepath"
	"testing"

	unwrapper "github.com/cdclake/cdclake/handlers/unwrap"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode/debezium"
)

// BenchmarkDecode measures Decode alone (the payload is parsed once) and
// parse + unwrap + Decode, for a schemas-disabled MySQL update and a
// schemas-enabled PostgreSQL insert of many types.
func BenchmarkDecode(b *testing.B) {
	mysql := readLines(b, filepath.Join(fixtureDir, "mysql.ndjson"))
	pg := readLines(b, filepath.Join(fixtureDir, "postgresql.ndjson"))
	cases := []struct {
		name string
		msg  []byte
	}{
		{"schemas-disabled", mysql[1]},     // update, both images
		{"schemas-enabled", pg[len(pg)-1]}, // insert, 20 typed columns
	}
	for _, tc := range cases {
		b.Run(tc.name+"/decode", func(b *testing.B) {
			d, err := debezium.New(debezium.Options{})
			if err != nil {
				b.Fatal(err)
			}
			var c change.Change
			payload := unwrap(b, tc.msg, &c)
			envelope, key := c.Schema, c.SchemaKey
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.msg)))
			for b.Loop() {
				c.Reset()
				c.Schema, c.SchemaKey = envelope, key
				if err := d.Decode(payload, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/unwrap+decode", func(b *testing.B) {
			d, err := debezium.New(debezium.Options{})
			if err != nil {
				b.Fatal(err)
			}
			var u unwrapper.Unwrapper
			var a unwrapper.Arena
			var c change.Change
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.msg)))
			for b.Loop() {
				c.Reset()
				payload, err := u.Unwrap(&a, tc.msg, &c)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Decode(payload, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeDoesNotAllocate checks the steady state: once buffers have
// grown, decoding a row change allocates nothing.
func TestDecodeDoesNotAllocate(t *testing.T) {
	for _, file := range []string{"mysql.ndjson", "postgresql.ndjson", "sqlserver.ndjson", "oracle.ndjson"} {
		for i, line := range readLines(t, filepath.Join(fixtureDir, file)) {
			d, err := debezium.New(debezium.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var c change.Change
			payload := unwrap(t, line, &c)
			envelope, key := c.Schema, c.SchemaKey
			run := func() {
				c.Reset()
				c.Schema, c.SchemaKey = envelope, key
				if err := d.Decode(payload, &c); err != nil {
					t.Fatal(err)
				}
			}
			run()
			if n := testing.AllocsPerRun(100, run); n != 0 {
				t.Errorf("%s line %d: %.1f allocations per Decode", file, i+1, n)
			}
		}
	}
}
