"""Compares two lakes landed from the same input: the same objects, each
byte for byte the same. Where a Parquet object differs, says whether its
rows or its row groups differ too.

usage: same.py LAKE_A LAKE_B
Prints the differences and a closing line; exits 1 when there are any.
"""
import sys
from pathlib import Path

import duckdb


def files(lake):
    root = Path(lake)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and not str(p.relative_to(root)).startswith("_cdclake/"))


def how(con, pa, pb):
    """Says how two Parquet objects with different bytes differ."""
    q = "SELECT * FROM read_parquet('{}')"
    ra, rb = con.execute(q.format(pa)).fetchall(), con.execute(q.format(pb)).fetchall()
    if ra != rb:
        return f"{len(ra)} rows vs {len(rb)}, or different values"
    layout = ("SELECT DISTINCT row_group_id, row_group_num_rows FROM parquet_metadata('{}') "
              "ORDER BY row_group_id")
    la, lb = con.execute(layout.format(pa)).fetchall(), con.execute(layout.format(pb)).fetchall()
    if la != lb:
        return f"row groups {la} vs {lb}"
    return "the same rows and row groups, different bytes"


def main(a, b):
    fa, fb = files(a), files(b)
    diffs = [f"only in {a}: {f}" for f in sorted(set(fa) - set(fb))] + [f"only in {b}: {f}" for f in sorted(set(fb) - set(fa))]
    con = duckdb.connect()
    compared = 0
    for f in sorted(set(fa) & set(fb)):
        pa, pb = Path(a) / f, Path(b) / f
        compared += 1
        if pa.read_bytes() == pb.read_bytes():
            continue
        if f.endswith(".parquet"):
            diffs.append(f"{f}: {how(con, pa, pb)}")
        else:
            diffs.append(f"{f}: differs")
    for d in diffs[:20]:
        print(d)
    print(f"{compared} objects compared, {len(fa)} and {len(fb)} objects, {len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
