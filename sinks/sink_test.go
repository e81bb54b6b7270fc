package sinks

import "testing"

func TestObjectName(t *testing.T) {
	tests := []struct {
		pos  Position
		want string
	}{
		{Position{Source: "orders", Partition: 0, Offset: 0}, "orders-p0-o00000000000000000000.parquet"},
		{Position{Source: "server.public.orders", Partition: 12, Offset: 42}, "server.public.orders-p12-o00000000000000000042.parquet"},
		{Position{Source: "in/trail file.json", Partition: 0, Offset: 9223372036854775807}, "in_trail_file.json-p0-o09223372036854775807.parquet"},
	}
	for _, tt := range tests {
		if got := ObjectName(tt.pos, ".parquet"); got != tt.want {
			t.Errorf("ObjectName(%+v) = %q, want %q", tt.pos, got, tt.want)
		}
	}
	// Names sort by offset within a partition.
	if ObjectName(Position{Source: "s", Offset: 9}, ".parquet") >= ObjectName(Position{Source: "s", Offset: 10}, ".parquet") {
		t.Errorf("file names do not sort by offset")
	}
}
