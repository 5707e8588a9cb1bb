"""The scale simulation that docs/architecture.md quotes (scripts/simulate_scale.py).

The document's claims rest on it, so it must keep modelling limno's real constants and
retry rule, and its output must obey the protocol's invariants: every commit attempted
is counted once (landed, failed or unfinished), rebases appear when writers share a
branch and never across pools or branches, and 503s appear only above the per-prefix
request limit. Tiny runs (a second in all); no timing is asserted.
"""

from __future__ import annotations

import importlib.util
import inspect
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

from limno.core import committed, versioning
from limno.journal import JournalStore
from limno.journal import _journal as journal_module

ROOT = Path(__file__).resolve().parents[2]


def _load_script() -> ModuleType:
    path = ROOT / "scripts" / "simulate_scale.py"
    spec = importlib.util.spec_from_file_location("simulate_scale", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


sim = _load_script()


def test_constants_are_limnos() -> None:
    assert committed.BOUNDARY_MODULUS == sim.BOUNDARY_MODULUS
    assert committed.MAX_RANGE == sim.MAX_RANGE
    assert committed._ranges._size == sim.RANGE_CACHE
    assert versioning.MAX_COMMIT_ATTEMPTS == sim.MAX_COMMIT_ATTEMPTS
    every = inspect.signature(JournalStore.__init__).parameters["snapshot_every"].default
    assert every == sim.SNAPSHOT_EVERY
    assert 63 < sim.entries_per_range() < 64  # geometric with p = 1/64, cut at 512


def test_backoff_is_the_journals(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulated writers back off exactly as limno.journal._journal.backoff does."""
    slept: list[float] = []
    monkeypatch.setattr(journal_module.time, "sleep", slept.append)
    monkeypatch.setattr(journal_module.random, "uniform", lambda lo, hi: hi)

    class Highest(random.Random):
        def uniform(self, a: float, b: float) -> float:
            return b

    for attempt in range(10):
        journal_module.backoff(attempt)
    assert slept == [sim.backoff(Highest(), attempt) for attempt in range(10)]
    assert max(slept) == 0.05


@pytest.mark.parametrize("scenario", ["same branch", "separate branches", "separate pools"])
def test_every_commit_is_counted_once(scenario: str) -> None:
    timed = sim.simulate(scenario, 4, seconds=4.0)
    assert timed.attempted > timed.landed > 0
    assert timed.landed == timed.attempted - timed.failed - timed.unfinished
    counted = sim.simulate(scenario, 3, seconds=1e4, loads=2)
    assert counted.attempted == 6 and counted.unfinished == 0
    assert counted.landed == counted.attempted - counted.failed


def test_retries_grow_on_one_branch_and_not_across_pools() -> None:
    alone = sim.simulate("same branch", 1, seconds=8.0)
    crowd = sim.simulate("same branch", 8, seconds=8.0)
    assert alone.retries_max == 0 and alone.lost_mean == 0
    assert crowd.retries_mean > alone.retries_mean
    pools = sim.simulate("separate pools", 8, seconds=8.0)
    assert pools.retries_max == 0 and pools.lost_mean == 0
    assert pools.landed > crowd.landed
    # other branches' moves cost lost appends on the shared journal, never a rebase
    assert sim.simulate("separate branches", 8, seconds=8.0).retries_max == 0


def test_throttling_only_above_the_prefix_limit() -> None:
    default = sim.StoreModel()
    assert sim.simulate("separate pools", 8, seconds=4.0, model=default).throttled == 0
    # one partition limited to 200 requests/s: one writer (~50/s) stays under it,
    # eight writers do not
    tight = sim.StoreModel(read_limit=200.0, write_limit=200.0)
    one = "separate pools, one partition"
    assert sim.simulate(one, 1, seconds=4.0, model=tight).throttled == 0
    assert sim.simulate(one, 8, seconds=4.0, model=tight).throttled > 0


def test_runs_are_deterministic_for_a_seed() -> None:
    a = sim.simulate("same branch", 4, seconds=3.0, seed=7)
    assert a == sim.simulate("same branch", 4, seconds=3.0, seed=7)
    assert a != sim.simulate("same branch", 4, seconds=3.0, seed=8)


def test_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert sim.main(["--quick", "--writers", "1,2", "--seconds", "2"]) == 0
    out = capsys.readouterr().out
    assert "| same branch | 2 |" in out and "| separate pools, one partition | 1 |" in out
    for title in ("S3 requests per commit", "Snapshot metadata", "Branch journal", "Vacuum"):
        assert f"## {title}" in out
    assert "| data objects (= key ranges = write tasks = describe tasks) | 3,725,291 |" in out
