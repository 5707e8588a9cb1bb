"""``limno vacuum`` and ``limno verify`` over the ingest queue's uploads, on a lake's path
and through a server (``mode``): an upload left behind by a submit that died between
its copy and its queue entry is freed past the grace period (a dry run only names it),
a queued one stays; a queued upload deleted from the lake is a fault of ``verify``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from git_scenarios import Lk

pytestmark = pytest.mark.usefixtures("isolated_home")

#: the crash of a submit right after its copy landed, before its queue entry
AFTER_COPY = "put_file:1:crash-after@*/ingest/files/*"


def pool_id(lk: Lk, name: str = "p") -> str:
    return next(p["id"] for p in lk.ok("ls").rows() if p["name"] == name)


def uploads(lk: Lk) -> set[str]:
    """The copies kept in the lake, relative to the lake's directory."""
    root = Path(lk.path)
    base = root / pool_id(lk) / "ingest" / "files"
    return {str(p.relative_to(root)) for p in base.glob("*/*") if p.is_file()}


def submit_that_dies(lk: Lk, path: str) -> None:
    """``limno ingest submit --copy`` on the lake's directory, dying after the copy."""
    proc = subprocess.run(
        [sys.executable, "-m", "limno", "--lake", lk.path, "ingest", "submit", "-p", "p",
         "--copy", path],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LIMNO_FAULTS": AFTER_COPY},
        check=False,
    )  # fmt: skip
    assert proc.returncode == 137, proc.stderr


def test_vacuum_frees_an_upload_whose_submit_died(lk: Lk) -> None:
    lk.ok("create", "p", "-k", "k")
    queued = lk.ok("ingest", "submit", "-p", "p", "--copy", lk.file([{"k": 1}])).text.strip()
    (kept,) = uploads(lk)
    submit_that_dies(lk, lk.file([{"k": 2}]))
    (orphan,) = uploads(lk) - {kept}
    assert [f["id"] for f in lk.ok("ingest", "ls", "-p", "p").rows()] == [queued]
    young = lk.ok("vacuum", "-p", "p")  # within the grace period
    assert (
        young.text == ""
        and "kept 1 referenced, 0 held by writes in flight and 1 younger" in young.err
    )
    dry = lk.ok("vacuum", "-p", "p", "--grace", "0", "--dry-run")
    assert dry.text == f"{orphan}\t{os.path.getsize(Path(lk.path) / orphan)}\n"
    assert dry.err.startswith("would remove 1 object(s)") and "kept 1 referenced" in dry.err
    assert uploads(lk) == {kept, orphan}
    done = lk.ok("vacuum", "-p", "p", "--grace", "0")
    assert done.text == dry.text and done.err.startswith("removed 1 object(s)")
    assert uploads(lk) == {kept}
    lk.ok("ingest", "run", "-p", "p")
    assert [r["k"] for r in lk.ok("scan", "-p", "p").rows()] == [1]
    assert uploads(lk) == set()


def test_verify_reports_a_deleted_upload(lk: Lk) -> None:
    lk.ok("create", "p", "-k", "k")
    fid = lk.ok("ingest", "submit", "-p", "p", "--copy", lk.file([{"k": 1}])).text.strip()
    (name,) = [f["name"] for f in lk.ok("ingest", "ls", "-p", "p").rows()]
    (copy,) = uploads(lk)
    lk.ok("verify")
    os.remove(Path(lk.path) / copy)
    r = lk.fail("verify", "p")
    assert r.err.splitlines()[0] == (
        f"fault: {copy}: queued file {fid} ({name}) for branch main is missing: its job"
        f" cannot load it (to fix: put it back, or drop it (limno ingest drop -p p {fid}) and"
        " submit it again)"
    )
    assert r.err.splitlines()[1].startswith("error: 1 fault(s) in lake ")
    lk.ok("ingest", "drop", "-p", "p", fid)
    assert lk.ok("verify").text.startswith("ok: lake ")
