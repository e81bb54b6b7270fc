package lake_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/parquet"
	"github.com/cdclake/cdclake/sinks/sinktest"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"
)

func open(t *testing.T, url string) (sinktest.Sink, *blob.Bucket) {
	t.Helper()
	b, err := lake.OpenBucket(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return lake.New(b, memory.NewGoAllocator()), b
}

func TestConformanceMem(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) (sinktest.Sink, *blob.Bucket) { return open(t, "mem://") })
}

// TestConformanceFile runs the suite on a folder given as a plain path, as
// users do, and checks that nothing else is left in the folder.
func TestConformanceFile(t *testing.T) {
	var dirs []string
	sinktest.Run(t, func(t *testing.T) (sinktest.Sink, *blob.Bucket) {
		dir := filepath.Join(t.TempDir(), "lake")
		dirs = append(dirs, dir)
		return open(t, dir)
	})
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".parquet") && !strings.HasSuffix(path, ".ndjson") {
				t.Errorf("left in the lake folder: %s", path)
			}
			return nil
		})
	}
}

// TestConformanceS3 runs the suite against the S3 server of infra/ when
// CDCLAKE_TEST_S3_URL names a bucket URL there (make e2e sets it).
func TestConformanceS3(t *testing.T) {
	url := os.Getenv("CDCLAKE_TEST_S3_URL")
	if url == "" {
		t.Skip("CDCLAKE_TEST_S3_URL is not set (make e2e sets it)")
	}
	n := 0
	sinktest.Run(t, func(t *testing.T) (sinktest.Sink, *blob.Bucket) {
		// Each run writes under a prefix of its own in the bucket.
		n++
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		s, b := open(t, url+sep+"prefix=sinktest/"+t.Name()+"/"+string(rune('a'+n))+"/")
		t.Cleanup(func() { removeAll(t, b) })
		return s, b
	})
}

func removeAll(t *testing.T, b *blob.Bucket) {
	it := b.List(nil)
	for {
		obj, err := it.Next(context.Background())
		if err != nil {
			return
		}
		if err := b.Delete(context.Background(), obj.Key); err != nil {
			t.Errorf("cleaning up %s: %v", obj.Key, err)
		}
	}
}

func TestFaults(t *testing.T) {
	sinktest.RunFaults(t, func(t *testing.T) (sinktest.Sink, *sinktest.FaultControl, *blob.Bucket) {
		store := memblob.OpenBucket(nil)
		t.Cleanup(func() { store.Close() })
		faulty, ctl := sinktest.Faulty(store, sinktest.Faults{})
		t.Cleanup(func() { faulty.Close() })
		return lake.New(faulty, memory.NewGoAllocator()), ctl, store
	})
}

func TestNormalizeURL(t *testing.T) {
	abs, _ := filepath.Abs("lake")
	for in, want := range map[string]string{
		"lake":                           "file://" + abs + "?create_dir=true&metadata=skip",
		"file:///data/lake":              "file:///data/lake?create_dir=true&metadata=skip",
		"file:///data/lake?metadata=foo": "file:///data/lake?create_dir=true&metadata=foo",
		"mem://":                         "mem://",
		"s3://b?region=x&prefix=p/":      "s3://b?region=x&prefix=p/",
	} {
		if got, err := lake.NormalizeURL(in); err != nil || got != want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := lake.OpenBucket(context.Background(), "nosuch://bucket"); err == nil ||
		!strings.Contains(err.Error(), "opening sink nosuch://bucket") {
		t.Errorf("unknown scheme: %v", err)
	}
}

// TestRetriesAcrossAnOutage: a write the store fails is retried until the
// store is back, the outage logged once when it starts and once when it
// ends; a write past the retry budget fails; data errors are not retried.
func TestRetriesAcrossAnOutage(t *testing.T) {
	store := memblob.OpenBucket(nil)
	defer store.Close()
	faulty, ctl := sinktest.Faulty(store, sinktest.Faults{AfterBytes: 100})
	defer faulty.Close()
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s := lake.New(faulty, memory.NewGoAllocator()).Retrying(lake.Retry{For: 30 * time.Second, Log: log})
	mem := memory.NewGoAllocator()
	rec := sinktest.Record(mem, 40, 0)
	defer rec.Release()
	f := sinktest.NewFile(sinktest.KeyA, rec, [][2]int{{0, 40}})
	go func() {
		time.Sleep(700 * time.Millisecond)
		ctl.SetFaults(sinktest.Faults{})
	}()
	start := time.Now()
	if _, err := s.Write(context.Background(), f); err != nil {
		t.Fatalf("Write across a 0.7 s outage: %v", err)
	}
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Errorf("Write returned after %s, before the store came back", d)
	}
	sinktest.CheckRows(t, mem, store, sinktest.KeyA, rec, f.Parts[0].Ranges)
	if n := strings.Count(logs.String(), "the store fails"); n != 1 || !strings.Contains(logs.String(), "the store works again") {
		t.Errorf("want one outage start and one end logged:\n%s", logs.String())
	}
	// 0.7 s of backoff from 100 ms doubling: 3 or more failed attempts,
	// each but the last retried; the outage counted once it ended.
	st := s.Stats()
	if st.Errors[lake.OpData] < 3 || st.Retries != st.Errors[lake.OpData] || st.Errors[lake.OpCreate] != 0 ||
		st.Outage < 500*time.Millisecond || !st.Failing.IsZero() {
		t.Errorf("stats after the outage: %+v", st)
	}

	// A store that stays down: the write fails once the budget is spent.
	ctl.SetFaults(sinktest.Faults{OnOpen: true})
	short := lake.New(faulty, memory.NewGoAllocator()).Retrying(lake.Retry{For: 300 * time.Millisecond})
	if err := short.WriteObject(context.Background(), "x", []byte("y"), "text/plain"); !errors.Is(err, sinktest.ErrInjected) ||
		!strings.Contains(err.Error(), "retried for 300ms") {
		t.Errorf("after the budget: %v", err)
	}
	if st := short.Stats(); st.Errors[lake.OpObject] < 2 || st.Failing.IsZero() || st.Outage <= 0 {
		t.Errorf("stats of a store still down: %+v", st)
	}
	// A data error is not retried.
	ctl.SetFaults(sinktest.Faults{})
	bad := sinktest.NewFile(sinktest.KeyB, rec, [][2]int{{0, 40}})
	bad.Options.RowGroupRows = 0
	start = time.Now()
	if _, err := s.Write(context.Background(), bad); err == nil || time.Since(start) > time.Second {
		t.Errorf("a data error: %v after %s", err, time.Since(start))
	}
}

// TestObjectRanges reads a Parquet object's offsets through ranged reads.
func TestObjectRanges(t *testing.T) {
	s, b := open(t, "mem://")
	mem := memory.NewGoAllocator()
	rec := sinktest.Record(mem, 30, 100)
	defer rec.Release()
	if _, err := s.Write(context.Background(), sinktest.NewFile(sinktest.KeyA, rec, [][2]int{{0, 10}, {12, 30}})); err != nil {
		t.Fatal(err)
	}
	obj, err := lake.OpenObject(context.Background(), b, sinktest.KeyA)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := parquet.Int64Column(obj, "_cdc_offset", mem)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 28 || offs[0] != 100 || offs[9] != 109 || offs[10] != 112 || offs[27] != 129 {
		t.Errorf("offsets %v", offs)
	}
	if _, err := lake.OpenObject(context.Background(), b, "missing"); gcerrors.Code(err) != gcerrors.NotFound {
		t.Errorf("a missing object: %v", err)
	}
}

// TestFileTemp: a file:// lake's objects are written in a folder of the
// lake that engines skip; a killed writer's leftovers there are removed
// once they are an hour old; other lakes have no such folder.
func TestFileTemp(t *testing.T) {
	root := t.TempDir()
	dir, err := lake.FileTemp(root)
	if err != nil || dir != filepath.Join(root, "_cdclake", "tmp") {
		t.Fatalf("FileTemp = %q, %v", dir, err)
	}
	stale, fresh := filepath.Join(dir, "fileblob1"), filepath.Join(dir, "fileblob2")
	for _, f := range []string{stale, fresh} {
		if err := os.WriteFile(f, []byte("PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := lake.FileTemp("file://" + filepath.ToSlash(root)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a stale temporary file was kept: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a recent temporary file (another writer's) was removed: %v", err)
	}
	for _, u := range []string{"mem://", "file://" + filepath.ToSlash(root) + "?no_tmp_dir=1"} {
		if dir, err := lake.FileTemp(u); dir != "" || err != nil {
			t.Errorf("FileTemp(%s) = %q, %v", u, dir, err)
		}
	}
}

// TestCreateAfterALostReply: a create that succeeded at the store but whose
// reply was lost is retried; the retry finds the object: the same bytes
// are this create's own, other bytes another writer's (ErrExists).
func TestCreateAfterALostReply(t *testing.T) {
	store := memblob.OpenBucket(nil)
	defer store.Close()
	lose := map[string]bool{"state/1": true, "state/2": true}
	var mu sync.Mutex
	faulty, _ := sinktest.Faulty(store, sinktest.Faults{LoseReply: func(key string) bool {
		mu.Lock()
		defer mu.Unlock()
		lost := lose[key]
		lose[key] = false // the reply of the first attempt alone
		return lost
	}})
	defer faulty.Close()
	s := lake.New(faulty, memory.NewGoAllocator()).Retrying(lake.Retry{For: 10 * time.Second})
	ctx := context.Background()
	if err := s.CreateObject(ctx, "state/1", []byte("mine"), "text/plain"); err != nil {
		t.Fatalf("a create whose reply was lost: %v", err)
	}
	if got, _ := store.ReadAll(ctx, "state/1"); string(got) != "mine" {
		t.Errorf("state/1 holds %q", got)
	}
	// Another writer's object under the key: ErrExists, even after a retry.
	if err := store.WriteAll(ctx, "state/2", []byte("theirs"), nil); err != nil {
		t.Fatal(err)
	}
	lose["state/2"] = false
	if err := s.CreateObject(ctx, "state/2", []byte("mine"), "text/plain"); !errors.Is(err, sinks.ErrExists) {
		t.Errorf("a create of a key another writer holds: %v, want ErrExists", err)
	}
	// The store's SDK may retry within one attempt: a create meeting its
	// own bytes succeeds even when this sink saw no failure.
	if err := s.CreateObject(ctx, "state/1", []byte("mine"), "text/plain"); err != nil {
		t.Errorf("a create meeting its own bytes: %v", err)
	}
}

// TestLock: a second lock of a file:// lake is refused while the first is
// held, and taken once it is released; other lakes need none.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lake.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lake.Lock("file://" + dir); err == nil || !strings.Contains(err.Error(), "another process lands into") {
		t.Errorf("a second lock: %v", err)
	}
	unlock()
	again, err := lake.Lock(dir)
	if err != nil {
		t.Fatalf("the lock after it was released: %v", err)
	}
	defer again()
	if other, err := lake.Lock(dir + "?prefix=other/"); err != nil {
		t.Errorf("another prefix of the folder is another lake: %v", err)
	} else {
		other()
	}
	if unlock, err := lake.Lock("mem://"); err != nil {
		t.Errorf("mem://: %v", err)
	} else {
		unlock()
	}
}

// TestFileLakeSyncs: on a file:// lake an object's bytes are synced before
// it appears under its name, and its folder after, so that a power loss
// leaves either nothing or the whole object (never an empty partition
// state or Parquet file); a new folder is synced into its parent.
func TestFileLakeSyncs(t *testing.T) {
	dir := t.TempDir()
	b, err := lake.OpenBucket(context.Background(), "file://"+dir+"?prefix=root/")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var synced []string
	var current string // the object being written
	lake.SetSync(b, func(f *os.File) error {
		name, _ := filepath.Rel(dir, f.Name())
		info, err := f.Stat()
		if err != nil {
			return err
		}
		final := filepath.Join(dir, "root", filepath.FromSlash(current))
		_, statErr := os.Stat(final)
		switch {
		case !info.IsDir() && statErr == nil && synced != nil:
			t.Errorf("%s: its bytes were synced after it appeared", current)
		case !info.IsDir():
			name = "bytes"
		case name == filepath.Dir(filepath.Join("root", filepath.FromSlash(current))) && statErr != nil:
			t.Errorf("%s: its folder was synced before it appeared", current)
		}
		synced = append(synced, filepath.ToSlash(name))
		return f.Sync()
	})
	s := lake.New(b, memory.NewGoAllocator())
	ctx := context.Background()
	for _, c := range []struct {
		key   string
		write func() error
		want  []string
	}{
		{"a/b/state.json", func() error { return s.CreateObject(ctx, "a/b/state.json", []byte("{}"), "application/json") },
			[]string{"bytes", ".", "root", "root/a", "root/a/b"}},
		{"a/b/dead.json", func() error { return s.WriteObject(ctx, "a/b/dead.json", []byte("{}"), "application/json") },
			[]string{"bytes", "root/a/b"}},
		{"a/c/x.parquet", func() error {
			return s.WriteObject(ctx, "a/c/x.parquet", []byte("PAR1"), "application/vnd.apache.parquet")
		},
			[]string{"bytes", "root/a", "root/a/c"}},
	} {
		current, synced = c.key, []string{}
		if err := c.write(); err != nil {
			t.Fatal(err)
		}
		if strings.Join(synced, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s: synced %q, want %q", c.key, synced, c.want)
		}
	}
	// A create-once object is linked into place: a second create of the
	// key, from any process, finds it.
	current, synced = "a/b/state.json", nil
	if err := s.CreateObject(ctx, "a/b/state.json", []byte(`{"other":1}`), "application/json"); !errors.Is(err, sinks.ErrExists) {
		t.Errorf("a second create: %v", err)
	}
	if got, _ := b.ReadAll(ctx, "a/b/state.json"); string(got) != "{}" {
		t.Errorf("the state holds %q", got)
	}
	left, _ := os.ReadDir(filepath.Join(dir, filepath.FromSlash(lake.TempDir)))
	if len(left) != 0 {
		t.Errorf("%d files left in the temporary folder", len(left))
	}
}

// TestRetriesAskTheCheck: a file whose writes fail is retried, but before
// each retry the sink asks the file's Check; once it says the file must
// not be written (its partition went to another instance meanwhile), the
// retries end with its error and nothing is written.
func TestRetriesAskTheCheck(t *testing.T) {
	store := memblob.OpenBucket(nil)
	defer store.Close()
	faulty, ctl := sinktest.Faulty(store, sinktest.Faults{OnClose: true})
	defer faulty.Close()
	s := lake.New(faulty, memory.NewGoAllocator()).Retrying(lake.Retry{For: time.Minute})
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	rec := sinktest.Record(mem, 3, 0)
	defer rec.Release()
	gone := errors.New("claimed by another instance")
	checks := 0
	f := sinktest.NewFile(sinktest.KeyA, rec, [][2]int{{0, 3}})
	f.Once = true
	f.Check = func(context.Context) error {
		checks++
		if checks == 3 {
			return gone
		}
		return nil
	}
	start := time.Now()
	_, err := s.Write(context.Background(), f)
	if !errors.Is(err, gone) || checks != 3 {
		t.Fatalf("Write: %v after %d checks, want the check's error at the third", err, checks)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the retries went on for %s after the check said no", time.Since(start))
	}
	if ok, _ := store.Exists(context.Background(), sinktest.KeyA); ok {
		t.Error("the file was written")
	}
	// A check that says yes lets the retry write it once the store works.
	ctl.SetFaults(sinktest.Faults{})
	f.Check = func(context.Context) error { return nil }
	if _, err := s.Write(context.Background(), f); err != nil {
		t.Fatal(err)
	}
}

// TestFooterKept: a file written from its parts and one written from an
// encoder both keep their footer, which is the stored file's own and
// parses as its metadata; one whose footer outgrows what Write keeps
// keeps none.
func TestFooterKept(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	s := lake.New(b, memory.DefaultAllocator)
	rec := sinktest.Record(memory.DefaultAllocator, 10, 0)
	defer rec.Release()
	parts := sinktest.NewFile(sinktest.KeyA, rec, [][2]int{{0, 10}})
	if _, err := s.Write(ctx, parts); err != nil {
		t.Fatal(err)
	}
	enc, err := s.NewEncoder(rec.Schema(), parts.Options)
	if err != nil {
		t.Fatal(err)
	}
	encoded := sinktest.NewFile(sinktest.KeyB, rec, [][2]int{{0, 10}})
	encoded.Encoder = enc
	if _, err := s.Write(ctx, encoded); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*sinks.File{parts, encoded} {
		if f.Footer == nil {
			t.Fatalf("%s: no footer kept", f.Key)
		}
		sinktest.CheckFooter(t, b, f)
		md, err := metadata.NewFileMetaData(f.Footer, nil)
		if err != nil || md.NumRows != 10 {
			t.Errorf("%s: the footer parses as %v rows (%v), want 10", f.Key, md, err)
		}
	}
	for _, tc := range []struct {
		tail []byte
		ok   bool
	}{
		{nil, false},
		{[]byte("PAR1"), false},
		{append([]byte{1, 2, 3, 0, 0, 0}, "PAR1"...), false}, // 0-byte footer
		{append([]byte{7, 3, 0, 0, 0}, "PAR1"...), false},    // 3 bytes claimed, 1 there
		{append([]byte{7, 8, 9, 3, 0, 0, 0}, "PAR1"...), true},
		{append([]byte{7, 8, 9, 3, 0, 0, 0}, "PARX"...), false},
	} {
		if got := lake.Footer(tc.tail); (got != nil) != tc.ok {
			t.Errorf("Footer(%v) = %v, want found: %v", tc.tail, got, tc.ok)
		}
	}
}
