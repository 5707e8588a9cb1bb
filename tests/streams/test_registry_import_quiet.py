"""Importing confluent-kafka's schema registry client (through ``registry_support``)
prints no warning: authlib's deprecation of its httpx shim showed at every test
collection, and pyproject's filterwarnings cannot quiet it (authlib puts "always" for
its warnings first in the filter list)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _import(module: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_registry_client_imports_without_a_warning() -> None:
    bare = _import("confluent_kafka.schema_registry")  # what the tests imported before
    # when authlib stops warning, registry_support can import the client plainly
    assert "The httpx module is deprecated" in bare.stderr
    quiet = _import("registry_support")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
