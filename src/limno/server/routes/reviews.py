"""Merge requests and compare, for a pool of either kind (:mod:`limno.pools.reviews`).

Opening, merging and closing a request is a writer's (a merge into a protected branch
is allowed, as any merge is); listing, showing and comparing a reader's
(:mod:`limno.server.authorization`). The author of each change is the caller.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from limno.api import wire_reviews
from limno.server.authorization import author_of
from limno.server.deps import versioned_of
from limno.server.guard import Body

router = APIRouter(prefix="/v1/pools/{pool}", tags=["merge requests"])


class NewMergeRequest(Body):
    source: str
    into: str = "main"
    title: str
    description: str = ""
    author: str | None = None


class MergeIt(Body):
    strategy: str = "fail"
    author: str | None = None


class CloseIt(Body):
    author: str | None = None


@router.get(
    "/merge-requests", operation_id="merge_requests", summary="Merge requests, newest first"
)
def merge_requests(request: Request, pool: str, state: str | None = None) -> list[dict[str, Any]]:
    found = versioned_of(request, pool).merge_requests(state)
    return [wire_reviews.mr_to_json(m) for m in found]


@router.post(
    "/merge-requests",
    operation_id="open_merge_request",
    status_code=201,
    summary="Open a merge request",
)
def open_merge_request(request: Request, pool: str, body: NewMergeRequest) -> dict[str, Any]:
    mr = versioned_of(request, pool).open_merge_request(
        body.source, body.into, body.title, body.description, author_of(request, body.author)
    )
    return wire_reviews.mr_to_json(mr)


@router.get("/merge-requests/{mr_id}", operation_id="merge_request", summary="A merge request")
def merge_request(request: Request, pool: str, mr_id: str) -> dict[str, Any]:
    return wire_reviews.mr_to_json(versioned_of(request, pool).merge_request(mr_id))


@router.post(
    "/merge-requests/{mr_id}/merge",
    operation_id="merge_merge_request",
    summary="Merge a merge request",
)
def merge_merge_request(request: Request, pool: str, mr_id: str, body: MergeIt) -> dict[str, Any]:
    mr = versioned_of(request, pool).merge_merge_request(
        mr_id, body.strategy, author_of(request, body.author)
    )
    return wire_reviews.mr_to_json(mr)


@router.post(
    "/merge-requests/{mr_id}/close",
    operation_id="close_merge_request",
    summary="Close a merge request without merging",
)
def close_merge_request(request: Request, pool: str, mr_id: str, body: CloseIt) -> dict[str, Any]:
    mr = versioned_of(request, pool).close_merge_request(mr_id, author_of(request, body.author))
    return wire_reviews.mr_to_json(mr)


@router.get("/compare", operation_id="compare", summary="What merging a ref would bring and meet")
def compare(
    request: Request, pool: str, source: str, dest: str = "main", rows: int = 10, limit: int = 1000
) -> dict[str, Any]:
    found = versioned_of(request, pool).compare(source, dest, rows, limit)
    return wire_reviews.comparison_to_json(found)
