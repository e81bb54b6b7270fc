package iceappend

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
)

// The Avro records of Iceberg's manifests and manifest lists, format
// version 3, named as the Iceberg writers name them. Readers resolve them
// by the field ids the schemas carry.

type manifestEntry struct {
	Status             int32    `avro:"status"` // 0 existing, 1 added, 2 deleted
	SnapshotID         *int64   `avro:"snapshot_id"`
	SequenceNumber     *int64   `avro:"sequence_number"`
	FileSequenceNumber *int64   `avro:"file_sequence_number"`
	DataFile           dataFile `avro:"data_file"`
}

type dataFile struct {
	Content            int32          `avro:"content"`
	FilePath           string         `avro:"file_path"`
	FileFormat         string         `avro:"file_format"`
	Partition          map[string]any `avro:"partition"`
	RecordCount        int64          `avro:"record_count"`
	FileSizeInBytes    int64          `avro:"file_size_in_bytes"`
	ColumnSizes        *[]intLong     `avro:"column_sizes"`
	ValueCounts        *[]intLong     `avro:"value_counts"`
	NullValueCounts    *[]intLong     `avro:"null_value_counts"`
	NaNValueCounts     *[]intLong     `avro:"nan_value_counts"`
	LowerBounds        *[]intBytes    `avro:"lower_bounds"`
	UpperBounds        *[]intBytes    `avro:"upper_bounds"`
	KeyMetadata        *[]byte        `avro:"key_metadata"`
	SplitOffsets       *[]int64       `avro:"split_offsets"`
	EqualityIDs        *[]int32       `avro:"equality_ids"`
	SortOrderID        *int32         `avro:"sort_order_id"`
	FirstRowID         *int64         `avro:"first_row_id"`
	ReferencedDataFile *string        `avro:"referenced_data_file"`
	ContentOffset      *int64         `avro:"content_offset"`
	ContentSize        *int64         `avro:"content_size_in_bytes"`
}

type intLong struct {
	Key   int32 `avro:"key"`
	Value int64 `avro:"value"`
}

type intBytes struct {
	Key   int32  `avro:"key"`
	Value []byte `avro:"value"`
}

type manifestFile struct {
	Path              string          `avro:"manifest_path"`
	Length            int64           `avro:"manifest_length"`
	SpecID            int32           `avro:"partition_spec_id"`
	Content           int32           `avro:"content"` // 0 data, 1 deletes
	SequenceNumber    int64           `avro:"sequence_number"`
	MinSequenceNumber int64           `avro:"min_sequence_number"`
	AddedSnapshotID   int64           `avro:"added_snapshot_id"`
	AddedFiles        int32           `avro:"added_files_count"`
	ExistingFiles     int32           `avro:"existing_files_count"`
	DeletedFiles      int32           `avro:"deleted_files_count"`
	Partitions        *[]fieldSummary `avro:"partitions"`
	AddedRows         int64           `avro:"added_rows_count"`
	ExistingRows      int64           `avro:"existing_rows_count"`
	DeletedRows       int64           `avro:"deleted_rows_count"`
	KeyMetadata       *[]byte         `avro:"key_metadata"`
	FirstRowID        *int64          `avro:"first_row_id"`
}

type fieldSummary struct {
	ContainsNull bool    `avro:"contains_null"`
	ContainsNaN  *bool   `avro:"contains_nan"`
	Lower        *[]byte `avro:"lower_bound"`
	Upper        *[]byte `avro:"upper_bound"`
}

// manifestListSchema is the v3 manifest list's.
var manifestListSchema = avro.MustParse(manifestListJSON)

const manifestListJSON = `{"type":"record","name":"manifest_file","fields":[
{"name":"manifest_path","type":"string","field-id":500},
{"name":"manifest_length","type":"long","field-id":501},
{"name":"partition_spec_id","type":"int","field-id":502},
{"name":"content","type":"int","default":0,"field-id":517},
{"name":"sequence_number","type":"long","default":0,"field-id":515},
{"name":"min_sequence_number","type":"long","default":0,"field-id":516},
{"name":"added_snapshot_id","type":"long","field-id":503},
{"name":"added_files_count","type":"int","field-id":504},
{"name":"existing_files_count","type":"int","field-id":505},
{"name":"deleted_files_count","type":"int","field-id":506},
{"name":"partitions","type":["null",{"type":"array","element-id":508,"items":{"type":"record","name":"r508","fields":[
 {"name":"contains_null","type":"boolean","field-id":509},
 {"name":"contains_nan","type":["null","boolean"],"field-id":518},
 {"name":"lower_bound","type":["null","bytes"],"field-id":510},
 {"name":"upper_bound","type":["null","bytes"],"field-id":511}]}}],"field-id":507},
{"name":"added_rows_count","type":"long","field-id":512},
{"name":"existing_rows_count","type":"long","field-id":513},
{"name":"deleted_rows_count","type":"long","field-id":514},
{"name":"key_metadata","type":["null","bytes"],"field-id":519},
{"name":"first_row_id","type":["null","long"],"field-id":520}]}`

// manifestEntrySchema is the v3 manifest entry's, with the data file's
// partition record (the partition fields' Avro types, JSON) in it.
const manifestEntrySchema = `{"type":"record","name":"manifest_entry","fields":[
{"name":"status","type":"int","field-id":0},
{"name":"snapshot_id","type":["null","long"],"field-id":1},
{"name":"sequence_number","type":["null","long"],"field-id":3},
{"name":"file_sequence_number","type":["null","long"],"field-id":4},
{"name":"data_file","field-id":2,"type":{"type":"record","name":"r2","fields":[
 {"name":"content","type":"int","default":0,"field-id":134},
 {"name":"file_path","type":"string","field-id":100},
 {"name":"file_format","type":"string","field-id":101},
 {"name":"partition","field-id":102,"type":{"type":"record","name":"r102","fields":[%s]}},
 {"name":"record_count","type":"long","field-id":103},
 {"name":"file_size_in_bytes","type":"long","field-id":104},
 {"name":"column_sizes","field-id":108,"type":["null",{"type":"array","logicalType":"map","items":{"type":"record","name":"k117_v118","fields":[{"name":"key","type":"int","field-id":117},{"name":"value","type":"long","field-id":118}]}}]},
 {"name":"value_counts","field-id":109,"type":["null",{"type":"array","logicalType":"map","items":{"type":"record","name":"k119_v120","fields":[{"name":"key","type":"int","field-id":119},{"name":"value","type":"long","field-id":120}]}}]},
 {"name":"null_value_counts","field-id":110,"type":["null",{"type":"array","logicalType":"map","items":{"type":"record","name":"k121_v122","fields":[{"name":"key","type":"int","field-id":121},{"name":"value","type":"long","field-id":122}]}}]},
 {"name":"nan_value_counts","field-id":137,"type":["null",{"type":"array","logicalType":"map","items":{"type":"record","name":"k138_v139","fields":[{"name":"key","type":"int","field-id":138},{"name":"value","type":"long","field-id":139}]}}]},
 {"name":"lower_bounds","field-id":125,"type":["null",{"type":"array","logicalType":"map","items":{"type":"record","name":"k126_v127","fields":[{"name":"key","type":"int","field-id":126},{"name":"value","type":"bytes","field-id":127}]}}]},
 {"name":"upper_bounds","field-id":128,"type":["null",{"type":"array","logicalType":"map","items":{"type":"record","name":"k129_v130","fields":[{"name":"key","type":"int","field-id":129},{"name":"value","type":"bytes","field-id":130}]}}]},
 {"name":"key_metadata","type":["null","bytes"],"field-id":131},
 {"name":"split_offsets","type":["null",{"type":"array","element-id":133,"items":"long"}],"field-id":132},
 {"name":"equality_ids","type":["null",{"type":"array","element-id":136,"items":"int"}],"field-id":135},
 {"name":"sort_order_id","type":["null","int"],"field-id":140},
 {"name":"first_row_id","type":["null","long"],"field-id":142},
 {"name":"referenced_data_file","type":["null","string"],"field-id":143},
 {"name":"content_offset","type":["null","long"],"field-id":144},
 {"name":"content_size_in_bytes","type":["null","long"],"field-id":145}]}}]}`

// entrySchema returns the manifest entry schema of a partition spec, and
// its JSON text.
func entrySchema(spec partitionSpec) (avro.Schema, string, error) {
	var fields []string
	for _, f := range spec.Fields {
		typ := `"int"`
		if f.Transform == "day" {
			typ = `{"type":"int","logicalType":"date"}`
		}
		name, _ := json.Marshal(f.Name)
		fields = append(fields, fmt.Sprintf(`{"name":%s,"type":["null",%s],"field-id":%d}`, name, typ, f.FieldID))
	}
	js := fmt.Sprintf(manifestEntrySchema, strings.Join(fields, ","))
	s, err := parseSchema(js)
	return s, js, err
}

// partitionDatum is the Avro value of a partition field's value (an
// ordinal of its transform's unit since 1970).
func partitionDatum(transform string, v int32) any {
	if transform == "day" {
		return time.Unix(int64(v)*86400, 0).UTC()
	}
	return v
}
