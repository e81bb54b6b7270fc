"""Checks the bundled samples (testdata/samples) after landing, with DuckDB:
exact values of every type, NULL versus absent columns, unchanged TOAST
values, the event datasets. usage: samples.py LAKE_DIR"""
import datetime as dt
import decimal
import sys

import duckdb

lake = sys.argv[1]
con = duckdb.connect()
con.execute("SET TimeZone='UTC'")
passed = failed = 0


def scan(t):
    return f"read_parquet('{lake}/{t}/*/*.parquet', union_by_name=true, hive_partitioning=true)"


def one(sql):
    return con.execute(sql).fetchone()


def check(got, want, what):
    global passed, failed
    ok = got == want
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": got {got!r}, want {want!r}"))
    passed, failed = passed + ok, failed + (not ok)


UTC = dt.timezone.utc
D = decimal.Decimal

# GoldenGate Data Streams: numbers exact, partial images, NULL vs absent.
o = scan("SALES.ORDERS")
check(one(f"SELECT count(*) FROM {o}")[0], 7, "SALES.ORDERS change rows")
check(one(f"SELECT after.ORDER_ID, after.TOTAL_AMOUNT FROM {o} WHERE after.ORDER_ID = '9999999999999999999'"),
      ("9999999999999999999", "18043674494432.4369"), "19-digit key and 18043674494432.4369 exact")
check(one(f"SELECT after.STATUS, _cdc_after_absent FROM {o} WHERE _cdc_op = 'UPDATE' AND _cdc_offset = 7"),
      ("APPROVED", ["TOTAL_AMOUNT"]), "partial update: TOTAL_AMOUNT absent, not NULL")
check(one(f"SELECT after.TOTAL_AMOUNT IS NULL, list_contains(_cdc_after_absent, 'TOTAL_AMOUNT') FROM {o} WHERE _cdc_op = 'UPSERT'"),
      (True, False), "UPSERT: TOTAL_AMOUNT sent as NULL")
check(one(f"SELECT _cdc_ts FROM {o} WHERE _cdc_op = 'UPSERT'")[0],
      dt.datetime(2026, 7, 13, 4, 5, 0, 1, tzinfo=UTC), "op_ts keeps microseconds")
check(one(f"SELECT _cdc_pos, _cdc_xid FROM {o} WHERE _cdc_offset = 6"),
      ("G-QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=1001", "example-transaction-1001"), "pos and xid stored exactly")
check(one(f"SELECT count(_cdc_ingested_at) FROM {o}")[0], 0, "no record timestamp in a file: NULL")

# The same stream in CloudEvents keeps the envelope attributes.
ce = scan("SALES_CE.ORDERS")
check(one(f"SELECT _ce_type, _ce_source, _ce_id FROM {ce} WHERE _cdc_offset = 6"),
      ("com.example.ogg.record", "/ogg/streams/sales", "rec-6"), "CloudEvents attributes kept")
check(one(f"SELECT count(*) FROM {ce}")[0], 7, "SALES_CE.ORDERS change rows")

# DDL and metadata datasets.
check(one(f"SELECT count(*) FROM {scan('_ddl')} WHERE statement LIKE 'ALTER TABLE SALES.ORDERS ADD CUSTOMER_TIER%'")[0], 1,
      "GoldenGate DDL landed in _ddl")
check(one(f"SELECT count(*) > 0 FROM {scan('_ddl')} WHERE _cdc_kind = 'schema_change'")[0], True,
      "Debezium schema change landed in _ddl")
check(one(f"SELECT count(*) FROM {scan('_stream_metadata')} WHERE _cdc_kind = 'stream_metadata'")[0], 4,
      "STREAM_METADATA landed each time it appeared")

# Debezium: every logical type exact.
m = scan("postgres.public.measurements")
check(one(f"SELECT after.price, after.at, after.local_at, after.clock, after.day, after.real_val, after.bits, after.readings FROM {m}"),
      (D("-0.99"), dt.datetime(2024, 5, 1, 8, 30, 0, 123456, tzinfo=UTC), dt.datetime(2024, 5, 1, 8, 30, 0, 123456),
       dt.time(8, 30), dt.date(2024, 5, 1), 1.100000023841858, b"\xf0\x03", [1.5, None, 2.25]),
      "PostgreSQL decimal, timestamptz, timestamp, time, date, real, bits, array")
check(one(f"SELECT typeof(after.real_val), after.real_val = CAST(1.1 AS FLOAT) FROM {m}"), ("FLOAT", True), "float32 lands as FLOAT, exact")
check(one(f"SELECT after.amount, after.fee FROM {m}"), ("1234.56", "314159265.35"), "variable-scale decimals exact as text")
t = scan("ORCLPDB1.DEBEZIUM.TYPES")
check(one(f"SELECT after.AMOUNT, after.HUGE, after.PRECISE, after.LOCAL_TZ FROM {t}"),
      (D("1234.56"), "123456789012345678901234567890123456789.01234", 1600000000123456789,
       dt.datetime(2020, 9, 13, 12, 26, 40, 123456, tzinfo=UTC)),
      "Oracle decimal, >38-digit decimal as text, NanoTimestamp as int64 ns, zoned instant")
s = scan("testDB.dbo.orders")
check(one(f"SELECT after.placed_at, after.total, after.thumb FROM {s}"),
      (dt.datetime(2019, 6, 5, 10, 34, 56, 123456, tzinfo=UTC), D("-123.4567"), b"\x00\x01\x02"),
      "SQL Server datetimeoffset keeps its instant; decimal; binary")
i = scan("inventory.items")
check(one(f"SELECT after.price, after.refund, after.big, after.flags, after.born FROM {i}"),
      (D("1234.56"), D("-1234.56"), "12345678901234567890123456789012345678901234", b"\x01\x02", dt.date(2022, 1, 8)),
      "MySQL decimals (negative, wider than 38 digits), bits, date")

# PostgreSQL unchanged TOAST: absent, not a value.
d = scan("postgres.public.documents")
check(one(f"SELECT after.body IS NULL, list_contains(_cdc_after_absent, 'body'), after.summary FROM {d} WHERE _cdc_op = 'UPDATE'"),
      (True, True, "mentions __debezium_unavailable_value in passing"), "unchanged TOAST column is absent")
check(one(f"SELECT count(*) FROM {d} WHERE after.body = '__debezium_unavailable_value'")[0], 0, "placeholder never lands")

# A primary-key change: a delete and a create at the same source position,
# both landed (no de-duplication by position).
mc = scan("inventory.customers")
check(one(f"SELECT list(_cdc_op ORDER BY _cdc_offset), list(coalesce(after.id, before.id) ORDER BY _cdc_offset) "
          f"FROM {mc} WHERE _cdc_pos = 'mysql-bin.000003:1130:0'"),
      (["DELETE", "INSERT"], [1003, 1005]), "primary-key change: delete and create at one position both land")

# Transactions and Big Data formatter.
check(one(f"SELECT count(*) FROM {scan('_transactions')} WHERE _cdc_op = 'TRANSACTION'")[0] > 0, True, "transaction events landed")
b = scan("QASOURCE.TCUSTORD")
check(one(f"SELECT count(*), count(*) FILTER (WHERE _cdc_op = 'TRUNCATE') FROM {b}"), (4, 1), "Big Data formatter ops incl. truncate")
# The documented queries run on the samples lake and give the documented
# state: the README's quick start, and docs/types.md's current state.
import os
import re

root = os.path.join(os.path.dirname(__file__), "..", "..")
queries = []
for doc in ("README.md", os.path.join("docs", "types.md")):
    text = open(os.path.join(root, doc)).read()
    queries += [q.replace("'lake/", f"'{lake}/") for q in re.findall(r"```sql\n(.*?)```", text, re.S)]
check(len(queries), 3, "README.md and docs/types.md have their three DuckDB queries")
check(len(con.execute(queries[0]).fetchall()), 7, "README change-rows query")
check(con.execute(queries[1]).fetchall(), [("9999999999999999999", 'NEW "rush"\tline', "18043674494432.4369")],
      "docs/types.md current-state query (partial images)")
check(con.execute(queries[2]).fetchall(), [(3, "Jeff", "Cole", "jeff@cole.org")], "docs/types.md current-state query (full images, truncate)")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
