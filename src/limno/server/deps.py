"""What every route shares: the lake of the app, a pool by name, streamed results.

Routes are plain ``def`` functions: FastAPI runs them in its thread pool, so the
lake's blocking calls never hold up the event loop, and a streamed result is
produced in the pool too (Starlette iterates a plain iterator there).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

from fastapi import Request
from fastapi.responses import StreamingResponse

from limno.api.base_files import not_files, not_records
from limno.server.ahead import read_ahead
from limno.server.direct import DirectStream
from limno.server.formats import Chunk, check_json, choose, encode

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.api.local import LocalLake
    from limno.api.local_files import LocalFilePool
    from limno.api.local_pool import LocalPool

__all__ = [
    "file_pool_of",
    "json_only",
    "lake_of",
    "pool_of",
    "stream_tables",
    "versioned_of",
]

log = logging.getLogger("limno.server")


def lake_of(request: Request) -> LocalLake:
    """The lake the server serves (opened once, at start: all state is in the lake)."""
    lake: LocalLake = request.app.state.lake
    return lake


def pool_of(request: Request, pool: str) -> LocalPool:
    """Record pool ``pool`` (a name or an id), its configuration read afresh from the
    lake: another server (or a process next to the lake) may have renamed or dropped it
    since the last request. A file pool is refused (400, in the lake's words)."""
    opened = versioned_of(request, pool)
    if opened.config.kind == "files":
        raise not_records(opened.config)
    return cast("LocalPool", opened)  # a records config opens a LocalPool


def file_pool_of(request: Request, pool: str) -> LocalFilePool:
    """File pool ``pool``, read afresh as :func:`pool_of` reads a record pool."""
    opened = versioned_of(request, pool)
    if opened.config.kind != "files":
        raise not_files(opened.config)
    return cast("LocalFilePool", opened)  # a files config opens a LocalFilePool


def versioned_of(request: Request, pool: str) -> LocalPool | LocalFilePool:
    """Pool ``pool`` of either kind: what the git routes (refs, log, merge, diff,
    revert, hooks, vacuum...) work on.

    Its configuration is read from the lake on every request (one probe of the pool
    list's journal), but the pool object is kept across requests while that
    configuration stays the same: its journals remember what they have read (a new
    pool object reads its branch journal from the start or its last snapshot, up to a
    hundred entries, on every load), as a pool a program keeps open does. Everything
    it remembers is checked against the lake before use (a journal probes for entries
    after the last one it read), so an object kept here sees other writers' commits;
    a renamed or reconfigured pool gets a new object, a dropped one is not found."""
    lake = lake_of(request)
    config = lake.registry.find(pool)
    kept: dict[str, LocalPool | LocalFilePool] | None = getattr(request.app.state, "pools", None)
    if kept is None:
        kept = request.app.state.pools = {}
    opened = kept.get(config.id)
    if opened is None or (opened.config is not config and opened.config != config):
        opened = lake._opened(config)  # the lake's own choice of class by kind
        if len(kept) >= _KEPT:
            kept.clear()
        kept[config.id] = opened
    return opened


#: pool objects a server process keeps at most (then it starts over)
_KEPT = 1_000


def json_only(request: Request) -> None:
    """A dependency of every route: 406 (NotAcceptableError) for a route whose answer
    FastAPI writes as JSON (it has a response model) when the ``Accept`` header takes no
    JSON. Routes that answer with a Response of their own (tables in the format asked
    for, a file's bytes, an event stream) choose their type themselves."""
    route = request.scope.get("route")
    if getattr(route, "response_model", None) is not None:
        check_json(request.headers.get("accept"))


def stream_tables(
    request: Request, tables: Iterable[pa.Table], empty: pa.Schema | None = None
) -> StreamingResponse:
    """A streamed result in the format of the request's ``Accept`` header.

    The first table is read before the answer starts, so that an error of the
    operation itself (a missing ref, a bad bound) is still a problem response; an
    error after that can only cut the stream short, which a client sees as an
    incomplete body (and the server's log says why).
    """
    media = choose(request.headers.get("accept"))
    it = iter(tables)
    first = next(it, None)
    head = [] if first is None else [first]
    body = _logged(encode(itertools.chain(head, it), media, empty), request.url.path)
    return DirectStream(read_ahead(body, it), media_type=media)


def _logged(chunks: Iterator[Chunk], path: str) -> Iterator[Chunk]:
    try:
        yield from chunks
    except Exception:
        log.exception("result stream of %s failed midway", path)
        raise


def ok() -> dict[str, Any]:
    """The body of an operation that returns nothing."""
    return {"ok": True}
