"""Reads every dataset of a lake in full with DuckDB (SELECT * of every
table folder, every file), as a user's first query would.

usage: readall.py LAKE_DIR
Prints one line per dataset, "rows N" or "FAIL <error>"; exits 1 when a
dataset cannot be read.
"""
import sys
from pathlib import Path

import duckdb


def main(lake):
    con = duckdb.connect()
    failed = 0
    for d in sorted(p for p in Path(lake).iterdir() if p.is_dir() and p.name not in ("_cdclake", "_dead_letter")):
        try:
            rows = con.execute(
                f"SELECT * FROM read_parquet('{d}/**/*.parquet', union_by_name = true, hive_partitioning = false)").fetchall()
            print(f"{d.name}: rows {len(rows)}")
        except duckdb.Error as e:
            failed += 1
            print(f"{d.name}: FAIL {str(e).splitlines()[0]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
