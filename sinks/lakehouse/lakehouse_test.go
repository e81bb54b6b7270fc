package lakehouse_test

import (
	"fmt"
	"testing"

	"github.com/cdclake/cdclake/sinks/lakehouse"
)

// TestWarehouseOf: where Iceberg finds a lake's files, and how.
func TestWarehouseOf(t *testing.T) {
	for _, tc := range []struct {
		lake, warehouse string
		props           map[string]string
	}{
		{"file:///data/lake?create_dir=true&metadata=skip", "file:///data/lake", nil},
		{"s3://lake?endpoint=http://127.0.0.1:9000&use_path_style=true&region=eu-west-1&prefix=cdc/", "s3://lake/cdc",
			map[string]string{"s3.endpoint": "http://127.0.0.1:9000", "s3.region": "eu-west-1", "s3.force-virtual-addressing": "false"}},
		{"s3://lake", "s3://lake", map[string]string{}},
	} {
		wh, props, err := lakehouse.WarehouseOf(tc.lake)
		if err != nil || wh != tc.warehouse || fmt.Sprint(props) != fmt.Sprint(tc.props) {
			t.Errorf("%s: %s %v %v, want %s %v", tc.lake, wh, props, err, tc.warehouse, tc.props)
		}
	}
	if _, _, err := lakehouse.WarehouseOf("gs://bucket"); err == nil {
		t.Error("gs:// has a warehouse, want an error saying to set it")
	}
}

// TestRecordedOffsets: the offsets summaries and properties record, the
// greatest of each partition's (a source name may hold dots); others are
// ignored. Advanced carries them forward and reports a partition that
// moves on; PastRecorded tells the files a lookup must find.
func TestRecordedOffsets(t *testing.T) {
	p0, p1 := lakehouse.Partition{Source: "db.orders", Partition: 0}, lakehouse.Partition{Source: "db.orders", Partition: 1}
	got := lakehouse.RecordedOffsets(
		map[string]string{"cdclake.offset.db.orders.0": "40", "cdclake.offset.db.orders.1": "7", "operation": "append"},
		map[string]string{"cdclake.offset.db.orders.0": "35", "cdclake.offset.bad": "1", "cdclake.offset.db.orders.2": "x"},
	)
	if fmt.Sprint(got) != fmt.Sprint(map[lakehouse.Partition]int64{p0: 40, p1: 7}) {
		t.Errorf("recorded %v", got)
	}
	props, advanced := lakehouse.Advanced(got, map[lakehouse.Partition]int64{p0: 30, p1: 9})
	if !advanced || props["cdclake.offset.db.orders.0"] != "40" || props["cdclake.offset.db.orders.1"] != "9" || len(props) != 2 {
		t.Errorf("advanced %v %v", props, advanced)
	}
	if _, advanced := lakehouse.Advanced(got, map[lakehouse.Partition]int64{p0: 40}); advanced {
		t.Error("an offset recorded already advanced")
	}
	for key, want := range map[string]bool{
		"t/date=2024-05-31/db.orders-p0-o00000000000000000040.parquet": true,
		"t/date=2024-05-31/db.orders-p0-o00000000000000000039.parquet": false,
		"t/date=2024-05-31/db.orders-p1-o00000000000000000002.parquet": false,
		"t/date=2024-05-31/db.orders-p2-o00000000000000000099.parquet": false, // not looked up
		"t/compacted.parquet": false,
	} {
		if got := lakehouse.PastRecorded(key, map[lakehouse.Partition]bool{p0: true, p1: true}, map[lakehouse.Partition]int64{p0: 40, p1: 7}); got != want {
			t.Errorf("%s: past the recorded offset %v, want %v", key, got, want)
		}
	}
}
