"""Data objects: immutable sorted Parquet files and the metadata recorded for each.

The metadata lives in commits and snapshots (never in the object itself) so that
planning a scan or a lookup (which objects can hold this key range?) reads no data.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from limno.pools.records.keys import PoolKey, SortKey, decode_key, encode_key

__all__ = ["DataObject", "data_path", "schema_from_b64", "schema_to_b64"]


def data_path(pool_id: str, object_id: str) -> str:
    """Where an object's bytes live, relative to the lake root."""
    return f"{pool_id}/data/{object_id}.parquet"


def schema_to_b64(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def schema_from_b64(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


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

    @property
    def schema(self) -> pa.Schema:
        return schema_from_b64(self.schema_b64)

    def overlaps(
        self,
        key: PoolKey,
        lo: SortKey | None,
        hi: SortKey | None,
    ) -> bool:
        """Whether keyed rows in ``[lo, hi)`` can be in this object."""
        if self.min_key is None or self.max_key is None:
            return False
        if hi is not None and not key.sort_key(self.min_key) < hi:
            return False
        return not (lo is not None and key.sort_key(self.max_key) < lo)

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
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DataObject:
        return cls(
            id=d["id"],
            rows=int(d["rows"]),
            size=int(d["size"]),
            min_key=decode_key(d.get("min_key")),
            max_key=decode_key(d.get("max_key")),
            keyless=int(d.get("keyless", 0)),
            schema_b64=d.get("schema", ""),
            key_types=tuple(d.get("key_types", ())),
            created=d.get("created", ""),
            extra=dict(d.get("extra", {})),
            replaces=tuple(d.get("replaces", ())),
        )
