package source_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cdclake/cdclake/pipelines/source"
	"github.com/cdclake/cdclake/pipelines/source/sourcetest"
)

// TestMemoryConformance runs the source suite on Memory.
func TestMemoryConformance(t *testing.T) {
	sourcetest.Run(t, sourcetest.Harness{Bounded: true, New: func(t *testing.T, parts [][]string) source.Source {
		var blocks []*source.Block
		for p, values := range parts {
			for lo := 0; lo < len(values); lo += sourcetest.BlockRecords {
				b := &source.Block{Source: "memory", Partition: int32(p)}
				for i := lo; i < min(lo+sourcetest.BlockRecords, len(values)); i++ {
					b.Records = append(b.Records, source.Record{Offset: int64(10 * i), Value: []byte(values[i])})
				}
				blocks = append(blocks, b)
			}
		}
		return source.NewMemory(blocks...)
	}})
}

// TestFilesConformance runs the source suite on Files, each partition a
// file, with acked blocks' buffers poisoned when they are reused.
func TestFilesConformance(t *testing.T) {
	source.PoisonRecycled(true)
	defer source.PoisonRecycled(false)
	sourcetest.Run(t, sourcetest.Harness{Bounded: true, New: func(t *testing.T, parts [][]string) source.Source {
		dir := t.TempDir()
		for p, values := range parts {
			var data []byte
			for _, v := range values {
				data = append(append(data, v...), '\n')
			}
			if err := os.WriteFile(filepath.Join(dir, "p"+string(rune('0'+p))+".ndjson"), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		src, err := source.OpenFiles(dir, sourcetest.BlockRecords, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return src
	}})
}
