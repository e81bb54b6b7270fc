package main

import (
	"os"
	"testing"
)

// TestMain runs every test with the file source poisoning the blocks it
// recycles (see PoisonRecycled): a landed value that still pointed into
// an acked block would differ from the input the tests check it against.
func TestMain(m *testing.M) {
	os.Setenv("CDCLAKE_POISON_RECYCLED", "1")
	os.Exit(m.Run())
}
