package lakehouse

import (
	"context"
	"io"
	"log/slog"
	"testing"
)

// Pipe serves the Catalog open opens on a goroutine, as the
// cdclake-lakehouse process does, and returns the client of it.
func Pipe(t *testing.T, open Opener) Catalog {
	reqR, reqW := io.Pipe()
	repR, repW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Serve(reqR, repW, io.Discard, open)
		repW.CloseWithError(err)
		done <- err
	}()
	p := newProcess(reqW, repR, func() error { return <-done })
	if err := p.open(context.Background(), Config{}, slog.LevelInfo, "text"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}
