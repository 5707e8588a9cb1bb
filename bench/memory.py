"""Peak memory of one ingest, measured in a fresh process.

``python -m bench.memory SYSTEM ROWS DIR`` runs one.

The process generates the input, then resets the kernel's high-water mark of its
resident set (``/proc/self/clear_refs``), runs the ingest and reports, as JSON on
stdout, the new high-water mark minus the resident set just before the ingest: the
memory the ingest itself needed on top of its input, whatever allocated it (Python,
Arrow's pool, Rust, DuckDB). Where the mark cannot be reset (not Linux), it falls
back to ``ru_maxrss``, which then also counts the input.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from bench.data import rows_table
from bench.systems import ingest


def _status(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def main(argv: list[str]) -> int:
    system, rows, root = argv[0], int(argv[1]), Path(argv[2])
    data = rows_table(rows)
    data = data.combine_chunks()
    # import the system's libraries before the baseline (a run imports them once)
    ingest(system, rows_table(10, seed=1), root / "warmup")
    before = _status("VmRSS")
    exact = before is not None and _reset_peak()
    ingest(system, data, root / "run")
    peak = _status("VmHWM") if exact else None
    if peak is None or before is None:
        peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        before = 0
    else:
        peak_bytes = peak
    print(json.dumps({"peak_bytes": max(peak_bytes - before, 1), "exact": exact}))
    return 0


def measure(system: str, rows: int, root: Path) -> float:
    """Peak memory (MB) that ``system`` needs to ingest ``rows`` rows, from a subprocess."""
    root.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-m", "bench.memory", system, str(rows), str(root)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory run of {system} failed:\n{proc.stderr[-2000:]}")
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(doc["peak_bytes"]) / 2**20


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
