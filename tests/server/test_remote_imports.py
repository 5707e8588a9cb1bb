"""``limno ls`` and ``log`` against a server import neither Arrow nor the server side.

Like tests/cli/test_start_imports.py for a lake path: the real entry point in a
fresh process under ``-X importtime``, an assertion about the modules it imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clirunner import ok
from server_support import served

FORBIDDEN = (
    "pyarrow",
    "numpy",
    "duckdb",
    "pandas",
    "fastapi",
    "uvicorn",
    "starlette",
    "limno.server",
    "limno.data.objects",
    "limno.pools.records",
)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("imports")
    lake = str(root / "lake")
    ok("--lake", lake, "init")
    ok("--lake", lake, "create", "logs", "-k", "ts")
    ok("--lake", lake, "load", "-p", "logs", "-", stdin=b'{"ts": 1}\n')
    with served(lake) as served_url:
        yield served_url


@pytest.mark.parametrize("args", [("ls",), ("ls", "logs"), ("log", "-p", "logs")])
def test_listings_from_a_server_stay_light(url: str, tmp_path: Path, args: tuple[str, ...]) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "LIMNO_DEBUG": "1"}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "limno", "--lake", url, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    lines = proc.stderr.splitlines()
    assert proc.returncode == 0, [x for x in lines if not x.startswith("import time:")]
    modules = {x.rsplit("|", 1)[1].strip() for x in lines if x.startswith("import time:")}
    assert "limno.api.remote" in modules and "httpx" in modules
    heavy = [p for p in FORBIDDEN if any(m == p or m.startswith(p + ".") for m in modules)]
    assert heavy == []
    assert proc.stdout.strip()
