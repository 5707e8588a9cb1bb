"""Results, timing, the stdout table and the JSON files of a benchmark run."""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

#: peers in table order; a benchmark fills the ones it can run (``in-process``: limno
#: itself, the peer of the figures through ``limno serve``)
PEERS = ("delta-rs", "pyiceberg", "duckdb", "pyarrow", "spark", "in-process", "confluent-kafka")


@dataclass(frozen=True)
class Config:
    """What a run measures: sizes and repetitions (``quick`` shrinks both)."""

    quick: bool
    repeat: int
    workdir: Path

    @classmethod
    def make(cls, quick: bool, repeat: int | None, workdir: Path) -> Config:
        return cls(quick, repeat or (2 if quick else 5), workdir)

    def rows(self, full: int, quick: int) -> int:
        return quick if self.quick else full


@dataclass
class Result:
    """One line of the results: limno's figure and each peer's for one metric."""

    benchmark: str
    metric: str
    unit: str
    limno: float
    peers: dict[str, float] = field(default_factory=dict)
    higher_is_better: bool = True
    note: str = ""

    def ratio(self) -> float | None:
        """limno against the best peer, oriented so that > 1 means limno is better."""
        values = [v for v in self.peers.values() if v > 0]
        if not values or self.limno <= 0:
            return None
        if self.higher_is_better:
            return self.limno / max(values)
        return min(values) / self.limno

    def to_json(self) -> dict[str, Any]:
        out = {
            "benchmark": self.benchmark,
            "metric": self.metric,
            "unit": self.unit,
            "limno": self.limno,
            "peers": dict(self.peers),
            "higher_is_better": self.higher_is_better,
        }
        if self.note:
            out["note"] = self.note
        return out


class Skipped(Exception):
    """A benchmark that cannot run here; the message says why."""


def timed(fn: Callable[[], object], collect: bool = True) -> float:
    """Seconds one call of ``fn`` takes (garbage collected before, not during).

    ``collect=False`` skips the collection before (it can take far longer than a
    millisecond-scale operation; such loops collect once before they start).
    """
    if collect:
        gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation."""
    data = sorted(values)
    if not data:
        raise ValueError("no values")
    pos = (len(data) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def repeat_median(cfg: Config, fn: Callable[[], float]) -> float:
    """The median of ``cfg.repeat`` measurements; ``fn`` returns one measurement."""
    return median(fn() for _ in range(cfg.repeat))


# -- output ------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100_000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _peer_columns(results: Sequence[Result]) -> list[str]:
    """The peers the results have figures of: :data:`PEERS` in order, then any other
    name a benchmark gave its peer (``duckdb-by-hand``), so that no figure is dropped."""
    named = {p for r in results for p in r.peers}
    return [p for p in PEERS if p in named] + sorted(named.difference(PEERS))


def table(results: Sequence[Result]) -> str:
    """The results as a fixed-width text table (peers without any figure left out)."""
    peers = _peer_columns(results)
    head = ["benchmark", "metric", "unit", "limno", *peers, "ratio"]
    rows = []
    for r in results:
        ratio = r.ratio()
        rows.append(
            [
                r.benchmark,
                r.metric,
                r.unit,
                _fmt(r.limno),
                *(_fmt(r.peers.get(p)) for p in peers),
                "-" if ratio is None else f"{ratio:.2f}x",
            ]
        )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    lines = [
        "  ".join(
            (c.ljust(w) if i < 3 else c.rjust(w))
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in [head, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(results: Sequence[Result]) -> str:
    """The results as a Markdown table."""
    peers = _peer_columns(results)
    head = ["benchmark", "metric", "unit", "limno", *peers, "limno vs best peer"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * (len(head) - 3)]
    for r in results:
        ratio = r.ratio()
        cells = [
            r.benchmark,
            r.metric,
            r.unit,
            _fmt(r.limno),
            *(_fmt(r.peers.get(p)) for p in peers),
            "-" if ratio is None else f"{ratio:.2f}x",
        ]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def write_results(out_dir: Path, results: Sequence[Result], machine: dict[str, Any]) -> Path:
    """``latest.json`` (the results list) and ``machine.json`` beside it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "latest.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps([r.to_json() for r in results], indent=2) + "\n")
    tmp.replace(path)
    (out_dir / "machine.json").write_text(json.dumps(machine, indent=2) + "\n")
    return path


def machine_info(cfg: Config, skipped: dict[str, str]) -> dict[str, Any]:
    """Cores, memory, CPU, Python and library versions of this run."""
    memory = 0
    cpu = platform.processor() or platform.machine()
    with _suppress():
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024
    with _suppress():
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions: dict[str, str | None] = {}
    for dist in ("limno", "pyarrow", "numpy", "duckdb", "deltalake", "pyiceberg", "pyspark"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    commit: str | None = None
    with _suppress():
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            check=True,
        ).stdout.strip()
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cores": os.cpu_count(),
        "memory_bytes": memory,
        "cpu": cpu,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "versions": versions,
        "git_commit": commit,
        "quick": cfg.quick,
        "repeat": cfg.repeat,
        "skipped": dict(skipped),
    }


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        return isinstance(exc, (OSError, ValueError, subprocess.SubprocessError))


def replace(result: Result, **changes: Any) -> Result:
    return dataclasses.replace(result, **changes)
