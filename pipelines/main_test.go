package pipelines

import (
	"os"
	"testing"

	"github.com/cdclake/cdclake/pipelines/source"
)

// TestMain lands every test's input with the file source poisoning the
// blocks it recycles: whatever kept a reference into a record past its
// block's ack would read 0xff bytes, and the tests' lakes would not be
// what they expect.
func TestMain(m *testing.M) {
	source.PoisonRecycled(true)
	os.Exit(m.Run())
}
