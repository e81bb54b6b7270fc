package delta

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The actions of a Delta log (PROTOCOL.md, "Actions"): cdclake writes
// commitInfo, protocol, metaData, add, remove and txn, and reads the
// others' lines only to skip them.
type action struct {
	CommitInfo map[string]any `json:"commitInfo,omitempty"`
	Protocol   *protocol      `json:"protocol,omitempty"`
	MetaData   *metaData      `json:"metaData,omitempty"`
	Txn        *txn           `json:"txn,omitempty"`
	Add        *addFile       `json:"add,omitempty"`
	Remove     *removeFile    `json:"remove,omitempty"`
}

type protocol struct {
	MinReaderVersion int32    `json:"minReaderVersion"`
	MinWriterVersion int32    `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// ourProtocol is the protocol of the tables cdclake makes: table features
// (reader 3, writer 7) with timestampNtz alone, for the local date-times
// cdclake lands (TIMESTAMP not adjusted to UTC).
var ourProtocol = protocol{MinReaderVersion: 3, MinWriterVersion: 7,
	ReaderFeatures: []string{"timestampNtz"}, WriterFeatures: []string{"timestampNtz"}}

// writable reports whether cdclake writes a table of protocol p without
// breaking what it asks of writers: one of ours, or one whose features are
// all ours (a reader or writer of Delta may upgrade a table; cdclake then
// stops rather than write what a feature forbids, deletion vectors,
// column mapping, ...).
func (p protocol) writable() bool {
	if p.MinReaderVersion > 3 || p.MinWriterVersion > 7 {
		return false
	}
	if p.MinWriterVersion == 7 {
		for _, f := range p.WriterFeatures {
			if !slices.Contains(ourProtocol.WriterFeatures, f) && f != "appendOnly" && f != "invariants" {
				return false
			}
		}
	}
	return p.MinWriterVersion == 7 || p.MinWriterVersion <= 2
}

type format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

type metaData struct {
	ID               string            `json:"id"`
	Name             string            `json:"name,omitempty"`
	Description      string            `json:"description,omitempty"`
	Format           format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      int64             `json:"createdTime,omitempty"`
}

type txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated int64  `json:"lastUpdated,omitempty"`
}

type addFile struct {
	Path             string            `json:"path"`
	PartitionValues  map[string]string `json:"partitionValues"`
	Size             int64             `json:"size"`
	ModificationTime int64             `json:"modificationTime"`
	DataChange       bool              `json:"dataChange"`
	Stats            string            `json:"stats,omitempty"`
}

type removeFile struct {
	Path              string `json:"path"`
	DeletionTimestamp int64  `json:"deletionTimestamp"`
	DataChange        bool   `json:"dataChange"`
	Size              int64  `json:"size,omitempty"`
}

// snapshot is a table's state as of a version: the newest protocol,
// metadata and transaction version of each app, the files added and not
// removed since, and the removed files' tombstones.
type snapshot struct {
	version  int64 // -1: no table yet
	protocol *protocol
	meta     *metaData
	schema   dataType
	files    map[string]*addFile
	removed  map[string]*removeFile
	// removedAt is the version that removed each file of removed (at
	// most: the version of the checkpoint it was read from).
	removedAt map[string]int64
	txns      map[string]int64
}

func newSnapshot() *snapshot {
	return &snapshot{version: -1, files: map[string]*addFile{}, removed: map[string]*removeFile{},
		removedAt: map[string]int64{}, txns: map[string]int64{}}
}

// apply applies one version's actions.
func (s *snapshot) apply(version int64, acts []action) error {
	for _, a := range acts {
		switch {
		case a.Protocol != nil:
			p := *a.Protocol
			s.protocol = &p
		case a.MetaData != nil:
			m := *a.MetaData
			sch, err := parseSchema(m.SchemaString)
			if err != nil {
				return fmt.Errorf("version %d: %w", version, err)
			}
			s.meta, s.schema = &m, sch
		case a.Txn != nil:
			s.txns[a.Txn.AppID] = a.Txn.Version
		case a.Add != nil:
			f := *a.Add
			path := unescape(f.Path)
			s.files[path] = &f
			delete(s.removed, path)
			delete(s.removedAt, path)
		case a.Remove != nil:
			r := *a.Remove
			path := unescape(r.Path)
			delete(s.files, path)
			s.removed[path] = &r
			s.removedAt[path] = version
		}
	}
	s.version = version
	return nil
}

// unescape returns the table-relative path of an add or remove path,
// which is a URI: cdclake's names need no escaping, but another writer's
// may carry some.
func unescape(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) {
			if v, err := strconv.ParseUint(p[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// escape returns the URI path of a table-relative path: the characters a
// URI path cannot hold as they are percent-encoded (a partition folder's
// "=" stays).
func escape(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~/=!$&'()*+,;:@", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// decode reads a commit file: one action a line. Lines of actions cdclake
// does not know (cdc, domainMetadata, ...) are skipped.
func decode(data []byte) ([]action, error) {
	var out []action
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<30)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var a action
		if err := json.Unmarshal(line, &a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, sc.Err()
}

// encode writes a commit file.
func encode(acts []action) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, a := range acts {
		_ = enc.Encode(a) // plain values: never fails
	}
	return b.Bytes()
}

// logKey returns the key of a version's commit file under a table's root.
func logKey(root string, version int64) string {
	return fmt.Sprintf("%s/_delta_log/%020d.json", root, version)
}

// checkpointKey returns the key of a version's single-file checkpoint.
func checkpointKey(root string, version int64) string {
	return fmt.Sprintf("%s/_delta_log/%020d.checkpoint.parquet", root, version)
}

// lastCheckpointKey is the key of a table's _last_checkpoint.
func lastCheckpointKey(root string) string { return root + "/_delta_log/_last_checkpoint" }

// logVersion reads the version of a log file's name: a commit
// (%020d.json) or a single-file checkpoint (%020d.checkpoint.parquet).
func logVersion(name string) (v int64, checkpoint, ok bool) {
	base, isCommit := strings.CutSuffix(name, ".json")
	if !isCommit {
		base, checkpoint = strings.CutSuffix(name, ".checkpoint.parquet")
		if !checkpoint {
			return 0, false, false
		}
	}
	if len(base) != 20 {
		return 0, false, false
	}
	v, err := strconv.ParseInt(base, 10, 64)
	return v, checkpoint, err == nil
}
