"""Users, access keys and grants (``limno auth`` against a server): admins only.

The rule of every route here is ``admin`` (:mod:`limno.server.authorization`). The
server does the work with the lake's own auth store (:class:`LocalAuth`), sealing
new secrets with its ``LIMNO_AUTH_SECRET``; a new key's secret is in the answer to
the request that made it, and nowhere else (never in a log). After a change the
server's authenticator forgets what it remembered, so a deleted key stops working
here at once (other servers of the lake: within their cache's few seconds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from pydantic import BaseModel

from limno.api.local_auth import LocalAuth
from limno.server.deps import lake_of

router = APIRouter(prefix="/v1/auth", tags=["auth"])

_T = TypeVar("_T")


class NewUser(BaseModel):
    name: str
    role: str
    key: bool = True


class Level(BaseModel):
    level: str


def _admin(request: Request) -> LocalAuth:
    return lake_of(request).auth()


def _changed(request: Request, change: Callable[[LocalAuth], _T]) -> _T:
    """``change`` done, then the authenticator's memory of keys dropped."""
    try:
        return change(_admin(request))
    finally:
        authenticator = request.app.state.authenticator
        if authenticator is not None:
            authenticator.forget()


@router.get("/users", operation_id="auth_users", summary="Users")
def users(request: Request) -> list[dict[str, Any]]:
    return [u.to_json() for u in _admin(request).users()]


@router.get("/users/{name}", operation_id="auth_user", summary="A user")
def user(request: Request, name: str) -> dict[str, Any]:
    return _admin(request).user(name).to_json()


@router.post("/users", operation_id="auth_create_user", status_code=201, summary="New user")
def create_user(request: Request, body: NewUser) -> dict[str, Any]:
    made, key = _changed(request, lambda a: a.create_user(body.name, body.role, body.key))
    return {"user": made.to_json(), "key": None if key is None else key.to_json()}


@router.delete("/users/{name}", operation_id="auth_delete_user", summary="Delete a user")
def delete_user(request: Request, name: str) -> dict[str, Any]:
    return _changed(request, lambda a: a.delete_user(name)).to_json()


@router.get("/keys", operation_id="auth_keys", summary="Access keys (never their secrets)")
def keys(request: Request, user: str | None = None) -> list[dict[str, Any]]:
    return [k.to_json() for k in _admin(request).access_keys(user)]


@router.post(
    "/users/{name}/keys", operation_id="auth_create_key", status_code=201, summary="New key"
)
def create_key(request: Request, name: str) -> dict[str, Any]:
    return _changed(request, lambda a: a.create_key(name)).to_json()


@router.delete("/keys/{key_id}", operation_id="auth_delete_key", summary="Delete a key")
def delete_key(request: Request, key_id: str) -> dict[str, Any]:
    return _changed(request, lambda a: a.delete_key(key_id)).to_json()


@router.get("/grants", operation_id="auth_grants", summary="Per-pool grants")
def grants(request: Request, user: str | None = None) -> list[dict[str, Any]]:
    return [g.to_json() for g in _admin(request).grants(user)]


@router.put("/users/{name}/grants/{pool}", operation_id="auth_grant", summary="Grant a level")
def grant(request: Request, name: str, pool: str, body: Level) -> dict[str, Any]:
    return _changed(request, lambda a: a.grant(name, pool, body.level)).to_json()


@router.delete("/users/{name}/grants/{pool}", operation_id="auth_revoke", summary="Revoke")
def revoke(request: Request, name: str, pool: str) -> dict[str, Any]:
    return _changed(request, lambda a: a.revoke(name, pool)).to_json()
