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
