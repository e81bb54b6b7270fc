// The Catalog in a process of its own: the client cdclake uses (Start) and
// the loop the cdclake-lakehouse binary runs (Serve), one JSON request and
// one JSON reply a line.

package lakehouse

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cdclake/cdclake/sinks/lakehouse/deletion"
)

// Binary is the name of the binary that serves a Catalog (Serve).
const Binary = "cdclake-lakehouse"

// CPUProfileEnv names the file the Binary writes a CPU profile of its run
// to (cdclake run --cpuprofile sets it to the profile's path with the
// binary's name appended); unset, it profiles nothing.
const CPUProfileEnv = "CDCLAKE_LAKEHOUSE_CPUPROFILE"

// request is one call of a Catalog method.
type request struct {
	ID        uint64      `json:"id"`
	Op        string      `json:"op"` // open, offsets, landed, commit, record, compact, expire, datasets, setfiles
	Dataset   string      `json:"dataset,omitempty"`
	Files     []wireFile  `json:"files,omitempty"`
	Offsets   []wireOff   `json:"offsets,omitempty"`
	Parts     []Partition `json:"parts,omitempty"`
	Skip      []string    `json:"skip,omitempty"`
	Config    *Config     `json:"config,omitempty"` // open
	Compact   *Compaction `json:"compact,omitempty"`
	Expire    *Expiry     `json:"expire,omitempty"`
	Set       *wireSet    `json:"set,omitempty"`
	LogLevel  string      `json:"log_level,omitempty"`
	LogFormat string      `json:"log_format,omitempty"`
}

// reply is a call's answer, by its request's ID: its error (Kind names the
// package's error it wraps, if any), or its results.
type reply struct {
	ID      uint64     `json:"id"`
	Error   string     `json:"error,omitempty"`
	Kind    string     `json:"kind,omitempty"` // schema (ErrSchema), other-lake (ErrOtherLake), state-behind (ErrStateBehind)
	Offsets []wireOff  `json:"offsets,omitempty"`
	Keys    []string   `json:"keys,omitempty"` // landed; datasets
	Done    *Compacted `json:"done,omitempty"`
	Expired *Expired   `json:"expired,omitempty"`
}

// kinds are the errors a reply names by Kind, for the callers that tell
// them apart.
var kinds = map[string]error{"schema": ErrSchema, "other-lake": ErrOtherLake, "state-behind": ErrStateBehind}

// kindOf returns the Kind of a reply failing with err.
func kindOf(err error) string {
	for k, e := range kinds {
		if errors.Is(err, e) {
			return k
		}
	}
	return ""
}

type wireOff struct {
	Partition
	Offset int64 `json:"offset"`
}

// wireFile is a File with its schema as an Arrow IPC message.
type wireFile struct {
	Key, Table, Source, Granularity string
	Partition                       int32
	First                           int64
	Schema                          []byte
	Bytes                           int64  `json:",omitempty"`
	Footer                          []byte `json:",omitempty"`
}

func toWire(m map[Partition]int64) []wireOff {
	out := make([]wireOff, 0, len(m))
	for p, o := range m {
		out = append(out, wireOff{p, o})
	}
	return out
}

func fromWire(ws []wireOff) map[Partition]int64 {
	out := make(map[Partition]int64, len(ws))
	for _, w := range ws {
		out[w.Partition] = w.Offset
	}
	return out
}

// process is a Catalog served by a child process. Calls may overlap: each
// request carries an ID its reply comes back with, and the server answers
// them as they finish.
type process struct {
	in   io.WriteCloser
	wait func() error // waits for the server's end once in is closed
	wmu  sync.Mutex   // one request written at a time

	mu    sync.Mutex
	next  uint64
	calls map[uint64]chan reply // the calls waiting for their reply
	err   error                 // the first failure of the pipe: every call fails after it
}

// failure returns the pipe's failure, nil while it works.
func (p *process) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func newProcess(in io.WriteCloser, out io.Reader, wait func() error) *process {
	p := &process{in: in, wait: wait, calls: map[uint64]chan reply{}}
	go p.read(bufio.NewReaderSize(out, 1<<16))
	return p
}

// read hands each reply to its call until the pipe ends, then fails the
// calls still waiting.
func (p *process) read(out *bufio.Reader) {
	for {
		b, err := out.ReadBytes('\n')
		var rep reply
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil {
			p.fail(err)
			return
		}
		p.mu.Lock()
		ch := p.calls[rep.ID]
		delete(p.calls, rep.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	}
}

// fail records the pipe's failure and fails every waiting call.
func (p *process) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = fmt.Errorf("the %s process: %w", Binary, err)
	}
	for id, ch := range p.calls {
		close(ch)
		delete(p.calls, id)
	}
}

// open opens cfg's catalog in the server at the other end of in and out.
func (p *process) open(ctx context.Context, cfg Config, level slog.Level, format string) error {
	_, err := p.call(ctx, request{Op: "open", Config: &cfg, LogLevel: level.String(), LogFormat: format})
	return err
}

// Start starts the cdclake-lakehouse binary found beside the running
// executable (or on PATH, or at $CDCLAKE_LAKEHOUSE) and opens cfg's
// catalog in it. The child logs to stderr at level, in format (text or
// json); it ends with Close, and with its parent. A child that ends on its
// own (killed, out of memory) is started again at the next call, logged
// to log at ERROR.
func Start(ctx context.Context, cfg Config, log *slog.Logger, level slog.Level, format string) (Catalog, error) {
	bin, err := findBinary()
	if err != nil {
		return nil, err
	}
	start := func(ctx context.Context) (*process, error) {
		cmd := exec.Command(bin)
		cmd.Env = childEnv(os.Environ())
		cmd.Stderr = os.Stderr
		dieWithParent(cmd)
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting %s: %w", bin, err)
		}
		p := newProcess(in, out, cmd.Wait)
		if err := p.open(ctx, cfg, level, format); err != nil {
			p.Close()
			return nil, err
		}
		return p, nil
	}
	return newRestarting(ctx, start, log)
}

// restarting is the Catalog of a process that is started again when it
// ends on its own. The calls under way then fail (a commit among them may
// be in or not: the caller reads the table again before it tries again,
// as after any failed commit), and the next call starts a new process.
type restarting struct {
	start func(context.Context) (*process, error)
	log   *slog.Logger

	mu       sync.Mutex
	cur      *process // nil while none runs
	restarts int
	closed   bool
}

// newRestarting returns the Catalog of the process start starts, started
// again whenever it ended before a call.
func newRestarting(ctx context.Context, start func(context.Context) (*process, error), log *slog.Logger) (Catalog, error) {
	p, err := start(ctx)
	if err != nil {
		return nil, err
	}
	return &restarting{start: start, log: log, cur: p}, nil
}

// process returns the running process, starting one if the last ended.
func (r *restarting) process(ctx context.Context) (*process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("the %s process is closed", Binary)
	}
	if r.cur != nil {
		failed := r.cur.failure()
		if failed == nil {
			return r.cur, nil
		}
		status := r.cur.Close()
		r.cur = nil
		r.restarts++
		r.log.Error("the lakehouse committer process ended; starting it again", "err", failed, "exit", fmt.Sprint(status),
			"restarts", r.restarts)
	}
	p, err := r.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting the %s process again: %w", Binary, err)
	}
	r.cur = p
	return p, nil
}

func (r *restarting) Offsets(ctx context.Context, dataset string) (map[Partition]int64, error) {
	p, err := r.process(ctx)
	if err != nil {
		return nil, err
	}
	return p.Offsets(ctx, dataset)
}

func (r *restarting) Landed(ctx context.Context, dataset string, parts map[Partition]bool) (map[string]bool, error) {
	p, err := r.process(ctx)
	if err != nil {
		return nil, err
	}
	return p.Landed(ctx, dataset, parts)
}

func (r *restarting) Commit(ctx context.Context, dataset string, files []File, recorded map[Partition]int64, skip map[string]bool) error {
	p, err := r.process(ctx)
	if err != nil {
		return err
	}
	return p.Commit(ctx, dataset, files, recorded, skip)
}

func (r *restarting) RecordOffsets(ctx context.Context, dataset string, recorded map[Partition]int64) error {
	p, err := r.process(ctx)
	if err != nil {
		return err
	}
	return p.RecordOffsets(ctx, dataset, recorded)
}

func (r *restarting) Compact(ctx context.Context, dataset string, opt Compaction) (Compacted, error) {
	p, err := r.process(ctx)
	if err != nil {
		return Compacted{}, err
	}
	return p.Compact(ctx, dataset, opt)
}

func (r *restarting) Expire(ctx context.Context, dataset string, exp Expiry) (Expired, error) {
	p, err := r.process(ctx)
	if err != nil {
		return Expired{}, err
	}
	return p.Expire(ctx, dataset, exp)
}

func (r *restarting) SetFiles(ctx context.Context, name string, set FileSet) error {
	p, err := r.process(ctx)
	if err != nil {
		return err
	}
	return p.SetFiles(ctx, name, set)
}

func (r *restarting) Datasets(ctx context.Context) ([]string, error) {
	p, err := r.process(ctx)
	if err != nil {
		return nil, err
	}
	return p.Datasets(ctx)
}

// Close ends the running process; the Catalog is not used after.
func (r *restarting) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.cur == nil {
		return nil
	}
	err := r.cur.Close()
	r.cur = nil
	return err
}

// childGOGC is the committer's garbage collection target unless GOGC is
// set: its live heap is small (table metadata, a few MiB) and its garbage
// is most of its work (JSON and Avro metadata, iceberg-go's start-up), so
// collecting at 400 % instead of 100 % saves about a quarter of its CPU
// (0.45 to 0.34 s landing the 100,000-event bench stream) for about 28 MiB
// more at its peak (66 to 94 MiB).
const childGOGC = "400"

// childEnv returns the committer's environment: env, with GOGC at
// childGOGC unless env sets it.
func childEnv(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOGC=") {
			return env
		}
	}
	return append(env, "GOGC="+childGOGC)
}

// findBinary returns the path of the cdclake-lakehouse binary.
func findBinary() (string, error) {
	if b := os.Getenv("CDCLAKE_LAKEHOUSE"); b != "" {
		return b, nil
	}
	if exe, err := os.Executable(); err == nil {
		b := filepath.Join(filepath.Dir(exe), Binary)
		if _, err := os.Stat(b); err == nil {
			return b, nil
		}
	}
	if b, err := exec.LookPath(Binary); err == nil {
		return b, nil
	}
	return "", fmt.Errorf("tables with table_format iceberg are committed by the %s binary, which is neither beside "+
		"cdclake nor on PATH (make build builds both; the image has both)", Binary)
}

// call sends r and waits for its reply. A call whose ctx ends stops
// waiting; the server may still carry it out.
func (p *process) call(ctx context.Context, r request) (reply, error) {
	ch := make(chan reply, 1)
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return reply{}, p.err
	}
	p.next++
	r.ID = p.next
	p.calls[r.ID] = ch
	p.mu.Unlock()
	line, err := json.Marshal(r)
	if err == nil {
		p.wmu.Lock()
		_, err = p.in.Write(append(line, '\n'))
		p.wmu.Unlock()
	}
	if err != nil {
		p.fail(err)
	}
	var rep reply
	select {
	case got, ok := <-ch:
		if !ok {
			p.mu.Lock()
			defer p.mu.Unlock()
			return reply{}, p.err
		}
		rep = got
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.calls, r.ID)
		p.mu.Unlock()
		return reply{}, fmt.Errorf("%s: %w", r.Op, ctx.Err())
	}
	switch {
	case kinds[rep.Kind] != nil:
		return rep, fmt.Errorf("%w: %s", kinds[rep.Kind], rep.Error)
	case rep.Error != "":
		return rep, errors.New(rep.Error)
	}
	return rep, nil
}

func (p *process) Offsets(ctx context.Context, dataset string) (map[Partition]int64, error) {
	rep, err := p.call(ctx, request{Op: "offsets", Dataset: dataset})
	return fromWire(rep.Offsets), err
}

func (p *process) Landed(ctx context.Context, dataset string, parts map[Partition]bool) (map[string]bool, error) {
	r := request{Op: "landed", Dataset: dataset}
	for part := range parts {
		r.Parts = append(r.Parts, part)
	}
	rep, err := p.call(ctx, r)
	out := make(map[string]bool, len(rep.Keys))
	for _, k := range rep.Keys {
		out[k] = true
	}
	return out, err
}

func (p *process) Commit(ctx context.Context, dataset string, files []File, recorded map[Partition]int64, skip map[string]bool) error {
	r := request{Op: "commit", Dataset: dataset, Offsets: toWire(recorded)}
	for _, f := range files {
		r.Files = append(r.Files, wireFile{Key: f.Key, Table: f.Table, Source: f.Source, Granularity: f.Granularity,
			Partition: f.Partition, First: f.First, Schema: flight.SerializeSchema(f.Schema, memory.DefaultAllocator),
			Bytes: f.Bytes, Footer: f.Footer})
	}
	for k := range skip {
		r.Skip = append(r.Skip, k)
	}
	_, err := p.call(ctx, r)
	return err
}

func (p *process) RecordOffsets(ctx context.Context, dataset string, recorded map[Partition]int64) error {
	_, err := p.call(ctx, request{Op: "record", Dataset: dataset, Offsets: toWire(recorded)})
	return err
}

func (p *process) Compact(ctx context.Context, dataset string, opt Compaction) (Compacted, error) {
	rep, err := p.call(ctx, request{Op: "compact", Dataset: dataset, Compact: &opt})
	if err != nil || rep.Done == nil {
		return Compacted{}, err
	}
	return *rep.Done, nil
}

func (p *process) Expire(ctx context.Context, dataset string, exp Expiry) (Expired, error) {
	rep, err := p.call(ctx, request{Op: "expire", Dataset: dataset, Expire: &exp})
	if err != nil || rep.Expired == nil {
		return Expired{}, err
	}
	return *rep.Expired, nil
}

func (p *process) Datasets(ctx context.Context) ([]string, error) {
	rep, err := p.call(ctx, request{Op: "datasets"})
	return rep.Keys, err
}

// wireSet is a FileSet on the wire.
type wireSet struct {
	Location   string            `json:"location"`
	Keys       []string          `json:"keys"`
	Schema     []byte            `json:"schema"`
	Properties map[string]string `json:"properties,omitempty"`
	Deletes    []deletion.Vector `json:"deletes,omitempty"`
	Version    int64             `json:"version,omitempty"`
	Base       int64             `json:"base,omitempty"`
}

func (p *process) SetFiles(ctx context.Context, name string, set FileSet) error {
	_, err := p.call(ctx, request{Op: "setfiles", Dataset: name, Set: &wireSet{Location: set.Location, Keys: set.Keys,
		Schema: flight.SerializeSchema(set.Schema, memory.DefaultAllocator), Properties: set.Properties, Deletes: set.Deletes,
		Version: set.Version, Base: set.Base}})
	return err
}

// Close ends the child: its input closes, it closes its catalog and exits.
func (p *process) Close() error {
	p.in.Close()
	return p.wait()
}

// Opener opens a Catalog for a config, logging to log.
type Opener func(ctx context.Context, cfg Config, log *slog.Logger) (Catalog, error)

// Serve answers the requests of r on w, one a line, with the Catalog that
// open opens for the first request's config, logging to logTo, until r
// ends; then it waits for the calls under way and closes the catalog.
// Requests after the first are served concurrently, each reply written
// whole as its call finishes.
func Serve(r io.Reader, w io.Writer, logTo io.Writer, open Opener) error {
	ctx := context.Background()
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 1<<16), 1<<30)
	var (
		cat     Catalog
		wmu     sync.Mutex
		werr    error
		running sync.WaitGroup
	)
	enc := json.NewEncoder(w)
	answer := func(req request, rep reply, err error) {
		if err != nil {
			rep = reply{Error: err.Error(), Kind: kindOf(err)}
		}
		rep.ID = req.ID
		wmu.Lock()
		defer wmu.Unlock()
		if werr == nil {
			werr = enc.Encode(rep)
		}
	}
	defer func() {
		running.Wait()
		if cat != nil {
			cat.Close()
		}
	}()
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			answer(req, reply{}, err)
			continue
		}
		switch {
		case req.Op == "open" && cat != nil:
			answer(req, reply{}, errors.New("open: the catalog is open"))
		case req.Op == "open":
			c, err := openCatalog(ctx, req, logTo, open)
			if err == nil {
				cat = c
			}
			answer(req, reply{}, err)
		case cat == nil:
			answer(req, reply{}, errors.New(req.Op+": the catalog is not open"))
		default:
			running.Add(1)
			go func(c Catalog) {
				defer running.Done()
				rep, err := serve(ctx, c, req)
				answer(req, rep, err)
			}(cat)
		}
	}
	running.Wait()
	wmu.Lock()
	defer wmu.Unlock()
	if werr != nil {
		return werr
	}
	return in.Err()
}

// openCatalog answers the open request: it opens the catalog its config
// names, logging to logTo at the level and in the format asked.
func openCatalog(ctx context.Context, req request, logTo io.Writer, open Opener) (Catalog, error) {
	if req.Config == nil {
		return nil, errors.New("open: no config")
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(req.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(logTo, opts)
	if req.LogFormat == "json" {
		h = slog.NewJSONHandler(logTo, opts)
	}
	return open(ctx, *req.Config, slog.New(h).With("process", Binary))
}

// serve answers one request of the open catalog c.
func serve(ctx context.Context, c Catalog, req request) (reply, error) {
	switch req.Op {
	case "offsets":
		offs, err := c.Offsets(ctx, req.Dataset)
		return reply{Offsets: toWire(offs)}, err
	case "landed":
		parts := map[Partition]bool{}
		for _, p := range req.Parts {
			parts[p] = true
		}
		keys, err := c.Landed(ctx, req.Dataset, parts)
		rep := reply{}
		for k := range keys {
			rep.Keys = append(rep.Keys, k)
		}
		return rep, err
	case "commit":
		files := make([]File, len(req.Files))
		schemas := map[string]*arrow.Schema{} // files of one table version share theirs
		for i, f := range req.Files {
			sch, ok := schemas[string(f.Schema)]
			if !ok {
				var err error
				if sch, err = flight.DeserializeSchema(f.Schema, memory.DefaultAllocator); err != nil {
					return reply{}, fmt.Errorf("the schema of %s: %w", f.Key, err)
				}
				schemas[string(f.Schema)] = sch
			}
			files[i] = File{Key: f.Key, Table: f.Table, Schema: sch, Source: f.Source, Partition: f.Partition,
				First: f.First, Granularity: f.Granularity, Bytes: f.Bytes, Footer: f.Footer}
		}
		skip := map[string]bool{}
		for _, k := range req.Skip {
			skip[k] = true
		}
		return reply{}, c.Commit(ctx, req.Dataset, files, fromWire(req.Offsets), skip)
	case "record":
		return reply{}, c.RecordOffsets(ctx, req.Dataset, fromWire(req.Offsets))
	case "compact":
		if req.Compact == nil {
			return reply{}, errors.New("compact: no options")
		}
		done, err := c.Compact(ctx, req.Dataset, *req.Compact)
		return reply{Done: &done}, err
	case "expire":
		if req.Expire == nil {
			return reply{}, errors.New("expire: no options")
		}
		done, err := c.Expire(ctx, req.Dataset, *req.Expire)
		return reply{Expired: &done}, err
	case "datasets":
		names, err := c.Datasets(ctx)
		return reply{Keys: names}, err
	case "setfiles":
		if req.Set == nil {
			return reply{}, errors.New("setfiles: no file set")
		}
		sch, err := flight.DeserializeSchema(req.Set.Schema, memory.DefaultAllocator)
		if err != nil {
			return reply{}, fmt.Errorf("setfiles: the schema: %w", err)
		}
		return reply{}, c.SetFiles(ctx, req.Dataset, FileSet{Location: req.Set.Location, Keys: req.Set.Keys, Schema: sch,
			Properties: req.Set.Properties, Deletes: req.Set.Deletes, Version: req.Set.Version, Base: req.Set.Base})
	}
	return reply{}, fmt.Errorf("unknown request %q", req.Op)
}
