"""User management, the interface: what ``limno auth`` does with a lake.

A lake opened in this process implements it on the lake's own auth store
(:mod:`limno.api.local_auth`); an HTTP client of ``limno serve`` implements it with
requests that the server allows to admins only. Both return the plain values of
:mod:`limno.auth.model`. Pools are named by name or id here; grants are kept by
pool id, and listed with the pool's current name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from limno.auth.model import AccessKey, Grant, NewKey, User

__all__ = ["AuthAdmin"]


class AuthAdmin(ABC):
    """Users, access keys and per-pool grants of one lake."""

    @abstractmethod
    def users(self) -> list[User]:
        """Every user, by name."""

    @abstractmethod
    def user(self, name: str) -> User: ...

    @abstractmethod
    def create_user(self, name: str, role: str, key: bool = True) -> tuple[User, NewKey | None]:
        """A new user (role admin, developer or analyst) and, unless ``key`` is false, its
        first access key: the only time the key's secret is returned."""

    @abstractmethod
    def delete_user(self, name: str) -> User:
        """Delete a user and all of its keys (not the last admin)."""

    @abstractmethod
    def access_keys(self, user: str | None = None) -> list[AccessKey]:
        """Access keys (of ``user``), never their secrets."""

    @abstractmethod
    def create_key(self, user: str) -> NewKey:
        """A new access key: the only time its secret is returned."""

    @abstractmethod
    def delete_key(self, key_id: str) -> AccessKey: ...

    @abstractmethod
    def grants(self, user: str | None = None) -> list[Grant]:
        """Per-pool grants (of ``user``), with each pool's current name."""

    @abstractmethod
    def grant(self, user: str, pool: str, level: str) -> Grant:
        """Set ``user``'s level (none, read, write) on ``pool``, overriding the role."""

    @abstractmethod
    def revoke(self, user: str, pool: str) -> Grant:
        """Remove ``user``'s grant on ``pool``; the grant that was removed."""
