"""``limno manage --once`` and the ingest jobs that fail in its pass, with the queue
read and changed on a lake's path and through a server (``mode``).

``manage`` runs next to the lake (on its path) in both modes. A failed ingest job
makes the pass exit 1 with one ``error:`` line naming the job and the reason, once
the rest of the pass is done. A job that failed on its input stays failed, its files
with it, until ``limno ingest retry``; one that failed on a storage error is queued
again, three attempts in all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clirunner import fail, ok

pytestmark = pytest.mark.usefixtures("isolated_home")

#: every write of a data object fails (a store that is down)
DATA_WRITES_FAIL = "write:*:fail@*/data/*"


def _jobs(lake: str, pool: str) -> list[dict[str, Any]]:
    return ok("--lake", lake, "ingest", "ls", "-p", pool, "--jobs", "-f", "ndjson").rows()


def _files(lake: str, pool: str) -> dict[str, str]:
    rows = ok("--lake", lake, "ingest", "ls", "-p", pool, "-f", "ndjson").rows()
    return {r["id"]: r["state"] for r in rows}


def _ts(lake: str, pool: str) -> list[int]:
    return [r["ts"] for r in ok("--lake", lake, "scan", "-p", pool, "-f", "ndjson").rows()]


def _submit(lake: str, pool: str, *paths: Path) -> list[str]:
    r = ok("--lake", lake, "ingest", "submit", "-p", pool, *map(str, paths))
    return r.text.split()


def _error(err: str) -> str:
    lines = err.splitlines()
    assert lines[-1].startswith("error: ") and "Traceback" not in err, err
    return lines[-1]


def test_a_failed_job_fails_the_pass_after_the_rest_of_it(
    lake: str, lake_path: str, tmp_path: Path
) -> None:
    for pool in ("logs", "metrics"):
        ok("--lake", lake, "create", pool, "-k", "ts")
    bad, good, other = (tmp_path / n for n in ("bad.ndjson", "good.ndjson", "m.ndjson"))
    bad.write_text('{"ts": 1}\nnot json\n')
    good.write_text('{"ts": 2}\n')
    other.write_text('{"ts": 7}\n')
    bad_id, good_id = _submit(lake, "logs", bad, good)
    _submit(lake, "metrics", other)

    r = fail("--lake", lake_path, "manage", "--once")
    (job,) = _jobs(lake, "logs")
    said = _error(r.err)
    assert said.startswith(f"error: logs@main: ingest job {job['id']} (2 file(s)) failed: ")
    assert "InvalidInputError: " in said and "line 2: invalid JSON" in said
    # the rest of the pass was done: the other pool's job, and every vacuum
    assert "metrics@main: ingest " in r.err and "logs@main: vacuum: " in r.err
    assert "metrics@main: vacuum: " in r.err and "pass(es) done" not in r.err
    assert _ts(lake, "metrics") == [7] and _ts(lake, "logs") == []
    # recorded as failed, with its reason; its files with it
    assert (job["state"], job["attempts"]) == ("failed", 1)
    assert "line 2: invalid JSON" in job["error"]
    assert _files(lake, "logs") == {bad_id: "failed", good_id: "failed"}

    # a failed job is not run again: the next pass has nothing to tell
    r = ok("--lake", lake_path, "manage", "--once")
    assert "manage: 1 pass(es) done" in r.err
    assert [(j["state"], j["attempts"]) for j in _jobs(lake, "logs")] == [("failed", 1)]

    # until its files are dropped or retried
    ok("--lake", lake, "ingest", "drop", "-p", "logs", bad_id)
    ok("--lake", lake, "ingest", "retry", "-p", "logs", job["id"])
    assert _files(lake, "logs") == {good_id: "queued"}
    ok("--lake", lake_path, "manage", "--once")
    assert _ts(lake, "logs") == [2]


def test_a_storage_error_queues_the_job_again_three_times_in_all(
    lake: str, lake_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok("--lake", lake, "create", "logs", "-k", "ts")
    data = tmp_path / "a.ndjson"
    data.write_text('{"ts": 1}\n{"ts": 2}\n')
    (file_id,) = _submit(lake, "logs", data)
    with monkeypatch.context() as down:
        down.setenv("LIMNO_FAULTS", DATA_WRITES_FAIL)  # for manage, run in this process
        said = [_error(fail("--lake", lake_path, "manage", "--once").err) for _ in range(3)]
    (job,) = _jobs(lake, "logs")
    head = f"error: logs@main: ingest job {job['id']} (1 file(s)) failed"
    assert [line.split(": StorageError: ")[0] for line in said] == [
        f"{head} (attempt 1 of 3, queued again)",
        f"{head} (attempt 2 of 3, queued again)",
        f"{head} (attempt 3 of 3)",
    ]
    assert all("injected failure" in line for line in said)
    assert (job["state"], job["attempts"]) == ("failed", 3)
    assert job["error"].startswith("StorageError: ")
    assert _files(lake, "logs") == {file_id: "failed"}
    ok("--lake", lake_path, "manage", "--once")  # the store is back: nothing runs by itself
    assert _ts(lake, "logs") == []
    ok("--lake", lake, "ingest", "retry", "-p", "logs", file_id)
    ok("--lake", lake_path, "manage", "--once")
    assert _ts(lake, "logs") == [1, 2]
    assert [j["state"] for j in _jobs(lake, "logs")] == ["failed", "done"]
