package source_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cdclake/cdclake/pipelines/source"
)

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
	write("notes.txt", "not a stream\n")
	src, err := source.OpenFiles("file://"+dir, 2, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := src.Subscribe(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	// Expand blocks into (file, line, text); how reads cut blocks may vary,
	// positions and contents may not.
	var got []string
	for done := false; !done; {
		select {
		case msg := <-ch:
			b, err := source.BlockOf(msg)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Records) > 2 {
				t.Errorf("block of %d lines, block_lines is 2", len(b.Records))
			}
			for _, r := range b.Records {
				got = append(got, fmt.Sprintf("%s:%d:%s", b.Source, r.Offset, r.Value))
			}
			msg.Ack()
		case <-src.Drained():
			done = true
		}
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"a.ndjson:1:a1", "a.ndjson:2:", "a.ndjson:3:a3", "b.ndjson:1:b1", "b.ndjson:2:b2"}
	if !slices.Equal(got, want) {
		t.Errorf("records = %q, want %q", got, want)
	}
	if src.Backlog() != 0 {
		t.Errorf("backlog %d after reading everything", src.Backlog())
	}
	if _, err := source.OpenFiles("file://"+filepath.Join(dir, "*.none"), 2, 1<<20); err == nil {
		t.Error("a glob matching nothing must fail")
	}
	if _, err := source.OpenFiles("kafka://x", 2, 1<<20); err == nil {
		t.Error("unsupported scheme must fail")
	}
	var _ message.Subscriber = src
}
