"""The pools page: every pool the viewer may read, with its size and last commit;
create, rename and drop (writers; a drop asks for the pool's name first)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import Request
from fastapi.responses import Response

from limno.api.base import Pool
from limno.api.base_files import FilePool
from limno.errors import InvalidInputError, LimnoError
from limno.ui.pages import Posted, Signed, lake_of, page_router, redirect, render
from limno.ui.routes_pool import opened

if TYPE_CHECKING:
    from limno.api.base import Lake
    from limno.api.base_versioned import VersionedPool
    from limno.core.commits import Commit
    from limno.pools.registry import PoolConfig

router = page_router()

#: a pool's size and rows are summed over its objects up to this many objects; a
#: larger pool shows the count its snapshot's metarange holds (one read), no sums
SUMMED = 10_000


@dataclass
class PoolRow:
    """One pool as the list shows it (``None``: not known cheaply)."""

    config: PoolConfig
    size: int | None
    objects: int | None
    rows: int | None
    last: Commit | None


def _counted(pool: VersionedPool, snapshot: str) -> int | None:
    """The entries of a snapshot as its metarange counts them (no range is read):
    data objects or paths, without a record pool's partitions and indexes (``~``
    keys, stored last). None for a pool not opened in this process."""
    versioned = getattr(pool, "versioned", None)
    if versioned is None:
        return None
    ranges = versioned.snapshots.ranges(snapshot)
    if pool.kind == "files":
        return sum(r.count for r in ranges)
    return sum(r.count for r in ranges if not str(r.first).startswith("~"))


def pool_row(lake: Lake, config: PoolConfig) -> PoolRow:
    """What the list says of a pool's ``main``: its last commit, how many objects (or
    paths) its snapshot has, and for pools of up to :data:`SUMMED` objects their size
    and rows summed from the objects' metadata (a record pool) or the listing (files)."""
    try:
        pool = lake.versioned_pool(config.id)
        last = pool.log("main", limit=1)
        count = _counted(pool, last[0].snapshot) if last else None
        size: int | None = None
        rows: int | None = None
        if count is None or count <= SUMMED:
            if isinstance(pool, Pool):
                objects = pool.objects("main")
                count, size = len(objects), sum(o.size for o in objects)
                rows = sum(o.rows for o in objects)
            elif isinstance(pool, FilePool):
                entries = list(pool.iter_list("main"))
                count, size = len(entries), sum(e.size for e in entries)
    except LimnoError:  # no main branch (deleted): nothing to count from
        return PoolRow(config, None, None, None, None)
    return PoolRow(config, size, count, rows, last[0] if last else None)


@router.get("/pools")
def pools_page(request: Request, viewer: Signed) -> Response:
    lake = lake_of(request)
    rows = [pool_row(lake, c) for c in lake.list_pools() if viewer.can("read", c.id)]
    return render(
        request,
        "pools.html",
        title="Pools",
        section="pools",
        rows=rows,
        can_create=viewer.can("write"),
    )


@router.post("/pools")
def create_pool(request: Request, viewer: Signed, form: Posted) -> Response:
    viewer.need("write", what="the lake")
    name = form.get("name", "").strip()
    kind = form.get("kind", "records")
    if kind not in ("records", "files"):
        raise InvalidInputError(f"unknown pool kind {kind!r} (records or files)")
    lake = lake_of(request)
    if kind == "files":
        lake.create_pool(name, kind="files", author=viewer.author)
    else:
        key = form.get("key", "").strip() or None
        lake.create_pool(name, key=key, author=viewer.author)
    return redirect("/pools", f"created pool {name}")


@router.post("/pools/{pool}/rename")
def rename_pool(request: Request, pool: str, viewer: Signed, form: Posted) -> Response:
    config = opened(request, viewer, pool, "write").config
    new = form.get("name", "").strip()
    lake_of(request).rename_pool(config.name, new)
    return redirect("/pools", f"renamed pool {config.name} to {new}")


@router.post("/pools/{pool}/drop")
def drop_pool(request: Request, pool: str, viewer: Signed, form: Posted) -> Response:
    config = opened(request, viewer, pool, "write").config
    if form.get("confirm", "") != config.name:
        raise InvalidInputError(
            f"to drop pool {config.name!r}, type its name to confirm (nothing was dropped)"
        )
    lake_of(request).drop_pool(config.name)
    return redirect("/pools", f"dropped pool {config.name}")
