"""The S3 gateway benchmarks' smoke run: ``python -m bench --quick --only gateway_...``.

They start real ``limno serve --s3-port`` processes and use boto3 as a full run does,
at tiny sizes; the test checks the shape of what they report, never a timing.
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
NAMES = {"gateway_get_64mb": True, "gateway_put_64mb": True, "gateway_small_put_p50": False}


@pytest.mark.slow
def test_gateway_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "bench", "--quick", "--only", ",".join(NAMES), "--repeat", "1"]
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
    results = {r["benchmark"]: r for r in json.loads((out / "latest.json").read_text())}
    assert set(results) == set(NAMES)
    for name, higher in NAMES.items():
        r = results[name]
        assert r["higher_is_better"] is higher, r
        assert set(r["peers"]) == {"in-process"}, r
        for value in (r["limno"], r["peers"]["in-process"]):
            assert isinstance(value, float) and math.isfinite(value) and value > 0, r
        assert name in proc.stdout
    assert not list(tmp_path.glob("limno-bench-*")), "the work directory was left behind"
