package source_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cdclake/cdclake/pipelines/source"
)

// drain subscribes to src and acks every block after handing it to f,
// until src is drained.
func drain(t *testing.T, src source.Source, f func(*source.Block)) {
	t.Helper()
	ch, err := src.Subscribe(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case msg := <-ch:
			b, err := source.BlockOf(msg)
			if err != nil {
				t.Fatal(err)
			}
			f(b)
			msg.Ack()
		case <-src.Drained():
			return
		}
	}
}

func TestFileSourceOrderAndPositions(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.ndjson", "b1\r\nb2\n")
	write("a.ndjson", "a1\n\na3") // empty line: a tombstone at line 2; no final newline
	write(".hidden.ndjson", "x\n")
	// Binary messages, base64 per line: "\x00\x01\n", a tombstone, "c".
	write("c.b64", "AAEK\n\nYw==\n")
	write("notes.txt", "not a stream\n")
	src, err := source.OpenFiles("file://"+dir, 2, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// Expand blocks into (file, line, text); how reads cut blocks may vary,
	// positions and contents may not.
	var got []string
	drain(t, src, func(b *source.Block) {
		if len(b.Records) > 2 {
			t.Errorf("block of %d lines, block_lines is 2", len(b.Records))
		}
		for _, r := range b.Records {
			got = append(got, fmt.Sprintf("%s:%d:%s", b.Source, r.Offset, r.Value))
		}
	})
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"a.ndjson:1:a1", "a.ndjson:2:", "a.ndjson:3:a3", "b.ndjson:1:b1", "b.ndjson:2:b2",
		"c.b64:1:\x00\x01\n", "c.b64:2:", "c.b64:3:c"}
	if !slices.Equal(got, want) {
		t.Errorf("records = %q, want %q", got, want)
	}
	if src.Backlog() != 0 {
		t.Errorf("backlog %d after reading everything", src.Backlog())
	}
	if _, err := source.OpenFiles("file://"+filepath.Join(dir, "*.none"), 2, 1<<20); err == nil {
		t.Error("a glob matching nothing must fail")
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.b64"), []byte("AAEK\n%%%\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := source.OpenFiles(filepath.Join(dir, "bad.b64"), 2, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, bad, func(*source.Block) {})
	if err := bad.Err(); err == nil || !strings.Contains(err.Error(), "bad.b64 line 2: not base64") {
		t.Errorf("a line that is not base64: %v", err)
	}
	if _, err := source.OpenFiles("kafka://x", 2, 1<<20); err == nil {
		t.Error("unsupported scheme must fail")
	}
	var _ message.Subscriber = src
}

// TestLongLines reads lines longer than the read buffer and than a block's
// byte bound: a block is cut before a line that would overflow it, a long
// line travels alone, and only a line over the line limit is an error.
func TestLongLines(t *testing.T) {
	const mib = 1 << 20
	line := func(i int) string { return fmt.Sprintf(`{"i":%d,"s":"%s"}`, i, strings.Repeat("x", 3*mib/2)) }
	var in strings.Builder
	for i := range 7 {
		in.WriteString(line(i) + "\n")
	}
	in.WriteString(`{"short":true}` + "\n")
	src := source.NewReader("big", strings.NewReader(in.String()), 100, 4*mib)
	source.SetMaxLine(src, 2*mib)
	var got []int
	n := 0
	drain(t, src, func(b *source.Block) {
		if len(b.Records) > 1 && b.Bytes() > 4*mib {
			t.Errorf("a block of %d records holds %d bytes, over its bound", len(b.Records), b.Bytes())
		}
		got = append(got, len(b.Records))
		for _, r := range b.Records {
			n++
			if r.Offset != int64(n) {
				t.Errorf("record %d at offset %d", n, r.Offset)
			}
			if n <= 7 && string(r.Value) != line(n-1) {
				t.Errorf("line %d changed (%d bytes)", n, len(r.Value))
			}
		}
	})
	if err := src.Err(); err != nil || n != 8 {
		t.Fatalf("read %d lines in blocks %v: %v", n, got, err)
	}
	src.Close()

	// A line over the limit stops the source with a clear error.
	src = source.NewReader("big", strings.NewReader(line(0)+"\n"+strings.Repeat("y", 3*mib)+"\n"), 100, 4*mib)
	source.SetMaxLine(src, 2*mib)
	drain(t, src, func(*source.Block) {})
	if err := src.Err(); err == nil || !strings.Contains(err.Error(), "big line 2: longer than 2097152 bytes") {
		t.Errorf("over-long line: %v", err)
	}
	src.Close()
}

// TestMemorySource: partitions are delivered concurrently, each in order,
// never two blocks of one partition in flight.
func TestMemorySource(t *testing.T) {
	var blocks []*source.Block
	for p := range 3 {
		for i := range 20 {
			blocks = append(blocks, &source.Block{Source: "topic", Partition: int32(p),
				Records: []source.Record{{Offset: int64(i * 10)}, {Offset: int64(i*10 + 5)}}})
		}
	}
	src := source.NewMemory(blocks...)
	if src.Backlog() != 120 {
		t.Errorf("backlog %d, want 120 records", src.Backlog())
	}
	ch, err := src.Subscribe(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	// Hold the first block of every partition unacked: the three must all
	// arrive, and nothing else before they are acked.
	var held []*message.Message
	for range 3 {
		held = append(held, <-ch)
	}
	select {
	case msg := <-ch:
		b, _ := source.BlockOf(msg)
		t.Fatalf("a second block of partition %d arrived before the first was acked", b.Partition)
	default:
	}
	next := map[int32]int64{}
	for _, m := range held {
		b, _ := source.BlockOf(m)
		next[b.Partition] = b.Records[1].Offset + 5
		m.Ack()
	}
	for done := false; !done; {
		select {
		case msg := <-ch:
			b, _ := source.BlockOf(msg)
			if b.Records[0].Offset != next[b.Partition] {
				t.Errorf("partition %d: block at %d, want %d", b.Partition, b.Records[0].Offset, next[b.Partition])
			}
			next[b.Partition] = b.Records[1].Offset + 5
			msg.Ack()
		case <-src.Drained():
			done = true
		}
	}
	if src.Backlog() != 0 || src.Err() != nil {
		t.Errorf("backlog %d, err %v", src.Backlog(), src.Err())
	}
	src.Close()

	// A nacked block stops its partition with an error.
	src = source.NewMemory(&source.Block{Source: "t", Records: []source.Record{{Offset: 1}}},
		&source.Block{Source: "t", Records: []source.Record{{Offset: 2}}})
	ch, _ = src.Subscribe(context.Background(), "")
	(<-ch).Nack()
	<-src.Drained()
	if err := src.Err(); err == nil || !strings.Contains(err.Error(), "t partition 0: block was not processed") {
		t.Errorf("after a nack: %v", err)
	}
	src.Close()
}

// TestByteOrderMark: a file's leading UTF-8 byte-order mark is not part of
// its first message; one elsewhere is data.
func TestByteOrderMark(t *testing.T) {
	var got []string
	drain(t, source.NewReader("in", strings.NewReader("\ufeff{\"a\":1}\n\ufeff{\"b\":2}\n"), 10, 1<<20), func(b *source.Block) {
		for _, r := range b.Records {
			got = append(got, string(r.Value))
		}
	})
	if len(got) != 2 || got[0] != `{"a":1}` || got[1] != "\ufeff{\"b\":2}" {
		t.Errorf("records %q", got)
	}
}

// TestFileSourceRecyclesAckedBlocks: an acked block's buffer is read into
// again (with PoisonRecycled, after being overwritten), and a block's
// records hold their lines until it is acked, however many blocks came
// before.
func TestFileSourceRecyclesAckedBlocks(t *testing.T) {
	source.PoisonRecycled(true)
	defer source.PoisonRecycled(false)
	in, want := numberedLines(5000)
	src := source.NewReader("in", strings.NewReader(in), 64, 1<<20)
	var got []string
	seen := map[*byte]bool{}
	var kept [][]byte // keeps every buffer alive: an address repeats only if reused
	reused := 0
	drain(t, src, func(b *source.Block) {
		kept = append(kept, b.Records[0].Value)
		p := unsafe.SliceData(b.Records[0].Value)
		if seen[p] {
			reused++
		}
		seen[p] = true
		for _, r := range b.Records {
			got = append(got, string(r.Value))
		}
	})
	if !slices.Equal(got, want) {
		t.Fatalf("got %d lines, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	if reused == 0 {
		t.Errorf("no block was read into an acked block's buffer (%d blocks)", len(kept))
	}
}

// numberedLines returns n lines of JSON of different lengths, as a file's
// text and one by one.
func numberedLines(n int) (string, []string) {
	var in strings.Builder
	var lines []string
	for i := range n {
		line := fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", i%97))
		lines = append(lines, line)
		in.WriteString(line + "\n")
	}
	return in.String(), lines
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestMappedFilePoisonsAckedBlocks: a file is read through a mapping whose
// acked blocks are overwritten with PoisonRecycled, so that a value kept
// past its block's ack shows; the records of a block not yet acked hold
// their lines.
func TestMappedFilePoisonsAckedBlocks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("files are mapped on Linux")
	}
	source.PoisonRecycled(true)
	defer source.PoisonRecycled(false)
	in, want := numberedLines(5000)
	path := filepath.Join(t.TempDir(), "in.ndjson")
	if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.OpenFiles(path, 64, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var last [][]byte // the values of the block acked last
	poisoned := 0
	drain(t, src, func(b *source.Block) {
		for _, v := range last {
			if strings.Trim(string(v), "\xff") != "" {
				t.Fatalf("an acked block's value still reads %q", v)
			}
			poisoned++
		}
		last = last[:0]
		for _, r := range b.Records {
			got = append(got, string(r.Value))
			last = append(last, r.Value)
		}
	})
	if err := src.Err(); err != nil {
		t.Fatal(err)
	}
	src.Close()
	if source.Mapped(src) != 1 {
		t.Fatalf("%d files mapped", source.Mapped(src))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d lines, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	if poisoned < len(want)-64 {
		t.Errorf("%d values seen poisoned after their block's ack", poisoned)
	}
	// The file itself is untouched: the mapping was private.
	if b, _ := os.ReadFile(path); string(b) != in {
		t.Error("poisoning reached the file")
	}
}
