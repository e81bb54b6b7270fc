"""Reads a lake's Delta tables with Spark (Delta Lake's Spark connector)
and checks them against the lake's files.

usage: delta_spark.py LAKE_DIR --jars DIR [--current N] [--versions-of N]

For every table of the lake (a dataset folder with a _delta_log):
- Spark reads every row of the table, every column (each row is hashed,
  so each value is decoded), and its rows are exactly the
  lake's rows of that dataset, each once (by _cdc_source, _cdc_partition,
  _cdc_offset; the lake's files read by Spark's own Parquet reader);
- time travel: each version (versionAsOf; --versions-of N: N of them,
  evenly spaced, the last among them) reads each row once, and holds every
  row of the lake whose offset is below the offset the version records for
  its source partition (its txn actions, appId
  cdclake.offset.<source>.<partition>): a reader of a version sees every
  change up to the offsets it says it holds.

--current N: the lake's current-state tables (LAKE_DIR/_current/<dataset>)
must be N Delta tables, which Spark reads each row of once (by the change
that made it last, which names one row), as many rows as the newest
manifest counts.
"""
import argparse
import glob
import json
import os
import sys
from collections import Counter

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deltalog import expired, files as files_of, hidden, txns  # noqa: E402

LOCAL = {"spark.driver.memory": "1g", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
         "spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1",
         "spark.sql.session.timeZone": "UTC", "spark.sql.shuffle.partitions": "4",
         "spark.sql.legacy.allowHashOnMapType": "true"}

KEY = ["_cdc_source", "_cdc_partition", "_cdc_offset"]


def session(jars_dir):
    jars = ",".join(sorted(glob.glob(os.path.join(jars_dir, "delta-*.jar"))))
    b = SparkSession.builder.master("local[2]").appName("cdclake-delta-spark").config("spark.jars", jars)
    for k, v in LOCAL.items():
        b = b.config(k, v)
    b = (b.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
         .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    return s


def keys(df):
    return Counter(tuple(r) for r in df.select(*KEY).collect())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lake")
    ap.add_argument("--jars", required=True)
    ap.add_argument("--current", type=int)
    ap.add_argument("--versions-of", type=int, default=0)
    args = ap.parse_args()
    lake = os.path.abspath(args.lake)
    spark = session(args.jars)
    fails, ntables, nrows, nversions = [], 0, 0, 0
    for log in sorted(glob.glob(os.path.join(lake, "*", "_delta_log"))):
        root = os.path.dirname(log)
        name = os.path.basename(root)
        ntables += 1
        df = spark.read.format("delta").load(root)
        # Every value decoded and hashed in the JVM (neither Python's
        # datetime nor Spark's timestamp text holds PostgreSQL's infinities).
        decoded = df.select(F.xxhash64(*[F.col(f"`{c}`") for c in df.columns]).alias("h")).agg(F.count("h")).first()[0]
        got = keys(df)
        if decoded != sum(got.values()):
            fails.append(f"{name}: {decoded} rows decoded, {sum(got.values())} read")
        files = sorted(p for p in glob.glob(os.path.join(root, "**", "*.parquet"), recursive=True) if not hidden(root, p))
        lake_rows = spark.read.option("mergeSchema", "true").parquet(*files).select(*KEY).collect()
        want = Counter(tuple(r) for r in lake_rows)
        if got != want or max(got.values(), default=1) != 1:
            fails.append(f"{name}: Spark reads {sum(got.values())} rows ({len(got)} distinct), the lake's files hold {len(want)}")
            continue
        nrows += len(got)
        version = max(int(os.path.basename(p)[:20]) for p in glob.glob(os.path.join(log, "*.json")))
        check = range(version + 1)
        if args.versions_of and version + 1 > args.versions_of:
            n = args.versions_of
            check = sorted({round(i * version / (n - 1)) for i in range(n)}) if n > 1 else [version]
        for v in check:
            if expired(root, files_of(root, v), v, version):
                continue  # its compacted files were replaced, and expired
            at = keys(spark.read.format("delta").option("versionAsOf", v).load(root))
            nversions += 1
            if max(at.values(), default=1) != 1:
                fails.append(f"{name}: version {v} reads a row twice")
            offs = txns(root, v)
            below = [k for k in want if k[2] < offs.get(f"cdclake.offset.{k[0]}.{k[1]}", -1)]
            missing = [k for k in below if k not in at]
            if missing:
                fails.append(f"{name}: version {v} lacks {len(missing)} rows below its offsets, {missing[0]} first")
    ncurrent = 0
    for log in sorted(glob.glob(os.path.join(lake, "_current", "*", "_delta_log"))):
        root = os.path.dirname(log)
        name = os.path.basename(root) + " (current)"
        ncurrent += 1
        got = keys(spark.read.format("delta").load(root))
        manifests = [json.load(open(f)) for f in glob.glob(os.path.join(root, "_manifest", "*.json"))]
        newest = max(manifests, key=lambda m: m["version"]) if manifests else None
        if newest is None:
            fails.append(f"{name}: no manifest")
        elif max(got.values(), default=1) != 1 or sum(got.values()) != sum(newest["rows"]):
            fails.append(f"{name}: Spark reads {sum(got.values())} rows, manifest {newest['version']} counts {sum(newest['rows'])}")
    if args.current is not None and ncurrent != args.current:
        fails.append(f"{ncurrent} current-state delta tables, want {args.current}")
    spark.stop()
    for f in fails:
        print(f)
    if fails:
        sys.exit(1)
    print(f"ok: Spark read {ntables} delta tables, {nrows} rows, {nversions} versions as of their offsets, "
          f"{ncurrent} current-state tables")


if __name__ == "__main__":
    main()
