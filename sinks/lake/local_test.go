package lake

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestFileWriter writes sequences of writes of every size class through a
// fileWriter and checks the file holds exactly their bytes, and that a
// write of a whole block takes no buffer.
func TestFileWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := map[string][]int{
		"one small write":         {10},
		"one block":               {64 << 10},
		"blocks":                  {64 << 10, 1 << 20, 1 << 20},
		"blocks and a tail":       {64 << 10, 1 << 20, 300},
		"headers and pages":       {4, 20, 9000, 13, 70000, 7, 100, 8 << 10, 5},
		"small writes past limit": nil,
	}
	for i := 0; i < 5000; i++ {
		cases["small writes past limit"] = append(cases["small writes past limit"], 1+rng.IntN(60))
	}
	for name, sizes := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "object"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w := &fileWriter{f: f}
			var want bytes.Buffer
			for _, n := range sizes {
				p := make([]byte, n)
				for j := range p {
					p[j] = byte(rng.Uint32())
				}
				want.Write(p)
				if k, err := w.Write(p); k != n || err != nil {
					t.Fatalf("Write(%d bytes) = %d, %v", n, k, err)
				}
				if len(w.buf) >= directWrite {
					t.Fatalf("the buffer holds %d bytes after a write", len(w.buf))
				}
			}
			if err := w.flush(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("the file holds %d bytes, not the %d written", len(got), want.Len())
			}
			if (name == "blocks" || name == "one block") && cap(w.buf) != 0 {
				t.Errorf("writes of whole blocks took a buffer of %d bytes", cap(w.buf))
			}
		})
	}
}
