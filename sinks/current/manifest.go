package current

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// manifest is what a build of a state table records: created once per
// build, never rewritten.
type manifest struct {
	Version int64    `json:"version"`
	Dataset string   `json:"dataset"`
	Key     []string `json:"key"`
	Buckets int      `json:"buckets"`
	// Rows is each bucket's rows, Files its file ("": none).
	Rows  []int64  `json:"rows"`
	Files []string `json:"files"`
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

// Consumed is a change file a state holds every row of.
type Consumed struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

const manifestDir = "_manifest/"

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
	key := keys[len(keys)-1]
	data, err := bucket.ReadAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: not a state table manifest: %w", key, err)
	}
	if m.Buckets < 1 || len(m.Rows) != m.Buckets || len(m.Files) != m.Buckets || len(m.Key) == 0 {
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
