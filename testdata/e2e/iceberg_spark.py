"""Reads a lake's Iceberg tables with Spark (Iceberg's Spark runtime, the
JDBC catalog on the SQLite file) and checks them against the lake's files.

usage: iceberg_spark.py CATALOG_DB LAKE_DIR --jars DIR [--time-tables N]
                        [--warehouse s3://bucket/prefix --s3-endpoint URL]

For every table of the catalog (catalog name cdclake):
- Spark reads every row of the table, every column (the rows are
  collected, so each value is decoded), and its rows are exactly the
  lake's rows of that dataset, each once (by _cdc_source, _cdc_partition,
  _cdc_offset; the lake's files read by Spark's own Parquet reader);
- time travel: each snapshot (VERSION AS OF) reads as many rows as its
  summary's total-records, each once, and holds every row of the lake
  whose offset is below the offset the snapshot records for its source
  partition (cdclake.offset.<source>.<partition>): a reader of a snapshot
  sees every change up to the offsets it says it holds.

A current-state table (<dataset>__current: cdclake snapshot, or
sink.current.interval) is checked against its manifests
(LAKE_DIR/_current/<dataset>/_manifest/): Spark reads each row once (by
the change that made it last, which names one row) and exactly the keys
of the rows of its newest manifest's files (merge-on-read: as many as it
counts, each key once: the deletion vectors applied); each snapshot, as
many rows as its version's manifest counts, where that manifest is kept.

Iceberg's Spark runtime refuses a table with a column of Iceberg's time
type ("Spark does not support time fields"): such tables are counted and
named, and --time-tables says how many are expected. With --warehouse, the
tables' files are on an S3 server (credentials from AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY) whose bucket and prefix LAKE_DIR holds as a folder.
"""
import argparse
import glob
import json
import os
import sqlite3
import sys
from collections import Counter

from pyspark.sql import SparkSession


# A small local Spark on the loopback, in UTC.
LOCAL = {"spark.driver.memory": "1g", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
         "spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1",
         "spark.sql.session.timeZone": "UTC", "spark.sql.shuffle.partitions": "4"}


def session(args):
    jars = ",".join(sorted(glob.glob(os.path.join(args.jars, "*.jar"))))
    lake = os.path.abspath(args.lake)
    b = SparkSession.builder.master("local[2]").appName("cdclake-iceberg-spark").config("spark.jars", jars)
    for k, v in LOCAL.items():
        b = b.config(k, v)
    b = (b.config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
         .config("spark.sql.catalog.cdclake", "org.apache.iceberg.spark.SparkCatalog")
         .config("spark.sql.catalog.cdclake.type", "jdbc")
         .config("spark.sql.catalog.cdclake.uri", "jdbc:sqlite:" + os.path.abspath(args.catalog))
         # iceberg-go's SQL catalog has no iceberg_type column (V0): V1 reads it.
         .config("spark.sql.catalog.cdclake.jdbc.schema-version", "V1")
         .config("spark.sql.catalog.cdclake.warehouse", args.warehouse or "file://" + lake))
    if args.s3_endpoint:
        b = (b.config("spark.sql.catalog.cdclake.io-impl", "org.apache.iceberg.aws.s3.S3FileIO")
             .config("spark.sql.catalog.cdclake.s3.endpoint", args.s3_endpoint)
             .config("spark.sql.catalog.cdclake.s3.path-style-access", "true")
             .config("spark.sql.catalog.cdclake.s3.access-key-id", os.environ["AWS_ACCESS_KEY_ID"])
             .config("spark.sql.catalog.cdclake.s3.secret-access-key", os.environ["AWS_SECRET_ACCESS_KEY"])
             .config("spark.sql.catalog.cdclake.client.region", os.environ.get("AWS_REGION", "us-east-1")))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


KEY = ["_cdc_source", "_cdc_partition", "_cdc_offset"]


def keys(rows):
    """The rows' keys, each with how many rows have it."""
    return Counter(tuple(r[k] for k in KEY) for r in rows)


def lake_keys(spark, lake, dataset):
    """The keys of the dataset's rows in the lake's files."""
    files = sorted(glob.glob(os.path.join(lake, dataset, "**", "*.parquet"), recursive=True))
    if not files:
        return Counter()
    return keys(spark.read.parquet(*files).select(*KEY).collect())


def state_manifests(lake, dataset):
    """A current-state table's manifests by version."""
    out = {}
    for f in glob.glob(os.path.join(lake, "_current", dataset, "_manifest", "*.json")):
        with open(f) as fh:
            m = json.load(fh)
        out[m["version"]] = m
    return out


def check_state(spark, lake, dataset, ident, rows, fails):
    """Checks a current-state table Spark read (rows) against its manifests;
    returns the number of snapshots read."""
    ms = state_manifests(lake, dataset)
    if not ms:
        fails.append(f"{ident}: no manifest")
        return 0
    newest = ms[max(ms)]
    got = keys(rows)
    if any(newest.get("merge") or []):
        # Merge-on-read: deletion vectors delete the rows later files
        # replaced. Spark applies them if it reads each key once, as many
        # rows as the manifest counts.
        if repeated(got) or len(rows) != sum(newest["rows"]):
            fails.append(f"{ident}: Spark reads {len(rows)} rows ({repeated(got)} repeated) merge-on-read, the newest "
                         f"manifest counts {sum(newest['rows'])}")
    else:
        files = [os.path.join(lake, k) for k in newest["files"] if k]
        want = keys(spark.read.parquet(*files).select(*KEY).collect()) if files else Counter()
        if repeated(got) or got != want:
            fails.append(f"{ident}: Spark reads {len(rows)} rows ({repeated(got)} repeated), the newest manifest's files "
                         f"{want.total()}")
    n = 0
    for s in spark.sql(f"SELECT snapshot_id, summary FROM {ident}.snapshots ORDER BY committed_at").collect():
        n += 1
        m = ms.get(int(s.summary.get("cdclake.current.version", -1)))
        if m is None:
            continue
        at = spark.sql(f"SELECT count(*) FROM {ident} VERSION AS OF {s.snapshot_id}").collect()[0][0]
        if at != sum(m["rows"]):
            fails.append(f"{ident}: snapshot {s.snapshot_id} (version {m['version']}) reads {at} rows, its manifest counts "
                         f"{sum(m['rows'])}")
    return n


def repeated(c):
    return sum(n - 1 for n in c.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("catalog")
    ap.add_argument("lake")
    ap.add_argument("--jars", required=True)
    ap.add_argument("--time-tables", type=int, default=0)
    ap.add_argument("--warehouse")
    ap.add_argument("--s3-endpoint")
    args = ap.parse_args()
    lake = os.path.abspath(args.lake)
    with sqlite3.connect(args.catalog) as db:
        idents = sorted(db.execute("SELECT table_namespace, table_name FROM iceberg_tables WHERE catalog_name = 'cdclake'"))
    spark = session(args)
    fails, timed, rows_read, snapshots = [], [], 0, 0
    for ns, name in idents:
        dataset = f"{ns}.{name}"
        ident = f"cdclake.{ns}.{name}"
        try:
            rows = spark.table(ident).collect()
        except Exception as e:  # noqa: BLE001 (py4j's errors name the Java one)
            if "does not support time fields" in str(e):
                timed.append(dataset)
                continue
            fails.append(f"{dataset}: Spark cannot read it: {str(e).splitlines()[0]}")
            continue
        if dataset.endswith("__current"):
            snapshots += check_state(spark, lake, dataset.removesuffix("__current"), ident, rows, fails)
            rows_read += len(rows)
            continue
        got, want = keys(rows), lake_keys(spark, lake, dataset)
        if repeated(got) or got != want:
            fails.append(f"{dataset}: Spark reads {len(rows)} rows ({repeated(got)} repeated), "
                         f"{sum((got - want).values())} not in the lake, {sum((want - got).values())} of the lake's missing")
            continue
        rows_read += len(rows)
        for s in spark.sql(f"SELECT snapshot_id, summary FROM {ident}.snapshots ORDER BY committed_at").collect():
            snapshots += 1
            at = keys(spark.sql(f"SELECT {', '.join(KEY)} FROM {ident} VERSION AS OF {s.snapshot_id}").collect())
            total = int(s.summary.get("total-records", -1))
            if repeated(at) or at.total() != total:
                fails.append(f"{dataset}: snapshot {s.snapshot_id} reads {at.total()} rows ({repeated(at)} repeated), "
                             f"its summary says {total}")
            recorded = {k.removeprefix("cdclake.offset."): int(v) for k, v in s.summary.items()
                        if k.startswith("cdclake.offset.")}
            if not recorded:
                fails.append(f"{dataset}: snapshot {s.snapshot_id} records no offset")
            below = {k for k in want if k[2] < recorded.get(f"{k[0]}.{k[1]}", -1)}
            if not below <= at.keys():
                fails.append(f"{dataset}: snapshot {s.snapshot_id} lacks {len(below - at.keys())} rows below the offsets it records")
    if len(timed) != args.time_tables:
        fails.append(f"{len(timed)} tables with a time column Spark refuses ({', '.join(timed)}), want {args.time_tables}")
    for f in fails:
        print(f)
    if fails:
        sys.exit(1)
    print(f"ok Spark {spark.version}: {len(idents) - len(timed)} tables, {rows_read} rows, {snapshots} snapshots "
          f"as of their offsets; {len(timed)} with a time column left to other readers")


if __name__ == "__main__":
    main()
