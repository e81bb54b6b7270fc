"""Samples a lake with DuckDB while cdclake writes it: counts the change rows
and the messages landed more than once.

usage: crash_sample.py LAKE_DIR
Prints "rows N duplicates D"; exits 2 when the lake could not be read at
that instant (a file appearing while it was listed), 0 otherwise.
"""
import sys

import duckdb


def main(lake):
    con = duckdb.connect()
    try:
        rows, dups = con.execute(f"""
            WITH landed AS (
                SELECT _cdc_partition AS p, _cdc_offset AS o, count(*) AS n
                FROM read_parquet('{lake}/**/*.parquet', union_by_name = true, filename = true)
                -- neither cdclake's own, nor the current-state tables, nor in a
                -- dataset's hidden folder (a Delta table's log and compacted files)
                WHERE NOT regexp_matches(substr(filename, {len(lake) + 2}), '^(_cdclake|_current)/|^[^/]+/(.*/)?[_.][^/]*/')
                GROUP BY ALL)
            SELECT coalesce(sum(n), 0), count(*) FILTER (WHERE n > 1) FROM landed""").fetchone()
    except (duckdb.IOException, duckdb.InvalidInputException) as e:
        print(f"unreadable: {e}".splitlines()[0])
        return 2
    print(f"rows {rows} duplicates {dups}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1].rstrip("/")))
