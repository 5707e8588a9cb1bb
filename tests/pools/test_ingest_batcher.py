"""The ingest batcher: its grouping rules (a pure function, with a property test), the
queue (submit checks, all or nothing), and runs (one commit per job, a bad file fails
only its job, retry and drop, maintenance runs it, the status report).

Races between runners and crashes mid-job: test_ingest_races.py.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from limno.api.local import LocalLake
from limno.errors import AlreadyExistsError, InvalidInputError, NotFoundError
from limno.pools.ingest_queue import IngestQueue, QueuedFile, plan
from limno.pools.settings import BatcherSettings

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def qf(
    i: int, size: int = 10, age: float = 0.0, branch: str = "main", fmt: str | None = None
) -> QueuedFile:
    """A waiting file ``i``, submitted ``age`` seconds before T0 (later ``i``: later)."""
    submitted = T0 - dt.timedelta(seconds=age) + dt.timedelta(microseconds=i)
    return QueuedFile(f"f{i:04d}", f"f{i}", f"/d/f{i}", size, submitted.isoformat(), branch, fmt)


def ids(jobs: list[list[QueuedFile]]) -> list[list[str]]:
    return [[f.id for f in job] for job in jobs]


# -- grouping ---------------------------------------------------------------------------------


def test_files_wait_until_the_minimum_count_then_go_together() -> None:
    s = BatcherSettings(min_files=3)
    assert plan([qf(1), qf(2)], s, T0).jobs == []
    assert [f.id for f in plan([qf(1), qf(2)], s, T0).waiting] == ["f0001", "f0002"]
    assert ids(plan([qf(1), qf(2), qf(3)], s, T0).jobs) == [["f0001", "f0002", "f0003"]]


def test_files_wait_until_the_minimum_bytes() -> None:
    s = BatcherSettings(min_bytes=100)
    assert plan([qf(1, 60)], s, T0).jobs == []
    assert ids(plan([qf(1, 60), qf(2, 40)], s, T0).jobs) == [["f0001", "f0002"]]


def test_jobs_are_cut_at_max_files_and_max_bytes() -> None:
    by_count = plan([qf(i) for i in range(5)], BatcherSettings(max_files=2), T0)
    assert ids(by_count.jobs) == [["f0000", "f0001"], ["f0002", "f0003"], ["f0004"]]
    by_bytes = plan([qf(1, 60), qf(2, 50), qf(3, 40)], BatcherSettings(max_bytes=100), T0)
    assert ids(by_bytes.jobs) == [["f0001"], ["f0002", "f0003"]]


def test_a_file_larger_than_max_bytes_is_a_job_of_its_own() -> None:
    p = plan([qf(1, 5), qf(2, 500), qf(3, 5)], BatcherSettings(max_bytes=100), T0)
    assert ids(p.jobs) == [["f0001"], ["f0002"], ["f0003"]]


def test_a_small_remainder_waits_unless_old_or_forced() -> None:
    s = BatcherSettings(min_files=2, max_files=2, max_age=dt.timedelta(minutes=5))
    files = [qf(1), qf(2), qf(3)]
    p = plan(files, s, T0)
    assert ids(p.jobs) == [["f0001", "f0002"]]
    assert [f.id for f in p.waiting] == ["f0003"]
    assert ids(plan(files, s, T0, force=True).jobs) == [["f0001", "f0002"], ["f0003"]]
    old = [qf(i, age=301) for i in (1, 2, 3)]
    assert ids(plan(old, s, T0).jobs) == [["f0001", "f0002"], ["f0003"]]
    one_old = plan([qf(1), qf(2), qf(3, age=301)], s, T0)  # the oldest goes first
    assert ids(one_old.jobs) == [["f0003", "f0001"]]
    assert [f.id for f in one_old.waiting] == ["f0002"]


def test_the_oldest_file_past_max_age_makes_a_job_however_small() -> None:
    s = BatcherSettings(min_files=10, max_age=dt.timedelta(seconds=60))
    assert plan([qf(1, age=59), qf(2)], s, T0).jobs == []
    assert ids(plan([qf(1, age=61), qf(2)], s, T0).jobs) == [["f0001", "f0002"]]


def test_branches_and_formats_never_share_a_job() -> None:
    files = [qf(1), qf(2, branch="dev"), qf(3, fmt="csv"), qf(4), qf(5, branch="dev")]
    p = plan(files, BatcherSettings(), T0)
    assert sorted(ids(p.jobs)) == [["f0001", "f0004"], ["f0002", "f0005"], ["f0003"]]


def test_files_go_in_submit_order() -> None:
    files = [qf(3), qf(1), qf(2)]
    assert ids(plan(files, BatcherSettings(max_files=2), T0).jobs) == [
        ["f0001", "f0002"],
        ["f0003"],
    ]


def test_a_newer_file_never_goes_ahead_of_an_older_one() -> None:
    """An old small file waiting for company holds back a newer one big enough to go
    alone (with dedup, the last file submitted must win), until it is due itself."""
    s = BatcherSettings(min_bytes=100, max_bytes=135, max_age=dt.timedelta(minutes=5))
    files = [qf(1, size=11), qf(2, size=131)]
    now = plan(files, s, T0)
    assert now.jobs == [] and [f.id for f in now.waiting] == ["f0001", "f0002"]
    later = plan(files, s, T0 + dt.timedelta(minutes=6))
    assert ids(later.jobs) == [["f0001"], ["f0002"]]


@st.composite
def batcher_settings(draw: st.DrawFn) -> BatcherSettings:
    max_files = draw(st.integers(1, 8))
    max_bytes = draw(st.integers(1, 300))
    return BatcherSettings(
        min_files=draw(st.integers(1, max_files)),
        max_files=max_files,
        min_bytes=draw(st.integers(0, max_bytes)),
        max_bytes=max_bytes,
        max_age=dt.timedelta(seconds=draw(st.integers(0, 100))),
    )


waiting_files = st.lists(
    st.tuples(
        st.integers(0, 150),  # size
        st.integers(0, 200),  # age in seconds
        st.sampled_from(["main", "dev"]),
        st.sampled_from([None, "csv"]),
    ),
    max_size=40,
).map(lambda specs: [qf(i, *spec) for i, spec in enumerate(specs)])


@settings(max_examples=300, deadline=None)
@given(waiting_files, batcher_settings(), st.booleans())
def test_every_file_ends_in_exactly_one_job_or_waits(
    files: list[QueuedFile], s: BatcherSettings, force: bool
) -> None:
    p = plan(files, s, T0, force)
    placed = [f.id for job in p.jobs for f in job] + [f.id for f in p.waiting]
    assert sorted(placed) == sorted(f.id for f in files)  # each once: in a job or waiting
    if force:
        assert p.waiting == []
    for job in p.jobs:
        assert 1 <= len(job) <= s.max_files
        assert sum(f.size for f in job) <= s.max_bytes or len(job) == 1
        assert len({(f.branch, f.fmt) for f in job}) == 1
        aged = T0 - min(dt.datetime.fromisoformat(f.submitted) for f in job) >= s.max_age
        full = len(job) >= s.min_files and sum(f.size for f in job) >= s.min_bytes
        assert force or aged or full
    for f in p.waiting:  # a file waits only while young
        assert T0 - dt.datetime.fromisoformat(f.submitted) < s.max_age
    for job in p.jobs:  # and never while a newer file of its branch and format goes
        for f in job:
            assert not [
                w
                for w in p.waiting
                if (w.branch, w.fmt) == (f.branch, f.fmt)
                and (w.submitted, w.id) < (f.submitted, f.id)
            ]


@settings(max_examples=100, deadline=None)
@given(waiting_files, batcher_settings())
def test_once_every_file_is_old_nothing_waits(files: list[QueuedFile], s: BatcherSettings) -> None:
    later = T0 + s.max_age + dt.timedelta(seconds=1)
    assert plan(files, s, later).waiting == []


def test_batcher_settings_parse_and_check() -> None:
    s = BatcherSettings().parse("min-files=2, max-bytes=1MiB,max-age=10m")
    assert (s.min_files, s.max_bytes, s.max_age) == (2, 1 << 20, dt.timedelta(minutes=10))
    assert BatcherSettings.from_json(s.to_json()) == s
    for bad in ("min-files=0", "min-files=5,max-files=4", "colour=red", "max-files=x", "nope"):
        with pytest.raises(InvalidInputError):
            BatcherSettings().parse(bad)


# -- the queue and its runs --------------------------------------------------------------------


def ndjson(path: Path, keys: range, tag: str = "v") -> str:
    path.write_text("".join(json.dumps({"k": k, "v": f"{tag}{k}"}) + "\n" for k in keys))
    return str(path)


@pytest.fixture
def lake(tmp_path: Path) -> LocalLake:
    lake = LocalLake.init(str(tmp_path / "lake"))
    lake.create_pool("p", key="k")
    return lake


def test_submit_checks_every_file_and_queues_all_or_none(lake: LocalLake, tmp_path: Path) -> None:
    pool = lake.pool("p")
    good = ndjson(tmp_path / "a.ndjson", range(3))
    (tmp_path / "dir").mkdir()
    for bad, says in (
        (str(tmp_path / "missing.ndjson"), "no such file"),
        (str(tmp_path / "dir"), "is not a file"),
        ("-", "not stdin"),
        ("http://example.com/x.csv", "only local paths and s3:// URLs"),
    ):
        with pytest.raises(InvalidInputError, match=says):
            pool.ingest_submit([good, bad])
    assert pool.ingest_queue() == []
    with pytest.raises(NotFoundError):
        pool.ingest_submit([good], branch="nope")
    (queued,) = pool.ingest_submit([good], "ndjson")
    assert (queued.size, queued.fmt, queued.state, queued.path) == (
        (tmp_path / "a.ndjson").stat().st_size,
        "ndjson",
        "queued",
        good,
    )
    assert dt.datetime.fromisoformat(queued.submitted) <= dt.datetime.now(dt.UTC)
    with pytest.raises(AlreadyExistsError, match="already queued"):
        pool.ingest_submit([good])
    with pytest.raises(AlreadyExistsError, match="already queued"):
        pool.ingest_submit([good, good], branch="main")


def test_each_job_is_one_commit_carrying_its_id(lake: LocalLake, tmp_path: Path) -> None:
    pool = lake.pool("p")
    pool.ingest_settings("max-files=2")
    files = [ndjson(tmp_path / f"f{i}.ndjson", range(i * 10, i * 10 + 3)) for i in range(5)]
    pool.ingest_submit(files)
    before = len(pool.log())
    jobs = pool.ingest_run()
    assert [len(j.files) for j in jobs] == [2, 2, 1]
    assert all(j.state == "done" and j.rows == len(j.files) * 3 for j in jobs)
    log = pool.log()
    assert len(log) == before + 3
    assert {c.meta["ingest_job"]: c.id for c in log[:3]} == {j.id: j.commit for j in jobs}
    assert sorted(pool.scan().column("k").to_pylist()) == [
        k for i in range(5) for k in range(i * 10, i * 10 + 3)
    ]
    assert {f.state for f in pool.ingest_queue()} == {"done"}
    assert pool.ingest_run() == []  # nothing left: no commit
    assert len(pool.log()) == before + 3
    assert list(lake.verify()) == []


def test_a_bad_file_fails_its_job_only_and_stays_queued(lake: LocalLake, tmp_path: Path) -> None:
    pool = lake.pool("p")
    pool.ingest_settings("max-files=2")
    a = ndjson(tmp_path / "a.ndjson", range(0, 3))
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"k": 1\n')
    c = ndjson(tmp_path / "c.ndjson", range(10, 13))
    d = ndjson(tmp_path / "d.ndjson", range(20, 23))
    pool.ingest_submit([a, str(bad), c, d])
    jobs = pool.ingest_run()
    assert [j.state for j in jobs] == ["failed", "done"]
    failed = jobs[0]
    assert failed.commit is None and failed.error is not None
    assert str(bad) in failed.error and "invalid JSON" in failed.error
    assert sorted(pool.scan().column("k").to_pylist()) == [10, 11, 12, 20, 21, 22]
    states = {f.name: (f.state, f.job) for f in pool.ingest_queue()}
    assert states[a] == states[str(bad)] == ("failed", failed.id)
    assert states[c] == ("done", jobs[1].id)
    # fixed: retry the job's files; or drop the bad one and retry the rest
    with pytest.raises(InvalidInputError, match="not failed"):
        pool.ingest_retry([jobs[1].id])
    (dropped,) = pool.ingest_drop([f.id for f in pool.ingest_queue() if f.name == str(bad)])
    assert dropped.name == str(bad)
    assert [f.name for f in pool.ingest_retry([failed.id])] == [a]
    (again,) = pool.ingest_run()
    assert (again.state, again.rows) == ("done", 3)
    assert sorted(pool.scan().column("k").to_pylist())[:3] == [0, 1, 2]
    assert [f.name for f in pool.ingest_queue()] == [a, c, d]
    assert list(lake.verify()) == []


def test_a_failed_file_may_be_submitted_again(lake: LocalLake, tmp_path: Path) -> None:
    pool = lake.pool("p")
    path = tmp_path / "late.ndjson"
    path.write_text("not json\n")
    pool.ingest_submit([str(path)])
    assert [j.state for j in pool.ingest_run()] == ["failed"]
    ndjson(path, range(3))
    pool.ingest_submit([str(path)])
    assert [j.state for j in pool.ingest_run()] == ["done"]
    assert [f.state for f in pool.ingest_queue()] == ["failed", "done"]


def test_a_file_waiting_again_is_not_retried_too(lake: LocalLake, tmp_path: Path) -> None:
    """Fixed and submitted again, a failed file's old entry cannot be retried as well:
    the file would be loaded twice (one waiting entry per path, as submit keeps)."""
    pool = lake.pool("p")
    path = tmp_path / "late.ndjson"
    path.write_text("not json\n")
    (failed,) = pool.ingest_submit([str(path)])
    assert [j.state for j in pool.ingest_run()] == ["failed"]
    ndjson(path, range(3))
    (again,) = pool.ingest_submit([str(path)])
    with pytest.raises(AlreadyExistsError, match=f"already queued for main \\({again.id}\\)"):
        pool.ingest_retry([failed.id])
    assert [(f.id, f.state) for f in pool.ingest_queue()] == [
        (failed.id, "failed"),
        (again.id, "queued"),
    ]
    (job,) = pool.ingest_run()
    assert (job.state, job.rows, job.files) == ("done", 3, (again.id,))
    assert sorted(pool.scan().column("k").to_pylist()) == [0, 1, 2]


def test_a_file_gone_before_its_job_fails_the_job(lake: LocalLake, tmp_path: Path) -> None:
    pool = lake.pool("p")
    path = Path(ndjson(tmp_path / "gone.ndjson", range(3)))
    pool.ingest_submit([str(path)])
    path.unlink()
    (job,) = pool.ingest_run()
    assert job.state == "failed"
    assert f"{path}: no such file" in str(job.error)


def test_copies_kept_in_the_lake_outlive_the_file(lake: LocalLake, tmp_path: Path) -> None:
    pool = lake.pool("p")
    path = Path(ndjson(tmp_path / "x.csv.ndjson", range(4)))
    (queued,) = pool.ingest_submit([str(path)], copy=True)
    assert queued.path.startswith("lake:") and queued.name == str(path)
    path.unlink()
    (job,) = pool.ingest_run()
    assert (job.state, job.rows) == ("done", 4)
    copies = Path(lake.storage.local_path(f"{pool.id}/ingest/files") or "")
    assert not copies.exists() or not any(p.is_file() for p in copies.rglob("*"))


def test_settings_decide_when_jobs_are_made(lake: LocalLake, tmp_path: Path) -> None:
    pool = lake.pool("p")
    assert pool.ingest_settings() == BatcherSettings()
    pool.ingest_settings("min-files=3,max-age=1h")
    assert lake.pool("p").ingest_settings().min_files == 3  # stored in the pool's config
    pool.ingest_submit([ndjson(tmp_path / f"{i}.ndjson", range(i, i + 1)) for i in range(2)])
    assert pool.ingest_run() == []
    assert {f.state for f in pool.ingest_queue()} == {"queued"}
    (job,) = pool.ingest_run(force=True)
    assert job.state == "done" and len(job.files) == 2


def test_branches_get_their_own_jobs(lake: LocalLake, tmp_path: Path) -> None:
    pool = lake.pool("p")
    pool.branch("dev")
    pool.ingest_submit([ndjson(tmp_path / "m.ndjson", range(3))])
    pool.ingest_submit([ndjson(tmp_path / "d.ndjson", range(10, 12))], branch="dev")
    (dev,) = pool.ingest_run("dev")
    assert dev.branch == "dev"
    assert pool.scan("main").num_rows == 0
    assert sorted(pool.scan("dev").column("k").to_pylist()) == [10, 11]
    (main,) = pool.ingest_run()
    assert main.branch == "main" and pool.scan("main").num_rows == 3


def test_manage_runs_the_batcher_and_status_reports_it(lake: LocalLake, tmp_path: Path) -> None:
    pool = lake.pool("p")
    pool.ingest_submit([ndjson(tmp_path / "a.ndjson", range(5))])
    said: list[str] = []
    assert lake.manage(once=True, log=said.append) == 1
    assert any(line.startswith("p@main: ingest ") and "done" in line for line in said)
    assert pool.scan().num_rows == 5
    report = lake.pool("p").status()["ingest_batches"].to_pylist()
    assert [(r["state"], r["files"], r["rows"]) for r in report] == [("done", 1, 5)]
    assert report[0]["commit"] == pool.log()[0].id


def test_done_jobs_are_forgotten_after_a_week(lake: LocalLake, tmp_path: Path) -> None:
    pool = lake.pool("p")
    pool.ingest_submit([ndjson(tmp_path / "a.ndjson", range(2))])
    pool.ingest_run()
    queue = IngestQueue(lake.storage, pool.id)
    now = dt.datetime.now(dt.UTC)
    assert queue.batch(BatcherSettings(), now + dt.timedelta(days=6)) == []
    assert len(queue.jobs()) == 1
    queue.batch(BatcherSettings(), now + dt.timedelta(days=8))
    assert queue.jobs() == [] and queue.files() == []
