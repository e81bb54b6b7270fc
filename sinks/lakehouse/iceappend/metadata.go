package iceappend

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cdclake/cdclake/sinks/lakehouse"
)

// tableMetadata is an Iceberg table's metadata file: the fields an append
// reads and changes, and every field as read (raw), so that what it does
// not know it writes back as it was.
type tableMetadata struct {
	raw map[string]json.RawMessage

	FormatVersion      int               `json:"format-version"`
	TableUUID          string            `json:"table-uuid"`
	Location           string            `json:"location"`
	LastSequenceNumber int64             `json:"last-sequence-number"`
	NextRowID          *int64            `json:"next-row-id"`
	LastUpdatedMS      int64             `json:"last-updated-ms"`
	CurrentSchemaID    int               `json:"current-schema-id"`
	Schemas            []schemaJSON      `json:"schemas"`
	PartitionSpecs     []partitionSpec   `json:"partition-specs"`
	DefaultSpecID      int               `json:"default-spec-id"`
	Properties         map[string]string `json:"properties"`
	CurrentSnapshotID  *int64            `json:"current-snapshot-id"`
	Snapshots          []snapshot        `json:"snapshots"`
}

type partitionSpec struct {
	SpecID int              `json:"spec-id"`
	Fields []partitionField `json:"fields"`
}

type partitionField struct {
	SourceID  int    `json:"source-id"`
	FieldID   int    `json:"field-id"`
	Name      string `json:"name"`
	Transform string `json:"transform"`
}

type snapshot struct {
	SnapshotID       int64             `json:"snapshot-id"`
	ParentSnapshotID *int64            `json:"parent-snapshot-id,omitempty"`
	SequenceNumber   int64             `json:"sequence-number"`
	TimestampMS      int64             `json:"timestamp-ms"`
	ManifestList     string            `json:"manifest-list"`
	Summary          map[string]string `json:"summary"`
	SchemaID         *int              `json:"schema-id,omitempty"`
	FirstRowID       *int64            `json:"first-row-id,omitempty"`
	AddedRows        *int64            `json:"added-rows,omitempty"`
}

func parseMetadata(b []byte) (*tableMetadata, error) {
	m := &tableMetadata{}
	if err := json.Unmarshal(b, &m.raw); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, err
	}
	return m, nil
}

// schema returns the table's current schema.
func (m *tableMetadata) schema() (*schemaJSON, error) {
	for i := range m.Schemas {
		if m.Schemas[i].SchemaID == m.CurrentSchemaID {
			return &m.Schemas[i], nil
		}
	}
	return nil, fmt.Errorf("the table metadata has no schema %d", m.CurrentSchemaID)
}

// spec returns the table's default partition spec.
func (m *tableMetadata) spec() (*partitionSpec, error) {
	for i := range m.PartitionSpecs {
		if m.PartitionSpecs[i].SpecID == m.DefaultSpecID {
			return &m.PartitionSpecs[i], nil
		}
	}
	return nil, fmt.Errorf("the table metadata has no partition spec %d", m.DefaultSpecID)
}

// current returns the table's current snapshot; nil before the first.
func (m *tableMetadata) current() *snapshot {
	if m.CurrentSnapshotID == nil {
		return nil
	}
	for i := range m.Snapshots {
		if m.Snapshots[i].SnapshotID == *m.CurrentSnapshotID {
			return &m.Snapshots[i]
		}
	}
	return nil
}

// offsets reads the source partitions' offsets the table records, in its
// properties and its current snapshot's summary (the greater of both).
func (m *tableMetadata) offsets() map[lakehouse.Partition]int64 {
	sources := []map[string]string{m.Properties}
	if s := m.current(); s != nil {
		sources = append(sources, s.Summary)
	}
	return lakehouse.RecordedOffsets(sources...)
}

// set replaces a field of the metadata as it is written.
func (m *tableMetadata) set(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	m.raw[key] = b
	return nil
}

// appendTo appends v to the array field key of the metadata as written.
func (m *tableMetadata) appendTo(key string, v any) error {
	var arr []json.RawMessage
	if b, ok := m.raw[key]; ok && string(b) != "null" {
		if err := json.Unmarshal(b, &arr); err != nil {
			return fmt.Errorf("the table metadata's %s: %w", key, err)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return m.set(key, append(arr, b))
}

// encode returns the metadata file as written: every field read, those
// set replaced.
func (m *tableMetadata) encode() ([]byte, error) {
	return json.Marshal(m.raw)
}

// version returns the version number a metadata file's name starts with
// (00012-<uuid>.metadata.json), -1 for another name.
func version(location string) int {
	name := location[strings.LastIndexByte(location, '/')+1:]
	num, _, ok := strings.Cut(name, "-")
	if !ok {
		return -1
	}
	v, err := strconv.Atoi(num)
	if err != nil {
		return -1
	}
	return v
}

// mainSnapshot returns the snapshot main is at; nil when the table has no
// main branch (no snapshot: current-snapshot-id is null, or -1 as Java
// wrote it before format version 3).
func (m *tableMetadata) mainSnapshot() *int64 {
	var refs map[string]struct {
		SnapshotID *int64 `json:"snapshot-id"`
	}
	if err := jsonUnmarshal(m.raw["refs"], &refs); err == nil && refs != nil {
		return refs["main"].SnapshotID
	}
	if m.CurrentSnapshotID != nil && *m.CurrentSnapshotID >= 0 {
		return m.CurrentSnapshotID
	}
	return nil
}
