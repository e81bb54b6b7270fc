"""Checks the Iceberg tables of a lake against the lake's Parquet files.

usage: iceberg.py CATALOG LAKE_DIR [--plain DATASET ...] [--snapshots N]
                  [--rows-of N] [--warehouse s3://bucket/prefix --s3-endpoint URL]
                  [--namespace NS]

For every table of the catalog (pyiceberg's SqlCatalog on the SQLite file
CATALOG or on a postgres:// URL, or its RestCatalog at an http:// URI; with --namespace,
the tables under NS, named without it), pyiceberg's scan must return
exactly the rows of the dataset's
Parquet files in the lake (read with pyarrow), value for value, with the
same column names; the table must record a source offset
(cdclake.offset.*, in its current snapshot or its properties) for every
source partition of those rows, past the last offset of each. Time
travel: every snapshot must record offsets; none may refer to a data
file twice, or to one that is missing, and each append must keep its parent's
files (a compaction replaces them, and its rows are compared); a snapshot's scan must
hold the rows of the files its manifests name, each one's rows those of
the ones before (--rows-of N: of N snapshots per table, evenly spaced,
the last among them; all by default). Every dataset of the lake (but cdclake's own, _*) must be a table,
but those --plain names; --snapshots is the most snapshots any table may
have (commits are batched). With --warehouse, the tables' files are on
an S3 server (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)
whose bucket and prefix LAKE_DIR holds as a folder.
"""
import argparse
import glob
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deltalog import hidden  # noqa: E402


def tables(cat, ns=()):
    if ns:
        for t in cat.list_tables(ns):
            yield t
    for n in cat.list_namespaces(ns):
        yield from tables(cat, n)


KEYS = [("_cdc_source", "ascending"), ("_cdc_partition", "ascending"), ("_cdc_offset", "ascending")]


def plain(t):
    """t with extension types as their storage (JSON as text)."""
    cols = []
    for c in t.columns:
        if isinstance(c.type, pa.ExtensionType):
            c = pa.chunked_array([ch.storage for ch in c.chunks], type=c.type.storage_type)
        cols.append(c)
    return pa.table(cols, names=t.column_names)


def lake_table(lake, dataset, files=None):
    """The rows of a dataset's Parquet files in the lake (or of files)."""
    root = os.path.join(lake, dataset)
    paths = files if files is not None else sorted(
        p for p in glob.glob(os.path.join(root, "**", "*.parquet"), recursive=True)
        if not hidden(root, p))  # a Delta table's log and compacted files
    parts = [plain(pq.read_table(p)) for p in paths]
    if not parts:
        return None
    return pa.concat_tables(parts, promote_options="permissive").sort_by(KEYS)


def same(got, want):
    """Whether two tables hold the same rows (in key order), value for value."""
    if want is None or got.num_rows == 0:
        return (want is None or want.num_rows == 0) and got.num_rows == 0
    got = got.select(want.column_names).sort_by(KEYS)
    try:
        got = got.cast(want.schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
        print(f"cannot cast {got.schema} to {want.schema}: {e}")
        return False
    if got.equals(want):
        return True
    # NaN equals nothing, itself included: compare the flattened columns,
    # NaNs by place.
    a, b = flat(got), flat(want)
    for n in b.column_names:
        x, y = a.column(n).combine_chunks(), b.column(n).combine_chunks()
        if x.equals(y):
            continue
        if not pa.types.is_floating(y.type):
            return False
        nx, ny = pc.fill_null(pc.is_nan(x), False), pc.fill_null(pc.is_nan(y), False)
        if not nx.equals(ny) or not pc.filter(x, pc.invert(nx)).equals(pc.filter(y, pc.invert(ny))):
            return False
    return True


def compare(name, fmt, got, want, columns, fails):
    """Whether a table read as got holds the lake's rows want, with the
    same columns; fails says why not."""
    names = sorted(want.column_names) if want is not None else []
    if sorted(columns) != names:
        fails.append(f"{name}: columns {sorted(columns)}, the lake's files have {names}")
        return False
    if not same(got, want):
        fails.append(f"{name}: {got.num_rows} rows from {fmt} differ from the lake's {want.num_rows}")
        return False
    return True


def last_offsets(t):
    """The last offset of each source partition's rows in t, by the key
    a table records its offset under (cdclake.offset.<source>.<partition>)."""
    last = {}
    for src, part, off in zip(t.column("_cdc_source").to_pylist(), t.column("_cdc_partition").to_pylist(),
                              t.column("_cdc_offset").to_pylist()):
        p = f"cdclake.offset.{src}.{part}"
        last[p] = max(last.get(p, -1), off)
    return last


def flat(t):
    """t with its struct columns flattened, at every depth."""
    while any(pa.types.is_struct(c.type) for c in t.columns):
        t = t.flatten()
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("catalog")
    ap.add_argument("lake")
    ap.add_argument("--plain", nargs="*", default=[])
    ap.add_argument("--snapshots", type=int, default=0)
    ap.add_argument("--rows-of", type=int, default=0)
    ap.add_argument("--warehouse")
    ap.add_argument("--s3-endpoint")
    ap.add_argument("--namespace")
    args = ap.parse_args()
    lake = os.path.abspath(args.lake)
    warehouse = args.warehouse or "file://" + lake
    props = {}
    if args.s3_endpoint:
        props = {"s3.endpoint": args.s3_endpoint, "s3.region": os.environ.get("AWS_REGION", "us-east-1"),
                 "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
                 "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"], "s3.force-virtual-addressing": "false"}
    if args.catalog.startswith(("http://", "https://")):
        cat = RestCatalog("cdclake", uri=args.catalog, **props)
    elif args.catalog.startswith(("postgres://", "postgresql://")):
        cat = SqlCatalog("cdclake", uri="postgresql+psycopg://" + args.catalog.split("://", 1)[1], warehouse=warehouse, **props)
    else:
        cat = SqlCatalog("cdclake", uri="sqlite:///" + os.path.abspath(args.catalog), warehouse=warehouse, **props)
    root = tuple(args.namespace.split(".")) if args.namespace else ()

    def local(location):
        """The lake folder's path of a table's data file."""
        return os.path.join(lake, location.removeprefix(warehouse.rstrip("/") + "/"))

    fails, seen, total, nsnaps, ncompact = [], set(), 0, 0, 0
    for ident in tables(cat, root):
        name = ".".join(ident[len(root):])
        if name.endswith("__current"):
            continue  # a current-state table: current_iceberg.py checks it
        seen.add(name)
        tbl = cat.load_table(ident)
        got = tbl.scan().to_arrow()
        want = lake_table(lake, name)
        if not compare(name, "iceberg", got, want, [f.name for f in tbl.schema().fields], fails):
            continue
        total += got.num_rows
        snap = tbl.current_snapshot()
        offs = {}
        for props in ((snap.summary.additional_properties if snap else {}), tbl.properties):
            for k, v in props.items():
                if k.startswith("cdclake.offset."):
                    offs[k] = max(offs.get(k, -1), int(v))
        for p, o in last_offsets(want).items():
            if offs.get(p, -1) <= o:
                fails.append(f"{name}: the table records {p}={offs.get(p)}, not past its last row at {o}")
        snaps = tbl.metadata.snapshots
        if args.snapshots and len(snaps) > args.snapshots:
            fails.append(f"{name}: {len(snaps)} snapshots, want at most {args.snapshots}")
        # Every snapshot's files, each manifest read once: none twice, none
        # missing, its parent's kept; the rows of --rows-of of them (all by
        # default) read as those files.
        entries, prev, parent = {}, None, set()
        check = set(range(len(snaps)))
        if args.rows_of and len(snaps) > args.rows_of:
            check = {round(i * (len(snaps) - 1) / (args.rows_of - 1)) for i in range(args.rows_of)} if args.rows_of > 1 else {len(snaps) - 1}
        for i, s in enumerate(snaps):
            if not any(k.startswith("cdclake.offset.") for k in s.summary.additional_properties):
                fails.append(f"{name}: snapshot {s.snapshot_id} records no offset")
            files = []
            for m in s.manifests(tbl.io):
                if m.manifest_path not in entries:
                    entries[m.manifest_path] = [local(e.data_file.file_path) for e in m.fetch_manifest_entry(tbl.io)]
                files += entries[m.manifest_path]
            twice = sorted({f for f in files if files.count(f) > 1})
            if twice:
                fails.append(f"{name}: snapshot {s.snapshot_id} refers to {len(twice)} data files twice, {twice[0]} first")
            missing = [f for f in files if not os.path.exists(f)]
            if missing:
                fails.append(f"{name}: snapshot {s.snapshot_id} refers to {len(missing)} missing files, {missing[0]} first")
                continue
            appended = s.summary.operation.value == "append"
            ncompact += not appended
            if appended and not parent <= set(files):
                fails.append(f"{name}: snapshot {s.snapshot_id} lost files of its parent")
            parent = set(files)
            if i not in check and appended:
                continue  # a compaction's (overwrite) rows are always compared
            at = tbl.scan(snapshot_id=s.snapshot_id).to_arrow()
            if not same(at, lake_table(lake, name, sorted(files))):
                fails.append(f"{name}: snapshot {s.snapshot_id} does not read as its files")
            keys = set(zip(at.column("_cdc_source").to_pylist(), at.column("_cdc_partition").to_pylist(),
                           at.column("_cdc_offset").to_pylist()))
            if prev is not None and not prev <= keys:
                fails.append(f"{name}: snapshot {s.snapshot_id} lost rows of an earlier one")
            prev = keys
        nsnaps += len(snaps)
    for d in sorted(os.listdir(lake)):
        if os.path.isdir(os.path.join(lake, d)) and not d.startswith("_") and d not in seen and d not in args.plain:
            fails.append(f"{d}: the lake's dataset is no iceberg table")
    for d in args.plain:
        if d in seen:
            fails.append(f"{d}: an iceberg table, want plain Parquet")
    for f in fails:
        print(f)
    if fails:
        sys.exit(1)
    print(f"ok {len(seen)} tables, {total} rows, {nsnaps} snapshots, {ncompact} compactions")


if __name__ == "__main__":
    main()
