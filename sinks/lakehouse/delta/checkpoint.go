package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// A checkpoint is a snapshot in one Parquet file
// (<version>.checkpoint.parquet, PROTOCOL.md "Checkpoints"): a row per
// action, its one column that is not NULL being the action's. Readers
// start from the newest (named by _last_checkpoint) and replay the
// commits after it, rather than every commit since the table was made.

var (
	strMap  = arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String)
	strList = arrow.ListOf(arrow.BinaryTypes.String)
	i64     = arrow.PrimitiveTypes.Int64
	str     = arrow.BinaryTypes.String
)

func nullable(name string, t arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: true}
}

var checkpointSchema = arrow.NewSchema([]arrow.Field{
	nullable("txn", arrow.StructOf(nullable("appId", str), nullable("version", i64), nullable("lastUpdated", i64))),
	nullable("add", arrow.StructOf(nullable("path", str), nullable("partitionValues", strMap), nullable("size", i64),
		nullable("modificationTime", i64), nullable("dataChange", arrow.FixedWidthTypes.Boolean), nullable("stats", str))),
	nullable("remove", arrow.StructOf(nullable("path", str), nullable("deletionTimestamp", i64),
		nullable("dataChange", arrow.FixedWidthTypes.Boolean), nullable("size", i64))),
	nullable("metaData", arrow.StructOf(nullable("id", str), nullable("name", str), nullable("description", str),
		nullable("format", arrow.StructOf(nullable("provider", str), nullable("options", strMap))),
		nullable("schemaString", str), nullable("partitionColumns", strList), nullable("configuration", strMap),
		nullable("createdTime", i64))),
	nullable("protocol", arrow.StructOf(nullable("minReaderVersion", arrow.PrimitiveTypes.Int32),
		nullable("minWriterVersion", arrow.PrimitiveTypes.Int32), nullable("readerFeatures", strList),
		nullable("writerFeatures", strList))),
}, nil)

// mapFields are the checkpoint's map columns: JSON objects in a commit,
// lists of key-value pairs in Arrow's JSON form.
var mapFields = map[string]bool{"partitionValues": true, "configuration": true, "options": true}

// checkpointActions returns the actions that make up s, in a stable
// order (files by path), with the removes still within retention.
func checkpointActions(s *snapshot, keepRemovesAfter int64) []action {
	acts := []action{{Protocol: s.protocol}, {MetaData: s.meta}}
	for _, app := range sortedKeys(s.txns) {
		acts = append(acts, action{Txn: &txn{AppID: app, Version: s.txns[app]}})
	}
	for _, p := range sortedKeys(s.files) {
		acts = append(acts, action{Add: s.files[p]})
	}
	for _, p := range sortedKeys(s.removed) {
		if r := s.removed[p]; r.DeletionTimestamp >= keepRemovesAfter {
			acts = append(acts, action{Remove: r})
		}
	}
	return acts
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// encodeCheckpoint writes actions as a checkpoint file.
func encodeCheckpoint(acts []action) ([]byte, error) {
	rows := make([]any, 0, len(acts))
	for _, a := range acts {
		b, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		var row map[string]any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber() // offsets and sizes stay exact
		if err := dec.Decode(&row); err != nil {
			return nil, err
		}
		delete(row, "commitInfo")
		rows = append(rows, mapsToPairs(row, ""))
	}
	js, err := json.Marshal(rows)
	if err != nil {
		return nil, err
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, checkpointSchema, bytes.NewReader(js))
	if err != nil {
		return nil, fmt.Errorf("building the checkpoint: %w", err)
	}
	defer rec.Release()
	tbl := array.NewTableFromRecords(checkpointSchema, []arrow.RecordBatch{rec})
	defer tbl.Release()
	var out bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithStats(true))
	if err := pqarrow.WriteTable(tbl, &out, 1<<20, props, pqarrow.NewArrowWriterProperties()); err != nil {
		return nil, fmt.Errorf("writing the checkpoint: %w", err)
	}
	return out.Bytes(), nil
}

// mapsToPairs turns the map fields of a JSON value into Arrow's JSON form
// of maps, a list of {"key", "value"} objects sorted by key.
func mapsToPairs(v any, name string) any {
	switch v := v.(type) {
	case map[string]any:
		if mapFields[name] {
			pairs := make([]any, 0, len(v))
			for _, k := range sortedKeys(v) {
				pairs = append(pairs, map[string]any{"key": k, "value": v[k]})
			}
			return pairs
		}
		for k, e := range v {
			v[k] = mapsToPairs(e, k)
		}
	}
	return v
}

// pairsToMaps undoes mapsToPairs.
func pairsToMaps(v any, name string) any {
	switch v := v.(type) {
	case []any:
		if mapFields[name] {
			m := map[string]any{}
			for _, p := range v {
				if kv, ok := p.(map[string]any); ok {
					if k, ok := kv["key"].(string); ok {
						m[k] = kv["value"]
					}
				}
			}
			return m
		}
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				continue
			}
			v[k] = pairsToMaps(e, k)
		}
	}
	return v
}

// decodeCheckpoint reads a checkpoint file's actions.
func decodeCheckpoint(ctx context.Context, data []byte) ([]action, error) {
	tbl, err := pqarrow.ReadTable(ctx, bytes.NewReader(data), parquet.NewReaderProperties(memory.DefaultAllocator),
		pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 4096)
	defer tr.Release()
	var out []action
	for tr.Next() {
		var buf bytes.Buffer
		if err := array.RecordToJSON(tr.RecordBatch(), &buf); err != nil {
			return nil, err
		}
		dec := json.NewDecoder(&buf)
		dec.UseNumber()
		for {
			var row map[string]any
			if err := dec.Decode(&row); err == io.EOF {
				break
			} else if err != nil {
				return nil, err
			}
			b, err := json.Marshal(pairsToMaps(row, ""))
			if err != nil {
				return nil, err
			}
			var a action
			if err := json.Unmarshal(b, &a); err != nil {
				return nil, fmt.Errorf("a checkpoint row: %w", err)
			}
			out = append(out, a)
		}
	}
	if err := tr.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// lastCheckpoint is the content of _last_checkpoint.
type lastCheckpoint struct {
	Version int64 `json:"version"`
	Size    int64 `json:"size"`
}
