package iceappend

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/cdclake/cdclake/sinks/lakehouse"
)

func jsonUnmarshal(b []byte, v any) error {
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, v)
}

// append commits files to the dataset's table in one append snapshot that
// records recorded, making the table first; s is held. What it does not
// write is unsupported (see the package documentation).
func (c *Catalog) append(ctx context.Context, s *tableState, dataset string, files []lakehouse.File,
	recorded map[lakehouse.Partition]int64, skip map[string]bool) error {
	var adding []lakehouse.File
	for _, f := range files {
		if !skip[f.Key] {
			adding = append(adding, f)
		}
	}
	meta, err := c.load(ctx, s, dataset)
	if err != nil {
		return err
	}
	if meta != nil {
		// What another writer committed since the caller's view of the
		// table was read (an instance that had these partitions, a
		// compaction), recorded or held, is not added again.
		adding = notIn(meta, s.foreign, adding)
	}
	if meta == nil {
		if len(adding) == 0 {
			return unsupported("%s: a table to make without files", dataset)
		}
		if meta, err = c.newTable(dataset, adding[0]); err != nil {
			return err
		}
		if c.rest != nil {
			// The service makes the table (its uuid, its columns' ids);
			// the snapshot is a commit to it.
			if meta, err = c.createREST(ctx, s, dataset, meta); err != nil {
				return err
			}
		}
	}
	props, advanced := merged(meta, recorded)
	if len(adding) == 0 && !advanced {
		return nil
	}
	sch, err := meta.schema()
	if err != nil {
		return unsupported("%v", err)
	}
	schemas, err := fileSchemas(adding)
	if err != nil {
		return err
	}
	spec, err := meta.spec()
	if err != nil {
		return unsupported("%v", err)
	}
	mds, err := c.footers(ctx, adding)
	if err != nil {
		return err
	}
	u, err := c.startUpdate(meta, s.loc)
	if err != nil {
		return err
	}
	// Columns the files bring are added in the same snapshot, as one new
	// schema.
	fields, evolved := sch.Fields, false
	var last int
	if err := jsonUnmarshal(meta.raw["last-column-id"], &last); err != nil {
		return unsupported("%s: last-column-id: %v", dataset, err)
	}
	lastBefore := last
	for _, fs := range schemas {
		f, changed, err := evolve(fields, fs, &last)
		if err != nil {
			return unsupported("%s: %v", dataset, err)
		}
		fields, evolved = f, evolved || changed
	}
	if evolved && bytes.Contains(meta.raw["schemas"], []byte(`-default"`)) {
		// Column defaults (initial-default, write-default) another writer
		// set: the schema is evolved by the full committer, which keeps
		// them.
		return unsupported("%s: a schema with column defaults to evolve", dataset)
	}
	if evolved {
		next := schemaJSON{Type: "struct", Fields: fields, IdentifierFieldIDs: sch.IdentifierFieldIDs}
		for _, s := range meta.Schemas {
			next.SchemaID = max(next.SchemaID, s.SchemaID+1)
		}
		if next.IdentifierFieldIDs == nil {
			next.IdentifierFieldIDs = []int{}
		}
		if c.rest != nil && hasSchema(meta, next) {
			// A REST service would take the older schema's id for it,
			// which the manifest and the snapshot do not name.
			return unsupported("%s: a schema the table had before", dataset)
		}
		u.require("assert-current-schema-id", "current-schema-id", meta.CurrentSchemaID)
		u.require("assert-last-assigned-field-id", "last-assigned-field-id", lastBefore)
		u.change("add-schema", "schema", next, "last-column-id", last)
		u.change("set-current-schema", "schema-id", -1) // the one added
		if err := errors.Join(u.setProperties(map[string]string{"schema.name-mapping.default": nameMapping(fields)}),
			u.meta.appendTo("schemas", next), u.meta.set("current-schema-id", next.SchemaID),
			u.meta.set("last-column-id", last)); err != nil {
			return err
		}
		sch = &next
	}
	for _, fs := range schemas {
		if !covers(sch.Fields, fs) {
			return unsupported("%s: the files bring a schema change", dataset)
		}
	}
	if _, ok := u.meta.Properties["schema.name-mapping.default"]; !ok {
		// A table another writer made: the files carry no field ids, and
		// readers find their columns by the name mapping.
		props["schema.name-mapping.default"] = nameMapping(sch.Fields)
	}
	if err := u.setProperties(props); err != nil {
		return err
	}
	delete(props, "schema.name-mapping.default") // not in the summary
	u.what = recording(props)
	if len(adding) > 0 {
		if err := c.addSnapshot(ctx, dataset, meta, u, sch, spec, adding, mds, props); err != nil {
			return err
		}
	}
	return c.publish(ctx, s, dataset, meta, u)
}

// notIn returns the files of files that start at or past the offset the
// table records for their partition, and that other writers did not add
// (foreign).
func notIn(meta *tableMetadata, foreign map[string]bool, files []lakehouse.File) []lakehouse.File {
	recorded := meta.offsets()
	var out []lakehouse.File
	for _, f := range files {
		p := lakehouse.Partition{Source: f.Source, Partition: f.Partition}
		if r, ok := recorded[p]; ok && f.First < r || foreign[f.Key] {
			continue
		}
		out = append(out, f)
	}
	return out
}

// addSnapshot writes the manifest and manifest list of an append snapshot
// of files and adds the snapshot to u.
func (c *Catalog) addSnapshot(ctx context.Context, dataset string, meta *tableMetadata, u *update, sch *schemaJSON,
	spec *partitionSpec, files []lakehouse.File, mds []*metadata.FileMetaData, props map[string]string) error {
	ls := leaves(sch.Fields)
	// The partition fields' sources: top-level dates and timestamps.
	type source struct {
		id  int
		typ string
	}
	sources := make([]source, len(spec.Fields))
	for i, pf := range spec.Fields {
		f := fieldByID(sch.Fields, pf.SourceID)
		if f == nil || f.Type.Kind != "" {
			return unsupported("%s: the partition field %s has no primitive source", dataset, pf.Name)
		}
		if _, ok := transformed(pf.Transform, f.Type.Prim, 0); !ok {
			return unsupported("%s: the partition transform %s of a %s", dataset, pf.Transform, f.Type.Prim)
		}
		sources[i] = source{pf.SourceID, f.Type.Prim}
	}
	seq := meta.LastSequenceNumber + 1
	firstRow := *meta.NextRowID
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s", meta.TableUUID, seq, u.prev)
	for _, f := range files {
		fmt.Fprintf(h, "\x00%s", f.Key)
	}
	seed := h.Sum(nil)
	u.what = seed
	id := snapshotID(meta, seed)
	name := uuidOf(seed[8:])

	entries := make([]any, 0, len(files))
	var rows, size int64
	summaries := make([]fieldSummary, len(spec.Fields))
	partitions := map[string]bool{}
	for i, f := range files {
		md := mds[i]
		stats, splits, err := fileStats(md, ls)
		if err != nil {
			return unsupported("%s: the statistics of %s: %v", dataset, f.Key, err)
		}
		part := map[string]any{}
		pkey := ""
		for j, pf := range spec.Fields {
			st := stats[sources[j].id]
			if st == nil || st.values == st.nulls && st.nullsKnown {
				part[pf.Name] = nil
				summaries[j].ContainsNull = true
				pkey += "\x00null"
				continue
			}
			if !st.intsSet || !st.nullsKnown || st.nulls > 0 {
				return unsupported("%s: %s has no single %s partition in its statistics", dataset, f.Key, pf.Name)
			}
			v, ok := partitionValue(pf.Transform, sources[j].typ, st.lo, st.hi)
			if !ok {
				return unsupported("%s: %s spans more than one %s partition", dataset, f.Key, pf.Name)
			}
			part[pf.Name] = partitionDatum(pf.Transform, v)
			widen(&summaries[j], v)
			pkey += "\x00" + strconv.Itoa(int(v))
		}
		partitions[pkey] = true
		// first_row_id stays null: an added file inherits it from the
		// manifest's, which the manifest list assigns (row lineage).
		df := dataFile{FilePath: c.location(f.Key), FileFormat: "PARQUET", Partition: part, RecordCount: md.NumRows,
			FileSizeInBytes: f.Bytes, SplitOffsets: &splits}
		var sizes, values, nulls []intLong
		var lower, upper []intBytes
		for _, fid := range slices.Sorted(maps.Keys(stats)) {
			st := stats[fid]
			k := int32(fid)
			sizes = append(sizes, intLong{k, st.size})
			values = append(values, intLong{k, st.values})
			if st.nullsKnown {
				nulls = append(nulls, intLong{k, st.nulls})
			}
			if st.lower != nil {
				lower = append(lower, intBytes{k, st.lower})
			}
			if st.upper != nil {
				upper = append(upper, intBytes{k, st.upper})
			}
		}
		df.ColumnSizes, df.ValueCounts, df.NullValueCounts = &sizes, &values, &nulls
		df.LowerBounds, df.UpperBounds = &lower, &upper
		snap := id
		entries = append(entries, manifestEntry{Status: 1, SnapshotID: &snap, DataFile: df})
		rows += md.NumRows
		size += f.Bytes
	}

	schemaJSON, err := json.Marshal(sch)
	if err != nil {
		return err
	}
	specJSON, err := json.Marshal(spec.Fields)
	if err != nil {
		return err
	}
	esch, etext, err := entrySchema(*spec)
	if err != nil {
		return err
	}
	manifest, err := writeOCF(esch, etext, map[string]string{"schema": string(schemaJSON), "schema-id": strconv.Itoa(sch.SchemaID),
		"partition-spec": string(specJSON), "partition-spec-id": strconv.Itoa(spec.SpecID), "format-version": "3",
		"content": "data"}, entries)
	if err != nil {
		return fmt.Errorf("the manifest of %s: %w", dataset, err)
	}
	manifestKey := dataset + "/metadata/" + name + "-m0.avro"
	if err := c.store.WriteObject(ctx, manifestKey, manifest, "application/octet-stream"); err != nil {
		return fmt.Errorf("writing a manifest of %s: %w", dataset, err)
	}

	firstRowID := firstRow
	list := []any{manifestFile{Path: c.location(manifestKey), Length: int64(len(manifest)), SpecID: int32(spec.SpecID),
		SequenceNumber: seq, MinSequenceNumber: seq, AddedSnapshotID: id, AddedFiles: int32(len(files)),
		Partitions: &summaries, AddedRows: rows, FirstRowID: &firstRowID}}
	parent := meta.current()
	if parent != nil {
		prev, err := c.manifests(ctx, parent)
		if err != nil {
			return err
		}
		for _, m := range prev {
			if m.Content == 0 && m.FirstRowID == nil {
				return unsupported("%s: a data manifest without a first row id", dataset)
			}
			list = append(list, m)
		}
	}
	listMeta := map[string]string{"snapshot-id": strconv.FormatInt(id, 10), "parent-snapshot-id": "null",
		"sequence-number": strconv.FormatInt(seq, 10), "first-row-id": strconv.FormatInt(firstRow, 10), "format-version": "3"}
	if parent != nil {
		listMeta["parent-snapshot-id"] = strconv.FormatInt(parent.SnapshotID, 10)
	}
	listBytes, err := writeOCF(manifestListSchema, manifestListJSON, listMeta, list)
	if err != nil {
		return fmt.Errorf("the manifest list of %s: %w", dataset, err)
	}
	listKey := fmt.Sprintf("%s/metadata/snap-%d-0-%s.avro", dataset, id, name)
	if err := c.store.WriteObject(ctx, listKey, listBytes, "application/octet-stream"); err != nil {
		return fmt.Errorf("writing a manifest list of %s: %w", dataset, err)
	}

	summary := map[string]string{"operation": "append", "added-data-files": strconv.Itoa(len(files)),
		"added-records": strconv.FormatInt(rows, 10), "added-files-size": strconv.FormatInt(size, 10),
		"changed-partition-count": strconv.Itoa(len(partitions))}
	totals := map[string]int64{"total-records": rows, "total-files-size": size, "total-data-files": int64(len(files)),
		"total-delete-files": 0, "total-position-deletes": 0, "total-equality-deletes": 0}
	for k, add := range totals {
		var had int64
		if parent != nil {
			v, ok := parent.Summary[k]
			if !ok {
				return unsupported("%s: the current snapshot's summary has no %s", dataset, k)
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return unsupported("%s: the current snapshot's %s: %v", dataset, k, err)
			}
			had = n
		}
		summary[k] = strconv.FormatInt(had+add, 10)
	}
	for k, v := range props {
		summary[k] = v
	}
	schemaID := sch.SchemaID
	snap := snapshot{SnapshotID: id, SequenceNumber: seq, TimestampMS: u.ts, ManifestList: c.location(listKey),
		Summary: summary, SchemaID: &schemaID, FirstRowID: &firstRow, AddedRows: &rows}
	if parent != nil {
		p := parent.SnapshotID
		snap.ParentSnapshotID = &p
	}
	m := u.meta
	var refs map[string]json.RawMessage
	if err := jsonUnmarshal(m.raw["refs"], &refs); err != nil {
		return unsupported("%s: the table's refs: %v", dataset, err)
	}
	if refs == nil {
		refs = map[string]json.RawMessage{}
	}
	// main moves to the snapshot; its retention settings, if any, stay.
	ref := map[string]any{}
	if err := jsonUnmarshal(refs["main"], &ref); err != nil {
		return unsupported("%s: the table's main ref: %v", dataset, err)
	}
	ref["snapshot-id"], ref["type"] = id, "branch"
	main, err := json.Marshal(ref)
	if err != nil {
		return err
	}
	refs["main"] = main
	u.require("assert-default-spec-id", "default-spec-id", spec.SpecID)
	u.change("add-snapshot", "snapshot", snap)
	kv := []any{"ref-name", "main"}
	for _, k := range slices.Sorted(maps.Keys(ref)) {
		kv = append(kv, k, ref[k])
	}
	u.change("set-snapshot-ref", kv...)
	return errors.Join(
		m.appendTo("snapshots", snap),
		m.appendTo("snapshot-log", map[string]any{"snapshot-id": id, "timestamp-ms": u.ts}),
		m.set("current-snapshot-id", id),
		m.set("refs", refs),
		m.set("last-sequence-number", seq),
		m.set("next-row-id", firstRow+rows),
	)
}

// hasSchema reports whether meta has a schema of the same fields as sch.
func hasSchema(meta *tableMetadata, sch schemaJSON) bool {
	want, err := json.Marshal(sch.Fields)
	if err != nil {
		return false
	}
	for _, s := range meta.Schemas {
		if got, err := json.Marshal(s.Fields); err == nil && bytes.Equal(got, want) {
			return true
		}
	}
	return false
}

// widen widens a partition field's summary by a value (the int or date's
// little-endian four bytes).
func widen(s *fieldSummary, v int32) {
	b := binary.LittleEndian.AppendUint32(nil, uint32(v))
	if s.Lower == nil || int32(binary.LittleEndian.Uint32(*s.Lower)) > v {
		lo := b
		s.Lower = &lo
	}
	if s.Upper == nil || int32(binary.LittleEndian.Uint32(*s.Upper)) < v {
		hi := b
		s.Upper = &hi
	}
	no := false
	s.ContainsNaN = &no
}

// fieldByID returns the top-level field of an id.
func fieldByID(fs []field, id int) *field {
	for i := range fs {
		if fs[i].ID == id {
			return &fs[i]
		}
	}
	return nil
}

// granularities are the partition transforms of the time units of
// _cdc_ts a table's files share (lakehouse.File.Granularity).
var granularities = map[string]bool{"hour": true, "day": true, "month": true, "year": true}

// newTable returns the metadata of a new table for a dataset, from the
// schema of its first file, partitioned by the granularity of _cdc_ts its
// files share, as the full committer makes it: format version 3, fresh
// field ids, the name mapping, iceberg-go's commit retries off. The table
// is made when its first snapshot is published.
func (c *Catalog) newTable(dataset string, first lakehouse.File) (*tableMetadata, error) {
	if first.Schema == nil {
		return nil, unsupported("%s: no schema", first.Key)
	}
	last := 0
	fields, err := fromArrow(first.Schema.Fields(), &last)
	if err != nil {
		return nil, err
	}
	spec := partitionSpec{Fields: []partitionField{}}
	lastPartition := 999
	if ts := find(fields, "_cdc_ts"); ts != nil && granularities[first.Granularity] {
		spec.Fields = append(spec.Fields, partitionField{SourceID: ts.ID, FieldID: 1000, Name: "_cdc_ts_" + first.Granularity,
			Transform: first.Granularity})
		lastPartition = 1000
	}
	ns, name, err := c.ident(dataset)
	if err != nil {
		return nil, err
	}
	loc := c.location(dataset)
	seed := sha256.Sum256([]byte(c.cfg.Name + "\x00" + fmt.Sprint(ns) + "\x00" + name + "\x00" + loc))
	props := map[string]string{"commit.retry.num-retries": "0", "schema.name-mapping.default": nameMapping(fields)}
	raw := map[string]any{
		"format-version": 3, "table-uuid": uuidOf(seed[:]), "location": loc, "last-sequence-number": 0, "next-row-id": 0,
		"last-updated-ms": 0, "last-column-id": last, "current-schema-id": 0,
		"schemas":         []schemaJSON{{Type: "struct", Fields: fields, SchemaID: 0, IdentifierFieldIDs: []int{}}},
		"partition-specs": []partitionSpec{spec}, "default-spec-id": 0, "last-partition-id": lastPartition,
		"properties": props, "sort-orders": []any{map[string]any{"order-id": 0, "fields": []any{}}},
		"default-sort-order-id": 0, "current-snapshot-id": nil, "snapshots": []any{}, "snapshot-log": []any{},
		"metadata-log": []any{}, "refs": map[string]any{},
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	return parseMetadata(b)
}

func (c *Catalog) Compact(ctx context.Context, dataset string, opt lakehouse.Compaction) (lakehouse.Compacted, error) {
	full, err := c.fullCatalog(ctx)
	if err != nil {
		return lakehouse.Compacted{}, err
	}
	return full.Compact(ctx, dataset, opt)
}

func (c *Catalog) Expire(ctx context.Context, dataset string, exp lakehouse.Expiry) (lakehouse.Expired, error) {
	full, err := c.fullCatalog(ctx)
	if err != nil {
		return lakehouse.Expired{}, err
	}
	return full.Expire(ctx, dataset, exp)
}

func (c *Catalog) Datasets(ctx context.Context) ([]string, error) {
	full, err := c.fullCatalog(ctx)
	if err != nil {
		return nil, err
	}
	return full.Datasets(ctx)
}

func (c *Catalog) SetFiles(ctx context.Context, name string, set lakehouse.FileSet) error {
	full, err := c.fullCatalog(ctx)
	if err != nil {
		return err
	}
	return full.SetFiles(ctx, name, set)
}

// Close closes the catalog's database and the full committer, if open.
func (c *Catalog) Close() error {
	c.fullMu.Lock()
	full := c.full
	c.full = nil
	c.fullMu.Unlock()
	var errs []error
	if full != nil {
		errs = append(errs, full.Close())
	}
	if c.cat != nil {
		errs = append(errs, c.cat.close())
	}
	return errors.Join(errs...)
}
