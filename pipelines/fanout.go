package pipelines

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cdclake/cdclake/pipelines/source"
)

// fanOut runs block b of msg through the stages: its windows go to w's
// lanes, which run the stage middlewares (next) over them, and come back,
// in record order, to the batch stage on this goroutine, while the lanes
// go on with the next windows.
//
// Window k goes to lane k mod lanes; the lanes take their windows in
// order, so going round the lanes reads them back in record order. A lane
// that fails or panics stops the others at their next window; the windows
// other lanes finished after a failure are not batched. fanOut returns
// once every lane has returned, with the first error.
func (p *Pipeline) fanOut(msg *message.Message, next message.HandlerFunc, w *worker, b *source.Block) error {
	windows := (len(b.Records) + windowRecords - 1) / windowRecords
	lanes := min(len(w.lanes), max(windows, 1))
	var stop atomic.Bool
	errs := make([]error, lanes)
	var wg sync.WaitGroup
	for li, ln := range w.lanes[:lanes] {
		m := message.NewMessage(msg.UUID, msg.Payload)
		m.Metadata = msg.Metadata
		m.SetContext(context.WithValue(msg.Context(), laneKey{}, ln))
		wg.Go(func() {
			errs[li] = p.runLane(ln, m, next, b, li, lanes, windows, &stop)
		})
	}
	var err error
	for k := 0; ; k++ {
		win, ok := <-w.lanes[k%lanes].done
		if !ok {
			break
		}
		if err == nil {
			if err = p.guard(w, func() error { return p.batchWindow(w, win) }); err != nil {
				stop.Store(true)
			}
		}
		win.free <- struct{}{}
	}
	for _, ln := range w.lanes[:lanes] {
		for win := range ln.done {
			win.free <- struct{}{}
		}
	}
	wg.Wait()
	if err == nil {
		err = errors.Join(errs...)
	}
	return err
}

// runLane runs the stages over the lane's windows of b (li, li+lanes, ...)
// until they end or stop is set, and closes ln.done. A panic in a stage
// gives the window back, fails the run (what the stage left is not known
// to be whole) and is returned as a *StagePanic.
func (p *Pipeline) runLane(ln *lane, m *message.Message, next message.HandlerFunc, b *source.Block,
	li, lanes, windows int, stop *atomic.Bool) (err error) {
	defer close(ln.done)
	defer ln.counts.addTo(&p.stats)
	defer func() {
		if r := recover(); r != nil {
			select {
			case ln.win.free <- struct{}{}:
			default: // it was not taken
			}
			err = p.fail(&StagePanic{Stage: ln.stage, At: b.Position(ln.win.base + ln.rec), Value: r, Stack: debug.Stack()})
			stop.Store(true)
		}
	}()
	for k := li; k < windows && !stop.Load(); k += lanes {
		lo := k * windowRecords
		ln.window(lo, min(lo+windowRecords, len(b.Records)))
		if _, err := next(m); err != nil {
			stop.Store(true)
			return err
		}
	}
	return nil
}
