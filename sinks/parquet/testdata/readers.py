"""Reads pairs of Parquet files (cdclake's own writer, pqarrow) of the same
rows with pyarrow (parquet-cpp) and DuckDB, and fails unless both readers
see the same schema, values and statistics in both files.

usage: readers.py OWN PQARROW [OWN PQARROW ...]
"""
import sys

import duckdb
import pyarrow.parquet as pq


def same(x, y):
    if x.equals(y):
        return True
    # NaN is not equal to itself in equals(); repr prints it alike.
    try:
        return repr(x.to_pylist()) == repr(y.to_pylist())
    except ValueError:
        return False


def main(args):
    fails = []
    con = duckdb.connect()
    for own, ref in zip(args[0::2], args[1::2]):
        a, b = pq.read_table(own), pq.read_table(ref)
        if not a.schema.equals(b.schema, check_metadata=True):
            fails.append(f"{own}: pyarrow schema {a.schema} differs from pqarrow's {b.schema}")
            continue
        for name in a.column_names:
            if not same(a.column(name), b.column(name)):
                fails.append(f"{own}: pyarrow reads column {name} differently from pqarrow's file")
        ma, mb = pq.ParquetFile(own).metadata, pq.ParquetFile(ref).metadata
        if not ma.schema.equals(mb.schema) or ma.num_row_groups != mb.num_row_groups or ma.num_rows != mb.num_rows:
            fails.append(f"{own}: Parquet schema or row groups differ from pqarrow's")
            continue
        for g in range(ma.num_row_groups):
            for c in range(ma.num_columns):
                ca, cb = ma.row_group(g).column(c), mb.row_group(g).column(c)
                sa, sb = ca.statistics, cb.statistics
                if sa is None:
                    fails.append(f"{own}: group {g} column {ca.path_in_schema}: no statistics")
                    continue
                if sb is not None and sa.null_count != sb.null_count:
                    fails.append(f"{own}: group {g} column {ca.path_in_schema}: {sa.null_count} NULLs, pqarrow {sb.null_count}")
                # pqarrow's own min/max are unreliable under lists (see checkStats).
                nested = ".list." in "." + ca.path_in_schema + "." or ".key_value." in "." + ca.path_in_schema + "."
                if sb is not None and sb.has_min_max and sa.has_min_max and not nested:
                    if repr((sa.min_raw, sa.max_raw)) != repr((sb.min_raw, sb.max_raw)):
                        fails.append(f"{own}: group {g} column {ca.path_in_schema}: min/max {sa.min_raw!r} {sa.max_raw!r}, pqarrow {sb.min_raw!r} {sb.max_raw!r}")
        for x, y in ((own, ref), (ref, own)):
            n = con.execute(
                f"SELECT count(*) FROM (SELECT * FROM read_parquet('{x}') EXCEPT ALL SELECT * FROM read_parquet('{y}'))"
            ).fetchone()[0]
            if n:
                fails.append(f"DuckDB: {n} rows of {x} are not in {y}")
    for f in fails:
        print(f)
    if fails:
        sys.exit(1)
    print(f"ok {len(args) // 2} pairs")


if __name__ == "__main__":
    main(sys.argv[1:])
