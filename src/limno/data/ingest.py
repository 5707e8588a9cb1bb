"""What a load reads, checked: input batches, and key types that must sort together.

Every source of a load (a file in any format, or Arrow data from Python) becomes
record batches that passed the input checks (:mod:`.input_checks`: UTF-8, nesting,
Arrow validation), in their stored form (:mod:`.plain_types`), and checked against
the pool's typed schema if it has one. A load's keys must
sort with the pool's: a key field's values must be of one family in every object.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TypeAlias

import pyarrow as pa

from limno.data.input_checks import check_arrow, check_schema, without_empty_structs
from limno.data.keys import PoolKey, key_family
from limno.data.objects import DataObject
from limno.data.plain_types import plain_batch
from limno.data.readers import read_records
from limno.data.typed_schema import TypedSchema
from limno.errors import InvalidInputError

__all__ = ["Source", "check_key_types", "checked_batches", "key_types_of"]

#: what a load reads: a file path (``-``: stdin), or Arrow data
Source: TypeAlias = "str | pa.Table | pa.RecordBatch"


def checked_batches(
    sources: Iterable[Source],
    fmt: str | None,
    key: PoolKey,
    schema: TypedSchema | None = None,
    origins: dict[tuple[int, str], str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Every source's batches, checked. ``origins`` collects, per key field index and
    key family, the first source that brought it (see :func:`check_key_types`)."""

    for src in sources:
        arrow = isinstance(src, pa.Table | pa.RecordBatch)
        if isinstance(src, pa.Table | pa.RecordBatch):
            name = "<table>" if isinstance(src, pa.Table) else "<batch>"
            check_schema(name, src.schema)  # Arrow data may be anything: check first
            batches: Iterable[pa.RecordBatch] = (
                src.to_batches() if isinstance(src, pa.Table) else [src]
            )
        else:
            # a Parquet input's small text dictionaries stay dictionaries up to the
            # encoder (:mod:`.parquet_input`), unless a typed schema checks the values
            batches, name = read_records(src, fmt, dictionaries=schema is None), src
        rows, seen = 0, None
        for batch in batches:
            if arrow:
                check_arrow(name, batch, rows)
                batch = plain_batch(without_empty_structs(batch))
            elif _dictionary_key(batch.schema, key):  # keys are compared value by value
                batch = plain_batch(batch)
            if schema is not None:
                batch = schema.check(batch, name, rows)
            if origins is not None and (seen is None or not batch.schema.equals(seen)):
                seen = batch.schema
                for i, typ in enumerate(key_types_of(seen, key)):
                    family = key_family(str(typ)) if typ is not None else None
                    if family is not None:
                        origins.setdefault((i, family), name)
            rows += batch.num_rows
            yield batch
        if rows == 0:
            raise InvalidInputError(f"{name}: no records")


def _dictionary_key(schema: pa.Schema, key: PoolKey) -> bool:
    """Whether a key field lies in a dictionary column of ``schema``."""
    names = {field.path[0] for field in key.fields}
    return any(pa.types.is_dictionary(schema.field(n).type) for n in names if n in schema.names)


def check_key_types(
    key: PoolKey,
    old: Sequence[DataObject],
    new: Sequence[DataObject],
    origins: Mapping[tuple[int, str], str] | None = None,
) -> None:
    """Refuse keys that cannot sort with the pool's: a key field's values must be of
    one family (numbers, text, binary, dates and timestamps, ...) in every object.

    ``origins`` (from :func:`checked_batches`) names the input that brought a key family
    into ``new``; the error starts with it, so it says which input to fix."""

    origins = origins or {}
    for i, name in enumerate(key.names):
        seen: dict[str, tuple[str, str | None]] = {}  # family -> (type, input or None)
        for loaded, objs in ((False, old), (True, new)):
            for o in objs:
                if i >= len(o.key_types):
                    continue
                family = key_family(o.key_types[i])
                if family is not None:
                    source = origins.get((i, family), "") if loaded else None
                    seen.setdefault(family, (o.key_types[i], source))
        if len(seen) > 1:
            (a, (ta, sa)), (b, (tb, sb)) = list(seen.items())[:2]
            where = "the pool's objects" if sa is None else sa or "this load"
            raise InvalidInputError(
                f"{sb + ': ' if sb else ''}key field {name!r} is {tb} in this load but"
                f" {ta} in {where}: {b} and {a} keys have no common order"
            )


def key_types_of(schema: pa.Schema, key: PoolKey) -> list[pa.DataType | None]:
    """The type of each key field in ``schema`` (None where it lacks the field)."""
    out: list[pa.DataType | None] = []
    for field in key.fields:
        typ: pa.DataType | None = None
        if schema.get_field_index(field.path[0]) >= 0:
            typ = schema.field(field.path[0]).type
            for part in field.path[1:]:
                inner = typ.get_field_index(part) if pa.types.is_struct(typ) else -1
                typ = typ.field(inner).type if inner >= 0 else None
                if typ is None:
                    break
        out.append(typ)
    return out
