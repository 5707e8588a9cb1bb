"""The ``limno`` process runs pyarrow's allocator with limno's purge setting, and
numpy's OpenBLAS with no threads of its own.

mimalloc (pyarrow's default allocator) reads ``MIMALLOC_PURGE_DECOMMITS`` once, when
pyarrow's library loads; with ``MIMALLOC_VERBOSE=1`` it prints every option it took to
stderr. So each case runs the real entry point (``python -m limno``) in a fresh
process, on a command that reads Parquet (``get``), and reads the allocator's own
report of the option in effect: the CLI's default, or the user's value when set.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from limno import Lake
from limno.cli._main import NATIVE_DEFAULTS

PURGE = re.compile(r"option 'purge_decommits': (-?\d+)")


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    import pyarrow as pa

    where = str(tmp_path_factory.mktemp("allocator") / "lake")
    Lake.init(where).create_pool("p", key="k").load([pa.table({"k": [1, 2, 3]})])
    return where


def purge_decommits(lake: str, tmp_path: Path, **env: str) -> str:
    """mimalloc's purge_decommits in ``limno --lake LAKE get -p p 2`` under ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MIMALLOC_")}
    proc = subprocess.run(
        [sys.executable, "-m", "limno", "--lake", lake, "get", "-p", "p", "2"],
        capture_output=True,
        text=True,
        env={**base, "XDG_CONFIG_HOME": str(tmp_path), "MIMALLOC_VERBOSE": "1", **env},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "2" in proc.stdout
    found = PURGE.findall(proc.stderr)
    assert len(found) == 1, f"no single purge_decommits report on stderr: {proc.stderr[:2000]}"
    return found[0]


def test_cli_purges_freed_memory_without_decommitting_it(lake: str, tmp_path: Path) -> None:
    assert NATIVE_DEFAULTS["MIMALLOC_PURGE_DECOMMITS"] == "0"
    assert purge_decommits(lake, tmp_path) == "0"  # mimalloc's own default is 1


def test_the_users_setting_wins(lake: str, tmp_path: Path) -> None:
    assert purge_decommits(lake, tmp_path, MIMALLOC_PURGE_DECOMMITS="1") == "1"


def _after_numpy(env: dict[str, str], call_defaults: bool) -> tuple[int, str]:
    """The threads of a new process that imported numpy (``native_defaults`` called
    first, as ``limno``'s entry point does, or not), and its OPENBLAS_NUM_THREADS."""
    setup = "from limno.cli._main import native_defaults; native_defaults()\n"
    code = (setup if call_defaults else "") + (
        "import os, numpy\n"
        "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))"
    )
    run = [sys.executable, "-c", code]
    proc = subprocess.run(run, capture_output=True, text=True, env=env, timeout=120, check=True)
    count, setting = proc.stdout.split()
    return int(count), setting


def test_numpy_starts_no_blas_threads_in_the_cli() -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENBLAS_", "OMP_"))}
    assert _after_numpy(base, call_defaults=True) == (1, "1")
    if (os.cpu_count() or 1) > 1:  # OpenBLAS's own default: a thread per further core
        assert _after_numpy(base, call_defaults=False)[0] > 1
    assert _after_numpy({**base, "OPENBLAS_NUM_THREADS": "2"}, call_defaults=True)[1] == "2"
