package schema

import (
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/valyala/fastjson"
)

func TestParseType(t *testing.T) {
	tests := []struct {
		in   string
		want Type
	}{
		{"string", Type{Kind: String}},
		{"text", Type{Kind: String}},
		{"varchar", Type{Kind: String}},
		{"boolean", Type{Kind: Bool}},
		{"bool", Type{Kind: Bool}},
		{"int8", Type{Kind: Int8}},
		{"tinyint", Type{Kind: Int8}},
		{"int16", Type{Kind: Int16}},
		{"smallint", Type{Kind: Int16}},
		{"int32", Type{Kind: Int32}},
		{"int", Type{Kind: Int32}},
		{"integer", Type{Kind: Int32}},
		{"int64", Type{Kind: Int64}},
		{"bigint", Type{Kind: Int64}},
		{"float", Type{Kind: Float32}},
		{"float32", Type{Kind: Float32}},
		{"real", Type{Kind: Float32}},
		{"double", Type{Kind: Float64}},
		{"float64", Type{Kind: Float64}},
		{"binary", Type{Kind: Binary}},
		{"bytes", Type{Kind: Binary}},
		{"json", Type{Kind: JSON}},
		{"date", Type{Kind: Date}},
		{"decimal_text", Type{Kind: DecimalText}},
		{"time", Type{Kind: Time, Unit: Micros}},
		{"time(ms)", Type{Kind: Time, Unit: Millis}},
		{"time(us)", Type{Kind: Time, Unit: Micros}},
		{"time(ns)", Type{Kind: Time, Unit: Nanos}},
		{"timestamp", Type{Kind: Timestamp, Unit: Micros}},
		{"timestamp(ms)", Type{Kind: Timestamp, Unit: Millis}},
		{"timestamp(us)", Type{Kind: Timestamp, Unit: Micros}},
		{"timestamptz", Type{Kind: Timestamp, Unit: Micros, UTC: true}},
		{"timestamptz(ms)", Type{Kind: Timestamp, Unit: Millis, UTC: true}},
		{"timestamptz(us)", Type{Kind: Timestamp, Unit: Micros, UTC: true}},
		{"decimal(38,4)", Type{Kind: Decimal, Precision: 38, Scale: 4}},
		{"decimal(1,0)", Type{Kind: Decimal, Precision: 1, Scale: 0}},
		{"decimal(10,10)", Type{Kind: Decimal, Precision: 10, Scale: 10}},
		{"numeric(18,2)", Type{Kind: Decimal, Precision: 18, Scale: 2}},
		{"decimal( 12 , 3 )", Type{Kind: Decimal, Precision: 12, Scale: 3}},
		{"  DECIMAL(38,4) ", Type{Kind: Decimal, Precision: 38, Scale: 4}},
		{"TimestampTZ(MS)", Type{Kind: Timestamp, Unit: Millis, UTC: true}},
		{"BIGINT", Type{Kind: Int64}},
	}
	for _, tt := range tests {
		got, err := ParseType(tt.in)
		if err != nil {
			t.Errorf("ParseType(%q): %v", tt.in, err)
			continue
		}
		if got.String() != tt.want.String() || got.Unit != tt.want.Unit {
			t.Errorf("ParseType(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	for _, in := range []string{
		"", "str", "decimal", "decimal(39,0)", "decimal(0,0)", "decimal(10,11)", "decimal(10,-1)",
		"decimal(10)", "decimal(10,2", "decimal(10,2))", "decimal(a,b)", "decimal(10,2,3)",
		"time(s)", "time()", "timestamp(sec)", "timestamp(us", "string(10)", "varchar(255)",
		"int(11)", "date(ms)", "json()", "map", "struct", "list", "null",
		"timestamp(ns)", "timestamptz(ns)", // Spark cannot read TIMESTAMP(NANOS): int64 instead
	} {
		if got, err := ParseType(in); err == nil {
			t.Errorf("ParseType(%q) = %s, want an error", in, got)
		} else if !strings.Contains(err.Error(), "type") {
			t.Errorf("ParseType(%q): error %q does not say what was wrong", in, err)
		}
	}
}

func TestTypeArrow(t *testing.T) {
	elem := Type{Kind: Int32}
	key := Type{Kind: String}
	tests := []struct {
		typ  Type
		want arrow.DataType
	}{
		{Type{Kind: Null}, arrow.Null},
		{Type{Kind: Bool}, arrow.FixedWidthTypes.Boolean},
		{Type{Kind: Int8}, arrow.PrimitiveTypes.Int8},
		{Type{Kind: Int16}, arrow.PrimitiveTypes.Int16},
		{Type{Kind: Int32}, arrow.PrimitiveTypes.Int32},
		{Type{Kind: Int64}, arrow.PrimitiveTypes.Int64},
		{Type{Kind: Float32}, arrow.PrimitiveTypes.Float32},
		{Type{Kind: Float64}, arrow.PrimitiveTypes.Float64},
		{Type{Kind: String}, arrow.BinaryTypes.String},
		{Type{Kind: DecimalText, Enc: EncBase64Decimal, Scale: 3}, arrow.BinaryTypes.String},
		{Type{Kind: Binary}, arrow.BinaryTypes.Binary},
		{Type{Kind: Decimal, Precision: 38, Scale: 4}, &arrow.Decimal128Type{Precision: 38, Scale: 4}},
		{Type{Kind: Date}, arrow.FixedWidthTypes.Date32},
		{Type{Kind: Time, Unit: Millis}, arrow.FixedWidthTypes.Time32ms},
		{Type{Kind: Time, Unit: Micros}, arrow.FixedWidthTypes.Time64us},
		{Type{Kind: Time, Unit: Nanos}, arrow.FixedWidthTypes.Time64ns},
		{Type{Kind: Timestamp, Unit: Micros, UTC: true}, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Type{Kind: Timestamp, Unit: Millis}, &arrow.TimestampType{Unit: arrow.Millisecond}},
		{Type{Kind: List, Elem: &elem}, arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int32, Nullable: true})},
		{Type{Kind: Map, Key: &key, Value: &elem}, arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32)},
		{Type{Kind: Struct, Fields: []Column{{Name: "a", Type: elem}, {Name: "b", Type: key, Nullable: true}}},
			arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
				arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true})},
	}
	for _, tt := range tests {
		if got := tt.typ.Arrow(); !arrow.TypeEqual(got, tt.want) {
			t.Errorf("%s.Arrow() = %s, want %s", tt.typ, got, tt.want)
		}
	}
	if _, ok := (Type{Kind: JSON}).Arrow().(*extensions.JSONType); !ok {
		t.Errorf("JSON lands as %s, want the arrow.json extension", Type{Kind: JSON}.Arrow())
	}
}

func TestTypeString(t *testing.T) {
	elem := Type{Kind: Int64}
	tests := []struct {
		typ  Type
		want string
	}{
		{Type{Kind: Decimal, Precision: 38, Scale: 4}, "decimal(38,4)"},
		{Type{Kind: Decimal, Precision: 10, Scale: 2, Enc: EncBase64Decimal}, "decimal(10,2)/e1"},
		{Type{Kind: DecimalText, Enc: EncBase64Decimal, Scale: 3}, "decimal_text/e1"},
		{Type{Kind: Timestamp, Unit: Micros, UTC: true}, "timestamp(us,utc)"},
		{Type{Kind: Timestamp, Unit: Millis, Enc: EncEpochUnit}, "timestamp(ms)/e4"},
		{Type{Kind: Time, Unit: Nanos}, "time(ns)"},
		{Type{Kind: List, Elem: &elem}, "list<int64>"},
		{Type{Kind: Struct, Fields: []Column{{Name: "a b", Type: elem}, {Name: "c", Type: elem, Nullable: true}}}, `struct<"a b":int64 not null,"c":int64>`},
		{Type{Kind: Kind(200)}, "invalid"},
	}
	for _, tt := range tests {
		if got := tt.typ.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func parse(t testing.TB, s string) *fastjson.Value {
	t.Helper()
	v, err := fastjson.Parse(s)
	if err != nil {
		t.Fatalf("test JSON %q: %v", s, err)
	}
	return v
}

func TestInfer(t *testing.T) {
	tests := []struct {
		in   string
		want Kind
	}{
		{missing, Null},
		{`null`, Null},
		{`true`, Bool},
		{`false`, Bool},
		{`1`, Int64},
		{`-9223372036854775808`, Int64},
		{`9223372036854775807`, Int64},
		{`9223372036854775808`, DecimalText},
		{`1.5`, DecimalText},
		{`1.0`, DecimalText},
		{`1e3`, DecimalText},
		{`"x"`, String},
		{`"12"`, String},
		{`{}`, JSON},
		{`[1]`, JSON},
	}
	for _, tt := range tests {
		var v *fastjson.Value
		if tt.in != missing {
			v = parse(t, tt.in)
		}
		got := Infer(v)
		if got.Kind != tt.want || got.Enc != EncNative {
			t.Errorf("Infer(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestAccepts(t *testing.T) {
	text := Type{Kind: String, Enc: EncText}
	values := []string{missing, `null`, `true`, `7`, `1.5`, `"s"`, `{"a":1}`, `[1]`}
	tests := []struct {
		typ  Type
		want []bool // per value
	}{
		{Type{Kind: Null}, []bool{true, true, false, false, false, false, false, false}},
		{Type{Kind: Bool}, []bool{true, true, true, false, false, false, false, false}},
		{Type{Kind: Int64}, []bool{true, true, false, true, false, false, false, false}},
		{Type{Kind: DecimalText}, []bool{true, true, false, true, true, false, false, false}},
		{Type{Kind: String}, []bool{true, true, false, false, false, true, false, false}},
		{Type{Kind: JSON}, []bool{true, true, false, false, false, false, true, true}},
		{text, []bool{true, true, true, true, true, true, true, true}},
	}
	for _, tt := range tests {
		for i, in := range values {
			var v *fastjson.Value
			if in != missing {
				v = parse(t, in)
			}
			if got := Accepts(tt.typ, v); got != tt.want[i] {
				t.Errorf("Accepts(%s, %s) = %v, want %v", tt.typ, in, got, tt.want[i])
			}
		}
	}
}

func TestWiden(t *testing.T) {
	text := Type{Kind: String, Enc: EncText}
	tests := []struct {
		from Type
		in   string
		want Type
	}{
		{Type{Kind: Null}, `1`, Type{Kind: Int64}},
		{Type{Kind: Null}, `1.5`, Type{Kind: DecimalText}},
		{Type{Kind: Null}, `"x"`, Type{Kind: String}},
		{Type{Kind: Null}, `true`, Type{Kind: Bool}},
		{Type{Kind: Null}, `{}`, Type{Kind: JSON}},
		{Type{Kind: Null}, `null`, Type{Kind: Null}},
		{Type{Kind: Int64}, `1.5`, Type{Kind: DecimalText}},
		{Type{Kind: Int64}, `99999999999999999999`, Type{Kind: DecimalText}},
		{Type{Kind: Int64}, `"x"`, text},
		{Type{Kind: Int64}, `true`, text},
		{Type{Kind: DecimalText}, `"x"`, text},
		{Type{Kind: DecimalText}, `[1]`, text},
		{Type{Kind: Bool}, `1`, text},
		{Type{Kind: String}, `1`, text},
		{Type{Kind: String}, `{}`, text},
		{Type{Kind: JSON}, `"x"`, text},
		{text, `1`, text},
		// Values the type already holds do not widen it.
		{Type{Kind: Int64}, `5`, Type{Kind: Int64}},
		{Type{Kind: Int64}, `null`, Type{Kind: Int64}},
		{Type{Kind: DecimalText}, `5`, Type{Kind: DecimalText}},
		{Type{Kind: Bool}, `false`, Type{Kind: Bool}},
	}
	for _, tt := range tests {
		if got := Widen(tt.from, parse(t, tt.in)); got.String() != tt.want.String() {
			t.Errorf("Widen(%s, %s) = %s, want %s", tt.from, tt.in, got, tt.want)
		}
	}
	if got := Widen(Type{Kind: Int64}, nil); got.Kind != Int64 {
		t.Errorf("Widen(int64, missing) = %s, want int64", got)
	}
}

// TestInferLattice folds every sequence of three values the way the resolver
// does (infer, then widen what the type does not accept) and checks that
// the result accepts, and the converter lands, every value of the sequence,
// and that only the expected types are ever reached.
func TestInferLattice(t *testing.T) {
	pool := []string{`null`, `true`, `0`, `-12`, `9223372036854775808`, `1.25`, `1e3`, `"s"`, `""`, `{"a":[1]}`, `[]`}
	reached := map[string]bool{}
	for _, a := range pool {
		for _, b := range pool {
			for _, c := range pool {
				seq := []string{a, b, c}
				typ := Type{Kind: Null}
				for _, in := range seq {
					v := parse(t, in)
					if !Accepts(typ, v) {
						typ = Widen(typ, v)
					}
				}
				reached[typ.String()] = true
				for _, in := range seq {
					if !Accepts(typ, parse(t, in)) {
						t.Fatalf("%v: final type %s does not accept %s", seq, typ, in)
					}
				}
				if _, errs := convert(t, typ, seq...); slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
					t.Fatalf("%v: type %s: converter errors %v", seq, typ, errs)
				}
			}
		}
	}
	want := []string{"null", "boolean", "int64", "decimal_text", "string", "json", "string/e5"}
	var got []string
	for k := range reached {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("types reached %v, want %v", got, want)
	}
}

func TestNewTableLayouts(t *testing.T) {
	cols := []Column{
		{Name: "id", Type: Type{Kind: Int64}, Key: true},
		{Name: "amount", Type: Type{Kind: Decimal, Precision: 10, Scale: 2}, Nullable: true},
	}
	extras := []ExtraColumn{
		{Name: "zeta", Kind: change.ExtraString},
		{Name: "alpha", Kind: change.ExtraJSON},
		{Name: "mid", Kind: change.ExtraTimestamp},
	}
	orig := slices.Clone(extras)
	meta := []string{ColOp, ColTable, ColTS, ColXid, ColPos, ColSource, ColPartition, ColOffset, ColIngestedAt}
	tests := []struct {
		layout Layout
		want   []string
	}{
		{LayoutImages, append(slices.Clone(meta), "alpha", "mid", "zeta", ColBefore, ColAfter, ColBeforeAbsent, ColAfterAbsent)},
		{LayoutFlat, append(slices.Clone(meta), "alpha", "mid", "zeta", "id", "amount", ColAbsent)},
		{LayoutEvents, append(slices.Clone(meta), "alpha", "mid", "zeta", ColKind, ColObject, ColStatement, ColEvent)},
	}
	for _, tt := range tests {
		tb := NewTable("SALES.ORDERS", 3, tt.layout, cols, extras, true, nil)
		var got []string
		for _, f := range tb.Arrow.Fields() {
			got = append(got, f.Name)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: fields %v, want %v", tt.layout, got, tt.want)
		}
		if NumMeta != len(meta) {
			t.Errorf("NumMeta = %d", NumMeta)
		}
		if v, _ := tb.Arrow.Metadata().GetValue("cdclake.table"); v != "SALES.ORDERS" {
			t.Errorf("metadata table %q", v)
		}
		if v, _ := tb.Arrow.Metadata().GetValue("cdclake.version"); v != "3" {
			t.Errorf("metadata version %q", v)
		}
		if i, ok := tb.ExtraIndex("zeta"); !ok || i != 2 {
			t.Errorf("ExtraIndex(zeta) = %d, %v", i, ok)
		}
		if i, ok := tb.ColumnIndex([]byte("amount")); !ok || i != 1 {
			t.Errorf("ColumnIndex(amount) = %d, %v", i, ok)
		}
		if _, ok := tb.ColumnIndex([]byte("nope")); ok {
			t.Errorf("ColumnIndex(nope) found")
		}
		f := func(name string) arrow.Field {
			fs, ok := tb.Arrow.FieldsByName(name)
			if !ok {
				t.Fatalf("%s: no field %s", tt.layout, name)
			}
			return fs[0]
		}
		if _, ok := f("alpha").Type.(*extensions.JSONType); !ok {
			t.Errorf("JSON extra lands as %s", f("alpha").Type)
		}
		if ts, ok := f("mid").Type.(*arrow.TimestampType); !ok || ts.Unit != arrow.Microsecond || ts.TimeZone != "UTC" {
			t.Errorf("timestamp extra lands as %s", f("mid").Type)
		}
		for _, name := range []string{ColOp, ColTable, ColSource, ColPartition, ColOffset} {
			if f(name).Nullable {
				t.Errorf("%s must not be nullable", name)
			}
		}
		for _, name := range []string{ColTS, ColXid, ColPos, ColIngestedAt, "zeta"} {
			if !f(name).Nullable {
				t.Errorf("%s must be nullable", name)
			}
		}
		switch tt.layout {
		case LayoutImages:
			st, ok := f(ColAfter).Type.(*arrow.StructType)
			if !ok || st.NumFields() != 2 || st.Field(0).Name != "id" || !st.Field(0).Nullable {
				t.Errorf("after = %s", f(ColAfter).Type)
			}
			if !arrow.TypeEqual(f(ColBefore).Type, f(ColAfter).Type) {
				t.Errorf("before %s != after %s", f(ColBefore).Type, f(ColAfter).Type)
			}
			if l, ok := f(ColAfterAbsent).Type.(*arrow.ListType); !ok || l.Elem().ID() != arrow.STRING {
				t.Errorf("absent list = %s", f(ColAfterAbsent).Type)
			}
		case LayoutFlat:
			if !f("id").Nullable {
				t.Errorf("flat columns are nullable (absent from partial images)")
			}
		case LayoutEvents:
			if _, ok := f(ColEvent).Type.(*extensions.JSONType); !ok {
				t.Errorf("event = %s", f(ColEvent).Type)
			}
		}
	}
	if !slices.Equal(extras, orig) {
		t.Errorf("NewTable reordered its argument: %v", extras)
	}
}

func TestFingerprint(t *testing.T) {
	base := func() []Column {
		return []Column{
			{Name: "id", Type: Type{Kind: Int64}},
			{Name: "amount", Type: Type{Kind: Decimal, Precision: 10, Scale: 2}},
			{Name: "big", Type: Type{Kind: DecimalText, Enc: EncBase64Decimal, Scale: 2}},
			{Name: "ts", Type: Type{Kind: Timestamp, Unit: Micros, UTC: true}},
			{Name: "s", Type: Type{Kind: Struct, Fields: []Column{{Name: "x", Type: Type{Kind: String}}}}},
		}
	}
	extras := []ExtraColumn{{Name: "b", Kind: change.ExtraString}, {Name: "a", Kind: change.ExtraJSON}}
	fp := func(layout Layout, cols []Column, ex []ExtraColumn) uint64 {
		return NewTable("t", 1, layout, cols, ex, true, nil).Fingerprint
	}
	ref := fp(LayoutImages, base(), extras)
	if again := fp(LayoutImages, base(), extras); again != ref {
		t.Errorf("fingerprint not stable: %x then %x", ref, again)
	}
	// Same shape: extras order, version, table name, Declared, Ignore,
	// Nullable and Key do not change how values land.
	if got := fp(LayoutImages, base(), []ExtraColumn{extras[1], extras[0]}); got != ref {
		t.Errorf("extras order changed the fingerprint")
	}
	other := NewTable("u", 7, LayoutImages, base(), extras, false, func(c string) bool { return c == "x" })
	if other.Fingerprint != ref || !other.SameShape(NewTable("t", 1, LayoutImages, base(), extras, true, nil)) {
		t.Errorf("name, version, declared or ignore changed the fingerprint")
	}
	nullable := base()
	nullable[0].Nullable, nullable[0].Key = true, true
	if fp(LayoutImages, nullable, extras) != ref {
		t.Errorf("nullable/key changed the fingerprint")
	}

	changes := map[string]func(c []Column) []Column{
		"type":          func(c []Column) []Column { c[0].Type = Type{Kind: String}; return c },
		"decimal scale": func(c []Column) []Column { c[1].Type.Scale = 3; return c },
		"decimal text scale": func(c []Column) []Column {
			c[2].Type.Scale = 4
			return c
		},
		"encoding":        func(c []Column) []Column { c[2].Type.Enc = EncVariableScale; return c },
		"timestamp zone":  func(c []Column) []Column { c[3].Type.UTC = false; return c },
		"timestamp unit":  func(c []Column) []Column { c[3].Type.Unit = Millis; return c },
		"nested type":     func(c []Column) []Column { c[4].Type.Fields[0].Type = Type{Kind: Int32}; return c },
		"column name":     func(c []Column) []Column { c[0].Name = "ID"; return c },
		"column order":    func(c []Column) []Column { c[0], c[1] = c[1], c[0]; return c },
		"column added":    func(c []Column) []Column { return append(c, Column{Name: "n", Type: Type{Kind: Null}}) },
		"column dropped":  func(c []Column) []Column { return c[:4] },
		"null to int64":   func(c []Column) []Column { return append(c, Column{Name: "n", Type: Type{Kind: Int64}}) },
		"json vs text":    func(c []Column) []Column { c[0].Type = Type{Kind: String, Enc: EncText}; return c },
		"date encoding":   func(c []Column) []Column { c[0].Type = Type{Kind: Date, Enc: EncEpochDays}; return c },
		"date text":       func(c []Column) []Column { c[0].Type = Type{Kind: Date}; return c },
		"decimal to text": func(c []Column) []Column { c[1].Type = Type{Kind: DecimalText}; return c },
	}
	seen := map[uint64]string{ref: "reference"}
	for name, mutate := range changes {
		got := fp(LayoutImages, mutate(base()), extras)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s: fingerprint %x equals that of %s", name, got, prev)
		}
		seen[got] = name
	}
	if fp(LayoutFlat, base(), extras) == ref {
		t.Errorf("layout did not change the fingerprint")
	}
	if fp(LayoutImages, base(), extras[:1]) == ref {
		t.Errorf("dropping an extra did not change the fingerprint")
	}
	if fp(LayoutImages, base(), []ExtraColumn{{Name: "b", Kind: change.ExtraJSON}, extras[1]}) == ref {
		t.Errorf("extra kind did not change the fingerprint")
	}
}

func TestParseLayout(t *testing.T) {
	for in, want := range map[string]Layout{"": LayoutImages, "images": LayoutImages, "flat": LayoutFlat} {
		if got, ok := ParseLayout(in); !ok || got != want {
			t.Errorf("ParseLayout(%q) = %s, %v", in, got, ok)
		}
	}
	if _, ok := ParseLayout("events"); ok {
		t.Errorf("events is not a configurable layout")
	}
}
