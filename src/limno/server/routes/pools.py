"""Pools of the lake: list, create, show, drop, rename."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field

from limno.api import wire
from limno.server.authorization import author_of, visible
from limno.server.deps import lake_of
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


@router.get("", operation_id="list_pools", summary="Pools of the lake")
def list_pools(request: Request) -> list[dict[str, Any]]:
    configs = lake_of(request).list_pools()
    shown = visible(request, [c.id for c in configs])  # a pool the caller may not read: hidden
    return [wire.config_to_json(c) for c, ok in zip(configs, shown, strict=True) if ok]


@router.post("", operation_id="create_pool", status_code=201, summary="Create a pool")
def create_pool(request: Request, body: CreatePool) -> dict[str, Any]:
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
    return wire.config_to_json(lake_of(request).pool(pool).config)


@router.delete("/{pool}", operation_id="drop_pool", summary="Drop a pool with its data")
def drop_pool(request: Request, pool: str) -> dict[str, Any]:
    return wire.config_to_json(lake_of(request).drop_pool(pool))


@router.post("/{pool}/rename", operation_id="rename_pool", summary="Rename a pool")
def rename_pool(request: Request, pool: str, body: Rename) -> dict[str, Any]:
    return wire.config_to_json(lake_of(request).rename_pool(pool, body.name))
