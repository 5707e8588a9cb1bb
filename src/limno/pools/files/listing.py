"""Listing a file pool: a merged, sorted view of a committed snapshot and staged changes.

What a ref shows is its commit's snapshot; on a branch, overlaid by the branch's staged
changes (a staged entry replaces the committed one, a staged tombstone hides it). A
:class:`Cursor` walks that view in path order from any point: the committed side
through :meth:`~limno.core.committed.Snapshots.entries_from`, which seeks with the
metarange and reads ranges only as the walk goes on, so a page of a listing costs the
ranges it returns whatever the size of the pool. Rolling paths up into common prefixes
(``/`` delimiter) seeks past each prefix instead of reading what is under it, as S3's
ListObjects does.

Pages and commits: a page names the commit it read (:attr:`Listing.commit`) and, when
truncated, a :attr:`Listing.next_token` holding that commit, the marker and the
listing's ref, prefix and delimiter. A page asked for with that token reads the same
commit, so the pages of one listing never mix two commits: a tag, a commit id, ``~N``
or ``--as-of`` go on at the pinned commit whatever moved since; a branch whose head
moved since the first page fails with a ConflictError (the staged changes it showed
are then partly committed, and no earlier state of them is kept to go on from).
Staged changes are read-after-write: each page of a branch shows its staged changes
as they are when that page is read, so a path staged or removed between two pages
shows (or is gone) in a later page exactly when it sorts after the previous page's
marker. A bare ``start_after`` (S3's marker) pins nothing.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.core.staging import is_tombstone
from limno.errors import InvalidInputError
from limno.pools.files.entries import FileEntry
from limno.pools.files.paths import prefix_end

if TYPE_CHECKING:
    from limno.core.committed import Snapshots

__all__ = ["Cursor", "Listing", "ListingToken", "list_page"]

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
    #: the commit the page read (None: not known, from an older server)
    commit: str | None = None
    #: when truncated, what asks for the next page of the same commit (see the module
    #: docstring): opaque
    next_token: str | None = None


_TOKEN_FORM = "l1."


@dataclass(frozen=True)
class ListingToken:
    """What a :attr:`Listing.next_token` holds: the commit the listing reads, the marker
    of the next page, and the listing it continues (a token of another is refused)."""

    commit: str
    after: str
    ref: str
    prefix: str
    delimiter: str

    def encode(self) -> str:
        doc = [self.commit, self.after, self.ref, self.prefix, self.delimiter]
        raw = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
        return _TOKEN_FORM + base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str, ref: str, prefix: str, delimiter: str) -> ListingToken:
        """The token of a listing of ``ref``, ``prefix`` and ``delimiter``;
        InvalidInputError for anything else."""
        try:
            if not token.startswith(_TOKEN_FORM):
                raise ValueError("unknown form")
            body = token[len(_TOKEN_FORM) :]
            doc = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            if not (isinstance(doc, list) and len(doc) == 5):
                raise ValueError("not a listing token")
            if not all(isinstance(x, str) for x in doc):
                raise ValueError("not a listing token")
            parsed = cls(*doc)
        except (ValueError, binascii.Error):
            raise InvalidInputError("not a listing token (pass a page's next_token)") from None
        if (parsed.ref, parsed.prefix, parsed.delimiter) != (ref, prefix, delimiter):
            raise InvalidInputError(
                "this listing token continues another listing (its ref, prefix or delimiter differ)"
            )
        return parsed


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
