#!/usr/bin/env python3
"""Verifies a lake that cdclake landed from the real Debezium MariaDB capture
(topics maria.*) against MariaDB.

usage: verify_mariadb.py --capture DIR --lake LAKE_DIR (--socket S | --dump FILE)
                         [--no-spark] [--report FILE]
       verify_mariadb.py --socket S --save FILE

--save writes MariaDB's tables, keys and rows in the canonical form below
(the committed capture keeps it as _mariadb.json), so that --dump can check
a lake without a running server.

Checks, per table of database shop:

1. exactly once: the lake's change rows are exactly the captured change
   messages (op c/u/d/r; tombstones and the transaction and schema-change
   topics excluded), by (file, line): none missing, none twice, none extra,
   same operation. Dead letters: none are expected.
2. types: each column's DuckDB type is the one the type table of docs/types.md
   gives for the MariaDB type (TYPES below); a TIME column may have a text
   sibling <column>__text (VARCHAR) for values beyond a day.
3. current state: the table rebuilt from its change rows (docs/types.md, "Current
   state of a table") equals SELECT * on MariaDB, in DuckDB and in Spark,
   value for value: integers (BIGINT UNSIGNED from DECIMAL(20,0)), decimals
   as exact numbers (DECIMAL(65,30) from its text), FLOAT and DOUBLE bit for
   bit, DATE as days, DATETIME and TIMESTAMP as microseconds since 1970
   (the server runs in UTC), TIME as signed microseconds (the typed column,
   else the duration text of its sibling), BIT(n) as the integer of its
   little-endian bytes (Debezium's Bits), BIT(1) as a boolean, text, ENUM,
   SET and JSON as text, BLOB/BINARY as bytes. A zero date ('0000-00-00')
   is NULL: the connector documents that it sends NULL for it. A value
   MariaDB has and no captured change of the key carried (a column added
   with a default fills existing rows without a change event) is reported
   as UPSTREAM, not failed.

Also: one _transactions row per maria.transaction message and one _ddl row
per schema-change message (topic maria).

Exit status 1 when a check fails.
"""
import argparse
import base64
import json
import os
import re
import struct
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import verify_real as vr

OPS = {"c": "INSERT", "u": "UPDATE", "d": "DELETE", "r": "READ"}
PREFIX = "maria"


# --------------------------------------------------------------------------
# MariaDB: columns and canonical rows


def category(data_type, column_type):
    """A MariaDB column type -> the category its values compare in."""
    unsigned = "unsigned" in column_type
    if data_type == "bit":
        return "bit1" if column_type == "bit(1)" else "bits"
    if data_type == "bigint" and unsigned:
        return "uint64"
    if data_type in ("tinyint", "smallint", "mediumint", "int", "bigint", "year"):
        return "int"
    if data_type == "decimal":
        return "dec"
    if data_type in ("float", "double"):
        return data_type
    if data_type in ("date", "datetime", "timestamp", "time"):
        return data_type
    if data_type in ("blob", "tinyblob", "mediumblob", "longblob", "binary", "varbinary"):
        return "bytes"
    return "str"  # char, varchar, text, enum, set, JSON (longtext)


def expected_duck_type(col):
    dt, ct = col["data_type"], col["column_type"]
    unsigned = "unsigned" in ct
    c = col["cat"]
    if c == "int":
        if dt == "year":
            return "INTEGER"
        return {"tinyint": "SMALLINT", "smallint": "SMALLINT" if not unsigned else "INTEGER",
                "mediumint": "INTEGER", "int": "INTEGER" if not unsigned else "BIGINT",
                "bigint": "BIGINT"}[dt]
    if c == "dec":
        p, s = col["precision"], col["scale"]
        return f"DECIMAL({p},{s})" if p <= 38 else "VARCHAR"
    return {"uint64": "DECIMAL(20,0)", "float": "FLOAT", "double": "DOUBLE", "date": "DATE",
            "datetime": "TIMESTAMP", "timestamp": "TIMESTAMP WITH TIME ZONE", "time": "TIME",
            "bit1": "BOOLEAN", "bits": "BLOB", "bytes": "BLOB", "str": "VARCHAR"}[c]


def select_expr(col):
    """SQL giving a column's canonical JSON value."""
    n = "`" + col["name"].replace("`", "``") + "`"
    c = col["cat"]
    if c in ("int", "uint64", "dec", "float", "double", "time"):
        return f"CAST({n} AS CHAR)"
    if c == "date":
        return f"DATEDIFF({n}, '1970-01-01')"  # NULL for a zero date
    if c in ("datetime", "timestamp"):
        return f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {n})"
    if c == "bit1":
        return f"{n} + 0"
    if c == "bits":
        return f"CAST({n} + 0 AS CHAR)"
    if c == "bytes":
        return f"REPLACE(TO_BASE64({n}), '\\n', '')"
    if c == "str":
        return f"CONCAT('', {n})"  # a JSON column's text as text, not as JSON
    return n


def duration_us(s):
    """'[-]HHH:MM:SS[.ffffff]' -> signed microseconds."""
    m = re.fullmatch(r"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?", s)
    if not m:
        raise ValueError(f"not a duration: {s!r}")
    us = ((int(m.group(2)) * 60 + int(m.group(3))) * 60 + int(m.group(4))) * 1_000_000
    us += int((m.group(5) or "").ljust(6, "0") or 0)
    return -us if m.group(1) else us


def canon_maria(col, v):
    """A value of the canonical SELECT -> canonical Python value."""
    if v is None:
        return None
    c = col["cat"]
    if c in ("int", "uint64", "bits"):
        return int(v)
    if c == "bit1":
        return bool(int(v))
    if c == "dec":
        return Decimal(v)
    if c == "float":
        return struct.pack("<f", float(v))
    if c == "double":
        return struct.pack("<d", float(v))
    if c in ("date", "datetime", "timestamp"):
        return int(v)
    if c == "time":
        return duration_us(v)
    if c == "bytes":
        return base64.b64decode(v)
    return v


def canon_lake(col, v):
    """A landed value (after verify_real's duck_expr/spark_expr, and a text
    sibling's value where the typed column is NULL) -> canonical."""
    if v is None:
        return None
    c = col["cat"]
    if c == "int":
        return int(v)
    if c in ("uint64", "dec"):
        return Decimal(v) if not isinstance(v, Decimal) else v
    if c == "bit1":
        return bool(v)
    if c == "bits":
        return int.from_bytes(bytes(v), "little")
    if c == "float":
        return struct.pack("<f", v)
    if c == "double":
        return struct.pack("<d", v)
    if c in ("date", "datetime", "timestamp"):
        return int(v)
    if c == "time":
        s = str(v)
        return int(s) if re.fullmatch(r"-?\d+", s) else duration_us(s)
    if c == "bytes":
        return bytes(v)
    return v


class LiveMariaDB:
    def __init__(self, socket, db):
        self.socket, self.db = socket, db

    def query(self, sql):
        out = subprocess.run(
            ["mariadb", "--no-defaults", f"--socket={self.socket}", "-u", "root", "--default-character-set=utf8mb4",
             "--init-command=SET time_zone = '+00:00'", "--batch", "--raw", "-N", self.db, "-e", sql],
            check=True, capture_output=True, text=True, encoding="utf-8").stdout
        return [line.split("\t") for line in out.splitlines()]

    def tables(self):
        rows = self.query(f"SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IFNULL(NUMERIC_PRECISION, 0), "
                          f"IFNULL(NUMERIC_SCALE, 0), COLUMN_KEY FROM information_schema.COLUMNS "
                          f"WHERE TABLE_SCHEMA = '{self.db}' ORDER BY TABLE_NAME, ORDINAL_POSITION")
        out = {}
        for t, name, dt, ct, p, s, key in rows:
            out.setdefault(t, {"columns": [], "keys": []})
            out[t]["columns"].append({"name": name, "data_type": dt, "column_type": ct,
                                      "precision": int(p), "scale": int(s)})
            if key == "PRI":
                out[t]["keys"].append(name)
        for t, meta in out.items():
            objs = ", ".join(f"'{c['name']}', {select_expr(dict(c, cat=category(c['data_type'], c['column_type'])))}"
                             for c in meta["columns"])
            meta["rows"] = [json.loads(r[0]) for r in self.query(f"SELECT JSON_OBJECT({objs}) FROM `{t}`")]
        return out


def load_tables(args):
    if args.dump:
        tables = json.loads(Path(args.dump).read_text(encoding="utf-8"))["tables"]
    else:
        tables = LiveMariaDB(args.socket, args.db).tables()
    for meta in tables.values():
        for c in meta["columns"]:
            c["cat"] = category(c["data_type"], c["column_type"])
    return tables


# --------------------------------------------------------------------------
# The capture


def load_capture(capture, table, keys):
    """[(line, op)] of the table's change messages, and per key (the after
    image's raw JSON values) the columns some after image carried."""
    f = Path(capture) / f"{PREFIX}.{table}.ndjson"
    out = []
    carried = {}
    if not f.exists():
        return f.name, out, carried
    db = table.split(".")[0]
    with open(f, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if not line or line == "null":
                continue
            m = json.loads(line)
            p = m.get("payload", m)
            if p.get("op") in OPS and (p.get("source") or {}).get("db") == db:
                out.append((line_no, OPS[p["op"]]))
                after = p.get("after")
                if after:
                    k = tuple(after.get(c) for c in keys)
                    carried.setdefault(k, set()).update(after)
    return f.name, out, carried


def count_lines(path):
    if not path.exists():
        return 0
    with open(path, encoding="utf-8") as fh:
        return sum(1 for line in fh if line.strip() and line.strip() != "null")


# --------------------------------------------------------------------------
# Checks


def verify(rep, args, tables, con, spark):
    lake = args.lake
    dead = vr.load_dead_letters(lake)
    rep.check(not dead, f"[{PREFIX}] dead letters: {len(dead)} (none expected)",
              [f"{s}:{o} {d.get('stage')}: {d.get('reason', '')[:200]}" for (s, o), d in sorted(dead.items())][:20])
    for topic, table in (("transaction", "_transactions"), ("", "_ddl")):
        want = count_lines(Path(args.capture) / (f"{PREFIX}.{topic}.ndjson" if topic else f"{PREFIX}.ndjson"))
        got = 0
        if list(Path(lake).glob(f"{table}/*/*.parquet")):
            got = con.execute(f"SELECT count(*) FROM read_parquet('{lake}/{table}/*/*.parquet', union_by_name = true)").fetchone()[0]
        rep.check(got == want, f"[{PREFIX}] {table}: {got} rows for {want} messages")

    for table, meta in sorted(tables.items()):
        cols = {c["name"]: c for c in meta["columns"]}
        keys = meta["keys"]
        lname = f"{args.db}.{table}"
        what = f"[{PREFIX}] {table}"
        fname, msgs, carried = load_capture(args.capture, lname, keys)
        tdir = Path(lake) / lname
        files = sorted(tdir.glob("*/*.parquet"))
        src = f"read_parquet('{tdir}/*/*.parquet', union_by_name = true, hive_partitioning = true)"

        # 1. exactly once
        want = {(fname, line): op for line, op in msgs}
        got, got_op, missing, twice, extra, wrong = vr.landed_once(con, src if files else None, want)
        rep.check(not (missing or twice or extra or wrong),
                  f"{what}: {sum(got.values())} change rows for {len(want)} change messages, each once",
                  [f"missing {k}" for k in missing[:5]] + [f"twice {k}" for k in twice[:5]]
                  + [f"extra {k}" for k in extra[:5]] + [f"op {k}: {got_op[k]}, message {want[k]}" for k in wrong[:5]])
        if not files:
            rep.check(not meta["rows"], f"{what}: no files, and MariaDB has {len(meta['rows'])} rows")
            continue

        # 2. types
        types = vr.duck_struct_fields(con, src, "after")
        tdetail, siblings = [], []
        for n, c in cols.items():
            exp = expected_duck_type(c)
            if types.get(n) != exp:
                tdetail.append(f"{n} ({c['column_type']}): {types.get(n)}, want {exp}")
            sib = n + vr.SIBLING_SUFFIX
            if sib in types:
                siblings.append(sib)
                if c["cat"] != "time" or types[sib] != "VARCHAR":
                    tdetail.append(f"{sib}: {types[sib]} beside a {c['column_type']} column (only TIME has a VARCHAR sibling)")
        dropped = [n for n in types if n not in cols and not n.endswith(vr.SIBLING_SUFFIX)]
        rep.check(not tdetail, f"{what}: column types (DuckDB)" + (f"; text siblings: {', '.join(siblings)}" if siblings else ""),
                  tdetail)
        if dropped:
            rep.note(f"{what}: landed columns no longer in MariaDB: {', '.join(dropped)}")

        # 3. current state
        t0 = time.time()
        mstate = {}
        for r in meta["rows"]:
            row = {n: canon_maria(c, r[n]) for n, c in cols.items()}
            mstate[tuple(row[k] for k in keys)] = row
        names = list(cols)

        def state_of(rows, get):
            out = {}
            for r in rows:
                row = {}
                for n in names:
                    try:
                        row[n] = canon_lake(cols[n], get(r, n))
                    except Exception as e:  # noqa: BLE001
                        row[n] = f"<undecodable {vr.short(get(r, n))}: {e}>"
                out[tuple(row[k] for k in keys)] = row
            return out

        drows = vr.duck_rebuild(con, src, names, keys, types)
        compare(rep, f"{what} DuckDB", state_of(drows, lambda r, n: r[len(keys) + names.index(n)]), mstate, names, carried)
        if args.current:
            cur = Path(args.lake) / "_current" / tdir.name
            if not cur.is_dir():
                rep.check(False, f"{what} cdclake snapshot: no state table in {cur}")
            else:
                crows = vr.duck_current(con, cur, names, keys, types)
                compare(rep, f"{what} cdclake snapshot (DuckDB)", state_of(crows, lambda r, n: r[names.index(n)]), mstate, names, carried)
        if spark is not None:
            try:
                srows, _ = vr.spark_rebuild(spark, str(tdir), names, keys)
                compare(rep, f"{what} Spark", state_of(srows, lambda r, n: r[n]), mstate, names, carried)
                cur = Path(args.lake) / "_current" / tdir.name
                if args.current and cur.is_dir():
                    crows, _ = vr.spark_current(spark, cur, names)
                    compare(rep, f"{what} cdclake snapshot (Spark)", state_of(crows, lambda r, n: r[n]), mstate, names, carried)
            except Exception as e:  # noqa: BLE001
                rep.check(False, f"{what} Spark: cannot read or rebuild the table", [vr.spark_error(e)])
        rep.note(f"{what}: state checks took {time.time() - t0:.1f}s")


def compare(rep, what, got, want, names, carried):
    """Compares two states. A column the lake has NULL where MariaDB has a
    value, and that no captured after image of the key carried, is a
    difference before cdclake (upstream): a column added with a default
    fills the existing rows without a change event."""
    bad, upstream = [], []
    for key in sorted(set(got) | set(want), key=repr):
        g, w = got.get(key), want.get(key)
        if g is None or w is None:
            bad.append(f"key {key}: " + ("missing in lake" if g is None else "not in MariaDB"))
            continue
        for n in names:
            if g[n] != w[n]:
                msg = f"key {key} column {n}: lake {vr.short(g[n])}, MariaDB {vr.short(w[n])}"
                if g[n] is None and n not in carried.get(key, ()):
                    upstream.append(msg + " (no captured change of the key carries the column)")
                else:
                    bad.append(msg)
    rep.check(not bad, f"{what}: current state equals MariaDB ({len(want)} rows)" +
              (f", {len(bad)} differences" if bad else ""), bad[:25])
    if upstream:
        rep.up(f"{what}: {len(upstream)} differences no captured message carries (not cdclake)", upstream[:25])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--capture")
    ap.add_argument("--lake")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--socket", help="the MariaDB server's socket (the workload's server)")
    src.add_argument("--dump", help="instead: the JSON that --save wrote")
    ap.add_argument("--save", metavar="FILE", help="with --socket: write MariaDB's tables and rows to FILE and exit")
    ap.add_argument("--db", default="shop")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--current", action="store_true",
                    help="also check each table's state table that cdclake snapshot built in LAKE/_current/TABLE")
    ap.add_argument("--report")
    args = ap.parse_args()

    if args.save:
        if not args.socket:
            ap.error("--save needs --socket")
        tables = LiveMariaDB(args.socket, args.db).tables()
        Path(args.save).write_text(json.dumps({"tables": tables}, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                                   encoding="utf-8")
        return
    if not args.capture or not args.lake:
        ap.error("--capture and --lake are needed")

    import duckdb

    os.environ.setdefault("TZ", "UTC")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    rep = vr.Report()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    tables = load_tables(args)
    spark = vr.start_spark(rep, args.no_spark)
    verify(rep, args, tables, con, spark)
    vr.finish(rep, args.report, spark)


if __name__ == "__main__":
    main()
