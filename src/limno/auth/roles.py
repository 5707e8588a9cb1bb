"""Roles, actions and the one decision: may this user do this to this pool?

Three roles (lakeFS's, reduced): **admin** may do everything, user management
included; **developer** reads and writes every pool; **analyst** reads every pool.
Three actions: ``read``, ``write`` and ``admin`` (users, keys and grants). A grant
sets a user's level on one pool (by id) to ``none``, ``read`` or ``write``,
whatever the role says: it widens (an analyst with ``write`` on ``logs`` may load
into ``logs``) or narrows (a developer with ``read`` on ``logs`` may only read it;
``none`` hides a pool from an analyst). Grants never give ``admin``, and an admin
has no grants: nothing narrows an admin, who could undo it anyway.

The server maps each request to an action and a pool before it touches anything,
so that a forbidden request changes nothing:

=========================================  ==========  =================
request                                    action      pool
=========================================  ==========  =================
list pools, meta table ``:pools``          read        none (the lake)
read a pool (scan, get, log, diff, query)  read        the pool's id
write a pool (load, commit, branch, merge  write       the pool's id
... compact, vacuum, drop, rename)
create a pool                              write       none (the lake)
users, keys, grants                        admin       none
=========================================  ==========  =================

A query over several pools needs ``read`` on each pool it names.
"""

from __future__ import annotations

from limno.auth.model import User
from limno.errors import ForbiddenError, InvalidInputError

__all__ = [
    "ACTIONS",
    "LEVELS",
    "ROLES",
    "allowed",
    "check",
    "level_for",
    "parse_level",
    "parse_role",
]

ROLES = ("admin", "developer", "analyst")
ACTIONS = ("read", "write", "admin")
#: what a grant may set a pool to, weakest first
LEVELS = ("none", "read", "write")

_ROLE_LEVEL = {"developer": "write", "analyst": "read"}
_RANK = {"none": 0, "read": 1, "write": 2}


def parse_role(text: str) -> str:
    """A role by name, any case (``Developer``, ``developer``)."""
    role = (text or "").strip().lower()
    if role not in ROLES:
        raise InvalidInputError(f"unknown role {text!r} (one of {', '.join(ROLES)})")
    return role


def parse_level(text: str) -> str:
    """A grant level by name, any case."""
    level = (text or "").strip().lower()
    if level not in LEVELS:
        raise InvalidInputError(f"unknown grant level {text!r} (one of {', '.join(LEVELS)})")
    return level


def level_for(user: User, pool: str | None) -> str:
    """The user's level on ``pool`` (an id; None: the lake as a whole): the grant on it
    if there is one, else the role's. An admin's is ``write`` everywhere."""
    if user.role == "admin":
        return "write"
    if user.role not in _ROLE_LEVEL:
        return "none"  # a role this version does not know grants nothing
    if pool is not None and pool in user.grants:
        granted = user.grants[pool]
        return granted if granted in _RANK else "none"
    return _ROLE_LEVEL[user.role]


def allowed(user: User, action: str, pool: str | None = None) -> bool:
    """Whether ``user`` may do ``action`` (read, write, admin) on ``pool`` (an id, or
    None for the lake as a whole)."""
    if action not in ACTIONS:
        raise InvalidInputError(f"unknown action {action!r} (one of {', '.join(ACTIONS)})")
    if action == "admin":
        return user.role == "admin"
    return _RANK[level_for(user, pool)] >= _RANK[action]


def check(user: User, action: str, pool: str | None = None, what: str | None = None) -> None:
    """ForbiddenError unless :func:`allowed`; ``what`` names the target in the message
    (default: the pool id, or the lake)."""
    if not allowed(user, action, pool):
        target = what or (f"pool {pool}" if pool else "the lake")
        verb = {"read": "read", "write": "write to", "admin": "administer"}[action]
        raise ForbiddenError(f"user {user.name!r} ({user.role}) may not {verb} {target}")
