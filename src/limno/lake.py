"""The lake: a root location holding ``lake.json`` and the journal of pools.

``Lake.init`` creates one; ``Lake.open`` opens one and refuses anything that is
not a lake of a format version it understands. Everything else in limno hangs off
a :class:`Lake`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Self, overload

from limno.config import lake_location
from limno.data.iterators import IteratorSpec, parse_iterators
from limno.errors import AlreadyExistsError, CorruptError, InvalidInputError, NotFoundError
from limno.journal import JournalStore
from limno.pools import inspect
from limno.pools.registry import PoolConfig, PoolRegistry
from limno.pools.settings import DEFAULT_SPLIT_THRESHOLD, CompactionSettings, PoolSettings
from limno.pools.vacuum import DEFAULT_GRACE
from limno.storage import Storage, open_storage

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.data.typed_schema import TypedSchema
    from limno.faults import Fault
    from limno.pools.files.pool import FilePool
    from limno.pools.records.pool import RecordPool

# The pool layer (record pools, the versioning core, checks, maintenance) is imported
# where a pool is opened or made: listing the pools (``limno ls``) needs none of it.

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "Lake"]

FORMAT_NAME = "limno"
FORMAT_VERSION = 1
LAKE_JSON = "lake.json"
POOLS_PREFIX = "pools"
#: a record pool's default object size (a file pool has none)
DEFAULT_TARGET_SIZE = 256 * 1024 * 1024


class Lake:
    """An opened lake."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.pools_journal = JournalStore(storage, POOLS_PREFIX)
        self.registry = PoolRegistry(storage, self.pools_journal)

    @property
    def uri(self) -> str:
        return self.storage.uri

    @classmethod
    def init(cls, location: str | None = None) -> Self:
        """Create a lake at ``location``. Raises AlreadyExistsError if one is there."""
        storage = open_storage(lake_location(location), create=True)
        if storage.exists(LAKE_JSON):
            raise AlreadyExistsError(f"a lake already exists at {storage.uri}")
        lake = cls(storage)
        if not lake.pools_journal.exists():
            # a concurrent init may have made it; lake.json decides who wins below
            with contextlib.suppress(AlreadyExistsError):
                lake.pools_journal.create()
        doc = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        try:
            storage.put_if_absent(LAKE_JSON, json.dumps(doc, indent=2).encode() + b"\n")
        except AlreadyExistsError as e:
            raise AlreadyExistsError(f"a lake already exists at {storage.uri}") from e
        return lake

    @classmethod
    def open(cls, location: str | None = None) -> Self:
        """Open the lake at ``location`` (resolved by :func:`lake_location`)."""
        where = lake_location(location)
        try:
            storage = open_storage(where)
        except NotFoundError as e:
            raise NotFoundError(f"no lake at {where} (run 'limno init')") from e
        try:
            raw = storage.get(LAKE_JSON)
        except NotFoundError as e:
            raise NotFoundError(f"no lake at {storage.uri} (run 'limno init')") from e
        check_lake_json(storage.uri, raw)
        return cls(storage)

    # -- pools -----------------------------------------------------------------
    def list_pools(self) -> list[PoolConfig]:
        """Every pool of the lake, by name."""
        return self.registry.list()

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
    ) -> RecordPool: ...

    @overload
    def create_pool(
        self,
        name: str,
        key: None = None,
        *,
        kind: Literal["files"],
        author: str | None = None,
        retention: Mapping[str, dt.timedelta] | None = None,
    ) -> FilePool: ...

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
    ) -> RecordPool | FilePool: ...

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
    ) -> RecordPool | FilePool:
        """Create a pool with branch ``main`` at an empty root commit.

        ``iterators`` are iterator texts (``dedup``, ``sum(n),max(ts)``,
        ``age-off(ts,30d)``); ``split_threshold`` is the row count past which a leaf
        partition splits; ``compaction`` is ``{"strategy", "ratio", "batch"}``;
        ``retention`` maps branch globs to how long vacuum keeps their history.
        A pool of kind ``files`` takes only ``retention`` (and ``author``): the rest
        are record pools' and refused.
        """
        from limno.core.versioning import Versioned
        from limno.data.keys import PoolKey
        from limno.pools.records.pool import RecordPool

        if kind == "files":
            given = {
                "key": key is not None,
                "schema": schema is not None,
                "iterators": bool(iterators),
                "split threshold": split_threshold is not None,
                "compaction": compaction is not None,
                "target size": target_size != DEFAULT_TARGET_SIZE,
            }
            refused = [name for name, there in given.items() if there]
            if refused:
                raise InvalidInputError(
                    f"a file pool has no {', '.join(refused)}: those options are for record"
                    " pools (--kind records)"
                )
            return self._create_file_pool(name, author, retention)
        if kind != "records":
            raise InvalidInputError(f"unknown pool kind {kind!r} (records or files)")
        if schema is not None and key is None:
            key = schema.key
        key_text = str(PoolKey.parse("ts" if key is None else key))  # "" is no key, not ts
        if target_size <= 0:
            raise InvalidInputError("target size must be positive")
        settings = PoolSettings(
            iterators=(
                parse_iterators(iterators, PoolKey.parse(key_text).names)
                if iterators
                else IteratorSpec()
            ),
            split_threshold=(
                DEFAULT_SPLIT_THRESHOLD if split_threshold is None else int(split_threshold)
            ),
            compaction=CompactionSettings.from_json(compaction or {}),
            retention=dict(retention or {}),
        )
        config = self.registry.new_config(
            name,
            kind=kind,
            key=key_text,
            target_size=target_size,
            schema=None if schema is None else schema.to_json(),
            settings=settings,
        )
        Versioned(self.storage, config.id).initialize(author)
        self.registry.register(config)
        return RecordPool(self.storage, config, self.registry)

    def _create_file_pool(
        self, name: str, author: str | None, retention: Mapping[str, dt.timedelta] | None
    ) -> FilePool:
        from limno.core.versioning import Versioned
        from limno.pools.files.pool import FilePool

        settings = PoolSettings(retention=dict(retention or {}))
        config = self.registry.new_config(name, kind="files", key=None, settings=settings)
        Versioned(self.storage, config.id).initialize(author)
        self.registry.register(config)
        return FilePool(self.storage, config, self.registry)

    def pool(self, name: str) -> RecordPool:
        """An existing record pool by name or id (a file pool: :meth:`file_pool`)."""
        from limno.pools.records.pool import RecordPool

        config = self.registry.find(name)
        if config.kind == "files":
            raise InvalidInputError(
                f"pool {config.name!r} is a file pool: this works on record pools only"
            )
        return RecordPool(self.storage, config, self.registry)

    def file_pool(self, name: str) -> FilePool:
        """An existing file pool by name or id."""
        from limno.pools.files.pool import FilePool

        config = self.registry.find(name)
        if config.kind != "files":
            raise InvalidInputError(
                f"pool {config.name!r} is a record pool: this works on file pools only"
            )
        return FilePool(self.storage, config, self.registry)

    def meta_table(self, ref: str, name: str) -> pa.Table:
        """A meta table: ``(":", "pools")``, or a pool's ``("logs@dev", "objects")``...
        ``name`` may keep the ``:`` it has in SQL (``":pools"``, ``":objects"``)."""
        name = name.removeprefix(":")
        if not ref:
            if name != "pools":
                raise NotFoundError(f"no meta table ':{name}' (try ':pools')")
            return inspect.pools_table(self.list_pools())
        from limno.core.refs import parse_pool_ref

        pool_name, at = parse_pool_ref(ref)
        config = self.registry.find(pool_name)
        if config.kind == "files":
            return inspect.file_pool_table(self.file_pool(config.id), name, at)
        return self.pool(config.id).meta_table(name, at)

    def drop_pool(self, name: str) -> PoolConfig:
        return self.registry.drop(name)

    def rename_pool(self, old: str, new: str) -> PoolConfig:
        return self.registry.rename(old, new)

    # -- checking --------------------------------------------------------------
    def verify(self, pool: str | None = None, deep: bool = False) -> Iterator[Fault]:
        """Every broken invariant of the lake (or of one pool), each as a :class:`Fault`.

        ``deep`` also reads every data object whole (page checksums, sort order,
        keys and counts against the recorded metadata).
        """
        from limno.faults import Fault
        from limno.pools.records.checks import verify_pool

        try:
            check_lake_json(self.uri, self.storage.get(LAKE_JSON))
        except (NotFoundError, CorruptError, InvalidInputError) as e:
            yield Fault(LAKE_JSON, str(e))
        faults = list(self.pools_journal.verify())
        yield from faults
        if faults:
            return
        if pool is None:
            from limno.auth.store import AuthStore  # users and keys: only when the lake has them

            auth = AuthStore(self.storage).journal
            if auth.exists():
                yield from auth.verify()
        configs = [self.registry.find(pool)] if pool else self.list_pools()
        for config in configs:
            if config.kind == "files":
                yield from self.file_pool(config.id).verify()
            else:
                yield from verify_pool(self.pool(config.id), deep)

    # -- maintenance -----------------------------------------------------------
    def manage(
        self,
        pools: Sequence[str] = (),
        once: bool = False,
        interval: dt.timedelta = dt.timedelta(seconds=60),
        grace: dt.timedelta = DEFAULT_GRACE,
        stop: threading.Event | None = None,
        log: Callable[[str], None] = lambda _: None,
    ) -> int:
        """Maintain ``pools`` (default: every pool) until ``stop`` is set: one pass
        (:func:`~limno.pools.records.manage.maintain`) per branch of each record pool,
        and a vacuum of each file pool (it has nothing to compact or split), every
        ``interval``; the number of passes run.

        With ``once``, ingest jobs that failed in the pass raise a LimnoError naming
        each job and its reason, once the rest of the pass is done (without ``once``
        they are logged, and the passes go on)."""
        from limno.pools.branching import TX_PREFIX
        from limno.pools.records.manage import ingest_failed, maintain

        stop = stop or threading.Event()
        passes = 0
        while True:
            failed: list[str] = []  # this pass's failed ingest jobs
            configs = [self.registry.find(n) for n in pools] or self.list_pools()
            for config in configs:
                if config.kind == "files":
                    self._vacuum_files(config.id, grace, log)
                    continue
                pool = self.pool(config.id)
                for branch in pool.branches():
                    if branch.startswith(TX_PREFIX):
                        continue
                    prefix = f"{pool.name}@{branch}: "

                    def say(message: str, prefix: str = prefix) -> None:
                        log(prefix + message)

                    maintain(pool, branch, grace, say, failed)
            passes += 1
            if once and failed:
                raise ingest_failed(failed)
            if once or stop.wait(interval.total_seconds()):
                return passes

    def _vacuum_files(self, pool_id: str, grace: dt.timedelta, log: Callable[[str], None]) -> None:
        """A file pool's maintenance pass: vacuum, recorded in its job tracker."""
        from limno.ksuid import ksuid
        from limno.pools.jobs import JobRecord, JobTracker

        pool = self.file_pool(pool_id)
        record = JobRecord(ksuid(), "vacuum")
        with JobTracker(self.storage, pool.id).track(record):
            report = pool.vacuum(grace=grace)
            record.detail = {"removed": len(report.removed), "bytes": report.bytes}
        log(f"{pool.name}: vacuum: removed {len(report.removed)} object(s)")


def check_lake_json(uri: str, raw: bytes) -> dict[str, object]:
    """Parse ``lake.json`` or raise CorruptError saying what is wrong with it."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise CorruptError(f"{uri}/{LAKE_JSON}: not valid JSON ({str(e)[:200]})") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise CorruptError(f"{uri}/{LAKE_JSON}: not a limno lake descriptor")
    version = doc.get("version")
    if version != FORMAT_VERSION or isinstance(version, bool):  # True == 1
        raise CorruptError(
            f"{uri}/{LAKE_JSON}: format version {version!r:.40}; this limno reads {FORMAT_VERSION}"
        )
    return doc
