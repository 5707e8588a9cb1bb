"""Live events of a lake, read from the lake's own journals.

Every change worth telling is already an entry of some journal: pools are created,
renamed and dropped in the ``pools/`` journal, branches and tags move (and branches
are protected, :mod:`limno.core.protection`) in each pool's ``<pool-id>/branches/``
journal (a commit is a branch move to a new commit whose first parent is the old
head), maintenance jobs change state in ``<pool-id>/jobs/``, and merge requests
are opened, merged and closed in ``<pool-id>/reviews/``. So the feed reads those
journals and nothing else: a commit made by another process, another host or a Spark
job shows up like one made here, and nobody has to remember to publish anything.

An event's id is a cursor: the position reached in every journal once that event
was told (the pools journal's, then each pool's three, in pool-id order, for the
pools registered at that position), packed as varints in URL-safe base64. Resuming
after an id reads each journal from its own position on, so the events after an id
are exactly those not yet told, whatever order journals were interleaved in
before, and a pool registered later starts from its first entry. One journal entry
may tell several events (a commit and its branch move): a position also counts the
events of the next entry already told.

The feed only reads: it finds heads by probing entries (a dropped pool's journals
must not get a ``HEAD`` hint written back while vacuum deletes them), and a poll
costs one read per journal when nothing changed.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from limno.core.commits import CommitStore
from limno.errors import CorruptError, InvalidInputError, NotFoundError
from limno.journal import Journal, JournalStore
from limno.pools.journal_events import (
    job_events,
    pool_events,
    ref_events,
    review_events,
)
from limno.storage import Storage

__all__ = ["NOW", "Event", "EventFeed"]

#: ``after=NOW``: only events that happen from now on (the default of ``limno watch``)
NOW = "now"
#: 2: a third position per pool (merge requests; a version 1 id reads them from the start)
_VERSION = 2
#: the journal of the lake's pools (limno.lake's POOLS_PREFIX: the layer above)
POOLS_PREFIX = "pools"


@dataclass(frozen=True)
class Event:
    """One change of the lake.

    ``type`` is ``pool.created|renamed|updated|dropped``,
    ``branch.created|moved|deleted|protected|unprotected``, ``tag.created|deleted``,
    ``commit``, ``job.<state>`` or ``merge_request.opened|merged|closed``; ``time`` is
    when the journal entry was written; ``data`` holds the type's fields (see README).
    """

    id: str
    type: str
    pool: str | None
    pool_id: str | None
    time: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "time": self.time,
            "pool": self.pool,
            "pool_id": self.pool_id,
            "data": dict(self.data),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Event:
        return cls(
            id=str(d["id"]),
            type=str(d["type"]),
            pool=d.get("pool"),
            pool_id=d.get("pool_id"),
            time=str(d.get("time", "")),
            data=dict(d.get("data") or {}),
        )

    def summary(self) -> str:
        """One line for people (``limno watch`` on a terminal)."""
        d = self.data
        kind = self.type
        if kind == "pool.created":
            return f"created ({d.get('kind')}, key {d.get('key')})"
        if kind == "pool.renamed":
            return f"renamed from {d.get('old_name')}"
        if kind in ("pool.dropped", "pool.updated"):
            return kind.split(".")[1]
        if kind in ("branch.created", "tag.created"):
            return f"{d.get('branch') or d.get('tag')} at {d.get('commit')}"
        if kind in ("branch.deleted", "tag.deleted"):
            return f"{d.get('branch') or d.get('tag')} (was {d.get('commit')})"
        if kind == "branch.moved":
            return f"{d.get('branch')} {d.get('old')} -> {d.get('new')}"
        if kind == "branch.protected":
            return f"{d.get('branch')}: only merges may move it"
        if kind == "branch.unprotected":
            return f"{d.get('branch')}: protection lifted"
        if kind == "commit":
            counts = d.get("actions") or {}
            change = " ".join(f"{op} {n}" for op, n in sorted(counts.items()))
            return (
                f"{d.get('branch')} {d.get('commit')} by {d.get('author')}: {d.get('message')}"
                + (f" ({change})" if change else "")
            )
        if kind.startswith("merge_request."):
            return f"!{d.get('id')} {d.get('source')} -> {d.get('into')}: {d.get('title')}"
        if kind.startswith("job."):
            rows = f", rows {d.get('rows_in')} -> {d.get('rows_out')}" if d.get("rows_in") else ""
            return f"{d.get('kind')} job {d.get('job')}{rows}"
        return json.dumps(dict(d), sort_keys=True)


# -- positions and ids ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Pos:
    """Entries ``<= n`` told, and the first ``k`` events of entry ``n + 1``."""

    n: int = 0
    k: int = 0


def _put_varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _put_pos(out: bytearray, pos: _Pos) -> None:
    _put_varint(out, pos.n << 1 | (pos.k > 0))
    if pos.k:
        _put_varint(out, pos.k)


class _Reader:
    """Reads the varints of an id."""

    def __init__(self, text: str) -> None:
        try:
            self.data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            raise _bad_id(text) from None
        self.text = text
        self.i = 0

    def varint(self) -> int:
        value, shift = 0, 0
        while True:
            if self.i >= len(self.data) or shift > 63:
                raise _bad_id(self.text)
            byte = self.data[self.i]
            self.i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    def pos(self) -> _Pos:
        packed = self.varint()
        return _Pos(packed >> 1, self.varint() if packed & 1 else 0)

    def done(self) -> bool:
        return self.i == len(self.data)


def _bad_id(text: str) -> InvalidInputError:
    return InvalidInputError(f"invalid event id {text[:60]!r} (not an id this lake gave out)")


# -- reading journals ----------------------------------------------------------------------


def _probe_head(journal: Journal) -> int:
    """The last entry number, found without writing (unlike :meth:`Journal.head`, which
    corrects the ``HEAD`` hint): the hint if its entry exists, then gallop and bisect."""
    storage = journal.storage
    try:
        text = storage.get(f"{journal.prefix}/HEAD").decode("ascii", "replace").strip()
        hint = int(text) if text.isdigit() and len(text) < 20 else 0
    except NotFoundError:
        hint = 0
    floor = hint if hint > 0 and storage.exists(journal.entry_path(hint)) else 0
    step, hi = 1, floor + 1
    while storage.exists(journal.entry_path(hi)):
        floor, step = hi, step * 2
        hi = floor + step
    while hi - floor > 1:
        mid = (floor + hi) // 2
        if storage.exists(journal.entry_path(mid)):
            floor = mid
        else:
            hi = mid
    return floor


class _Cursor:
    """One journal read from a position on, with the map it folds to at that position."""

    def __init__(self, storage: Storage, prefix: str, pos: _Pos) -> None:
        self.storage = storage
        self.prefix = prefix
        self.journal = Journal(storage, prefix)
        self.pos = pos
        self._items: dict[str, dict[str, Any]] | None = None

    @property
    def items(self) -> dict[str, dict[str, Any]]:
        """The map at ``pos.n`` (read from the journal's snapshots the first time)."""
        if self._items is None:
            if self.pos.n == 0:
                self._items = {}
            else:
                state = JournalStore(self.storage, self.prefix).state(at=self.pos.n)
                self._items = dict(state.items)
        return self._items

    def next_entry(self) -> tuple[int, dict[str, Any]] | None:
        """Entry ``pos.n + 1``, decoded, or None when there is none (yet)."""
        n = self.pos.n + 1
        try:
            body = self.journal.read(n)
        except NotFoundError:
            return None
        path = self.journal.entry_path(n)
        try:
            entry = json.loads(body)
        except (ValueError, RecursionError) as e:
            raise CorruptError(f"{path}: entry is not valid JSON ({str(e)[:200]})") from e
        if not isinstance(entry, dict) or not isinstance(entry.get("updates"), list):
            raise CorruptError(f"{path}: entry has no update list")
        for u in entry["updates"]:
            if not isinstance(u, dict) or not isinstance(u.get("key"), str):
                raise CorruptError(f"{path}: malformed update {u!r:.80}")
        return n, entry

    def apply(self, n: int, entry: Mapping[str, Any]) -> None:
        items = self.items
        for u in entry["updates"]:
            if u.get("op") == "put" and isinstance(u.get("value"), dict):
                items[u["key"]] = u["value"]
            else:
                items.pop(u["key"], None)
        self.pos = _Pos(n, 0)


@dataclass
class _PoolFeed:
    name: str
    branches: _Cursor
    jobs: _Cursor
    reviews: _Cursor

    @property
    def cursors(self) -> tuple[_Cursor, _Cursor, _Cursor]:
        return (self.branches, self.jobs, self.reviews)


#: what one entry tells: (type, pool id, pool name, data)
class EventFeed:
    """The events of one lake, from a position on (see the module docstring)."""

    def __init__(self, storage: Storage, after: str | None = None) -> None:
        self.storage = storage
        self._pools: dict[str, _PoolFeed] = {}
        self._from_now = after == NOW
        if after == NOW:
            self._start_now()
        elif after is None:
            self._registry = _Cursor(storage, POOLS_PREFIX, _Pos())
        else:
            self._start_after(after)

    # -- starting points ---------------------------------------------------------------
    def _start_now(self) -> None:
        head = _probe_head(Journal(self.storage, POOLS_PREFIX))
        self._registry = _Cursor(self.storage, POOLS_PREFIX, _Pos(head))
        for pool_id, config in sorted(self._registry.items.items()):
            feed = self._add_pool(pool_id, str(config.get("name")))
            for cursor in feed.cursors:
                cursor.pos = _Pos(_probe_head(cursor.journal))

    def _start_after(self, after: str) -> None:
        reader = _Reader(after)
        version = reader.varint()
        if version not in (1, _VERSION):
            raise _bad_id(after)
        self._registry = _Cursor(self.storage, POOLS_PREFIX, reader.pos())
        try:
            registered = self._registry.items
        except NotFoundError:
            raise _bad_id(after) from None
        for pool_id, config in sorted(registered.items()):
            feed = self._add_pool(pool_id, str(config.get("name")))
            feed.branches.pos, feed.jobs.pos = reader.pos(), reader.pos()
            if version > 1:
                feed.reviews.pos = reader.pos()
        if not reader.done():
            raise _bad_id(after)

    def _add_pool(self, pool_id: str, name: str) -> _PoolFeed:
        feed = _PoolFeed(
            name,
            _Cursor(self.storage, f"{pool_id}/branches", _Pos()),
            _Cursor(self.storage, f"{pool_id}/jobs", _Pos()),
            _Cursor(self.storage, f"{pool_id}/reviews", _Pos()),
        )
        self._pools[pool_id] = feed
        return feed

    def position(self) -> str:
        """The id of the position reached: resuming after it tells what comes next."""
        out = bytearray()
        _put_varint(out, _VERSION)
        _put_pos(out, self._registry.pos)
        for pool_id in sorted(self._pools):
            for cursor in self._pools[pool_id].cursors:
                _put_pos(out, cursor.pos)
        return base64.urlsafe_b64encode(bytes(out)).rstrip(b"=").decode("ascii")

    # -- reading -----------------------------------------------------------------------
    def events(
        self,
        pool: str | None = None,
        follow: bool = True,
        stop: threading.Event | None = None,
        poll_interval: float = 1.0,
    ) -> Iterator[Event]:
        """The events after the starting position; with ``follow``, new ones as they come
        (polling every ``poll_interval`` seconds) until ``stop`` is set, else until the
        journals' current ends. ``pool`` (a name or id) keeps that pool's events only:
        the pool of that id, and any pool that takes that name later."""
        stop = stop or threading.Event()
        wanted = self._wanted(pool) if pool is not None else None
        while not stop.is_set():
            told = False
            for event in self._round(pool, wanted):
                told = True
                yield event
                if stop.is_set():
                    return
            if not follow:
                return
            if not told and stop.wait(poll_interval):
                return

    def _wanted(self, pool: str) -> set[str]:
        """The ids of the pool a filter names now (more join as pools take the name).

        Watching only what comes next, the pool must exist: a misspelt name would wait
        forever. Read from earlier on, a name the pool had then is found as it is read.
        """
        current = JournalStore(self.storage, POOLS_PREFIX).state().items
        ids = {k for k, v in current.items() if k == pool or v.get("name") == pool}
        if not ids and self._from_now:
            raise NotFoundError(f"pool {pool!r} not found")
        return ids

    def _round(self, pool: str | None, wanted: set[str] | None) -> Iterator[Event]:
        """Every event of the journals' current ends: the pools journal first, then each
        pool's branches, jobs and merge requests (a pool registered meanwhile from its
        first entry)."""
        registry = self._registry
        while (got := registry.next_entry()) is not None:
            n, entry = got
            told = pool_events(entry, registry.items)
            if len(told) <= registry.pos.k:
                self._register(n, entry)
                continue
            for i in range(registry.pos.k, len(told)):
                kind, pool_id, name, data = told[i]
                if i + 1 == len(told):
                    self._register(n, entry)
                else:
                    registry.pos = _Pos(n - 1, i + 1)
                if wanted is not None and pool_id is not None and name == pool:
                    wanted.add(pool_id)  # a pool that takes the watched name
                if wanted is None or pool_id in wanted:
                    yield self._event(kind, pool_id, name, entry, data)
        for pool_id in sorted(self._pools):
            if wanted is None or pool_id in wanted:
                try:
                    yield from self._pool_round(pool_id)
                except NotFoundError:
                    # its journals are being deleted: the pools journal tells the drop next
                    if pool_id in JournalStore(self.storage, POOLS_PREFIX).state().items:
                        raise

    def _pool_round(self, pool_id: str) -> Iterator[Event]:
        feed = self._pools[pool_id]
        commits = CommitStore(self.storage, pool_id)
        for cursor in feed.cursors:
            while (got := cursor.next_entry()) is not None:
                n, entry = got
                if cursor is feed.branches:
                    told = ref_events(entry, cursor.items, commits)
                elif cursor is feed.jobs:
                    told = job_events(entry)
                else:
                    told = review_events(entry, cursor.items)
                if len(told) <= cursor.pos.k:
                    cursor.apply(n, entry)
                    continue
                for i in range(cursor.pos.k, len(told)):
                    if i + 1 == len(told):
                        cursor.apply(n, entry)
                    else:
                        cursor.pos = _Pos(n - 1, i + 1)
                    kind, _, _, data = told[i]
                    yield self._event(kind, pool_id, feed.name, entry, data)

    def _register(self, n: int, entry: Mapping[str, Any]) -> None:
        """Apply a pools-journal entry: pools come and go, names change."""
        self._registry.apply(n, entry)
        registered = self._registry.items
        for pool_id in list(self._pools):
            if pool_id not in registered:
                del self._pools[pool_id]
        for pool_id, config in registered.items():
            name = str(config.get("name"))
            if pool_id in self._pools:
                self._pools[pool_id].name = name
            else:
                self._add_pool(pool_id, name)

    def _event(
        self,
        kind: str,
        pool_id: str | None,
        name: str | None,
        entry: Mapping[str, Any],
        data: dict[str, Any],
    ) -> Event:
        return Event(self.position(), kind, name, pool_id, str(entry.get("ts", "")), data)
