"""A file pool's entry: what one path maps to in a snapshot or a staging area.

The entry is the unit the versioning core stores (as a small JSON value keyed by the
path); the bytes live apart, in a blob limno wrote or an imported object it did not,
so copying, committing and merging never move bytes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from limno.errors import CorruptError, InvalidInputError

__all__ = [
    "DEFAULT_CONTENT_TYPE",
    "FileChange",
    "FileEntry",
    "blob_keys",
    "entry_of",
    "file_change",
    "now_mtime",
    "user_metadata",
]


def now_mtime() -> str:
    """The current time as entries record it: ISO 8601 UTC, milliseconds, ``Z`` (the
    form S3's listings show and HTTP dates are made from)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def blob_keys(path: str, value: Mapping[str, Any]) -> list[str]:
    """The objects an entry's value references, as vacuum names them: its blob's id, or
    nothing for an imported object (bytes limno did not write are never vacuum's) and a
    staged delete. The :attr:`~limno.core.versioning.Versioned.object_keys` of file pools."""
    obj = value.get("object")
    return [obj] if isinstance(obj, str) else []


DEFAULT_CONTENT_TYPE = "application/octet-stream"


@dataclass(frozen=True)
class FileEntry:
    """One path's object: exactly one of ``object`` (a blob limno wrote, freed by vacuum
    when unreferenced) and ``uri`` (an imported object, never deleted) is set."""

    path: str
    size: int
    etag: str
    content_type: str
    mtime: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    object: str | None = None
    uri: str | None = None

    def to_value(self) -> dict[str, Any]:
        """The stored JSON value (the path is its key, so not repeated; empty fields omitted)."""
        value: dict[str, Any] = {"size": self.size, "etag": self.etag, "mtime": self.mtime}
        if self.content_type and self.content_type != DEFAULT_CONTENT_TYPE:
            value["content_type"] = self.content_type
        if self.metadata:
            value["metadata"] = dict(self.metadata)
        if self.object is not None:
            value["object"] = self.object
        if self.uri is not None:
            value["uri"] = self.uri
        return value

    @classmethod
    def from_value(cls, path: str, value: Mapping[str, Any]) -> FileEntry:
        """The entry of a stored value; CorruptError when it is not one."""
        try:
            size = value["size"]
            etag = value["etag"]
            mtime = value["mtime"]
            content_type = value.get("content_type", DEFAULT_CONTENT_TYPE)
            metadata = value.get("metadata") or {}
            obj = value.get("object")
            uri = value.get("uri")
        except (KeyError, TypeError, AttributeError) as e:
            raise CorruptError(f"malformed file entry for {path!r}: {value!r:.300}") from e
        # exact types first (a listing decodes a million of these), the general checks
        # only for what JSON does not produce (values built in Python)
        ok = (
            type(size) is int
            and size >= 0
            and type(etag) is str
            and type(mtime) is str
            and type(content_type) is str
            and (obj is None) != (uri is None)
            and type(obj if obj is not None else uri) is str
        ) and (
            not metadata
            or (
                isinstance(metadata, Mapping)
                and all(type(k) is str and type(v) is str for k, v in metadata.items())
            )
        )
        if not ok:
            raise CorruptError(f"malformed file entry for {path!r}: {value!r:.300}")
        return cls(
            path, size, etag, content_type, mtime, dict(metadata) if metadata else {}, obj, uri
        )


@dataclass(frozen=True)
class FileChange:
    """One path that differs between two states (refs, or a branch's head and its
    staging area): ``old`` and ``new`` are its entries (None where absent)."""

    path: str
    change: Literal["added", "removed", "changed"]
    old: FileEntry | None
    new: FileEntry | None


def file_change(path: str, old: FileEntry | None, new: FileEntry | None) -> FileChange:
    """The change from ``old`` to ``new`` (one of them at least is an entry)."""
    if old is None:
        return FileChange(path, "added", old, new)
    return FileChange(path, "removed" if new is None else "changed", old, new)


def entry_of(path: str, value: Mapping[str, Any] | None) -> FileEntry | None:
    """The entry a stored or staged value holds: None for no value and for a staged
    delete (``{"deleted": true}``, :data:`limno.core.staging.TOMBSTONE`)."""
    if value is None or (value.get("deleted") is True and len(value) == 1):
        return None
    return FileEntry.from_value(path, value)


def user_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """User metadata as entries keep it: names lower-case (as HTTP header names are
    compared), values text."""
    out = {}
    for name, value in (metadata or {}).items():
        if not isinstance(name, str) or not isinstance(value, str) or not name:
            raise InvalidInputError(f"user metadata must map names to text: {name!r}={value!r}")
        out[name.lower()] = value
    return out
