"""``cli_start``: the wall time of a whole ``limno`` process, from exec to exit.

A person at a terminal waits for the process, not for the call inside it:
interpreter start, imports, opening the lake, the work, the output. Each command
runs in a fresh process (the installed ``limno`` script, stdout to /dev/null, so
NDJSON output) against a small lake, and the figure is the median wall time. The
commands that read only journals (``--help``, ``ls``, ``log``) should import no
Arrow, DuckDB or numpy at all (tests/cli/test_start_imports.py holds them to it);
``get`` imports pyarrow to read Parquet. Python's bytecode cache is on, in a
directory of the run's own, and warmed by one untimed run of each command: a
``pip install`` compiles limno's bytecode, so a user's process never compiles it.
No peer: the note gives the bare interpreter's start for scale.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.data import parts, rows_table
from bench.harness import Config, Result, median
from limno import Lake

#: the commands timed, by metric name (the pool: ``logs``, key ``k``)
COMMANDS = {
    "limno --help": ["--help"],
    "limno ls": ["ls"],
    "limno log": ["log", "-p", "logs"],
    "limno get": ["get", "-p", "logs", "4242"],
}


def cli_start(cfg: Config) -> list[Result]:
    """Median wall time of each command in :data:`COMMANDS`, in a fresh process; ms."""
    root = cfg.workdir / "cli-start"
    lake = Lake.init(str(root / "lake"))
    pool = lake.create_pool("logs", key="k")
    for i, part in enumerate(parts(rows_table(10_000), 3)):
        pool.load([part], message=f"part {i}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(root / "pycache"), XDG_CONFIG_HOME=str(root / "config"))
    runs = max(5, 4 * cfg.repeat)
    interpreter = _median_wall([sys.executable, "-c", "pass"], env, runs)
    results = []
    for metric, args in COMMANDS.items():
        command = [*_limno(), "--lake", str(root / "lake"), *args]
        results.append(
            Result(
                "cli_start",
                metric,
                "ms",
                _median_wall(command, env, runs),
                higher_is_better=False,
                note=f"a fresh process, median of {runs}; `python -c pass`: {interpreter:.0f} ms",
            )
        )
    return results


def _limno() -> list[str]:
    """The installed ``limno`` script beside this interpreter, else ``python -m limno``."""
    script = Path(sys.executable).with_name("limno")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "limno"]


def _median_wall(command: list[str], env: dict[str, str], runs: int) -> float:
    """Median wall milliseconds of ``runs`` runs of ``command``, after one untimed run.

    Each run is waited for in a blocking ``waitpid``, so its end is seen when it comes:
    ``subprocess.run(timeout=...)`` polls with sleeps that grow to 50 ms, which rounded
    every figure up to its next poll (63, 113, 163... ms). A timer kills a run that hangs.
    """
    walls = []
    for i in range(runs + 1):
        start = time.perf_counter()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        watchdog = threading.Timer(120, proc.kill)
        watchdog.start()
        try:
            code = proc.wait()
        finally:
            watchdog.cancel()
        wall = (time.perf_counter() - start) * 1000
        if code:
            raise subprocess.CalledProcessError(code, command)
        if i:
            walls.append(wall)
    return median(walls)
