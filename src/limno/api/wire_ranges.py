"""The JSON form of a scan's several key ranges, shared by the server and its client.

A scan's ``ranges`` cross the wire as one query parameter: a JSON list of
``[from, to]`` pairs, each bound in the form of :func:`limno.api.wire.value_to_json`
(``null`` for an open side; a plain string is text the server reads in the key's
types, as it reads ``start`` and ``end``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from limno.api import wire
from limno.errors import InvalidInputError

__all__ = ["ranges_from_json", "ranges_to_json"]


def ranges_to_json(ranges: Iterable[tuple[Any, Any]] | None) -> str | None:
    """The query parameter for ``ranges`` (None: no ranges, a plain scan)."""
    if ranges is None:
        return None
    from limno.pools.records.key_ranges import checked_ranges

    pairs = [[wire.value_to_json(a), wire.value_to_json(b)] for a, b in checked_ranges(ranges)]
    return json.dumps(pairs)


def ranges_from_json(text: str | None) -> list[tuple[Any, Any]] | None:
    """Inverse of :func:`ranges_to_json`; InvalidInputError for anything else."""
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        raise InvalidInputError("ranges: not JSON (a list of [from, to] pairs)") from None
    if not isinstance(doc, list):
        raise InvalidInputError("ranges: expected a list of [from, to] pairs")
    out = []
    for pair in doc:
        if not isinstance(pair, list) or len(pair) != 2:
            raise InvalidInputError(f"ranges: each range is a [from, to] pair, not {pair!r:.80}")
        out.append((wire.value_from_json(pair[0]), wire.value_from_json(pair[1])))
    return out
