"""Search indexes over HTTP: the part of :class:`~limno.api.remote.RemotePool` that calls
``/v1/pools/{pool}/indexes`` and ``/v1/pools/{pool}/search``.

Creating and dropping an index are commits (write on the pool); listing indexes and
looking records up by an indexed field read (see :mod:`limno.server.authorization`).
Field names travel in JSON bodies, values in the wire form of
:func:`limno.api.wire.value_to_json` (text stays text: the server reads it in the
field's type, as a lake opened directly does).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from limno.api import wire

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.api.remote_http import Connection
    from limno.core.commits import Commit
    from limno.data.indexes import IndexSpec

__all__ = ["RemoteIndexes"]


class RemoteIndexes:
    """Mixin of :class:`~limno.api.remote.RemotePool`: create_index, drop_index,
    indexes, search."""

    #: set by RemotePool: the server connection and the pool's path (``/v1/pools/<id>``)
    _http: Connection
    _path: str

    def _call(self, method: str, op: str, params: Any = None, body: Any = None) -> Any:
        raise NotImplementedError  # RemotePool's: one request to the pool's routes

    def create_index(
        self,
        fields: Sequence[str],
        branch: str = "main",
        message: str = "",
        author: str | None = None,
    ) -> Commit:
        body = {"fields": _list(fields), "branch": branch, "message": message, "author": author}
        return wire.commit_from_json(self._call("POST", "indexes", body=body))

    def drop_index(
        self,
        fields: Sequence[str],
        branch: str = "main",
        message: str = "",
        author: str | None = None,
    ) -> Commit:
        body = {"fields": _list(fields), "branch": branch, "message": message, "author": author}
        return wire.commit_from_json(self._call("POST", "indexes/drop", body=body))

    def indexes(self, ref: str | None = None) -> list[IndexSpec]:
        from limno.data.indexes import IndexSpec  # the data layer: not for 'limno ls'

        return [IndexSpec.from_json(d) for d in self._call("GET", "indexes", {"ref": ref})]

    def search(
        self,
        field: str,
        values: Sequence[Any],
        ref: str | None = None,
        *,
        as_of: dt.datetime | None = None,
    ) -> pa.Table:
        body = {
            "field": field,
            "values": [wire.value_to_json(v) for v in _list(values)],
            "ref": ref,
            "as_of": wire.time_to_json(as_of),
        }
        return self._http.table("POST", f"{self._path}/search", body=body)


def _list(items: Sequence[Any]) -> list[Any]:
    """``items`` as a list; one text (or bytes) value is one item, not its characters."""
    return [items] if isinstance(items, str | bytes) else list(items)
