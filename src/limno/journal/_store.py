"""A key → JSON map kept as a journal of changes (Zed's ``journal.Store``).

Each journal entry is a JSON object ``{"ts": ..., "updates": [...]}``; the map at
entry ``n`` is the fold of entries ``tail..n``. Every ``snapshot_every`` entries the
writer of that entry stores the folded map as a snapshot, so opening the map reads
one snapshot and fewer than ``snapshot_every`` entries, whatever the journal's
length. Snapshots are a cache: if one is missing or corrupt the map is rebuilt
from an older snapshot (``verify`` reports the fault).

Changes are data (:class:`Put`, :class:`Remove`) guarded by requirements
(:class:`AssertEquals` and friends) that are checked against the state the entry
would follow. A writer that loses the race re-reads and re-checks, so a
requirement is a compare-and-swap.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from limno.errors import CorruptError, LimnoError, NotFoundError, PreconditionFailedError
from limno.journal._journal import Journal, backoff
from limno.storage import Storage

if TYPE_CHECKING:
    from limno.faults import Fault

__all__ = [
    "AssertAbsent",
    "AssertEquals",
    "AssertPresent",
    "JournalStore",
    "Put",
    "Remove",
    "Requirement",
    "StoreState",
    "Update",
]

Value = dict[str, Any]


@dataclass(frozen=True)
class Put:
    """Set ``key`` to ``value``."""

    key: str
    value: Value


@dataclass(frozen=True)
class Remove:
    """Delete ``key`` (a missing key is an error at commit time)."""

    key: str


Update = Put | Remove


class Requirement:
    """A condition on the current state; raises PreconditionFailedError when false."""

    def check(self, items: Mapping[str, Value]) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class AssertEquals(Requirement):
    """``key`` currently holds exactly ``value`` (``None``: is absent)."""

    key: str
    value: Value | None

    def check(self, items: Mapping[str, Value]) -> None:
        if items.get(self.key) != self.value:
            raise PreconditionFailedError(f"{self.key!r} changed concurrently")


@dataclass(frozen=True)
class AssertAbsent(Requirement):
    key: str

    def check(self, items: Mapping[str, Value]) -> None:
        if self.key in items:
            raise PreconditionFailedError(f"{self.key!r} already exists")


@dataclass(frozen=True)
class AssertPresent(Requirement):
    key: str

    def check(self, items: Mapping[str, Value]) -> None:
        if self.key not in items:
            raise NotFoundError(f"{self.key!r} does not exist")


@dataclass(frozen=True)
class StoreState:
    """The map as of journal entry ``n`` (immutable by convention: do not mutate)."""

    n: int
    items: Mapping[str, Value] = field(default_factory=dict)
    ts: str | None = None


def _encode(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _check_updates(path: str, updates: Sequence[Any]) -> None:
    """CorruptError unless each update is ``{"op": "put", "key": str, "value": {...}}``
    or ``{"op": "remove", "key": str}``."""
    for u in updates:
        if not isinstance(u, dict) or u.get("op") not in ("put", "remove"):
            raise CorruptError(f"{path}: malformed update {u!r:.80}")
        if not isinstance(u.get("key"), str):
            raise CorruptError(f"{path}: update without a key {u!r:.80}")
        if u["op"] == "put" and not isinstance(u.get("value"), dict):
            raise CorruptError(f"{path}: put of a non-object value {u!r:.80}")


def _apply(path: str, items: dict[str, Value], updates: Sequence[Any]) -> None:
    _check_updates(path, updates)
    for u in updates:
        if u["op"] == "put":
            items[u["key"]] = u["value"]
        else:
            items.pop(u["key"], None)


def _update_json(u: Update) -> dict[str, Any]:
    if isinstance(u, Put):
        return {"op": "put", "key": u.key, "value": u.value}
    return {"op": "remove", "key": u.key}


class JournalStore:
    """A map kept in a journal; reads are incremental, writes are CAS appends."""

    def __init__(self, storage: Storage, prefix: str, snapshot_every: int = 100) -> None:
        self.journal = Journal(storage, prefix)
        self.snapshot_every = snapshot_every
        self._state: StoreState | None = None

    def create(self) -> None:
        self.journal.create()
        self._state = StoreState(0, {})

    def exists(self) -> bool:
        return self.journal.exists()

    # -- reading -------------------------------------------------------------
    def _decode_entry(self, n: int, body: bytes) -> dict[str, Any]:
        path = self.journal.entry_path(n)
        try:
            entry = json.loads(body)
        except (ValueError, RecursionError) as e:
            raise CorruptError(f"{path}: entry is not valid JSON ({str(e)[:200]})") from e
        if not isinstance(entry, dict) or not isinstance(entry.get("updates"), list):
            raise CorruptError(f"{path}: entry has no update list")
        _check_updates(path, entry["updates"])
        try:
            dt.datetime.fromisoformat(entry["ts"])  # readers of the history compare it
        except (KeyError, TypeError, ValueError):
            raise CorruptError(f"{path}: entry has no valid time") from None
        return entry

    def _base(self, head: int) -> StoreState:
        """The best starting point for reaching ``head``: cache, snapshot, or empty."""
        if self._state is not None and self._state.n <= head:
            return self._state
        every = self.snapshot_every
        if head < every and self.journal.tail() == 1:
            # no snapshot is taken before entry ``every``: the fold starts at the first
            # entry, without listing ``snap/`` (every read of a young journal did)
            return StoreState(0, {})
        candidates = [head - head % every - i * every for i in range(3)]
        for n in candidates:
            if n < self.journal.tail():
                break
            snap = self._load_snapshot(n)
            if snap is not None:
                return snap
        for n in reversed(self.journal.snapshot_numbers()):
            if n <= head:
                snap = self._load_snapshot(n)
                if snap is not None:
                    return snap
        return StoreState(self.journal.tail() - 1, {})

    def _load_snapshot(self, n: int) -> StoreState | None:
        try:
            snap = json.loads(self.journal.read_snapshot(n))
        except (NotFoundError, CorruptError, ValueError, RecursionError):
            return None
        if not isinstance(snap, dict):
            return None
        items, ts = snap.get("items"), snap.get("ts")
        if not isinstance(items, dict) or not (ts is None or isinstance(ts, str)):
            return None
        if not all(isinstance(v, dict) for v in items.values()):
            return None  # keys are text: JSON objects have no other keys
        return StoreState(n, items, ts)

    def state(self, at: int | None = None) -> StoreState:
        """The map as of entry ``at`` (default: the head)."""
        head = self.journal.head() if at is None else at
        base = self._base(head)
        if base.n == head:
            return base
        items = dict(base.items)
        ts = base.ts
        for n, body in self.journal.entries(base.n + 1, head):
            entry = self._decode_entry(n, body)
            _apply(self.journal.entry_path(n), items, entry["updates"])
            ts = entry.get("ts", ts)
        state = StoreState(head, items, ts)
        if at is None or (self._state is not None and head >= self._state.n):
            self._state = state
        return state

    def get(self, key: str) -> Value | None:
        return self.state().items.get(key)

    def history(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every entry ``(n, {"ts":..., "updates": [...], "meta": ...})``, oldest first."""
        for n, body in self.journal.entries():
            yield n, self._decode_entry(n, body)

    # -- writing -------------------------------------------------------------
    def commit(
        self,
        updates: Sequence[Update] | Callable[[StoreState], Sequence[Update]],
        requirements: Sequence[Requirement] = (),
        meta: Mapping[str, Any] | None = None,
        max_attempts: int = 10_000,
        state: StoreState | None = None,
    ) -> StoreState:
        """Append one entry applying ``updates`` if every requirement holds.

        ``updates`` may be a function of the current state; it is re-evaluated on
        each retry, so it can compute a change from the state (and raise a
        LimnoError to refuse). Returns the state after the entry. ``state`` is one
        the caller has just read: the first attempt starts from it instead of
        reading it again (if it is stale, that attempt's append loses the race).
        """
        for attempt in range(max_attempts):
            if state is None or attempt:
                state = self.state()
            for req in requirements:
                req.check(state.items)
            todo = updates(state) if callable(updates) else updates
            for u in todo:
                if isinstance(u, Remove) and u.key not in state.items:
                    raise NotFoundError(f"{u.key!r} does not exist")
            ts = dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")
            entry: dict[str, Any] = {"ts": ts, "updates": [_update_json(u) for u in todo]}
            if meta:
                entry["meta"] = dict(meta)
            n = state.n + 1
            if self.journal.try_append(n, _encode(entry)):
                items = dict(state.items)
                _apply(self.journal.entry_path(n), items, entry["updates"])
                new = StoreState(n, items, ts)
                self._state = new
                if n % self.snapshot_every == 0:
                    self._write_snapshot(new)
                return new
            backoff(attempt)
        raise LimnoError(f"journal {self.journal.prefix}/: gave up after {max_attempts} races")

    def _write_snapshot(self, state: StoreState) -> None:
        body = _encode({"items": state.items, "ts": state.ts})
        self.journal.put_snapshot(state.n, body)

    # -- checking ------------------------------------------------------------
    def verify(self) -> Iterator[Fault]:
        """Journal faults, entries that do not decode, and snapshots that disagree."""
        from limno.faults import Fault  # verify only: reads never load it

        faults = list(self.journal.verify())
        yield from faults
        if faults:
            return
        snaps = set(self.journal.snapshot_numbers())
        items: dict[str, Value] = {}
        for n, body in self.journal.entries():
            path = self.journal.entry_path(n)
            try:
                entry = self._decode_entry(n, body)
                _apply(path, items, entry["updates"])
            except CorruptError as e:
                yield Fault(path, str(e).split(": ", 1)[-1])
                return
            if n in snaps:
                snaps.discard(n)
                spath = self.journal.snapshot_path(n)
                snap = self._load_snapshot(n)
                if snap is None:
                    yield Fault(spath, "snapshot unreadable (corrupt or truncated)")
                elif dict(snap.items) != items:
                    yield Fault(spath, "snapshot disagrees with the entries it summarizes")
        for n in sorted(snaps):
            yield Fault(self.journal.snapshot_path(n), "snapshot past the last entry")
