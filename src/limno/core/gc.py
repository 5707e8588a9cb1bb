"""The protocol between vacuum and writers: vacuum never removes an object that a
branch, a tag, a staging area or a write in flight is about to reference.

Vacuum removes objects that nothing references; writers make objects referenced by
moving a branch (a commit, merge or reset) or creating a branch or tag. Both sides
meet in the pool's branch store (a journal store: every ref move is one
compare-and-swap append), which also holds the ``gc`` entry::

    {"epoch": n, "runs": {run-id: {"lease": id, "started": iso}}, "trimmed": bool}

A vacuum **run** (:mod:`limno.pools.vacuum`):

1. lists candidates: objects no retained commit, staging entry or live lease holds,
   past the grace period;
2. stores the candidate list at ``<pool-id>/gc/<run>.json`` and *marks* the run:
   ``epoch + 1`` and the run added to ``runs``;
3. reads, after the mark and in this order, the leases, the staging areas and the
   refs (an object moves from lease to staging entry to branch, so reading in
   reverse order of those moves cannot miss one);
4. writes a tombstone ``<pool-id>/expired/<key>`` for each candidate still
   unreferenced, then deletes it — checking before each delete that its run is
   still registered;
5. *finishes*: ``epoch + 1`` and the run removed, then its candidate list deleted
   (a writer that read the state just before finds the list gone while its view
   still shows the run: it reads the state again; a list missing while its run is
   registered is corruption).

A **writer** reads the epoch (a *ticket*) before it writes objects or reads the
snapshot whose objects it will reference again, holds a lease while it writes
(:mod:`limno.core.leases`), and lands its ref move with a compare-and-swap that
also requires the ``gc`` entry it checked against:

- if a registered run's candidate list holds one of the keys the move newly
  references, the writer waits for that run to finish (bounded), then re-checks;
- if the epoch moved since its ticket (a run marked or finished meanwhile), or it
  has no ticket, each newly referenced key must have no tombstone; otherwise the
  move is refused with a ConflictError and nothing becomes visible.

Why no interleaving loses an object: say run r deletes key x that a move m makes
referenced. If m lands before r's mark, r's reads in step 3 (all after the mark)
see x referenced. If m lands after r's mark and before r finishes, m's check saw r
registered with x in its list and waited. If m lands after r finished, m's
check saw the epoch moved (or had no ticket), and x's tombstone was written before
r finished; unless x was written or read by m after r finished, in which case r
could not have had it as a candidate. ``tests/core/test_gc_model.py`` checks this
exhaustively on a model of both sides; ``tests/core/test_gc_interleavings.py`` runs the
real code paused before each storage call of one side while the other runs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from limno.core.leases import Leases
from limno.errors import (
    ConflictError,
    CorruptError,
    LimnoError,
    NotFoundError,
    PreconditionFailedError,
)
from limno.journal import AssertEquals, JournalStore, Put, Requirement, StoreState
from limno.journal._journal import backoff
from limno.ksuid import ksuid
from limno.storage import Storage

__all__ = ["GC_KEY", "Gc", "GcState", "expired_path"]

#: the branch-store key of the gc entry (branch and tag keys have a ``kind:`` prefix)
GC_KEY = "gc"
#: how long a writer waits for a vacuum run deciding about its objects (seconds)
DEFAULT_WAIT = 300.0
#: above this many keys a tombstone check lists the tombstones instead of probing each
PROBE_LIMIT = 32


def expired_path(pool_id: str, key: str) -> str:
    """Where vacuum records that it removed the object ``key`` on purpose."""
    return f"{pool_id}/expired/{key}"


@dataclass(frozen=True)
class GcState:
    """The ``gc`` entry of a branch store (``raw`` is the stored value, for a CAS)."""

    raw: Mapping[str, Any] | None = None
    epoch: int = 0
    runs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    trimmed: bool = False

    @classmethod
    def of(cls, items: Mapping[str, Any]) -> GcState:
        raw = items.get(GC_KEY)
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise CorruptError(f"branch store entry {GC_KEY!r} is not an object")
        runs = raw.get("runs", {})
        return cls(
            raw=raw,
            epoch=int(raw.get("epoch", 0)),
            runs=runs if isinstance(runs, dict) else {},
            trimmed=bool(raw.get("trimmed", False)),
        )

    def value(
        self, epoch: int, runs: Mapping[str, Mapping[str, Any]], trimmed: bool
    ) -> dict[str, Any]:
        return {
            "epoch": epoch,
            "runs": {k: dict(v) for k, v in runs.items()},
            "trimmed": trimmed,
        }


class _Busy(Exception):
    """A registered vacuum run is deciding about keys a ref move wants (internal)."""

    def __init__(self, run: str, keys: Sequence[str]) -> None:
        super().__init__(run)
        self.run = run
        self.keys = keys


class _Finished(Exception):
    """A run the caller saw registered has finished since (internal): read the state
    again. A run is unregistered before its candidate list is deleted, so a writer
    whose view of the branch store is a moment old may find the list gone."""

    def __init__(self, run: str) -> None:
        super().__init__(run)
        self.run = run


class Gc:
    """Both sides of the protocol for one pool (see the module docstring)."""

    def __init__(self, storage: Storage, pool_id: str, journal: JournalStore) -> None:
        self.storage = storage
        self.pool_id = pool_id
        self.journal = journal
        self.leases = Leases(storage, pool_id)
        #: called with (run, keys) each time a writer waits for a vacuum run
        self.on_wait: Callable[[str, Sequence[str]], None] | None = None
        self.wait_seconds = float(os.environ.get("LIMNO_GC_WAIT", DEFAULT_WAIT))
        self._condemned: dict[str, frozenset[str]] = {}

    # -- reading --------------------------------------------------------------------
    def state(self) -> GcState:
        return GcState.of(self.journal.state().items)

    def ticket(self) -> int:
        """The epoch now: read it before writing objects or reading what to re-reference."""
        return self.state().epoch

    def run_path(self, run: str) -> str:
        return f"{self.pool_id}/gc/{run}.json"

    def condemned(self, run: str) -> frozenset[str]:
        """The candidate keys of a registered run (its list never changes).

        Raises :class:`_Finished` if the list is gone because the run finished after
        the caller read the state: only a list missing while its run is still
        registered is corruption.
        """
        cached = self._condemned.get(run)
        if cached is None:
            path = self.run_path(run)
            try:
                keys = json.loads(self.storage.get(path))
            except NotFoundError:
                info = self.state().runs.get(run)
                if info is None:
                    raise _Finished(run) from None
                return self._listless(run, info)
            except ValueError as e:
                raise CorruptError(f"{path}: candidate list is not JSON") from e
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise CorruptError(f"{path}: candidate list is not a list of keys")
            cached = self._condemned[run] = frozenset(keys)
        return cached

    def _listless(self, run: str, info: Mapping[str, Any]) -> frozenset[str]:
        """The candidates of a registered run whose list is gone: its vacuum's
        ``begin`` failed and dropped the list, and only then did its mark land (a
        request whose reply was lost). Such a run deletes nothing: its vacuum gave up
        at ``begin``. While that vacuum's lease is live, a writer waits for it (bounded,
        as for any run); once the lease is dead the run condemns nothing, and the next
        vacuum unregisters it."""
        lease = info.get("lease")
        if any(seen.id == lease and seen.live for seen in self.leases.scan()):
            raise _Busy(run, [f"(the candidates of run {run}, whose list is missing)"])
        return frozenset()

    def tombstoned(self, keys: Collection[str]) -> set[str]:
        """Those of ``keys`` that vacuum has removed (or is removing)."""
        if not keys:
            return set()
        if len(keys) <= PROBE_LIMIT:
            return {k for k in keys if self.storage.exists(expired_path(self.pool_id, k))}
        prefix = f"{self.pool_id}/expired"
        names = {info.path.rsplit("/", 1)[-1] for info in self.storage.walk(prefix)}
        return {k for k in keys if k in names}

    # -- writers ------------------------------------------------------------------
    def check(
        self, gc: GcState, new_keys: Callable[[], Collection[str]], since: int | None
    ) -> None:
        """Raise if landing a move that newly references ``new_keys()`` is unsafe now.

        :class:`_Busy` means "wait for that run"; :class:`_Finished` means "``gc`` is
        out of date, read it again"; ConflictError means "never".
        """
        keys: Collection[str] | None = None
        for run in sorted(gc.runs):
            keys = new_keys() if keys is None else keys
            hit = sorted(self.condemned(run).intersection(keys))
            if hit:
                raise _Busy(run, hit)
        if since is not None and gc.epoch == since:
            return
        keys = new_keys() if keys is None else keys
        gone = sorted(self.tombstoned(keys))
        if gone:
            shown = ", ".join(gone[:5]) + (f" and {len(gone) - 5} more" if len(gone) > 5 else "")
            raise ConflictError(
                f"{len(gone)} object(s) this change references were removed by vacuum"
                f" ({shown}); nothing was changed. Write the data again (or pick a"
                " commit whose objects still exist)"
            )

    def land(
        self,
        updates: Sequence[Put],
        requirements: Sequence[Requirement],
        new_keys: Callable[[], Collection[str]],
        since: int | None,
    ) -> StoreState:
        """Append a ref move to the branch store once :meth:`check` allows it.

        The append requires the ``gc`` entry the check saw, so a vacuum run marked
        in between makes it fail and the check runs again. Raises the requirements'
        own errors (PreconditionFailedError when a branch moved...).
        """
        deadline = time.monotonic() + self.wait_seconds
        keys = _once(new_keys)
        attempt = 0
        while True:
            state = self.journal.state()
            for req in requirements:
                req.check(state.items)
            gc = GcState.of(state.items)
            if not self._cleared(gc, keys, since, deadline, attempt, "; nothing was changed."):
                attempt += 1
                continue
            try:
                return self.journal.commit(
                    updates, [*requirements, AssertEquals(GC_KEY, _plain(gc.raw))], state=state
                )
            except PreconditionFailedError:  # other errors (a failed append) go up as they are
                fresh = self.journal.state()
                for req in requirements:
                    req.check(fresh.items)  # a requirement failed: its own error
                if GcState.of(fresh.items).raw == gc.raw:
                    raise
                backoff(attempt)  # only the gc entry moved: check again
                attempt += 1

    def confirm(self, new_keys: Callable[[], Collection[str]], since: int | None) -> None:
        """Check a reference just written to a staging area, as :meth:`land` checks a ref
        move, without appending anything: wait while a registered run decides about
        ``new_keys()``, and raise ConflictError if vacuum removed one of them.

        For objects staged without a lease covering them (a file pool's copy stages an
        entry naming a blob some history holds): a run that marks after the staging
        entry was written sees it when it reads the staging areas again; one that marked
        before is registered now (its candidates are checked) or has finished (the epoch
        moved since ``since``: its tombstones are checked).
        """
        deadline = time.monotonic() + self.wait_seconds
        keys = _once(new_keys)
        attempt = 0
        while not self._cleared(self.state(), keys, since, deadline, attempt, "."):
            attempt += 1

    def _cleared(
        self,
        gc: GcState,
        keys: Callable[[], Collection[str]],
        since: int | None,
        deadline: float,
        attempt: int,
        outcome: str,
    ) -> bool:
        """Whether :meth:`check` lets ``keys()`` be referenced in state ``gc``. False:
        read the state again (a run was deciding about them, waited for here, or has
        finished); ConflictError past ``deadline`` (its message ends the first sentence
        with ``outcome``) or when vacuum removed one of them."""
        try:
            self.check(gc, keys, since)
        except _Busy as busy:
            if time.monotonic() > deadline:
                raise ConflictError(
                    f"vacuum run {busy.run} of this pool has been deciding about"
                    f" {len(busy.keys)} object(s) this change references for over"
                    f" {self.wait_seconds:.0f}s{outcome} If that vacuum died, run"
                    " 'limno vacuum' again to clear it, then retry"
                ) from None
            if self.on_wait is not None:
                self.on_wait(busy.run, busy.keys)
            time.sleep(min(0.25, 0.01 * 2 ** min(attempt, 5)))
            return False
        except _Finished:
            return False  # at most once per run: the state read next no longer has it
        return True

    # -- vacuum -------------------------------------------------------------------
    def begin(self, candidates: Iterable[str], lease: str, trimmed: bool) -> str:
        """Register a run with its candidate list (step 2); its id."""
        run = ksuid()
        body = json.dumps(sorted(set(candidates))).encode()
        self.storage.put(self.run_path(run), body)
        started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")

        def mark(state: StoreState) -> list[Put]:
            gc = GcState.of(state.items)
            runs = {**gc.runs, run: {"lease": lease, "started": started}}
            return [Put(GC_KEY, gc.value(gc.epoch + 1, runs, gc.trimmed or trimmed))]

        try:
            self.journal.commit(mark)
        except LimnoError:
            # the run failed to start: leave nothing behind (the append may have landed
            # with only its reply lost, so ask before dropping the list)
            with contextlib.suppress(LimnoError):
                if self.registered(run):
                    self.finish(run)
                else:
                    self.storage.delete(self.run_path(run))
            raise
        return run

    def registered(self, run: str) -> bool:
        return run in self.state().runs

    def finish(self, run: str) -> None:
        """Unregister a run (step 5), or a dead run another vacuum left behind."""

        def done(state: StoreState) -> list[Put]:
            gc = GcState.of(state.items)
            if run not in gc.runs:
                return []
            runs = {k: v for k, v in gc.runs.items() if k != run}
            return [Put(GC_KEY, gc.value(gc.epoch + 1, runs, gc.trimmed))]

        if self.registered(run):
            self.journal.commit(done)
        self.storage.delete(self.run_path(run))
        self._condemned.pop(run, None)


def _once(new_keys: Callable[[], Collection[str]]) -> Callable[[], Collection[str]]:
    """``new_keys`` computed at most once (it may read snapshots), as a set."""
    cache: list[Collection[str]] = []

    def keys() -> Collection[str]:
        if not cache:
            cache.append(set(new_keys()))
        return cache[0]

    return keys


def _plain(raw: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if raw is None else dict(raw)
