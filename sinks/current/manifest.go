package current

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/cdclake/cdclake/sinks/lakehouse/deletion"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// manifest is what a build of a state table records: created once per
// build, never rewritten.
type manifest struct {
	Version int64 `json:"version"`
	// Base is the version the build started from (0: none).
	Base    int64    `json:"base,omitempty"`
	Dataset string   `json:"dataset"`
	Key     []string `json:"key"`
	Buckets int      `json:"buckets"`
	// Rows is each bucket's rows, Files its file ("": none).
	Rows  []int64  `json:"rows"`
	Files []string `json:"files"`
	// Merge is, per bucket, what merge-on-read builds added to its file
	// (nil: nothing, the bucket is its file); empty when no bucket has
	// any.
	Merge []*merge `json:"merge,omitempty"`
	// Offsets is where the state stands in each source partition, by
	// source and partition.
	Offsets []Offset `json:"offsets"`
	// Consumed is the change files of partitions without a landing state
	// (the file source) every row of which is folded in, in order, with
	// their sizes: later builds do not read them again unless they change
	// (the file source rewrites a file with more rows when its input
	// grew).
	Consumed []Consumed `json:"consumed"`
	// Partial is the change files of partitions with a landing state that
	// hold changes at or past where the state stands as well as below:
	// the next build reads them again. Every other file that begins below
	// where the state stands is folded in whole, so the manifest does not
	// grow with the lake.
	Partial []string `json:"partial,omitempty"`
	// Schema is the state table's data columns, an Arrow IPC schema
	// message: the buckets a build does not rewrite keep their columns'
	// types known.
	Schema []byte `json:"schema,omitempty"`
}

// merge is what merge-on-read builds added to a bucket's file: files of
// the rows they changed, and the deletion vectors of the rows those
// replaced.
type merge struct {
	// Files are the files of the rows they changed, oldest first.
	Files []string `json:"files,omitempty"`
	// Deletes is the deletion vector of each of the bucket's files that
	// has rows deleted, by file key.
	Deletes []deletion.Vector `json:"deletes,omitempty"`
	// Dead is how many rows of the bucket's files are deleted.
	Dead int64 `json:"dead"`
}

// dataFiles returns bucket bk's data files, its file first.
func (m *manifest) dataFiles(bk int) []string {
	var out []string
	if m.Files[bk] != "" {
		out = append(out, m.Files[bk])
	}
	if bk < len(m.Merge) && m.Merge[bk] != nil {
		out = append(out, m.Merge[bk].Files...)
	}
	return out
}

// vectors returns every deletion vector, by bucket then file.
func (m *manifest) vectors() []deletion.Vector {
	var out []deletion.Vector
	for _, mg := range m.Merge {
		if mg != nil {
			out = append(out, mg.Deletes...)
		}
	}
	return out
}

// names reports whether key is one of the state table's files.
func (m *manifest) names(key string) bool {
	for bk := range m.Files {
		if slices.Contains(m.dataFiles(bk), key) {
			return true
		}
	}
	return slices.ContainsFunc(m.vectors(), func(v deletion.Vector) bool { return v.Puffin == key })
}

func cloneMerge(in []*merge) []*merge {
	if in == nil {
		return nil
	}
	out := make([]*merge, len(in))
	for i, mg := range in {
		if mg != nil {
			out[i] = &merge{Files: slices.Clone(mg.Files), Deletes: slices.Clone(mg.Deletes), Dead: mg.Dead}
		}
	}
	return out
}

// Consumed is a change file a state holds every row of.
type Consumed struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

const manifestDir = ManifestDir + "/"

// KeepManifests is how many manifests a state table keeps.
const KeepManifests = 10

func manifestKey(into string, version int64) string {
	return fmt.Sprintf("%s/%s%020d.json", into, manifestDir, version)
}

// manifests lists a state table's manifest keys, oldest first.
func manifests(ctx context.Context, bucket *blob.Bucket, into string) ([]string, error) {
	var keys []string
	it := bucket.List(&blob.ListOptions{Prefix: into + "/" + manifestDir})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing the manifests of %s: %w", into, err)
		}
		if strings.HasSuffix(obj.Key, ".json") {
			keys = append(keys, obj.Key)
		}
	}
	return keys, nil // the names sort by version
}

// latestManifest reads a state table's newest manifest, nil when it has
// none.
func latestManifest(ctx context.Context, bucket *blob.Bucket, into string) (*manifest, error) {
	keys, err := manifests(ctx, bucket, into)
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	return readManifest(ctx, bucket, keys[len(keys)-1])
}

// readManifest reads the manifest at key.
func readManifest(ctx context.Context, bucket *blob.Bucket, key string) (*manifest, error) {
	data, err := bucket.ReadAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: not a state table manifest: %w", key, err)
	}
	if m.Buckets < 1 || len(m.Rows) != m.Buckets || len(m.Files) != m.Buckets || len(m.Key) == 0 ||
		(len(m.Merge) != 0 && len(m.Merge) != m.Buckets) {
		return nil, fmt.Errorf("%s: not a state table manifest: %d buckets, %d row counts, %d files, key %v", key, m.Buckets,
			len(m.Rows), len(m.Files), m.Key)
	}
	return &m, nil
}

func encodeSchema(s *arrow.Schema) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decodeSchema(data []byte) (*arrow.Schema, error) {
	if len(data) == 0 {
		return arrow.NewSchema(nil, nil), nil
	}
	r, err := ipc.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the manifest's schema: %w", err)
	}
	defer r.Release()
	return r.Schema(), nil
}

func isNotFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

// Named returns the version of the state table manifest data holds and
// the files it names (data files and deletion vector files): a table
// format's expiry keeps those of builds newer than the one its table
// holds, which a later commit may add.
func Named(data []byte) (int64, []string, error) {
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return 0, nil, fmt.Errorf("not a state table manifest: %w", err)
	}
	var out []string
	for bk := range m.Files {
		out = append(out, m.dataFiles(bk)...)
	}
	for _, v := range m.vectors() {
		out = append(out, v.Puffin)
	}
	return m.Version, out, nil
}

// ManifestDir is the folder of a state table's manifests, under its own.
const ManifestDir = "_manifest"
