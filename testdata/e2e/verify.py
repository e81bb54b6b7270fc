"""Reads a cdclake lake back with DuckDB and checks it against cdcgen's
expected.json: change-row counts, landed column types, event datasets, and the
current state of every table rebuilt from its change rows.

usage: verify.py LAKE_DIR EXPECTED_JSON [--plain-json] [--delta] [--current]
With --plain-json, JSON columns must land as text (tables committed to
Iceberg, which has no JSON type, hold them so). With --delta, JSON and
times of day must land as text, HH:MM:SS.ffffff (tables committed to
Delta, which has neither type, hold them so). With --current, each
table's current-state table (cdclake snapshot, sink.current.interval: the
files its newest manifest in LAKE_DIR/_current/TABLE/_manifest names, but
the rows their deletion vectors delete)
must hold exactly the expected state too. Prints one line per check and a closing "N passed, M failed" line; exits 1 on
any failure.
"""
import json
import sys

import duckdb

# DuckDB type each checker kind must land as (prefix match).
LANDED = {
    "int": ("BIGINT", "SMALLINT", "INTEGER"),
    "text": ("VARCHAR",),
    "decimal_text": ("VARCHAR",),
    "decimal": ("DECIMAL",),
    "timestamp": ("TIMESTAMP",),
    "timestamptz": ("TIMESTAMP WITH TIME ZONE",),
    "date": ("DATE",),
    "time": ("TIME",),
    "bool": ("BOOLEAN",),
    "json": ("JSON",),
    "blob": ("BLOB",),
    "double": ("DOUBLE",),
}


def as_text(kind, expr, time_text=False):
    """SQL rendering a value as the text cdcgen expects."""
    if kind == "timestamp" or kind == "timestamptz":
        return f"strftime({expr}, '%Y-%m-%d %H:%M:%S.%f')"
    if kind == "time" and time_text:
        return expr
    if kind == "time":
        return f"strftime(DATE '2000-01-01' + {expr}, '%H:%M:%S.%f')"
    if kind == "blob":
        return f"decode({expr})"
    return f"CAST({expr} AS VARCHAR)"


def q(name):
    return '"' + name.replace('"', '""') + '"'


def state_files(lake, table):
    """The files of a table's current-state table, by its newest manifest,
    and the rows of them its deletion vectors delete (merge-on-read), by
    file: (None, None) when it has none."""
    import glob
    import os
    manifests = sorted(glob.glob(os.path.join(lake, "_current", table, "_manifest", "*.json")))
    if not manifests:
        return None, None
    m = json.load(open(manifests[-1]))
    keys = [f for f in m["files"] if f]
    vectors = []
    for mg in m.get("merge") or []:
        if mg:
            keys += mg.get("files") or []
            vectors += mg.get("deletes") or []
    dead = {}
    if vectors:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import dv
    for v in vectors:
        with open(os.path.join(lake, v["puffin"]), "rb") as f:
            rows = dv.positions(f.read(), v["offset"], v["length"])
        if len(rows) != v["rows"]:
            raise ValueError(f"{v['puffin']}: the deletion vector of {v['file']} deletes {len(rows)} rows, not {v['rows']}")
        dead[os.path.join(lake, v["file"])] = rows
    return [os.path.join(lake, f) for f in keys], dead


def main(lake, expected_path, plain_json=False, current=False, delta=False):
    exp = json.load(open(expected_path))
    landed = dict(LANDED, json=("VARCHAR",)) if plain_json or delta else LANDED
    if delta:
        landed["time"] = ("VARCHAR",)
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    passed, failed = 0, 0

    def check(ok, what):
        nonlocal passed, failed
        print(("ok   " if ok else "FAIL ") + what)
        if ok:
            passed += 1
        else:
            failed += 1

    def scan(table):
        import glob
        # Hidden folders (a Delta table's _delta_log/ and _compacted/) hold
        # no change rows of their own.
        files = sorted(f for f in glob.glob(f"{lake}/{table}/**/*.parquet", recursive=True)
                       if not any(s.startswith(("_", ".")) for s in f[len(f"{lake}/{table}/"):].split("/")[:-1]))
        return f"read_parquet({files!r}, union_by_name=true, hive_partitioning=true)"

    for name, t in sorted(exp["tables"].items()):
        src = scan(name)
        n = con.execute(f"SELECT count(*) FROM {src}").fetchone()[0]
        check(n == t["changes"], f"{name}: {n} change rows, want {t['changes']}")

        top = {c for c, *_ in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()}
        flat = "after" not in top
        if flat:
            # flat layout: the image at top level, one absent list
            img = lambda c: q(c)
            keyexpr = lambda c: q(c)
            carried = lambda c: f"_cdc_op <> 'DELETE' AND NOT list_contains(_cdc_absent, '{c}')"
            cols_sql = "* EXCLUDE (" + ", ".join(c for c in top if c.startswith("_") or c == "date") + ")"
        else:
            img = lambda c: f"after.{q(c)}"
            keyexpr = lambda c: f"coalesce(after.{q(c)}, before.{q(c)})"
            carried = lambda c: f"after IS NOT NULL AND NOT list_contains(_cdc_after_absent, '{c}')"
            cols_sql = "after.*"
        types = {}
        for col, typ, *_ in con.execute(f"DESCRIBE SELECT {cols_sql} FROM {src}").fetchall():
            types[col] = typ
        for col, kind in sorted(t["columns"].items()):
            got = types.get(col, "missing")
            check(got.startswith(landed[kind]), f"{name}.{col}: lands as {got}, want {kind}")

        # Current state: per key, the latest change decides whether the row
        # exists; each column takes its latest value from an after image
        # that carried it (partial images list what they did not carry).
        key = t["key"]
        cols = sorted(t["columns"])
        kexpr = as_text(t["columns"][key], keyexpr(key), delta)
        ops = con.execute(f"SELECT k, op FROM (SELECT {kexpr} AS k, _cdc_op AS op, row_number() OVER "
                          f"(PARTITION BY {kexpr} ORDER BY _cdc_offset DESC) AS rn FROM {src}) WHERE rn = 1").fetchall()
        state = {k: {} for k, op in ops if op != "DELETE"}
        # One query per column keeps each aggregation simple.
        for c in cols:
            sql = (f"SELECT k, v FROM (SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY o DESC) AS rn "
                   f"FROM (SELECT {kexpr} AS k, {as_text(t['columns'][c], img(c), delta)} AS v, _cdc_offset AS o "
                   f"FROM {src} WHERE {carried(c)})) "
                   f"WHERE rn = 1")
            for k, v in con.execute(sql).fetchall():
                if k in state:
                    state[k][c] = v
        want = t["state"]
        check(set(state) == set(want),
              f"{name}: {len(state)} live rows, want {len(want)}"
              + ("" if set(state) == set(want) else
                 f" (extra {sorted(set(state) - set(want))[:5]}, missing {sorted(set(want) - set(state))[:5]})"))
        bad = []
        for k, row in want.items():
            got = state.get(k)
            if got is None:
                continue
            for c in cols:
                if got.get(c) != row.get(c):
                    bad.append(f"{k}.{c}: got {got.get(c)!r}, want {row.get(c)!r}")
        check(not bad, f"{name}: every value of every live row equal" + ("" if not bad else ": " + "; ".join(bad[:5])))
        if current:
            files, dead = state_files(lake, name)
            if files is None:
                check(False, f"{name}: no current-state table")
                continue
            got = {}
            if files:
                sel = ", ".join(f"{as_text(t['columns'][c], q(c), delta)} AS {q(c)}" for c in cols)
                for r in con.execute(f"SELECT filename, file_row_number, {as_text(t['columns'][key], q(key), delta)}, {sel} "
                                     f"FROM read_parquet({files!r}, union_by_name=true, filename=true, "
                                     f"file_row_number=true)").fetchall():
                    if r[1] in dead.get(r[0], ()):
                        continue  # deleted by its file's deletion vector
                    got.setdefault(r[2], []).append(dict(zip(cols, r[3:])))
            twice = [k for k, rows in got.items() if len(rows) > 1]
            diff = [f"{k}: got {got.get(k, [None])[0]!r}, want {row!r}" for k, row in want.items()
                    if got.get(k, [None])[0] != {c: row.get(c) for c in cols}]
            extra = sorted(set(got) - set(want))
            check(not twice and not diff and not extra,
                  f"{name}: the current-state table holds the expected {len(want)} rows"
                  + ("" if not (twice or diff or extra) else
                     f": {len(twice)} keys twice, {len(diff)} rows differ or missing, {len(extra)} extra; " + "; ".join(diff[:3])))

    def count(table):
        try:
            return con.execute(f"SELECT count(*) FROM {scan(table)}").fetchone()[0]
        except duckdb.IOException:
            return 0

    check(count("_transactions") == exp["transactions"],
          f"_transactions: {count('_transactions')} rows, want {exp['transactions']}")
    check(count("_ddl") == exp["ddl"], f"_ddl: {count('_ddl')} rows, want {exp['ddl']}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    flags = sys.argv[3:]
    if len(sys.argv) < 3 or any(f not in ("--plain-json", "--delta", "--current") for f in flags):
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2], plain_json="--plain-json" in flags, current="--current" in flags,
                  delta="--delta" in flags))
