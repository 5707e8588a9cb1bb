"""Listing a file pool: a merged, sorted view of a committed snapshot and staged changes.

What a ref shows is its commit's snapshot; on a branch, overlaid by the branch's staged
changes (a staged entry replaces the committed one, a staged tombstone hides it). A
:class:`Cursor` walks that view in path order from any point: the committed side
through :meth:`~limno.core.committed.Snapshots.entries_from`, which seeks with the
metarange and reads ranges only as the walk goes on, so a page of a listing costs the
ranges it returns whatever the size of the pool. Rolling paths up into common prefixes
(``/`` delimiter) seeks past each prefix instead of reading what is under it, as S3's
ListObjects does.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.core.staging import is_tombstone
from limno.errors import InvalidInputError
from limno.pools.files.entries import FileEntry
from limno.pools.files.paths import prefix_end

if TYPE_CHECKING:
    from limno.core.committed import Snapshots

__all__ = ["Cursor", "Listing", "list_page"]

Value = Mapping[str, Any]


@dataclass(frozen=True)
class Listing:
    """One page of a listing: ``entries`` and rolled-up ``prefixes`` (each in path order;
    together at most the page's limit). When ``truncated``, ``next_after`` is the
    ``start_after`` of the next page (the last path or prefix of this one)."""

    entries: list[FileEntry]
    prefixes: list[str]
    truncated: bool
    next_after: str | None


class Cursor:
    """The entries of one view (a snapshot, and staged changes over it) in path order,
    from the point of the last :meth:`seek`; staged tombstones are skipped."""

    def __init__(
        self, snapshots: Snapshots, snapshot: str, staged: Mapping[str, Value] | None = None
    ) -> None:
        self._snapshots = snapshots
        self._snapshot = snapshot
        self._staged = dict(staged or {})
        self._staged_keys = sorted(self._staged)
        self._committed: Iterator[tuple[str, Value]] = iter(())
        self._head: tuple[str, Value] | None = None
        self._i = 0

    def seek(self, start: str) -> None:
        """Go to the first path ``>= start``."""
        self._committed = self._snapshots.entries_from(self._snapshot, start)
        self._head = next(self._committed, None)
        self._i = bisect.bisect_left(self._staged_keys, start)

    def __iter__(self) -> Iterator[tuple[str, Value]]:
        return self

    def __next__(self) -> tuple[str, Value]:
        while True:
            staged_key = self._staged_keys[self._i] if self._i < len(self._staged_keys) else None
            head = self._head
            if head is None and staged_key is None:
                raise StopIteration
            if staged_key is None or (head is not None and head[0] < staged_key):
                assert head is not None
                self._head = next(self._committed, None)
                return head
            if head is not None and head[0] == staged_key:
                self._head = next(self._committed, None)  # the staged change replaces it
            self._i += 1
            value = self._staged[staged_key]
            if not is_tombstone(value):
                return staged_key, value


def list_page(
    cursor: Cursor,
    prefix: str = "",
    delimiter: str | None = None,
    start_after: str = "",
    limit: int = 1000,
) -> Listing:
    """One page of the paths under ``prefix`` that sort after ``start_after``.

    With a ``delimiter``, a path with the delimiter after the prefix is rolled up into
    the common prefix that ends at it (``a/b/c`` under ``a/`` is ``a/b/``), returned once.
    A ``start_after`` that is such a common prefix (a previous page's ``next_after``)
    resumes after everything under it. Entries and prefixes together fill ``limit``.
    """
    if limit < 0:
        raise InvalidInputError(f"a listing's limit must not be negative, not {limit}")
    if delimiter == "":
        delimiter = None
    start = max(prefix, start_after)
    rel = start_after[len(prefix) :] if start_after.startswith(prefix) else ""
    if delimiter and rel.endswith(delimiter) and rel.find(delimiter) == len(rel) - len(delimiter):
        end = prefix_end(start_after)  # a common prefix: skip everything under it
        if end is None:
            return Listing([], [], False, None)
        start = end
    cursor.seek(start)
    entries: list[FileEntry] = []
    prefixes: list[str] = []
    last: str | None = None
    truncated = False
    for key, value in cursor:
        if not key.startswith(prefix):
            break  # paths sort after the prefix's: nothing under it is left
        if key <= start_after:
            continue
        found = key.find(delimiter, len(prefix)) if delimiter else -1
        if len(entries) + len(prefixes) >= limit:
            truncated = True
            break
        if delimiter and found >= 0:
            common = key[: found + len(delimiter)]
            prefixes.append(common)
            last = common
            end = prefix_end(common)
            if end is None:
                break
            cursor.seek(end)
            continue
        entries.append(FileEntry.from_value(key, value))
        last = key
    return Listing(entries, prefixes, truncated, last if truncated else None)


def iter_entries(cursor: Cursor, prefix: str = "") -> Iterator[FileEntry]:
    """Every entry under ``prefix``, in path order, read as the caller goes."""
    cursor.seek(prefix)
    for key, value in cursor:
        if not key.startswith(prefix):
            return
        yield FileEntry.from_value(key, value)
