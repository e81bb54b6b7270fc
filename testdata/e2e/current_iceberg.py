"""Checks the current-state Iceberg tables of a lake (cdclake snapshot, or
sink.current.interval, of tables committed to Iceberg).

usage: current_iceberg.py CATALOG_DB LAKE_DIR [--tables N] [--same-as OTHER_LAKE]
                          [--warehouse s3://bucket/prefix --s3-endpoint URL]

For every table of the SQL catalog named <dataset>__current:
- its current snapshot reads, with pyiceberg, exactly the rows of the
  files the state table's newest manifest (LAKE_DIR/_current/<dataset>/
  _manifest/) names, value for value, read with pyarrow, but the rows its
  deletion vectors delete (merge-on-read; decoded by pyiceberg);
- the table's properties and its current snapshot's summary record that
  manifest's version (cdclake.current.version) and, per source partition,
  the offset it is consistent up to (cdclake.offset.*, as the manifest);
- time travel: every snapshot names only files that exist, none twice,
  records a version, and, where that version's manifest is kept, names
  its files and deletion vectors and reads as them.
--tables is how many such tables there must be. --same-as: each table's
current rows must be, column for column but the _cdc_ ones (where each
row's last change came from), the rows of the same state table in
OTHER_LAKE (built from the same changes, landed otherwise), by key.
With --warehouse, the tables' files are on an S3 server (credentials from
AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) whose bucket and prefix
LAKE_DIR holds as a folder.
"""
import argparse
import glob
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFileContent
from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iceberg  # noqa: E402
from iceberg import KEYS, plain, same, tables  # noqa: E402


def data_files(m):
    """The data files a manifest names: each bucket's file, then the files
    merge-on-read builds added to it."""
    out = [k for k in m["files"] if k]
    for mg in m.get("merge") or []:
        if mg:
            out += mg.get("files") or []
    return out


def vectors(m):
    """The deletion vectors a manifest names, as (puffin, data file)."""
    return sorted((v["puffin"], v["file"]) for mg in m.get("merge") or [] if mg for v in mg.get("deletes") or [])


def deleted(lake, warehouse, vecs):
    """The rows the deletion vectors delete, by data file key, decoded from
    their Puffin files by pyiceberg."""
    out = {}
    for puffin in sorted({p for p, _ in vecs}):
        with open(os.path.join(lake, puffin), "rb") as f:
            for dv in deletion_vectors_from_puffin_file(PuffinFile(f.read())):
                key = dv.referenced_data_file.removeprefix(warehouse + "/")
                if (puffin, key) in vecs:
                    out[key] = set(dv.to_vector().to_pylist())
    return out


def files_table(lake, keys, dead=None):
    """The rows of a state table's files, but those dead deletes, in the
    order same() compares (a row's last change names it: one source
    partition and offset)."""
    if not keys:
        return None
    parts = []
    for k in keys:
        t = pq.read_table(os.path.join(lake, k))
        gone = (dead or {}).get(k)
        if gone:
            t = t.filter(pa.array([i not in gone for i in range(t.num_rows)]))
        parts.append(plain(t))
    return pa.concat_tables(parts, promote_options="permissive").sort_by(KEYS)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("catalog")
    ap.add_argument("lake")
    ap.add_argument("--tables", type=int, default=-1)
    ap.add_argument("--same-as")
    ap.add_argument("--warehouse")
    ap.add_argument("--s3-endpoint")
    args = ap.parse_args()
    lake = os.path.abspath(args.lake)
    warehouse = (args.warehouse or "file://" + lake).rstrip("/")
    props = {}
    if args.s3_endpoint:
        props = {"s3.endpoint": args.s3_endpoint, "s3.region": os.environ.get("AWS_REGION", "us-east-1"),
                 "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
                 "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"], "s3.force-virtual-addressing": "false"}
    cat = SqlCatalog("cdclake", uri="sqlite:///" + os.path.abspath(args.catalog), warehouse=warehouse, **props)
    fails, n, nsnaps, nrows, merged = [], 0, 0, 0, 0
    for ident in tables(cat):
        name = ".".join(ident)
        if not name.endswith("__current"):
            continue
        n += 1
        dataset = name.removesuffix("__current")
        tbl = cat.load_table(ident)
        mdir = os.path.join(lake, "_current", dataset, "_manifest")
        manifests = {}
        for f in sorted(glob.glob(os.path.join(mdir, "*.json"))):
            m = json.load(open(f))
            manifests[m["version"]] = m
        if not manifests:
            fails.append(f"{name}: no manifest in {mdir}")
            continue
        newest = manifests[max(manifests)]
        props = tbl.properties
        if props.get("cdclake.current.version") != str(newest["version"]):
            fails.append(f"{name}: records version {props.get('cdclake.current.version')}, the newest manifest is {newest['version']}")
        snap = tbl.current_snapshot()
        summary = snap.summary.additional_properties if snap else {}
        for o in newest["offsets"]:
            key = f"cdclake.offset.{o['source']}.{o['partition']}"
            if props.get(key) != str(o["next"]) or summary.get(key) != str(o["next"]):
                fails.append(f"{name}: {key} is {props.get(key)} (snapshot {summary.get(key)}), the manifest says {o['next']}")
        got = tbl.scan().to_arrow()
        want = files_table(lake, data_files(newest), deleted(lake, warehouse, vectors(newest)))
        merged += sum(1 for mg in newest.get("merge") or [] if mg)
        if not same(got, want):
            fails.append(f"{name}: {got.num_rows} rows from iceberg differ from the {0 if want is None else want.num_rows} "
                         f"of manifest {newest['version']}'s files")
        nrows += got.num_rows
        if args.same_as:
            other = os.path.join(os.path.abspath(args.same_as), "_current", dataset, "_manifest")
            ms = sorted(glob.glob(os.path.join(other, "*.json")))
            if not ms:
                fails.append(f"{name}: no state table in {other}")
            else:
                keys = json.loads(props.get("cdclake.current.key", "[]"))
                theirs = files_table(os.path.abspath(args.same_as), data_files(json.load(open(ms[-1]))))
                data = lambda t: t.select([c for c in t.column_names if not c.startswith("_cdc_")])  # noqa: E731
                iceberg.KEYS = [(k, "ascending") for k in keys]
                if not same(data(got), None if theirs is None else data(theirs).sort_by(iceberg.KEYS)):
                    fails.append(f"{name}: its rows differ from {args.same_as}'s state table")
                iceberg.KEYS = KEYS
        for s in tbl.metadata.snapshots:
            nsnaps += 1
            sp = s.summary.additional_properties
            v = sp.get("cdclake.current.version")
            if v is None:
                fails.append(f"{name}: snapshot {s.snapshot_id} records no version")
                continue
            entries = [e.data_file for m in s.manifests(tbl.io) for e in m.fetch_manifest_entry(tbl.io)]
            files = [d.file_path for d in entries if d.content == DataFileContent.DATA]
            # (pyiceberg 0.12 reads no referenced_data_file from a manifest:
            # the deletion vectors are compared by their Puffin files.)
            dvs = sorted(d.file_path.removeprefix(warehouse + "/") for d in entries if d.content != DataFileContent.DATA)
            local = [f.removeprefix(warehouse + "/") for f in files]
            if len(set(local)) != len(local):
                fails.append(f"{name}: snapshot {s.snapshot_id} names a file twice")
            missing = [f for f in local + dvs if not os.path.exists(os.path.join(lake, f))]
            if missing:
                fails.append(f"{name}: snapshot {s.snapshot_id} names {len(missing)} missing files, {missing[0]} first")
                continue
            m = manifests.get(int(v))
            if m is None:
                continue  # its manifest is no longer kept
            if sorted(local) != sorted(data_files(m)) or dvs != sorted(p for p, _ in vectors(m)):
                fails.append(f"{name}: snapshot {s.snapshot_id} (version {v}) names other files than its manifest")
                continue
            at = tbl.scan(snapshot_id=s.snapshot_id).to_arrow()
            want = files_table(lake, sorted(local), deleted(lake, warehouse, vectors(m)))
            if not same(at, want):
                fails.append(f"{name}: snapshot {s.snapshot_id} (version {v}) does not read as its files")
    if args.tables >= 0 and n != args.tables:
        fails.append(f"{n} current-state tables, want {args.tables}")
    for f in fails:
        print(f)
    if fails:
        sys.exit(1)
    print(f"ok {n} current-state tables, {nrows} rows, {nsnaps} snapshots, {merged} merged buckets")


if __name__ == "__main__":
    main()
