package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/sinktest"
	"github.com/cdclake/cdclake/sinks/state"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

func TestAppendLatestPrune(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	st := state.NewStore(b, lake.New(b, memory.NewGoAllocator()))
	if got, err := st.Latest(ctx, "orders/topic", 3); got != nil || err != nil {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	cut := state.Cut{Key: "db.t/date=2026-07-13/orders_topic-p3-o00000000000000000100.parquet", Table: "db.t",
		Fingerprint: 1<<63 + 5, First: 100, Last: 180, Rows: 50}
	for seq := int64(1); seq <= 12; seq++ {
		p := &state.Partition{Seq: seq, Owner: "a", Source: "orders/topic", Partition: 3, Committed: seq * 10,
			Pending: []state.Cut{cut}}
		if err := st.Append(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.Latest(ctx, "orders/topic", 3)
	if err != nil || got.Seq != 12 || got.Committed != 120 || len(got.Pending) != 1 || !reflect.DeepEqual(got.Pending[0], cut) ||
		got.Pending[0].Dir() != "db.t/date=2026-07-13" {
		t.Fatalf("latest = %+v, %v", got, err)
	}
	// The next number is taken: the writer is fenced.
	err = st.Append(ctx, &state.Partition{Seq: 12, Owner: "b", Source: "orders/topic", Partition: 3})
	if !errors.Is(err, state.ErrFenced) {
		t.Fatalf("appending a taken number: %v", err)
	}
	if err := st.Prune(ctx, "orders/topic", 3, 11); err != nil {
		t.Fatal(err)
	}
	n := 0
	it := b.List(nil)
	for {
		if _, err := it.Next(ctx); err != nil {
			break
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d states after pruning below 11, want 2", n)
	}
	if got, _ := st.Latest(ctx, "orders/topic", 3); got.Seq != 12 || got.Owner != "a" {
		t.Errorf("latest after pruning = %+v", got)
	}
}

// TestOneWinnerPerNumber: instances racing for the same number: exactly
// one creates it.
func TestOneWinnerPerNumber(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	st := state.NewStore(b, lake.New(b, memory.NewGoAllocator()))
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range 8 {
		wg.Go(func() {
			err := st.Append(ctx, &state.Partition{Seq: 1, Owner: string(rune('a' + i)), Source: "s"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, state.ErrFenced):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d writers created state 1", wins)
	}
}

func TestJournal(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	store := state.NewStore(b, lake.New(b, memory.NewGoAllocator()))
	a := state.NewJournal(store, "a")
	st, err := a.Claim(ctx, "t", 0, "")
	if err != nil || st.Seq != 0 || st.Committed != 0 {
		t.Fatalf("first claim: %+v, %v", st, err)
	}
	c1 := state.Cut{Key: "x/t-p0-o00000000000000000010.parquet", Table: "x", First: 10, Last: 40, Rows: 5}
	c2 := state.Cut{Key: "y/t-p0-o00000000000000000020.parquet", Table: "y", First: 20, Last: 30, Rows: 3}
	if err := a.Intend(ctx, "t", 0, c1); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Latest(ctx, "t", 0); len(got.Pending) != 1 || !reflect.DeepEqual(got.Pending[0], c1) {
		t.Fatalf("after Intend: %+v", got)
	}
	// c1 written; x's file ends at 40 but y still holds 20: durable 20.
	if err := a.Done(ctx, "t", 0, c1, 20); err != nil {
		t.Fatal(err)
	}
	if err := a.Intend(ctx, "t", 0, c2); err != nil {
		t.Fatal(err)
	}
	got, _ := store.Latest(ctx, "t", 0)
	if got.Committed != 20 || len(got.Written) != 1 || !reflect.DeepEqual(got.Written[0], c1) || len(got.Pending) != 1 || !reflect.DeepEqual(got.Pending[0], c2) {
		t.Fatalf("after Done and Intend: %+v", got)
	}
	// b takes the partition over: a is fenced out.
	bj := state.NewJournal(store, "b")
	st, err = bj.Claim(ctx, "t", 0, "")
	if err != nil || st.Committed != 20 || len(st.Written) != 1 || len(st.Pending) != 1 || st.Owner != "b" {
		t.Fatalf("b's claim: %+v, %v", st, err)
	}
	if err := a.Done(ctx, "t", 0, c2, 41); !errors.Is(err, state.ErrFenced) {
		t.Fatalf("a after b's claim: %v, want ErrFenced", err)
	}
	if a.Owns("t", 0) {
		t.Error("a still owns the partition after being fenced")
	}
	// b writes c2; nothing below 41 is left: cuts below it are dropped.
	if err := bj.Done(ctx, "t", 0, c2, 41); err != nil {
		t.Fatal(err)
	}
	got, _ = store.Latest(ctx, "t", 0)
	if got.Committed != 41 || len(got.Written) != 0 || len(got.Pending) != 0 || got.Owner != "b" {
		t.Errorf("final state %+v", got)
	}
}

// TestAdvance: a partition whose files were held (until their lakehouse
// commit) when their states were created records, once they are committed,
// the offset its messages landed up to; the written cuts below it go, and
// an advance that moves nothing writes no state.
func TestAdvance(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	store := state.NewStore(b, lake.New(b, memory.NewGoAllocator()))
	j := state.NewJournal(store, "a")
	if _, err := j.Claim(ctx, "t", 0, ""); err != nil {
		t.Fatal(err)
	}
	c1 := state.Cut{Key: "x/t-p0-o00000000000000000010.parquet", Table: "x", First: 10, Last: 40, Rows: 5}
	c2 := state.Cut{Key: "x/t-p0-o00000000000000000041.parquet", Table: "x", First: 41, Last: 60, Rows: 5}
	for _, c := range []state.Cut{c1, c2} {
		if err := j.Intend(ctx, "t", 0, c); err != nil {
			t.Fatal(err)
		}
		if err := j.Done(ctx, "t", 0, c, 10); err != nil { // held from 10 on
			t.Fatal(err)
		}
	}
	before, _ := store.Latest(ctx, "t", 0)
	if before.Committed != 10 || len(before.Written) != 2 {
		t.Fatalf("before the advance: %+v", before)
	}
	// c1 was committed, c2 not yet: durable 41.
	if err := j.Advance(ctx, "t", 0, 41); err != nil {
		t.Fatal(err)
	}
	got, _ := store.Latest(ctx, "t", 0)
	if got.Seq != before.Seq+1 || got.Committed != 41 || len(got.Written) != 1 || !reflect.DeepEqual(got.Written[0], c2) {
		t.Fatalf("after the advance to 41: %+v", got)
	}
	for _, at := range []int64{41, 30} {
		if err := j.Advance(ctx, "t", 0, at); err != nil {
			t.Fatal(err)
		}
	}
	if again, _ := store.Latest(ctx, "t", 0); again.Seq != got.Seq {
		t.Errorf("an advance that moves nothing wrote state %d", again.Seq)
	}
	if err := j.Advance(ctx, "t", 1, 100); err != nil {
		t.Errorf("an advance of a partition not held: %v", err)
	}
}

// TestFencedAfterPruning: an instance that lost its partition stays fenced
// however far the new owner went on and pruned: the new owner's claim, the
// number the old owner writes next, is never pruned.
func TestFencedAfterPruning(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	st := state.NewStore(b, lake.New(b, memory.NewGoAllocator()))
	old, cur := state.NewJournal(st, "old"), state.NewJournal(st, "new")
	cut := func(n int64) state.Cut { return state.Cut{Key: "t/f" + string(rune('a'+n%26)), First: n, Last: n} }
	if _, err := old.Claim(ctx, "s", 0, ""); err != nil {
		t.Fatal(err)
	}
	for n := range int64(5) {
		if err := old.Intend(ctx, "s", 0, cut(n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cur.Claim(ctx, "s", 0, ""); err != nil {
		t.Fatal(err)
	}
	for n := int64(5); n < 300; n++ {
		if err := cur.Done(ctx, "s", 0, cut(n), n+1); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Intend(ctx, "s", 0, cut(300)); !errors.Is(err, state.ErrFenced) {
		t.Fatalf("the old owner's next state: %v, want fenced", err)
	}
	if old.Owns("s", 0) {
		t.Error("a fenced journal still owns the partition")
	}
	n := 0
	for it := b.List(nil); ; n++ {
		if _, err := it.Next(ctx); err != nil {
			break
		}
	}
	if n > 70 {
		t.Errorf("%d objects after 300 states: old states are not pruned", n)
	}
}

// TestUnreadableStateIsPassedOver: a state object that does not hold its
// state (an empty file left by a node that lost power, a hand edit) is
// reported with its key and never taken; the claim that follows takes the
// state before it and the number after it. A partition none of whose
// states reads cannot be claimed.
func TestUnreadableStateIsPassedOver(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	st := state.NewStore(b, lake.New(b, memory.NewGoAllocator()))
	reported := map[string]string{}
	st.Unreadable = func(key string, err error) { reported[key] = err.Error() }
	for seq := int64(1); seq <= 2; seq++ {
		if err := st.Append(ctx, &state.Partition{Seq: seq, Owner: "a", Source: "s", Partition: 0, Committed: seq * 10}); err != nil {
			t.Fatal(err)
		}
	}
	for key, data := range map[string]string{
		state.Key("s", 0, 3): "",
		state.Key("s", 0, 4): `{"seq":9,"source":"s","partition":0,"committed":999}`,
	} {
		if err := b.WriteAll(ctx, key, []byte(data), nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.Latest(ctx, "s", 0)
	if err != nil || got.Seq != 2 || got.Committed != 20 {
		t.Fatalf("latest = %+v, %v; want state 2", got, err)
	}
	if len(reported) != 2 || !strings.Contains(reported[state.Key("s", 0, 4)], "holds state 9") ||
		!strings.Contains(reported[state.Key("s", 0, 3)], "unexpected end of JSON") {
		t.Errorf("reported %v", reported)
	}
	claimed, err := state.NewJournal(st, "b").Claim(ctx, "s", 0, "")
	if err != nil || claimed.Seq != 5 || claimed.Committed != 20 {
		t.Fatalf("claim = %+v, %v; want state 5 at committed 20", claimed, err)
	}
	for seq := int64(1); seq <= 5; seq++ {
		_ = b.WriteAll(ctx, state.Key("s", 0, seq), []byte("{"), nil)
	}
	if _, err := state.NewJournal(st, "c").Claim(ctx, "s", 0, ""); err == nil || !strings.Contains(err.Error(), "none of its") {
		t.Errorf("a claim when no state reads: %v", err)
	}
}

// TestFencedAfterManyHandovers: an owner that slept through more handovers
// than KeepClaims finds its next state's number free again (the claim that
// took it was pruned); its next file's Intend is fenced all the same. It
// runs on mem:// and, when CDCLAKE_TEST_S3_URL is set, on the S3 server.
func TestFencedAfterManyHandovers(t *testing.T) {
	for name, b := range buckets(t) {
		t.Run(name, func(t *testing.T) { fencedAfterManyHandovers(t, b) })
	}
}

// buckets returns an empty mem:// bucket and, when CDCLAKE_TEST_S3_URL is
// set, a prefix of its own in that S3 bucket, removed after the test.
func buckets(t *testing.T) map[string]*blob.Bucket {
	out := map[string]*blob.Bucket{"mem": memblob.OpenBucket(nil)}
	if url := os.Getenv("CDCLAKE_TEST_S3_URL"); url != "" {
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		b, err := lake.OpenBucket(context.Background(), fmt.Sprintf("%s%sprefix=statetest/%s-%d/", url, sep, t.Name(), time.Now().UnixNano()))
		if err != nil {
			t.Fatal(err)
		}
		out["s3"] = b
		t.Cleanup(func() {
			ctx := context.Background()
			for it := b.List(nil); ; {
				obj, err := it.Next(ctx)
				if err != nil {
					break
				}
				_ = b.Delete(ctx, obj.Key)
			}
		})
	}
	for _, b := range out {
		t.Cleanup(func() { b.Close() })
	}
	return out
}

func fencedAfterManyHandovers(t *testing.T, b *blob.Bucket) {
	ctx := context.Background()
	st := state.NewStore(b, lake.New(b, memory.NewGoAllocator()))
	cut := func(n int64) state.Cut { return state.Cut{Key: fmt.Sprintf("t/f%d", n), First: n, Last: n} }
	zombie := state.NewJournal(st, "zombie")
	if _, err := zombie.Claim(ctx, "s", 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := zombie.Intend(ctx, "s", 0, cut(0)); err != nil {
		t.Fatal(err)
	}
	for n := range int64(state.KeepClaims + 6) {
		j := state.NewJournal(st, fmt.Sprintf("pod-%d", n))
		if _, err := j.Claim(ctx, "s", 0, ""); err != nil {
			t.Fatal(err)
		}
		if err := j.Done(ctx, "s", 0, cut(n+1), n+2); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Attributes(ctx, state.Key("s", 0, 3)); err == nil {
		t.Fatal("the zombie's next number is still taken: the test does not reach the case")
	}
	if err := zombie.Intend(ctx, "s", 0, cut(100)); !errors.Is(err, state.ErrFenced) {
		t.Fatalf("the zombie's next file: %v, want fenced", err)
	}
	if zombie.Owns("s", 0) {
		t.Error("the zombie still owns the partition")
	}
	latest, _ := st.Latest(ctx, "s", 0)
	if latest.Owner == "zombie" {
		t.Errorf("the zombie's state is the latest: %+v", latest)
	}
}

// TestRecreatedIsRefused: a claim records the partition's log (its topic's
// ID); a claim of a partition whose log is another one now (a topic
// deleted and created again) is refused and writes nothing, and a claim
// that does not know the log keeps the recorded one.
func TestRecreatedIsRefused(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	st := state.NewStore(b, lake.New(b, memory.NewGoAllocator()))
	if _, err := state.NewJournal(st, "a").Claim(ctx, "t", 0, "id-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := state.NewJournal(st, "b").Claim(ctx, "t", 0, ""); err != nil {
		t.Fatal(err)
	}
	before, _ := st.Latest(ctx, "t", 0)
	if before.Incarnation != "id-1" || before.Owner != "b" {
		t.Fatalf("after a claim that did not know the log: %+v", before)
	}
	_, err := state.NewJournal(st, "c").Claim(ctx, "t", 0, "id-2")
	if !errors.Is(err, state.ErrRecreated) || !strings.Contains(err.Error(), "ID id-1") || !strings.Contains(err.Error(), "id-2 now") {
		t.Fatalf("a claim of a recreated log: %v", err)
	}
	if after, _ := st.Latest(ctx, "t", 0); after.Seq != before.Seq {
		t.Errorf("the refused claim wrote state %d", after.Seq)
	}
	if claim, _ := st.NewestClaim(ctx, "t", 0, false); claim != before.Seq {
		t.Errorf("the refused claim marked claim %d", claim)
	}
}

// TestCatalogByOffset: a partition resumed at committed observes, of each
// table, the newest metadata record below committed, not a newer one whose
// rows it has yet to meet again; entries are created once, so an instance
// that lost the partition cannot replace one; an entry of the earlier
// layout stands until a versioned one below committed replaces it, and
// pruning keeps what a replay from committed on needs.
func TestCatalogByOffset(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	sink := lake.New(b, memory.NewGoAllocator())
	st := state.NewStore(b, sink)
	put := func(kind, table string, offset int64, record string) {
		t.Helper()
		data, _ := json.Marshal(state.CatalogEntry{Kind: kind, Table: table, Offset: offset, Record: json.RawMessage(record)})
		if err := sink.CreateObject(ctx, state.CatalogKey("s", 0, kind, table, offset), data, "application/json"); err != nil {
			t.Fatal(err)
		}
	}
	// The earlier layout: the newest record of the table, unversioned.
	if err := b.WriteAll(ctx, "_cdclake/catalog/s/p0/object_metadata/HR.EMP.json",
		[]byte(`{"kind":"object_metadata","table":"HR.EMP","record":{"v":0}}`), nil); err != nil {
		t.Fatal(err)
	}
	put("object_metadata", "HR.EMP", 10, `{"v":1}`)
	put("object_metadata", "HR.EMP", 50, `{"v":2}`)
	put("schema", "HR.DEPT", 70, `{"v":3}`)
	records := func(committed int64) string {
		t.Helper()
		entries, err := st.Catalog(ctx, "s", 0, committed)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, fmt.Sprintf("%s@%d=%s", e.Table, e.Offset, e.Record))
		}
		return strings.Join(out, " ")
	}
	for committed, want := range map[int64]string{
		5:  `HR.EMP@-1={"v":0}`,
		11: `HR.EMP@10={"v":1}`,
		50: `HR.EMP@10={"v":1}`,
		51: `HR.EMP@50={"v":2}`,
		80: `HR.EMP@50={"v":2} HR.DEPT@70={"v":3}`,
	} {
		if got := records(committed); got != want {
			t.Errorf("resumed at %d: %s, want %s", committed, got, want)
		}
	}
	data, _ := json.Marshal(state.CatalogEntry{Kind: "object_metadata", Table: "HR.EMP", Offset: 10, Record: json.RawMessage(`{"v":"old"}`)})
	if err := sink.CreateObject(ctx, state.CatalogKey("s", 0, "object_metadata", "HR.EMP", 10), data, "application/json"); !errors.Is(err, sinks.ErrExists) {
		t.Errorf("replacing an entry: %v, want ErrExists", err)
	}
	if err := st.PruneCatalog(ctx, "s", 0, 40); err != nil {
		t.Fatal(err)
	}
	if got := records(40); got != `HR.EMP@10={"v":1}` {
		t.Errorf("after pruning below 40: %s", got)
	}
	if got := records(51); got != `HR.EMP@50={"v":2}` {
		t.Errorf("after pruning below 40, resumed at 51: %s", got)
	}
	if _, err := b.Attributes(ctx, "_cdclake/catalog/s/p0/object_metadata/HR.EMP.json"); err == nil {
		t.Error("the entry of the earlier layout was not pruned")
	}
}

// TestWithoutDeletePermission: on a store that refuses deletes, states
// are written, claimed and fenced as anywhere else; each failed prune is
// reported, and old states stay.
func TestWithoutDeletePermission(t *testing.T) {
	ctx := context.Background()
	base := memblob.OpenBucket(nil)
	defer base.Close()
	b, _ := sinktest.Faulty(base, sinktest.Faults{DenyDelete: true})
	st := state.NewStore(b, lake.New(b, memory.NewGoAllocator()))
	var failed atomic.Int32
	st.PruneFailed = func(source string, part int32, err error) {
		if !errors.Is(err, sinktest.ErrDenied) {
			t.Errorf("a prune failed with %v", err)
		}
		failed.Add(1)
	}
	a := state.NewJournal(st, "a")
	if _, err := a.Claim(ctx, "s", 0, ""); err != nil {
		t.Fatal(err)
	}
	cut := func(n int64) state.Cut { return state.Cut{Key: fmt.Sprintf("t/f%d", n), First: n, Last: n} }
	for n := range int64(150) {
		if err := a.Done(ctx, "s", 0, cut(n), n+1); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := state.NewJournal(st, "b").Claim(ctx, "s", 0, "")
	if err != nil || claimed.Committed != 150 {
		t.Fatalf("the claim: %+v, %v", claimed, err)
	}
	if err := a.Intend(ctx, "s", 0, cut(200)); !errors.Is(err, state.ErrFenced) {
		t.Errorf("the previous owner after the claim: %v, want fenced", err)
	}
	if failed.Load() < 3 {
		t.Errorf("%d failed prunes reported, want one per prune (at least 3)", failed.Load())
	}
	if latest, _ := st.Latest(ctx, "s", 0); latest.Owner != "b" || latest.Committed != 150 {
		t.Errorf("latest = %+v", latest)
	}
}

// countingCreator counts the bytes of the objects it creates.
type countingCreator struct {
	sinks.ObjectCreator
	bytes, objects atomic.Int64
}

func (c *countingCreator) CreateObject(ctx context.Context, key string, data []byte, contentType string) error {
	c.bytes.Add(int64(len(data)))
	c.objects.Add(1)
	return c.ObjectCreator.CreateObject(ctx, key, data, contentType)
}

// TestStatesAreDeltas: a partition whose durable offset stays behind (one
// table's file open long, many others' written) holds thousands of cuts;
// its states are stored as changes with a snapshot now and then, so the
// bytes written per file stay near a cut's, and a claim anywhere in a
// chain of changes reads the whole state back.
func TestStatesAreDeltas(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	counter := &countingCreator{ObjectCreator: lake.New(b, memory.NewGoAllocator())}
	st := state.NewStore(b, counter)
	a := state.NewJournal(st, "a")
	if _, err := a.Claim(ctx, "s", 0, "id"); err != nil {
		t.Fatal(err)
	}
	const files = 3000
	var full []state.Cut
	for n := int64(1); n <= files; n++ {
		c := state.Cut{Key: fmt.Sprintf("db.t%04d/date=2026-12-06/s-p0-o%020d.parquet", n%500, n), Table: fmt.Sprintf("db.t%04d", n%500),
			Fingerprint: uint64(n) * 7919, First: n, Last: n + 3, Rows: 2}
		if err := a.Intend(ctx, "s", 0, c); err != nil {
			t.Fatal(err)
		}
		if err := a.Done(ctx, "s", 0, c, 1); err != nil { // the durable offset stays at 1
			t.Fatal(err)
		}
		full = append(full, c)
		if n == 1234 {
			// A claim in the middle of a chain of changes.
			got, err := st.Latest(ctx, "s", 0)
			if err != nil || len(got.Written) != 1234 || !reflect.DeepEqual(got.Written[1233], c) || len(got.Pending) != 0 || got.Committed != 1 {
				t.Fatalf("the state after 1234 files: %d written, %d pending, committed %d, %v", len(got.Written), len(got.Pending), got.Committed, err)
			}
		}
	}
	perState := counter.bytes.Load() / counter.objects.Load()
	whole, _ := json.Marshal(state.Partition{Written: full})
	t.Logf("%d states, %d bytes each on average; the whole state is %d bytes", counter.objects.Load(), perState, len(whole))
	if perState > 2000 {
		t.Errorf("%d bytes per state on average: the states are not stored as changes", perState)
	}
	claimed, err := state.NewJournal(st, "b").Claim(ctx, "s", 0, "id")
	if err != nil || !reflect.DeepEqual(claimed.Written, full) || claimed.Committed != 1 || claimed.Incarnation != "id" {
		t.Fatalf("the claim: %d written, committed %d, %q, %v", len(claimed.Written), claimed.Committed, claimed.Incarnation, err)
	}
	n := 0
	for it := b.List(nil); ; n++ {
		if _, err := it.Next(ctx); err != nil {
			break
		}
	}
	if n > state.MaxChain+state.KeepClaims+4 {
		t.Errorf("%d objects after %d states: the states before a snapshot are not pruned", n, 2*files)
	}
}

// TestCheck: an owner's Check is nil until another instance claims the
// partition, then fenced; a journal that does not own it is fenced.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	st := state.NewStore(b, lake.New(b, memory.NewGoAllocator()))
	a, other := state.NewJournal(st, "a"), state.NewJournal(st, "b")
	if err := a.Check(ctx, "s", 0); !errors.Is(err, state.ErrFenced) {
		t.Errorf("a journal that never claimed: %v, want fenced", err)
	}
	if _, err := a.Claim(ctx, "s", 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.Check(ctx, "s", 0); err != nil {
		t.Errorf("the owner: %v", err)
	}
	if _, err := other.Claim(ctx, "s", 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.Check(ctx, "s", 0); !errors.Is(err, state.ErrFenced) {
		t.Errorf("after another claim: %v, want fenced", err)
	}
	if a.Owns("s", 0) {
		t.Error("a fenced journal still owns the partition")
	}
}

// TestIntendWaitsOutAnOutage: the listing of the claims that follows each
// Intend is retried through a store's outage, as the writes are, instead
// of failing the landing.
func TestIntendWaitsOutAnOutage(t *testing.T) {
	ctx := context.Background()
	base := memblob.OpenBucket(nil)
	defer base.Close()
	b, ctl := sinktest.Faulty(base, sinktest.Faults{})
	sink := lake.New(b, memory.NewGoAllocator()).Retrying(lake.Retry{For: time.Minute})
	st := state.NewStore(b, sink)
	st.Retry = sink.Retried
	j := state.NewJournal(st, "a")
	if _, err := j.Claim(ctx, "s", 0, ""); err != nil {
		t.Fatal(err)
	}
	ctl.SetFaults(sinktest.Faults{OnList: true})
	time.AfterFunc(500*time.Millisecond, func() { ctl.SetFaults(sinktest.Faults{}) })
	if err := j.Intend(ctx, "s", 0, state.Cut{Key: "t/f", First: 1, Last: 2, Rows: 1}); err != nil {
		t.Fatalf("Intend across an outage of the listings: %v", err)
	}
	if sink.Stats().Errors[lake.OpRead] == 0 {
		t.Error("no failed listing was counted: the test proves nothing")
	}
}

// TestCutOffsets: the offsets a cut records are taken only when they are
// whole: within the cut, as many as its rows.
func TestCutOffsets(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  state.Cut
		want []int64 // nil: not taken
	}{
		{"runs", state.Cut{First: 5, Last: 9, Rows: 4, Runs: [][2]int64{{5, 6}, {8, 9}}}, []int64{5, 6, 8, 9}},
		{"bits", state.Cut{First: 5, Last: 13, Rows: 3, Bits: "BQE"}, []int64{5, 7, 13}},
		{"neither", state.Cut{First: 5, Last: 9, Rows: 4}, nil},
		{"runs short of the rows", state.Cut{First: 5, Last: 9, Rows: 5, Runs: [][2]int64{{5, 6}, {8, 9}}}, nil},
		{"runs beyond the rows", state.Cut{First: 5, Last: 9, Rows: 3, Runs: [][2]int64{{5, 6}, {8, 9}}}, nil},
		{"a run outside the cut", state.Cut{First: 5, Last: 9, Rows: 2, Runs: [][2]int64{{9, 10}}}, nil},
		{"a run reversed", state.Cut{First: 5, Last: 9, Rows: 2, Runs: [][2]int64{{7, 6}}}, nil},
		{"bits beyond the cut", state.Cut{First: 5, Last: 12, Rows: 3, Bits: "BQE"}, nil},
		{"bits not base64", state.Cut{First: 5, Last: 13, Rows: 3, Bits: "B!"}, nil},
		{"bits short of the rows", state.Cut{First: 5, Last: 13, Rows: 4, Bits: "BQE"}, nil},
	} {
		got, ok := tc.cut.Offsets()
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.name, got, ok, tc.want)
		}
	}
}
