"""``python -m bench [--quick] [--out DIR] [--only NAME,...]``: run the suite.

Prints a table (benchmark, metric, unit, limno, each peer, ratio limno/best peer
oriented so that > 1 means limno is better) and writes ``DIR/latest.json`` (the
results) and ``DIR/machine.json`` (the machine and library versions).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bench import benchmarks
from bench.harness import Config, machine_info, markdown, table, write_results

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 2 repetitions")
    parser.add_argument("--repeat", type=int, help="repetitions (default 5, quick 2)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument(
        "--only",
        help="comma-separated benchmarks: "
        + ", ".join(name for name, _, _ in benchmarks.BENCHMARKS),
    )
    parser.add_argument(
        "--spark",
        action="store_true",
        help="run the Spark benchmarks in a --quick run too (a full run always does)",
    )
    parser.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    parser.add_argument(
        "--workdir", type=Path, help="where data is written (default: a temporary directory)"
    )
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    known = {name for name, _, _ in benchmarks.BENCHMARKS}
    if only is not None and only - known:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(only - known))}")
    if args.quick and only is None:
        # cdc_lag starts PostgreSQL, a broker and Kafka Connect: --only cdc_lag runs it
        only = known - {"cdc_lag"} - (set() if args.spark else {"spark", "spark_streaming"})

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="limno-bench-", dir=args.workdir) as work:
        cfg = Config.make(args.quick, args.repeat, Path(work))
        results, skipped = benchmarks.run(cfg, only, log)
    if args.quick and not args.spark and args.only is None:
        for name in ("spark", "spark_streaming"):
            skipped[name] = "not in --quick runs (Spark's start-up alone is slow); add --spark"
            log(f"{name}: skipped: not in --quick runs; add --spark")
    if args.quick and args.only is None:
        skipped["cdc_lag"] = "not in --quick runs (its parts take a minute to start)"
        log("cdc_lag: skipped: not in --quick runs; --only cdc_lag runs it")
    machine = machine_info(cfg, skipped)
    path = write_results(args.out, results, machine)
    print(table(results))
    if args.markdown:
        print()
        print(markdown(results))
    cores, mem = machine["cores"], machine["memory_bytes"] / 2**30
    log(
        f"{len(results)} results in {time.perf_counter() - start:.0f}s on {cores} cores,"
        f" {mem:.0f} GiB; written to {os.path.relpath(path)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
