"""``limno etl --follow``: one process that runs the config again whenever an input
branch gets a commit (here: commits made by the test's process), printing each run's
commit id; exactly once across a SIGKILL mid-run and a restart; SIGTERM ends it with
exit 0 and nothing partial; ``--exit-after`` ends it when idle."""

from __future__ import annotations

from contextlib import AbstractContextManager as ContextManager
from pathlib import Path
from subprocess import Popen
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from bench.etl import expected, workload

from bounded import DEFAULT_TIMEOUT, read_line, wait_until, whole_lines
from clirunner import fail, ok
from etl_support import CONFIG, EXPECTED, batch, records_after
from follow_support import limno_process
from git_scenarios import assert_verified
from limno.api import Lake
from limno.etl.state import read_state

pytestmark = pytest.mark.usefixtures("isolated_home")


def following(lake: str, err: Path, config: Path, *extra: str) -> ContextManager[Popen[str]]:
    """``limno etl --follow`` (stdout a pipe, stderr in ``err``), killed and reaped after."""
    args = ["--lake", lake, "etl", str(config), "--follow", "--interval", "20ms", *extra]
    return limno_process(args, err)


def _said(err: Path, text: str) -> bool:
    return any(text in line for line in whole_lines(err.read_text()))


def _records(lake: str) -> list[dict[str, Any]]:
    return ok("--lake", lake, "scan", "-p", "Staging", "-f", "ndjson").rows()


def _head(lake: str) -> str:
    return str(
        ok("--lake", lake, "log", "-p", "Staging", "-n", "1", "-f", "ndjson").rows()[0]["id"]
    )


def test_follow_runs_on_each_new_input_commit(lake: str, tmp_path: Path) -> None:
    err = tmp_path / "err.txt"
    with following(lake, err, CONFIG) as proc:
        # no Raw yet: it waits for the pool (not an error)
        wait_until(lambda: _said(err, "waiting for Raw@main"), "the wait for Raw", alive=proc)
        ok("--lake", lake, "create", "Raw", "-k", "kafka.offset")
        assert proc.stdout is not None
        for n in range(1, len(EXPECTED) + 1):
            ok("--lake", lake, "load", "-p", "Raw", batch(n))  # another process's commit
            commit = read_line(proc.stdout)
            assert commit == _head(lake), f"batch {n}: the line is the run's commit"
            assert _records(lake) == records_after(n), f"after batch {n}"
        proc.terminate()
        assert proc.wait(DEFAULT_TIMEOUT) == 0
        assert proc.stdout.read() == ""  # no run without new input printed anything
    assert _said(err, "etl invoices: run ")
    assert "Traceback" not in err.read_text()


def test_idle_exit_and_option_checks(lake: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "Raw", "-k", "kafka.offset")
    ok("--lake", lake, "load", "-p", "Raw", batch(1))
    err = tmp_path / "err.txt"
    with following(lake, err, CONFIG, "--exit-after", "300ms") as proc:
        assert proc.stdout is not None
        first = read_line(proc.stdout)  # the backlog, at once
        assert proc.wait(DEFAULT_TIMEOUT) == 0  # then idle: it ends by itself
        assert proc.stdout.read() == ""
    assert first == _head(lake)
    r = fail("--lake", lake, "etl", str(CONFIG), "--exit-after", "1s")
    assert r.err == "error: --exit-after and --interval need --follow\n"


def _batches(events: pa.Table, count: int) -> list[pa.Table]:
    """``events`` in ``count`` loads, each a slice of both topics (offset order)."""
    topic = pc.struct_field(events.column("kafka"), "topic")
    parts = [events.filter(pc.equal(topic, t)) for t in ("Invoices", "InvoiceStatus")]
    return [
        pa.concat_tables(
            [
                p.slice(b * len(p) // count, (b + 1) * len(p) // count - b * len(p) // count)
                for p in parts
            ]
        )  # fmt: skip
        for b in range(count)
    ]


@pytest.mark.parametrize("mode", ["local"])
def test_sigkill_mid_run_then_sigterm_exactly_once(lake: str, tmp_path: Path) -> None:
    events = workload(12_000)
    loads = _batches(events, 4)
    handle = Lake.open(lake)
    raw = handle.create_pool("Raw", "kafka.offset")
    raw.load([loads[0]])
    err = tmp_path / "err.txt"
    with following(lake, err, CONFIG) as first:
        assert first.stdout is not None
        read_line(first.stdout)
        raw.load([loads[1]])
        wait_until(lambda: _said(err, "run 2 "), "the second run", alive=first)
        first.kill()  # mid-run, or (on a fast run) just after it: either is exactly once
        first.wait(DEFAULT_TIMEOUT)
    staging = handle.pool("Staging")
    # restarted: it finds what the killed run left (or did) and goes on
    with following(lake, err, CONFIG) as second:
        raw.load([loads[2]])
        consumed = len(loads[0]) + len(loads[1]) + len(loads[2])
        wait_until(
            lambda: sum(n + 1 for p in read_state(staging, "main", "invoices").consumed.values()
                        for n in p.values()) == consumed,
            "the restart to catch up", alive=second,
        )  # fmt: skip
        raw.load([loads[3]])
        mark = err.read_text().count(": run ")
        wait_until(lambda: err.read_text().count(": run ") > mark, "a run", alive=second)
        second.terminate()  # during (or after) that run: it ends the run, then exits 0
        assert second.wait(DEFAULT_TIMEOUT) == 0
    ok("--lake", lake, "etl", str(CONFIG))  # whatever the stop left: done once
    rows = staging.scan().to_pylist()
    assert [r["kafka"]["offset"] for r in rows] == list(range(len(rows)))

    def plain(value: dict[str, object] | None) -> dict[str, object] | None:
        return None if value is None else {k: v for k, v in value.items() if v is not None}

    got = sorted(((r["key"], plain(r["value"])) for r in rows), key=repr)
    assert got == sorted(((k, plain(v)) for k, v in expected(events)), key=repr)
    assert_verified(lake)
