"""The lake's pool list: pool configs kept in the ``pools/`` journal.

A pool's identity is its KSUID; its name is a mutable attribute, unique in the
lake. Creating a pool writes everything under ``<pool-id>/`` first and registers
the config last, so a pool that is visible is complete; dropping unregisters
first, then deletes the pool's objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from limno.errors import AlreadyExistsError, InvalidInputError, NotFoundError
from limno.journal import AssertEquals, JournalStore, Put, Remove, StoreState
from limno.ksuid import ksuid
from limno.pools.settings import PoolSettings
from limno.storage import Storage

__all__ = ["KINDS", "PoolConfig", "PoolRegistry", "validate_pool_name"]

KINDS = ("records", "files")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")


def validate_pool_name(name: str) -> str:
    """A plain name: starts with a letter or ``_``; letters, digits, ``_ . -``; no ``..``."""
    if not _NAME.match(name or "") or ".." in name:
        raise InvalidInputError(
            f"invalid pool name {name!r}: use a letter or '_' first, then letters, digits,"
            " '_', '.', '-' (no '@', '/', ':' or '..'; at most 128 characters)"
        )
    return name


@dataclass(frozen=True)
class PoolConfig:
    """A pool's configuration as registered in the lake."""

    id: str
    name: str
    kind: str = "records"
    key: str | None = "ts"
    target_size: int = 256 * 1024 * 1024
    schema: Mapping[str, Any] | None = None
    created: str = ""
    settings: PoolSettings = field(default_factory=PoolSettings)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "key": self.key,
            "target_size": self.target_size,
            "schema": None if self.schema is None else dict(self.schema),
            "created": self.created,
            "settings": self.settings.to_json(),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PoolConfig:
        return cls(
            id=d["id"],
            name=d["name"],
            kind=d.get("kind", "records"),
            key=d.get("key"),
            target_size=int(d.get("target_size", 256 * 1024 * 1024)),
            schema=d.get("schema"),
            created=d.get("created", ""),
            settings=PoolSettings.from_json(d.get("settings")),
        )


#: parsed configurations a registry keeps at most (then it starts over)
_PARSED = 1_000


class PoolRegistry:
    """Create, find, rename and drop pools."""

    def __init__(self, storage: Storage, journal: JournalStore) -> None:
        self.storage = storage
        self.journal = journal
        #: configurations parsed by :meth:`find`, by the journal value they came from
        self._parsed: dict[int, tuple[Mapping[str, Any], PoolConfig]] = {}

    def list(self) -> list[PoolConfig]:
        pools = [PoolConfig.from_json(v) for v in self.journal.state().items.values()]
        return sorted(pools, key=lambda p: p.name)

    def find(self, name_or_id: str) -> PoolConfig:
        """A pool by name (or by id)."""
        items = self.journal.state().items
        if name_or_id in items:
            return self._config(items[name_or_id])
        for value in items.values():
            if value["name"] == name_or_id:
                return self._config(value)
        raise NotFoundError(f"pool {name_or_id!r} not found")

    def _config(self, value: Mapping[str, Any]) -> PoolConfig:
        """``value`` parsed, once per journal value: the journal's state keeps a value
        it has not replaced as the same object, so a server finding a pool on every
        request parses it (about 50 us, and as much again comparing it to the pool it
        keeps) only when it changed. A value replaced is a new object, and the old one
        is held here, so its id cannot name another value meanwhile."""
        hit = self._parsed.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        config = PoolConfig.from_json(value)
        if len(self._parsed) >= _PARSED:
            self._parsed.clear()
        self._parsed[id(value)] = (value, config)
        return config

    def new_config(self, name: str, **kwargs: Any) -> PoolConfig:
        from limno.core.commits import now_iso  # the commit layer: not for listing pools

        validate_pool_name(name)
        kind = kwargs.get("kind", "records")
        if kind not in KINDS:
            raise InvalidInputError(f"unknown pool kind {kind!r} (records or files)")
        if any(p.name == name for p in self.list()):
            raise AlreadyExistsError(f"pool {name!r} already exists")
        return PoolConfig(id=ksuid(), name=name, created=now_iso(), **kwargs)

    def register(self, config: PoolConfig) -> None:
        """Make a fully built pool visible (fails if its name was taken meanwhile)."""

        def updates(state: StoreState) -> list[Put]:
            if any(v["name"] == config.name for v in state.items.values()):
                raise AlreadyExistsError(f"pool {config.name!r} already exists")
            return [Put(config.id, config.to_json())]

        self.journal.commit(updates)

    def update(self, config: PoolConfig, **changes: Any) -> PoolConfig:
        new = replace(config, **changes)
        if "name" in changes:
            validate_pool_name(new.name)

        def updates(state: StoreState) -> list[Put]:
            if any(v["name"] == new.name and k != config.id for k, v in state.items.items()):
                raise AlreadyExistsError(f"pool {new.name!r} already exists")
            return [Put(config.id, new.to_json())]

        self.journal.commit(updates, [AssertEquals(config.id, config.to_json())])
        return new

    def rename(self, old: str, new: str) -> PoolConfig:
        """The pool under its new name; renaming it to the name it has changes nothing
        and writes nothing (as ``git branch -m b b`` succeeds doing nothing)."""
        config = self.find(old)
        if config.name == new:
            return config
        return self.update(config, name=new)

    def drop(self, name: str) -> PoolConfig:
        """Unregister the pool, then delete its objects."""
        config = self.find(name)
        self.journal.commit([Remove(config.id)])
        for info in self.storage.walk(config.id):
            self.storage.delete(info.path)
        return config
