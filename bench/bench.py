#!/usr/bin/env python3
"""The landing benchmark (make bench).

For each workload, a deterministic stream from cmd/cdcgen (same seed, same
bytes every run) is landed by the real `cdclake run` binary (file source ->
file:// lake, default settings) under GOMAXPROCS=1 and GOMAXPROCS=2, and by
DuckDB (read_json with sample_size=-1 -> COPY ... TO parquet, one thread) on
the same file. Prints one table and writes it, with the machine, versions and
date, to bench/RESULTS.md.

usage: bench.py --cdclake BIN --cdcgen BIN [--events N] [--tables M]
                [--work DIR] [--results FILE] [--runs K] [--only W,...]

Then, once each, many tables: 1,000 and 5,000 GoldenGate tables (--only
tables runs only those).

Each figure is the best of --runs runs (default 1), alternating the
contestants so that a busy moment of the machine does not favour one. With
CDCLAKE_TEST_KAFKA_BROKERS set (a broker of infra/), it also runs the Kafka
landing against a bare consume of the same topic and prints their ratio.
"""
import argparse
import datetime
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOADS = [
    ("debezium", "Debezium, schemas enabled"),
    ("debezium-schemaless", "Debezium, schemas disabled"),
    ("goldengate", "GoldenGate Data Streams"),
]


def measured(cmd, env=None, cpu=None):
    """Runs cmd: (wall seconds, its own peak RSS in KiB, stdout). The child
    is spawned and waited for with wait4, whose rusage is the child's alone;
    its CPU seconds (user and system) are appended to cpu, if given."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        path = shutil.which(cmd[0]) or cmd[0]
        t = time.perf_counter()
        pid = os.posix_spawn(path, cmd, env if env is not None else os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1), (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - t
        if cpu is not None:
            cpu.append(ru.ru_utime + ru.ru_stime)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{' '.join(cmd[:3])}… failed:\n{stdout[-2000:]}\n{err.read().decode('utf-8', 'replace')[-2000:]}")
        return wall, ru.ru_maxrss, stdout


def lake_stats(lake):
    files = [p for p in Path(lake).rglob("*.parquet") if "_cdclake" not in p.parts]
    return len(files), sum(p.stat().st_size for p in files)


def generated(cdcgen, work, name, events, tables, fmt):
    """The stream of cdcgen with these parameters, generated once."""
    d = work / name
    stream = d / "stream.ndjson"
    # The generator's own bytes are part of what the stream is made of.
    gen = hashlib.sha256(Path(shutil.which(cdcgen) or cdcgen).read_bytes()).hexdigest()[:16]
    params = f"{events} {tables} {fmt} {gen}"
    if not stream.exists() or not (d / ".params").exists() or (d / ".params").read_text() != params:
        shutil.rmtree(d, ignore_errors=True)
        subprocess.run([cdcgen, "--out", str(d), "--events", str(events), "--tables", str(tables),
                        "--format", fmt], check=True, stdout=subprocess.DEVNULL)
        (d / ".params").write_text(params)
    return d, stream


def lakes_root(work):
    """Where the lakes go: a tmpfs when the machine has one, so that the
    figures measure cdclake and not the disk's costs of creating files and
    directories (on ext4 here, about a millisecond of kernel time each
    right after a previous run's lake was deleted); else the work folder."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 4 << 30:
        return shm / "cdclake-bench-lakes"
    return work / "lakes"


def fresh(args, name, root=None):
    """An empty folder for one lake (or DuckDB's file) of a run."""
    d = (root or args.lakes) / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def scaling(args):
    """This machine's own ratio of two busy cores to one, by kind of work
    (bench/scaling), as one line."""
    return subprocess.run(["go", "run", "./bench/scaling"], capture_output=True, text=True, check=True).stdout.strip()


def parse_bound(runs=5):
    """What a decoder without a parse tree could gain (bench/parsebound):
    the tree's and a minimal scan's cost per record, medians of runs
    runs, as a table."""
    ns = {}
    for _ in range(runs):
        out = subprocess.run(["go", "test", "-run", "^$", "-bench", ".", "-count", "1", "./bench/parsebound"],
                             capture_output=True, text=True, check=True).stdout
        for m in re.finditer(r"^Benchmark(Tree|Scan)/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op", out, re.M):
            ns.setdefault((m.group(1), m.group(2)), []).append(float(m.group(3)))
    med = {k: sorted(v)[len(v) // 2] / 1000 for k, v in ns.items()}
    out = ["| records | tree µs | scan µs | scan / tree |", "|---|---|---|---|"]
    for name in ("goldengate", "debezium-payload", "debezium-schemaless"):
        tree, scan = med.get(("Tree", name)), med.get(("Scan", name))
        if tree and scan:
            out.append(f"| {name} | {tree:.2f} | {scan:.2f} | {scan / tree:.2f} |")
    return "\n".join(out) if len(out) > 2 else ""


def files_per_table(lake):
    out = {}
    for p in Path(lake).rglob("*.parquet"):
        if "_cdclake" not in p.parts:
            table = p.relative_to(lake).parts[0]
            out[table] = out.get(table, 0) + 1
    return out


def many_tables(args, work, single_rate, got):
    """Many tables with interleaved GoldenGate events: 1,000 tables with
    default settings on one core (against the 24-table rate on one core;
    best of --runs on the tmpfs, one run on the work disk), and 5,000 tables under a 64 MiB bound on two, with the files
    each table gets against a run with no bound on memory or open files."""
    rows = []
    d, stream = generated(args.cdcgen, work, "t1000", 200_000, 1000, "goldengate")
    messages = sum(1 for line in open(stream, "rb") if line.strip())
    for where, lake in (("", fresh(args, "t1000")), (", lake on the work disk", fresh(args, "t1000", d))):
        # On the tmpfs, the best of --runs, as the 24-table rate it is set
        # against (with the largest peak RSS of those runs).
        wall, rss = float("inf"), 0
        for _ in range(args.runs if not where else 1):
            shutil.rmtree(lake, ignore_errors=True)
            w, r, _ = measured([args.cdclake, "run", "--source", str(stream), "--sink", str(lake)],
                               dict(os.environ, GOMAXPROCS="1"))
            wall, rss = min(wall, w), max(rss, r)
        if not where:
            got["t1000"] = (messages / wall / single_rate if single_rate else None, rss / 1024)
        rows.append(("1,000 tables", f"defaults, GOMAXPROCS=1{where}", messages, messages / wall,
                     f"{messages / wall / single_rate:.2f}" if single_rate else "", rss / 1024, lake_stats(lake)[0], ""))
        shutil.rmtree(lake, ignore_errors=True)

    d, stream = generated(args.cdcgen, work, "t5000", 100_000, 5000, "goldengate")
    messages = sum(1 for line in open(stream, "rb") if line.strip())
    counts = {}
    for name, cfg in (("unbounded", "batch:\n  max_buffered_bytes: 64GiB\n  max_open_files: 1000000\n"),
                      ("bounded", "batch:\n  max_buffered_bytes: 64MiB\n")):
        (d / f"{name}.yaml").write_text(cfg)
        lake = fresh(args, f"t5000-{name}")
        wall, rss, _ = measured([args.cdclake, "run", "--config", str(d / f"{name}.yaml"), "--source", str(stream),
                                 "--sink", str(lake)], dict(os.environ, GOMAXPROCS="2"))
        counts[name] = files_per_table(lake)
        shutil.rmtree(lake, ignore_errors=True)
    worst = max(n / counts["unbounded"].get(t, 1) for t, n in counts["bounded"].items())
    got["t5000"] = (rss / 1024, worst)
    rows.append(("5,000 tables", "max_buffered_bytes: 64MiB, GOMAXPROCS=2", messages, messages / wall, "", rss / 1024,
                 sum(counts["bounded"].values()), f"{worst:.2f}"))
    head = ("| workload | settings | events | events/s | × 24 tables, 1 core | peak RSS MiB | files | "
            "most files per table × unbounded |")
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]:,} | {r[3]:,.0f} | {r[4]} | {r[5]:.0f} | {r[6]:,} | {r[7]} |")
    return "\n".join(lines)


def free_port():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def metrics_overhead(args, streams, runs=7):
    """Lands each stream on one core with the metrics endpoint off and on
    (--metrics-addr), in pairs, off then on, runs pairs: a table of the best
    rates of each, and of the median over the pairs of on/off in CPU time
    (user and system), whose spread says how noisy the machine was; the
    largest off/best over on/best is returned. What a scrape costs is
    measured apart (scrape_cost): a scraper beside a run of a second would
    weigh on the machine, not on the run."""
    import statistics

    lines = ["| workload | events/s, metrics off (best) | events/s, metrics on (best) | on / off, best rates | "
             "CPU on / off, median of pairs |",
             "|---|---|---|---|---|"]
    worst = 0.0
    for label, stream, messages in streams:
        def land(on):
            lake = fresh(args, "metrics")
            cmd = [args.cdclake, "run", "--source", str(stream), "--sink", str(lake)]
            if on:
                cmd += ["--metrics-addr", f"127.0.0.1:{free_port()}"]
            return cmd, lambda: shutil.rmtree(lake, ignore_errors=True)

        best, ratios = paired(land, runs)
        off, on = messages / best[False], messages / best[True]
        med = statistics.median(ratios)
        worst = max(worst, off / on)
        lines.append(f"| {label} | {off:,.0f} | {on:,.0f} | {on / off:.3f} | {med:.3f} |")
    return "\n".join(lines), worst


def paired(land, runs):
    """Runs runs pairs of commands on one core, land(False)'s then
    land(True)'s (land returns the command and what to do after it): the
    best wall time of each, and each pair's CPU time True/False."""
    best, ratios = {}, []
    for _ in range(runs):
        cpu = {}
        for on in (False, True):
            cmd, after = land(on)
            used = []
            wall, _, _ = measured(cmd, dict(os.environ, GOMAXPROCS="1"), used)
            after()
            best[on] = min(best.get(on, wall), wall)
            cpu[on] = used[0]
        ratios.append(cpu[True] / cpu[False])
    return best, ratios


def iceberg_overhead(args, streams, got, runs=7):
    """Lands each stream on one core into a plain lake and with every table
    committed to Iceberg (table_format: iceberg, a SQLite catalog beside
    the lake; the cdclake-lakehouse beside --cdclake commits), in pairs,
    plain then Iceberg, runs pairs: a table of the best rates of each and of
    the median over the pairs of Iceberg/plain in CPU time (user and
    system, the committer's included: wait4 counts the children a process
    waited for). The largest median goes in got["iceberg"]."""
    import statistics

    lines = ["| workload | events/s, plain (best) | events/s, Iceberg (best) | Iceberg / plain, best rates | "
             "CPU Iceberg / plain, median of pairs | snapshots |",
             "|---|---|---|---|---|---|"]
    worst = 0.0
    for label, stream, messages in streams:
        snapshots = []

        def land(ice):
            root = fresh(args, "iceberg")
            lake = root / "lake"
            cmd = [args.cdclake, "run", "--source", str(stream), "--sink", str(lake)]
            if ice:
                cfg = root / "iceberg.yaml"
                cfg.write_text(f"defaults:\n  table_format: iceberg\nsink:\n  iceberg:\n"
                               f"    catalog: sqlite://{root / 'catalog.db'}\n")
                cmd += ["--config", str(cfg)]

            def after():
                if ice:
                    snapshots.append(len(list(lake.rglob("snap-*.avro"))))
                shutil.rmtree(root, ignore_errors=True)
            return cmd, after

        best, ratios = paired(land, runs)
        snapshots = max(snapshots)
        plain, ice = messages / best[False], messages / best[True]
        med = statistics.median(ratios)
        worst = max(worst, med)
        lines.append(f"| {label} | {plain:,.0f} | {ice:,.0f} | {ice / plain:.3f} | {med:.3f} | {snapshots} |")
    got["iceberg"] = worst
    return "\n".join(lines)


def scrape_cost():
    """The CPU time of one scrape of a landed pipeline's registry
    (BenchmarkScrape), in microseconds, or None."""
    out = subprocess.run(["go", "test", "-run", "^$", "-bench", "^BenchmarkScrape$", "-benchtime", "200x", "./pipelines/"],
                         capture_output=True, text=True).stdout
    m = re.search(r"BenchmarkScrape\S*\s+\d+\s+([\d.]+) ns/op", out)
    return float(m.group(1)) / 1e3 if m else None


def kafka_ratio(broker, got):
    """With a broker: the Kafka benchmarks of pipelines/source/kafka (a
    6-partition topic of generated mixed messages landed into mem:// with
    --until-caught-up, against a bare consume of the same topic with the same
    client and settings), as a table with their ratio."""
    out = subprocess.run(["go", "test", "-run", "^$", "-bench", "KafkaLand|KafkaConsume", "-benchtime", "2x",
                          "./pipelines/source/kafka/"], env=dict(os.environ, CDCLAKE_TEST_KAFKA_BROKERS=broker),
                         capture_output=True, text=True, check=True).stdout
    rate = {m.group(1): float(m.group(2)) for m in re.finditer(r"Benchmark(Kafka\w+)-\d+\s+\d+\s+\d+ ns/op\s+([\d.]+) messages/s", out)}
    if "KafkaLand" not in rate or "KafkaConsume" not in rate:
        sys.exit(f"Kafka benchmarks did not report:\n{out}")
    got["kafka"] = rate["KafkaLand"] / rate["KafkaConsume"]
    return (f"\nFrom Kafka (broker {broker}, `BenchmarkKafkaLand` / `BenchmarkKafkaConsume`, averaged over\n"
            f"2 landings):\n\n"
            f"| landing from Kafka | bare consume | ratio |\n|---|---|---|\n"
            f"| {rate['KafkaLand']:,.0f} messages/s | {rate['KafkaConsume']:,.0f} messages/s | "
            f"{rate['KafkaLand'] / rate['KafkaConsume']:.2f} |\n")


def targets(rows, got):
    """The performance targets the project works to, each with what this
    run measured and whether it holds ("" where this run did not measure
    it), as a table."""
    def one(label, procs):
        return next((r for r in rows if r["workload"] == label and r["who"].endswith(f"={procs}")), None)

    out = []

    def add(name, target, measured, holds):
        out.append(f"| {name} | {target} | {measured} | {'yes' if holds else 'no'} |")

    for label, rate, ratio in (("Debezium, schemas enabled", 150_000, 13), ("Debezium, schemas disabled", 200_000, None),
                               ("GoldenGate Data Streams", 250_000, 4.5)):
        r = one(label, 1)
        if r is None:
            continue
        target = f"≥ {rate:,} events/s" + (f" and ≥ {ratio}× DuckDB" if ratio else "")
        measured = f"{r['rate']:,.0f} events/s" + (f", {r['ratio']:.1f}× DuckDB" if ratio else "")
        add(f"{label}, GOMAXPROCS=1", target, measured, r["rate"] >= rate and (ratio is None or r["ratio"] >= ratio))
    scales = [(r["workload"], r["scale"]) for r in rows if r["scale"] is not None]
    if scales:
        add("GOMAXPROCS=2 vs 1", "≥ 1.7× on every stream", ", ".join(f"{s:.2f}" for _, s in scales),
            min(s for _, s in scales) >= 1.7)
    if "iceberg" in got:
        add("Iceberg commits vs plain Parquet", "≤ 1.10× the CPU, on one core", f"{got['iceberg']:.2f}×",
            got["iceberg"] <= 1.10)
    if "kafka" in got:
        add("Kafka → lake vs bare consume", "≥ 0.8×", f"{got['kafka']:.2f}×", got["kafka"] >= 0.8)
    if "t1000" in got:
        ratio, rss = got["t1000"]
        add("1,000 tables, defaults", "peak RSS ≤ 512 MiB and ≥ 0.50× the 24-table rate",
            f"{rss:.0f} MiB, {ratio:.2f}×" if ratio else f"{rss:.0f} MiB", rss <= 512 and ratio is not None and ratio >= 0.5)
    if "t5000" in got:
        rss, worst = got["t5000"]
        add("5,000 tables, max_buffered_bytes: 64MiB", "peak RSS ≤ 256 MiB and ≤ 2× the files of an unbounded run",
            f"{rss:.0f} MiB, {worst:.2f}×", rss <= 256 and worst <= 2)
    if not out:
        return ""
    return "\n".join(["| target | wanted | measured | holds |", "|---|---|---|---|"] + out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cdclake", required=True)
    ap.add_argument("--cdcgen", required=True)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--tables", type=int, default=24)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--work", default="/tmp/cdclake-bench-make")
    ap.add_argument("--lakes", help="folder of the lakes (default: a tmpfs when there is one, see lakes_root)")
    ap.add_argument("--results", default=str(Path(__file__).with_name("RESULTS.md")))
    ap.add_argument("--only", help="comma-separated workloads (debezium, debezium-schemaless, goldengate, tables)")
    args = ap.parse_args()

    import duckdb

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    args.lakes = Path(args.lakes) if args.lakes else lakes_root(work)
    rows = []
    streams = []
    for fmt, label in WORKLOADS:
        if args.only and fmt not in args.only.split(","):
            continue
        d, stream = generated(args.cdcgen, work, fmt, args.events, args.tables, fmt)
        messages = sum(1 for line in open(stream, "rb") if line.strip())
        streams.append((label, stream, messages))
        size = stream.stat().st_size
        best = {}
        for _ in range(args.runs):
            for procs in (1, 2):
                lake = fresh(args, f"{fmt}-{procs}")
                env = dict(os.environ, GOMAXPROCS=str(procs))
                cpu = []
                wall, rss, out = measured([args.cdclake, "run", "--source", str(stream), "--sink", str(lake)], env, cpu)
                m = re.search(r"dead letters (\d+)", out)
                if not m or m.group(1) != "0":
                    sys.exit(f"cdclake landed {fmt} with dead letters:\n{out}")
                files, nbytes = lake_stats(lake)
                shutil.rmtree(lake, ignore_errors=True)
                if procs not in best or wall < best[procs][0]:
                    best[procs] = (wall, rss, files, nbytes, cpu[0])
            out_pq = fresh(args, f"{fmt}-duckdb") / "out.parquet"
            sql = (f"SET threads = 1; COPY (SELECT * FROM read_json('{stream}', format = 'newline_delimited', "
                   f"sample_size = -1)) TO '{out_pq}' (FORMAT parquet)")
            cpu = []
            wall, rss, _ = measured([sys.executable, "-c", f"import duckdb; duckdb.connect().execute({sql!r})"], None, cpu)
            if "duckdb" not in best or wall < best["duckdb"][0]:
                best["duckdb"] = (wall, rss, 1, out_pq.stat().st_size, cpu[0])
        duck_rate = messages / best["duckdb"][0]
        for who in (1, 2, "duckdb"):
            wall, rss, files, nbytes, cpus = best[who]
            rate = messages / wall
            rows.append({
                "workload": label, "who": f"cdclake, GOMAXPROCS={who}" if who != "duckdb" else "DuckDB, 1 thread",
                "events": messages, "rate": rate, "mbs": size / wall / 1e6,
                "ratio": rate / duck_rate, "rss": rss / 1024, "bpe": nbytes / messages, "files": files, "cpu": cpus,
                "scale": (best[1][0] / best[2][0]) if who == 2 else None,
            })
        print(f"{label}: {messages} events, {size / 1e6:.0f} MB", file=sys.stderr)

    def scale(r):
        return "" if r["scale"] is None else f"{r['scale']:.2f}"

    head = ("| workload | landed by | events | events/s | input MB/s | × DuckDB | ×1 core | CPU s | "
            "peak RSS MiB | bytes/event | files |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['who']} | {r['events']:,} | {r['rate']:,.0f} | {r['mbs']:.1f} | "
                     f"{r['ratio']:.1f} | {scale(r)} | {r['cpu']:.2f} | "
                     f"{r['rss']:.0f} | {r['bpe']:.0f} | {r['files']} |")
    table = "\n".join(lines)
    print(table)

    metrics = ""
    if streams:
        mt, worst = metrics_overhead(args, streams)
        print(mt)
        us = scrape_cost()
        per = "" if us is None else (f" One scrape (`BenchmarkScrape`: the Go and process collectors and a landed "
                                     f"pipeline's metrics, gathered and encoded) costs {us:,.0f} µs of CPU: "
                                     f"{us / 15e6 * 100:.4f}% of a core at Prometheus's usual 15 s interval.")
        print(f"scrape: {us} µs")
        metrics = f"""
The metrics' cost: each stream landed on one core with the metrics endpoint off and on
(`--metrics-addr`), 7 pairs of runs, off then on: the best rate of each, and the median over the
pairs of the CPU time on/off, whose distance from 1 says how noisy the machine was. Largest cost,
best rate off over best rate on: {worst:.3f}.{per}

{mt}
"""

    got = {}
    iceberg = ""
    if streams:
        it = iceberg_overhead(args, streams, got)
        print(it)
        iceberg = f"""
Iceberg commits' cost: each stream landed on one core into a plain lake and with every table
committed to an Iceberg table (`table_format: iceberg`, a SQLite catalog beside the lake), 7 pairs
of runs, plain then Iceberg: the best rate of each, and the median over the pairs of the CPU time
Iceberg/plain, a `cdclake-lakehouse` process's included when one is started. Appends are
written in process (a manifest, a manifest list and a metadata file per table and commit, and
the catalog row's swap); what costs more goes to that process: see docs/lakehouse.md.

{it}
"""
    many = ""
    if not args.only or "tables" in args.only.split(","):
        single = next((r["rate"] for r in rows if r["workload"] == "GoldenGate Data Streams" and r["who"].endswith("=1")), None)
        many = many_tables(args, work, single, got)
        print(many)
        many = f"""
Many tables (the 1,000 tables on the tmpfs best of {args.runs} run(s), the others one run each):
`cdcgen --events 200000 --tables 1000` and `--events 100000
--tables 5000`, GoldenGate Data Streams, every table's events interleaved with the others'.
"× 24 tables" is the rate against the GoldenGate row above on one core; "most files per
table × unbounded" is the largest ratio, over tables, of the files a table got under the
bound to those it gets with no bound on memory or open files (what its rotation settings
give it).

{many}
"""

    kafka = ""
    broker = os.environ.get("CDCLAKE_TEST_KAFKA_BROKERS")
    if broker:
        kafka = kafka_ratio(broker, got)
        print(kafka)

    goals = targets(rows, got)
    if goals:
        print(goals)
        goals = f"""
Targets (each from the figures above; one run of `make bench` on this machine):

{goals}
"""

    machine = scaling(args)
    print(f"machine scaling: {machine}", file=sys.stderr)
    bound = parse_bound()
    if bound:
        print(bound)
        bound = f"""
What a decoder without a parse tree could gain (`bench/parsebound`, medians of 5 runs): "tree"
is fastjson's parse of a record and a read of every value from it, as the unwrap stage does
(of a Connect envelope the payload alone: the schema is recognised by its bytes); "scan" is
the least any decoder must do, every key and value token found and the structure checked, with
no unescaping, UTF-8 check or number syntax. A decoder that converted values straight from a
record's bytes would save at most the difference. These run within the caches and slow down less
than a landing when the host is busy, so compare them with the rates above only in an hour when
those are at their usual level (DuckDB's tell).

{bound}
"""
    tmpfs = " (a tmpfs, see `lakes_root` in bench/bench.py)" if str(args.lakes).startswith("/dev/shm") else ""
    go = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    Path(args.results).write_text(f"""# Benchmark results

Produced by `make bench` (`bench/bench.py`) on {datetime.date.today().isoformat()}:
{os.cpu_count()} cores ({cpu}), {round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB,
{platform.system()} {platform.release()}, {go}, DuckDB {duckdb.__version__}.

Input: `cdcgen --events {args.events} --tables {args.tables} --format F` (deterministic: the same
bytes every run) in a file. cdclake: `cdclake run --source FILE --sink DIR`
with default settings (zstd, 1,000,000 rows or 128 MiB per file), wall time
of the whole process under `GOMAXPROCS=1` and `=2`; "×1 core" is the
speed-up of two cores over one; "CPU s" is the CPU time (user and system)
of the run: what it grows by from one core to two is what the same work
costs more when both cores are busy. DuckDB: `SET threads = 1; COPY (SELECT * FROM
read_json(FILE, format = 'newline_delimited', sample_size = -1)) TO
'out.parquet' (FORMAT parquet)` in its own process: it lands each message as
one row of its JSON structure (no envelope decoding, no before/after images,
no schema changes, no exactly-once bookkeeping), so the comparison flatters
DuckDB. Peak RSS is the process's maximum resident set size (wait4). Best of {args.runs} run(s).
The lakes and DuckDB's file are written to {args.lakes}{tmpfs}.

{table}

How this machine scales from one busy core to two, by kind of work (`go run ./bench/scaling`: two
goroutines' throughput over one's, 2.00 is linear; compute in the first-level cache, reads and
writes within the second-level cache, and beyond every cache): {machine}.
{metrics}{iceberg}{bound}{many}{kafka}{goals}""", encoding="utf-8")
    print(f"written {args.results}", file=sys.stderr)


if __name__ == "__main__":
    main()
