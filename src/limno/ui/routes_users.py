"""The users page (admins only): users and their roles, access keys (a new key's
secret is shown once, on the page that made it), per-pool grants."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import Request
from fastapi.responses import Response

from limno.errors import InvalidInputError
from limno.ui.pages import Posted, Signed, Viewer, lake_of, page_router, redirect, render

if TYPE_CHECKING:
    from limno.api.auth_admin import AuthAdmin
    from limno.auth.model import NewKey

router = page_router()
_T = TypeVar("_T")


def _admin(request: Request, viewer: Viewer) -> AuthAdmin:
    viewer.need("admin", what="users, keys and grants")
    return lake_of(request).auth()


def _changed(request: Request, viewer: Viewer, change: Callable[[AuthAdmin], _T]) -> _T:
    """``change`` done, then the server's memory of keys dropped (as the /v1 routes do):
    a deleted key or a changed grant applies to the next request."""
    try:
        return change(_admin(request, viewer))
    finally:
        authenticator = request.app.state.authenticator
        if authenticator is not None:
            authenticator.forget()


def _page(request: Request, viewer: Viewer, new_key: NewKey | None = None) -> Response:
    admin = _admin(request, viewer)
    keys: dict[str, list[Any]] = {}
    for key in admin.access_keys():
        keys.setdefault(key.user, []).append(key)
    grants: dict[str, list[Any]] = {}
    for grant in admin.grants():
        grants.setdefault(grant.user, []).append(grant)
    return render(
        request,
        "users.html",
        title="Users",
        section="users",
        users=admin.users(),
        keys=keys,
        grants=grants,
        pools=sorted(c.name for c in lake_of(request).list_pools()),
        new_key=new_key,
    )


@router.get("/users")
def users_page(request: Request, viewer: Signed) -> Response:
    return _page(request, viewer)


@router.post("/users")
def create_user(request: Request, viewer: Signed, form: Posted) -> Response:
    name, role = form.get("name", "").strip(), form.get("role", "")
    _, key = _changed(request, viewer, lambda a: a.create_user(name, role))
    return _page(request, viewer, key)


@router.post("/users/{name}/keys")
def create_key(request: Request, name: str, viewer: Signed, form: Posted) -> Response:
    return _page(request, viewer, _changed(request, viewer, lambda a: a.create_key(name)))


def _deleted(
    request: Request,
    viewer: Viewer,
    form: dict[str, str],
    what: str,
    delete: Callable[[AuthAdmin], Any],
) -> Response:
    """``delete`` done once the form confirmed ``what`` (``user NAME``, ``key ID``) by
    naming it (the page's confirmation dialog fills the field in)."""
    if form.get("confirm") != what.split(" ", 1)[1]:
        raise InvalidInputError(f"to delete {what}, confirm it (nothing deleted)")
    _changed(request, viewer, delete)
    return redirect("/users", f"deleted {what}")


@router.post("/users/{name}/delete")
def delete_user(request: Request, name: str, viewer: Signed, form: Posted) -> Response:
    return _deleted(request, viewer, form, f"user {name}", lambda a: a.delete_user(name))


@router.post("/keys/{key_id}/delete")
def delete_key(request: Request, key_id: str, viewer: Signed, form: Posted) -> Response:
    return _deleted(request, viewer, form, f"key {key_id}", lambda a: a.delete_key(key_id))


@router.post("/users/{name}/grants")
def grant(request: Request, name: str, viewer: Signed, form: Posted) -> Response:
    pool, level = form.get("pool", ""), form.get("level", "")
    if level == "revoke":
        _changed(request, viewer, lambda a: a.revoke(name, pool))
        return redirect("/users", f"revoked {name}'s grant on {pool}")
    _changed(request, viewer, lambda a: a.grant(name, pool, level))
    return redirect("/users", f"granted {name} {level} on {pool}")
