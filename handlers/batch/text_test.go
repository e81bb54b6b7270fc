package batch

import (
	"strings"
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
)

// TestCheckText: metadata that is not UTF-8 is named in the error,
// whether the whole extras buffer is valid or not; binary extras may hold
// any bytes; and text extras that split a character between them fail
// although their bytes together are valid.
func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(c *change.Change)
		want  string // "" for valid
	}{
		{"valid", func(c *change.Change) {
			c.AddString("_gg_csn", []byte("1234"))
			c.AddJSONText("_gg_tokens", []byte(`{"k":"välue €"}`))
		}, ""},
		{"table", func(c *change.Change) { c.Table = "T\xff" }, "table name"},
		{"position", func(c *change.Change) { c.Pos = "\xc3" }, "position"},
		{"string extra", func(c *change.Change) {
			c.AddString("_gg_csn", []byte("1"))
			c.AddString("_ce_id", []byte("a\xffb"))
		}, "_ce_id"},
		{"binary extra is bytes", func(c *change.Change) {
			c.AddBytes("_kafka_key", []byte{0xff, 0xfe, 0x80})
			c.AddString("_ce_id", []byte("ok"))
		}, ""},
		{"binary extra beside a bad string", func(c *change.Change) {
			c.AddBytes("_kafka_key", []byte{0xff})
			c.AddString("_ce_id", []byte("\xe2\x82"))
		}, "_ce_id"},
		{"character split between extras", func(c *change.Change) {
			c.AddString("_ce_id", []byte("x\xe2\x82"))
			c.AddString("_ce_source", []byte("\xacy"))
		}, "_ce_id"},
		{"NULL extra", func(c *change.Change) {
			c.AddBytes("_kafka_key", nil)
			c.AddString("_ce_id", []byte("é"))
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &change.Change{Table: "SALES.ORDERS"}
			tc.build(c)
			err := checkText(c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}
