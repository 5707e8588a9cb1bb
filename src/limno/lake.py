"""The lake: a root location holding ``lake.json`` and the journal of pools.

``Lake.init`` creates one; ``Lake.open`` opens one and refuses anything that is
not a lake of a format version it understands. Everything else in limno hangs off
a :class:`Lake`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from limno.config import lake_location
from limno.core.versioning import Versioned
from limno.errors import AlreadyExistsError, CorruptError, InvalidInputError, NotFoundError
from limno.faults import Fault
from limno.journal import JournalStore
from limno.pools.records.keys import PoolKey
from limno.pools.records.pool import RecordPool
from limno.pools.records.typed_schema import TypedSchema
from limno.pools.registry import PoolConfig, PoolRegistry
from limno.storage import Storage, open_storage

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "Lake"]

FORMAT_NAME = "limno"
FORMAT_VERSION = 1
LAKE_JSON = "lake.json"
POOLS_PREFIX = "pools"


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
    def init(cls, location: str | None = None) -> Lake:
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
    def open(cls, location: str | None = None) -> Lake:
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
    def pools(self) -> list[PoolConfig]:
        """Every pool of the lake, by name."""
        return self.registry.list()

    def create_pool(
        self,
        name: str,
        key: str | None = None,
        kind: str = "records",
        target_size: int = 256 * 1024 * 1024,
        schema: TypedSchema | None = None,
        author: str | None = None,
        iterators: Sequence[str] = (),
        split_threshold: int | None = None,
        compaction: Mapping[str, Any] | None = None,
        retention: Mapping[str, dt.timedelta] | None = None,
    ) -> RecordPool:
        """Create a pool with branch ``main`` at an empty root commit.

        ``iterators`` are iterator texts (``dedup``, ``sum(n),max(ts)``,
        ``age-off(ts,30d)``); ``split_threshold`` is the row count past which a leaf
        partition splits; ``compaction`` is ``{"strategy", "ratio", "batch"}``;
        ``retention`` maps branch globs to how long vacuum keeps their history.
        """
        if kind != "records":
            raise InvalidInputError(f"pools of kind {kind!r} are not supported yet")
        if schema is not None and key is None:
            key = schema.key
        key_text = str(PoolKey.parse(key or "ts"))
        if target_size <= 0:
            raise InvalidInputError("target size must be positive")
        settings: dict[str, Any] = {}
        if iterators:
            from limno.pools.records._iterators import parse_iterators

            spec = parse_iterators(iterators, PoolKey.parse(key_text).names)
            settings["iterators"] = spec.to_json()
        if split_threshold is not None:
            if split_threshold < 1:
                raise InvalidInputError("the split threshold must be at least 1 row")
            settings["split_threshold"] = int(split_threshold)
        if retention:
            settings["retention"] = {g: d.total_seconds() for g, d in retention.items()}
        if compaction:
            from limno.pools.records.compaction import strategy_settings

            strategy_settings({"compaction": compaction})
            settings["compaction"] = dict(compaction)
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
        return RecordPool(self, config)

    def pool(self, name: str) -> RecordPool:
        """An existing pool by name or id."""
        return RecordPool(self, self.registry.find(name))

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
        from limno.pools.records.checks import verify_pool

        try:
            check_lake_json(self.uri, self.storage.get(LAKE_JSON))
        except (NotFoundError, CorruptError, InvalidInputError) as e:
            yield Fault(LAKE_JSON, str(e))
        faults = list(self.pools_journal.verify())
        yield from faults
        if faults:
            return
        configs = [self.registry.find(pool)] if pool else self.pools()
        for config in configs:
            yield from verify_pool(self, config, deep)


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
