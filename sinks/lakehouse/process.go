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
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Binary is the name of the binary that serves a Catalog (Serve).
const Binary = "cdclake-lakehouse"

// request is one call of a Catalog method.
type request struct {
	Op        string      `json:"op"` // offsets, landed, commit, record
	Dataset   string      `json:"dataset,omitempty"`
	Files     []wireFile  `json:"files,omitempty"`
	Offsets   []wireOff   `json:"offsets,omitempty"`
	Parts     []Partition `json:"parts,omitempty"`
	Skip      []string    `json:"skip,omitempty"`
	Config    *Config     `json:"config,omitempty"` // open
	LogLevel  string      `json:"log_level,omitempty"`
	LogFormat string      `json:"log_format,omitempty"`
}

// reply is a call's answer: its error (Schema when it is ErrSchema's), or
// its results.
type reply struct {
	Error   string    `json:"error,omitempty"`
	Schema  bool      `json:"schema,omitempty"`
	Offsets []wireOff `json:"offsets,omitempty"`
	Keys    []string  `json:"keys,omitempty"`
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

// process is a Catalog served by a child process.
type process struct {
	in   io.WriteCloser
	out  *bufio.Reader
	wait func() error // waits for the server's end once in is closed
	mu   sync.Mutex
	err  error // the first failure of the pipe: every call fails after it
}

// open opens cfg's catalog in the server at the other end of in and out.
func (p *process) open(ctx context.Context, cfg Config, level slog.Level, format string) error {
	_, err := p.call(ctx, request{Op: "open", Config: &cfg, LogLevel: level.String(), LogFormat: format})
	return err
}

// Start starts the cdclake-lakehouse binary found beside the running
// executable (or on PATH, or at $CDCLAKE_LAKEHOUSE) and opens cfg's
// catalog in it. The child logs to stderr at level, in format (text or
// json); it ends with Close, and with its parent.
func Start(ctx context.Context, cfg Config, level slog.Level, format string) (Catalog, error) {
	bin, err := findBinary()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
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
	p := &process{in: in, out: bufio.NewReaderSize(out, 1<<16), wait: cmd.Wait}
	if err := p.open(ctx, cfg, level, format); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
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

// call sends r and reads its reply.
func (p *process) call(ctx context.Context, r request) (reply, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return reply{}, p.err
	}
	line, err := json.Marshal(r)
	if err == nil {
		_, err = p.in.Write(append(line, '\n'))
	}
	var rep reply
	if err == nil {
		var b []byte
		if b, err = p.out.ReadBytes('\n'); err == nil {
			err = json.Unmarshal(b, &rep)
		}
	}
	if err != nil {
		p.err = fmt.Errorf("the %s process: %w", Binary, err)
		return reply{}, p.err
	}
	switch {
	case rep.Schema:
		return rep, fmt.Errorf("%w: %s", ErrSchema, rep.Error)
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
			Partition: f.Partition, First: f.First, Schema: flight.SerializeSchema(f.Schema, memory.DefaultAllocator)})
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

// Close ends the child: its input closes, it closes its catalog and exits.
func (p *process) Close() error {
	p.in.Close()
	return p.wait()
}

// Opener opens a Catalog for a config, logging to log.
type Opener func(ctx context.Context, cfg Config, log *slog.Logger) (Catalog, error)

// Serve answers the requests of r on w, one a line, with the Catalog that
// open opens for the first request's config, logging to logTo, until r
// ends; then it closes the catalog.
func Serve(r io.Reader, w io.Writer, logTo io.Writer, open Opener) error {
	ctx := context.Background()
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 1<<16), 1<<30)
	enc := json.NewEncoder(w)
	var cat Catalog
	defer func() {
		if cat != nil {
			cat.Close()
		}
	}()
	for in.Scan() {
		var req request
		var rep reply
		err := json.Unmarshal(in.Bytes(), &req)
		if err == nil {
			rep, err = serve(ctx, &cat, req, logTo, open)
		}
		if err != nil {
			rep = reply{Error: err.Error(), Schema: errors.Is(err, ErrSchema)}
		}
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	return in.Err()
}

// serve answers one request.
func serve(ctx context.Context, cat *Catalog, req request, logTo io.Writer, open Opener) (reply, error) {
	if req.Op == "open" {
		if req.Config == nil {
			return reply{}, errors.New("open: no config")
		}
		var level slog.Level
		_ = level.UnmarshalText([]byte(req.LogLevel))
		opts := &slog.HandlerOptions{Level: level}
		var h slog.Handler = slog.NewTextHandler(logTo, opts)
		if req.LogFormat == "json" {
			h = slog.NewJSONHandler(logTo, opts)
		}
		c, err := open(ctx, *req.Config, slog.New(h).With("process", Binary))
		*cat = c
		return reply{}, err
	}
	if *cat == nil {
		return reply{}, errors.New(req.Op + ": the catalog is not open")
	}
	c := *cat
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
				First: f.First, Granularity: f.Granularity}
		}
		skip := map[string]bool{}
		for _, k := range req.Skip {
			skip[k] = true
		}
		return reply{}, c.Commit(ctx, req.Dataset, files, fromWire(req.Offsets), skip)
	case "record":
		return reply{}, c.RecordOffsets(ctx, req.Dataset, fromWire(req.Offsets))
	}
	return reply{}, fmt.Errorf("unknown request %q", req.Op)
}
