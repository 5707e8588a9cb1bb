"""The JSON form of a file pool's values over HTTP: entries, changes, listing pages.

An entry travels in its stored form (:meth:`~limno.pools.files.entries.FileEntry.
to_value`) with its path beside it, so the client gets back an equal entry. The model
modules are imported where a function needs them, as in :mod:`limno.api.wire`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from limno.errors import InvalidInputError

if TYPE_CHECKING:
    from limno.pools.files.entries import FileChange, FileEntry
    from limno.pools.files.listing import Listing

__all__ = [
    "change_from_json",
    "change_to_json",
    "entry_from_json",
    "entry_to_json",
    "listing_from_json",
    "listing_to_json",
    "metadata_from_json",
]


def entry_to_json(e: FileEntry) -> dict[str, Any]:
    return {"path": e.path, **e.to_value(), "content_type": e.content_type}


def entry_from_json(d: Mapping[str, Any]) -> FileEntry:
    from limno.pools.files.entries import FileEntry

    return FileEntry.from_value(str(d["path"]), d)


def change_to_json(c: FileChange) -> dict[str, Any]:
    return {
        "path": c.path,
        "change": c.change,
        "old": None if c.old is None else entry_to_json(c.old),
        "new": None if c.new is None else entry_to_json(c.new),
    }


def change_from_json(d: Mapping[str, Any]) -> FileChange:
    from limno.pools.files.entries import FileChange

    old, new = d.get("old"), d.get("new")
    return FileChange(
        str(d["path"]),
        d["change"],
        None if old is None else entry_from_json(old),
        None if new is None else entry_from_json(new),
    )


def listing_to_json(page: Listing) -> dict[str, Any]:
    return {
        "entries": [entry_to_json(e) for e in page.entries],
        "prefixes": list(page.prefixes),
        "truncated": page.truncated,
        "next_after": page.next_after,
        "commit": page.commit,
        "next_token": page.next_token,
    }


def listing_from_json(d: Mapping[str, Any]) -> Listing:
    from limno.pools.files.listing import Listing

    after, commit, token = d.get("next_after"), d.get("commit"), d.get("next_token")
    return Listing(
        [entry_from_json(e) for e in d["entries"]],
        [str(p) for p in d["prefixes"]],
        bool(d["truncated"]),
        None if after is None else str(after),
        None if commit is None else str(commit),
        None if token is None else str(token),
    )


def metadata_from_json(d: Any) -> dict[str, str] | None:
    """User metadata sent by a client: names and values are strings (None: none sent)."""
    if d is None:
        return None
    if not isinstance(d, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in d.items()
    ):
        raise InvalidInputError("metadata: expected a JSON object of strings")
    return dict(d)
