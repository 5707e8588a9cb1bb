"""Exactly once: every submitted file is committed once, however runners of the ingest
batcher race or die.

Two runner processes start together on one lake (tests/pools/ingest_worker.py); a
runner process dies just after its commit landed; and, in-process, a run is faulted
at every storage call (fail, crash before it, crash after it) and then recovered by
a clean run, as after a restart. Waits are bounded and on whole output lines.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from bounded import read_line, stop, whole_lines
from limno.api.local import LocalLake
from limno.errors import LimnoError
from limno.pools import ingest_runner
from limno.pools.ingest_queue import IngestQueue
from limno.storage import open_storage
from limno.storage._faults import Crash, FaultyStorage, Rule

WORKER = str(Path(__file__).with_name("ingest_worker.py"))
FAULTS = ("fail", "crash-before", "crash-after")
#: a call number no run reaches: a rule that only counts
NEVER = 10**9


def make_lake(root: Path, files: int, max_files: int, uri: str | None = None) -> str:
    """A lake with pool ``p`` (key k) and ``files`` files queued: file i holds keys
    ``i*100 .. i*100+2``."""
    where = uri or str(root / "lake")
    pool = LocalLake.init(where).create_pool("p", key="k")
    pool.ingest_settings(f"max-files={max_files}")
    paths = []
    for i in range(files):
        path = root / f"in-{i}.ndjson"
        path.write_text("".join(json.dumps({"k": i * 100 + j}) + "\n" for j in range(3)))
        paths.append(str(path))
    pool.ingest_submit(paths)
    return where


def assert_exactly_once(where: str, files: int) -> None:
    """Every file done, in one job done with one commit; every row once; a sound lake."""
    lake = LocalLake.open(where)
    pool = lake.pool("p")
    queue = pool.ingest_queue()
    assert len(queue) == files and {f.state for f in queue} == {"done"}, queue
    jobs = {j.id: j for j in pool.ingest_jobs()}
    assert {j.state for j in jobs.values()} == {"done"}
    assert Counter(f.job for f in queue) == Counter({j: len(jobs[j].files) for j in jobs})
    committed = Counter(c.meta.get("ingest_job") for c in pool.log() if "ingest_job" in c.meta)
    assert committed == Counter(dict.fromkeys(jobs, 1))
    assert {j.commit for j in jobs.values()} == {
        c.id for c in pool.log() if c.meta.get("ingest_job") in jobs
    }
    keys = sorted(pool.scan().column("k").to_pylist())
    assert keys == [i * 100 + j for i in range(files) for j in range(3)]
    assert list(lake.verify()) == []


def _runners(where: str, n: int, tmp_path: Path) -> list[list[str]]:
    go = tmp_path / f"go-{uuid.uuid4().hex}"
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, where, "p", str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert read_line(proc.stdout) == "ready"
        go.touch()
        out = []
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=300)
            assert proc.returncode == 0, stderr
            out.append(whole_lines(stdout))
        return out
    finally:
        stop(procs)


def _race(where: str, files: int, tmp_path: Path) -> None:
    lines = _runners(where, 2, tmp_path)
    ran = [line.split()[0] for worker in lines for line in worker]
    assert all(line.split()[1] == "done" for worker in lines for line in worker)
    assert len(ran) == len(set(ran))  # no job was run by both
    assert_exactly_once(where, files)
    assert sorted(ran) == sorted(j.id for j in LocalLake.open(where).pool("p").ingest_jobs())


def test_two_runner_processes_commit_each_file_once(tmp_path: Path) -> None:
    _race(make_lake(tmp_path, 12, 1), 12, tmp_path)


@pytest.mark.s3
def test_two_runner_processes_on_s3(tmp_path: Path, s3_uri: str) -> None:
    _race(make_lake(tmp_path, 6, 1, s3_uri), 6, tmp_path)


def test_a_runner_killed_after_its_commit_is_recovered_once(tmp_path: Path) -> None:
    """The runner's process exits right after its commit moved the branch, before the
    queue says so; the next run finds the commit instead of loading again."""
    where = make_lake(tmp_path, 3, 2)
    go = tmp_path / "go"
    go.touch()
    env = {**os.environ, "LIMNO_FAULTS": "put_if_absent:1:crash-after@*/branches/[0-9]*"}
    proc = subprocess.run(
        [sys.executable, WORKER, where, "p", str(go)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 137, proc.stderr
    assert whole_lines(proc.stdout) == ["ready"]
    pool = LocalLake.open(where).pool("p")
    (landed,) = [c for c in pool.log() if "ingest_job" in c.meta]
    running = [j for j in pool.ingest_jobs() if j.state == "running"]
    assert [j.id for j in running] == [landed.meta["ingest_job"]]
    ran = pool.ingest_run()
    assert sorted(j.state for j in ran) == ["done", "done"]
    assert next(j for j in ran if j.id == running[0].id).commit == landed.id
    assert_exactly_once(where, 3)


def test_two_commits_of_one_job_land_once(tmp_path: Path) -> None:
    """A runner presumed dead that wakes up and commits after another took its job over:
    the second commit finds the first (checked against the parent it would land on)."""
    where = make_lake(tmp_path, 2, 2)
    pool = LocalLake.open(where).pool("p")
    queue = IngestQueue(pool.storage, pool.id)
    (job,) = queue.batch(pool.config.settings.batcher, ingest_runner.now_utc())
    files = queue.files()
    first = ingest_runner._load(pool, job, files, ingest_runner._History(pool, job))
    heads = len(pool.log())
    second = ingest_runner._load(pool, job, files, ingest_runner._History(pool, job))
    assert second.id == first.id
    assert len(pool.log()) == heads
    assert sorted(pool.scan().column("k").to_pylist()) == [0, 1, 2, 100, 101, 102]


def _faulted_run(where: str, rule: Rule) -> tuple[str, FaultyStorage]:
    """One run on ``where`` through a store applying ``rule`` (the pool is opened first,
    so calls count from the run's start); what came of it."""
    store = FaultyStorage(open_storage(where), threads=lambda name: name != "limno-leases")
    pool = LocalLake(store).pool("p")
    store.rules = [rule]
    try:
        pool.ingest_run(force=True)
    except Crash:
        return "crashed", store
    except LimnoError:
        return "failed", store
    return "ok", store


def _walk(tmp_path: Path, fault: str, every: int = 1) -> list[str]:
    """Fault the run at call k, for k = 1, 1 + every, ... up to its number of calls;
    after each, a clean run must leave every file committed once."""
    root = tmp_path / "template"
    root.mkdir()
    template = make_lake(root, 3, 2)
    probe = str(tmp_path / "probe")
    shutil.copytree(template, probe)
    result, counting = _faulted_run(probe, Rule("any", NEVER, "fail"))
    assert result == "ok"
    n = len(counting.calls)
    assert n > 20
    outcomes = []
    for k in range(1, n + 1, every):
        where = str(tmp_path / f"{fault}-{k}")
        shutil.copytree(template, where)
        result, _ = _faulted_run(where, Rule("any", k, fault))
        outcomes.append(result)
        LocalLake.open(where).pool("p").ingest_run(force=True)  # the restart
        assert_exactly_once(where, 3)
        shutil.rmtree(where)
    return outcomes


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_at_some_calls_of_a_run_then_a_restart(tmp_path: Path, fault: str) -> None:
    outcomes = _walk(tmp_path, fault, every=7)
    assert "ok" not in outcomes[:3]


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_at_every_call_of_a_run_then_a_restart(tmp_path: Path, fault: str) -> None:
    outcomes = _walk(tmp_path, fault)
    assert len(outcomes) > 20
