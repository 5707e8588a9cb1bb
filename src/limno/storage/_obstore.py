"""Backends on obstore (Rust ``object_store``): local directory, memory and S3.

obstore already gives the guarantees the lake needs: local puts write a hidden
temporary file and rename it (create-only puts link it, which fails if the target
exists), S3 create-only puts send ``If-None-Match: *``, and every put is atomic.
This module only maps its errors to limno's and normalizes small differences
(deleting a missing object, listing order).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import functools
import os
import re
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from limno.errors import (
    AlreadyExistsError,
    InvalidInputError,
    NotFoundError,
    PreconditionFailedError,
    StorageError,
    os_errors,
    storage_error,
)
from limno.lazy import lazy_module
from limno.storage._base import ListResult, ObjectInfo, Storage
from limno.storage._local_files import (
    create_staging,
    publish_new,
    replace_by_exchange,
    replace_if_same,
)
from limno.storage._obstore_errors import translated

if TYPE_CHECKING:
    import obstore
    from obstore import UpdateVersion
    from obstore import exceptions as oe
else:
    # a local lake's reads and small writes are plain system calls (see
    # ObStorage._plain_file): commands that only read journals never load obstore
    obstore = lazy_module("obstore")
    oe = lazy_module("obstore.exceptions")

__all__ = ["ObStorage", "local_storage", "memory_storage", "s3_storage"]

T = TypeVar("T")

#: the name suffix of a local object still being written (obstore's convention too)
_PARTIAL = re.compile(r"#\d+$")


def _local_info(path: str, st: os.stat_result) -> ObjectInfo:
    """What obstore's local store reports for a file (its e-tag: inode, mtime, size)."""
    micros = st.st_mtime_ns // 1000
    when = dt.datetime.fromtimestamp(micros // 1_000_000, dt.UTC)
    return ObjectInfo(
        path=path,
        size=st.st_size,
        last_modified=when.replace(microsecond=micros % 1_000_000),
        etag=f'"{st.st_ino:x}-{micros:x}-{st.st_size:x}"',
    )


def _info(meta: Any) -> ObjectInfo:
    return ObjectInfo(
        path=meta["path"],
        size=int(meta["size"]),
        last_modified=meta["last_modified"],
        etag=meta.get("e_tag"),
    )


class ObStorage(Storage):
    """A :class:`Storage` over any obstore store.

    ``store`` may be None for a local directory (``root``): its store is then made at
    its first use, since reads and small writes of a local lake are plain system calls
    (see :meth:`_plain_file`) and commands that only read journals never load obstore.
    """

    def __init__(
        self,
        store: Any,
        uri: str,
        root: str | None = None,
        arrow: Callable[[], tuple[Any, str]] | None = None,
    ) -> None:
        self._made_store = store
        self.uri = uri
        self._root = root
        self._arrow = functools.cache(arrow) if arrow is not None else None

    @property
    def _store(self) -> Any:
        if self._made_store is None:
            from obstore.store import LocalStore

            self._made_store = LocalStore(self._root)
        return self._made_store

    def _check(self, path: str) -> str:
        if not path or path.startswith("/") or "//" in path or path.endswith("/"):
            raise InvalidInputError(f"invalid object path: {path!r}")
        if any(part in (".", "..") for part in path.split("/")):
            raise InvalidInputError(f"invalid object path: {path!r}")
        return path

    def get(self, path: str) -> bytes:
        self._check(path)
        local = self._plain_file(path)
        if local is not None:
            try:
                with open(local, "rb") as f:
                    return f.read()
            except (FileNotFoundError, NotADirectoryError):
                raise NotFoundError(f"object not found: {path}") from None
            except OSError:
                pass  # a directory, a permission...: obstore's error says which
        return translated(
            path, lambda: bytes(obstore.get(self._store, path).bytes()), "read", self._where(path)
        )

    def get_range(self, path: str, start: int, end: int) -> bytes:
        self._check(path)
        if start < 0 or end < start:
            raise InvalidInputError(f"invalid range [{start}, {end}) for {path}")
        if end == start:
            return b""
        size = self.head(path).size
        end = min(end, size)
        if start >= end:
            return b""
        return translated(
            path,
            lambda: bytes(obstore.get_range(self._store, path, start=start, end=end)),
            "read",
            self._where(path),
        )

    def head(self, path: str) -> ObjectInfo:
        self._check(path)
        local = self._plain_file(path)
        if local is not None:
            try:
                st = os.stat(local)
            except (FileNotFoundError, NotADirectoryError):
                raise NotFoundError(f"object not found: {path}") from None
            except OSError:
                st = None
            if st is not None and stat.S_ISREG(st.st_mode):
                return _local_info(path, st)
        return translated(
            path, lambda: _info(obstore.head(self._store, path)), "read", self._where(path)
        )

    def exists(self, path: str) -> bool:
        self._check(path)
        local = self._plain_file(path)
        if local is not None:
            try:
                if stat.S_ISREG(os.stat(local).st_mode):
                    return True
            except (FileNotFoundError, NotADirectoryError):
                return False
            except OSError:
                pass
        return super().exists(path)

    def _plain_file(self, path: str) -> str | None:
        """The file of ``path`` on a local store, for operations done here with the
        system calls obstore would make (see :mod:`limno.storage._local_files`), without
        its hand-off to a thread of its runtime, which costs more than a small object's
        whole write when the cores are busy; None elsewhere and for staging names, which
        obstore refuses."""
        if self._root is None or _PARTIAL.search(path):
            return None
        if os.sep == "/":  # a checked path joins as it is (os.path.join, in a tenth the time)
            return f"{self._root.rstrip('/')}/{path}"
        return os.path.join(self._root, *path.split("/"))

    def put(self, path: str, data: bytes) -> ObjectInfo:
        self._check(path)
        local = self.local_path(path)
        if local is not None and os.path.isfile(local) and replace_by_exchange(local, data):
            return self._written(path, data)
        plain = self._plain_file(path)
        if plain is not None and publish_new(plain, data, exclusive=False):
            return self._written(path, data)
        done = translated(
            path,
            lambda: obstore.put(self._store, path, data, use_multipart=False),
            "write",
            self._where(path),
        )
        return self._written(path, data, done.get("e_tag"))

    def _written(self, path: str, data: bytes, etag: str | None = None) -> ObjectInfo:
        """The object just written; if another writer deleted it already (a delete
        racing the put), what was written (with the store's ETag of it, if it gave one)."""
        try:
            return self.head(path)
        except NotFoundError:
            return ObjectInfo(path, len(data), dt.datetime.now(dt.UTC), etag)

    def put_if_absent(self, path: str, data: bytes) -> ObjectInfo:
        self._check(path)
        plain = self._plain_file(path)
        if plain is not None:
            published = publish_new(plain, data, exclusive=True)
            if published is False:
                raise AlreadyExistsError(f"object already exists: {path}")
            if published:
                return self._written(path, data)
        done = translated(
            path,
            lambda: obstore.put(self._store, path, data, mode="create", use_multipart=False),
            "write",
            self._where(path),
        )
        return self._written(path, data, done.get("e_tag"))

    def put_file(self, path: str, local_file: str) -> ObjectInfo:
        from pathlib import Path  # what obstore takes for a file to upload

        self._check(path)
        translated(
            path,
            lambda: obstore.put(self._store, path, Path(local_file)),
            "write",
            self._where(path),
        )
        return self.head(path)

    def staging_file(self, path: str) -> str | None:
        """A new empty local file from which :meth:`move_file` publishes ``path`` by a rename.

        Only for a local store (else None): the file sits beside the object's final
        path under a ``<name>#<digits>`` staging name, which listings skip (obstore's
        own convention for its in-flight puts), so it is on the same filesystem and
        nobody mistakes it for an object.
        """
        self._check(path)
        local = self.local_path(path)
        if local is None:
            return None
        with os_errors("write", local):
            try:
                fd, tmp = create_staging(local)
            except (FileNotFoundError, NotADirectoryError):  # no directory yet (or a file)
                os.makedirs(os.path.dirname(local), exist_ok=True)
                fd, tmp = create_staging(local)
        os.close(fd)
        return tmp

    def move_file(self, path: str, local_file: str) -> ObjectInfo:
        """Publish a local file as ``path`` and give it up (it is gone afterwards).

        Atomic like :meth:`put_file`, whose result it has: on a local store, when the
        file is on the store's filesystem (see :meth:`staging_file`), by one rename
        instead of a copy. The caller must not write to the file any more.
        """
        self._check(path)
        local = self.local_path(path)
        if local is not None:
            with os_errors("write", local):
                os.makedirs(os.path.dirname(local), exist_ok=True)
            try:
                os.replace(local_file, local)
            except OSError as e:
                if e.errno != errno.EXDEV:
                    raise storage_error("write", local, e) from e
            else:
                return self.head(path)
        info = self.put_file(path, local_file)
        with contextlib.suppress(OSError):
            os.unlink(local_file)
        return info

    def list_partial(self, prefix: str = "") -> Sequence[ObjectInfo]:
        """Staging files (``<name>#<digits>``) under ``prefix`` of a local store."""
        prefix = prefix.strip("/")
        if self._root is None:
            return []
        top = os.path.join(self._root, *prefix.split("/")) if prefix else self._root
        out = []
        for dirpath, _, names in os.walk(top):
            for name in names:
                if not _PARTIAL.search(name):
                    continue
                full = os.path.join(dirpath, name)
                try:
                    st = os.stat(full)
                except FileNotFoundError:
                    continue  # published or removed meanwhile
                rel = os.path.relpath(full, self._root).replace(os.sep, "/")
                when = dt.datetime.fromtimestamp(st.st_mtime, dt.UTC)
                out.append(ObjectInfo(rel, st.st_size, when))
        return sorted(out, key=lambda o: o.path)

    def delete_partial(self, path: str) -> None:
        if not _PARTIAL.search(path) or self._root is None:
            raise InvalidInputError(f"not a partial object: {path!r}")
        self._check(path.split("#", 1)[0])
        local = os.path.join(self._root, *path.split("/"))
        try:
            os.unlink(local)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise storage_error("delete", local, e) from e

    def list(self, prefix: str = "", delimiter: str | None = None) -> ListResult:
        prefix = prefix.strip("/")
        if delimiter not in (None, "/"):
            raise InvalidInputError(f"unsupported delimiter {delimiter!r} (only '/')")
        if delimiter == "/":
            res = translated(
                prefix or "/",
                lambda: obstore.list_with_delimiter(self._store, prefix or None),
                "list",
                self._where(prefix),
            )
            objects = sorted((_info(m) for m in res["objects"]), key=lambda o: o.path)
            prefixes = sorted(p.rstrip("/") + "/" for p in res["common_prefixes"])
            return ListResult(objects, prefixes)
        return ListResult(list(self.walk(prefix)))

    def walk(self, prefix: str = "") -> Iterator[ObjectInfo]:
        prefix = prefix.strip("/")
        batches = translated(
            prefix or "/",
            lambda: list(obstore.list(self._store, prefix or None)),
            "list",
            self._where(prefix),
        )
        yield from sorted((_info(m) for batch in batches for m in batch), key=lambda o: o.path)

    def delete(self, path: str) -> None:
        self._check(path)
        plain = self._plain_file(path)
        if plain is not None:
            try:
                os.unlink(plain)
                return
            except (FileNotFoundError, NotADirectoryError):
                return  # deleting a missing object is no error
            except OSError:
                pass  # a directory, a permission...: obstore's error says which
        with contextlib.suppress(NotFoundError):
            translated(path, lambda: obstore.delete(self._store, path), "delete", self._where(path))

    def delete_if_equal(self, path: str, data: bytes) -> bool:
        """Atomic on a local store: the version there is hard-linked to a private hidden
        name (the path stays as it is) and compared there; other bytes: nothing else is
        done. The same bytes: the path is renamed away and deleted if it is still that
        version (same inode); if a newer write took the path in between, that one is
        linked back (unless a newer still is there). No write is ever lost; only in
        that last race may a reader miss the newer object for a moment."""
        self._check(path)
        plain = self._plain_file(path)
        if plain is None:
            return super().delete_if_equal(path, data)
        seen, taken = self._private(plain), self._private(plain)
        try:
            os.link(plain, seen)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
            return False  # missing (or a directory, which no object is)
        except OSError as e:
            raise storage_error("delete", plain, e) from e
        try:
            with open(seen, "rb") as f:
                if f.read() != data:
                    return False
            try:
                os.rename(plain, taken)
            except FileNotFoundError:
                return False  # deleted meanwhile
            if os.stat(taken).st_ino == os.stat(seen).st_ino:
                os.unlink(taken)
                return True
            with contextlib.suppress(FileExistsError):  # a newer write: it stays
                os.link(taken, plain)
            os.unlink(taken)
            return False
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(seen)

    def replace_if_equal(self, path: str, data: bytes, expected: bytes) -> bool:
        """One compare-and-swap (see :meth:`Storage.replace_if_equal`): on a local store
        :func:`~limno.storage._local_files.replace_if_same`; elsewhere the object is read
        with its ETag, compared, and the new bytes put on condition that the ETag is
        still that one (S3's ``If-Match``), which only one writer can meet."""
        self._check(path)
        plain = self._plain_file(path)
        if plain is not None:
            with os_errors("write", plain):
                return replace_if_same(plain, data, expected)
        where = self._where(path)
        try:
            got = translated(path, lambda: obstore.get(self._store, path), "read", where)
            body = bytes(got.bytes())
        except NotFoundError:
            return False
        etag = got.meta.get("e_tag")
        if body != expected:
            return False
        if etag is None:
            raise StorageError(f"cannot write {where} conditionally: the store gives no ETag")
        mode: UpdateVersion = {"e_tag": etag}
        try:
            translated(
                path,
                lambda: obstore.put(self._store, path, data, mode=mode, use_multipart=False),
                "write",
                where,
            )
        except (PreconditionFailedError, NotFoundError):
            return False  # another writer replaced (or deleted) the version compared
        return True

    @staticmethod
    def _private(plain: str) -> str:
        """A hidden name beside ``plain`` (listings skip it, as a writer's staging file)."""
        import secrets  # conditional deletes only: not at start

        return f"{plain}#{secrets.randbelow(10**12):012d}"

    def copy(self, src: str, dst: str) -> None:
        self._check(src)
        self._check(dst)
        translated(src, lambda: obstore.copy(self._store, src, dst), "copy", self._where(src))

    def local_path(self, path: str) -> str | None:
        if self._root is None:
            return None
        return os.path.join(self._root, *path.split("/"))

    def arrow_filesystem(self) -> tuple[Any, str] | None:
        return None if self._arrow is None else self._arrow()

    def _where(self, path: str) -> str:
        """Where an object lives, for error lines: a file path on a local lake, else a URI."""
        if self._root is not None:
            return os.path.join(self._root, *path.split("/")) if path else self._root
        return f"{self.uri.rstrip('/')}/{path}"

    def __repr__(self) -> str:
        return f"<Storage {self.uri}>"


def local_storage(root: str, create: bool = False) -> ObStorage:
    """A directory on the local filesystem (made when ``create``, else it must exist)."""
    root = os.path.abspath(os.path.expanduser(root))
    if create:
        with os_errors("create", root):
            os.makedirs(root, exist_ok=True)
    elif not os.path.isdir(root):
        raise NotFoundError(f"no such directory: {root}")
    return ObStorage(None, _file_uri(root), root=root)


#: an absolute POSIX path whose ``file://`` URI is itself: nothing to percent-encode
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9_.~/-]*")


def _file_uri(root: str) -> str:
    """``Path(root).as_uri()`` for an absolute, normalized ``root``; without importing
    pathlib (and urllib) when nothing in the path needs quoting, the usual case."""
    if os.sep == "/" and _PLAIN_PATH.fullmatch(root):
        return f"file://{root}"
    from pathlib import Path

    return Path(root).as_uri()


_memory: dict[str, ObStorage] = {}
_memory_lock = threading.Lock()


def memory_storage(name: str = "") -> ObStorage:
    """A process-local in-memory store; the same name gives the same store."""
    with _memory_lock:
        if name not in _memory:
            from obstore.store import MemoryStore

            _memory[name] = ObStorage(MemoryStore(), f"memory://{name}")
        return _memory[name]


def s3_storage(bucket: str, prefix: str = "") -> ObStorage:
    """An S3 (or S3-compatible) bucket, configured from the usual ``AWS_*`` variables.

    ``AWS_ENDPOINT_URL`` selects another endpoint (path-style requests are then used,
    and plain ``http://`` is allowed); credentials and region come from
    ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and ``AWS_REGION``.
    """
    config: dict[str, Any] = {}
    client_options: dict[str, Any] = {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        config["endpoint"] = endpoint
        config["virtual_hosted_style_request"] = False
        if endpoint.startswith("http://"):
            client_options["allow_http"] = True
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        config["region"] = region
    from obstore.store import S3Store

    store = S3Store(
        bucket,
        prefix=prefix.strip("/") or None,
        config=config or None,  # type: ignore[arg-type]
        client_options=client_options or None,  # type: ignore[arg-type]
    )
    uri = f"s3://{bucket}/{prefix.strip('/')}".rstrip("/")
    return ObStorage(
        store, uri, arrow=functools.partial(_s3_arrow, bucket, prefix, endpoint, region)
    )


def _s3_arrow(
    bucket: str, prefix: str, endpoint: str | None, region: str | None
) -> tuple[Any, str]:
    """pyarrow's S3 filesystem on the same bucket, endpoint and region (credentials come
    from the same ``AWS_*`` variables), and the bucket/prefix root of the lake."""
    from pyarrow import fs  # only an engine scanning an S3 lake needs it

    options: dict[str, Any] = {}
    if endpoint:
        from urllib.parse import urlparse

        parsed = urlparse(endpoint)
        options["endpoint_override"] = parsed.netloc
        options["scheme"] = parsed.scheme or "https"
    if region:
        options["region"] = region
    root = "/".join(p for p in (bucket, prefix.strip("/")) if p)
    return fs.S3FileSystem(**options), root
