"""User management through ``limno serve``: :class:`AuthAdmin` over HTTP.

Each method is one request to the server's ``/v1/auth`` routes, which only an
admin may call (anyone else gets 403, ForbiddenError). The server does the work on
the lake's auth store with its own ``LIMNO_AUTH_SECRET``: the client needs none.
"""

from __future__ import annotations

from urllib.parse import quote

from limno.api.auth_admin import AuthAdmin
from limno.api.remote_http import Connection
from limno.auth.model import AccessKey, Grant, NewKey, User

__all__ = ["RemoteAuth"]


def _seg(text: str) -> str:
    return quote(text, safe="")


class RemoteAuth(AuthAdmin):
    """Users, keys and grants of the lake behind a server (admins only)."""

    def __init__(self, http: Connection) -> None:
        self._http = http

    def users(self) -> list[User]:
        return [User.from_json(u) for u in self._http.call("GET", "/v1/auth/users")]

    def user(self, name: str) -> User:
        return User.from_json(self._http.call("GET", f"/v1/auth/users/{_seg(name)}"))

    def create_user(self, name: str, role: str, key: bool = True) -> tuple[User, NewKey | None]:
        body = {"name": name, "role": role, "key": key}
        done = self._http.call("POST", "/v1/auth/users", body=body)
        new = None if done["key"] is None else NewKey.from_json(done["key"])
        return User.from_json(done["user"]), new

    def delete_user(self, name: str) -> User:
        return User.from_json(self._http.call("DELETE", f"/v1/auth/users/{_seg(name)}"))

    def access_keys(self, user: str | None = None) -> list[AccessKey]:
        found = self._http.call("GET", "/v1/auth/keys", {"user": user})
        return [AccessKey.from_json(k) for k in found]

    def create_key(self, user: str) -> NewKey:
        return NewKey.from_json(self._http.call("POST", f"/v1/auth/users/{_seg(user)}/keys"))

    def delete_key(self, key_id: str) -> AccessKey:
        return AccessKey.from_json(self._http.call("DELETE", f"/v1/auth/keys/{_seg(key_id)}"))

    def grants(self, user: str | None = None) -> list[Grant]:
        return [
            Grant.from_json(g) for g in self._http.call("GET", "/v1/auth/grants", {"user": user})
        ]

    def grant(self, user: str, pool: str, level: str) -> Grant:
        path = f"/v1/auth/users/{_seg(user)}/grants/{_seg(pool)}"
        return Grant.from_json(self._http.call("PUT", path, body={"level": level}))

    def revoke(self, user: str, pool: str) -> Grant:
        path = f"/v1/auth/users/{_seg(user)}/grants/{_seg(pool)}"
        return Grant.from_json(self._http.call("DELETE", path))
