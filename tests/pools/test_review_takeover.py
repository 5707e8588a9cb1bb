"""A merge request's stale claim taken over (limno.pools.review_claims): the merger
that held it, woken up after the takeover, cannot land nor record an outcome."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from limno.api.local_pool import LocalPool
from limno.errors import ConflictError, HookVetoError
from limno.pools.review_claims import FENCE
from limno.pools.reviews import CLAIM_TTL, MergeRequest, ReviewStore
from review_support import review_pool

#: how long a test waits for another thread to reach a point
WAIT = 60


@pytest.fixture
def pool(tmp_path: Path) -> LocalPool:
    return review_pool(tmp_path)


def _age(pool: LocalPool, mr_id: str) -> None:
    """Make the request's claim older than CLAIM_TTL (as if its merger had stalled)."""
    long_ago = (dt.datetime.now(dt.UTC) - CLAIM_TTL - dt.timedelta(seconds=1)).isoformat()

    def aged(m: MergeRequest) -> MergeRequest:
        assert m.claim is not None
        return dataclasses.replace(m, claim={**m.claim, "since": long_ago})

    ReviewStore(pool.storage, pool.id, pool.name).update(mr_id, aged)


def _fences(pool: LocalPool) -> list[str]:
    items = pool.versioned.refs.journal.state().items
    return [k for k in items if k.startswith(FENCE)]


def _stalled_merge(pool: LocalPool, mr_id: str, then: Any) -> tuple[BaseException, str]:
    """Merge ``mr_id`` as ann, stalled in her pre-merge hook while ``then()`` runs (after
    her claim was aged past CLAIM_TTL); ann's error and main's head after it."""
    inside, release = threading.Event(), threading.Event()

    def hold(payload: dict[str, Any]) -> None:
        if payload["author"] == "ann":
            inside.set()
            assert release.wait(WAIT)

    pool.hooks.register("pre-merge", hold, name="hold")
    with ThreadPoolExecutor(1) as first:
        stale = first.submit(pool.merge_merge_request, mr_id, "source-wins", "ann")
        assert inside.wait(WAIT)
        _age(pool, mr_id)
        then()
        release.set()
        error = stale.exception(WAIT)
    assert error is not None
    return error, pool.branches()["main"]


def test_the_stale_merger_cannot_land_after_a_takeover(pool: LocalPool) -> None:
    """Bob takes the stale claim over (his merge is vetoed, so main stays where it is
    and the request open): ann's merge, a fast-forward, must not land after that."""
    mr = pool.open_merge_request("dev", title="four")
    before = pool.branches()["main"]

    def veto_bob(payload: dict[str, Any]) -> None:
        if payload["author"] == "bob":
            raise RuntimeError("not bob")

    pool.hooks.register("pre-merge", veto_bob, name="veto")

    def take_over() -> None:
        with pytest.raises(HookVetoError):
            pool.merge_merge_request(mr.id, "fail", "bob")

    error, main = _stalled_merge(pool, mr.id, take_over)
    assert isinstance(error, ConflictError) and "taken over" in str(error)
    assert main == before
    final = pool.merge_request(mr.id)
    assert (final.state, final.claim) == ("open", None)
    assert [(a.by, a.outcome) for a in final.attempts] == [("bob", "vetoed")]
    assert _fences(pool) == []
    done = pool.merge_merge_request(mr.id, "fail", "carol")  # a later merge goes through
    assert (done.state, done.done_by) == ("merged", "carol")
    assert _fences(pool) == []


def test_closing_over_a_stale_claim_fences_its_merger(pool: LocalPool) -> None:
    mr = pool.open_merge_request("dev", title="four")
    before = pool.branches()["main"]
    error, main = _stalled_merge(pool, mr.id, lambda: pool.close_merge_request(mr.id, "bob"))
    assert isinstance(error, ConflictError)
    assert main == before
    final = pool.merge_request(mr.id)
    assert (final.state, final.done_by, final.attempts) == ("closed", "bob", ())
    assert _fences(pool) == []


def test_two_merges_racing_from_one_read_land_exactly_once(
    pool: LocalPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ann and bob both read the unclaimed request and get past the step between the
    read and the claim (ann's first, then bob's) before either claims: one claim lands
    and merges, the other is refused naming the merger (neither may fence the other out)."""
    mr = pool.open_merge_request("dev", title="four")
    ann_read, both_read = threading.Event(), threading.Barrier(2, timeout=WAIT)
    passed: set[str] = set()
    swap = ReviewStore.swap

    def paced(self: ReviewStore, mr_id: str, change: Any, before: Any) -> MergeRequest:
        def step(read: MergeRequest) -> bool:
            who = threading.current_thread().name
            first = who not in passed
            passed.add(who)
            if first and who == "bob":
                assert ann_read.wait(WAIT)
            ok = bool(before(read))
            if first:
                if who == "ann":
                    ann_read.set()
                both_read.wait()
            return ok

        return swap(self, mr_id, change, step)

    monkeypatch.setattr(ReviewStore, "swap", paced)
    outcome: dict[str, Any] = {}

    def merge(who: str) -> None:
        try:
            outcome[who] = pool.merge_merge_request(mr.id, "fail", who).state
        except ConflictError as e:
            outcome[who] = e

    threads = [threading.Thread(target=merge, args=(who,), name=who) for who in ("ann", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
        assert not t.is_alive()
    merged = [who for who, got in outcome.items() if got == "merged"]
    assert len(merged) == 1, outcome
    (other,) = {"ann", "bob"} - set(merged)
    refused = str(outcome[other])  # while the winner merges, or once it has merged
    assert f"being merged by {merged[0]}" in refused or f"by {merged[0]} at" in refused
    final = pool.merge_request(mr.id)
    assert (final.state, final.done_by, final.claim) == ("merged", merged[0], None)
    assert _fences(pool) == []
