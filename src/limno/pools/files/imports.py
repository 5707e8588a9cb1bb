"""Import by reference: register objects already in a store as a branch's files, in one
commit, without copying a byte.

The source is a local directory (a path or ``file://`` URI) or an ``s3://bucket/prefix``;
it is listed once through :func:`limno.storage.open_storage`, and each object becomes an
entry whose ``uri`` is the object's full URI (percent-encoded for ``file://``). What an
entry records comes from the listing alone, so an import of a million objects reads no
object: its size, its mtime, and the store's ETag without quotes (S3's is the MD5 of
the bytes, or ``<md5>-<parts>`` for a multipart upload; a local directory's is
``<inode>-<mtime>-<size>`` in hex, which changes when the file does). Its content type
is guessed from the name (:mod:`mimetypes`), since a listing does not carry one.

Vacuum never deletes imported bytes: an entry with a ``uri`` names no blob, and vacuum
only ever removes blobs under the pool's own ``data/`` that no entry names. A source
inside the lake (or a lake inside the source) is refused, so no imported object can be
a blob that some pool's vacuum considers its own.
"""

from __future__ import annotations

import mimetypes
from typing import TYPE_CHECKING
from urllib.parse import quote

from limno.core.commits import Action, Commit
from limno.errors import InvalidInputError
from limno.pools.files.entries import DEFAULT_CONTENT_TYPE, FileEntry
from limno.pools.files.paths import validate_path, validate_prefix
from limno.storage import ObjectInfo, Storage, open_storage

if TYPE_CHECKING:
    from limno.pools.files.pool import FilePool

__all__ = ["import_objects", "imported_entry"]


def _mtime(info: ObjectInfo) -> str:
    return info.last_modified.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _nested(a: str, b: str) -> bool:
    """Whether location ``a`` is ``b`` or inside it."""
    a, b = a.rstrip("/"), b.rstrip("/")
    return a == b or a.startswith(b + "/")


def imported_entry(store: Storage, info: ObjectInfo, path: str) -> FileEntry:
    """The entry of one listed object of ``store``, as ``path``."""
    base = store.uri.rstrip("/")
    rel = quote(info.path) if base.startswith("file://") else info.path
    content_type = mimetypes.guess_type(info.path, strict=False)[0] or DEFAULT_CONTENT_TYPE
    return FileEntry(
        path=validate_path(path),
        size=info.size,
        etag=(info.etag or f"{info.size:x}").strip('"'),
        content_type=content_type,
        mtime=_mtime(info),
        uri=f"{base}/{rel}",
    )


def import_objects(
    pool: FilePool,
    source: str,
    branch: str = "main",
    prefix: str = "",
    message: str = "",
    author: str | None = None,
) -> Commit:
    """Register every object under ``source`` as ``prefix + <its path under source>`` on
    ``branch``, in one commit (see the module docstring)."""
    validate_prefix(prefix)
    pool.versioned.writable_head(branch)
    store = open_storage(source)
    lake = pool.storage.uri
    if _nested(store.uri, lake) or _nested(lake, store.uri):
        raise InvalidInputError(
            f"cannot import {store.uri}: it overlaps the lake at {lake} (import from"
            " outside the lake: vacuum must never free imported bytes)"
        )
    actions = []
    for info in store.walk(""):
        try:
            entry = imported_entry(store, info, prefix + info.path)
        except InvalidInputError as e:
            raise InvalidInputError(f"cannot import {store.uri}/{info.path}: {e}") from None
        actions.append(Action("add", entry.path, entry.to_value()))
    if not actions:
        raise InvalidInputError(f"nothing to import: no object under {store.uri}")
    return pool.versioned.commit(
        branch,
        actions,
        message=message or f"import {len(actions)} object(s) from {store.uri}",
        author=author,
        meta={"import": {"source": store.uri, "objects": len(actions)}},
        since=None,
    )
