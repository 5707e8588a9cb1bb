"""Point lookups through ``limno serve``, of any number of keys.

A lookup's keys go in the JSON body of ``POST /v1/pools/{id}/get``, which the server
takes up to :data:`limno.server.guard.KEYS_BODY` (64 MB: millions of keys), far over
the 1 MB cap of other JSON bodies. A longer list is sent in several requests of at
most :data:`BATCH` bytes of keys each, all pinned to the one commit the ref named
when the lookup began (a commit landing meanwhile changes none of them); their rows
are put back in key order, as one request's are (rows of one key keep the order the
server gave them). The pool's iterators then see each request's rows on their own.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from limno.api import wire
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.api.remote_http import Connection
    from limno.pools.registry import PoolConfig
else:
    pa = lazy_module("pyarrow")

__all__ = ["BATCH", "get"]

#: most bytes of keys (as JSON) one request carries: half the server's cap, for the rest
BATCH = 32 << 20
#: lists up to this many keys go in one request without measuring them (the usual case)
_UNMEASURED = 1000


def get(
    http: Connection,
    path: str,
    config: PoolConfig,
    keys: Sequence[Any],
    ref: str | None,
    as_of: dt.datetime | None,
) -> pa.Table:
    """The rows of ``keys`` (``POST path``), in key order."""
    from limno.data.keys import lookup_keys

    encoded = [wire.value_to_json(k) for k in lookup_keys(keys)]
    batches = _batches(encoded)
    when = wire.time_to_json(as_of)
    if len(batches) == 1:
        return http.table("POST", path, body={"keys": encoded, "ref": ref, "as_of": when})
    resolved = http.call("GET", path.rsplit("/", 1)[0] + "/resolve", {"ref": ref, "as_of": when})
    commit = str(resolved["commit"])
    tables = [http.table("POST", path, body={"keys": b, "ref": commit}) for b in batches]
    found = [t for t in tables if t.num_rows]
    if not found:
        return tables[0]
    from limno.data.keys import PoolKey
    from limno.data.sort import sort_order, take_sorted

    merged = pa.concat_tables(found, promote_options="default")
    assert config.key is not None  # a record pool's
    return take_sorted(merged, sort_order(merged, PoolKey.parse(config.key), runs=True))


def _batches(encoded: list[Any]) -> list[list[Any]]:
    """``encoded`` cut into runs of at most :data:`BATCH` bytes of JSON each (one run
    when it fits, or when it is short enough not to be measured)."""
    if len(encoded) <= _UNMEASURED or len(json.dumps(encoded)) <= BATCH:
        return [encoded]
    out: list[list[Any]] = [[]]
    size = 0
    for k in encoded:
        n = len(json.dumps(k)) + 2  # the separator
        if size + n > BATCH and out[-1]:
            out.append([])
            size = 0
        out[-1].append(k)
        size += n
    return out
