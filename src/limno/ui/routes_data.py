"""A record pool's data: a preview of a ref a page at a time (by key range), and its
unified schema with the types each field was widened from."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import Response

from limno.errors import InvalidInputError
from limno.ui.pages import Signed, Viewer, lake_of, page_router, render_pool

if TYPE_CHECKING:
    from limno.api.base import Pool

router = page_router()

#: rows a preview page shows
PAGE = 50


def _bound(text: str | None) -> list[Any] | None:
    """A page's from-bound: a JSON list of key values (the first row of the page), as
    :func:`_key_of` writes it."""
    if not text:
        return None
    try:
        values = json.loads(text)
        if not isinstance(values, list) or not values:
            raise ValueError("not a list")
        return [_decoded(v) for v in values]
    except (ValueError, TypeError, KeyError, ArithmeticError):  # decimal.InvalidOperation
        raise InvalidInputError(
            f"start: not a list of key values as the next-page link gives: {text[:80]!r}"
        ) from None


#: key values JSON cannot hold, as ``{"<type>": text}`` objects
_TYPED: dict[str, Callable[[str], Any]] = {
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "decimal": decimal.Decimal,
    "bytes": bytes.fromhex,
}


def _encoded(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    for name, kind in (("datetime", dt.datetime), ("date", dt.date), ("time", dt.time)):
        if isinstance(value, kind):  # a datetime is a date too: tried first
            return {name: value.isoformat()}
    return value


def _decoded(value: Any) -> Any:
    if isinstance(value, dict):
        ((name, text),) = value.items()
        return _TYPED[name](text)
    return value


def _key_of(row: dict[str, Any], fields: list[str]) -> str:
    """The from-bound of the page starting at ``row``: its key values as a JSON list
    (times, decimals and bytes as ``{"datetime": "2026-..."}`` and the like, read back
    in their own types)."""
    return json.dumps([_encoded(row[f]) for f in fields], separators=(",", ":"))


def record_pool(request: Request, viewer: Viewer, pool: str) -> Pool:
    """Record pool ``pool`` once the viewer may read it (a file pool: a 400 page)."""
    found = lake_of(request).pool(pool)
    viewer.need_pool("read", found.id, found.name, pool)
    return found


def key_fields(key: str | None) -> list[str]:
    return [f.strip() for f in (key or "").split(",") if f.strip()]


@router.get("/pools/{pool}/data")
def data_page(
    request: Request, pool: str, viewer: Signed, ref: str = "main", start: str | None = None
) -> Response:
    found = record_pool(request, viewer, pool)
    fields = key_fields(found.config.key)
    # one more row than shown: the first row of the next page is its from-bound
    table = found.scan(ref, start=_bound(start), limit=PAGE + 1)
    rows = table.slice(0, PAGE)
    after = _key_of(table.slice(PAGE, 1).to_pylist()[0], fields) if table.num_rows > PAGE else None
    return render_pool(
        request,
        "data.html",
        found,
        "data",
        f"{found.name} data",
        ref=ref,
        table=rows,
        key_columns=fields,
        start=start,
        after=after,
        branches=sorted(found.branches()),
    )


@router.get("/pools/{pool}/schema")
def schema_page(request: Request, pool: str, viewer: Signed, ref: str = "main") -> Response:
    from limno.data.objects import schema_from_b64
    from limno.data.schema import unify

    found = record_pool(request, viewer, pool)
    # objects share few schemas: each distinct one is decoded once
    seen = {o.schema_b64 for o in found.objects(ref) if o.schema_b64}
    schemas = [schema_from_b64(text) for text in sorted(seen)]
    unified = unify(schemas)
    fields = []
    for field in unified:
        types = sorted({str(s.field(field.name).type) for s in schemas if field.name in s.names})
        fields.append(
            {
                "name": field.name,
                "type": str(field.type),
                "from": [t for t in types if t != str(field.type)],
                "in": sum(1 for s in schemas if field.name in s.names),
            }
        )
    return render_pool(
        request,
        "schema.html",
        found,
        "schema",
        f"{found.name} schema",
        ref=ref,
        fields=fields,
        schemas=len(schemas),
        key_columns=key_fields(found.config.key),
    )
