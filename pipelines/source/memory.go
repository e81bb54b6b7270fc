package source

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
)

// Memory is a bounded Source over blocks given in advance. It delivers the
// blocks of different partitions concurrently, one goroutine per
// partition, and a partition's blocks in the order given, each after the
// previous one was acked: the most concurrency the Source contract allows.
// Drained closes once every block was acked.
//
// It is safe for concurrent use.
type Memory struct {
	parts   [][]*Block
	left    int64
	mu      sync.Mutex
	err     error
	closed  bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	drained chan struct{}
}

var _ Source = (*Memory)(nil)

// NewMemory returns a source delivering blocks, grouped by (source,
// partition) in the order given.
func NewMemory(blocks ...*Block) *Memory {
	m := &Memory{drained: make(chan struct{})}
	type partKey struct {
		source string
		part   int32
	}
	index := map[partKey]int{}
	for _, b := range blocks {
		k := partKey{b.Source, b.Partition}
		i, ok := index[k]
		if !ok {
			i = len(m.parts)
			index[k] = i
			m.parts = append(m.parts, nil)
		}
		m.parts[i] = append(m.parts[i], b)
		m.left += int64(len(b.Records))
	}
	return m
}

// Backlog returns the records not yet acked.
func (m *Memory) Backlog() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.left
}

// Err returns the error that stopped delivery: a nacked block.
func (m *Memory) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Drained is closed when delivery ended in every partition: every block
// was acked, or a partition stopped at a nacked block (see Err).
func (m *Memory) Drained() <-chan struct{} { return m.drained }

// Subscribe starts delivery; the topic is ignored. The channel is closed
// when the source is closed or ctx ends.
func (m *Memory) Subscribe(ctx context.Context, _ string) (<-chan *message.Message, error) {
	m.mu.Lock()
	if m.closed || m.cancel != nil {
		m.mu.Unlock()
		return nil, errors.New("memory source: closed or already subscribed")
	}
	ctx, m.cancel = context.WithCancel(ctx)
	m.mu.Unlock()
	out := make(chan *message.Message)
	var parts sync.WaitGroup
	for _, blocks := range m.parts {
		parts.Add(1)
		go func() {
			defer parts.Done()
			m.deliver(ctx, blocks, out)
		}()
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		parts.Wait()
		select {
		case <-m.drained:
		default:
			close(m.drained)
		}
		<-ctx.Done()
		close(out)
	}()
	return out, nil
}

func (m *Memory) deliver(ctx context.Context, blocks []*Block, out chan<- *message.Message) {
	for _, b := range blocks {
		msg := NewMessage(ctx, b)
		select {
		case out <- msg:
		case <-ctx.Done():
			return
		}
		select {
		case <-msg.Acked():
			m.mu.Lock()
			m.left -= int64(len(b.Records))
			m.mu.Unlock()
		case <-msg.Nacked():
			if ctx.Err() != nil {
				return // stopped before the block could be handled
			}
			m.mu.Lock()
			if m.err == nil {
				m.err = fmt.Errorf("%s partition %d: block was not processed", b.Source, b.Partition)
			}
			m.mu.Unlock()
			return
		case <-ctx.Done():
			return
		}
	}
}

// Close ends the subscription and waits for its goroutines.
func (m *Memory) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	cancel := m.cancel
	m.mu.Unlock()
	if cancel != nil {
		cancel()
		m.wg.Wait()
	}
	return nil
}
