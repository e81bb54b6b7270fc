package goldengate

import (
	"strings"
	"testing"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/valyala/fastjson"
)

func TestOptionsDefaults(t *testing.T) {
	var o Options
	o.SetDefaults()
	want := Options{
		QualifiedTable: "qual_table", OpType: "op_type", OpTimestamp: "op_ts", TransactionID: "xid",
		Position: "pos", CSN: "csn", Tokens: "tokens", BeforeImage: "before", AfterImage: "after",
		InsertOp: "INSERT", UpdateOp: "UPDATE", DeleteOp: "DELETE", UpsertOp: "UPSERT",
	}
	if o != want {
		t.Errorf("defaults = %+v, want %+v", o, want)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	var b BigDataOptions
	b.SetDefaults()
	wantB := BigDataOptions{
		Table: "table", OpType: "op_type", OpTimestamp: "op_ts", CurrentTimestamp: "current_ts",
		Position: "pos", TransactionID: "xid", CSN: "csn", PrimaryKeys: "primary_keys", Tokens: "tokens", BeforeImage: "before", AfterImage: "after",
		InsertOp: "I", UpdateOp: "U", DeleteOp: "D", TruncateOp: "T",
	}
	if b != wantB {
		t.Errorf("defaults = %+v, want %+v", b, wantB)
	}
	if err := b.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	// SetDefaults keeps what is set.
	c := customOptions
	c.SetDefaults()
	if c != customOptions {
		t.Errorf("SetDefaults changed set fields: %+v", c)
	}
}

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*Options)
		want   []string
	}{
		{"empty", func(o *Options) { o.OpType = "" }, []string{"goldengate: opType: is empty"}},
		{"same field", func(o *Options) { o.AfterImage = "before" }, []string{`goldengate: beforeImageName and afterImageName: both name field "before"`}},
		{"table as op field", func(o *Options) { o.QualifiedTable = "op_type" }, []string{`goldengate: qualifiedTable and opType: both name field "op_type"`}},
		{"ddl field", func(o *Options) { o.Tokens = "ddl" }, []string{`goldengate: tokens: "ddl" is read from DDL records`}},
		{"same op", func(o *Options) { o.UpsertOp = "INSERT" }, []string{`goldengate: insertOp and upsertOp: both name operation "INSERT"`}},
		{"reserved op", func(o *Options) { o.DeleteOp = "DDL" }, []string{`goldengate: deleteOp: "DDL" is reserved for non-DML records`}},
		{"several", func(o *Options) { o.InsertOp = "OBJECT_METADATA"; o.Position = "" }, []string{
			"goldengate: position: is empty", `goldengate: insertOp: "OBJECT_METADATA" is reserved`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var o Options
			o.SetDefaults()
			tc.modify(&o)
			err := o.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestBigDataOptionsValidate(t *testing.T) {
	var o BigDataOptions
	o.SetDefaults()
	o.TruncateOp = "D"
	o.PrimaryKeys = "tokens"
	err := o.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want errors")
	}
	for _, w := range []string{
		`goldengate: deleteOpKey and truncateOpKey: both name operation "D"`,
		`goldengate: primaryKeys and tokens: both name field "tokens"`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Validate() = %q, want it to contain %q", err, w)
		}
	}
	var empty BigDataOptions
	if err := empty.Validate(); err == nil || !strings.Contains(err.Error(), "goldengate: table: is empty") {
		t.Errorf("Validate() of zero options = %v, want empty-name errors", err)
	}
}

func TestConstructorsRejectInvalidOptions(t *testing.T) {
	if _, err := NewDataStreams(Options{InsertOp: "X", UpdateOp: "X"}); err == nil ||
		!strings.Contains(err.Error(), "insertOp and updateOp: both name operation") {
		t.Errorf("NewDataStreams with two equal operations: %v", err)
	}
	if _, err := NewBigData(BigDataOptions{BeforeImage: "x", AfterImage: "x"}); err == nil ||
		!strings.Contains(err.Error(), "beforeObjectName and afterObjectName: both name field") {
		t.Errorf("NewBigData with two equal fields: %v", err)
	}
}

func TestSetOptionsByKey(t *testing.T) {
	var o Options
	for k, v := range map[string]string{"qualifiedTable": "table_name", "opType": "operation", "upsertOp": "M"} {
		if err := o.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if o.QualifiedTable != "table_name" || o.OpType != "operation" || o.UpsertOp != "M" {
		t.Errorf("Set: %+v", o)
	}
	if err := o.Set("qual", "x"); err == nil || !strings.Contains(err.Error(), `unknown key "qual" (known: qualifiedTable, opType,`) {
		t.Errorf("Set(qual): %v", err)
	}
	var b BigDataOptions
	if err := b.Set("truncateOpKey", "TR"); err != nil || b.TruncateOp != "TR" {
		t.Errorf("Set(truncateOpKey): %v, %+v", err, b)
	}
	if err := b.Set("qualifiedTable", "x"); err == nil {
		t.Error("BigDataOptions accepted a Data Streams key")
	}
}

// TestBigDataCustomOpKeys checks that configured keys win over long forms
// and that long forms stay accepted.
func TestBigDataCustomOpKeys(t *testing.T) {
	dec := mustBigData(t, BigDataOptions{InsertOp: "INS", UpdateOp: "UPD", DeleteOp: "DELETE", TruncateOp: "TRUNC"})
	cases := []struct {
		op   string
		want change.Op
	}{
		{"INS", change.OpInsert}, {"UPD", change.OpUpdate}, {"DELETE", change.OpDelete}, {"TRUNC", change.OpTruncate},
		{"INSERT", change.OpInsert}, {"UPDATE", change.OpUpdate}, {"TRUNCATE", change.OpTruncate},
		{"I", change.OpNone}, {"T", change.OpNone},
	}
	for _, tc := range cases {
		if got := dec.op([]byte(tc.op)); got != tc.want {
			t.Errorf("op(%q) = %v, want %v", tc.op, got, tc.want)
		}
	}
	v := fastjson.MustParse(`{"table":"S.T","op_type":"TRUNC"}`)
	var c change.Change
	if err := dec.Decode(v, &c); err != nil || c.Op != change.OpTruncate || c.Kind != change.KindDML {
		t.Errorf("Decode(TRUNC) = %v, op %v kind %v; want nil, TRUNCATE, dml", err, c.Op, c.Kind)
	}
}
