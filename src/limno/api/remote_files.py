"""A file pool over HTTP: the client of ``/v1/pools/{pool}/files/...``.

Bytes stream both ways in bounded memory. :meth:`RemoteFilePool.put` sends bytes, a
binary file (read as it is sent) or an iterable of chunks as the body of one ``PUT``;
:meth:`RemoteFilePool.read` yields the answer's chunks as they arrive, a byte range
asked with a ``Range`` header. :meth:`RemoteFilePool.iter_list` fetches listing pages
(``after``: the continuation) only as they are consumed. Paths travel as query
parameters, never in the URL's path, so that any path S3 allows (``a/../b``, ``//x``,
spaces, newlines) arrives as it was written.
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from stat import S_ISREG
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from limno.api import wire, wire_files
from limno.api.base_files import FilePool
from limno.api.remote_git import RemoteGit
from limno.errors import InvalidInputError

if TYPE_CHECKING:
    from limno.api.remote_http import Connection
    from limno.core.commits import Commit
    from limno.pools.files.entries import FileChange, FileEntry
    from limno.pools.files.listing import Listing
    from limno.pools.registry import PoolConfig

__all__ = ["PAGE", "RemoteFilePool"]

#: entries a listing page asks for when iterating (the server caps a page at this too)
PAGE = 1000
_CHUNK = 1 << 20


class RemoteFilePool(RemoteGit, FilePool):
    """A file pool of a lake behind ``limno serve``, addressed by its id."""

    def __init__(self, http: Connection, config: PoolConfig) -> None:
        self._init_remote(http, config)

    # -- writing ---------------------------------------------------------------------------
    def put(
        self,
        branch: str,
        path: str,
        data: bytes | BinaryIO | Iterable[bytes],
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        if_match: str | None = None,
        if_none_match: bool = False,
        max_size: int | None = None,
    ) -> FileEntry:
        params = {
            "branch": branch,
            "path": path,
            "content_type": content_type,
            "metadata": None if metadata is None else json.dumps(dict(metadata)),
            "if_match": if_match,
            "if_none_match": if_none_match or None,
            "max_size": max_size,
        }
        content: bytes | Iterable[bytes]
        if isinstance(data, bytes | bytearray | memoryview):
            content = bytes(data)
        elif isinstance(data, _SizedFile):
            content = data.file  # a regular file: sent with its length, as it is read
        elif hasattr(data, "read"):
            content = _file_chunks(data)  # type: ignore[arg-type]
        else:
            content = (bytes(c) for c in data if c)  # an empty chunk would end the body
        headers = {"Content-Type": "application/octet-stream"}
        with self._http.stream(
            "PUT", f"{self._path}/files/object", params, content=content, headers=headers
        ) as r:
            return wire_files.entry_from_json(json.loads(r.read()))

    def put_file(
        self,
        branch: str,
        path: str,
        local_file: str,
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> FileEntry:
        try:
            f = open(local_file, "rb")  # noqa: SIM115 -- closed below
        except FileNotFoundError:
            raise InvalidInputError(f"{local_file}: no such file") from None
        except IsADirectoryError:
            raise InvalidInputError(f"{local_file}: is a directory") from None
        except OSError as e:
            raise InvalidInputError(f"{local_file}: cannot open ({e.strerror or e})") from None
        with f:
            data: BinaryIO | _SizedFile = f
            if S_ISREG(os.fstat(f.fileno()).st_mode):
                data = _SizedFile(f)
            return self.put(
                branch,
                path,
                data,  # type: ignore[arg-type]
                content_type=content_type,
                metadata=metadata,
            )

    def copy(
        self,
        src_ref: str,
        src_path: str,
        branch: str,
        dst_path: str,
        *,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> FileEntry:
        body = {
            "src_ref": src_ref,
            "src_path": src_path,
            "branch": branch,
            "dst_path": dst_path,
            "metadata": None if metadata is None else dict(metadata),
            "content_type": content_type,
        }
        return wire_files.entry_from_json(self._call("POST", "files/copy", body=body))

    def remove(self, branch: str, paths: Sequence[str]) -> builtins.list[str]:
        body = {"branch": branch, "paths": list(paths)}
        return [str(p) for p in self._call("POST", "files/remove", body=body)]

    def remove_prefix(self, branch: str, prefix: str) -> builtins.list[str]:
        body = {"branch": branch, "prefix": prefix}
        return [str(p) for p in self._call("POST", "files/remove-prefix", body=body)]

    def commit(
        self,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        prefix: str | None = None,
    ) -> Commit:
        body = {
            "branch": branch,
            "message": message,
            "author": author,
            "meta": None if meta is None else dict(meta),
            "prefix": prefix,
        }
        return wire.commit_from_json(self._call("POST", "files/commit", body=body))

    def uncommitted(self, branch: str = "main", prefix: str = "") -> builtins.list[FileChange]:
        found = self._call("GET", "files/uncommitted", {"branch": branch, "prefix": prefix})
        return [wire_files.change_from_json(c) for c in found]

    def discard(self, branch: str = "main", prefix: str = "") -> int:
        body = {"branch": branch, "prefix": prefix}
        return int(self._call("POST", "files/discard", body=body)["discarded"])

    def import_from(
        self,
        source: str,
        branch: str = "main",
        prefix: str = "",
        message: str = "",
        author: str | None = None,
    ) -> Commit:
        """Import what the *server* reads at ``source`` (its directory, or ``s3://`` with
        its credentials): an admin's operation (see limno.server.authorization)."""
        body = {
            "source": source,
            "branch": branch,
            "prefix": prefix,
            "message": message,
            "author": author,
        }
        return wire.commit_from_json(self._call("POST", "files/import", body=body))

    # -- reading ---------------------------------------------------------------------------
    def stat(
        self, path: str, ref: str | None = None, as_of: dt.datetime | None = None
    ) -> FileEntry:
        params = {"path": path, "ref": ref, "as_of": wire.time_to_json(as_of)}
        return wire_files.entry_from_json(self._call("GET", "files/stat", params))

    def read(
        self,
        path: str,
        ref: str | None = None,
        as_of: dt.datetime | None = None,
        start: int = 0,
        end: int | None = None,
    ) -> Iterator[bytes]:
        """The bytes ``[start, end)`` (clipped at the size) as they arrive. The request
        is made at the first ``next`` (a missing path raises there): a generator that
        is never run holds no connection."""
        params: dict[str, Any] = {"path": path, "ref": ref, "as_of": wire.time_to_json(as_of)}
        if start:
            params["start"] = start
        if end is not None:
            params["end"] = end
        return self._chunks(params)

    def _chunks(self, params: dict[str, Any]) -> Iterator[bytes]:
        with self._http.stream("GET", f"{self._path}/files/object", params) as response:
            yield from (c for c in response.iter_bytes(_CHUNK) if c)

    def list(
        self,
        ref: str | None = None,
        prefix: str = "",
        delimiter: str | None = None,
        start_after: str = "",
        limit: int = 1000,
        as_of: dt.datetime | None = None,
        *,
        token: str | None = None,
    ) -> Listing:
        params = {
            "ref": ref,
            "prefix": prefix,
            "delimiter": delimiter,
            "after": start_after,
            "limit": limit,
            "as_of": wire.time_to_json(as_of),
            "token": token,
        }
        return wire_files.listing_from_json(self._call("GET", "files/list", params))

    def iter_list(
        self, ref: str | None = None, prefix: str = "", as_of: dt.datetime | None = None
    ) -> Iterator[FileEntry]:
        """Pages of one commit while the branch stays (see :meth:`FilePool.pages`)."""
        for page in self.pages(ref, prefix, None, as_of, PAGE):
            yield from page.entries

    def diff_paths(
        self, old_ref: str, new_ref: str | None = None, prefix: str = ""
    ) -> builtins.list[FileChange]:
        params = {"old": old_ref, "new": new_ref, "prefix": prefix}
        return [wire_files.change_from_json(c) for c in self._call("GET", "files/diff", params)]


class _SizedFile:
    """A regular file opened by put_file: httpx sends it with a ``Content-Length`` (its
    size, from ``fstat``), which only a regular file read from its start has right."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file


def _file_chunks(f: IO[bytes]) -> Iterator[bytes]:
    """A binary file's bytes, read as they are sent."""
    read = getattr(f, "read1", f.read)
    while chunk := read(_CHUNK):
        yield chunk
