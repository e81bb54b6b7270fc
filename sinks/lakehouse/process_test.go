package lakehouse_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cdclake/cdclake/internal/syncbuf"
	"github.com/cdclake/cdclake/sinks/lakehouse"
)

// fake is a Catalog that records its calls and answers from its fields.
type fake struct {
	set    lakehouse.FileSet
	named  string
	files  []lakehouse.File
	offs   map[lakehouse.Partition]int64
	skip   map[string]bool
	failed error
}

func (f *fake) Offsets(context.Context, string) (map[lakehouse.Partition]int64, error) {
	return f.offs, nil
}
func (f *fake) Landed(_ context.Context, _ string, parts map[lakehouse.Partition]bool) (map[string]bool, error) {
	out := map[string]bool{}
	for p := range parts {
		out[p.Source+"/x.parquet"] = true
	}
	return out, nil
}
func (f *fake) Commit(_ context.Context, _ string, files []lakehouse.File, rec map[lakehouse.Partition]int64, skip map[string]bool) error {
	f.files, f.offs, f.skip = files, rec, skip
	return f.failed
}
func (f *fake) RecordOffsets(context.Context, string, map[lakehouse.Partition]int64) error {
	return nil
}
func (f *fake) Compact(_ context.Context, dataset string, opt lakehouse.Compaction) (lakehouse.Compacted, error) {
	return lakehouse.Compacted{Written: 1, Replaced: opt.MinFiles, Rows: opt.TargetBytes, Bytes: int64(len(dataset))}, f.failed
}
func (f *fake) Expire(_ context.Context, _ string, exp lakehouse.Expiry) (lakehouse.Expired, error) {
	return lakehouse.Expired{Snapshots: exp.RetainLast, Files: int(exp.OlderThan / time.Second)}, f.failed
}
func (f *fake) Datasets(context.Context) ([]string, error) { return []string{"a.b", "c"}, nil }
func (f *fake) Close() error                               { return nil }
func (f *fake) SetFiles(_ context.Context, name string, set lakehouse.FileSet) error {
	f.named, f.set = name, set
	return f.failed
}

// TestServe: each Catalog call crosses Serve's pipe whole: files with their
// schemas, offsets, skipped keys, results, and ErrSchema as itself.
func TestServe(t *testing.T) {
	cat := &fake{}
	cli := lakehouse.Pipe(t, func(context.Context, lakehouse.Config, *slog.Logger) (lakehouse.Catalog, error) { return cat, nil })
	ctx := context.Background()
	sch := arrow.NewSchema([]arrow.Field{{Name: "_cdc_offset", Type: arrow.PrimitiveTypes.Int64}}, nil)
	p := lakehouse.Partition{Source: "topic", Partition: 3}
	files := []lakehouse.File{{Key: "t/a.parquet", Table: "t", Schema: sch, Source: "topic", Partition: 3, First: 7, Granularity: "day"},
		{Key: "t/b.parquet", Table: "t", Schema: sch, Source: "topic", Partition: 3, First: 9}}
	if err := cli.Commit(ctx, "t", files, map[lakehouse.Partition]int64{p: 12}, map[string]bool{"t/a.parquet": true}); err != nil {
		t.Fatal(err)
	}
	if len(cat.files) != 2 || cat.files[0].First != 7 || cat.files[0].Granularity != "day" || !cat.files[1].Schema.Equal(sch) ||
		cat.offs[p] != 12 || !cat.skip["t/a.parquet"] {
		t.Errorf("served %+v %v %v", cat.files, cat.offs, cat.skip)
	}
	if offs, err := cli.Offsets(ctx, "t"); err != nil || offs[p] != 12 {
		t.Errorf("offsets %v %v", offs, err)
	}
	if keys, err := cli.Landed(ctx, "t", map[lakehouse.Partition]bool{p: true}); err != nil || !keys["topic/x.parquet"] {
		t.Errorf("landed %v %v", keys, err)
	}
	if done, err := cli.Compact(ctx, "t", lakehouse.Compaction{TargetBytes: 9, MinFiles: 3}); err != nil ||
		done != (lakehouse.Compacted{Written: 1, Replaced: 3, Rows: 9, Bytes: 1}) {
		t.Errorf("compact %+v %v", done, err)
	}
	if done, err := cli.Expire(ctx, "t", lakehouse.Expiry{OlderThan: 5 * time.Second, RetainLast: 2}); err != nil ||
		done != (lakehouse.Expired{Snapshots: 2, Files: 5}) {
		t.Errorf("expire %+v %v", done, err)
	}
	if names, err := cli.Datasets(ctx); err != nil || strings.Join(names, " ") != "a.b c" {
		t.Errorf("datasets %v %v", names, err)
	}
	set := lakehouse.FileSet{Location: "_current/t", Keys: []string{"_current/t/bucket-0000-1.parquet"}, Schema: sch,
		Properties: map[string]string{"cdclake.current.version": "1"}}
	if err := cli.SetFiles(ctx, "t__current", set); err != nil || cat.named != "t__current" || cat.set.Location != set.Location ||
		!slices.Equal(cat.set.Keys, set.Keys) || !cat.set.Schema.Equal(sch) || cat.set.Properties["cdclake.current.version"] != "1" {
		t.Errorf("setfiles %q %+v %v", cat.named, cat.set, err)
	}
	cat.failed = errors.New("boom: " + lakehouse.ErrSchema.Error())
	if err := cli.Commit(ctx, "t", files, nil, nil); err == nil || errors.Is(err, lakehouse.ErrSchema) {
		t.Errorf("a plain error came back as %v", err)
	}
	cat.failed = lakehouse.ErrSchema
	if err := cli.Commit(ctx, "t", files, nil, nil); !errors.Is(err, lakehouse.ErrSchema) {
		t.Errorf("ErrSchema came back as %v", err)
	}
	cat.failed = fmt.Errorf("loading t: %w", lakehouse.ErrOtherLake)
	if err := cli.Commit(ctx, "t", files, nil, nil); !errors.Is(err, lakehouse.ErrOtherLake) || errors.Is(err, lakehouse.ErrSchema) {
		t.Errorf("ErrOtherLake came back as %v", err)
	}
}

// barrier answers Offsets with the dataset's name as its source, once
// all calls expected have arrived: served one after the other, the first
// would wait forever.
type barrier struct {
	fake
	arrived sync.WaitGroup
}

func (b *barrier) Offsets(_ context.Context, dataset string) (map[lakehouse.Partition]int64, error) {
	b.arrived.Done()
	all := make(chan struct{})
	go func() { b.arrived.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		return nil, errors.New("the other calls never came: calls are served one at a time")
	}
	n, _ := strconv.Atoi(dataset)
	return map[lakehouse.Partition]int64{{Source: dataset}: int64(n)}, nil
}

// TestServeConcurrentCalls: calls made at once are served at once, and each
// gets its own reply.
func TestServeConcurrentCalls(t *testing.T) {
	const calls = 20
	b := &barrier{}
	b.arrived.Add(calls)
	cli := lakehouse.Pipe(t, func(context.Context, lakehouse.Config, *slog.Logger) (lakehouse.Catalog, error) { return b, nil })
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			ds := strconv.Itoa(i)
			offs, err := cli.Offsets(context.Background(), ds)
			if err != nil || len(offs) != 1 || offs[lakehouse.Partition{Source: ds}] != int64(i) {
				t.Errorf("call %d got %v %v", i, offs, err)
			}
		})
	}
	wg.Wait()
}

// TestServeFailedOpen: a catalog that fails to open (a typed nil with its
// error) is reported, not served, and not closed.
func TestServeFailedOpen(t *testing.T) {
	var out strings.Builder
	in := strings.NewReader(`{"id":1,"op":"open","config":{}}` + "\n" + `{"id":2,"op":"offsets","dataset":"t"}` + "\n")
	open := func(context.Context, lakehouse.Config, *slog.Logger) (lakehouse.Catalog, error) {
		var none *fake
		return none, errors.New("no such database")
	}
	if err := lakehouse.Serve(in, &out, io.Discard, open); err != nil {
		t.Fatal(err)
	}
	want := `{"id":1,"error":"no such database"}` + "\n" + `{"id":2,"error":"offsets: the catalog is not open"}` + "\n"
	if out.String() != want {
		t.Errorf("replies:\n%s\nwant\n%s", out.String(), want)
	}
}

// TestStartSetsGOGC: the committer runs with GOGC at 400 unless cdclake's
// environment sets GOGC, which it then inherits.
func TestStartSetsGOGC(t *testing.T) {
	dir := t.TempDir()
	seen := filepath.Join(dir, "gogc")
	bin := filepath.Join(dir, "lakehouse")
	// A committer that records its GOGC and exits at once.
	script := "#!/bin/sh\nprintf %s \"$GOGC\" > " + seen + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CDCLAKE_LAKEHOUSE", bin)
	for _, tc := range []struct{ set, want string }{{"", "400"}, {"50", "50"}} {
		t.Setenv("GOGC", tc.set) // restored after the test
		if tc.set == "" {
			os.Unsetenv("GOGC")
		}
		if _, err := lakehouse.Start(context.Background(), lakehouse.Config{}, slog.Default(), slog.LevelInfo, "text"); err == nil {
			t.Fatal("a committer that exits at once started")
		}
		if got, err := os.ReadFile(seen); err != nil || string(got) != tc.want {
			t.Errorf("GOGC %q: the committer ran with GOGC %q (%v), want %q", tc.set, got, err, tc.want)
		}
	}
}

// TestMain makes this test binary a committer process when
// CDCLAKE_TEST_SERVE is set (TestStartAgain): it serves a catalog whose
// Offsets answers with its process id and whose Commit never returns.
func TestMain(m *testing.M) {
	if os.Getenv("CDCLAKE_TEST_SERVE") != "" {
		open := func(context.Context, lakehouse.Config, *slog.Logger) (lakehouse.Catalog, error) {
			return &pidCatalog{}, nil
		}
		if err := lakehouse.Serve(os.Stdin, os.Stdout, os.Stderr, open); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type pidCatalog struct{ fake }

func (*pidCatalog) Offsets(context.Context, string) (map[lakehouse.Partition]int64, error) {
	return map[lakehouse.Partition]int64{{Source: "pid"}: int64(os.Getpid())}, nil
}

func (*pidCatalog) Commit(ctx context.Context, _ string, _ []lakehouse.File, _ map[lakehouse.Partition]int64, _ map[string]bool) error {
	<-ctx.Done() // the server's context never ends: the commit hangs until the process dies
	return ctx.Err()
}

// TestStartAgain: a committer process killed under a commit fails that
// commit (its reply is lost), and the next call runs in a new process,
// with the end of the old one logged at ERROR.
func TestStartAgain(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CDCLAKE_LAKEHOUSE", exe)
	t.Setenv("CDCLAKE_TEST_SERVE", "1")
	var logged syncbuf.Buffer
	ctx := context.Background()
	cat, err := lakehouse.Start(ctx, lakehouse.Config{}, slog.New(slog.NewTextHandler(&logged, nil)), slog.LevelInfo, "text")
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	pid := func() int {
		t.Helper()
		offs, err := cat.Offsets(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		return int(offs[lakehouse.Partition{Source: "pid"}])
	}
	first := pid()
	if first == os.Getpid() || first == 0 {
		t.Fatalf("the catalog runs in process %d", first)
	}
	committed := make(chan error, 1)
	go func() { committed <- cat.Commit(ctx, "t", nil, nil, nil) }()
	time.Sleep(200 * time.Millisecond) // the commit is under way
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-committed:
		if err == nil {
			t.Fatal("a commit whose process was killed succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a commit whose process was killed still waits")
	}
	second := pid()
	if second == first || second == 0 {
		t.Errorf("after the kill the catalog runs in process %d, before %d", second, first)
	}
	if pid() != second {
		t.Error("the new process was started again with no reason")
	}
	if log := logged.String(); !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "signal: killed") ||
		strings.Count(log, "starting it again") != 1 {
		t.Errorf("the restart was logged as:\n%s", log)
	}
	if err := cat.Close(); err != nil {
		t.Errorf("closing: %v", err)
	}
}
