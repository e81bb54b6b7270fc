#!/usr/bin/env python3
"""Verifies lakes that cdclake landed from a real Debezium capture.

usage: verify_real.py --capture DIR --lake PREFIX[+catalog]=LAKE_DIR [--lake ...]
                      (--pg DSN | --pg-dump FILE) [--no-spark] [--current] [--plain-json] [--report FILE]
       verify_real.py --pg DSN --dump-pg FILE

--pg-dump verifies against the PostgreSQL state that --dump-pg saved (the
committed capture in testdata/debezium-real has one: _postgres.json), so a
capture can be checked without any service running.

For every topic prefix (connector) PREFIX, LAKE_DIR is the lake's folder on
disk (the versitygw posix folder of its bucket: DuckDB and Spark read the same
objects that cdclake wrote through the S3 API, from the file system). Checks:

1. exactly once: the lake's change rows of each table are exactly the change
   messages captured for it (op c/u/d/r/t; tombstones, heartbeats, transaction
   and logical-decoding messages excluded), matched by (file, line): none
   missing, none twice, none extra, same operation. A missing one is reported
   with its dead letter's reason.
2. every change row, value for value: each column of the before and after
   images equals the value in the captured message (decoded the way Debezium
   encodes the PostgreSQL type); a placeholder column (unchanged TOAST) must
   land NULL and be named in _cdc_<image>_absent. A ZonedTimestamp that
   TIMESTAMP(us, UTC) cannot hold (a non-zero 7th fractional digit, year
   294276) must land NULL in the typed column and as its exact text in the
   text sibling <column>__text; every other value in the typed column with
   the sibling NULL ("infinity"/"-infinity" as int64 max / -(int64 max),
   which DuckDB reads as infinity). The sibling is not a source column: the
   lake's value of c is c__text when c is NULL and c__text is not.
   _cdc_xid is source.txId (else source.xid, else transaction.id).
3. types: each column lands with the Parquet/DuckDB (and Spark) type the
   type table of docs/types.md gives for the PostgreSQL type (schemas enabled), or an
   inferred type (schemas disabled). PREFIX+catalog=LAKE_DIR names a lake of
   the schemaless connector landed with its catalog
   (testdata/e2e/shopraw-catalog.yaml): its columns must have the types of
   the schemas connector's lake (arrays excepted: the catalog leaves them to
   inference), and the values the catalog's types cannot hold must be dead
   letters (EXPECTED_DEAD_LETTERS), the only rows the state may lack.
   The decimals of a connector with decimal.handling.mode=string (read from
   the capture's _connectors.json) are exact decimal text.
4. current state: the table rebuilt from its change rows (docs/types.md "Current state
   of a table": the latest change per key decides whether the row exists; each
   column takes its latest value from an after image that carried it; a
   TRUNCATE removes the rows changed before it) equals SELECT * on PostgreSQL,
   with DuckDB and with Spark. Numerics compare as exact decimal text,
   timestamps as integer microseconds, floats bit for bit.
   Spark has no infinite timestamp: it reads int64 max / -(int64 max) us as
   the instants +294247-01-10T04:00:54.775807Z / -290308-12-21T19:59:05.224193Z,
   and the verifier compares exactly those raw values as infinity/-infinity
   (in a TIMESTAMP(us, UTC) column only). Spark cannot render TIME 24:00:00
   (86400000000 us, valid in PostgreSQL): the verifier reads TIME values as
   microseconds with time_diff(), which works, and reports the rendering
   failure as a known Spark limitation (a note, not a failure).
   A difference is attributed: when replaying the captured messages gives the
   same wrong value, the loss happened before cdclake (Debezium or logical
   decoding; reported as "upstream", not failed); otherwise it is cdclake's.

Exit status 1 when any cdclake-attributable check fails.
"""
import argparse
import base64
import json
import math
import os
import re
import struct
import sys
import time
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

PLACEHOLDER = "__debezium_unavailable_value"
tx_blocks = {}  # table -> {line: the message's transaction block}
OPS = {"c": "INSERT", "u": "UPDATE", "d": "DELETE", "r": "READ", "t": "TRUNCATE"}
# Debezium's MicroDuration: months are 365.25 / 12 days.
DAYS_PER_MONTH_AVG = 365.25 / 12.0

# Dead letters that are the right outcome: values PostgreSQL and Debezium
# produce that cdclake must reject. Entries are (flavour, table, substring of
# the reason, substring of the message value). With schemas none are
# expected: values that TIMESTAMP(µs, UTC) cannot hold (year 294276) land in
# the column's text sibling, and "infinity"/"-infinity" as int64 max /
# -(int64 max). A catalog's declared type has no sibling: a value it cannot
# hold is a dead letter naming column, type and value.
EXPECTED_DEAD_LETTERS = [
    ("catalog", "edge_values", 'column "c_tstz" (timestamp(us,utc)): value "+294276-12-31T23:59:59.999999Z"', "+294276"),
    ("catalog", "edge_values", 'column "c_numeric_any" (decimal_text): value "NAN": not a decimal number', '"NAN"'),
]
# decimal.handling.mode of the connector being verified (_connectors.json).
decimal_mode = "precise"

# A typed column's text sibling (cdclake: values the type cannot hold, as
# exact text; only ZonedTimestamp columns have one).
SIBLING_SUFFIX = "__text"
INT64_MAX = 2**63 - 1
# TIME values from 24:00:00 on (PostgreSQL allows exactly 24:00:00).
DAY_US = 86_400_000_000


# --------------------------------------------------------------------------
# Reporting


class Report:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.upstream = 0
        self.lines = []

    def check(self, ok, what, detail=None):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        self.emit(("ok   " if ok else "FAIL ") + what, detail)
        return ok

    def note(self, what, detail=None):
        self.emit("note " + what, detail)

    def up(self, what, detail=None):
        self.upstream += 1
        self.emit("UPSTREAM " + what, detail)

    def emit(self, line, detail=None):
        print(line, flush=True)
        self.lines.append(line)
        if detail:
            for d in detail:
                s = "       " + d
                print(s, flush=True)
                self.lines.append(s)


def short(v, n=120):
    s = repr(v)
    return s if len(s) <= n else s[: n - 1] + "…"


def q(name):
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------
# PostgreSQL column categories and canonical values
#
# Every value is compared in a canonical form: ints as int, decimals as exact
# text, floats as their IEEE bits (hex), dates as days since 1970-01-01,
# timestamps as microseconds since 1970-01-01 (UTC for timestamptz), times as
# microseconds since midnight, intervals as Debezium's microseconds, bytes as
# bytes, JSON as its exact text, lists as tuples of canonical elements.


class Col:
    def __init__(self, name, typname, fmt, typmod_scale, typtype, elem):
        self.name = name
        self.typname = typname  # pg_type.typname (_int4 for int4[])
        self.fmt = fmt  # format_type(), e.g. numeric(12,4)
        self.scale = typmod_scale
        self.enum = typtype == "e"
        self.elem = elem  # element Col for arrays
        self.cat = category(typname, fmt, typtype)
        # time.precision.mode=adaptive: timestamp(0..3) and time(0..3) are
        # millisecond based (io.debezium.time.Timestamp / Time), 4..6 micro.
        m = re.match(r"(timestamp|time)\((\d)\)", fmt or "")
        self.precision_ms = bool(m) and int(m.group(2)) <= 3

    def __repr__(self):
        return f"{self.name} {self.fmt}"


def category(typname, fmt, typtype):
    if typtype == "e":
        return "str"
    if typname.startswith("_"):
        return "list"
    return {
        "int2": "int", "int4": "int", "int8": "int",
        "numeric": "dec",
        "float4": "f32", "float8": "f64",
        "text": "str", "varchar": "str", "bpchar": "str", "uuid": "str",
        "bool": "bool",
        "date": "days",
        "timestamp": "ts", "timestamptz": "tstz",
        "time": "time",
        "interval": "interval",
        "jsonb": "json", "json": "json",
        "bytea": "bytes",
    }.get(typname, "str")


def f32_hex(x):
    x = float(x)
    if math.isnan(x):
        return "NaN"
    return struct.unpack(">f", struct.pack(">f", x))[0].hex()


def f64_hex(x):
    x = float(x)
    if math.isnan(x):
        return "NaN"
    return x.hex()


def dec_text(d):
    if isinstance(d, Decimal):
        if d.is_nan():
            return "NaN"
        return format(d, "f")
    return str(d)


def days_from_civil(y, m, d):
    # Howard Hinnant's days_from_civil (proleptic Gregorian, astronomical
    # years: -0044 is 45 BC). Python's // already floors, so the era is
    # y // 400 (C's "(y - 399) / 400" for negative y is that floor).
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


ISO_TS = re.compile(r"^([+-]?\d{4,})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d(?::?\d\d)?)?$")


def zoned_to_us(s):
    """Timestamp text (Debezium's ZonedTimestamp, or the text a reader renders
    for a column that landed as text) -> microseconds since the epoch (UTC)."""
    m = ISO_TS.match(s)
    if not m:
        return ("text", s)  # e.g. "infinity"
    y, mo, d, hh, mi, ss, frac, off = m.groups()
    days = days_from_civil(int(y), int(mo), int(d))
    us = ((days * 24 + int(hh)) * 60 + int(mi)) * 60 + int(ss)
    us = us * 1_000_000 + int((frac or "0").ljust(6, "0")[:6])
    if off and off != "Z":
        sign = 1 if off[0] == "+" else -1
        digits = off[1:].replace(":", "")
        us -= sign * (int(digits[0:2]) * 3600 + int(digits[2:4] or 0) * 60) * 1_000_000
    return us


def zoned_fits(s):
    """Whether a ZonedTimestamp text can land as TIMESTAMP(µs, UTC) (docs/types.md):
    "infinity" and "-infinity" (as int64 max / -(int64 max)), and finite
    values with no non-zero digit past microseconds whose microseconds since
    1970 lie strictly between those two (the extremes mean infinity)."""
    if s in ("infinity", "-infinity"):
        return True
    m = ISO_TS.match(s)
    if not m:
        return False
    frac = m.group(7) or ""
    if frac[6:].strip("0"):
        return False
    us = zoned_to_us(s)
    return isinstance(us, int) and -INT64_MAX < us < INT64_MAX


def debezium_interval_us(years, months, days, hours, minutes, seconds):
    """io.debezium.time.MicroDuration.durationMicros (the PostgreSQL connector
    passes the average month, 365.25 / 12 days, and PGInterval's fields)."""
    n_days = (years * 12 + months) * DAYS_PER_MONTH_AVG + days
    n_seconds = ((n_days * 24 + hours) * 60 + minutes) * 60 + seconds
    return int(n_seconds * 1e6)  # Java's (long) cast truncates toward zero


def canon_debezium(col, v, precision_ms=False):
    """A Debezium JSON value (schemas on or off: the payload is the same) ->
    canonical. Returns PLACEHOLDER for Debezium's unavailable-value marker."""
    if v is None:
        return None
    c = col.cat
    if c in ("str", "json"):
        return PLACEHOLDER if v == PLACEHOLDER else v
    if c == "int":
        return int(v)
    if c == "bool":
        return bool(v)
    if c == "f32":
        return f32_hex(v)
    if c == "f64":
        return f64_hex(v)
    if c == "dec":
        if decimal_mode == "string":
            return dec_text(Decimal(v))
        if isinstance(v, dict):  # VariableScaleDecimal
            unscaled = int.from_bytes(base64.b64decode(v["value"]), "big", signed=True)
            return dec_text(Decimal(f"{unscaled}E-{int(v['scale'])}"))  # exact: no context rounding
        unscaled = int.from_bytes(base64.b64decode(v), "big", signed=True)
        return dec_text(Decimal(f"{unscaled}E-{col.scale}"))
    if c == "bytes":
        b = base64.b64decode(v)
        return PLACEHOLDER if b == PLACEHOLDER.encode() else b
    if c == "days":
        return int(v)
    if c == "ts":
        return int(v) * 1000 if precision_ms else int(v)
    if c == "tstz":
        return zoned_to_us(v)
    if c == "time":
        return int(v) * 1000 if precision_ms else int(v)
    if c == "interval":
        return int(v)
    if c == "list":
        if v == [PLACEHOLDER]:
            return PLACEHOLDER
        return tuple(canon_debezium(col.elem, x) for x in v)
    return v


def canon_pg(col, v):
    """A value from the canonicalising PostgreSQL query -> canonical."""
    if v is None:
        return None
    c = col.cat
    if c in ("str", "json", "bool", "bytes"):
        return bytes(v) if c == "bytes" else v
    if c == "int":
        return int(v)
    if c == "f32":
        return f32_hex(v)
    if c == "f64":
        return f64_hex(v)
    if c == "dec":
        return v  # numeric::text, exact
    if c in ("days", "ts", "tstz", "time"):
        return int(v) if re.fullmatch(r"-?\d+", v) else ("text", v)
    if c == "interval":
        y, mo, d, h, mi, sec = v.split(",")
        return debezium_interval_us(int(y), int(mo), int(d), int(h), int(mi), float(sec))
    if c == "list":
        return tuple(canon_pg(col.elem, x) for x in v)
    return v


def pg_expr(col):
    n = q(col.name)
    c = col.cat
    if c == "dec" or c == "json" or (c == "str" and (col.enum or col.typname == "uuid")):
        return f"{n}::text"
    if c == "days":
        return f"CASE WHEN isfinite({n}) THEN ({n} - DATE '1970-01-01')::text ELSE {n}::text END"
    if c in ("ts", "tstz"):
        # Days and time of day apart: PostgreSQL 15's extract(epoch) loses
        # microseconds near the end of the timestamp range. The session's
        # TimeZone is UTC, so a timestamptz casts to its UTC date and time.
        return (f"CASE WHEN isfinite({n}) THEN (({n}::date - DATE '1970-01-01')::numeric * 86400000000 "
                f"+ (extract(epoch FROM {n}::time) * 1000000)::bigint)::text ELSE {n}::text END")
    if c == "time":
        return f"(extract(epoch FROM {n}) * 1000000)::bigint::text"
    if c == "interval":
        return (f"CASE WHEN {n} IS NOT NULL THEN concat_ws(',', extract(year FROM {n})::bigint, extract(month FROM {n})::bigint, "
                f"extract(day FROM {n})::bigint, extract(hour FROM {n})::bigint, extract(minute FROM {n})::bigint, "
                f"extract(second FROM {n})) END")
    if c == "list" and col.elem.cat not in ("int", "str", "bool"):
        return f"{n}::text[]"
    return n


# DuckDB and Spark expressions that canonicalise a landed value, given the
# landed DuckDB type of the column (schemas on); schemaless values are decoded
# in Python from what was inferred.

def duck_expr(expr, dtype):
    if dtype == "DATE":
        return f"({expr} - DATE '1970-01-01')"
    if dtype.startswith("TIMESTAMP"):
        # Microseconds as text; DuckDB's infinite timestamps (int64 max and
        # -(int64 max)) as 'infinity' / '-infinity' (epoch_us gives NULL).
        return f"(CASE WHEN isinf({expr}) THEN CAST({expr} AS VARCHAR) ELSE CAST(epoch_us({expr}) AS VARCHAR) END)"
    if dtype.startswith("TIME"):
        return (f"(extract('hour' FROM {expr}) * 3600000000 + extract('minute' FROM {expr}) * 60000000 "
                f"+ extract('microseconds' FROM {expr}))")
    return expr


def spark_expr(expr, dtype):
    if dtype == "date":
        return f"datediff({expr}, DATE'1970-01-01')"
    if dtype == "timestamp":
        # Spark has no infinite timestamp: cdclake's infinity, int64 max /
        # -(int64 max) µs, reads as an instant in year 294247 / -290308. The
        # raw value is compared as infinity (TIMESTAMP(µs, UTC) only).
        u = f"unix_micros({expr})"
        return (f"(CASE WHEN {u} = {INT64_MAX}L THEN 'infinity' WHEN {u} = -{INT64_MAX}L THEN '-infinity' "
                f"ELSE CAST({u} AS STRING) END)")
    if dtype == "timestamp_ntz":
        return f"CAST(unix_micros(CAST({expr} AS TIMESTAMP)) AS STRING)"
    if dtype.startswith("time("):
        # time_diff works on the stored nanoseconds, so it also reads
        # 24:00:00, which hour(), CAST(... AS STRING) and collect() reject.
        return f"time_diff('MICROSECOND', TIME'00:00:00', {expr})"
    return expr


def with_sibling(typed_expr, sibling_col, text_type):
    """SQL (DuckDB: text_type VARCHAR, Spark: STRING): the lake's value of a
    column that has a text sibling: the sibling's text when the typed value
    is NULL and the sibling is not, else the typed value (as text)."""
    return (f"(CASE WHEN {typed_expr} IS NULL AND {sibling_col} IS NOT NULL THEN {sibling_col} "
            f"ELSE CAST({typed_expr} AS {text_type}) END)")


def canon_lake(col, v, flavor):
    """A landed value (after the engine expression above) -> canonical."""
    if v is None:
        return None
    c = col.cat
    if flavor == "raw" or (flavor == "catalog" and c == "list"):
        # Schemaless: cdclake inferred a type from the JSON; decode the
        # landed value as the JSON value Debezium sent.
        return canon_debezium(col, raw_value(col, v), precision_ms=col.precision_ms)
    if c == "bytes":
        return bytes(v)
    if c == "f32":
        return f32_hex(v)
    if c == "f64":
        return f64_hex(v)
    if c == "dec":
        return dec_text(v)
    if c in ("ts", "tstz") and isinstance(v, str):
        if re.fullmatch(r"-?\d+", v):
            return int(v)  # microseconds (duck_expr / spark_expr)
        # 'infinity' / '-infinity', or the text of the column's sibling
        return zoned_to_us(v)
    if c in ("days", "ts", "tstz", "time", "int", "interval"):
        return int(v)
    if c == "list":
        if isinstance(v, str):
            v = json.loads(v)
        return tuple(canon_lake(col.elem, x, flavor) for x in v)
    return v


def raw_value(col, v):
    """A schemaless landed value -> the JSON value Debezium sent."""
    c = col.cat
    if c in ("str", "json"):
        return v
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, str) and c in ("list",) or (isinstance(v, str) and c == "dec" and v.startswith("{")):
        return json.loads(v)
    if isinstance(v, str) and c in ("int", "days", "ts", "time", "interval"):
        return int(v)
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, (list, tuple)):
        return list(v)
    return v


# --------------------------------------------------------------------------
# The capture


def load_capture(capture, prefix):
    """{table: [(line, op, before, after, ts_ms_cols)]} plus counts."""
    tables = {}
    other = Counter()
    global tx_blocks
    tx_blocks = {}
    for f in sorted(Path(capture).glob(f"{prefix}.public.*.ndjson")):
        table = f.name[len(prefix) + len(".public."): -len(".ndjson")]
        rows = []
        with open(f, encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, 1):
                line = line.rstrip("\n")
                if not line or line == "null":
                    other["tombstones"] += 1
                    continue
                m = json.loads(line)
                schema = None
                if isinstance(m, dict) and "payload" in m and "schema" in m:
                    schema, m = m["schema"], m["payload"]
                if m is None:
                    other["tombstones"] += 1
                    continue
                op = m.get("op")
                if op not in OPS:
                    other[f"op {op}"] += 1
                    continue
                rows.append((line_no, op, m.get("before"), m.get("after"), schema, m.get("source")))
                if m.get("transaction"):
                    tx_blocks.setdefault(table, {})[line_no] = m["transaction"]
        tables[table] = (f.name, rows)
    for kind in ("transaction", "message"):
        f = Path(capture) / f"{prefix}.{kind}.ndjson"
        if f.exists():
            other[kind] = sum(1 for ln in open(f, encoding="utf-8") if ln.strip())
    hb = Path(capture) / f"__debezium-heartbeat.{prefix}.ndjson"
    if hb.exists():
        other["heartbeats"] = sum(1 for ln in open(hb, encoding="utf-8") if ln.strip())
    return tables, other


def replay(rows, cols, keys):
    """The reference: the current state from the captured messages, replayed
    in order. {key: {col: canonical}}"""
    state = {}
    for _, op, before, after, _, _ in rows:
        if op == "t":
            state.clear()
            continue
        img = after if op != "d" else before
        if img is None:
            continue
        key = tuple(canon_debezium(cols[k], img.get(k), cols[k].precision_ms) for k in keys)
        if op == "d":
            state.pop(key, None)
            continue
        row = dict(state.get(key, {}))
        for name, col in cols.items():
            if name not in after:
                continue
            v = canon_debezium(col, after[name], col.precision_ms)
            if v == PLACEHOLDER:
                continue
            row[name] = v
        state[key] = row
    return state


# --------------------------------------------------------------------------
# PostgreSQL


class LivePostgres:
    """Reads table metadata and current state from a running PostgreSQL."""

    def __init__(self, dsn):
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True, options=(
            "-c TimeZone=UTC -c extra_float_digits=3 -c DateStyle=ISO -c IntervalStyle=postgres"))
        self.meta = {}

    def tables(self):
        with self.conn.cursor() as cur:
            cur.execute("""
              SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 1""")
            return [r[0] for r in cur.fetchall()]

    def columns(self, table):
        with self.conn.cursor() as cur:
            cur.execute("""
              SELECT a.attname, t.typname, format_type(a.atttypid, a.atttypmod),
                     CASE WHEN t.typname IN ('numeric', '_numeric') AND a.atttypmod > 0 THEN (a.atttypmod - 4) & 65535 END,
                     t.typtype, et.typname, et.typtype
              FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
              LEFT JOIN pg_type et ON et.oid = t.typelem AND t.typname LIKE '\\_%%'
              WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum""",
                        (f"public.{table}",))
            meta = [list(r) for r in cur.fetchall()]
            cur.execute("""
              SELECT a.attname FROM pg_index i
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
              WHERE i.indrelid = %s::regclass AND i.indisprimary
              ORDER BY array_position(i.indkey::int2[], a.attnum)""", (f"public.{table}",))
            keys = [r[0] for r in cur.fetchall()]
        self.meta[table] = (meta, keys)
        return cols_from_meta(meta), keys

    def state(self, table, cols, keys):
        exprs = ", ".join(f"{pg_expr(c)} AS {q(n)}" for n, c in cols.items())
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT {exprs} FROM public.{q(table)}")
            names = list(cols)
            out = {}
            for r in cur.fetchall():
                row = {n: canon_pg(cols[n], v) for n, v in zip(names, r)}
                out[tuple(row[k] for k in keys)] = row
        return out

    def dump(self, path):
        """Writes every table's columns, key and canonical current state as
        JSON, so that a capture can be verified later without PostgreSQL."""
        doc = {}
        for t in self.tables():
            cols, keys = self.columns(t)
            rows = self.state(t, cols, keys)
            doc[t] = {"columns": self.meta[t][0], "key": keys,
                      "rows": [[to_json(row[n]) for n in cols] for _, row in sorted(rows.items(), key=lambda kv: repr(kv[0]))]}
        Path(path).write_text(json.dumps(doc, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")


class DumpedPostgres:
    """The same, from a file LivePostgres.dump wrote."""

    def __init__(self, path):
        self.doc = json.loads(Path(path).read_text(encoding="utf-8"))

    def tables(self):
        return sorted(self.doc)

    def columns(self, table):
        t = self.doc[table]
        return cols_from_meta(t["columns"]), t["key"]

    def state(self, table, cols, keys):
        out = {}
        for values in self.doc[table]["rows"]:
            row = {n: from_json(v) for n, v in zip(cols, values)}
            out[tuple(row[k] for k in keys)] = row
        return out


def cols_from_meta(meta):
    cols = {}
    for name, typname, fmt, scale, typtype, etypname, etyptype in meta:
        elem = Col(name + "[]", etypname, etypname, scale, etyptype, None) if etypname else None
        cols[name] = Col(name, typname, fmt, scale, typtype, elem)
    return cols


def to_json(v):
    if isinstance(v, (bytes, bytearray)):
        return {"base64": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "text":
        return {"text": v[1]}
    if isinstance(v, tuple):
        return [to_json(x) for x in v]
    return v


def from_json(v):
    if isinstance(v, dict):
        return base64.b64decode(v["base64"]) if "base64" in v else ("text", v["text"])
    if isinstance(v, list):
        return tuple(from_json(x) for x in v)
    return v


# --------------------------------------------------------------------------
# Expected landed types


def expected_duck_type(col, flavor):
    """Allowed DuckDB types (prefixes) of a landed column."""
    c = col.cat
    if flavor == "raw" or (flavor == "catalog" and c == "list"):
        return {
            "int": ("BIGINT",), "bool": ("BOOLEAN",), "str": ("VARCHAR",), "json": ("VARCHAR", "JSON"),
            "dec": ("VARCHAR", "JSON"), "f32": ("VARCHAR", "BIGINT", "DOUBLE"), "f64": ("VARCHAR", "BIGINT", "DOUBLE"),
            "bytes": ("VARCHAR",), "days": ("BIGINT",), "ts": ("BIGINT",), "tstz": ("VARCHAR",),
            "time": ("BIGINT",), "interval": ("BIGINT",), "list": ("JSON", "VARCHAR", "BIGINT[]", "VARCHAR[]"),
        }[c]
    if c == "int":
        return {"int2": ("SMALLINT",), "int4": ("INTEGER",), "int8": ("BIGINT",)}[col.typname]
    if c == "dec":
        m = re.match(r"numeric\((\d+),(\d+)\)", col.fmt)
        if m and int(m.group(1)) <= 38:
            return (f"DECIMAL({m.group(1)},{m.group(2)})",)
        return ("VARCHAR",)
    if c == "list":
        inner = expected_duck_type(col.elem, flavor)
        return tuple(t + "[]" for t in inner)
    return {
        "f32": ("FLOAT",), "f64": ("DOUBLE",), "str": ("VARCHAR",), "bool": ("BOOLEAN",),
        "days": ("DATE",), "ts": ("TIMESTAMP",), "tstz": ("TIMESTAMP WITH TIME ZONE",),
        "time": ("TIME",), "interval": ("BIGINT",), "json": ("JSON",), "bytes": ("BLOB",),
    }[c]


def type_ok(got, allowed):
    return got in allowed


# --------------------------------------------------------------------------
# DuckDB


def duck_struct_fields(con, src, image):
    """{field: DuckDB type} of the after/before struct."""
    t = con.execute(f"SELECT typeof({image}) FROM {src} WHERE {image} IS NOT NULL LIMIT 1").fetchone()
    if not t:
        t = con.execute(f"SELECT typeof({image}) FROM {src} LIMIT 1").fetchone()
    if not t:
        return {}
    rows = con.execute(f"DESCRIBE SELECT {image}.* FROM {src}").fetchall()
    return {r[0]: r[1] for r in rows}


def duck_rebuild(con, src, cols, keys, types):
    """The current state with DuckDB, as docs/types.md describes ("latest" by
    source operation time, then offset: _cdc_ts DESC, _cdc_offset DESC)."""
    kx = ", ".join(f"coalesce(after.{q(k)}, before.{q(k)}) AS {q('k_' + k)}" for k in keys)
    kk = ", ".join(q("k_" + k) for k in keys)
    order = "ORDER BY _cdc_ts DESC, _cdc_offset DESC"
    parts = [f"""
      ch AS (SELECT _cdc_op, _cdc_ts, _cdc_source, _cdc_partition, _cdc_offset, {kx}, after,
                    coalesce(_cdc_after_absent, []) AS absent FROM {src}),
      tr AS (SELECT coalesce(max(_cdc_offset), -1) AS t FROM ch WHERE _cdc_op = 'TRUNCATE'),
      c2 AS (SELECT * FROM ch WHERE _cdc_op <> 'TRUNCATE' AND _cdc_offset > (SELECT t FROM tr)),
      dl AS (SELECT {kk}, max(_cdc_offset) AS d FROM c2 WHERE _cdc_op = 'DELETE' GROUP BY ALL),
      c3 AS (SELECT c2.* FROM c2 LEFT JOIN dl USING ({kk}) WHERE dl.d IS NULL OR c2._cdc_offset > dl.d),
      live AS (SELECT {kk} FROM c2 QUALIFY row_number() OVER (PARTITION BY {kk} {order}) = 1 AND _cdc_op <> 'DELETE')"""]
    sel = [f"live.{q('k_' + k)}" for k in keys]
    joins = []
    for i, name in enumerate(cols):
        if name not in types:
            sel.append(f"NULL AS {q(name)}")
            continue
        e = duck_expr(f"after.{q(name)}", types[name])
        sib = name + SIBLING_SUFFIX
        if sib in types and sib not in cols:
            e = with_sibling(e, f"after.{q(sib)}", "VARCHAR")
        parts.append(f"""
      v{i} AS (SELECT {kk}, {e} AS v FROM c3 WHERE after IS NOT NULL AND NOT list_contains(absent, '{name}')
               QUALIFY row_number() OVER (PARTITION BY {kk} {order}) = 1)""")
        sel.append(f"v{i}.v AS {q(name)}")
        joins.append(f"LEFT JOIN v{i} USING ({kk})")
    sql = "WITH " + ",".join(parts) + f"\nSELECT {', '.join(sel)} FROM live {' '.join(joins)}"
    return con.execute(sql).fetchall()


def state_files(path):
    """The files of the state table in path (LAKE/_current/TABLE): those its
    newest manifest names (a state table of an Iceberg table keeps the
    files of older versions beside them)."""
    path = Path(path)
    manifests = sorted((path / "_manifest").glob("*.json"))
    if not manifests:
        return sorted(str(f) for f in path.glob("*.parquet"))
    lake = path.parent.parent
    return [str(lake / k) for k in json.loads(manifests[-1].read_text())["files"] if k]


def duck_current(con, path, cols, keys, types):
    """The rows of the state table cdclake snapshot built in path (its
    columns at top level), each as the values of cols."""
    sel = []
    for name in cols:
        if name not in types:
            sel.append(f"NULL AS {q(name)}")
            continue
        e = duck_expr(q(name), types[name])
        sib = name + SIBLING_SUFFIX
        if sib in types and sib not in cols:
            e = with_sibling(e, q(sib), "VARCHAR")
        sel.append(f"{e} AS {q(name)}")
    files = state_files(path)
    if not files:
        return []
    return con.execute(f"SELECT {', '.join(sel)} FROM read_parquet({files!r}, union_by_name = true)").fetchall()


# --------------------------------------------------------------------------
# Spark


def spark_session():
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[2]").appName("cdclake-verify-real")
            .config("spark.driver.memory", "1g")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.shuffle.partitions", "4")
            # Spark 4.1+ reads Parquet TIME only with the TIME type enabled.
            .config("spark.sql.timeType.enabled", "true")
            .getOrCreate())


def spark_error(e):
    """The first lines of a Spark error that say what went wrong."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip() and not ln.strip().startswith("at ")]
    keep = [ln for ln in lines if any(w in ln for w in ("Exception", "Error", "ERROR", "[", "Failed", "incompatible"))]
    return " | ".join((keep or lines)[:3])[:600]


def spark_rebuild(spark, path, cols, keys):
    """The current state with Spark (docs/types.md's window form, "latest" by
    _cdc_ts then _cdc_offset; per column max_by over the (time, offset) of
    the after images that carried the column)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.read.option("mergeSchema", "true").parquet(path)
    after_t = {f.name: f.dataType.simpleString() for f in df.schema["after"].dataType.fields}
    kcols = [F.coalesce(F.col(f"after.`{k}`"), F.col(f"before.`{k}`")).alias(f"k_{k}") for k in keys]
    kn = [f"k_{k}" for k in keys]
    absent = (F.coalesce(F.col("_cdc_after_absent"), F.array().cast("array<string>"))
              if "_cdc_after_absent" in df.columns else F.array().cast("array<string>"))
    ch = df.select(F.col("_cdc_op").alias("op"), F.col("_cdc_ts").alias("ts"), F.col("_cdc_source").alias("src"),
                   F.col("_cdc_partition").alias("part"), F.col("_cdc_offset").alias("off"),
                   *kcols, "after", absent.alias("absent"))
    t = ch.where("op = 'TRUNCATE'").agg(F.max("off")).first()[0]
    c2 = ch.where((F.col("op") != "TRUNCATE") & (F.col("off") > (t if t is not None else -1)))
    w = Window.partitionBy(*kn).orderBy(F.col("ts").desc(), F.col("off").desc())
    live = c2.withColumn("rn", F.row_number().over(w)).where("rn = 1 AND op <> 'DELETE'").select(*kn)
    dl = c2.where("op = 'DELETE'").groupBy(*kn).agg(F.max("off").alias("d"))
    c3 = c2.join(dl, kn, "left").where("d IS NULL OR off > d")
    ordkey = F.struct(F.col("ts"), F.col("off"))
    aggs = []
    for name in cols:
        if name not in after_t:
            aggs.append(F.lit(None).alias(name))
            continue
        carried = F.col("after").isNotNull() & ~F.array_contains(F.col("absent"), name)
        e = spark_expr(f"after.`{name}`", after_t[name])
        sib = name + SIBLING_SUFFIX
        if sib in after_t and sib not in cols:
            e = with_sibling(e, f"after.`{sib}`", "STRING")
        val = F.expr(e)
        aggs.append(F.max_by(F.struct(val.alias("v")), F.when(carried, ordkey)).getField("v").alias(name))
    vals = c3.groupBy(*kn).agg(*aggs)
    return live.join(vals, kn, "left").collect(), after_t


def spark_current(spark, path, cols):
    """The rows of the state table cdclake snapshot built in path, read by
    Spark, as {name: value} rows, and the columns' Spark types."""
    from pyspark.sql import functions as F

    files = state_files(path)
    if not files:
        return [], {}
    df = spark.read.option("mergeSchema", "true").parquet(*files)
    t = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    sel = []
    for name in cols:
        if name not in t:
            sel.append(F.lit(None).alias(name))
            continue
        e = spark_expr(f"`{name}`", t[name])
        sib = name + SIBLING_SUFFIX
        if sib in t and sib not in cols:
            e = with_sibling(e, f"`{sib}`", "STRING")
        sel.append(F.expr(e).alias(name))
    return df.select(*sel).collect(), t


def spark_time_limitation(spark, path, after_t):
    """Known Spark limitation, not a cdclake failure: Spark stores TIME as
    nanoseconds of the day but renders and converts it through
    java.time.LocalTime, which ends at 23:59:59.999999999; PostgreSQL's
    24:00:00 (MicroTime 86400000000, landed as is) therefore fails CAST(... AS
    STRING), hour() and collect(). Returns a note per TIME column holding
    such a value, with what Spark says when the value is rendered."""
    from pyspark.sql import functions as F

    df = spark.read.option("mergeSchema", "true").parquet(path)
    notes = []
    for name, dtype in after_t.items():
        if not dtype.startswith("time("):
            continue
        for img in ("after", "before"):
            us = f"time_diff('MICROSECOND', TIME'00:00:00', {img}.`{name}`)"
            rows = df.where(F.expr(f"{us} >= {DAY_US}")).select(F.expr(us).alias("us")).collect()
            if not rows:
                continue
            # The failure is expected: keep its stack trace out of the log.
            spark.sparkContext.setLogLevel("OFF")
            try:
                df.where(F.expr(f"{us} >= {DAY_US}")).select(F.expr(f"CAST({img}.`{name}` AS STRING)")).collect()
                outcome = "Spark renders it"
            except Exception as e:  # noqa: BLE001
                m = re.search(r"(java\.time\.\w+: [^\n|]*)", str(e))
                outcome = "CAST(... AS STRING) fails: " + (m.group(1) if m else spark_error(e))[:300]
            finally:
                spark.sparkContext.setLogLevel("ERROR")
            notes.append(f"{img}.{name}: {len(rows)} value(s) of {rows[0]['us']} µs (24:00:00); "
                         f"read as µs with time_diff() and compared; {outcome}")
    return notes


# --------------------------------------------------------------------------
# Checks


def load_dead_letters(lake):
    out = {}
    for f in sorted(Path(lake).glob("_dead_letter/**/*.ndjson")):
        for line in open(f, encoding="utf-8"):
            d = json.loads(line)
            out[(d["source"], int(d["offset"]))] = d
    return out


def expected_dead_letter(flavor, table, d):
    return any(f == flavor and t == table and c in d.get("reason", "") and s in (d.get("value") or "")
               for f, t, c, s in EXPECTED_DEAD_LETTERS)


def landed_once(con, src, want):
    """Matches the change rows of src (None: no files) with want, {(file,
    line): operation}: returns the row counts and operations by position and
    the positions missing, landed twice, not wanted, or with another
    operation."""
    got, got_op = Counter(), {}
    if src is not None:
        for s, off, op in con.execute(f"SELECT _cdc_source, _cdc_offset, _cdc_op FROM {src}").fetchall():
            got[(s, off)] += 1
            got_op[(s, off)] = op
    missing = [k for k in want if k not in got]
    twice = [k for k, n in got.items() if n > 1]
    extra = [k for k in got if k not in want]
    wrong = [k for k in want if k in got_op and got_op[k] != want[k]]
    return got, got_op, missing, twice, extra, wrong


def compare_states(rep, what, got, pg, ref, cols, keys, findings, excused=()):
    """got/pg/ref: {key: {col: canonical}}. Attributes each difference.
    excused: keys whose changes include an expected dead letter (their rows
    may differ; a note counts them)."""
    bad, upstream = [], []
    excused_diff = 0
    for key in sorted(set(got) | set(pg), key=repr):
        g, p, r = got.get(key), pg.get(key), ref.get(key)
        if key in excused:
            excused_diff += g != p
            continue
        if g is None or p is None:
            side = "missing in lake" if g is None else "not in PostgreSQL"
            ref_agrees = (r is None) == (p is None)
            msg = f"key {key}: {side}"
            (upstream if (g is None) == (r is None) and not ref_agrees else bad).append(msg)
            continue
        for name in cols:
            gv, pv = g.get(name), p.get(name)
            if gv == pv:
                continue
            rv = r.get(name) if r else None
            msg = f"key {key} column {name}: lake {short(gv)} PostgreSQL {short(pv)} capture {short(rv)}"
            (upstream if rv == gv else bad).append(msg)
    rep.check(not bad, f"{what}: current state equals PostgreSQL ({len(pg)} rows)" +
              (f", {len(bad)} differences" if bad else "") +
              (f"; {excused_diff} rows differ by their expected dead letters" if excused_diff else ""), bad[:25])
    if upstream:
        rep.up(f"{what}: {len(upstream)} differences the captured messages already carry (Debezium/logical decoding, not cdclake)",
               upstream[:25])
    findings.extend(bad)


def kafka_positions(con, capture, lake):
    """For a lake landed straight from Kafka (its _cdc_source is a topic, not
    a captured file), loads the capture's manifest into DuckDB and returns a
    function giving the partition of a captured (file, line); None for a
    lake landed from the captured files. A message's (topic, partition,
    offset) is the capture's (topic.ndjson, first_line + offset -
    first_offset) of that partition."""
    one = con.execute(f"SELECT _cdc_source FROM read_parquet('{lake}/*/*/*.parquet', union_by_name = true) LIMIT 1").fetchone()
    if one is None or one[0].endswith(".ndjson"):
        return None
    manifest = Path(capture) / "_manifest.tsv"
    con.execute(f"""CREATE OR REPLACE TABLE manifest AS
        SELECT topic, partition::INTEGER AS partition, topic || '.ndjson' AS file, first_line::BIGINT AS first_line,
               messages::BIGINT AS messages, first_offset::BIGINT AS first_offset
        FROM read_csv('{manifest}', delim = '\t', header = true, all_varchar = true)""")
    spans = con.execute("SELECT file, partition, first_line, messages FROM manifest").fetchall()

    def partition_of(fname, line):
        for f, part, first, n in spans:
            if f == fname and first <= line < first + n:
                return part
        return None
    return partition_of


def from_kafka(raw):
    """A lake's rows with their Kafka positions as the capture's (file, line)."""
    return (f"(SELECT t.* REPLACE (m.file AS _cdc_source, m.first_line + t._cdc_offset - m.first_offset AS _cdc_offset) "
            f"FROM {raw} t JOIN manifest m ON m.topic = t._cdc_source AND m.partition = t._cdc_partition)")


def verify_prefix(rep, args, prefix, lake, pg, con, spark):
    global decimal_mode
    prefix, catalog = prefix.removesuffix("+catalog"), prefix.endswith("+catalog")
    flavor = "schema" if prefix == args.schema_prefix else "catalog" if catalog else "raw"
    connectors = Path(args.capture) / "_connectors.json"
    settings = json.loads(connectors.read_text()).get(prefix, {}) if connectors.exists() else {}
    decimal_mode = settings.get("decimal.handling.mode", "precise")
    label = prefix + ("+catalog" if catalog else "")
    if catalog:
        rep.note(f"[{label}] {lake}: the schemaless topics landed with a catalog of route types")
    tables, other = load_capture(args.capture, prefix)
    partition_of = kafka_positions(con, args.capture, lake)
    if partition_of:
        rep.note(f"[{label}] {lake}: landed straight from Kafka; positions mapped to the capture by its manifest")
    rep.note(f"[{label}] capture: {sum(len(r) for _, r in tables.values())} change messages in {len(tables)} tables; "
             + ", ".join(f"{k} {v}" for k, v in sorted(other.items())))
    dead = load_dead_letters(lake)
    dl_reasons = Counter()
    for (src, off), d in dead.items():
        dl_reasons[(src, d.get("stage"), d.get("reason", "")[:200])] += 1
    unexpected_dead = {k: d for k, d in dead.items()
                       if not expected_dead_letter(flavor, k[0].split(".public.")[-1].removesuffix(".ndjson"), d)}
    rep.check(not unexpected_dead, f"[{label}] dead letters: {len(dead)} ({len(dead) - len(unexpected_dead)} expected)",
              [f"{n} x {src} stage {st}: {reason}" for (src, st, reason), n in sorted(dl_reasons.items())][:40])

    # Transactions (BEGIN/END) land in _transactions.
    if other.get("transaction"):
        n = con.execute(f"SELECT count(*) FROM read_parquet('{lake}/_transactions/*/*.parquet', union_by_name = true)").fetchone()[0]
        rep.check(n == other["transaction"], f"[{label}] _transactions: {n} rows, {other['transaction']} transaction messages captured")
    lake_xids = set()  # _cdc_xid of the change rows, for the _transactions note below

    for table in pg.tables():
        cols, keys = pg.columns(table)
        fname, rows = tables.get(table, (f"{prefix}.public.{table}.ndjson", []))
        what = f"[{label}] {table}"
        lname = f"{args.db}.public.{table}"
        tdir = Path(lake) / lname
        files = sorted(tdir.glob("*/*.parquet"))
        src = f"read_parquet('{tdir}/*/*.parquet', union_by_name = true, hive_partitioning = true)"
        if partition_of and files:
            src = from_kafka(src)

        # 1. exactly once
        want = {(fname, line): OPS[op] for line, op, *_ in rows}
        got, got_op, missing, twice, extra, wrong_op = landed_once(con, src if files else None, want)
        detail = []
        for k in missing[:10]:
            d = dead.get(k)
            detail.append(f"missing {k[0]}:{k[1]}" + (f" (dead letter, {d['stage']}: {d['reason'][:240]})" if d else " (no dead letter)"))
        detail += [f"twice {k}" for k in twice[:5]] + [f"extra {k}" for k in extra[:5]]
        detail += [f"op {k}: lake {got_op[k]}, message {want[k]}" for k in wrong_op[:5]]
        missing_expected = [k for k in missing if k in dead and expected_dead_letter(flavor, table, dead[k])]
        excused = set()
        for line, op, before, after, *_ in rows:
            if (fname, line) in missing_expected:
                img = after if after is not None else before
                excused.add(tuple(canon_debezium(cols[k], img.get(k), cols[k].precision_ms) for k in keys))
        ok = not (set(missing) - set(missing_expected)) and not twice and not extra and not wrong_op
        rep.check(ok, f"{what}: {sum(got.values())} change rows for {len(want)} change messages, each once"
                  + (f" ({len(missing_expected)} expected dead letters)" if missing_expected else ""), detail)
        if not files:
            continue

        # 3. types
        types = duck_struct_fields(con, src, "after")
        # Text siblings (c__text beside c): part of c, not source columns.
        sib = {n: n + SIBLING_SUFFIX for n in cols if n + SIBLING_SUFFIX in types and n + SIBLING_SUFFIX not in cols}
        tdetail = []
        for n, c in cols.items():
            allowed = expected_duck_type(c, flavor)
            if args.plain_json and c.cat == "json":
                allowed = ("VARCHAR",)  # table_format: iceberg lands JSON as plain text
            got_t = types.get(n)
            if got_t is None:
                tdetail.append(f"{n} ({c.fmt}): not landed")
            elif not type_ok(got_t, allowed):
                tdetail.append(f"{n} ({c.fmt}): {got_t}, want {' or '.join(allowed)}")
            if n in sib:
                if types[sib[n]] != "VARCHAR":
                    tdetail.append(f"{sib[n]} (text sibling of {n}): {types[sib[n]]}, want VARCHAR")
                if flavor != "schema" or c.cat != "tstz":
                    tdetail.append(f"{sib[n]}: a text sibling of a {c.fmt} column (only ZonedTimestamp columns have one)")
        extra_cols = [n for n in types if n not in cols and n not in sib.values()]
        rep.check(not tdetail, f"{what}: column types (DuckDB)" +
                  (f"; text siblings: {', '.join(sib.values())}" if sib else ""), tdetail)
        if extra_cols:
            rep.note(f"{what}: landed columns no longer in PostgreSQL: {', '.join(extra_cols)}")

        # 2. every change row, value for value
        msg_by_line = {line: (op, before, after) for line, op, before, after, _, _ in rows}
        msg_source = {line: src for line, _, _, _, _, src in rows}
        msg_tx = {line: tx for line, tx in tx_blocks.get(table, {}).items()}
        xids_by_tx = defaultdict(set)
        names = [n for n in cols if n in types]
        sibnames = [n for n in names if n in sib]
        per_img = len(names) + len(sibnames)
        exprs = []
        for img in ("after", "before"):
            for n in names:
                exprs.append(duck_expr(f"{img}.{q(n)}", types[n]))
            for n in sibnames:
                exprs.append(f"{img}.{q(sib[n])}")
        absent_cols = [c for c in ("_cdc_after_absent", "_cdc_before_absent")
                       if c in [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]]
        meta = ["_cdc_table", "epoch_us(_cdc_ts)", "_cdc_pos", "_cdc_xid", "_cdc_partition"]
        sel = ", ".join(["_cdc_source", "_cdc_offset"] + exprs + [f"coalesce({c}, [])" for c in absent_cols] + meta)
        diffs = []
        checked = 0
        in_sibling = 0
        for r in con.execute(f"SELECT {sel} FROM {src}").fetchall():
            s, off = r[0], r[1]
            if s != fname or off not in msg_by_line:
                continue
            op, before, after = msg_by_line[off]
            vals = r[2:2 + 2 * per_img]
            absent = dict(zip(absent_cols, r[2 + 2 * per_img:2 + 2 * per_img + len(absent_cols)]))
            m_table, m_ts, m_pos, m_xid, m_part = r[-5:]
            lake_xids.add(m_xid)
            src_block = msg_source.get(off) or {}
            want_ts = src_block.get("ts_us") or (src_block.get("ts_ms") or 0) * 1000
            # docs/types.md: _cdc_xid is the source block's txId (PostgreSQL: the
            # same for every event of a transaction), else its xid, else
            # Debezium's transaction.id (PostgreSQL: txId:lsn, per event).
            txb = msg_tx.get(off)
            txid = src_block.get("txId", src_block.get("xid"))
            if txid is None and txb and txb.get("id") is not None:
                txid = txb["id"]
            want_xid = None if txid is None else str(txid)
            xids_by_tx[src_block.get("txId")].add(m_xid)
            want_part = partition_of(s, off) if partition_of else 0
            want_meta = (lname, want_ts, str(src_block.get("lsn")), want_xid, want_part)
            if (m_table, m_ts, m_pos, m_xid, m_part) != want_meta:
                diffs.append(f"{s}:{off} metadata: lake (_cdc_table, _cdc_ts µs, _cdc_pos, _cdc_xid, _cdc_partition) = "
                             f"{(m_table, m_ts, m_pos, m_xid, m_part)}, message {want_meta}")
            for ii, (img_name, img) in enumerate((("after", after), ("before", before))):
                img_vals = vals[ii * per_img:(ii + 1) * per_img]
                lake_vals = img_vals[:len(names)]
                sib_vals = dict(zip(sibnames, img_vals[len(names):]))
                absent_list = set(absent.get(f"_cdc_{img_name}_absent", []) or [])
                if img is None:
                    if any(v is not None for v in img_vals):
                        diffs.append(f"{s}:{off} {img_name}: message has no image, lake has values")
                    continue
                for n, lv in zip(names, lake_vals):
                    c = cols[n]
                    if n not in img:
                        continue
                    want_v = canon_debezium(c, img[n], c.precision_ms)
                    checked += 1
                    sv = sib_vals.get(n)
                    if n in sib:
                        # The sibling holds exactly the values the typed
                        # column cannot: the typed column is then NULL.
                        raw = img[n]
                        fits = not isinstance(raw, str) or raw == PLACEHOLDER or zoned_fits(raw)
                        if sv is not None:
                            in_sibling += 1
                        if sv is not None and lv is not None:
                            diffs.append(f"{s}:{off} {img_name}.{n}: typed {short(lv)} and {sib[n]} {short(sv)} both set")
                        elif fits and sv is not None:
                            diffs.append(f"{s}:{off} {img_name}.{n}: {short(raw)} fits TIMESTAMP(µs, UTC) but landed in {sib[n]}")
                        elif not fits and sv != raw:
                            diffs.append(f"{s}:{off} {img_name}.{n}: {short(raw)} does not fit TIMESTAMP(µs, UTC); "
                                         f"{sib[n]} is {short(sv)}, typed {short(lv)} (want the exact text in {sib[n]}, typed NULL)")
                        if sib[n] in absent_list and n not in absent_list:
                            diffs.append(f"{s}:{off} {img_name}.{sib[n]}: listed absent although {n} was sent")
                        if lv is None and sv is not None:
                            lv = sv
                    try:
                        got_v = canon_lake(c, lv, flavor)
                    except Exception as e:  # noqa: BLE001
                        got_v = f"<undecodable {short(lv)}: {e}>"
                    if want_v == PLACEHOLDER:
                        if got_v is not None or n not in absent_list:
                            diffs.append(f"{s}:{off} {img_name}.{n}: placeholder landed as {short(got_v)}, absent={n in absent_list}")
                    elif got_v != want_v:
                        diffs.append(f"{s}:{off} {img_name}.{n}: lake {short(got_v)}, message {short(want_v)} (raw {short(img[n], 80)})")
                    elif n in absent_list:
                        diffs.append(f"{s}:{off} {img_name}.{n}: value {short(want_v)} landed but listed as absent")
        rep.check(not diffs, f"{what}: every landed image value and _cdc_ column equals its message ({checked} values"
                  + (f", {in_sibling} of them from a text sibling" if in_sibling else "") + ")", diffs[:25])
        split = {tx: sorted(x, key=str) for tx, x in xids_by_tx.items() if len(x) > 1}
        rep.check(not split, f"{what}: the rows of one PostgreSQL transaction share one _cdc_xid"
                  + (f" ({len(split)} of {len(xids_by_tx)} transactions have several)" if split else ""),
                  [f"txId {tx}: _cdc_xid {', '.join(map(str, x[:4]))}{' …' if len(x) > 4 else ''} ({len(x)} values)"
                   for tx, x in sorted(split.items(), key=lambda kv: str(kv[0]))[:5]])

        # 4. current state
        t0 = time.time()
        pgs = pg.state(table, cols, keys)
        ref = replay(rows, cols, keys)
        def canon_rows(rows, skip=0):
            state = {}
            for r in rows:
                row = {}
                for n, v in zip(cols, r[skip:]):
                    try:
                        row[n] = canon_lake(cols[n], v, flavor)
                    except Exception as e:  # noqa: BLE001
                        row[n] = f"<undecodable {short(v)}: {e}>"
                state[tuple(row[k] for k in keys)] = row
            return state

        dstate = canon_rows(duck_rebuild(con, src, cols, keys, types), len(keys))
        compare_states(rep, f"{what} DuckDB", dstate, pgs, ref, cols, keys, [], excused)
        if args.current and (Path(lake) / "_current").is_dir():
            cur = Path(lake) / "_current" / lname
            if not cur.is_dir():
                rep.check(False, f"{what} cdclake snapshot: no state table in {cur}")
            else:
                cstate = canon_rows(duck_current(con, cur, cols, keys, types))
                compare_states(rep, f"{what} cdclake snapshot (DuckDB)", cstate, pgs, ref, cols, keys, [], excused)
        if spark is not None:
            try:
                srows, stypes = spark_rebuild(spark, str(tdir), cols, keys)
                sstate = {}
                for r in srows:
                    row = {}
                    for n in cols:
                        try:
                            row[n] = canon_lake(cols[n], r[n], flavor)
                        except Exception as e:  # noqa: BLE001
                            row[n] = f"<undecodable {short(r[n])}: {e}>"
                    sstate[tuple(row[k] for k in keys)] = row
                compare_states(rep, f"{what} Spark", sstate, pgs, ref, cols, keys, [], excused)
                cur = Path(lake) / "_current" / lname
                if args.current and cur.is_dir():
                    crows, _ = spark_current(spark, cur, cols)
                    compare_states(rep, f"{what} cdclake snapshot (Spark)", canon_rows([[r[n] for n in cols] for r in crows]),
                                   pgs, ref, cols, keys, [], excused)
                inf = Counter(f"{n} {row[n][1]}" for row in sstate.values() for n in cols
                              if stypes.get(n) == "timestamp" and row.get(n) in (("text", "infinity"), ("text", "-infinity")))
                if inf:
                    rep.note(f"{what} Spark: no infinite timestamps in Spark: {', '.join(f'{k} ({v})' for k, v in sorted(inf.items()))} "
                             f"read as the raw instant ±{INT64_MAX} µs (years +294247 / -290308) and compared as ±infinity")
                for n in spark_time_limitation(spark, str(tdir), stypes):
                    rep.note(f"KNOWN SPARK LIMITATION (not a cdclake failure) {what}: {n}")
            except Exception as e:  # noqa: BLE001
                detail = [f"table: {spark_error(e)}"]
                # Which files Spark cannot read on their own, and why.
                for f in files:
                    try:
                        # the noop sink reads every value in the JVM, no Python conversion
                        spark.read.parquet(str(f)).write.format("noop").mode("overwrite").save()
                    except Exception as fe:  # noqa: BLE001
                        detail.append(f"{f.parent.name}/{f.name}: {spark_error(fe)}")
                rep.check(False, f"{what} Spark: cannot read or rebuild the table", detail)
        rep.note(f"{what}: state checks took {time.time() - t0:.1f}s")

    # Not a documented promise, so a note: whether the BEGIN/END rows in
    # _transactions can be joined to the change rows by _cdc_xid.
    if other.get("transaction"):
        tx = con.execute(f"SELECT _cdc_xid FROM read_parquet('{lake}/_transactions/*/*.parquet', union_by_name = true)").fetchall()
        joinable = sum(1 for (x,) in tx if x in lake_xids)
        sample = sorted({x for (x,) in tx}, key=str)[:2]
        rep.note(f"[{label}] _transactions: {joinable} of {len(tx)} BEGIN/END rows have a _cdc_xid that change rows have "
                 f"(theirs is Debezium's transaction id, e.g. {', '.join(map(str, sample))}; change rows carry source.txId)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--capture")
    ap.add_argument("--lake", action="append", default=[], help="PREFIX=LAKE_DIR or PREFIX+catalog=LAKE_DIR")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--pg", help="libpq connection string of the PostgreSQL the workload ran on")
    src.add_argument("--pg-dump", help="instead: the JSON that --dump-pg wrote (tables, keys, current state)")
    ap.add_argument("--dump-pg", metavar="FILE", help="with --pg: write PostgreSQL's tables and current state to FILE and exit")
    ap.add_argument("--db", default="shop", help="database name (the lake's table names start with it)")
    ap.add_argument("--schema-prefix", default="shop", help="the topic prefix of the connector with schemas")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--plain-json", action="store_true",
                    help="JSON columns land as plain text (the tables of a lake committed to Iceberg)")
    ap.add_argument("--current", action="store_true",
                    help="also check, in each lake with a _current folder, each table's state table that cdclake snapshot built in LAKE_DIR/_current/TABLE")
    ap.add_argument("--report")
    args = ap.parse_args()

    if args.dump_pg:
        if not args.pg:
            ap.error("--dump-pg needs --pg")
        LivePostgres(args.pg).dump(args.dump_pg)
        return
    if not args.capture or not args.lake:
        ap.error("--capture and at least one --lake are needed")

    import duckdb

    os.environ.setdefault("TZ", "UTC")
    # Spark binds to the address its host name resolves to unless told.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    rep = Report()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    pg = LivePostgres(args.pg) if args.pg else DumpedPostgres(args.pg_dump)
    spark = start_spark(rep, args.no_spark)
    for spec in args.lake:
        prefix, lake = spec.split("=", 1)
        verify_prefix(rep, args, prefix, lake, pg, con, spark)
    finish(rep, args.report, spark)


def start_spark(rep, no_spark):
    """A local Spark session (None with no_spark), noted in the report."""
    if no_spark:
        return None
    import duckdb

    t = time.time()
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    rep.note(f"Spark {spark.version} (local[2]) started in {time.time() - t:.1f}s; DuckDB {duckdb.__version__}")
    return spark


def finish(rep, report, spark):
    """Prints the summary, writes the report, stops Spark and exits: 1 when
    a check failed."""
    summary = f"{rep.passed} passed, {rep.failed} failed, {rep.upstream} upstream notes"
    print(summary)
    rep.lines.append(summary)
    if report:
        Path(report).write_text("\n".join(rep.lines) + "\n", encoding="utf-8")
    if spark is not None:
        spark.stop()
    sys.exit(1 if rep.failed else 0)


if __name__ == "__main__":
    main()
