"""Merge requests in the lake (limno.pools.reviews): a merge's claim, concurrent updates,
a stale claim taken over, and compare's dry run moving nothing."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from limno import Lake
from limno.api.local_pool import LocalPool
from limno.errors import ConflictError, NotFoundError
from limno.pools.reviews import CLAIM_TTL, MergeAttempt, ReviewStore
from review_support import review_pool

#: how long a test waits for another thread to reach a point
WAIT = 60


@pytest.fixture
def pool(tmp_path: Path) -> LocalPool:
    return review_pool(tmp_path)


def test_a_second_merge_meets_the_first_ones_claim(pool: LocalPool) -> None:
    """While one merge runs (held in its pre-merge hook), another merge and a close of
    the same request are refused; then the first lands and is recorded."""
    mr = pool.open_merge_request("dev", title="four")
    inside, release = threading.Event(), threading.Event()

    def hold(_: dict[str, Any]) -> None:
        inside.set()
        assert release.wait(WAIT)

    pool.hooks.register("pre-merge", hold, name="hold")
    with ThreadPoolExecutor(1) as first:
        running = first.submit(pool.merge_merge_request, mr.id, "fail", "ann")
        assert inside.wait(WAIT)
        with pytest.raises(ConflictError, match="is being merged by ann"):
            pool.merge_merge_request(mr.id, "fail", "bob")
        with pytest.raises(ConflictError, match="ann is merging it"):
            pool.close_merge_request(mr.id, "bob")
        release.set()
        done = running.result(WAIT)
    assert (done.state, done.done_by, done.claim) == ("merged", "ann", None)
    assert done.commit == pool.branches()["main"]
    assert [v.verdict for v in done.verdicts] == ["passed"]


def test_concurrent_updates_keep_every_one(pool: LocalPool) -> None:
    """Eight writers open requests and eight record attempts on one, all at once."""
    first = pool.open_merge_request("dev", title="t0")
    store = ReviewStore(pool.storage, pool.id, pool.name)

    def attempt(i: int) -> None:
        tried = MergeAttempt(f"t{i}", f"user{i}", "fail", "conflict", str(i))
        store.update(first.id, lambda m: dataclasses.replace(m, attempts=(*m.attempts, tried)))

    with ThreadPoolExecutor(8) as workers:
        opened = list(
            workers.map(lambda i: pool.open_merge_request("dev", title=f"t{i}"), range(8))
        )
        list(workers.map(attempt, range(8)))
    listed = {m.id for m in pool.merge_requests("open")}
    assert listed == {first.id, *(m.id for m in opened)}
    assert sorted(a.message for a in pool.merge_request(first.id).attempts) == [
        str(i) for i in range(8)
    ]


def test_a_stale_claim_is_taken_over(pool: LocalPool) -> None:
    mr = pool.open_merge_request("dev", title="four")
    store = ReviewStore(pool.storage, pool.id, pool.name)
    long_ago = (dt.datetime.now(dt.UTC) - CLAIM_TTL - dt.timedelta(seconds=1)).isoformat()
    dead = {"token": "x", "by": "crashed", "since": long_ago}
    store.update(mr.id, lambda m: dataclasses.replace(m, claim=dead))
    done = pool.merge_merge_request(mr.id, author="bob")
    assert (done.state, done.done_by) == ("merged", "bob")


def test_compare_moves_nothing_and_names_conflicts(pool: LocalPool) -> None:
    pool.delete_where("ts = 1", branch="main")
    pool.delete_where("ts = 2", branch="dev")
    before = pool.branches()
    found = pool.compare("dev", "main", rows=1)
    assert pool.branches() == before
    assert found.kind == "merge" and len(found.conflicts) == 1
    assert found.counts == {"added": 2, "removed": 1, "changed": 0}
    sampled = sorted((s.change, s.total, len(s.rows)) for s in found.sample)
    assert sampled == [("added", 1, 1), ("added", 2, 1), ("removed", 3, 1)]
    assert pool.compare("main", "dev").base == found.base
    with pytest.raises(NotFoundError):
        pool.merge_request("3McpXLfnkyHHksrykXHJTVs4AgZ")


def test_verify_reports_a_damaged_review_journal(pool: LocalPool, tmp_path: Path) -> None:
    lake = Lake.open(str(tmp_path / "lake"))
    pool.open_merge_request("dev", title="four")
    assert list(lake.verify("logs")) == []
    entry = tmp_path / "lake" / pool.id / "reviews" / "1"
    entry.write_bytes(entry.read_bytes()[:-5])
    faults = list(lake.verify("logs"))
    assert [f.path for f in faults] == [f"{pool.id}/reviews/1"]


def test_compare_counts_and_samples_past_its_limit(pool: LocalPool) -> None:
    """The diff streams by: entries stop at ``limit``, counts and the row sample do not."""
    pool.load([pa.table({"ts": [5]})], branch="dev")
    found = pool.compare("dev", "main", rows=5, limit=1)
    assert found.counts == {"added": 2, "removed": 0, "changed": 0}
    assert (len(found.entries), found.truncated) == (1, True)
    assert sorted(r["ts"] for s in found.sample for r in s.rows) == [4, 5]
    none = pool.compare("dev", "main", limit=0)
    assert (none.entries, none.truncated, none.counts["added"]) == ((), True, 2)
