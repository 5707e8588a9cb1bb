"""Compare two refs as a merge request shows them: what the source brings, and what a
merge would meet, computed without writing anything.

The diff is the source's side since the merge base (git's ``dest...source``): the
entries (data objects of a record pool, paths of a file pool) a merge would bring, and
their counts. The conflicts are those of a dry run of the three-way merge
(:func:`limno.core.merge.preview`): the entries a ``fail`` merge would stop at, which
``source-wins`` or ``dest-wins`` resolve. For a record pool, a sample of rows: the first
rows of the first objects the source added or removed since the base.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from limno.core.merge import preview
from limno.core.versioning import DiffEntry
from limno.errors import InvalidInputError, LimnoError

if TYPE_CHECKING:
    from limno.pools.records.pool import RecordPool
    from limno.pools.reviews import Reviews

__all__ = ["MAX_SAMPLED_OBJECTS", "Comparison", "Sampled", "compare"]

#: objects whose rows a comparison samples at most
MAX_SAMPLED_OBJECTS = 10
#: rows per sampled object at most (what ``rows`` may ask for)
MAX_SAMPLE_ROWS = 1000
CHANGES = ("added", "removed", "changed")


@dataclass(frozen=True)
class Sampled:
    """The first ``rows`` of one data object a source ``change``\\ d (added or removed),
    as JSON values; ``total`` is how many rows the object has."""

    change: str
    object: str
    total: int
    rows: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "object": self.object,
            "total": self.total,
            "rows": list(self.rows),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Sampled:
        rows = tuple(dict(r) for r in d.get("rows") or ())
        return cls(str(d["change"]), str(d["object"]), int(d["total"]), rows)


@dataclass(frozen=True)
class Comparison:
    """``source`` against branch ``dest`` (their commits, and the merge ``base``).

    ``kind`` is what a merge would be: ``up-to-date`` (nothing to bring),
    ``fast-forward`` or ``merge``. ``counts`` counts the source's changes since the base
    (``added``, ``removed``, ``changed``), ``entries`` lists the first of them
    (``truncated`` when there are more), ``conflicts`` names the entries a ``fail`` merge
    would stop at, and ``sample`` holds rows of a record pool's added/removed objects.
    """

    pool: str
    kind: str
    source: str
    dest: str
    source_commit: str
    dest_commit: str
    base: str | None
    counts: Mapping[str, int]
    entries: tuple[DiffEntry, ...] = ()
    truncated: bool = False
    conflicts: tuple[str, ...] = ()
    sample: tuple[Sampled, ...] = field(default=())


def compare(pool: Reviews, source: str, dest: str, rows: int = 10, limit: int = 1000) -> Comparison:
    """Compare ref ``source`` with branch ``dest`` of ``pool`` (see the module doc)."""
    if rows < 0 or rows > MAX_SAMPLE_ROWS or limit < 0:
        raise InvalidInputError(f"rows is 0..{MAX_SAMPLE_ROWS}, limit at least 0")
    versioned = pool.versioned
    head = versioned.head(dest)
    src = versioned.resolve(source).commit
    dry = preview(versioned.commits, versioned.snapshots, src, head)
    since = _Since(limit)
    if dry.kind != "up-to-date":
        since.read(pool, dry.base, src)
    sample: tuple[Sampled, ...] = ()
    if pool.config.kind == "records" and rows:
        sample = _sample(pool, since.sampled, rows)
    return Comparison(
        pool=pool.config.name,
        kind=dry.kind,
        source=source,
        dest=dest,
        source_commit=src,
        dest_commit=head,
        base=dry.base,
        counts=since.counts,
        entries=tuple(since.entries),
        truncated=since.truncated,
        conflicts=dry.conflicts,
        sample=sample,
    )


class _Since:
    """The source's changes since the base, counted as the diff streams by: only the
    first ``limit`` entries, and the first data objects added or removed (the sample's),
    are kept, so a diff of any size takes memory for what the comparison shows."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.counts = dict.fromkeys(CHANGES, 0)
        self.entries: list[DiffEntry] = []
        self.truncated = False
        self.sampled: list[DiffEntry] = []

    def read(self, pool: Reviews, base: str | None, src: str) -> None:
        """Every change of ``src`` since ``base`` (everything it holds when unrelated)."""
        from limno.core.committed import EMPTY

        versioned = pool.versioned
        old = EMPTY if base is None else versioned.commits.get(base).snapshot
        new = versioned.commits.get(src).snapshot
        for key, va, vb in versioned.snapshots.diff(old, new):
            change = "added" if va is None else "removed" if vb is None else "changed"
            self.counts[change] += 1
            entry = DiffEntry(change, key, va, vb)
            if len(self.entries) < self.limit:
                self.entries.append(entry)
            else:
                self.truncated = True
            sampled = change != "changed" and not key.startswith("~")  # partitions, indexes
            if sampled and len(self.sampled) < MAX_SAMPLED_OBJECTS:
                self.sampled.append(entry)


def _sample(pool: Reviews, entries: Sequence[DiffEntry], rows: int) -> tuple[Sampled, ...]:
    """The first ``rows`` rows of each of the first data objects added or removed."""
    from limno.data.json_text import json_text
    from limno.data.objects import DataObject

    records: RecordPool = pool  # type: ignore[assignment]  # a record pool: checked by caller
    out: list[Sampled] = []
    for e in entries:
        if len(out) >= MAX_SAMPLED_OBJECTS:
            break
        if e.change == "changed" or e.key.startswith("~"):  # partitions, indexes
            continue
        obj = DataObject.from_json(e.new if e.new is not None else e.old or {})
        try:
            table = records.read_object(obj).slice(0, rows)
        except LimnoError:  # a removed object vacuum has freed: listed without rows
            table = None
        found = () if table is None else tuple(json.loads(json_text(r)) for r in table.to_pylist())
        out.append(Sampled(e.change, obj.id, obj.rows, found))
    return tuple(out)
