"""Journals under many processes: concurrent appenders, and writers killed mid-append.

The workers are ``tests/_workers.py`` in child processes; waits are on whole output
lines or on a condition, and bounded.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from bounded import read_line, stop, wait_until, whole_lines
from journal_support import entry_numbers, verify_faults
from limno.journal import JournalStore, Put
from limno.storage import open_storage

WORKERS = str(Path(__file__).parents[1] / "_workers.py")


def _run_appenders(uri: str, workers: int, count: int, tmp_path: Path) -> list[list[int]]:
    go = tmp_path / f"go-{uuid.uuid4().hex}"
    procs = [
        subprocess.Popen(
            [sys.executable, WORKERS, "append", uri, "s", str(w), str(count), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert read_line(proc.stdout) == "ready"
        go.touch()
        numbers = []
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
            numbers.append([int(line) for line in whole_lines(out)])
        return numbers
    finally:
        stop(procs)


def _check_appenders(uri: str, workers: int, count: int, numbers: list[list[int]]) -> None:
    total = workers * count
    assert sorted(n for ns in numbers for n in ns) == list(range(1, total + 1))
    assert all(ns == sorted(ns) for ns in numbers)  # each writer's entries in order
    storage = open_storage(uri)
    js = JournalStore(storage, "s")
    history = list(js.history())
    assert [n for n, _ in history] == list(range(1, total + 1))
    assert entry_numbers(storage, "s") == list(range(1, total + 1))
    keys = Counter(u["key"] for _, entry in history for u in entry["updates"])
    expected = {f"w{w}-{j}" for w in range(workers) for j in range(count)}
    assert set(keys) == expected
    assert set(keys.values()) == {1}
    state = js.state()
    assert state.n == total
    assert len(state.items) == total
    assert state.items["w3-42"] == {"w": 3, "j": 42}
    assert js.journal.head() == total
    assert verify_faults(js) == []


def test_eight_processes_append_local(tmp_path: Path) -> None:
    uri = str(tmp_path / "store")
    JournalStore(open_storage(uri, create=True), "s").create()
    numbers = _run_appenders(uri, 8, 100, tmp_path)
    _check_appenders(uri, 8, 100, numbers)


@pytest.mark.s3
@pytest.mark.slow
def test_eight_processes_append_s3(s3_uri: str, tmp_path: Path) -> None:
    JournalStore(open_storage(s3_uri), "s").create()
    numbers = _run_appenders(s3_uri, 8, 100, tmp_path)
    _check_appenders(s3_uri, 8, 100, numbers)


def _kill_round(uri: str, tag: str, delay: float, tmp_path: Path) -> list[tuple[int, str]]:
    """Kill an endless writer ``delay`` seconds into its loop; the commits it acknowledged.

    The writer prints to a file, not a pipe, so it never blocks on a full pipe and the
    kill lands anywhere in its loop. It may die halfway through printing a line: only
    whole lines are acknowledgements.
    """
    out_path = tmp_path / f"{tag}.out"
    with open(out_path, "w") as out, open(tmp_path / f"{tag}.err", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, WORKERS, "append-forever", uri, "s", tag, "7"],
            stdout=out,
            stderr=err,
            text=True,
        )
    try:
        wait_until(lambda: "\n" in out_path.read_text(), "the writer's first commit", alive=proc)
        time.sleep(delay)  # not a wait for anything: the random moment of the kill
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, (tmp_path / f"{tag}.err").read_text()
    acked = []
    for line in whole_lines(out_path.read_text()):
        n, key = line.split()
        acked.append((int(n), key))
    return acked


def test_killed_writer_leaves_a_sound_journal(tmp_path: Path) -> None:
    uri = str(tmp_path / "store")
    storage = open_storage(uri, create=True)
    JournalStore(storage, "s", snapshot_every=7).create()
    rng = random.Random()
    acked: dict[str, int] = {}
    for round_ in range(5):
        for n, key in _kill_round(uri, f"r{round_}", rng.uniform(0.0, 0.4), tmp_path):
            acked[key] = n
        js = JournalStore(open_storage(uri), "s", snapshot_every=7)
        head = js.journal.head()
        assert entry_numbers(storage, "s") == list(range(1, head + 1))
        assert head >= max(acked.values())
        assert verify_faults(js) == []
        state = js.state()
        assert state.n == head
        for key, n in acked.items():
            assert key in state.items
            assert js.state(at=n).items.get(key) is not None
        # writing continues where the killed writer stopped
        after = js.commit([Put(f"after-{round_}", {"round": round_})])
        assert after.n == head + 1
        acked[f"after-{round_}"] = after.n
    final = JournalStore(open_storage(uri), "s", snapshot_every=7)
    assert set(acked) <= set(final.state().items)
    assert verify_faults(final) == []
