"""The server benchmark's smoke run: ``python -m bench --quick --only server``.

It starts real ``limno serve`` processes and 8 client processes, as a full run does,
at tiny sizes; the test checks the shape of what it reports, never a timing.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_server_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "bench", "--quick", "--only", "server", "--repeat", "1"]
    proc = subprocess.run(
        [*cmd, "--out", str(out), "--workdir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "server: done" in proc.stderr, proc.stderr[-4000:]
    results = {r["benchmark"]: r for r in json.loads((out / "latest.json").read_text())}
    assert set(results) == {
        "server_small_commits",
        "server_small_commits_workers1",
        "server_scan",
        "server_scan_ipc",
        "server_get_p50",
        "server_commit_cpu",
        "server_scan_ipc_cpu",
        "server_get_cpu",
    }
    for name, higher in (
        ("server_small_commits", True),
        ("server_small_commits_workers1", True),
        ("server_scan", True),
        ("server_scan_ipc", True),
        ("server_get_p50", False),
        ("server_commit_cpu", False),
        ("server_scan_ipc_cpu", False),
        ("server_get_cpu", False),
    ):
        r = results[name]
        assert r["higher_is_better"] is higher, r
        assert set(r["peers"]) == {"in-process"}, r
        for value in (r["limno"], r["peers"]["in-process"]):
            assert isinstance(value, float) and math.isfinite(value) and value > 0, r
        assert name in proc.stdout and "in-process" in proc.stdout
    assert not list(tmp_path.glob("limno-bench-*")), "the work directory was left behind"
