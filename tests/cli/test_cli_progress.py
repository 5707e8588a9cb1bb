"""Progress bars on stderr for long work: drawn when stderr is a terminal (a pseudo-
terminal here), absent when it is not (pipes, files, these tests' other runs)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clirunner import ok
from lake_modes import located

pytestmark = pytest.mark.usefixtures("isolated_home")

#: what rich draws: a bar segment, or the cursor control of a live display
DRAWN = ("━", "\x1b[?25l")


@pytest.fixture
def lake(tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Pools ``logs`` and ``other``: the lake's path, or a server on it (``mode``)."""
    where = str(tmp_path / "lake")
    ok("--lake", where, "init")
    ok("--lake", where, "create", "logs", "-k", "ts")
    ok("--lake", where, "create", "other", "-k", "ts")
    with located(where, mode, monkeypatch) as location:
        yield location


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "logs.ndjson"
    path.write_text("".join(f'{{"ts": {i}, "msg": "message {i}"}}\n' for i in range(5000)))
    return path


def limno(*args: str, tty: bool) -> tuple[str, str]:
    """``limno ARGS`` in a fresh process, stderr on a pseudo-terminal when ``tty``:
    (stdout, everything written to stderr)."""
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120"}
    command = [sys.executable, "-m", "limno", *args]
    if not tty:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout, done.stderr
    master, slave = pty.openpty()
    try:
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env
        ) as proc:
            os.close(slave)
            slave = -1
            err = bytearray()
            while True:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                err += chunk
            assert proc.stdout is not None
            out = proc.stdout.read().decode()
            assert proc.wait(timeout=120) == 0, err.decode(errors="replace")
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    return out, err.decode(errors="replace")


def test_load_draws_a_bar_of_bytes_on_a_terminal(lake: str, data: Path) -> None:
    out, err = limno("--lake", lake, "load", "-p", "logs", str(data), tty=True)
    assert len(out.strip()) == 27  # the commit id alone on stdout
    assert "loading into logs@main" in err
    assert any(mark in err for mark in DRAWN)
    assert "B/s" in err or "kB" in err or "bytes" in err  # bytes and a rate
    assert "committed 1 object(s), 5000 record(s)" in err


def test_no_bar_when_stderr_is_not_a_terminal(lake: str, data: Path) -> None:
    _, err = limno("--lake", lake, "load", "-p", "logs", str(data), tty=False)
    assert err == "committed 1 object(s), 5000 record(s) to logs@main\n"
    _, err = limno("--lake", lake, "compact", "-p", "logs", tty=False)
    assert "\x1b" not in err and "compacting" not in err


def test_verify_counts_pools_on_a_terminal(lake: str) -> None:
    out, err = limno("--lake", lake, "verify", tty=True)
    assert out.startswith("ok: lake")
    assert "verifying" in err and "pools" in err and any(mark in err for mark in DRAWN)


@pytest.mark.parametrize(
    ("args", "label"),
    [
        (("compact", "-p", "logs"), "compacting logs@main"),
        (("vacuum", "-p", "logs", "--dry-run"), "vacuuming logs"),
    ],
)
def test_compact_and_vacuum_show_activity_on_a_terminal(
    lake: str, data: Path, args: tuple[str, ...], label: str
) -> None:
    ok("--lake", lake, "load", "-p", "logs", str(data))
    ok("--lake", lake, "load", "-p", "logs", str(data))
    _, err = limno("--lake", lake, *args, tty=True)
    assert label in err
