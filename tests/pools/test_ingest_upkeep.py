"""Upkeep of the ingest queue (limno.pools.ingest_upkeep): vacuum frees the uploads no
queue entry needs past the grace period (one left by a submit that died between its
copy and its queue entry, one left by a job that died after it was recorded done),
never one a waiting, running or failed file or job still names; verify reports files
that are not where the queue says, and entries that do not parse.

The crashes are real: ``limno`` runs in a process of its own with ``LIMNO_FAULTS``
(limno.storage._faults), which exits at once at the chosen storage call.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from limno.api.local import LocalLake
from limno.journal import Put, StoreState
from limno.pools.ingest_queue import IngestQueue, now_utc
from limno.pools.ingest_upkeep import needed_uploads, uploads_prefix

#: the bound of every child process of these tests (seconds)
BOUND = 120
#: the crash of a submit right after its copy landed, before the queue entry is written
AFTER_COPY = "put_file:1:crash-after@*/ingest/files/*"
#: the crash of a run just before it deletes a done job's copy
BEFORE_CLEANUP = "delete:1:crash-before@*/ingest/files/*"
ZERO = dt.timedelta(0)


def crashed(lake: str, faults: str, *args: str) -> None:
    """``limno --lake LAKE ARGS...`` dying (exit 137) at the storage call ``faults`` names."""
    proc = subprocess.run(
        [sys.executable, "-m", "limno", "--lake", lake, *args],
        capture_output=True,
        text=True,
        timeout=BOUND,
        env={**os.environ, "LIMNO_FAULTS": faults},
        check=False,
    )
    assert proc.returncode == 137, (proc.returncode, proc.stderr)


def data_file(tmp_path: Path, name: str, keys: list[int], bad: bool = False) -> str:
    path = tmp_path / name
    text = "not json\n" if bad else "".join(json.dumps({"k": k}) + "\n" for k in keys)
    path.write_text(text)
    return str(path)


def uploads(root: str, pool_id: str) -> dict[str, str]:
    """The copies kept in the lake at ``root``: file id -> file name."""
    base = Path(root) / uploads_prefix(pool_id)
    return {p.parent.name: p.name for p in base.glob("*/*") if p.is_file()}


def test_vacuum_frees_only_the_uploads_nothing_needs(tmp_path: Path) -> None:
    where = str(tmp_path / "lake")
    pool = LocalLake.init(where).create_pool("p", key="k")
    # A: its job is recorded done, and the run dies before it deletes the copy
    pool.ingest_submit([data_file(tmp_path, "a.ndjson", [1])], copy=True)
    crashed(where, BEFORE_CLEANUP, "ingest", "run", "-p", "p", "--flush")
    (a,) = pool.ingest_queue()
    assert a.state == "done" and a.id in uploads(where, pool.id)
    # B: a bad file, so its job fails (kept for a retry); C: waiting
    (b,) = pool.ingest_submit([data_file(tmp_path, "b.ndjson", [], bad=True)], copy=True)
    assert [j.state for j in pool.ingest_run(force=True)] == ["failed"]
    (c,) = pool.ingest_submit([data_file(tmp_path, "c.ndjson", [3])], copy=True)
    # D: the submit dies between its copy and its queue entry
    crashed(where, AFTER_COPY, "ingest", "submit", "-p", "p", "--copy",
            data_file(tmp_path, "d.ndjson", [4]))  # fmt: skip
    kept = uploads(where, pool.id)
    (d,) = set(kept) - {a.id, b.id, c.id}
    assert kept[d] == "d.ndjson" and d not in {f.id for f in pool.ingest_queue()}
    assert {f.id: f.state for f in pool.ingest_queue()} == {
        a.id: "done",
        b.id: "failed",
        c.id: "queued",
    }
    copies = uploads_prefix(pool.id)

    young = pool.vacuum()  # within the grace period: nothing goes
    # referenced: A's data object, and the copies of B and C
    assert young.removed == [] and young.too_young == 2 and young.referenced == 3
    dry = pool.vacuum(grace=ZERO, dry_run=True)
    assert sorted(dry.removed) == sorted(
        [(f"{copies}/{a.id}/a.ndjson", 9), (f"{copies}/{d}/d.ndjson", 9)]
    )
    assert dry.referenced == 3 and uploads(where, pool.id) == kept  # a dry run deletes nothing
    done = pool.vacuum(grace=ZERO)
    assert sorted(done.removed) == sorted(dry.removed) and not done.dry_run
    assert uploads(where, pool.id) == {b.id: "b.ndjson", c.id: "c.ndjson"}
    # what stays still loads: C's job, and B after it is dropped
    pool.ingest_drop([b.id])
    assert [j.state for j in pool.ingest_run(force=True)] == ["done"]
    assert uploads(where, pool.id) == {}
    assert sorted(pool.scan().column("k").to_pylist()) == [1, 3]
    assert list(LocalLake.open(where).verify()) == []


def test_vacuum_keeps_the_upload_of_a_running_job(tmp_path: Path) -> None:
    where = str(tmp_path / "lake")
    pool = LocalLake.init(where).create_pool("p", key="k")
    (f,) = pool.ingest_submit([data_file(tmp_path, "a.ndjson", [1])], copy=True)
    queue = IngestQueue(pool.storage, pool.id)
    (job,) = queue.batch(pool.config.settings.batcher, now_utc(), force=True)
    assert queue.claim(job, "a-runner") is not None
    report = pool.vacuum(grace=ZERO)
    assert report.removed == [] and report.referenced == 1
    assert f.id in uploads(where, pool.id)


def test_the_copies_that_stay_are_those_not_done() -> None:
    """A file not done, or named by a job not done, keeps its copy; an entry vacuum
    cannot read (no state) keeps it too: freeing is for what is surely done with."""
    items: dict[str, dict[str, Any]] = {
        "f/done": {"state": "done"},
        "f/waiting": {"state": "queued"},
        "f/odd": {"id": "odd"},
        "f/named": {"state": "done"},  # done, but a failed job still names it
        "j/1": {"state": "failed", "files": ["named", "gone"]},
        "j/2": {"state": "done", "files": ["done"]},
        "j/3": {"state": "queued", "files": "not a list"},
    }
    assert needed_uploads(StoreState(1, items)) == {"waiting", "odd", "named", "gone"}


def test_verify_names_what_is_not_where_the_queue_says(tmp_path: Path) -> None:
    where = str(tmp_path / "lake")
    lake = LocalLake.init(where)
    pool = lake.create_pool("p", key="k")
    local = data_file(tmp_path, "local.ndjson", [1])
    (copied,) = pool.ingest_submit([data_file(tmp_path, "up.ndjson", [2])], copy=True)
    (in_place,) = pool.ingest_submit([local])
    assert list(lake.verify()) == []
    copy = f"{uploads_prefix(pool.id)}/{copied.id}/up.ndjson"
    os.remove(Path(where) / copy)
    os.remove(local)
    faults = {f.path: f for f in lake.verify("p")}
    assert set(faults) == {copy, local}
    assert faults[copy].problem == (
        f"queued file {copied.id} ({copied.name}) for branch main is missing:"
        " its job cannot load it"
    )
    assert faults[copy].fix == (
        f"put it back, or drop it (limno ingest drop -p p {copied.id}) and submit it again"
    )
    assert faults[local].problem.startswith(f"queued file {in_place.id} ({local})")
    pool.ingest_drop([copied.id, in_place.id])
    assert list(lake.verify()) == []


def test_verify_names_entries_that_do_not_parse(tmp_path: Path) -> None:
    lake = LocalLake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="k")
    queue = IngestQueue(pool.storage, pool.id)
    stamp = now_utc().isoformat()
    job = {
        "id": "J",
        "branch": "main",
        "fmt": None,
        "files": ["nope"],
        "bytes": 1,
        "state": "queued",
    }
    queue.commit(
        lambda state: [
            Put("f/x", {"id": "x", "name": "x"}),
            Put(
                "f/y",
                {
                    "id": "y",
                    "name": "y",
                    "path": "/y",
                    "size": "big",
                    "submitted": stamp,
                    "branch": "main",
                },
            ),
            Put("j/J", job),
            Put("z/1", {}),
        ]
    )
    where = f"{pool.id}/ingest"
    got = [(f.path, f.problem) for f in lake.verify("p")]
    assert got == [
        (where, "queue entry 'f/x' does not parse (path is not text)"),
        (where, "queue entry 'f/y' does not parse (size 'big' is not a byte count)"),
        (where, "queue entry 'z/1' does not parse (not a file (f/ID) nor a job (j/ID))"),
        (where, "ingest job J (queued) names file nope, which the queue does not hold"),
    ]


@pytest.mark.parametrize("damage", ["truncate", "remove"])
def test_verify_reports_a_damaged_queue_journal(tmp_path: Path, damage: str) -> None:
    lake = LocalLake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="k")
    pool.ingest_submit([data_file(tmp_path, "a.ndjson", [1])])
    pool.ingest_submit([data_file(tmp_path, "b.ndjson", [2])])
    entries = sorted(
        p for p in (tmp_path / "lake" / pool.id / "ingest").iterdir() if p.name[0].isdigit()
    )
    assert entries, "the queue journal has no entry files"
    if damage == "truncate":
        entries[-1].write_bytes(entries[-1].read_bytes()[:5])
    else:
        entries[0].unlink()
    faults = list(lake.verify("p"))
    assert faults and all(f.path.startswith(f"{pool.id}/ingest") for f in faults), faults
