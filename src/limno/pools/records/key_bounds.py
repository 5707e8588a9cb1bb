"""A snapshot's key types, and the scan bounds a user gives read in them.

Bounds come as key tuples (or lists), single values or text (``--from``/``--to``, ``split
--at``); text only means something in the types the key fields have across the
objects read, so those are unified here first (nested key fields looked up in
their struct columns; a field no object holds reads as text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from limno.data.keys import PoolKey
from limno.data.objects import DataObject, distinct_schemas
from limno.errors import InvalidInputError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.data import schema as unification
else:
    pa = lazy_module("pyarrow")
    unification = lazy_module("limno.data.schema")

__all__ = ["key_bound", "unified_key_types"]


def unified_key_types(key: PoolKey, objs: Sequence[DataObject]) -> list[pa.DataType]:
    """The unified Arrow type of each field of ``key`` over ``objs`` (string when none)."""
    out: list[pa.DataType] = []
    schemas = distinct_schemas(objs)  # each decoded once: objects share a few
    for i, name in enumerate(key.names):
        top = name.split(".")[0]
        found = [s.field(top) for s in schemas if top in s.names]
        typ: pa.DataType = pa.string()
        if found:
            typ = _nested_type(unification.unify(pa.schema([f]) for f in found), key.fields[i].path)
        out.append(typ)
    return out


def key_bound(
    key: PoolKey, value: Any, types: Sequence[pa.DataType], what: str = "bound"
) -> tuple[Any, ...] | None:
    """A scan bound (or a key: ``what``) as a key tuple: a tuple or a list holds values
    of the key's first fields, one each (a full key, or a prefix of one), text is
    parsed into ``types``, any other value is the first key field's; None (no bound)
    stays None. A tuple or list of no value, or of more values than the key has
    fields, is an InvalidInputError (a list once read as a single value, which no
    key holds, so such a bound silently matched nothing)."""
    if value is None:
        return None
    if isinstance(value, tuple | list):
        n = len(key.fields)
        if not value or len(value) > n:
            want = "1 value" if n == 1 else f"1 to {n} values"
            raise InvalidInputError(f"{what} {value!r}: expected {want} for key {key}")
        return tuple(value)
    if isinstance(value, str):
        return key.parse_bound(value, types)
    return (value,)


def _nested_type(schema: pa.Schema, path: Sequence[str]) -> pa.DataType:
    typ: pa.DataType = schema.field(path[0]).type
    for part in path[1:]:
        if not pa.types.is_struct(typ) or typ.get_field_index(part) < 0:
            return pa.string()
        typ = typ.field(part).type
    return typ
