"""Exhaustive model check of the vacuum/writer protocol of ``limno.core.gc``.

Each side is a small state machine whose steps are the protocol's atomic actions
(one storage read or write, or one compare-and-swap append to the branch store).
The checker explores every interleaving of a vacuum (two runs in a row) with a
set of writers and checks, in every reachable state:

- every object a branch holds exists (always);
- every staged object exists, and every load and staged commit succeeds (when no
  lease dies: a lease is only lost by a writer stalled past its TTL);
- every process finishes (no deadlock).

It also runs the same exploration on deliberately broken variants of the
protocol (a vacuum that reads branches before staging areas, writers that skip
the epoch check, a vacuum that ignores leases...) and requires each to be caught:
a checker that passes a broken protocol proves nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

# -- the shared state -------------------------------------------------------------------


@dataclass(frozen=True)
class World:
    main: frozenset[str] = frozenset()
    side: frozenset[str] | None = None  # branch "b" (None: deleted)
    epoch: int = 0
    runs: tuple[tuple[int, frozenset[str]], ...] = ()
    objects: frozenset[str] = frozenset()
    tombs: frozenset[str] = frozenset()
    staging: tuple[tuple[str, int], ...] = ()
    leases: tuple[tuple[int, frozenset[str]], ...] = ()
    deaths: int = 0  # leases lost so far (a writer stalled past its TTL)

    def candidates(self) -> frozenset[str]:
        return frozenset().union(*(c for _, c in self.runs)) if self.runs else frozenset()


@dataclass(frozen=True)
class Flaws:
    """Switches that break the protocol on purpose (all off: the real protocol)."""

    staging_before_leases: bool = False
    skip_epoch_check: bool = False
    skip_busy_wait: bool = False
    ignore_leases: bool = False
    no_mark: bool = False
    stage_without_ticket: bool = False


Proc = tuple[Any, ...]  # (kind, pc, locals...) — immutable
Step = tuple[Proc, World]

# -- writers ----------------------------------------------------------------------------


def _land(
    proc: Proc, w: World, pc: int, keys: frozenset[str], since: int | None, flaws: Flaws
) -> list[Step]:
    """The landing loop, from pc (read) to pc+3 (CAS); locals[-1] holds the state read."""
    kind, cur, *loc = proc
    step = cur - pc
    if step == 0:  # read the branch store: the branch and the gc entry
        return [((kind, cur + 1, *loc, (w.main, w.epoch, w.runs)), w)]
    seen_main, seen_epoch, seen_runs = loc[-1]
    if step == 1:  # a registered run deciding about our keys: wait, then read again
        busy = any(keys & c for _, c in seen_runs)
        if busy and not flaws.skip_busy_wait:
            return [((kind, pc, *loc[:-1]), w)]
        return [((kind, cur + 1, *loc), w)]
    if step == 2:  # epoch moved (or no ticket): the keys must have no tombstone
        moved = since is None or (seen_epoch != since and not flaws.skip_epoch_check)
        if moved and keys & w.tombs:
            return [(("refused", kind), w)]
        return [((kind, cur + 1, *loc), w)]
    # compare-and-swap: the branch and the gc entry as read
    if w.main == seen_main and w.epoch == seen_epoch and w.runs == seen_runs:
        return [((kind, cur + 1, *loc[:-1]), replace(w, main=w.main | keys))]
    return [((kind, pc, *loc[:-1]), w)]


def load(x: str) -> Callable[[Proc, World, Flaws], list[Step]]:
    """Ticket, lease, write x, land x, release the lease."""

    def step(proc: Proc, w: World, flaws: Flaws) -> list[Step]:
        _, pc, *loc = proc
        if pc == 0:
            return [(("load", 1, w.epoch), w)]
        if pc == 1:
            lid = len(w.leases) + 100 * w.deaths + 1
            return [(("load", 2, loc[0], lid), replace(w, leases=(*w.leases, (lid, frozenset()))))]
        if pc == 2:
            lid = loc[1]
            leases = tuple((i, c | {x}) if i == lid else (i, c) for i, c in w.leases)
            return [(("load", 3, *loc), replace(w, objects=w.objects | {x}, leases=leases))]
        if 3 <= pc <= 6:
            return _land(("load", pc, *loc), w, 3, frozenset({x}), loc[0], flaws)
        if pc == 7:
            leases = tuple(lease for lease in w.leases if lease[0] != loc[1])
            return [(("done", "load"), replace(w, leases=leases))]
        raise AssertionError(proc)

    return step


def stage_then_commit(x: str) -> Callable[[Proc, World, Flaws], list[Step]]:
    """``add`` (ticket, lease, write, stage, release), then ``commit`` (land, unstage)."""

    def step(proc: Proc, w: World, flaws: Flaws) -> list[Step]:
        _, pc, *loc = proc
        if pc == 0:
            return [(("stage", 1, w.epoch), w)]
        if pc == 1:
            lid = len(w.leases) + 100 * w.deaths + 50
            return [(("stage", 2, loc[0], lid), replace(w, leases=(*w.leases, (lid, frozenset()))))]
        if pc == 2:
            lid = loc[1]
            leases = tuple((i, c | {x}) if i == lid else (i, c) for i, c in w.leases)
            return [(("stage", 3, *loc), replace(w, objects=w.objects | {x}, leases=leases))]
        if pc == 3:
            ticket = w.epoch if flaws.stage_without_ticket else loc[0]
            return [(("stage", 4, *loc), replace(w, staging=(*w.staging, (x, ticket))))]
        if pc == 4:
            leases = tuple(lease for lease in w.leases if lease[0] != loc[1])
            return [(("stage", 5), replace(w, leases=leases))]
        if pc == 5:  # commit: the ticket recorded with the staging entry
            (since,) = [t for k, t in w.staging if k == x]
            return [(("stage", 6, since), w)]
        if 6 <= pc <= 9:
            return _land(("stage", pc, *loc), w, 6, frozenset({x}), loc[0], flaws)
        if pc == 10:
            staging = tuple(e for e in w.staging if e[0] != x)
            return [(("done", "stage"), replace(w, staging=staging))]
        raise AssertionError(proc)

    return step


def readd(y: str) -> Callable[[Proc, World, Flaws], list[Step]]:
    """A revert or branch from history: re-reference y without a ticket."""

    def step(proc: Proc, w: World, flaws: Flaws) -> list[Step]:
        _, pc, *loc = proc
        if 0 <= pc <= 3:
            return _land(("readd", pc, *loc), w, 0, frozenset({y}), None, flaws)
        if pc == 4:
            return [(("done", "readd"), w)]
        raise AssertionError(proc)

    return step


def merge_from_side() -> Callable[[Proc, World, Flaws], list[Step]]:
    """Merge branch b into main with a ticket, while b may be deleted meanwhile."""

    def step(proc: Proc, w: World, flaws: Flaws) -> list[Step]:
        _, pc, *loc = proc
        if pc == 0:
            return [(("merge", 1, w.epoch), w)]
        if pc == 1:  # resolve b: its head's keys (trusted: a branch head)
            if w.side is None:
                return [(("done", "merge"), w)]
            return [(("merge", 2, loc[0], w.side), w)]
        if 2 <= pc <= 5:
            keys = loc[1]
            return _land(("merge", pc, *loc), w, 2, keys, loc[0], flaws)
        if pc == 6:
            return [(("done", "merge"), w)]
        raise AssertionError(proc)

    return step


def delete_side() -> Callable[[Proc, World, Flaws], list[Step]]:
    def step(proc: Proc, w: World, flaws: Flaws) -> list[Step]:
        return [(("done", "delete"), replace(w, side=None))]

    return step


# -- vacuum ---------------------------------------------------------------------------------


def vacuum(runs: int) -> Callable[[Proc, World, Flaws], list[Step]]:
    """``runs`` vacuum runs in a row, grace 0 (every unreferenced object is a candidate)."""

    def refs(w: World) -> frozenset[str]:
        return w.main | (w.side or frozenset())

    def covered(w: World) -> frozenset[str]:
        return frozenset().union(*(c for _, c in w.leases)) if w.leases else frozenset()

    def staged(w: World) -> frozenset[str]:
        return frozenset(k for k, _ in w.staging)

    def step(proc: Proc, w: World, flaws: Flaws) -> list[Step]:
        _, pc, left, *loc = proc
        if pc == 0:
            # candidates: the real vacuum lists unreferenced objects with reads that do
            # not form one snapshot, so any set may come out; the reads after the mark
            # decide. The worst case is every object.
            cands = w.objects
            if not cands:
                return [(("vacuum", 0, left - 1) if left > 1 else ("done", "vacuum"), w)]
            return [(("vacuum", 1, left, cands), w)]
        if pc == 1:  # mark: register the run
            if flaws.no_mark:
                return [(("vacuum", 2, left, *loc), w)]
            runs = (*w.runs, (left, loc[0]))
            return [(("vacuum", 2, left, *loc), replace(w, epoch=w.epoch + 1, runs=runs))]
        first, second = covered, staged  # the order an object moves: lease, staging entry
        if flaws.staging_before_leases:
            first, second = staged, covered
        if pc == 2:
            seen = frozenset() if flaws.ignore_leases and first is covered else first(w)
            return [(("vacuum", 3, left, loc[0], seen), w)]
        if pc == 3:
            seen = frozenset() if flaws.ignore_leases and second is covered else second(w)
            return [(("vacuum", 4, left, loc[0], loc[1] | seen), w)]
        if pc == 4:  # the branches (a commit cannot land past a registered run: see _land)
            doomed = tuple(sorted(loc[0] - loc[1] - refs(w)))
            return [(("vacuum", 5, left, doomed), w)]
        if pc == 5:  # one candidate: tombstone, then delete
            doomed = loc[0]
            if not doomed:
                return [(("vacuum", 7, left), w)]
            x = doomed[0]
            return [(("vacuum", 6, left, doomed), replace(w, tombs=w.tombs | {x}))]
        if pc == 6:
            x, rest = loc[0][0], loc[0][1:]
            return [(("vacuum", 5, left, rest), replace(w, objects=w.objects - {x}))]
        if pc == 7:  # finish: unregister
            runs = tuple(r for r in w.runs if r[0] != left)
            nxt: Proc = ("vacuum", 0, left - 1) if left > 1 else ("done", "vacuum")
            epoch = w.epoch if flaws.no_mark else w.epoch + 1
            return [(nxt, replace(w, epoch=epoch, runs=runs))]
        raise AssertionError(proc)

    return step


def lease_death(proc: Proc, w: World, flaws: Flaws) -> list[Step]:
    """The adversary: at any moment, one held lease dies (its writer stalled past the TTL),
    or none ever does."""
    kills = [
        (("done", "death"), replace(w, leases=w.leases[:i] + w.leases[i + 1 :], deaths=1))
        for i in range(len(w.leases))
    ]
    return [*kills, (("done", "death"), w)]


# -- the checker ----------------------------------------------------------------------------


@dataclass
class Outcome:
    states: int
    violations: list[str]
    finals: set[tuple[str, ...]]


def explore(
    world: World,
    procs: dict[str, Callable[[Proc, World, Flaws], list[Step]]],
    flaws: Flaws = Flaws(),
    deaths: bool = False,
    limit: int = 2_000_000,
) -> Outcome:
    names = list(procs)
    steps = dict(procs)
    start: tuple[tuple[Proc, ...], World] = (
        tuple(("vacuum", 0, 2) if n == "vacuum" else (n, 0) for n in names),
        world,
    )
    if deaths:
        names.append("death")
        steps["death"] = lease_death
        start = ((*start[0], ("death", 0)), world)
    seen = {start}
    todo = [start]
    violations: list[str] = []
    finals: set[tuple[str, ...]] = set()
    while todo and not violations:
        state = todo.pop()
        procs_now, w = state
        violations += list(_check(w, procs_now, deaths))
        moved = False
        for i, proc in enumerate(procs_now):
            if proc[0] in ("done", "refused"):
                continue
            for new_proc, new_w in steps[names[i]](proc, w, flaws):
                moved = True
                nxt = (procs_now[:i] + (new_proc,) + procs_now[i + 1 :], new_w)
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        if not moved:
            finals.add(tuple(p[0] if p[0] == "refused" else p[1] for p in procs_now))
            if not all(p[0] in ("done", "refused") for p in procs_now):
                violations.append(f"deadlock: {procs_now}")
            if not deaths:
                refused = [p[1] for p in procs_now if p[0] == "refused"]
                if any(kind in ("load", "stage") for kind in refused):
                    violations.append(f"a live writer was refused: {procs_now} {w}")
        assert len(seen) < limit, "state space larger than expected"
    return Outcome(len(seen), violations, finals)


def _check(w: World, procs: tuple[Proc, ...], deaths: bool) -> Iterator[str]:
    held = w.main | (w.side or frozenset())
    if held - w.objects:
        yield f"a branch holds removed objects {sorted(held - w.objects)}: {w} {procs}"
    staged = {k for k, _ in w.staging}
    if not deaths and staged - w.objects:
        yield f"a staging area holds removed objects {sorted(staged - w.objects)}: {w}"


# -- the scenarios ------------------------------------------------------------------------

BASE = World(objects=frozenset({"old", "y"}), side=frozenset({"y"}))

SCENARIOS: dict[str, dict[str, Callable[[Proc, World, Flaws], list[Step]]]] = {
    "load": {"vacuum": vacuum(2), "load": load("x")},
    "stage": {"vacuum": vacuum(2), "stage": stage_then_commit("x")},
    "readd": {"vacuum": vacuum(2), "readd": readd("old")},
    "merge": {"vacuum": vacuum(2), "merge": merge_from_side(), "delete": delete_side()},
    "load+stage": {"vacuum": vacuum(2), "load": load("x"), "stage": stage_then_commit("z")},
}


CASES = [
    pytest.param(
        name,
        deaths,
        id=f"{name}-{'a-lease-dies' if deaths else 'leases-live'}",
        marks=[pytest.mark.slow] if name == "load+stage" and deaths else [],
    )
    for name in sorted(SCENARIOS)
    for deaths in (False, True)
]


@pytest.mark.parametrize(("name", "deaths"), CASES)
def test_no_interleaving_loses_an_object(name: str, deaths: bool) -> None:
    out = explore(BASE, SCENARIOS[name], deaths=deaths)
    assert out.violations == []
    assert out.states > 50  # the exploration really branched
    assert out.finals  # and reached the end


def test_refusals_happen_only_where_data_is_gone() -> None:
    # a re-add of an object nothing holds may be refused (vacuum took it) or land
    out = explore(BASE, SCENARIOS["readd"])
    kinds = {f for final in out.finals for f in final}
    assert "refused" in kinds and "readd" in kinds


BROKEN = [
    ("stage", Flaws(staging_before_leases=True), False),
    ("load", Flaws(skip_epoch_check=True), True),
    ("readd", Flaws(skip_busy_wait=True), False),
    ("load", Flaws(ignore_leases=True), False),
    ("load", Flaws(no_mark=True), True),
    ("stage", Flaws(stage_without_ticket=True), True),
]


@pytest.mark.parametrize(("name", "flaws", "deaths"), BROKEN)
def test_each_part_of_the_protocol_is_needed(name: str, flaws: Flaws, deaths: bool) -> None:
    out = explore(BASE, SCENARIOS[name], flaws=flaws, deaths=deaths)
    assert out.violations, f"{flaws} was not caught"
