"""A pool's page: branches and tags (create, delete), its history a page at a time,
and one commit's page (its actions, what it added and removed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import Response

from limno.errors import InvalidInputError, LimnoError
from limno.ui.pages import (
    Posted,
    Signed,
    Viewer,
    lake_of,
    page_router,
    redirect,
    render_pool,
)

if TYPE_CHECKING:
    from limno.api.base_versioned import VersionedPool

router = page_router()

#: commits a history page shows
PAGE = 25
#: rows of a commit's preview of what it added
PREVIEW_ROWS = 10


def opened(request: Request, viewer: Viewer, pool: str, action: str = "read") -> VersionedPool:
    """Pool ``pool`` (a name or id) once the viewer may do ``action`` on it (403 page
    otherwise; 404 when there is no such pool)."""
    found = lake_of(request).versioned_pool(pool)
    viewer.need_pool(action, found.id, found.name, pool)
    return found


def pool_path(pool: VersionedPool, *parts: str) -> str:
    """The path of a page of ``pool`` (each part a quoted path segment)."""
    from urllib.parse import quote

    return "/".join(["/pools", *(quote(p, safe="") for p in (pool.name, *parts))])


@router.get("/pools/{pool}")
def pool_page(
    request: Request, pool: str, viewer: Signed, ref: str = "main", page: str | None = None
) -> Response:
    found = opened(request, viewer, pool)
    # one page of history from ``page`` (a commit id: where the last page stopped), so a
    # page costs PAGE commits whatever the length of the history
    commits = found.log(page or ref, limit=PAGE + 1)
    older = commits[PAGE].id if len(commits) > PAGE else None
    return render_pool(
        request,
        "pool.html",
        found,
        "history",
        found.name,
        ref=ref,
        branches=sorted(found.branches().items()),
        protected=set(found.protected()),
        tags=sorted(found.tags().items()),
        commits=commits[:PAGE],
        older=older,
        first_page=page is None,
        can_write=viewer.can("write", found.id),
    )


@router.get("/pools/{pool}/commits/{commit}")
def commit_page(request: Request, pool: str, commit: str, viewer: Signed) -> Response:
    found = opened(request, viewer, pool)
    head = found.log(commit, limit=1)[0]
    # partitions (``~partition/``) and indexes (``~index/``) are entries too: data only here
    changes = [_change(found.kind, a.op, a.key, a.value) for a in head.actions]
    changes = [c for c in changes if not c["key"].startswith("~")]
    added = [c for c in changes if c["op"] != "delete"]
    removed = [c for c in changes if c["op"] == "delete"]
    parent = head.parents[0] if head.parents else None
    return render_pool(
        request,
        "commit.html",
        found,
        "history",
        f"{found.name} commit {head.id[:12]}",
        commit=head,
        changes=changes,
        added=len(added),
        removed=len(removed),
        # rows from the smallest key of what was added (at the commit) and removed (at
        # its first parent): the rows written or dropped, and any others in that range
        preview=_rows_from(found, head.id, added),
        removed_preview=_rows_from(found, parent, removed) if parent else None,
    )


def _change(kind: str, op: str, key: str, value: Mapping[str, Any]) -> dict[str, Any]:
    """One action as the commit page shows it: a path and its size (files), an object
    with its rows and key range (records)."""
    change: dict[str, Any] = {"op": op, "key": key, "size": value.get("size"), "rows": None}
    if kind == "records" and not key.startswith("~"):
        from limno.data.objects import DataObject

        try:
            obj = DataObject.from_json(value)
        except LimnoError:
            return change
        change.update(rows=obj.rows, low=obj.min_key, high=obj.max_key)
    return change


def _rows_from(pool: VersionedPool, commit: str, changed: list[dict[str, Any]]) -> Any:
    """A few rows of ``commit`` from the smallest key of the ``changed`` objects, as a
    table; None for a file pool, or when no object has keyed rows."""
    from limno.api.base import Pool

    lows = [c["low"] for c in changed if c.get("low") is not None]
    if not isinstance(pool, Pool) or not lows:
        return None
    try:
        return pool.scan(commit, start=list(min(lows)), limit=PREVIEW_ROWS)
    except (LimnoError, TypeError):
        return None


def _ref_kind(kind: str) -> str:
    if kind not in ("branch", "tag"):
        raise InvalidInputError(f"unknown ref kind {kind!r} (branch or tag)")
    return kind


@router.post("/pools/{pool}/refs")
def create_ref(request: Request, pool: str, viewer: Signed, form: Posted) -> Response:
    """A new branch or tag (``kind``) ``name`` at ``from`` (default ``main``)."""
    found = opened(request, viewer, pool, "write")
    name, kind = form.get("name", "").strip(), _ref_kind(form.get("kind", ""))
    make = found.branch if kind == "branch" else found.tag
    make(name, form.get("from", "").strip() or None)
    return redirect(pool_path(found), f"created {kind} {name}")


@router.post("/pools/{pool}/delete-ref")
def delete_ref(request: Request, pool: str, viewer: Signed, form: Posted) -> Response:
    found = opened(request, viewer, pool, "write")
    name, kind = form.get("name", ""), _ref_kind(form.get("kind", ""))
    if form.get("confirm") != name:
        raise InvalidInputError(f"to delete {kind} {name!r}, confirm its name (nothing deleted)")
    (found.delete_branch if kind == "branch" else found.delete_tag)(name)
    return redirect(pool_path(found), f"deleted {kind} {name}")
