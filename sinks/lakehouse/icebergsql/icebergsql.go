// Package icebergsql is lakehouse.Catalog for Iceberg tables in a SQL
// catalog (SQLite, PostgreSQL) or a REST catalog, through iceberg-go: see
// package lakehouse for what it does.
// Only the cdclake-lakehouse binary links it (and tests): iceberg-go costs
// every process that links it about 90 ms and 32 MB at start.
package icebergsql

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// warehouses
	"github.com/apache/iceberg-go/table"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"
	_ "modernc.org/sqlite"             // the database/sql driver "sqlite"
)

// Iceberg commits files to the Iceberg tables of a SQL or REST catalog.
// It is safe for concurrent use; commits of one table are serialized.
type Iceberg struct {
	cfg lakehouse.Config
	db  *sql.DB // a SQL catalog's; nil for a REST catalog
	cat catalog.Catalog
	log *slog.Logger

	mu     sync.Mutex
	tables map[string]*tableLock
}

type tableLock struct {
	sync.Mutex
	tbl *table.Table
}

// Open opens (and creates, if need be) the catalog cfg names.
func Open(ctx context.Context, cfg lakehouse.Config, log *slog.Logger) (*Iceberg, error) {
	if cfg.Name == "" {
		cfg.Name = "cdclake"
	}
	if u, err := url.Parse(cfg.Catalog); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		return openREST(ctx, cfg, log)
	}
	driver, dsn, dialect, err := database(cfg.Catalog)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("iceberg catalog: %w", err)
	}
	if driver == "sqlite" {
		// One connection: SQLite serializes writers, and a second
		// connection would see "database is locked" instead of waiting.
		db.SetMaxOpenConns(1)
	}
	props := iceberg.Properties{"warehouse": cfg.Warehouse}
	maps.Copy(props, cfg.Properties)
	cat, err := sqlcat.NewCatalog(cfg.Name, db, dialect, props)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("iceberg catalog: %w", err)
	}
	if err := cat.CreateSQLTables(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("iceberg catalog: creating its tables: %w", err)
	}
	return &Iceberg{cfg: cfg, db: db, cat: cat, log: log.With("component", "iceberg"), tables: map[string]*tableLock{}}, nil
}

// openREST opens the REST catalog at cfg.Catalog (its URI, the prefix
// and warehouse its /v1/config gives included), passing cfg.Properties to
// it and to the file IO (credential and token authenticate; s3.* reach
// the store).
func openREST(ctx context.Context, cfg lakehouse.Config, log *slog.Logger) (*Iceberg, error) {
	props := iceberg.Properties{}
	maps.Copy(props, cfg.Properties)
	opts := []rest.Option{rest.WithAdditionalProps(props)}
	if cred := props["credential"]; cred != "" {
		opts = append(opts, rest.WithCredential(cred))
	}
	if token := props["token"]; token != "" {
		opts = append(opts, rest.WithOAuthToken(token))
	}
	if wh := props["warehouse"]; wh != "" {
		opts = append(opts, rest.WithWarehouseLocation(wh))
	}
	cat, err := rest.NewCatalog(ctx, cfg.Name, cfg.Catalog, opts...)
	if err != nil {
		return nil, fmt.Errorf("iceberg REST catalog %s: %w", cfg.Catalog, err)
	}
	return &Iceberg{cfg: cfg, cat: cat, log: log.With("component", "iceberg"), tables: map[string]*tableLock{}}, nil
}

// database returns the database/sql driver, its data source name and the
// catalog's dialect for a catalog URL.
func database(catalogURL string) (driver, dsn string, dialect sqlcat.SupportedDialect, err error) {
	u, err := url.Parse(catalogURL)
	if err != nil {
		return "", "", "", fmt.Errorf("iceberg catalog %q: %w", catalogURL, err)
	}
	switch u.Scheme {
	case "sqlite":
		p := u.Host + u.Path
		if p == "" {
			return "", "", "", fmt.Errorf("iceberg catalog %q: no database file", catalogURL)
		}
		// Writers wait for each other rather than fail at once.
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		return "sqlite", "file:" + p + "?" + q.Encode(), sqlcat.SQLite, nil
	case "postgres", "postgresql":
		return "pgx", catalogURL, sqlcat.Postgres, nil
	}
	return "", "", "", fmt.Errorf("iceberg catalog %q: the scheme must be sqlite or postgres", catalogURL)
}

// Close closes a SQL catalog's database.
func (c *Iceberg) Close() error {
	if c.db == nil {
		return nil
	}
	return c.db.Close()
}

// Identifier returns the Iceberg identifier of a dataset: its dots make
// namespaces under lakehouse.Config.Namespace.
func (c *Iceberg) Identifier(dataset string) table.Identifier {
	return append(slices.Clone(c.cfg.Namespace), strings.Split(dataset, ".")...)
}

// lock returns the lock of a dataset's table, held.
func (c *Iceberg) lock(dataset string) *tableLock {
	c.mu.Lock()
	l := c.tables[dataset]
	if l == nil {
		l = &tableLock{}
		c.tables[dataset] = l
	}
	c.mu.Unlock()
	l.Lock()
	return l
}

// load loads a dataset's table, nil when it does not exist yet.
func (c *Iceberg) load(ctx context.Context, dataset string) (*table.Table, error) {
	return c.loadAt(ctx, dataset, dataset)
}

// loadAt loads the table name, whose folder is dir (Warehouse-relative;
// "": any folder of the warehouse), nil when it does not exist yet.
func (c *Iceberg) loadAt(ctx context.Context, dataset, dir string) (*table.Table, error) {
	tbl, err := c.cat.LoadTable(ctx, c.Identifier(dataset))
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loading the iceberg table of %s: %w", dataset, err)
	}
	at := strings.TrimSuffix(tbl.Location(), "/")
	if _, ours := c.key(at); dir == "" && !ours {
		return nil, fmt.Errorf("%w: %s is at %s, outside this lake (%s): give each lake a catalog or a sink.iceberg.namespace of its own",
			lakehouse.ErrOtherLake, strings.Join(tbl.Identifier(), "."), at, c.cfg.Warehouse)
	}
	if want := c.location(dir); dir != "" && at != want {
		return nil, fmt.Errorf("%w: %s is at %s, not at %s where this lake's files of it are: give each lake a catalog "+
			"or a sink.iceberg.namespace of its own", lakehouse.ErrOtherLake, strings.Join(tbl.Identifier(), "."), at, want)
	}
	return noReplay(ctx, tbl)
}

// noReplay returns tbl with iceberg-go's own commit retries off
// (commit.retry.num-retries 0), setting the property on a table made
// before cdclake did so. On a conflict (a REST catalog's 409, a SQL
// catalog's lost race) iceberg-go would refresh the table and replay the
// commit's updates, the offsets among them, computed from the table as it
// was: another instance's newer offsets would go back. cdclake plans a
// conflicting commit again from the table as it is (againOnConflict).
func noReplay(ctx context.Context, tbl *table.Table) (*table.Table, error) {
	if tbl.Properties()[table.CommitNumRetriesKey] == "0" {
		return tbl, nil
	}
	tx := tbl.NewTransaction()
	if err := tx.SetProperties(iceberg.Properties{table.CommitNumRetriesKey: "0"}); err != nil {
		return nil, err
	}
	next, err := tx.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("turning off iceberg-go's commit retries on %s: %w", strings.Join(tbl.Identifier(), "."), err)
	}
	return next, nil
}

// Offsets returns the source partitions' offsets a dataset's table records
// (none before its first commit).
func (c *Iceberg) Offsets(ctx context.Context, dataset string) (map[lakehouse.Partition]int64, error) {
	l := c.lock(dataset)
	defer l.Unlock()
	tbl, err := c.table(ctx, l, dataset)
	if err != nil || tbl == nil {
		return map[lakehouse.Partition]int64{}, err
	}
	return offsets(tbl), nil
}

// table returns the dataset's table, loaded once; l is held.
func (c *Iceberg) table(ctx context.Context, l *tableLock, dataset string) (*table.Table, error) {
	if l.tbl != nil {
		return l.tbl, nil
	}
	tbl, err := c.load(ctx, dataset)
	l.tbl = tbl
	return tbl, err
}

// offsets reads the offsets a table records: in its properties, updated
// with every commit and when they advance without one (RecordOffsets), and
// in its current snapshot's summary, as of that snapshot.
func offsets(tbl *table.Table) map[lakehouse.Partition]int64 {
	sources := []map[string]string{tbl.Properties()}
	if s := tbl.CurrentSnapshot(); s != nil && s.Summary != nil {
		sources = append(sources, s.Summary.Properties)
	}
	return lakehouse.RecordedOffsets(sources...)
}

// merged returns the offsets of tbl advanced to recorded, as properties,
// and whether any advanced.
func merged(tbl *table.Table, recorded map[lakehouse.Partition]int64) (iceberg.Properties, bool) {
	props, advanced := lakehouse.Advanced(offsets(tbl), recorded)
	return iceberg.Properties(props), advanced
}

// RecordOffsets advances the offsets a dataset's table records where
// recorded is past them, without a snapshot (in its properties): the
// table holds every file of those partitions below them, and no commit
// came since to say so.
func (c *Iceberg) RecordOffsets(ctx context.Context, dataset string, recorded map[lakehouse.Partition]int64) error {
	l := c.lock(dataset)
	defer l.Unlock()
	tbl, err := c.table(ctx, l, dataset)
	if err != nil || tbl == nil {
		return err
	}
	props, advanced := merged(tbl, recorded)
	if !advanced {
		return nil
	}
	tx := tbl.NewTransaction()
	if err := tx.SetProperties(props); err != nil {
		return err
	}
	next, err := tx.Commit(ctx)
	if err != nil {
		l.tbl = nil
		return fmt.Errorf("recording the offsets of %s: %w", tbl.Identifier(), err)
	}
	l.tbl = next
	return nil
}

// Landed returns the keys of the dataset table's data files that belong to
// one of the given source partitions and start at or past the offset the
// table records for it: files a commit may have added after its offset
// was recorded. Keys are Warehouse-relative.
func (c *Iceberg) Landed(ctx context.Context, dataset string, parts map[lakehouse.Partition]bool) (map[string]bool, error) {
	l := c.lock(dataset)
	defer l.Unlock()
	tbl, err := c.table(ctx, l, dataset)
	if err != nil || tbl == nil {
		return map[string]bool{}, err
	}
	return c.landed(ctx, tbl, parts)
}

func (c *Iceberg) landed(ctx context.Context, tbl *table.Table, parts map[lakehouse.Partition]bool) (map[string]bool, error) {
	out := map[string]bool{}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return out, nil
	}
	recorded := offsets(tbl)
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("reading the manifests of %s: %w", tbl.Identifier(), err)
	}
	for _, m := range manifests {
		entries, err := m.FetchEntries(fs, true)
		if err != nil {
			return nil, fmt.Errorf("reading the manifest %s: %w", m.FilePath(), err)
		}
		for _, e := range entries {
			if key, ok := c.key(e.DataFile().FilePath()); ok && lakehouse.PastRecorded(key, parts, recorded) {
				out[key] = true
			}
		}
	}
	return out, nil
}

// key returns the Warehouse-relative key of a data file's location.
func (c *Iceberg) key(location string) (string, bool) {
	rest, ok := strings.CutPrefix(location, strings.TrimSuffix(c.cfg.Warehouse, "/")+"/")
	return rest, ok
}

// location returns the Iceberg location of a Warehouse-relative key.
func (c *Iceberg) location(key string) string {
	return strings.TrimSuffix(c.cfg.Warehouse, "/") + "/" + key
}

// Commit adds files, all of dataset, to its table in one snapshot that
// records recorded, the offsets of the partitions the files come from
// (other partitions' offsets are carried forward). The table is made, or
// its schema evolved, first. Files already in the table are skipped (see
// the package doc: skip lists those a lookup found).
func (c *Iceberg) Commit(ctx context.Context, dataset string, files []lakehouse.File, recorded map[lakehouse.Partition]int64, skip map[string]bool) error {
	l := c.lock(dataset)
	defer l.Unlock()
	// A commit another one overtook (compaction, another instance's) did
	// not go in: it is tried again on the table as it is now, checking
	// then that no file of it is in the table already.
	again := false
	return againOnConflict(ctx, func() error {
		err := c.commit(ctx, l, dataset, files, recorded, skip, again)
		again = true
		return err
	})
}

// commit is one try of Commit; l is held. With checkDuplicates, AddFiles
// fails for a file the table holds.
func (c *Iceberg) commit(ctx context.Context, l *tableLock, dataset string, files []lakehouse.File, recorded map[lakehouse.Partition]int64,
	skip map[string]bool, checkDuplicates bool) error {
	tbl, err := c.table(ctx, l, dataset)
	if err != nil {
		return err
	}
	if tbl == nil {
		if tbl, err = c.create(ctx, dataset, files[0].Schema, files[0].Granularity); err != nil {
			return err
		}
		l.tbl = tbl
	}
	var uris []string
	var adding []lakehouse.File
	for _, f := range files {
		if !skip[f.Key] {
			uris = append(uris, c.location(f.Key))
			adding = append(adding, f)
		}
	}
	// The schema evolves in the same snapshot, first: a file with columns
	// the table lacks does not map.
	tx := tbl.NewTransaction()
	staged, more, err := evolveIn(tx, tbl, files)
	if err == nil && more {
		// Two changes or more: each a snapshot of its own, then the files.
		if tbl, err = c.evolve(ctx, tbl, files); err == nil {
			l.tbl, tx, staged = tbl, tbl.NewTransaction(), nil
		}
	}
	if err != nil {
		l.tbl = nil // reloaded next time
		return err
	}
	props, advanced := merged(tbl, recorded)
	if len(uris) == 0 && !advanced && staged == nil {
		return nil
	}
	if err := tx.SetProperties(props); err != nil {
		return err
	}
	if len(uris) > 0 {
		// From the footers the writes kept, a commit reads nothing back;
		// without them, iceberg-go reads each file's.
		at := tbl
		if staged != nil {
			at = staged.Table
		}
		dfs, kept := c.keptDataFiles(at, adding)
		if kept {
			var opts []table.WriteOption
			if !checkDuplicates {
				opts = append(opts, table.WithoutDuplicateCheck())
			}
			err = tx.AddDataFiles(ctx, dfs, props, opts...)
		} else {
			err = tx.AddFiles(ctx, uris, props, !checkDuplicates)
		}
		if err != nil {
			l.tbl = nil
			return fmt.Errorf("adding %d files to %s: %w", len(uris), tbl.Identifier(), err)
		}
	}
	next, err := tx.Commit(ctx)
	if err != nil {
		l.tbl = nil
		return fmt.Errorf("committing %d files to %s: %w", len(uris), tbl.Identifier(), err)
	}
	if staged != nil {
		c.log.Info("iceberg table schema evolved", "table", strings.Join(next.Identifier(), "."),
			"columns", len(next.Schema().Fields()))
	}
	l.tbl = next
	return nil
}

// create makes a dataset's table from the Arrow schema of its first file,
// its namespaces first, partitioned by the granularity of _cdc_ts its files
// share.
func (c *Iceberg) create(ctx context.Context, dataset string, sch *arrow.Schema, granularity string) (*table.Table, error) {
	return c.createAt(ctx, dataset, dataset, sch, granularity)
}

// createAt is create for a table whose folder is dir (Warehouse-relative).
func (c *Iceberg) createAt(ctx context.Context, dataset, dir string, sch *arrow.Schema, granularity string) (*table.Table, error) {
	id := c.Identifier(dataset)
	for i := 1; i < len(id); i++ {
		ns := id[:i]
		if ok, err := c.cat.CheckNamespaceExists(ctx, ns); err != nil {
			return nil, err
		} else if !ok {
			if err := c.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
				return nil, fmt.Errorf("creating the iceberg namespace %v: %w", ns, err)
			}
		}
	}
	isch, err := icebergSchema(sch)
	if err != nil {
		return nil, fmt.Errorf("the iceberg schema of %s: %w: %w", dataset, lakehouse.ErrSchema, err)
	}
	opts := []catalog.CreateTableOpt{
		catalog.WithLocation(c.location(dir)),
		catalog.WithProperties(iceberg.Properties{
			table.DefaultNameMappingKey: nameMapping(isch),
			table.CommitNumRetriesKey:   "0", // see noReplay
			"format-version":            "3",
		}),
	}
	transforms := map[string]iceberg.Transform{"hour": iceberg.HourTransform{}, "day": iceberg.DayTransform{},
		"month": iceberg.MonthTransform{}, "year": iceberg.YearTransform{}}
	if f, ok := isch.FindFieldByName("_cdc_ts"); ok && transforms[granularity] != nil {
		spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{f.ID}, FieldID: 1000,
			Name: "_cdc_ts_" + granularity, Transform: transforms[granularity]})
		opts = append(opts, catalog.WithPartitionSpec(&spec))
	}
	tbl, err := c.cat.CreateTable(ctx, id, isch, opts...)
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		return c.loadAt(ctx, dataset, dir) // made by another instance meanwhile
	}
	if err != nil && strings.Contains(err.Error(), "invalid schema") {
		return nil, fmt.Errorf("creating the iceberg table of %s: %w: %w", dataset, lakehouse.ErrSchema, err)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the iceberg table of %s: %w", dataset, err)
	}
	c.log.Info("iceberg table created", "table", strings.Join(id, "."), "location", tbl.Location())
	// A REST catalog assigns the schema's field ids afresh, in its own
	// order: the name mapping must be the created schema's.
	if m := nameMapping(tbl.Schema()); tbl.Properties()[table.DefaultNameMappingKey] != m {
		tx := tbl.NewTransaction()
		if err := tx.SetProperties(iceberg.Properties{table.DefaultNameMappingKey: m}); err != nil {
			return nil, err
		}
		if tbl, err = tx.Commit(ctx); err != nil {
			return nil, fmt.Errorf("setting the name mapping of %s: %w", strings.Join(id, "."), err)
		}
	}
	return tbl, nil
}

// icebergSchema returns the Iceberg schema of a file's Arrow schema, with
// fresh field ids. The files of a committed table carry no extension type
// (JSON is a plain string: schema.PlainJSON).
func icebergSchema(sch *arrow.Schema) (*iceberg.Schema, error) {
	return table.ArrowSchemaToIcebergWithFreshIDs(sch, false)
}

// nameMapping returns the name mapping of an Iceberg schema, as JSON.
func nameMapping(sch *iceberg.Schema) string {
	b, _ := json.Marshal(sch.NameMapping())
	return string(b)
}

// evolve adds to the table's schema the columns of files it lacks and
// refreshes its name mapping, one commit per schema that brings columns
// (iceberg-go v0.7.0 fails a transaction with two schema updates, or one
// and added files: "current schema id has changed"); it returns the table
// as it is after.
func (c *Iceberg) evolve(ctx context.Context, tbl *table.Table, files []lakehouse.File) (*table.Table, error) {
	for {
		tx := tbl.NewTransaction()
		staged, more, err := evolveIn(tx, tbl, files)
		if err != nil || staged == nil {
			return tbl, err
		}
		if tbl, err = tx.Commit(ctx); err != nil {
			return nil, fmt.Errorf("evolving the schema of %s: %w", strings.Join(staged.Identifier(), "."), err)
		}
		c.log.Info("iceberg table schema evolved", "table", strings.Join(tbl.Identifier(), "."),
			"columns", len(tbl.Schema().Fields()))
		if !more {
			return tbl, nil
		}
	}
}

// evolveIn stages in tx, a new transaction of tbl, the first schema change
// that files need, with the evolved schema's name mapping. It returns the
// table as tx stages it (nil when files need no change) and whether files
// need another change. That one needs a transaction of its own: each
// schema update requires the table's current schema to be the one it
// started from, and a second update in one transaction would require the
// first's, which the catalog's table does not have yet.
func evolveIn(tx *table.Transaction, tbl *table.Table, files []lakehouse.File) (staged *table.StagedTable, more bool, err error) {
	seen := map[*arrow.Schema]bool{}
	for _, f := range files {
		if seen[f.Schema] {
			continue
		}
		seen[f.Schema] = true
		cur := tbl.Schema()
		if staged != nil {
			cur = staged.Schema()
		}
		isch, err := icebergSchema(f.Schema)
		if err != nil {
			return nil, false, fmt.Errorf("the iceberg schema of %s: %w: %w", f.Key, lakehouse.ErrSchema, err)
		}
		var promote []promotion
		isch = iceberg.NewSchema(0, reconcile(cur.Fields(), isch.Fields(), nil, &promote)...)
		if len(promote) == 0 && covers(cur, isch) {
			continue
		}
		if staged != nil {
			more = true
			break
		}
		up := tx.UpdateSchema(true, false)
		for _, p := range promote {
			up = up.UpdateColumn(p.path, table.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Valid: true, Val: p.to}})
		}
		if err := up.UnionByNameWith(isch).Commit(); err != nil {
			return nil, false, fmt.Errorf("evolving the schema of %s for %s: %w: %w", tbl.Identifier(), f.Key, lakehouse.ErrSchema, err)
		}
		if staged, err = tx.StagedTable(); err != nil {
			return nil, false, err
		}
	}
	if staged == nil {
		return nil, false, nil
	}
	if err := tx.SetProperties(iceberg.Properties{table.DefaultNameMappingKey: nameMapping(staged.Schema())}); err != nil {
		return nil, false, err
	}
	staged, err = tx.StagedTable()
	return staged, more, err
}

// promotion is a column of NULLs only (Iceberg's unknown type) that a
// file brings values of.
type promotion struct {
	path []string
	to   iceberg.Type
}

// reconcile returns the fields of a file's schema (file) as its table's
// (have) takes them, at path: a column of NULLs only in the file (Iceberg's
// unknown type) where the table has the column is left out (it reads as
// NULLs of the table's type); a column of NULLs only in the table that the
// file brings values of, of a primitive type, is added to promote and stays
// unknown here. iceberg-go's union refuses both changes; a column update
// makes the second. Struct fields are reconciled at every depth, within
// lists and maps too.
func reconcile(have, file []iceberg.NestedField, path []string, promote *[]promotion) []iceberg.NestedField {
	out := make([]iceberg.NestedField, 0, len(file))
	for _, ff := range file {
		at := append(slices.Clone(path), ff.Name)
		i := slices.IndexFunc(have, func(h iceberg.NestedField) bool { return h.Name == ff.Name })
		if i < 0 {
			out = append(out, ff)
			continue
		}
		_, fileUnknown := ff.Type.(iceberg.UnknownType)
		_, haveUnknown := have[i].Type.(iceberg.UnknownType)
		_, primitive := ff.Type.(iceberg.PrimitiveType)
		switch {
		case fileUnknown && !haveUnknown:
			continue
		case haveUnknown && !fileUnknown && primitive:
			*promote = append(*promote, promotion{path: at, to: ff.Type})
			ff.Type = iceberg.UnknownType{}
		default:
			ff.Type = reconcileType(have[i].Type, ff.Type, at, promote)
		}
		out = append(out, ff)
	}
	return out
}

// reconcileType reconciles the struct fields within a file's type (see
// reconcile); other types are file's.
func reconcileType(have, file iceberg.Type, path []string, promote *[]promotion) iceberg.Type {
	at := func(name string) []string { return append(slices.Clone(path), name) }
	switch f := file.(type) {
	case *iceberg.StructType:
		if h, ok := have.(*iceberg.StructType); ok {
			return &iceberg.StructType{FieldList: reconcile(h.FieldList, f.FieldList, path, promote)}
		}
	case *iceberg.ListType:
		if h, ok := have.(*iceberg.ListType); ok {
			out := *f
			out.Element = reconcileType(h.Element, f.Element, at("element"), promote)
			return &out
		}
	case *iceberg.MapType:
		if h, ok := have.(*iceberg.MapType); ok {
			out := *f
			out.ValueType = reconcileType(h.ValueType, f.ValueType, at("value"), promote)
			return &out
		}
	}
	return file
}

// covers reports whether every field of sch, nested ones included, is in
// have by name with the same type.
func covers(have, sch *iceberg.Schema) bool {
	for _, f := range sch.Fields() {
		h, ok := have.FindFieldByName(f.Name)
		if !ok || !h.Type.Equals(f.Type) && !sameShape(h.Type, f.Type) {
			return false
		}
	}
	return true
}

// sameShape compares nested types by names and types, not field ids.
func sameShape(a, b iceberg.Type) bool {
	switch x := a.(type) {
	case *iceberg.StructType:
		y, ok := b.(*iceberg.StructType)
		if !ok {
			return false
		}
		for _, fb := range y.FieldList {
			found := false
			for _, fa := range x.FieldList {
				if fa.Name == fb.Name {
					found = sameShape(fa.Type, fb.Type)
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	case *iceberg.ListType:
		y, ok := b.(*iceberg.ListType)
		return ok && sameShape(x.Element, y.Element)
	case *iceberg.MapType:
		y, ok := b.(*iceberg.MapType)
		return ok && sameShape(x.KeyType, y.KeyType) && sameShape(x.ValueType, y.ValueType)
	}
	return a.Equals(b)
}

// keptDataFiles describes files as data files of tbl from the footers
// their writes kept (lakehouse.File.Footer), so that a commit reads
// nothing back: each with its first row id after the table's last
// (format v3's row lineage, which AddDataFiles wants given) and its
// partition from its bounds, as iceberg-go's AddFiles infers it. False
// when a file has no kept footer or it does not describe the file: the
// commit then reads the files (AddFiles).
func (c *Iceberg) keptDataFiles(tbl *table.Table, files []lakehouse.File) ([]iceberg.DataFile, bool) {
	meta := tbl.Metadata()
	next := meta.NextRowID()
	out := make([]iceberg.DataFile, 0, len(files))
	for _, f := range files {
		if len(f.Footer) == 0 || f.Bytes <= 0 {
			return nil, false
		}
		md, err := metadata.NewFileMetaData(f.Footer, nil)
		if err != nil {
			c.log.Warn("a kept footer does not parse: the commit reads the files' own", "file", f.Key, "err", err)
			return nil, false
		}
		var first *int64
		if meta.Version() >= 3 {
			first = &next
		}
		df, err := dataFileOf(tbl, c.location(f.Key), f.Bytes, md, first)
		if err != nil {
			c.log.Warn("a kept footer does not describe its file: the commit reads the files' own", "file", f.Key, "err", err)
			return nil, false
		}
		next += df.Count()
		out = append(out, df)
	}
	return out, true
}

// dataFileOf describes the Parquet file at path, of size bytes and footer
// md, as a data file of tbl: its statistics, its partition from its
// bounds (as iceberg-go's AddFiles infers it), and first as its first row
// id (nil: none given).
func dataFileOf(tbl *table.Table, path string, size int64, md *metadata.FileMetaData, first *int64) (iceberg.DataFile, error) {
	sch, spec := tbl.Schema(), tbl.Spec()
	args := table.DataFileArgs{Schema: sch, Spec: spec, Format: iceberg.ParquetFile, Metadata: md, FilePath: path,
		FileSize: size, Content: iceberg.EntryContentData, Properties: tbl.Properties(), FormatVersion: tbl.Metadata().Version()}
	if first != nil {
		id := *first
		args.FirstRowID = &id
	}
	if spec.Equals(*iceberg.UnpartitionedSpec) {
		return table.DataFileFromMetadata(args)
	}
	// The partition's columns' bounds come from the footer's statistics
	// where they are integers (dates, timestamps): the file's statistics
	// are then computed once. Otherwise from a first pass.
	if bounds, ok := footerBounds(spec, sch, md); ok {
		var err error
		if args.PartitionValues, err = partitionValues(spec, sch, bounds); err != nil {
			return nil, err
		}
		return table.DataFileFromMetadata(args)
	}
	df, err := table.DataFileFromMetadata(args)
	if err != nil {
		return nil, err
	}
	if args.PartitionValues, err = partitionValues(spec, sch, func(id int) ([]byte, []byte) {
		return df.LowerBoundValues()[id], df.UpperBoundValues()[id]
	}); err != nil {
		return nil, err
	}
	return table.DataFileFromMetadata(args)
}

// footerBounds returns the lower and upper bounds, in Iceberg's binary
// form, of the source columns of spec's fields, from md's row group
// statistics. It answers only for top-level date and timestamp columns
// whose Parquet unit is their Iceberg type's (a 32- or 64-bit integer of
// the same meaning in both): ok is false for any other, and then the
// bounds are iceberg-go's to compute. A column without statistics in some
// row group has no bounds (nil), as iceberg-go gives it.
func footerBounds(spec iceberg.PartitionSpec, sch *iceberg.Schema, md *metadata.FileMetaData) (func(id int) (lo, hi []byte), bool) {
	type bound struct{ lo, hi []byte }
	got := map[int]bound{}
	for _, field := range spec.Fields() {
		src, ok := sch.FindFieldByID(field.SourceID())
		if !ok {
			return nil, false
		}
		col := md.Schema.ColumnIndexByName(src.Name)
		if col < 0 || md.Schema.Column(col).ColumnPath().String() != src.Name {
			return nil, false // not a top-level column
		}
		lt := md.Schema.Column(col).LogicalType()
		switch src.Type.(type) {
		case iceberg.DateType:
			if _, ok := lt.(schema.DateLogicalType); !ok {
				return nil, false
			}
		case iceberg.TimestampType, iceberg.TimestampTzType:
			if t, ok := lt.(schema.TimestampLogicalType); !ok || t.TimeUnit() != schema.TimeUnitMicros {
				return nil, false
			}
		case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
			if t, ok := lt.(schema.TimestampLogicalType); !ok || t.TimeUnit() != schema.TimeUnitNanos {
				return nil, false
			}
		default:
			return nil, false
		}
		var lo, hi int64
		known, seen := true, false
		for rg := 0; rg < md.NumRowGroups() && known; rg++ {
			chunk, err := md.RowGroup(rg).ColumnChunk(col)
			if err != nil {
				return nil, false
			}
			set, err := chunk.StatsSet()
			if err != nil {
				return nil, false
			}
			st, err := chunk.Statistics()
			if !set || err != nil || st == nil {
				known = false // as iceberg-go: no bounds at all
				break
			}
			if !st.HasMinMax() {
				continue // NULLs only in this row group
			}
			var l, h int64
			switch st := st.(type) {
			case *metadata.Int32Statistics:
				l, h = int64(st.Min()), int64(st.Max())
			case *metadata.Int64Statistics:
				l, h = st.Min(), st.Max()
			default:
				return nil, false
			}
			if !seen || l < lo {
				lo = l
			}
			if !seen || h > hi {
				hi = h
			}
			seen = true
		}
		if !known || !seen {
			got[field.SourceID()] = bound{}
			continue
		}
		enc := func(v int64) []byte {
			if _, ok := src.Type.(iceberg.DateType); ok {
				return binary.LittleEndian.AppendUint32(nil, uint32(int32(v)))
			}
			return binary.LittleEndian.AppendUint64(nil, uint64(v))
		}
		got[field.SourceID()] = bound{enc(lo), enc(hi)}
	}
	return func(id int) ([]byte, []byte) { return got[id].lo, got[id].hi }, true
}

// partitionValues returns a data file's partition under spec from its
// bounds (by column id): each field's transform of its source column's lower and upper
// bound, which must agree (a file of one partition). A column without
// bounds (NULLs only) leaves its field NULL.
func partitionValues(spec iceberg.PartitionSpec, sch *iceberg.Schema, bounds func(id int) (lo, hi []byte)) (map[int]any, error) {
	out := map[int]any{}
	for _, field := range spec.Fields() {
		src, ok := sch.FindFieldByID(field.SourceID())
		if !ok {
			return nil, fmt.Errorf("the partition field %s's column %d is not in the schema", field.Name, field.SourceID())
		}
		lo, hi := bounds(field.SourceID())
		if lo == nil || hi == nil {
			continue
		}
		l, err := iceberg.LiteralFromBytes(src.Type, lo)
		if err != nil {
			return nil, err
		}
		h, err := iceberg.LiteralFromBytes(src.Type, hi)
		if err != nil {
			return nil, err
		}
		pl := field.Transform.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: l})
		ph := field.Transform.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: h})
		if !pl.Valid || !ph.Valid {
			continue
		}
		if !pl.Val.Equals(ph.Val) {
			return nil, fmt.Errorf("its rows span %s partitions %s to %s", field.Name, pl.Val, ph.Val)
		}
		out[field.FieldID] = pl.Val.Any()
	}
	return out, nil
}
