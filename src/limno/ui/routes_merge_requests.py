"""Merge request pages: a pool's requests by state, compare-and-open, and one request's
page (its diff and conflicts as they are now, strategy, merge, close, the outcome of
every attempt with the pre-merge hooks' verdicts).

The pages call the pool's merge-request methods of the lake interface
(:mod:`limno.pools.reviews`) as the signed-in user: listing and comparing need read
access to the pool, opening, merging and closing write access, as the /v1 routes do.
A merge that fails (a conflict, a hook's veto, a source branch deleted since) comes back
to the request's page with its error as the notice; the attempt is on the page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import Response

from limno.core.merge import STRATEGIES
from limno.errors import LimnoError
from limno.pools.reviews import STATES
from limno.ui.pages import Posted, Signed, page_router, redirect, render_pool
from limno.ui.routes_pool import opened, pool_path

if TYPE_CHECKING:
    from limno.api.base_versioned import VersionedPool
    from limno.pools.review_compare import Comparison

router = page_router()

#: entries and sampled rows per object a compare shows
SHOWN_ENTRIES = 200
SAMPLE_ROWS = 10


def _compared(pool: VersionedPool, source: str, dest: str) -> dict[str, Any]:
    """What the compare part of a page shows: the comparison, the first
    :data:`SHOWN_ENTRIES` of its conflicts (a set of them all, for the diff's marks),
    and its row sample's columns (the union of the sampled rows' fields, in order of
    appearance)."""
    found: Comparison = pool.compare(source, dest, rows=SAMPLE_ROWS, limit=SHOWN_ENTRIES)
    columns: list[str] = []
    for s in found.sample:
        for row in s.rows:
            columns.extend(k for k in row if k not in columns)
    return {
        "compare": found,
        "sample_columns": columns,
        "conflicts_shown": found.conflicts[:SHOWN_ENTRIES],
        "conflicting": frozenset(found.conflicts),
    }


@router.get("/pools/{pool}/merge-requests")
def merge_requests(request: Request, pool: str, viewer: Signed, state: str = "open") -> Response:
    found = opened(request, viewer, pool)
    return render_pool(
        request,
        "mr_list.html",
        found,
        "merge-requests",
        f"{found.name} merge requests",
        state=state,
        states=(*STATES, "all"),
        requests=found.merge_requests(state),
        can_write=viewer.can("write", found.id),
    )


@router.get("/pools/{pool}/merge-requests/new")
def new_merge_request(
    request: Request, pool: str, viewer: Signed, source: str = "", dest: str = "main"
) -> Response:
    found = opened(request, viewer, pool)
    context: dict[str, Any] = {}
    if source:
        context = _compared(found, source, dest)
    return render_pool(
        request,
        "mr_new.html",
        found,
        "merge-requests",
        f"{found.name}: compare",
        branches=sorted(found.branches()),
        source=source,
        dest=dest,
        can_write=viewer.can("write", found.id),
        **context,
    )


@router.post("/pools/{pool}/merge-requests")
def open_merge_request(request: Request, pool: str, viewer: Signed, form: Posted) -> Response:
    found = opened(request, viewer, pool, "write")
    made = found.open_merge_request(
        form.get("source", ""),
        form.get("dest", "") or "main",
        form.get("title", ""),
        form.get("description", ""),
        viewer.author,
    )
    return redirect(pool_path(found, "merge-requests", made.id), "opened the merge request")


@router.get("/pools/{pool}/merge-requests/{mr_id}")
def merge_request(request: Request, pool: str, mr_id: str, viewer: Signed) -> Response:
    found = opened(request, viewer, pool)
    mr = found.merge_request(mr_id)
    context: dict[str, Any] = {}
    compare_error = ""
    if mr.state == "open":
        try:
            context = _compared(found, mr.source, mr.into)
        except LimnoError as e:  # e.g. the source branch was deleted since
            compare_error = str(e)
    return render_pool(
        request,
        "mr.html",
        found,
        "merge-requests",
        f"{found.name}: {mr.title}",
        mr=mr,
        compare_error=compare_error,
        strategies=STRATEGIES,
        can_write=viewer.can("write", found.id),
        **context,
    )


@router.post("/pools/{pool}/merge-requests/{mr_id}/merge")
def merge_merge_request(
    request: Request, pool: str, mr_id: str, viewer: Signed, form: Posted
) -> Response:
    found = opened(request, viewer, pool, "write")
    here = pool_path(found, "merge-requests", mr_id)
    try:
        done = found.merge_merge_request(mr_id, form.get("strategy", "fail"), viewer.author)
    except LimnoError as e:  # a conflict, a veto, a source gone: the attempt is on its page
        return redirect(here, f"not merged: {e}")
    return redirect(here, f"merged into {done.into} ({done.commit})")


@router.post("/pools/{pool}/merge-requests/{mr_id}/close")
def close_merge_request(
    request: Request, pool: str, mr_id: str, viewer: Signed, form: Posted
) -> Response:
    found = opened(request, viewer, pool, "write")
    found.close_merge_request(mr_id, viewer.author)
    return redirect(pool_path(found, "merge-requests", mr_id), "closed without merging")
