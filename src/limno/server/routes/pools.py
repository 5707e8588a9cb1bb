"""Pools of the lake: list, create, show, drop, rename, set iterators."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field

from limno.api import wire
from limno.server.authorization import author_of, require_admin, visible
from limno.server.deps import lake_of, pool_of
from limno.server.guard import Body

router = APIRouter(prefix="/v1/pools", tags=["pools"])


class CreatePool(Body):
    name: str
    key: str | None = None
    kind: str = "records"
    target_size: int = 256 * 2**20
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    author: str | None = None
    iterators: list[str] = []
    split_threshold: int | None = None
    compaction: dict[str, Any] | None = None
    #: branch glob -> window in microseconds
    retention: dict[str, int] | None = None


class Rename(Body):
    name: str


class SetIterators(Body):
    iterators: list[str] = []
    #: a Python iterator file stored in the pool's configuration, and its name
    file_text: str | None = None
    file_name: str | None = None


#: what the 403 of a non-admin naming a python() iterator says
_RUNS_CODE = "the lake: a python() iterator runs its code in the server"


@router.get("", operation_id="list_pools", summary="Pools of the lake")
def list_pools(request: Request) -> list[dict[str, Any]]:
    configs = lake_of(request).list_pools()
    shown = visible(request, [c.id for c in configs])  # a pool the caller may not read: hidden
    return [wire.config_to_json(c) for c, ok in zip(configs, shown, strict=True) if ok]


@router.post("", operation_id="create_pool", status_code=201, summary="Create a pool")
def create_pool(request: Request, body: CreatePool) -> dict[str, Any]:
    from limno.data.iterators import parse_iterators

    if body.iterators and parse_iterators(body.iterators).user is not None:
        require_admin(request, _RUNS_CODE)
    retention = wire.retention_from_json(body.retention)
    created = lake_of(request).create_pool(
        body.name,
        key=body.key,
        kind=body.kind,
        target_size=body.target_size,
        schema=wire.schema_from_json(body.schema_),
        author=author_of(request, body.author),
        iterators=body.iterators,
        split_threshold=body.split_threshold,
        compaction=body.compaction,
        retention=retention if isinstance(retention, dict) else None,
    )
    return wire.config_to_json(created.config)


@router.get("/{pool}", operation_id="get_pool", summary="A pool's configuration")
def get_pool(request: Request, pool: str) -> dict[str, Any]:
    return wire.config_to_json(lake_of(request).registry.find(pool))  # a pool of either kind


@router.delete("/{pool}", operation_id="drop_pool", summary="Drop a pool with its data")
def drop_pool(request: Request, pool: str) -> dict[str, Any]:
    return wire.config_to_json(lake_of(request).drop_pool(pool))


@router.post("/{pool}/rename", operation_id="rename_pool", summary="Rename a pool")
def rename_pool(request: Request, pool: str, body: Rename) -> dict[str, Any]:
    return wire.config_to_json(lake_of(request).rename_pool(pool, body.name))


@router.post("/{pool}/iterators", operation_id="set_iterators", summary="Set a pool's iterators")
def set_iterators(request: Request, pool: str, body: SetIterators) -> dict[str, Any]:
    from limno.data.iterators import parse_iterators

    # a writer's, as create_pool is; naming code the server would run is an admin's
    if body.file_text is not None or parse_iterators(body.iterators).user is not None:
        require_admin(request, _RUNS_CODE)
    config = pool_of(request, pool).set_iterators(body.iterators, body.file_text, body.file_name)
    return wire.config_to_json(config)
