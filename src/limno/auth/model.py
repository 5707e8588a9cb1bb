"""What the auth store holds, as plain values: users, their grants, and access keys.

These are what :class:`limno.api.auth_admin.AuthAdmin` returns in this process and
what an HTTP client of ``limno serve`` rebuilds from JSON, so both give the CLI the
same values. Nothing here holds a secret except :class:`NewKey`, which exists only
to be shown once to the person who made the key (its ``repr`` hides the secret, so
a log of the value never shows it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from limno.errors import InvalidInputError

__all__ = ["AccessKey", "Grant", "NewKey", "User", "validate_user_name"]

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@+\-]{0,127}$")


def validate_user_name(name: str) -> str:
    """A plain name (an e-mail address is one): no ``/``, ``:`` or spaces, so that it is
    safe in a journal key, a URL path and an HTTP Basic user field."""
    if not _NAME.match(name or ""):
        raise InvalidInputError(
            f"invalid user name {name!r}: use letters, digits and '_ . @ + -'"
            " (not first: '. @ + -'; at most 128 characters)"
        )
    return name


@dataclass(frozen=True)
class User:
    """A user: a role, and grants by pool id (``none``, ``read`` or ``write``) that
    override the role for that pool. Grants name pools by id so that a renamed pool
    keeps them and a new pool that takes an old name does not inherit them."""

    name: str
    role: str
    created: str = ""
    grants: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "created": self.created,
            "grants": dict(self.grants),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> User:
        return cls(
            name=str(d["name"]),
            role=str(d["role"]),
            created=str(d.get("created", "")),
            grants={str(k): str(v) for k, v in dict(d.get("grants") or {}).items()},
        )


@dataclass(frozen=True)
class AccessKey:
    """An access key as listed: its id and owner, never its secret."""

    id: str
    user: str
    created: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "user": self.user, "created": self.created}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> AccessKey:
        return cls(id=str(d["id"]), user=str(d["user"]), created=str(d.get("created", "")))


@dataclass(frozen=True)
class NewKey:
    """A key just made: the only value that carries the plain secret (shown once)."""

    user: str
    access_key_id: str
    secret_access_key: str = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> NewKey:
        return cls(str(d["user"]), str(d["access_key_id"]), str(d["secret_access_key"]))


@dataclass(frozen=True)
class Grant:
    """One grant as listed: ``pool`` is the pool's current name ('' once it is dropped)."""

    user: str
    pool_id: str
    pool: str
    level: str

    def to_json(self) -> dict[str, Any]:
        return {"user": self.user, "pool_id": self.pool_id, "pool": self.pool, "level": self.level}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Grant:
        return cls(str(d["user"]), str(d["pool_id"]), str(d.get("pool", "")), str(d["level"]))
