"""The JSON text form of Python values: what a text column holds for a value that is
not text.

The widening rule of :mod:`limno.data.schema` stores a value whose type meets another
it cannot widen to as text: scalars as Arrow renders them, and structs, lists, maps
and unions as compact JSON, whose text this module makes. Inside it, bytes are
base64, decimals and UUIDs strings (exact), temporal values ISO 8601 strings, and map
keys JSON cannot hold their text. It is plain Python (no Arrow) and one place for
both sides of the rule: Arrow arrays rendered as text (:func:`limno.data.schema.conform`)
and records that arrive as Python values (:func:`limno.data.schema.coerce`).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["json_text", "text_of"]


def text_of(value: Any) -> str:
    """A value stored in a text column: text as it is, anything else as JSON text
    (dates, decimals and UUIDs without the JSON quotes)."""
    if isinstance(value, str):
        return value
    text = json_text(value)
    return str(json.loads(text)) if text.startswith('"') else text


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, dt.date | dt.time):  # datetime is a date
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return str(v)
    if isinstance(v, decimal.Decimal | uuid.UUID):
        return str(v)
    if isinstance(v, tuple):
        return list(v)
    raise TypeError(f"cannot render {type(v).__name__} as JSON")


_dumps: Callable[[Any], str] = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=_jsonable
).encode


def json_text(value: Any) -> str:
    """The compact JSON text of a Python value; non-JSON scalars become strings."""
    try:
        return _dumps(value)
    except TypeError:  # a map key JSON cannot hold (bytes, dates, ...)
        return _dumps(_string_keys(value))


def _string_keys(v: Any) -> Any:
    if isinstance(v, dict):
        return {
            k if isinstance(k, str) else str(_jsonable(k) if isinstance(k, bytes) else k): (
                _string_keys(x)
            )
            for k, x in v.items()
        }
    if isinstance(v, list | tuple):
        return [_string_keys(x) for x in v]
    return v
