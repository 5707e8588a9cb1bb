"""Compaction, splits, vacuum, status reports and verify: long work runs here, on the
server, next to the lake."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from fastapi import APIRouter, Request

from limno.api import wire
from limno.api.base import Engine
from limno.server.authorization import author_of
from limno.server.deps import lake_of, pool_of, versioned_of
from limno.server.formats import table_bytes
from limno.server.guard import Body

router = APIRouter(prefix="/v1", tags=["maintenance"])


class Compact(Body):
    ids: list[str] = []
    branch: str = "main"
    strategy: str | None = None
    message: str = ""
    author: str | None = None
    engine: Engine = "local"


class Split(Body):
    partition: str
    branch: str = "main"
    #: the split point in limno's JSON form of values (None: the median)
    at: Any = None


class Vacuum(Body):
    #: microseconds (None: the default grace)
    grace: int | None = None
    dry_run: bool = False
    #: microseconds, or branch glob -> microseconds
    retention: int | dict[str, int] | None = None


@router.post("/pools/{pool}/compact", operation_id="compact", summary="LSM compaction")
def compact(request: Request, pool: str, body: Compact) -> dict[str, Any]:
    commit, results = pool_of(request, pool).compact(
        body.ids,
        body.branch,
        body.strategy,
        body.message,
        author_of(request, body.author),
        engine=body.engine,
    )
    return {
        "commit": None if commit is None else wire.commit_to_json(commit),
        "results": [wire.job_to_json(r) for r in results],
    }


@router.post("/pools/{pool}/split", operation_id="split", summary="Split a leaf partition")
def split(request: Request, pool: str, body: Split) -> dict[str, Any]:
    commit = pool_of(request, pool).split(
        body.partition, body.branch, wire.value_from_json(body.at)
    )
    return {"commit": None if commit is None else wire.commit_to_json(commit)}


@router.post("/pools/{pool}/vacuum", operation_id="vacuum", summary="Free unreachable bytes")
def vacuum(request: Request, pool: str, body: Vacuum) -> dict[str, Any]:
    grace = None if body.grace is None else dt.timedelta(microseconds=body.grace)
    report = versioned_of(request, pool).vacuum(
        grace,
        body.dry_run,
        wire.retention_from_json(body.retention),
    )
    return wire.vacuum_to_json(report)


@router.get("/pools/{pool}/status", operation_id="status", summary="Status reports")
def status(
    request: Request, pool: str, ref: str | None = None, limit: int = 20, rows: int | None = None
) -> dict[str, str]:
    """Report title -> the report, an Arrow IPC stream in base64 (``rows``: partitions
    and files cut to their first rows, their counts in the schema's metadata). A file
    pool's reports are its branches and open uploads (limno.pools.files.status)."""
    reports = versioned_of(request, pool).status(ref, limit, rows)
    return {title: base64.b64encode(table_bytes(t)).decode() for title, t in reports.items()}


@router.get("/verify", operation_id="verify", summary="Check every invariant")
def verify(request: Request, pool: str | None = None, deep: bool = False) -> list[dict[str, Any]]:
    """The faults found (none: the lake, or the pool, is sound)."""
    return [wire.fault_to_json(f) for f in lake_of(request).verify(pool, deep=deep)]
