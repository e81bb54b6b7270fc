package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Journal keeps the states of the partitions one instance owns and writes
// the two states of every file: its cut points before the file is written
// (Intend), then the new committed offset after (Done). A replay after a
// crash between the two rewrites the file with the same rows under the same
// name; one after Done skips the rows the file holds.
//
// A Journal is safe for concurrent use.
type Journal struct {
	store *Store
	owner string

	mu     sync.Mutex
	parts  map[partKey]*Partition
	claims map[partKey]int64  // the number of each partition's claim
	chains map[partKey]*chain // where each partition's deltas stand
}

// chain is what a partition's deltas since its last snapshot weigh.
type chain struct {
	base      int64 // the snapshot's number
	snapBytes int   // its size
	deltas    int   // deltas written since
	bytes     int   // their size
}

// MaxChain bounds the deltas after a snapshot: a claim reads at most
// that many objects besides it.
const MaxChain = 256

type partKey struct {
	source string
	part   int32
}

// NewJournal returns a journal writing states as owner (an instance name,
// for people reading the states).
func NewJournal(store *Store, owner string) *Journal {
	return &Journal{store: store, owner: owner, parts: map[partKey]*Partition{}, claims: map[partKey]int64{}, chains: map[partKey]*chain{}}
}

// Claim takes a partition over: it reads the partition's newest state and
// creates the next one as this owner, which fences out the previous owner
// (its next state's number is taken). It returns the state to resume from;
// Seq 0 means the partition had none.
//
// incarnation identifies the partition's log as the source sees it now
// ("" when the source has no such thing). A partition whose states
// describe another log is not claimed: an error wrapping ErrRecreated
// says so. Its offsets begin again, and landing them would take the old
// log's file names.
func (j *Journal) Claim(ctx context.Context, source string, part int32, incarnation string) (*Partition, error) {
	for range 10 {
		last, top, err := j.store.latest(ctx, source, part)
		if err != nil {
			return nil, err
		}
		if last != nil && last.Incarnation != "" && incarnation != "" && last.Incarnation != incarnation {
			return nil, fmt.Errorf("%s partition %d: the lake's state (%s) describes the log of ID %s, and the source's is %s now: %w",
				source, part, Key(source, part, last.Seq), last.Incarnation, incarnation, ErrRecreated)
		}
		// After the newest number taken, whether its state reads or not.
		next := &Partition{Owner: j.owner, Source: source, Partition: part, Seq: top + 1, Incarnation: incarnation}
		if last != nil {
			next.Committed, next.Catalog = last.Committed, last.Catalog
			if incarnation == "" {
				next.Incarnation = last.Incarnation
			}
			next.Written = slices.Clone(last.Written)
			next.Pending = slices.Clone(last.Pending)
		}
		if err := j.store.MarkClaim(ctx, source, part, next.Seq); err != nil {
			return nil, err
		}
		// A claim's state is a snapshot.
		size, err := j.store.append(ctx, next)
		if err == nil {
			j.mu.Lock()
			j.parts[partKey{source, part}] = next
			j.claims[partKey{source, part}] = next.Seq
			j.chains[partKey{source, part}] = &chain{base: next.Seq, snapBytes: size}
			j.mu.Unlock()
			j.store.pruned(source, part, j.store.Prune(ctx, source, part, next.Seq))
			resume := *next
			if last == nil {
				resume.Seq = 0
			}
			return &resume, nil
		}
		if !isFenced(err) {
			return nil, err
		}
		// Another instance wrote a state meanwhile: read it and try again.
	}
	return nil, fmt.Errorf("%s partition %d: could not claim its state: other instances keep writing it", source, part)
}

func isFenced(err error) bool { return errors.Is(err, ErrFenced) }

// Release forgets a partition given up.
func (j *Journal) Release(source string, part int32) {
	j.mu.Lock()
	delete(j.parts, partKey{source, part})
	delete(j.claims, partKey{source, part})
	delete(j.chains, partKey{source, part})
	j.mu.Unlock()
}

// Owns reports whether the journal holds the partition's state.
func (j *Journal) Owns(source string, part int32) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, ok := j.parts[partKey{source, part}]
	return ok
}

// Intend records that cut is about to be written. It returns an error
// wrapping ErrFenced when another instance took the partition over: the
// file must then not be written.
//
// Its state created, it checks that the partition's newest claim is still
// this journal's: the state's number alone does not fence an owner that
// slept through more than KeepClaims handovers (the claim that took its
// next number was pruned, and the number is free again).
func (j *Journal) Intend(ctx context.Context, source string, part int32, cut Cut) error {
	// A claim reads a pending file, whoever wrote it: the offsets the cut
	// would hold are not kept.
	cut.Runs, cut.Bits = nil, ""
	if err := j.next(ctx, source, part, &Op{Kind: "intend", Cut: &cut}); err != nil {
		return err
	}
	return j.checkClaim(ctx, source, part, true)
}

// checkClaim returns an error wrapping ErrFenced, and forgets the
// partition, when a claim newer than this journal's is listed.
func (j *Journal) checkClaim(ctx context.Context, source string, part int32, retry bool) error {
	j.mu.Lock()
	mine := j.claims[partKey{source, part}]
	j.mu.Unlock()
	newest, err := j.store.NewestClaim(ctx, source, part, retry)
	switch {
	case err != nil:
		return err
	case newest > mine:
		j.Release(source, part)
		return fmt.Errorf("%s partition %d: claimed again (claim %d) since this instance claimed it (claim %d): %w",
			source, part, newest, mine, ErrFenced)
	case newest < mine:
		// The claim is kept while it is among the newest: a listing
		// without it is not to be believed.
		return fmt.Errorf("%s partition %d: the store's listing of the claims misses this instance's (%d, newest listed %d)",
			source, part, mine, newest)
	}
	return nil
}

// Check returns an error wrapping ErrFenced when it finds that another
// instance claimed the partition since this one did, and nil otherwise
// (also when the store cannot tell now): a write retried across an outage
// asks it before each attempt, so that an instance that lost its
// partition meanwhile does not write the file after all.
func (j *Journal) Check(ctx context.Context, source string, part int32) error {
	if !j.Owns(source, part) {
		return fmt.Errorf("%s partition %d: %w", source, part, ErrFenced)
	}
	if err := j.checkClaim(ctx, source, part, false); isFenced(err) {
		return err
	}
	return nil
}

// Start records that a partition claimed with no earlier state starts at
// offset: every message below it is outside what this lake lands, as if
// committed.
func (j *Journal) Start(ctx context.Context, source string, part int32, offset int64) error {
	return j.next(ctx, source, part, &Op{Kind: "start", Offset: offset})
}

// withoutKey returns cuts without the one of key.
func withoutKey(cuts []Cut, key string) []Cut {
	out := make([]Cut, 0, len(cuts))
	for _, c := range cuts {
		if c.Key != key {
			out = append(out, c)
		}
	}
	return out
}

// Done records that cut was written and that every message below durable
// is landed.
func (j *Journal) Done(ctx context.Context, source string, part int32, cut Cut, durable int64) error {
	return j.next(ctx, source, part, &Op{Kind: "done", Cut: &cut, Durable: durable})
}

// Advance records that every message of a partition below durable is
// landed, when that is past what its state says: files that were held from
// counting (until their lakehouse commit) were committed since their state
// was created. It does nothing for a partition the journal does not hold.
func (j *Journal) Advance(ctx context.Context, source string, part int32, durable int64) error {
	j.mu.Lock()
	cur := j.parts[partKey{source, part}]
	j.mu.Unlock()
	if cur == nil || durable <= cur.Committed {
		return nil
	}
	return j.next(ctx, source, part, &Op{Kind: "advance", Durable: durable})
}

// next creates the partition's next state, changed by op. It is stored as
// the change alone (a delta), but every MaxChain states, and whenever
// the deltas since the last snapshot weigh more than it, whole: the bytes
// written per file stay about the size of a cut, however many cuts the
// state holds, and a claim reads at most MaxChain deltas.
func (j *Journal) next(ctx context.Context, source string, part int32, op *Op) error {
	k := partKey{source, part}
	j.mu.Lock()
	cur, ch := j.parts[k], j.chains[k]
	j.mu.Unlock()
	if cur == nil || ch == nil {
		return fmt.Errorf("%s partition %d: not claimed", source, part)
	}
	st := *cur
	st.Seq++
	st.Written = slices.Clone(cur.Written)
	st.Pending = slices.Clone(cur.Pending)
	op.apply(&st)
	snapshot := ch.deltas+1 >= MaxChain || ch.bytes >= ch.snapBytes
	stored := &st
	if !snapshot {
		stored = &Partition{Seq: st.Seq, Owner: st.Owner, Source: source, Partition: part, Committed: st.Committed,
			Base: ch.base, Op: op}
	}
	size, err := j.store.append(ctx, stored)
	if err != nil {
		if isFenced(err) {
			j.Release(source, part)
		}
		return err
	}
	next := *ch
	if snapshot {
		next = chain{base: st.Seq, snapBytes: size}
	} else {
		next.deltas++
		next.bytes += size
	}
	j.mu.Lock()
	if j.parts[k] == cur {
		j.parts[k], j.chains[k] = &st, &next
	}
	j.mu.Unlock()
	if snapshot {
		// The states before a snapshot are needed no more.
		j.store.pruned(source, part, j.store.Prune(ctx, source, part, st.Seq))
	}
	return nil
}
