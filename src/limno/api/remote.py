"""The lake interface over HTTP: a client of ``limno serve``.

``Lake.open("http://host:9867")`` (``--lake``, ``LIMNO_LAKE``) gives a
:class:`RemoteLake`; its pools are :class:`RemotePool`. Every operation is one
request (see the routes of :mod:`limno.server`), values cross the wire in the
forms of :mod:`limno.api.wire`, and a failure comes back as the exception the
server raised, with its message: the CLI prints the same line either way.

Data streams both ways in bounded memory. ``load`` and ``add`` send files (and
stdin) as they read them, and Arrow tables as an IPC stream; ``iter_scan`` yields
tables as the server's Arrow IPC stream arrives. pyarrow is imported only by the
operations that move data, so ``limno ls`` and ``log`` against a server load
neither it nor the pool layer.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from limno.api import remote_http, remote_upload, wire, wire_ranges
from limno.api.base import DEFAULT_TARGET_SIZE, Engine, Lake, Pool, register, sql_text
from limno.api.base_files import not_files, not_records
from limno.api.remote_files import RemoteFilePool
from limno.api.remote_git import RemoteGit
from limno.api.remote_git import segment as _seg
from limno.api.remote_indexes import RemoteIndexes
from limno.api.remote_ingest import RemoteIngest
from limno.api.sources import Sources, source_list
from limno.config import lake_location
from limno.errors import InvalidInputError
from limno.lazy import lazy_module
from limno.pools.vacuum import DEFAULT_GRACE

if TYPE_CHECKING:
    import threading

    import pyarrow as pa

    from limno.api.auth_admin import AuthAdmin
    from limno.core.commits import Commit
    from limno.data.objects import DataObject
    from limno.data.typed_schema import TypedSchema
    from limno.engines.query_limits import QueryLimits
    from limno.faults import Fault
    from limno.pools.events import Event
    from limno.pools.records.compaction import JobResult
    from limno.pools.registry import PoolConfig
else:
    pa = lazy_module("pyarrow")

__all__ = ["RemoteLake", "RemotePool"]


class RemoteLake(Lake):
    """A lake behind ``limno serve``, at ``http(s)://host:port``."""

    def __init__(self, url: str) -> None:
        self._url = url.rstrip("/")
        self._http = remote_http.Connection(self._url)

    @property
    def uri(self) -> str:
        return self._url

    @classmethod
    def open(cls, location: str | None = None) -> RemoteLake:
        return cls(lake_location(location))

    @classmethod
    def init(cls, location: str | None = None) -> RemoteLake:
        where = lake_location(location)
        raise InvalidInputError(
            f"{where}: a server serves a lake that exists; create one where it runs"
            " ('limno --lake PATH init')"
        )

    def auth(self) -> AuthAdmin:
        """Users, keys and grants, managed by the server for an admin (403 otherwise)."""
        from limno.api.remote_auth import RemoteAuth

        return RemoteAuth(self._http)

    def close(self) -> None:
        """Close the connections (also done when the lake is garbage collected)."""
        self._http.close()

    def __enter__(self) -> RemoteLake:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def list_pools(self) -> list[PoolConfig]:
        return [wire.config_from_json(d) for d in self._http.call("GET", "/v1/pools")]

    def pool(self, name: str) -> RemotePool:
        config = self._config(name)
        if config.kind == "files":
            raise not_records(config)
        return RemotePool(self._http, config)

    def file_pool(self, name: str) -> RemoteFilePool:
        config = self._config(name)
        if config.kind != "files":
            raise not_files(config)
        return RemoteFilePool(self._http, config)

    def versioned_pool(self, name: str) -> RemotePool | RemoteFilePool:
        return self._opened(self._config(name))

    def _config(self, name: str) -> PoolConfig:
        return wire.config_from_json(self._http.call("GET", f"/v1/pools/{_seg(name)}"))

    def _opened(self, config: PoolConfig) -> RemotePool | RemoteFilePool:
        if config.kind == "files":
            return RemoteFilePool(self._http, config)
        return RemotePool(self._http, config)

    @overload
    def create_pool(
        self,
        name: str,
        key: str | None = None,
        kind: Literal["records"] = "records",
        target_size: int = DEFAULT_TARGET_SIZE,
        schema: TypedSchema | None = None,
        author: str | None = None,
        iterators: Sequence[str] = (),
        split_threshold: int | None = None,
        compaction: Mapping[str, Any] | None = None,
        retention: Mapping[str, dt.timedelta] | None = None,
    ) -> RemotePool: ...

    @overload
    def create_pool(
        self,
        name: str,
        key: None = None,
        *,
        kind: Literal["files"],
        author: str | None = None,
        retention: Mapping[str, dt.timedelta] | None = None,
    ) -> RemoteFilePool: ...

    @overload
    def create_pool(
        self,
        name: str,
        key: str | None = None,
        kind: str = "records",
        target_size: int = DEFAULT_TARGET_SIZE,
        schema: TypedSchema | None = None,
        author: str | None = None,
        iterators: Sequence[str] = (),
        split_threshold: int | None = None,
        compaction: Mapping[str, Any] | None = None,
        retention: Mapping[str, dt.timedelta] | None = None,
    ) -> RemotePool | RemoteFilePool: ...

    def create_pool(
        self,
        name: str,
        key: str | None = None,
        kind: str = "records",
        target_size: int = DEFAULT_TARGET_SIZE,
        schema: TypedSchema | None = None,
        author: str | None = None,
        iterators: Sequence[str] = (),
        split_threshold: int | None = None,
        compaction: Mapping[str, Any] | None = None,
        retention: Mapping[str, dt.timedelta] | None = None,
    ) -> RemotePool | RemoteFilePool:
        _check_pool_name(name)
        body = {
            "name": name,
            "key": key,
            "kind": kind,
            "target_size": target_size,
            "schema": wire.schema_to_json(schema),
            "author": author,
            "iterators": list(iterators),
            "split_threshold": split_threshold,
            "compaction": None if compaction is None else dict(compaction),
            "retention": wire.retention_to_json(retention),
        }
        return self._opened(wire.config_from_json(self._http.call("POST", "/v1/pools", body=body)))

    def drop_pool(self, name: str) -> PoolConfig:
        return wire.config_from_json(self._http.call("DELETE", f"/v1/pools/{_seg(name)}"))

    def rename_pool(self, old: str, new: str) -> PoolConfig:
        _check_pool_name(new)
        done = self._http.call("POST", f"/v1/pools/{_seg(old)}/rename", body={"name": new})
        return wire.config_from_json(done)

    def verify(self, pool: str | None = None, deep: bool = False) -> Iterator[Fault]:
        faults = self._http.call("GET", "/v1/verify", {"pool": pool, "deep": deep})
        yield from (wire.fault_from_json(f) for f in faults)

    def meta_table(self, ref: str, name: str) -> pa.Table:
        return self._http.table("GET", "/v1/meta", {"ref": ref, "name": name})

    def manage(
        self,
        pools: Sequence[str] = (),
        once: bool = False,
        interval: dt.timedelta = dt.timedelta(seconds=60),
        grace: dt.timedelta = DEFAULT_GRACE,
        stop: threading.Event | None = None,
        log: Callable[[str], None] = lambda message: None,
    ) -> int:
        raise InvalidInputError("manage runs next to the lake, not through a server")

    def events(
        self,
        pool: str | None = None,
        after: str | None = None,
        follow: bool = True,
        stop: threading.Event | None = None,
        *,
        poll_interval: float = 1.0,
    ) -> Iterator[Event]:
        """The server's event stream (``GET /v1/events``), read as it arrives; a dropped
        connection resumes after the last event seen (:mod:`limno.api.remote_events`)."""
        from limno.api.remote_events import events

        return events(self._http, pool, after, follow, stop, poll_interval)

    def query(
        self,
        sql: str,
        *,
        engine: Engine = "local",
        safe: bool = False,
        spark_master: str | None = None,
        spark_conf: Mapping[str, str] | None = None,
        limits: QueryLimits | None = None,
        readable: Callable[[str], bool] | None = None,
        as_of: dt.datetime | None = None,
    ) -> pa.Table:
        """SQL run by the server (which may cap ``limits`` and decides what is readable)."""
        if readable is not None:
            raise InvalidInputError("a server decides which pools a query reads, not its client")
        body = {
            "sql": sql_text(sql),
            "engine": engine,
            "safe": safe,
            "spark_master": spark_master,
            "spark_conf": dict(spark_conf or {}),
            "limits": None if limits is None else wire.limits_to_json(limits),
            "as_of": wire.time_to_json(as_of),
        }
        return self._http.table("POST", "/v1/query", body=body)


def _check_pool_name(name: str) -> None:
    """Refuse a bad pool name here, in the lake's words (as the server's lake would),
    before a request is sent."""
    from limno.pools.registry import validate_pool_name

    validate_pool_name(name)


class RemotePool(RemoteGit, RemoteIngest, RemoteIndexes, Pool):
    """A record pool of a lake behind ``limno serve``, addressed by its id (renames keep
    it); its git operations are :class:`~limno.api.remote_git.RemoteGit`'s."""

    def __init__(self, http: remote_http.Connection, config: PoolConfig) -> None:
        self._init_remote(http, config)

    def set_iterators(
        self,
        iterators: Sequence[str],
        file_text: str | None = None,
        file_name: str | None = None,
    ) -> PoolConfig:
        body = {"iterators": list(iterators), "file_text": file_text, "file_name": file_name}
        self.config = wire.config_from_json(self._call("POST", "iterators", body=body))
        return self.config

    # -- writing ---------------------------------------------------------------------------
    def load(
        self,
        sources: Sources,
        fmt: str | None = None,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        *,
        engine: Engine = "local",
        spark_master: str | None = None,
        spark_conf: Mapping[str, str] | None = None,
        expect_head: str | None = None,
    ) -> Commit:
        params = {  # the server's defaults are left out: a shorter URL to build and parse
            "branch": None if branch == "main" else branch,
            "fmt": fmt,
            "message": message or None,
            "author": author,
            "meta": None if meta is None else json.dumps(dict(meta)),
            "engine": None if engine == "local" else engine,
            "spark_master": spark_master,
            "spark_conf": json.dumps(dict(spark_conf)) if spark_conf else None,
            "expect_head": expect_head,
        }
        return wire.commit_from_json(self._upload("load", sources, params))

    def add(
        self, sources: Sources, fmt: str | None = None, branch: str = "main"
    ) -> list[DataObject]:
        done = self._upload("add", sources, {"branch": branch, "fmt": fmt})
        return [wire.object_from_json(o) for o in done]

    def _upload(self, op: str, sources: Sources, params: dict[str, Any]) -> Any:
        """Send ``sources`` as one framed body (limno.server.uploads), read as sent."""
        return remote_upload.upload(self._http, f"{self._path}/{op}", source_list(sources), params)

    def staged(self, branch: str = "main") -> list[DataObject]:
        return [wire.object_from_json(o) for o in self._call("GET", "staged", {"branch": branch})]

    def unstage(self, ids: Sequence[str], branch: str = "main") -> None:
        self._call("POST", "unstage", body={"ids": list(ids), "branch": branch})

    def commit(
        self,
        ids: Sequence[str] | None = None,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Commit:
        body = {
            "ids": None if ids is None else list(ids),
            "branch": branch,
            "message": message,
            "author": author,
            "meta": None if meta is None else dict(meta),
        }
        return wire.commit_from_json(self._call("POST", "commit", body=body))

    def delete_objects(
        self, ids: Sequence[str], branch: str = "main", message: str = "", author: str | None = None
    ) -> Commit:
        body = {"ids": list(ids), "branch": branch, "message": message, "author": author}
        return wire.commit_from_json(self._call("POST", "delete-objects", body=body))

    def delete_where(
        self, predicate: str, branch: str = "main", message: str = "", author: str | None = None
    ) -> Commit:
        body = {"predicate": predicate, "branch": branch, "message": message, "author": author}
        return wire.commit_from_json(self._call("POST", "delete-where", body=body))

    # -- reading ---------------------------------------------------------------------------
    def iter_scan(
        self,
        ref: str | None = None,
        start: Any = None,
        end: Any = None,
        order: str = "asc",
        limit: int | None = None,
        as_of: dt.datetime | None = None,
        *,
        ranges: Iterable[tuple[Any, Any]] | None = None,
    ) -> Iterator[pa.Table]:
        params = {
            "ranges": wire_ranges.ranges_to_json(ranges),
            "ref": ref,
            "start": None if start is None else json.dumps(wire.value_to_json(start)),
            "end": None if end is None else json.dumps(wire.value_to_json(end)),
            "order": order,
            "limit": limit,
            "as_of": wire.time_to_json(as_of),
        }
        from limno.api import remote_scan  # its decoding of stored objects, or Arrow IPC

        path = f"{self._path}/scan"
        yield from remote_scan.iter_scan(self._http, path, params, self.config, order == "desc")

    def scan(
        self,
        ref: str | None = None,
        start: Any = None,
        end: Any = None,
        order: str = "asc",
        limit: int | None = None,
        as_of: dt.datetime | None = None,
        *,
        ranges: Iterable[tuple[Any, Any]] | None = None,
    ) -> pa.Table:
        tables = list(self.iter_scan(ref, start, end, order, limit, as_of, ranges=ranges))
        return pa.concat_tables(tables) if tables else pa.table({})

    def get(
        self, keys: Sequence[Any], ref: str | None = None, *, as_of: dt.datetime | None = None
    ) -> pa.Table:
        from limno.api import remote_lookup  # any number of keys: batched when very many

        return remote_lookup.get(self._http, f"{self._path}/get", self.config, keys, ref, as_of)

    def objects(self, ref: str | None = None, as_of: dt.datetime | None = None) -> list[DataObject]:
        params = {"ref": ref, "as_of": wire.time_to_json(as_of)}
        return [wire.object_from_json(o) for o in self._call("GET", "objects", params)]

    def meta_table(self, name: str, ref: str | None = None) -> pa.Table:
        return self._http.table("GET", f"{self._path}/meta/{_seg(name)}", {"ref": ref})

    # -- maintenance -----------------------------------------------------------------------
    def compact(
        self,
        ids: Sequence[str] = (),
        branch: str = "main",
        strategy: str | None = None,
        message: str = "",
        author: str | None = None,
        *,
        engine: Engine = "local",
    ) -> tuple[Commit | None, list[JobResult]]:
        body = {
            "ids": list(ids),
            "branch": branch,
            "strategy": strategy,
            "message": message,
            "author": author,
            "engine": engine,
        }
        done = self._call("POST", "compact", body=body)
        commit = None if done["commit"] is None else wire.commit_from_json(done["commit"])
        return commit, [wire.job_from_json(r) for r in done["results"]]

    def split(self, partition: str, branch: str = "main", at: Any = None) -> Commit | None:
        body = {"partition": partition, "branch": branch, "at": wire.value_to_json(at)}
        done = self._call("POST", "split", body=body)
        return None if done["commit"] is None else wire.commit_from_json(done["commit"])


register(("http", "https"), RemoteLake)
