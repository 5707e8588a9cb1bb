"""Branches, tags, history and the git operations of a pool of either kind (records or
files: :func:`~limno.server.deps.versioned_of`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from limno.api import wire
from limno.server.authorization import author_of
from limno.server.deps import ok, versioned_of
from limno.server.guard import Body

router = APIRouter(prefix="/v1/pools/{pool}", tags=["refs"])


class NewRef(Body):
    name: str
    from_ref: str | None = None


class Merge(Body):
    source: str
    into: str = "main"
    strategy: str = "fail"
    message: str = ""
    author: str | None = None
    meta: dict[str, Any] | None = None
    fast_forward: bool = True


class CherryPick(Body):
    commit: str
    branch: str = "main"
    strategy: str = "fail"


class Reset(Body):
    branch: str
    ref: str


class Protect(Body):
    branch: str


class Revert(Body):
    commit: str
    branch: str = "main"
    message: str = ""
    author: str | None = None


@router.get("/branches", operation_id="branches", summary="Branch name -> head commit")
def branches(request: Request, pool: str) -> dict[str, str]:
    return versioned_of(request, pool).branches()


@router.post("/branches", operation_id="create_branch", status_code=201, summary="New branch")
def create_branch(request: Request, pool: str, body: NewRef) -> dict[str, str]:
    return {"commit": versioned_of(request, pool).branch(body.name, body.from_ref)}


@router.delete("/branches/{name:path}", operation_id="delete_branch", summary="Delete a branch")
def delete_branch(request: Request, pool: str, name: str) -> dict[str, str]:
    return {"commit": versioned_of(request, pool).delete_branch(name)}


@router.get("/protected", operation_id="protected_branches", summary="Protected branches")
def protected_branches(request: Request, pool: str) -> list[str]:
    return versioned_of(request, pool).protected()


@router.post("/protect", operation_id="protect_branch", summary="Only merges may move a branch")
def protect_branch(request: Request, pool: str, body: Protect) -> dict[str, bool]:
    return {"changed": versioned_of(request, pool).protect(body.branch)}


@router.post("/unprotect", operation_id="unprotect_branch", summary="Lift a branch's protection")
def unprotect_branch(request: Request, pool: str, body: Protect) -> dict[str, bool]:
    return {"changed": versioned_of(request, pool).unprotect(body.branch)}


@router.get("/tags", operation_id="tags", summary="Tag name -> commit")
def tags(request: Request, pool: str) -> dict[str, str]:
    return versioned_of(request, pool).tags()


@router.post("/tags", operation_id="create_tag", status_code=201, summary="New tag")
def create_tag(request: Request, pool: str, body: NewRef) -> dict[str, str]:
    return {"commit": versioned_of(request, pool).tag(body.name, body.from_ref)}


@router.delete("/tags/{name:path}", operation_id="delete_tag", summary="Delete a tag")
def delete_tag(request: Request, pool: str, name: str) -> dict[str, str]:
    return {"commit": versioned_of(request, pool).delete_tag(name)}


@router.get("/resolve", operation_id="resolve", summary="The commit a ref names")
def resolve(
    request: Request, pool: str, ref: str | None = None, as_of: str | None = None
) -> dict[str, str]:
    return {"commit": versioned_of(request, pool).resolve(ref, wire.time_from_json(as_of))}


@router.get("/log", operation_id="log", summary="Commits reachable from a ref, newest first")
def log(
    request: Request,
    pool: str,
    ref: str | None = None,
    limit: int | None = None,
    first_parent: bool = False,
    as_of: str | None = None,
) -> list[dict[str, Any]]:
    when = wire.time_from_json(as_of)
    commits = versioned_of(request, pool).log(ref, limit, first_parent, as_of=when)
    return [wire.commit_to_json(c) for c in commits]


@router.post("/merge", operation_id="merge", summary="Merge a ref into a branch")
def merge(request: Request, pool: str, body: Merge) -> dict[str, Any]:
    result = versioned_of(request, pool).merge(
        body.source,
        body.into,
        body.strategy,
        body.message,
        author_of(request, body.author),
        body.meta,
        fast_forward=body.fast_forward,
    )
    return wire.merge_to_json(result)


@router.get("/diff", operation_id="diff", summary="Entries that differ between two refs")
def diff(
    request: Request,
    pool: str,
    old: str,
    new: str | None = None,
    three_dot: bool = False,
    as_of: str | None = None,
) -> list[dict[str, Any]]:
    when = wire.time_from_json(as_of)
    entries = versioned_of(request, pool).diff(old, new, three_dot, as_of=when)
    return [wire.diff_to_json(e) for e in entries]


@router.post("/cherry-pick", operation_id="cherry_pick", summary="Apply a commit's changes")
def cherry_pick(request: Request, pool: str, body: CherryPick) -> dict[str, Any]:
    made = versioned_of(request, pool).cherry_pick(body.commit, body.branch, body.strategy)
    return wire.commit_to_json(made)


@router.post("/reset", operation_id="reset", summary="Point a branch at a ref (reset --hard)")
def reset(request: Request, pool: str, body: Reset) -> dict[str, str]:
    old, new = versioned_of(request, pool).reset(body.branch, body.ref)
    return {"old": old, "new": new}


@router.post("/revert", operation_id="revert", summary="A commit undoing another")
def revert(request: Request, pool: str, body: Revert) -> dict[str, Any]:
    made = versioned_of(request, pool).revert(
        body.commit, body.branch, body.message, author_of(request, body.author)
    )
    return wire.commit_to_json(made)


@router.get("/hooks", operation_id="hooks", summary="The pool's hooks")
def hooks(request: Request, pool: str) -> list[dict[str, Any]]:
    return [wire.hook_to_json(h) for h in versioned_of(request, pool).hook_specs()]


@router.post("/hooks", operation_id="add_hook", status_code=201, summary="Add a hook")
def add_hook(request: Request, pool: str, body: dict[str, Any]) -> dict[str, Any]:
    versioned_of(request, pool).add_hook(wire.hook_from_json(body))
    return ok()


@router.delete("/hooks/{name:path}", operation_id="remove_hook", summary="Remove a hook")
def remove_hook(request: Request, pool: str, name: str) -> dict[str, Any]:
    versioned_of(request, pool).remove_hook(name)
    return ok()
