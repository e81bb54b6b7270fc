// Package sourcetest is the conformance suite of package source: Run
// checks that a Source keeps the contract the pipeline relies on.
//
//   - order: every record of a partition is delivered once, in order, in
//     blocks of that partition alone, with increasing offsets;
//   - one block per partition in flight: a partition's next block comes
//     only after the previous one was acked;
//   - bytes: a record's bytes stay as delivered until its block is acked,
//     while the source goes on with other blocks;
//   - nack: a nacked block surfaces as the source's error (Err);
//   - drained: a bounded source closes Drained once every block was acked,
//     and not before; an unbounded one never does;
//   - close: Close returns while blocks are in flight, and the
//     subscription's channel closes.
//
// A source that hands partitions over (source.Handover) is bound to hooks
// that report as durable what the suite acked, and that find no state in
// a lake.
package sourcetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cdclake/cdclake/pipelines/source"
)

// Harness makes the sources under test.
type Harness struct {
	// New returns a source that delivers parts[i], in order, as the
	// records of its i-th partition (a file, a Kafka partition), in
	// blocks of at most BlockRecords records. The values are one-line
	// JSON objects.
	New func(t *testing.T, parts [][]string) source.Source
	// Bounded is set for a source that ends once it delivered everything
	// (files, memory, Kafka with until-caught-up).
	Bounded bool
}

// BlockRecords is the most records a harness puts in a block: the suite's
// partitions take several blocks each.
const BlockRecords = 7

// record is what the suite puts in each value.
type record struct {
	P int    `json:"p"` // partition index
	N int    `json:"n"` // position in the partition
	S string `json:"s"`
}

// partitions returns the values of parts partitions of n records each.
func partitions(parts, n int) [][]string {
	out := make([][]string, parts)
	for p := range out {
		for i := range n {
			v, _ := json.Marshal(record{P: p, N: i, S: strings.Repeat(string(rune('a'+(p+i)%26)), 1+i%13)})
			out[p] = append(out[p], string(v))
		}
	}
	return out
}

// Run runs the suite against h.
func Run(t *testing.T, h Harness) {
	t.Run("order", func(t *testing.T) { testOrder(t, h) })
	t.Run("one block per partition in flight", func(t *testing.T) { testOneInFlight(t, h) })
	t.Run("bytes", func(t *testing.T) { testBytes(t, h) })
	t.Run("nack", func(t *testing.T) { testNack(t, h) })
	t.Run("drained", func(t *testing.T) { testDrained(t, h) })
	t.Run("close in flight", func(t *testing.T) { testClose(t, h) })
}

// run is a subscription to a source under test.
type run struct {
	t   *testing.T
	src source.Source
	out <-chan *message.Message
	// durable is what the suite acked, by partition, for a Handover
	// source's hooks.
	mu      sync.Mutex
	durable map[key]int64
}

type key struct {
	source string
	part   int32
}

func start(t *testing.T, h Harness, parts [][]string) *run {
	t.Helper()
	src := h.New(t, parts)
	r := &run{t: t, src: src, durable: map[key]int64{}}
	if ho, ok := src.(source.Handover); ok {
		ho.Bind(source.Hooks{
			Durable: func(s string, p int32) (int64, bool) {
				r.mu.Lock()
				defer r.mu.Unlock()
				off, ok := r.durable[key{s, p}]
				return off, ok
			},
			Flush: func(context.Context, string, int32) error { return nil },
			Drop:  func(string, int32) {},
			Claim: func(context.Context, string, int32, string) (int64, bool, error) { return 0, false, nil },
			Start: func(context.Context, string, int32, int64) error { return nil },
			Gap: func(_ context.Context, s string, p int32, from, to int64) error {
				return fmt.Errorf("%s partition %d: unexpected gap %d-%d", s, p, from, to)
			},
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out, err := src.Subscribe(ctx, "")
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	r.out = out
	t.Cleanup(func() {
		if err := src.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// next returns the next block, failing the test after a while.
func (r *run) next(within time.Duration) (*message.Message, *source.Block) {
	r.t.Helper()
	select {
	case msg, ok := <-r.out:
		if !ok {
			r.t.Fatal("the subscription closed early")
		}
		b, err := source.BlockOf(msg)
		if err != nil {
			r.t.Fatal(err)
		}
		return msg, b
	case <-time.After(within):
		r.t.Fatalf("no block within %s", within)
	}
	return nil, nil
}

// ack acks msg, the message of b, and records b as durable.
func (r *run) ack(msg *message.Message, b *source.Block) {
	r.mu.Lock()
	if n := len(b.Records); n > 0 {
		r.durable[key{b.Source, b.Partition}] = b.Records[n-1].Offset + 1
	}
	r.mu.Unlock()
	msg.Ack()
}

// decode returns the suite's records of b, failing on another value.
func (r *run) decode(b *source.Block) []record {
	r.t.Helper()
	out := make([]record, len(b.Records))
	for i, rec := range b.Records {
		if err := json.Unmarshal(rec.Value, &out[i]); err != nil {
			r.t.Fatalf("%s partition %d offset %d: value %q: %v", b.Source, b.Partition, rec.Offset, rec.Value, err)
		}
	}
	return out
}

const wait = 30 * time.Second

func testOrder(t *testing.T, h Harness) {
	parts := partitions(3, 40)
	r := start(t, h, parts)
	next := make([]int, len(parts))
	lastOffset := map[key]int64{}
	which := map[key]int{}
	for total := 0; total < 3*40; {
		msg, b := r.next(wait)
		if len(b.Records) == 0 || len(b.Records) > BlockRecords {
			t.Fatalf("a block of %d records, want 1 to %d", len(b.Records), BlockRecords)
		}
		k := key{b.Source, b.Partition}
		for i, rec := range r.decode(b) {
			if p, seen := which[k]; seen && p != rec.P {
				t.Fatalf("%s partition %d holds records of partitions %d and %d", k.source, k.part, p, rec.P)
			}
			which[k] = rec.P
			if rec.N != next[rec.P] {
				t.Fatalf("partition %d: record %d delivered where %d was next", rec.P, rec.N, next[rec.P])
			}
			next[rec.P]++
			off := b.Records[i].Offset
			if last, ok := lastOffset[k]; ok && off <= last {
				t.Fatalf("%s partition %d: offset %d after %d", k.source, k.part, off, last)
			}
			lastOffset[k] = off
			if b.Records[i].Value == nil {
				t.Fatal("a record without its value")
			}
			if string(b.Records[i].Value) != parts[rec.P][rec.N] {
				t.Fatalf("partition %d record %d: %q, want %q", rec.P, rec.N, b.Records[i].Value, parts[rec.P][rec.N])
			}
		}
		total += len(b.Records)
		r.ack(msg, b)
	}
	if len(which) != len(parts) {
		t.Errorf("%d partitions delivered, want %d", len(which), len(parts))
	}
	select {
	case msg, ok := <-r.out:
		if ok {
			b, _ := source.BlockOf(msg)
			t.Errorf("a block after every record was delivered: %+v", b)
		}
	case <-time.After(200 * time.Millisecond):
	}
}

func testOneInFlight(t *testing.T, h Harness) {
	parts := partitions(3, 30)
	r := start(t, h, parts)
	var mu sync.Mutex
	inFlight := map[key]bool{}
	var wg sync.WaitGroup
	defer wg.Wait()
	for total := 0; total < 3*30; {
		msg, b := r.next(wait)
		k := key{b.Source, b.Partition}
		mu.Lock()
		if inFlight[k] {
			mu.Unlock()
			t.Fatalf("%s partition %d: a block before the previous one was acked", k.source, k.part)
		}
		inFlight[k] = true
		mu.Unlock()
		total += len(b.Records)
		// Acked a little later, so that the source could send the
		// partition's next block meanwhile if it would.
		wg.Go(func() {
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			inFlight[k] = false
			mu.Unlock()
			r.ack(msg, b)
		})
	}
}

func testBytes(t *testing.T, h Harness) {
	parts := partitions(2, 40)
	r := start(t, h, parts)
	var wg sync.WaitGroup
	defer wg.Wait()
	for total := 0; total < 2*40; {
		msg, b := r.next(wait)
		values := make([]string, len(b.Records))
		for i, rec := range b.Records {
			values[i] = string(rec.Value)
		}
		total += len(b.Records)
		// Acked a little later: the source reads on meanwhile (another
		// partition's blocks, or the next lines into its buffers), and
		// the block's bytes must stay as they were.
		wg.Go(func() {
			time.Sleep(15 * time.Millisecond)
			for i, rec := range b.Records {
				if string(rec.Value) != values[i] {
					t.Errorf("%s partition %d offset %d changed before its block was acked: %q, was %q",
						b.Source, b.Partition, rec.Offset, rec.Value, values[i])
					break
				}
			}
			r.ack(msg, b)
		})
	}
}

func testNack(t *testing.T, h Harness) {
	r := start(t, h, partitions(1, 20))
	msg, _ := r.next(wait)
	msg.Nack()
	deadline := time.Now().Add(wait)
	for r.src.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("a nacked block did not surface as the source's error")
		}
		// The source may still deliver what it had under way.
		select {
		case m, ok := <-r.out:
			if ok {
				m.Nack()
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func testDrained(t *testing.T, h Harness) {
	const n = 2 * 20
	r := start(t, h, partitions(2, 20))
	var last *message.Message
	var lastBlock *source.Block
	for total := 0; total < n; {
		msg, b := r.next(wait)
		total += len(b.Records)
		if total < n {
			r.ack(msg, b)
			continue
		}
		last, lastBlock = msg, b
	}
	select {
	case <-r.src.Drained():
		t.Fatal("Drained closed before the last block was acked")
	case <-time.After(100 * time.Millisecond):
	}
	r.ack(last, lastBlock)
	within := wait
	if !h.Bounded {
		within = time.Second
	}
	select {
	case <-r.src.Drained():
		if !h.Bounded {
			t.Error("an unbounded source closed Drained")
		}
	case <-time.After(within):
		if h.Bounded {
			t.Error("a bounded source did not close Drained after every block was acked")
		}
	}
	if err := r.src.Err(); err != nil {
		t.Errorf("Err after a clean run: %v", err)
	}
}

func testClose(t *testing.T, h Harness) {
	r := start(t, h, partitions(2, 30))
	msg, _ := r.next(wait)
	done := make(chan error, 1)
	go func() { done <- r.src.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("Close did not return while a block was in flight")
	}
	deadline := time.After(wait)
	for open := true; open; {
		select {
		case m, ok := <-r.out:
			if ok {
				m.Nack()
			}
			open = ok
		case <-deadline:
			t.Fatal("the subscription did not close after Close")
		}
	}
	msg.Ack() // late: must not block or panic
}
