"""Data objects: immutable sorted Parquet files and the metadata recorded for each.

The metadata lives in commits and snapshots (never in the object itself) so that
planning a scan or a lookup (which objects can hold this key range?) reads no data.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from limno.data.keys import PoolKey, SortKey, decode_key, encode_key
from limno.errors import CorruptError, LimnoError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")

__all__ = [
    "DataObject",
    "data_path",
    "distinct_schemas",
    "lineage",
    "schema_from_b64",
    "schema_to_b64",
]

#: how many ancestors an object's ``replaces`` lineage keeps (newest first)
MAX_LINEAGE = 64


def data_path(pool_id: str, object_id: str) -> str:
    """Where an object's bytes live, relative to the lake root."""
    return f"{pool_id}/data/{object_id}.parquet"


def schema_to_b64(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


#: distinct encoded schemas whose decoded form is kept (objects of a pool share a few)
SCHEMAS_KEPT = 256


@functools.lru_cache(maxsize=SCHEMAS_KEPT)
def schema_from_b64(text: str) -> pa.Schema:
    """The schema ``text`` encodes, decoded once per process: a pool's objects share a
    few schemas, and planning reads every object's (a schema is immutable: shared)."""
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def distinct_schemas(objs: Sequence[DataObject]) -> list[pa.Schema]:
    """The schemas of ``objs`` (those that record one), each once, first-seen order:
    what unifying them needs (a repeated schema adds nothing to a union)."""
    firsts: dict[str, DataObject] = {}
    for o in objs:
        if o.schema_b64:
            firsts.setdefault(o.schema_b64, o)
    return [o.schema for o in firsts.values()]


@dataclass(frozen=True)
class DataObject:
    """What limno knows about one data object without opening it.

    ``min_key``/``max_key`` are the first and last *keyed* rows in sort order (None
    when every row is keyless); ``keyless`` counts rows without the key, which sit
    at the end of the object.
    """

    id: str
    rows: int
    size: int
    min_key: tuple[Any, ...] | None
    max_key: tuple[Any, ...] | None
    keyless: int = 0
    schema_b64: str = ""
    key_types: tuple[str, ...] = ()
    created: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: ids of the objects this one was rewritten from (merge conflict detection)
    replaces: tuple[str, ...] = ()
    #: partitions referencing this object (empty: the root); see partitions.py
    partitions: tuple[str, ...] = ()
    #: when only part of the object is still referenced: the ``[lo, hi)`` key-prefix
    #: range to read (not stored; set by the reader from the partition tree)
    clip: tuple[tuple[Any, ...] | None, tuple[Any, ...] | None] | None = field(
        default=None, compare=False
    )

    @property
    def schema(self) -> pa.Schema:
        try:
            return schema_from_b64(self.schema_b64)
        except (ValueError, pa.ArrowException) as e:  # binascii.Error is a ValueError
            raise CorruptError(f"data object {self.id}: unreadable schema ({e})") from e

    def overlaps(
        self,
        key: PoolKey,
        lo: SortKey | None,
        hi: SortKey | None,
    ) -> bool:
        """Whether keyed rows in ``[lo, hi)`` can be in this object."""
        first, last = self.first_key(key), self.last_key(key)
        if first is None or last is None:
            return False
        if hi is not None and not first < hi:
            return False
        return not (lo is not None and last < lo)

    def first_key(self, key: PoolKey) -> SortKey | None:
        """A lower bound of the keys to read (the min key, raised to the clip)."""
        if self.min_key is None:
            return None
        first = key.sort_key(self.min_key)
        if self.clip is not None and self.clip[0] is not None:
            lo = key.sort_key(self.clip[0])
            return lo if first < lo else first
        return first

    def last_key(self, key: PoolKey) -> SortKey | None:
        """An upper bound of the keys to read (the max key, or the clip's end)."""
        if self.max_key is None:
            return None
        last = key.sort_key(self.max_key)
        if self.clip is not None and self.clip[1] is not None:
            hi = key.sort_key(self.clip[1])
            return hi if hi < last else last
        return last

    @property
    def keyless_here(self) -> int:
        """Keyless rows to read: all of them unless clipped away from the key space's end."""
        return self.keyless if self.clip is None or self.clip[1] is None else 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "rows": self.rows,
            "size": self.size,
            "min_key": encode_key(self.min_key),
            "max_key": encode_key(self.max_key),
            "keyless": self.keyless,
            "schema": self.schema_b64,
            "key_types": list(self.key_types),
            "created": self.created,
        }
        if self.extra:
            out["extra"] = dict(self.extra)
        if self.replaces:
            out["replaces"] = list(self.replaces)
        if self.partitions:
            out["partitions"] = list(self.partitions)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any], path: str = "") -> DataObject:
        """Decode an entry written by :meth:`to_json`; CorruptError naming ``path`` (where
        the entry is stored, else the object id) when it is not one."""
        try:
            return cls(
                id=_typed(d["id"], str),
                rows=_typed(d["rows"], int),
                size=_typed(d["size"], int),
                min_key=_key(d.get("min_key")),
                max_key=_key(d.get("max_key")),
                keyless=_typed(d.get("keyless", 0), int),
                schema_b64=_typed(d.get("schema", ""), str),
                key_types=_texts(d.get("key_types", ())),
                created=_typed(d.get("created", ""), str),
                extra=dict(_typed(d.get("extra", {}), Mapping)),
                replaces=_texts(d.get("replaces", ())),
                partitions=_texts(d.get("partitions", ())),
            )
        except (LookupError, TypeError, ValueError, ArithmeticError, LimnoError) as e:
            oid = d.get("id") if isinstance(d, Mapping) else None
            where = path or f"data object {oid!r:.40}"
            raise CorruptError(f"{where}: unreadable data object entry ({e!s:.200})") from e


def _typed(value: Any, kind: type) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"expected {kind.__name__}, found {value!r:.40}")
    return value


def _texts(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"expected a list of text, found {value!r:.40}")
    return tuple(value)


def _key(value: Any) -> tuple[Any, ...] | None:
    """A stored min or max key: None, or a list of encoded values (keys.encode_value)."""
    scalars = str | int | float | dict | None  # a dict: a value of another type, encoded
    if value is not None and (
        not isinstance(value, list | tuple) or not all(isinstance(v, scalars) for v in value)
    ):
        raise TypeError(f"expected a key, found {value!r:.40}")
    return decode_key(value)


def lineage(rewritten: Sequence[DataObject]) -> tuple[str, ...]:
    """``replaces`` for an object rewritten from ``rewritten``: their ids and, transitively,
    what they replaced (so a merge base that predates a chain of rewrites still sees
    the chain), capped at ``MAX_LINEAGE`` ids."""
    out = dict.fromkeys(o.id for o in rewritten)
    for o in rewritten:
        out.update(dict.fromkeys(o.replaces))
    return tuple(out)[:MAX_LINEAGE]
