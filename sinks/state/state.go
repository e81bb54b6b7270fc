// Package state keeps, in the lake next to the data, what cdclake knows of
// each source partition: the offset below which everything landed, the
// files written or about to be written above it (their cut points), and the
// decoding state a new owner of the partition needs.
//
// # Objects
//
// A partition's states form a sequence of objects
//
//	_cdclake/state/{source}/p{partition}/{seq, 20 digits}.json
//
// each created once (sinks.ObjectCreator): two writers can never both
// create the same sequence number, so a writer that finds its next number
// taken knows another instance owns the partition now (it is fenced) and
// stops writing for it. The newest state is the one with the highest
// number. Engines skip the folder: its name starts with an underscore.
//
// Most states are stored as the change they make (a delta: Base and Op),
// and now and then whole (a snapshot, as every claim's state is), so that
// a file costs about a cut's bytes however many cuts the state holds; the
// states before the newest snapshot are deleted.
//
// Old states are deleted (Prune), but not the states that took a
// partition over (claims), marked by an empty object
//
//	_cdclake/state/{source}/p{partition}/claims/{seq, 20 digits}
//
// written before the claim's state: a claim's number is the one the
// previous owner would write next, so while it exists that owner, if it
// still runs, is fenced at its next write. The newest KeepClaims claims
// are kept. Since a number pruned away could be created again, an owner
// also checks, after the state of each file it is about to write, that its
// own claim is still the newest (NewestClaim): one whose claim was pruned,
// or followed by another, is fenced however many handovers it slept
// through.
package state

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cdclake/cdclake/sinks"
	"gocloud.dev/blob"
	"golang.org/x/sync/errgroup"
)

// Dir is the folder of the lake that holds the states.
const Dir = "_cdclake/state"

// ErrRecreated is returned by Claim when the partition's log is not the
// one its states describe (Partition.Incarnation).
var ErrRecreated = errors.New("the source was deleted and created again")

// ErrFenced is returned by Append when another writer created the state's
// sequence number first.
var ErrFenced = errors.New("partition state fenced: another instance owns the partition")

// Cut is a file's cut points: the object, the table version whose rows it
// holds, and the offsets of its first and last row in the partition.
type Cut struct {
	Key         string `json:"key"`
	Table       string `json:"table"`
	Fingerprint uint64 `json:"fingerprint,string"`
	First       int64  `json:"first"`
	Last        int64  `json:"last"`
	Rows        int    `json:"rows"`
	// Runs or Bits, when set, are the offsets of the file's rows: Runs as
	// runs of consecutive offsets, [first, last] each, when they make at
	// most MaxRuns; else Bits, a bitmap from First (bit i, the low bit
	// first in byte i/8, for offset First+i; base64 without padding), when
	// the file spans at most MaxBits offsets. A claim then knows which
	// messages a written file holds without reading it.
	Runs [][2]int64 `json:"runs,omitempty"`
	Bits string     `json:"bits,omitempty"`
}

// MaxRuns and MaxBits bound the offsets a cut records, and so its size.
const (
	MaxRuns = 16
	MaxBits = 2048
)

// Dir returns the folder of the cut's object.
func (c Cut) Dir() string { return path.Dir(c.Key) }

// Offsets returns the offsets the cut's runs or bitmap hold, and false
// when it has neither, or one that does not hold its rows.
func (c Cut) Offsets() ([]int64, bool) {
	var out []int64
	switch {
	case len(c.Runs) > 0:
		for _, r := range c.Runs {
			if r[1] < r[0] || r[0] < c.First || r[1] > c.Last || int64(len(out))+r[1]-r[0] >= int64(c.Rows) {
				return nil, false
			}
			for o := r[0]; o <= r[1]; o++ {
				out = append(out, o)
			}
		}
	case c.Bits != "":
		bm, err := base64.RawStdEncoding.DecodeString(c.Bits)
		if err != nil || len(bm)*8 > MaxBits {
			return nil, false
		}
		out = make([]int64, 0, c.Rows)
		for i, by := range bm {
			for ; by != 0; by &= by - 1 {
				o := c.First + int64(i*8+bits.TrailingZeros8(by))
				if o > c.Last || len(out) == c.Rows {
					return nil, false
				}
				out = append(out, o)
			}
		}
	}
	if len(out) == 0 || len(out) != c.Rows {
		return nil, false
	}
	return out, true
}

// Partition is one state of a source partition.
type Partition struct {
	Seq       int64  `json:"seq"`
	Owner     string `json:"owner"`
	Source    string `json:"source"`
	Partition int32  `json:"partition"`
	// Committed is the offset below which every message is in a written
	// file or a written dead letter, or needed no landing.
	Committed int64 `json:"committed"`
	// Written are files written whose last row is at or above Committed:
	// their rows must not land again.
	Written []Cut `json:"written,omitempty"`
	// Pending are files about to be written when the state was created:
	// they may or may not exist, and a replay writes them again with the
	// same rows under the same names.
	Pending []Cut `json:"pending,omitempty"`
	// Catalog is the decoding state the partition's messages depend on.
	Catalog json.RawMessage `json:"catalog,omitempty"`
	// Incarnation identifies the source partition's log (a Kafka topic's
	// ID): a topic deleted and created again under its name has another,
	// and offsets that begin again.
	Incarnation string `json:"incarnation,omitempty"`
	// Base, in a state stored as a change (a delta), is the number of the
	// whole state (a snapshot) it follows from; the state is that one
	// with the Op of every state after it, up to this one, applied. 0 in a
	// snapshot. Latest returns whole states.
	Base int64 `json:"base,omitempty"`
	// Op is a delta's change.
	Op *Op `json:"op,omitempty"`
}

// Op is the change one state makes to the one before it.
type Op struct {
	// Kind is "intend" (Cut is about to be written), "done" (Cut was
	// written and every message below Durable landed), "advance" (every
	// message below Durable landed: files held from counting, until their
	// lakehouse commit, were committed since) or "start" (the partition
	// starts at Offset).
	Kind    string `json:"kind"`
	Cut     *Cut   `json:"cut,omitempty"`
	Durable int64  `json:"durable,omitempty"`
	Offset  int64  `json:"offset,omitempty"`
}

// apply changes st as op says.
func (op *Op) apply(st *Partition) {
	switch op.Kind {
	case "intend":
		st.Pending = append(withoutKey(st.Pending, op.Cut.Key), *op.Cut)
	case "done", "advance":
		key := ""
		if op.Cut != nil {
			key = op.Cut.Key
		}
		// Only cuts a replay from durable could meet are kept.
		var pending []Cut
		for _, c := range withoutKey(st.Pending, key) {
			if c.Last >= op.Durable {
				pending = append(pending, c)
			}
		}
		st.Pending = pending
		written := make([]Cut, 0, len(st.Written)+1)
		cuts := withoutKey(st.Written, key)
		if op.Cut != nil {
			cuts = append(cuts, *op.Cut)
		}
		for _, c := range cuts {
			if c.Last >= op.Durable {
				written = append(written, c)
			}
		}
		st.Written = written
		st.Committed = max(st.Committed, op.Durable)
	case "start":
		st.Committed = max(st.Committed, op.Offset)
	}
}

// Store reads and appends partition states.
type Store struct {
	bucket  *blob.Bucket
	creator sinks.ObjectCreator
	// Appended, when set, is told of every Append: how long it took and
	// its error (nil, one wrapping ErrFenced, or another). It may be
	// called concurrently. Set it before the first Append.
	Appended func(took time.Duration, err error)
	// Unreadable, when set, is told of every state object Latest passes
	// over because it does not hold its state, with the reason.
	Unreadable func(key string, err error)
	// PruneFailed, when set, is told of every prune of old states or
	// catalog entries that failed (a store that does not let cdclake
	// delete: the lake grows, nothing else changes). It may be called
	// concurrently.
	PruneFailed func(source string, part int32, err error)
	// Retry, when set, runs the reads the landing waits for (the claims'
	// listing before each file), retrying them through a store's outage
	// as writes are (lake.Sink.Retried). Set it before the first Intend.
	Retry func(ctx context.Context, key string, read func() error) error
}

// pruned reports a prune's error.
func (s *Store) pruned(source string, part int32, err error) {
	if err != nil && s.PruneFailed != nil {
		s.PruneFailed(source, part, err)
	}
}

// NewStore returns a store reading bucket and creating objects with c
// (which writes into the same bucket).
func NewStore(bucket *blob.Bucket, c sinks.ObjectCreator) *Store {
	return &Store{bucket: bucket, creator: c}
}

func prefix(source string, part int32) string {
	return fmt.Sprintf("%s/%s/p%d/", Dir, sinks.Sanitize(source), part)
}

// Key is the object key of a state.
func Key(source string, part int32, seq int64) string {
	return fmt.Sprintf("%s%020d.json", prefix(source, part), seq)
}

// Latest returns the newest state of a partition, nil when it has none.
//
// A state object that does not hold its sequence number's state (it does
// not parse: a store that lost its bytes, a hand edit) is never taken: it
// is reported to Unreadable and the one before it is. A partition with
// states none of which reads is an error: where it stands is unknown.
func (s *Store) Latest(ctx context.Context, source string, part int32) (*Partition, error) {
	st, _, err := s.latest(ctx, source, part)
	return st, err
}

// latest returns the newest state that reads, and the highest sequence
// number taken (by it or by a newer state that does not read).
func (s *Store) latest(ctx context.Context, source string, part int32) (*Partition, int64, error) {
	pre := prefix(source, part)
	var seqs []int64
	it := s.bucket.List(&blob.ListOptions{Prefix: pre, Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("listing the state of %s partition %d: %w", source, part, err)
		}
		name, ok := strings.CutSuffix(strings.TrimPrefix(obj.Key, pre), ".json")
		if n, err := strconv.ParseInt(name, 10, 64); ok && err == nil && n > 0 {
			seqs = append(seqs, n)
		}
	}
	slices.Sort(seqs)
	var top int64
	if len(seqs) > 0 {
		top = seqs[len(seqs)-1]
	}
	for i := len(seqs) - 1; i >= 0; i-- {
		st, key, err := s.whole(ctx, source, part, seqs[i])
		if err == nil {
			return st, top, nil
		}
		var unreadable unreadableError
		if !errors.As(err, &unreadable) {
			return nil, 0, err
		}
		if s.Unreadable != nil {
			s.Unreadable(key, unreadable.error)
		}
	}
	if top > 0 {
		return nil, 0, fmt.Errorf("%s partition %d: none of its %d states reads", source, part, len(seqs))
	}
	return nil, 0, nil
}

// unreadableError is a state object that does not hold its state.
type unreadableError struct{ error }

// read reads state seq as stored (a snapshot or a delta).
func (s *Store) read(ctx context.Context, source string, part int32, seq int64) (*Partition, error) {
	key := Key(source, part, seq)
	data, err := s.bucket.ReadAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	var st Partition
	err = json.Unmarshal(data, &st)
	switch {
	case err != nil:
		return nil, unreadableError{err}
	case st.Seq != seq || st.Source != source || st.Partition != part:
		return nil, unreadableError{fmt.Errorf("it holds state %d of %s partition %d", st.Seq, st.Source, st.Partition)}
	case st.Base >= seq || (st.Base > 0) != (st.Op != nil):
		return nil, unreadableError{fmt.Errorf("state %d: base %d and op %v do not make a snapshot or a change", seq, st.Base, st.Op)}
	}
	return &st, nil
}

// whole returns state seq whole: a snapshot as it is, a delta applied to
// its snapshot with the deltas between them. An object of the chain that
// does not hold its state is an unreadableError, and key names it.
func (s *Store) whole(ctx context.Context, source string, part int32, seq int64) (st *Partition, key string, err error) {
	last, err := s.read(ctx, source, part, seq)
	if err != nil || last.Base == 0 {
		return last, Key(source, part, seq), err
	}
	// The chain is read side by side: up to MaxChain objects.
	chain := make([]*Partition, seq-last.Base+1)
	chain[len(chain)-1] = last
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range len(chain) - 1 {
		g.Go(func() error {
			var err error
			chain[i], err = s.read(gctx, source, part, last.Base+int64(i))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, Key(source, part, seq), err
	}
	snap := chain[0]
	if snap.Base != 0 {
		return nil, Key(source, part, last.Base), unreadableError{fmt.Errorf("state %d, the base of state %d, is not a snapshot", last.Base, seq)}
	}
	out := *snap
	out.Written, out.Pending = slices.Clone(snap.Written), slices.Clone(snap.Pending)
	for _, d := range chain[1:] {
		if d.Base != last.Base {
			return nil, Key(source, part, d.Seq), unreadableError{fmt.Errorf("state %d follows from %d, not %d", d.Seq, d.Base, last.Base)}
		}
		d.Op.apply(&out)
	}
	out.Seq, out.Owner = last.Seq, last.Owner
	return &out, "", nil
}

// Append creates st, whose Seq must follow the newest state's. It returns
// an error wrapping ErrFenced when that number is taken.
func (s *Store) Append(ctx context.Context, st *Partition) error {
	_, err := s.append(ctx, st)
	return err
}

// append is Append, which also returns the size of the object.
func (s *Store) append(ctx context.Context, st *Partition) (int, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return 0, err
	}
	key := Key(st.Source, st.Partition, st.Seq)
	start := time.Now()
	err = s.creator.CreateObject(ctx, key, data, "application/json")
	switch {
	case errors.Is(err, sinks.ErrExists):
		err = fmt.Errorf("%s partition %d state %d: %w", st.Source, st.Partition, st.Seq, ErrFenced)
	case err != nil:
		err = fmt.Errorf("writing %s: %w", key, err)
	}
	if s.Appended != nil {
		s.Appended(time.Since(start), err)
	}
	return len(data), err
}

// KeepClaims is the number of a partition's newest claims Prune keeps.
// An instance that lost the partition that many handovers ago and still
// runs could write one more state.
const KeepClaims = 64

func claimKey(source string, part int32, seq int64) string {
	return fmt.Sprintf("%sclaims/%020d", prefix(source, part), seq)
}

// MarkClaim marks seq as a claim: Prune keeps its state. Call it before
// the claim's state is appended.
func (s *Store) MarkClaim(ctx context.Context, source string, part int32, seq int64) error {
	key := claimKey(source, part, seq)
	if err := s.bucket.WriteAll(ctx, key, nil, nil); err != nil {
		return fmt.Errorf("writing %s: %w", key, err)
	}
	return nil
}

// NewestClaim returns the number of a partition's newest claim, 0 when it
// has none. With retry, its listing is retried through an outage
// (Store.Retry).
func (s *Store) NewestClaim(ctx context.Context, source string, part int32, retry bool) (int64, error) {
	pre := prefix(source, part) + "claims/"
	var newest int64
	list := func() error {
		newest = 0
		it := s.bucket.List(&blob.ListOptions{Prefix: pre})
		for {
			obj, err := it.Next(ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if n, err := strconv.ParseInt(strings.TrimPrefix(obj.Key, pre), 10, 64); err == nil && n > newest {
				newest = n
			}
		}
	}
	var err error
	if retry && s.Retry != nil {
		err = s.Retry(ctx, pre, list)
	} else {
		err = list()
	}
	if err != nil {
		return 0, fmt.Errorf("listing the claims of %s partition %d: %w", source, part, err)
	}
	return newest, nil
}

// Prune deletes a partition's states older than seq, but the newest
// KeepClaims claims.
func (s *Store) Prune(ctx context.Context, source string, part int32, seq int64) error {
	pre := prefix(source, part)
	it := s.bucket.List(&blob.ListOptions{Prefix: pre})
	var states, claims []int64
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name, claim := strings.CutPrefix(strings.TrimPrefix(obj.Key, pre), "claims/")
		n, err := strconv.ParseInt(strings.TrimSuffix(name, ".json"), 10, 64)
		switch {
		case err != nil:
		case claim:
			claims = append(claims, n)
		case strings.HasSuffix(name, ".json"):
			states = append(states, n)
		}
	}
	slices.Sort(claims)
	var old []string
	if len(claims) > KeepClaims {
		for _, n := range claims[:len(claims)-KeepClaims] {
			if n < seq {
				old = append(old, claimKey(source, part, n))
			}
		}
		claims = claims[len(claims)-KeepClaims:]
	}
	for _, n := range states {
		if _, kept := slices.BinarySearch(claims, n); n < seq && !kept {
			old = append(old, Key(source, part, n))
		}
	}
	var errs []error
	for _, k := range old {
		errs = append(errs, s.bucket.Delete(ctx, k))
	}
	return errors.Join(errs...)
}

// CatalogDir is the folder of the lake that holds the decoding state.
const CatalogDir = "_cdclake/catalog"

// CatalogEntry is a metadata record a partition's messages depend on
// (GoldenGate OBJECT_METADATA and JSON Schema records): a new owner of the
// partition observes it again before it reads on, since the record itself
// lies before the committed offset.
type CatalogEntry struct {
	Kind  string `json:"kind"`
	Table string `json:"table"`
	// Offset is the record's position in the partition; -1 for an entry
	// written before entries were kept by offset.
	Offset int64           `json:"offset"`
	Record json.RawMessage `json:"record"`
}

// CatalogKey is the object key of a partition's entry of a kind for a
// table, recorded at offset. Entries are kept by offset, since the rows
// between a new owner's committed offset and a later record of the table
// depend on the one before it, and each is created once.
func CatalogKey(source string, part int32, kind, table string, offset int64) string {
	return fmt.Sprintf("%s%020d.json", catalogTable(source, part, kind, table), offset)
}

func catalogPrefix(source string, part int32) string {
	return fmt.Sprintf("%s/%s/p%d/", CatalogDir, sinks.Sanitize(source), part)
}

func catalogTable(source string, part int32, kind, table string) string {
	return fmt.Sprintf("%s%s/%s/", catalogPrefix(source, part), sinks.Sanitize(kind), sinks.Sanitize(table))
}

// catalogObject is an entry's object, known from its key.
type catalogObject struct {
	key    string
	group  string // kind/table
	offset int64  // -1: an entry of the earlier layout, {kind}/{table}.json
}

// Catalog returns the entries a partition resumed at committed depends on:
// of each kind and table, the newest entry recorded below committed (the
// ones at or past it are met again in the replay), in key order. An entry
// of the earlier layout, unversioned, stands when no versioned one
// qualifies.
func (s *Store) Catalog(ctx context.Context, source string, part int32, committed int64) ([]CatalogEntry, error) {
	objs, err := s.catalogObjects(ctx, source, part)
	if err != nil {
		return nil, err
	}
	// Read side by side: a partition of many tables has an entry of each.
	newest := newestBelow(objs, committed)
	out := make([]CatalogEntry, len(newest))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(catalogReads)
	for i, o := range newest {
		g.Go(func() error {
			data, err := s.bucket.ReadAll(gctx, o.key)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(data, &out[i]); err != nil {
				return fmt.Errorf("%s: %w", o.key, err)
			}
			out[i].Offset = o.offset // the key says, for entries of the earlier layout too
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// catalogReads bounds the catalog entries a claim reads at once.
const catalogReads = 32

// PruneCatalog deletes a partition's entries that no replay from committed
// on can need: those older than the newest of their table below it.
func (s *Store) PruneCatalog(ctx context.Context, source string, part int32, committed int64) error {
	objs, err := s.catalogObjects(ctx, source, part)
	if err != nil {
		return err
	}
	keep := map[string]int64{}
	for _, o := range newestBelow(objs, committed) {
		keep[o.group] = o.offset
	}
	var errs []error
	for _, o := range objs {
		if at, ok := keep[o.group]; ok && o.offset < at {
			errs = append(errs, s.bucket.Delete(ctx, o.key))
		}
	}
	return errors.Join(errs...)
}

func (s *Store) catalogObjects(ctx context.Context, source string, part int32) ([]catalogObject, error) {
	pre := catalogPrefix(source, part)
	var out []catalogObject
	it := s.bucket.List(&blob.ListOptions{Prefix: pre})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing the catalog of %s partition %d: %w", source, part, err)
		}
		rel, ok := strings.CutSuffix(strings.TrimPrefix(obj.Key, pre), ".json")
		if !ok {
			continue
		}
		o := catalogObject{key: obj.Key, group: rel, offset: -1}
		if dir, name := path.Split(rel); strings.Count(rel, "/") == 2 {
			n, err := strconv.ParseInt(name, 10, 64)
			if err != nil {
				continue
			}
			o.group, o.offset = strings.TrimSuffix(dir, "/"), n
		}
		out = append(out, o)
	}
}

// newestBelow returns, of each group, the newest object below committed,
// in key order.
func newestBelow(objs []catalogObject, committed int64) []catalogObject {
	best := map[string]catalogObject{}
	for _, o := range objs {
		if b, ok := best[o.group]; o.offset < committed && (!ok || o.offset > b.offset) {
			best[o.group] = o
		}
	}
	out := slices.Collect(maps.Values(best))
	slices.SortFunc(out, func(a, b catalogObject) int { return strings.Compare(a.key, b.key) })
	return out
}
