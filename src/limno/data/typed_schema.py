"""Optional typed schemas (Sleeper style): row keys, sort keys and value fields.

A pool needs no schema, but one may be declared at creation from a JSON file::

    {"row_keys": [{"name": "id", "type": "int64"}],
     "sort_keys": [{"name": "ts", "type": "timestamp"}],
     "values": [{"name": "amount", "type": "float64"}]}

Its pool key is the row keys followed by the sort keys. A load must then carry
exactly the declared fields, each castable to its declared type without loss, and
no null row key; otherwise it is rejected with an error naming the input and row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.errors import InvalidInputError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")

__all__ = ["SchemaField", "TypedSchema"]

_ALIASES = {
    "int": "int64",
    "long": "int64",
    "integer": "int64",
    "float": "float64",
    "double": "float64",
    "str": "string",
    "text": "string",
    "boolean": "bool",
    "timestamp": "timestamp[us]",
    "bytes": "binary",
}


def parse_type(name: str) -> pa.DataType:
    alias = _ALIASES.get(name.lower(), name.lower())
    try:
        return pa.type_for_alias(alias)
    except ValueError as e:
        raise InvalidInputError(f"unknown schema type {name!r}") from e


@dataclass(frozen=True)
class SchemaField:
    name: str
    type: str

    @property
    def arrow_type(self) -> pa.DataType:
        return parse_type(self.type)


@dataclass(frozen=True)
class TypedSchema:
    row_keys: tuple[SchemaField, ...]
    sort_keys: tuple[SchemaField, ...] = ()
    values: tuple[SchemaField, ...] = ()

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TypedSchema:
        def fields(kind: str) -> tuple[SchemaField, ...]:
            raw = d.get(kind, [])
            if not isinstance(raw, list):
                raise InvalidInputError(f"schema: {kind!r} must be a list")
            out = []
            for f in raw:
                if not isinstance(f, dict) or "name" not in f or "type" not in f:
                    raise InvalidInputError(f"schema: each {kind} entry needs a name and a type")
                parse_type(str(f["type"]))
                out.append(SchemaField(str(f["name"]), str(f["type"])))
            return tuple(out)

        unknown = set(d) - {"row_keys", "sort_keys", "values"}
        if unknown:
            raise InvalidInputError(f"schema: unknown section(s) {', '.join(sorted(unknown))}")
        schema = cls(fields("row_keys"), fields("sort_keys"), fields("values"))
        if not schema.row_keys:
            raise InvalidInputError("schema: at least one row key is required")
        names = [f.name for f in schema.fields]
        if len(set(names)) != len(names):
            raise InvalidInputError("schema: a field is declared twice")
        return schema

    @classmethod
    def from_file(cls, path: str) -> TypedSchema:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except OSError as e:
            raise InvalidInputError(f"{path}: cannot read schema ({e.strerror})") from e
        except ValueError as e:
            raise InvalidInputError(f"{path}: schema is not valid JSON ({e})") from e
        if not isinstance(doc, dict):
            raise InvalidInputError(f"{path}: schema must be a JSON object")
        return cls.from_json(doc)

    def to_json(self) -> dict[str, Any]:
        def dump(fs: Sequence[SchemaField]) -> list[dict[str, str]]:
            return [{"name": f.name, "type": f.type} for f in fs]

        return {
            "row_keys": dump(self.row_keys),
            "sort_keys": dump(self.sort_keys),
            "values": dump(self.values),
        }

    @property
    def fields(self) -> tuple[SchemaField, ...]:
        return self.row_keys + self.sort_keys + self.values

    @property
    def key(self) -> str:
        return ",".join(f.name for f in self.row_keys + self.sort_keys)

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([(f.name, f.arrow_type) for f in self.fields])

    def check(self, batch: pa.RecordBatch, source: str, row_offset: int = 0) -> pa.RecordBatch:
        """``batch`` cast to the schema, or InvalidInputError naming source and row."""
        names = set(batch.schema.names)
        declared = [f.name for f in self.fields]
        extra = sorted(names - set(declared))
        if extra:
            raise InvalidInputError(
                f"{source}: field(s) not in the pool schema: {', '.join(extra)}"
            )
        missing = [n for n in declared if n not in names]
        if missing:
            raise InvalidInputError(
                f"{source}: missing field(s) required by the pool schema: {', '.join(missing)}"
            )
        arrays = []
        for f in self.fields:
            col = batch.column(f.name)
            try:
                arrays.append(col.cast(f.arrow_type, safe=True))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                row = _first_bad_row(col, f.arrow_type)
                where = f"row {row_offset + row + 1}" if row is not None else "a row"
                raise InvalidInputError(
                    f"{source}: {where}: field {f.name!r} is not a valid {f.type}"
                    f" ({str(e).splitlines()[0]})"
                ) from e
        for f in self.row_keys:
            col = batch.column(f.name)
            if col.null_count:
                row = pc.index(pc.is_null(col), True).as_py()
                raise InvalidInputError(
                    f"{source}: row {row_offset + row + 1}: row key {f.name!r} is null"
                )
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema())


def _first_bad_row(col: pa.Array, typ: pa.DataType) -> int | None:
    for i in range(len(col)):
        try:
            col.slice(i, 1).cast(typ, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return i
    return None
