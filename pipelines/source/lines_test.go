package source_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cdclake/cdclake/pipelines/source"
)

// chunked returns data in reads of 1 to max bytes, chosen by seed.
type chunked struct {
	data []byte
	rnd  *rand.Rand
	max  int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), 1+c.rnd.IntN(c.max))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// wantLines is what a file's lines are: after a leading byte-order mark,
// split at newlines, each without its carriage return; no line after a
// final newline.
func wantLines(data []byte) []string {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if len(data) == 0 {
		return nil
	}
	lines := strings.Split(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// readLines reads data through a file source in reads of at most chunk
// bytes and checks the blocks' bounds and positions; it returns the
// records and the source's error.
//
// A chunk of 0 reads data from a file instead, through its memory mapping
// (an empty file is read as a stream).
func readLines(t *testing.T, data []byte, chunk, blockLines, blockBytes, maxLine int, seed uint64) ([]string, error) {
	t.Helper()
	var src *source.Files
	if chunk == 0 {
		path := filepath.Join(t.TempDir(), "in.ndjson")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var err error
		if src, err = source.OpenFiles(path, blockLines, blockBytes); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if m := source.Mapped(src); (m == 1) != (len(data) > 0 && runtime.GOOS == "linux") {
				t.Errorf("%d files of %d bytes mapped", m, len(data))
			}
		}()
	} else {
		src = source.NewReader("in", &chunked{data: data, rnd: rand.New(rand.NewPCG(seed, 1)), max: chunk}, blockLines, blockBytes)
	}
	source.SetMaxLine(src, maxLine)
	var got []string
	drain(t, src, func(b *source.Block) {
		if len(b.Records) == 0 || len(b.Records) > blockLines {
			t.Errorf("a block of %d records (block_lines %d)", len(b.Records), blockLines)
		}
		if len(b.Records) > 1 && b.Bytes() > int64(blockBytes) {
			t.Errorf("a block of %d records holds %d bytes (block_bytes %d)", len(b.Records), b.Bytes(), blockBytes)
		}
		for _, r := range b.Records {
			if r.Offset != int64(len(got)+1) {
				t.Errorf("record %d at offset %d", len(got)+1, r.Offset)
			}
			got = append(got, string(r.Value))
		}
	})
	err := src.Err()
	src.Close()
	return got, err
}

// TestLinesInAnyReads checks that how the input comes in reads changes
// neither the records nor their positions: lines split across reads, a
// byte-order mark or a CRLF split between two, empty lines, a last line
// without newline, lines longer than the buffer.
func TestLinesInAnyReads(t *testing.T) {
	var in strings.Builder
	in.WriteString("\ufeff")
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 3000 {
		switch r.IntN(9) {
		case 0:
			in.WriteString("\n") // a tombstone
		case 1:
			in.WriteString(strings.Repeat("L", 100_000+r.IntN(200_000)) + "\r\n")
		default:
			in.WriteString(strings.Repeat("x", r.IntN(300)) + "é" + string(rune('a'+i%26)))
			if r.IntN(4) == 0 {
				in.WriteString("\r")
			}
			in.WriteString("\n")
		}
	}
	in.WriteString("last, without newline")
	data := []byte(in.String())
	want := wantLines(data)
	for _, c := range []struct{ chunk, lines, bytes int }{
		{1 << 20, 1024, 16 << 20}, {7, 10, 4096}, {100_000, 3, 1 << 20}, {65536, 1000, 64 << 10},
		{0, 1024, 16 << 20}, {0, 10, 4096}, {0, 3, 1 << 20},
	} {
		got, err := readLines(t, data, c.chunk, c.lines, c.bytes, 1<<20, uint64(c.chunk))
		if err != nil {
			t.Fatalf("reads of %d: %v", c.chunk, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("reads of %d, blocks of %d lines / %d bytes: %d records differ from the %d lines", c.chunk, c.lines, c.bytes, len(got), len(want))
		}
	}
	// A line over the limit fails, whatever the reads.
	for _, chunk := range []int{3, 1 << 20, 0} {
		if _, err := readLines(t, data, chunk, 1024, 16<<20, 250_000, 1); err == nil || !strings.Contains(err.Error(), "longer than 250000 bytes") {
			t.Errorf("reads of %d: a line over the limit gave %v", chunk, err)
		}
	}
}

// FuzzLines checks the file source's line splitting against wantLines, on
// any bytes, cut into reads and blocks of any size.
func FuzzLines(f *testing.F) {
	f.Add([]byte("a\nb\r\n\n\ufeffc"), uint8(1), uint8(2), uint16(3))
	f.Add([]byte("\ufeff\r\n\r\r\n"), uint8(2), uint8(1), uint16(1))
	f.Add([]byte("\xef\xbb"), uint8(1), uint8(5), uint16(100))
	f.Fuzz(func(t *testing.T, data []byte, chunk, lines uint8, nbytes uint16) {
		const maxLine = 512
		want := wantLines(data)
		long := slices.ContainsFunc(want, func(l string) bool { return len(l) > maxLine })
		// Read as a stream, then from a mapped file (a chunk of 0).
		for _, chunk := range []int{int(chunk) + 1, 0} {
			got, err := readLines(t, data, chunk, int(lines)+1, int(nbytes)+1, maxLine, uint64(len(data)))
			switch {
			case long && err == nil:
				t.Fatalf("reads of %d: a line over %d bytes was read", chunk, maxLine)
			case !long && err != nil:
				t.Fatal(err)
			case !long && !slices.Equal(got, want):
				t.Fatalf("reads of %d: records %q, want %q", chunk, got, want)
			}
		}
	})
}
