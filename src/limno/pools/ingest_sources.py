"""The files of the ingest batcher: checked and queued at submit (:func:`submit`), and
read by its jobs (:func:`fetched`).

A file is a local path, read in place; an ``s3://`` object; or a copy kept in the
lake (a server's upload, or ``copy=True``), fetched to a temporary file first. A
fetched file keeps its base name, so the input format is detected by extension as a
load of the original would; errors name the file as it was submitted, never the
temporary copy.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from limno.errors import InvalidInputError, LimnoError, NotFoundError
from limno.ksuid import ksuid
from limno.pools.ingest_queue import (
    LAKE_PREFIX,
    IngestQueue,
    QueuedFile,
    forget_copy,
    iso,
    now_utc,
)

if TYPE_CHECKING:
    from limno.storage import Storage

__all__ = ["copy_key", "fetched", "is_url", "named_errors", "submit"]

#: bytes read from a store per request while fetching
_CHUNK = 8 << 20


def _download(store: Storage, key: str, dest: str, name: str) -> None:
    try:
        size = store.head(key).size
    except NotFoundError:
        raise InvalidInputError(f"{name}: no such object") from None
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest, "wb") as out:
        for start in range(0, size, _CHUNK):
            out.write(store.get_range(key, start, min(size, start + _CHUNK)))


def _source(storage: Storage, f: QueuedFile) -> tuple[Storage | None, str]:
    """The store and key to fetch ``f`` from (None: a local file, read in place)."""
    if f.path.startswith(LAKE_PREFIX):
        key = f.path[len(LAKE_PREFIX) :]
        local = storage.local_path(key)
        if local is not None and os.path.isfile(local):
            return None, local
        return storage, key
    if is_url(f.path):
        from limno.storage import open_storage

        where, key = _s3_parts(f.path)
        return open_storage(where), key
    return None, f.path


@contextlib.contextmanager
def fetched(storage: Storage, files: Sequence[QueuedFile]) -> Iterator[list[str]]:
    """Local paths to read ``files`` from (``storage``: the lake's, for copies), valid
    inside the block; fetched copies are removed after it."""
    tmp: str | None = None
    try:
        out = []
        for i, f in enumerate(files):
            store, key = _source(storage, f)
            if store is None:
                out.append(key)
                continue
            if tmp is None:
                tmp = tempfile.mkdtemp(prefix="limno-ingest-")
            base = copy_key("", f.id, f.name).rsplit("/", 1)[-1]
            dest = os.path.join(tmp, str(i), base)
            _download(store, key, dest, f.name)
            out.append(dest)
        yield out
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def named_errors(files: Sequence[QueuedFile], local: Sequence[str]) -> Iterator[None]:
    """Errors that name a file by where it was read name it as it was submitted."""
    try:
        yield
    except LimnoError as e:
        text = str(e)
        # longest first: a path must not be replaced inside a longer one
        for path, f in sorted(zip(local, files, strict=True), key=lambda p: -len(p[0])):
            if path != f.name:
                text = text.replace(path, f.name)
        if text != str(e):
            e.args = (text, *e.args[1:])
        raise


# -- submitting ----------------------------------------------------------------------------------


def copy_key(pool_id: str, file_id: str, name: str) -> str:
    """Where a copy of a submitted file is kept in the lake (its base name kept: the
    batcher detects formats by extension)."""
    base = os.path.basename(name.replace("\\", "/").rstrip("/")) or "file"
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in base)[-200:]
    return f"{pool_id}/ingest/files/{file_id}/{safe.lstrip('.') or 'file'}"


def _s3_parts(url: str) -> tuple[str, str]:
    """``s3://bucket/dir/name`` → (``s3://bucket/dir``, ``name``)."""
    rest = url.split("://", 1)[1]
    if "/" not in rest.strip("/") or url.endswith("/"):
        raise InvalidInputError(f"{url}: not an object URL (s3://bucket/key)")
    head, _, name = url.rpartition("/")
    return head, name


def _local(path: str) -> tuple[str, int]:
    """An absolute path and the size of a local file, or the error a load gives."""
    if path.startswith("file://"):
        from urllib.parse import unquote, urlparse

        path = unquote(urlparse(path).path)
    full = os.path.abspath(path)
    try:
        st = os.stat(full)
    except FileNotFoundError:
        raise InvalidInputError(f"{path}: no such file") from None
    except OSError as e:
        raise InvalidInputError(f"{path}: cannot open ({e.strerror or e})") from None
    if not os.path.isfile(full):
        raise InvalidInputError(f"{path}: is not a file")
    if not os.access(full, os.R_OK):
        raise InvalidInputError(f"{path}: cannot open (permission denied)")
    return full, st.st_size


def _remote_size(url: str) -> int:
    from limno.storage import open_storage

    where, name = _s3_parts(url)
    try:
        return open_storage(where).head(name).size
    except NotFoundError:
        raise InvalidInputError(f"{url}: no such object") from None


def is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def submit(
    queue: IngestQueue,
    paths: Sequence[str],
    fmt: str | None = None,
    branch: str = "main",
    *,
    copy: bool = False,
    names: Sequence[str] | None = None,
) -> list[QueuedFile]:
    """Check that each file exists and queue them all in one entry (or none).

    ``paths`` are local paths and ``s3://`` URLs; with ``copy`` each file is first
    copied into the lake (a server keeps uploads so), so the queue no longer depends
    on it. ``names`` are what to call them (default: the paths).
    """
    from limno.data.readers import FORMATS

    if fmt is not None and fmt not in FORMATS:
        raise InvalidInputError(f"unknown input format {fmt!r} (one of {', '.join(FORMATS)})")
    if not paths:
        raise InvalidInputError("nothing to submit: name at least one file")
    shown = list(names) if names is not None else list(paths)
    now = now_utc()
    new: list[QueuedFile] = []
    for i, (path, name) in enumerate(zip(paths, shown, strict=True)):
        stamp = iso(now + dt.timedelta(microseconds=i))  # keeps the order given
        if path == "-":
            raise InvalidInputError("the ingest queue takes files, not stdin (use 'limno load')")
        scheme = path.split("://", 1)[0].lower() if is_url(path) else ""
        if scheme in ("s3", "s3a"):
            where, size = path, _remote_size(path)
        elif scheme:
            raise InvalidInputError(f"{path}: only local paths and s3:// URLs can be queued")
        else:
            where, size = _local(path)
        new.append(QueuedFile(ksuid(), name, where, size, stamp, branch, fmt))
    if copy:
        new = _copied(queue.storage, queue.pool_id, new)
    try:
        queue.add(new)
    except BaseException:
        for f in new:
            forget_copy(queue.storage, f)
        raise
    return new


def _copied(storage: Storage, pool_id: str, files: list[QueuedFile]) -> list[QueuedFile]:
    out: list[QueuedFile] = []
    try:
        with fetched(storage, files) as local:
            for f, path in zip(files, local, strict=True):
                key = copy_key(pool_id, f.id, f.name)
                info = storage.put_file(key, path)
                out.append(replace(f, path=LAKE_PREFIX + key, size=info.size))
    except BaseException:
        for f in out:
            forget_copy(storage, f)
        raise
    return out
