package iceappend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"
	_ "modernc.org/sqlite"             // the database/sql driver "sqlite"
	"net/url"
	"strings"
)

// sqlCatalog is the rows of an Iceberg SQL catalog (the JDBC catalog's
// tables, as iceberg-go, pyiceberg and Java's JdbcCatalog share them).
type sqlCatalog struct {
	db       *sql.DB
	name     string
	postgres bool
}

// openSQL opens the SQL catalog of a catalog URL (sqlite:// or
// postgres://), creating its tables if need be; ok is false for another
// kind of catalog (REST).
func openSQL(ctx context.Context, catalogURL, name string) (c *sqlCatalog, ok bool, err error) {
	u, err := url.Parse(catalogURL)
	if err != nil {
		return nil, false, nil
	}
	var driver, dsn string
	switch u.Scheme {
	case "sqlite":
		p := u.Host + u.Path
		if p == "" {
			return nil, false, nil
		}
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		driver, dsn = "sqlite", "file:"+p+"?"+q.Encode()
	case "postgres", "postgresql":
		driver, dsn = "pgx", catalogURL
	default:
		return nil, false, nil
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, true, err
	}
	if driver == "sqlite" {
		db.SetMaxOpenConns(1) // SQLite serializes writers
	}
	c = &sqlCatalog{db: db, name: name, postgres: driver == "pgx"}
	for _, ddl := range []string{
		`CREATE TABLE IF NOT EXISTS iceberg_tables (catalog_name VARCHAR NOT NULL, table_namespace VARCHAR NOT NULL,
 table_name VARCHAR NOT NULL, iceberg_type VARCHAR, metadata_location VARCHAR, previous_metadata_location VARCHAR,
 PRIMARY KEY (catalog_name, table_namespace, table_name))`,
		`CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (catalog_name VARCHAR NOT NULL, namespace VARCHAR NOT NULL,
 property_key VARCHAR NOT NULL, property_value VARCHAR, PRIMARY KEY (catalog_name, namespace, property_key))`,
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			db.Close()
			return nil, true, fmt.Errorf("creating the iceberg catalog's tables: %w", err)
		}
	}
	// A catalog made by an older writer has no iceberg_type column: its
	// rows are left to the full committer, which knows how to treat it.
	if _, err := db.ExecContext(ctx, c.q(`SELECT iceberg_type FROM iceberg_tables WHERE catalog_name = ? AND 1 = 0`), name); err != nil {
		db.Close()
		if strings.Contains(err.Error(), "iceberg_type") {
			return nil, false, nil
		}
		return nil, true, fmt.Errorf("reading the iceberg catalog's tables: %w", err)
	}
	return c, true, nil
}

// q returns query with PostgreSQL's placeholders where the catalog is
// PostgreSQL's.
func (c *sqlCatalog) q(query string) string {
	if !c.postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// location returns the metadata location of a table; "" when the catalog
// has no such table.
func (c *sqlCatalog) location(ctx context.Context, ns, name string) (string, error) {
	var loc sql.NullString
	var typ sql.NullString
	err := c.db.QueryRowContext(ctx, c.q(`SELECT metadata_location, iceberg_type FROM iceberg_tables
 WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?`), c.name, ns, name).Scan(&loc, &typ)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if typ.Valid && typ.String != "TABLE" {
		return "", unsupported("%s.%s is a %s in the catalog", ns, name, typ.String)
	}
	if !loc.Valid || loc.String == "" {
		return "", unsupported("%s.%s has no metadata location", ns, name)
	}
	return loc.String, nil
}

// swap moves a table's metadata location from old to loc, if it is still
// at old; false when another commit moved it first.
func (c *sqlCatalog) swap(ctx context.Context, ns, name, old, loc string) (bool, error) {
	res, err := c.db.ExecContext(ctx, c.q(`UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ?,
 iceberg_type = 'TABLE' WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? AND metadata_location = ?
 AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)`), loc, old, c.name, ns, name, old)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// create adds a table at loc, its namespaces first (each level of ns,
// dotted); false when the catalog has a table of that name already.
func (c *sqlCatalog) create(ctx context.Context, ns []string, name, loc string) (bool, error) {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	for i := 1; i <= len(ns); i++ {
		level := strings.Join(ns[:i], ".")
		var n int
		if err := tx.QueryRowContext(ctx, c.q(`SELECT count(*) FROM iceberg_namespace_properties
 WHERE catalog_name = ? AND namespace = ?`), c.name, level).Scan(&n); err != nil {
			return false, err
		}
		if n > 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, c.q(`INSERT INTO iceberg_namespace_properties
 (catalog_name, namespace, property_key, property_value) VALUES (?, ?, 'exists', 'true')`), c.name, level); err != nil {
			return false, fmt.Errorf("creating the iceberg namespace %s: %w", level, err)
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, c.q(`SELECT count(*) FROM iceberg_tables
 WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?`), c.name, strings.Join(ns, "."), name).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, c.q(`INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, iceberg_type,
 metadata_location) VALUES (?, ?, ?, 'TABLE', ?)`), c.name, strings.Join(ns, "."), name, loc); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

func (c *sqlCatalog) close() error { return c.db.Close() }
