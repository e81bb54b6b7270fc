#!/usr/bin/env python3
"""Verifies a lake that cdclake landed from the Avro connector's topics
(shopavro.*: Apicurio's Avro converter, Confluent-framed) against the lake
landed from the JSON connector's topics (shop.*: JsonConverter with
schemas) of the same database and workload.

usage: verify_avro.py --avro LAKE_DIR --json LAKE_DIR [--no-spark] [--report FILE]

Both connectors read the same WAL with the same settings but the
converter, so every dataset must hold the same changes with the same
values: the JSON lake is checked against PostgreSQL by verify_real.py,
and this script closes the loop for Avro. Per dataset of the JSON lake:

1. the Avro lake has it, with the same columns of the same DuckDB types
   (so every Debezium type was mapped the same way from Avro);
2. the same rows, as multisets, in DuckDB and in Spark (EXCEPT ALL both
   ways, Spark on the JSON text of each row), over every column but those
   that name the topic or the landing, or carry times the connector took
   itself (COMPARED_OUT below); the source time, transaction and position
   (_cdc_ts, _cdc_xid, _cdc_pos) are compared for streamed changes (a
   snapshot's READ rows carry each connector's own snapshot);
3. no dead letters in the Avro lake.

Exit status 1 when a check fails.
"""
import argparse
import os
from pathlib import Path

import verify_real as vr

# Columns that differ between two connectors by construction: the topic and
# offset a row came from, when it was landed, and the connector's own
# clocks (its source block holds the connector name and snapshot times).
COMPARED_OUT = {"_cdc_source", "_cdc_partition", "_cdc_offset", "_cdc_ingested_at", "_debezium_source",
                "_debezium_ts", "_cdc_ts"}

# Debezium names the data collection of a logical decoding message in a
# transaction event by a Java object's identity hash
# (LogicalDecodingMessageMonitor$LogicalDecodingMessageId@35efc8d8), which
# differs between two connectors: the hash is left out of the comparison.
IDENTITY_HASH = (r"(LogicalDecodingMessageId)@[0-9a-f]+", "\\1@")


def duck_col(c, typ):
    if typ == "JSON" or c == "event":
        return f"regexp_replace(CAST({vr.q(c)} AS VARCHAR), '{IDENTITY_HASH[0]}', '{IDENTITY_HASH[1]}', 'g') AS {vr.q(c)}"
    return vr.q(c)


def datasets(lake):
    return sorted(p.name for p in Path(lake).iterdir()
                  if p.is_dir() and p.name not in ("_cdclake", "_dead_letter", "_current") and any(p.rglob("*.parquet")))


def scan(lake, ds):
    return f"read_parquet('{Path(lake) / ds}/**/*.parquet', union_by_name=true, hive_partitioning=false)"


def columns(con, src):
    return [(r[0], r[1]) for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]


def verify(rep, args, con, spark):
    dead = list(Path(args.avro).glob("_dead_letter/**/*"))
    rep.check(not [d for d in dead if d.is_file()], "avro: no dead letters",
              [str(d) for d in dead[:5] if d.is_file()])
    names = datasets(args.json)
    same = names == datasets(args.avro)
    rep.check(same, f"avro: the same {len(names)} datasets as the JSON lake",
              None if same else [f"JSON {names}", f"Avro {datasets(args.avro)}"])
    for ds in names:
        if not (Path(args.avro) / ds).is_dir():
            continue
        js, av = scan(args.json, ds), scan(args.avro, ds)
        jc, ac = columns(con, js), columns(con, av)
        rep.check(jc == ac, f"{ds}: same columns and DuckDB types",
                  None if jc == ac else [f"only JSON: {sorted(set(jc) - set(ac))}", f"only Avro: {sorted(set(ac) - set(jc))}"])
        cols = [c for c, _ in jc if c not in COMPARED_OUT and c in dict(ac)]
        # A snapshot's READ rows carry each connector's own snapshot: its
        # time, transaction and position.
        has_op = "_cdc_op" in cols
        snap = [c for c in ("_cdc_ts", "_cdc_xid", "_cdc_pos") if c in dict(jc)] if has_op else []
        cols = [c for c in cols if c not in snap]
        types = dict(jc)
        sel = ", ".join(duck_col(c, types[c]) for c in cols)
        ts = "".join(f", CASE WHEN _cdc_op = 'READ' THEN NULL ELSE {vr.q(c)} END AS _{c}" for c in snap)
        n = con.execute(f"SELECT count(*) FROM {js}").fetchone()[0]
        only = []
        for a, b, label in ((js, av, "only JSON"), (av, js, "only Avro")):
            rows = con.execute(f"SELECT {sel}{ts} FROM {a} EXCEPT ALL SELECT {sel}{ts} FROM {b} LIMIT 3").fetchall()
            only += [f"{label}: {vr.short(str(r), 300)}" for r in rows]
        rep.check(not only, f"{ds}: DuckDB: the same {n} rows over {len(cols)} columns", only)
        if spark is not None:
            spark_compare(rep, spark, args, ds, cols, snap, n)


def spark_plain(F, T, col, dtype):
    """col with every TIME inside it as microseconds of the day: Spark
    renders TIME through java.time.LocalTime, which has no 24:00:00
    (PostgreSQL's, landed as is), so to_json would fail on it."""
    if type(dtype).__name__ == "TimeType":
        return F.time_diff(F.lit("MICROSECOND"), F.expr("TIME'00:00:00'"), col)
    if isinstance(dtype, T.StructType):
        return F.when(col.isNull(), F.lit(None)).otherwise(
            F.struct(*[spark_plain(F, T, col.getField(f.name), f.dataType).alias(f.name) for f in dtype.fields]))
    if isinstance(dtype, T.ArrayType):
        return F.transform(col, lambda x: spark_plain(F, T, x, dtype.elementType))
    return col


def spark_compare(rep, spark, args, ds, cols, snap, n):
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    def load(lake):
        df = spark.read.option("mergeSchema", "true").option("recursiveFileLookup", "true") \
            .parquet(str(Path(lake) / ds))
        types = {f.name: f.dataType for f in df.schema.fields}
        exprs = [F.regexp_replace(F.col(f"`{c}`").cast("string"), IDENTITY_HASH[0], "$1@").alias(c)
                 if c == "event" else spark_plain(F, T, F.col(f"`{c}`"), types[c]).alias(c) for c in cols]
        for c in snap:
            exprs.append(F.when(F.col("_cdc_op") == "READ", F.lit(None)).otherwise(F.col(c)).alias("_" + c))
        return df.select(F.to_json(F.struct(*exprs)).alias("row"))

    try:
        j, a = load(args.json), load(args.avro)
        only = [f"only JSON: {vr.short(r.row, 300)}" for r in j.exceptAll(a).limit(3).collect()]
        only += [f"only Avro: {vr.short(r.row, 300)}" for r in a.exceptAll(j).limit(3).collect()]
        got = a.count()
    except Exception as e:  # noqa: BLE001 - any Spark failure is a failed check
        rep.check(False, f"{ds}: Spark reads both lakes", [vr.spark_error(e)])
        return
    ok = not only and got == n
    rep.check(ok, f"{ds}: Spark: the same {n} rows", None if ok else only + [f"Avro rows {got}"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--avro", required=True, help="the lake landed from shopavro.*")
    ap.add_argument("--json", required=True, help="the lake landed from shop.*")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--report")
    args = ap.parse_args()

    import duckdb

    os.environ.setdefault("TZ", "UTC")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    rep = vr.Report()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    spark = vr.start_spark(rep, args.no_spark)
    verify(rep, args, con, spark)
    vr.finish(rep, args.report, spark)


if __name__ == "__main__":
    main()
