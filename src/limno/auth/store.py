"""Users, access keys and grants, kept in the lake's ``auth/`` journal.

One :class:`~limno.journal.JournalStore` map holds everything, so a change that
touches several records (a user and the first key; a user and all of its keys) is
one entry, all or nothing. Keys of the map:

``kdf``             key-derivation settings and a sealed check value (limno.auth.crypto)
``user/<name>``     a user: role, created, grants ``{pool id: level}``
``key/<id>``        an access key: owner, created, the sealed secret, and ``sessions``:
                    the generation of its web UI sessions (signing out bumps it, which
                    ends every UI session signed in with the key: see limno.ui.session)

Every change is computed from the state it follows and appended with
put-if-absent (:meth:`JournalStore.commit` re-reads and recomputes on a race), so
two servers writing at once never lose an update, and a requirement such as
"the user does not exist yet" holds at the entry that records it. A journal entry
holds a secret only sealed; an entry's ``meta`` says what changed, never a secret.

A lake made before auth existed has no ``auth/`` journal: it reads as empty and is
created by the first change.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from limno.auth.model import AccessKey, NewKey, User, validate_user_name
from limno.auth.roles import parse_level, parse_role
from limno.errors import AlreadyExistsError, InvalidInputError, NotFoundError
from limno.journal import JournalStore, Put, Remove, StoreState, Update
from limno.lazy import lazy_module
from limno.storage import Storage

if TYPE_CHECKING:
    from limno.auth import crypto
else:
    crypto = lazy_module("limno.auth.crypto")  # cryptography: only to seal or open a secret

__all__ = ["PREFIX", "AuthStore", "KeySecret"]

PREFIX = "auth"
_KDF = "kdf"
_USER = "user/"
_KEY = "key/"


@dataclass(frozen=True)
class KeySecret:
    """A key, its owner and its plain secret: what a server checks a request against."""

    key: AccessKey
    user: User
    secret: str = field(repr=False)
    #: the generation of the key's web UI sessions: a session signed in at a lower one
    #: has ended (signed out)
    sessions: int = 0


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class AuthStore:
    """Users, keys and grants of one lake.

    ``server_secret`` seals and opens key secrets (default: ``$LIMNO_AUTH_SECRET``,
    read when first needed, so listing works without it).
    """

    def __init__(self, storage: Storage, server_secret: str | None = None) -> None:
        self.journal = JournalStore(storage, PREFIX)
        self._server_secret = server_secret

    # -- reading -------------------------------------------------------------------
    def _state(self) -> StoreState:
        if not self.journal.exists():
            return StoreState(0, {})
        return self.journal.state()

    def users(self) -> list[User]:
        items = self._state().items
        return [User.from_json(v) for k, v in sorted(items.items()) if k.startswith(_USER)]

    def user(self, name: str) -> User:
        found = self._state().items.get(_USER + name)
        if found is None:
            raise NotFoundError(f"user {name!r} not found")
        return User.from_json(found)

    def access_keys(self, user: str | None = None) -> list[AccessKey]:
        """Access keys (of ``user``), by id; never their secrets."""
        items = self._state().items
        if user is not None and _USER + user not in items:
            raise NotFoundError(f"user {user!r} not found")
        found = [AccessKey.from_json(v) for k, v in sorted(items.items()) if k.startswith(_KEY)]
        return [k for k in found if user is None or k.user == user]

    def key_secret(self, key_id: str) -> KeySecret | None:
        """The key ``key_id`` with its owner and plain secret; None when there is no such
        key (or its owner is gone). Needs the server secret."""
        items = self._state().items
        record = items.get(_KEY + key_id)
        owner = None if record is None else items.get(_USER + str(record.get("user")))
        if record is None or owner is None:
            return None
        box = self._box(items)[0]
        key = AccessKey.from_json(record)
        secret = box.open(str(record["secret"]), key.id)
        return KeySecret(key, User.from_json(owner), secret, int(record.get("sessions", 0)))

    def check_server_secret(self) -> None:
        """InvalidInputError when the server secret is missing, too short, or not the one
        this lake's key secrets are sealed with (a server checks at start)."""
        crypto.server_secret(self._server_secret)
        kdf = self._state().items.get(_KDF)
        if kdf is not None:
            self._box({_KDF: kdf})

    # -- writing -------------------------------------------------------------------
    def _commit(self, updates: Any, meta: Mapping[str, Any]) -> StoreState:
        if not self.journal.exists():
            with contextlib.suppress(AlreadyExistsError):  # another writer made it
                self.journal.create()
        return self.journal.commit(updates, meta=meta)

    def _box(self, items: Mapping[str, Any]) -> tuple[crypto.SecretBox, list[Update]]:
        """The box for this lake's secrets, and the update that records new key
        derivation settings when the lake has none yet (to go in the same entry)."""
        secret = crypto.server_secret(self._server_secret)
        kdf = items.get(_KDF)
        if kdf is not None:
            box = crypto.SecretBox(secret, kdf)
            box.verify_check(str(kdf.get("check", "")))
            return box, []
        fresh = crypto.new_kdf()
        box = crypto.SecretBox(secret, fresh)
        return box, [Put(_KDF, {**fresh, "check": box.check_value()})]

    def _new_key(
        self, items: Mapping[str, Any], user: str, key_id: str, secret: str
    ) -> list[Update]:
        if _KEY + key_id in items:  # 80 random bits: only a broken random source repeats
            raise AlreadyExistsError(f"access key {key_id} already exists")
        box, setup = self._box(items)
        record = {"id": key_id, "user": user, "created": _now(), "secret": box.seal(secret, key_id)}
        return [*setup, Put(_KEY + key_id, record)]

    def create_user(self, name: str, role: str, key: bool = True) -> tuple[User, NewKey | None]:
        """A new user with role ``role`` and, unless ``key`` is false, a first access key
        (made in the same entry: the user never exists without it)."""
        validate_user_name(name)
        user = User(name, parse_role(role), _now())
        new = None
        if key:
            crypto.server_secret(self._server_secret)  # before anything is written
            new = NewKey(name, crypto.new_key_id(), crypto.new_secret())

        def updates(state: StoreState) -> list[Update]:
            if _USER + name in state.items:
                raise AlreadyExistsError(f"user {name!r} already exists")
            todo: list[Update] = [Put(_USER + name, user.to_json())]
            if new is not None:
                todo += self._new_key(state.items, name, new.access_key_id, new.secret_access_key)
            return todo

        self._commit(updates, {"op": "create-user", "user": name})
        return user, new

    def delete_user(self, name: str) -> User:
        """Delete a user and every key of theirs (one entry). The last admin stays: a
        server would be left with nobody to manage it."""
        found: list[User] = []

        def updates(state: StoreState) -> list[Update]:
            record = state.items.get(_USER + name)
            if record is None:
                raise NotFoundError(f"user {name!r} not found")
            user = User.from_json(record)
            admins = [
                k for k, v in state.items.items() if k.startswith(_USER) and v["role"] == "admin"
            ]
            if user.role == "admin" and admins == [_USER + name]:
                raise InvalidInputError(f"user {name!r} is the last admin: create another first")
            found[:] = [user]
            keys = [k for k, v in state.items.items() if k.startswith(_KEY) and v["user"] == name]
            return [Remove(_USER + name), *(Remove(k) for k in keys)]

        self._commit(updates, {"op": "delete-user", "user": name})
        return found[0]

    def create_key(self, user: str) -> NewKey:
        """A new access key for ``user``; the only time its secret is returned."""
        crypto.server_secret(self._server_secret)
        new = NewKey(user, crypto.new_key_id(), crypto.new_secret())

        def updates(state: StoreState) -> list[Update]:
            if _USER + user not in state.items:
                raise NotFoundError(f"user {user!r} not found")
            return self._new_key(state.items, user, new.access_key_id, new.secret_access_key)

        self._commit(updates, {"op": "create-key", "user": user, "key": new.access_key_id})
        return new

    def delete_key(self, key_id: str) -> AccessKey:
        found: list[AccessKey] = []

        def updates(state: StoreState) -> list[Update]:
            record = state.items.get(_KEY + key_id)
            if record is None:
                raise NotFoundError(f"access key {key_id!r} not found")
            found[:] = [AccessKey.from_json(record)]
            return [Remove(_KEY + key_id)]

        self._commit(updates, {"op": "delete-key", "key": key_id})
        return found[0]

    def end_sessions(self, key_id: str) -> int:
        """End every web UI session signed in with key ``key_id`` (sign-out): bump the
        key's session generation, which a session must match; the new generation."""
        bumped: list[int] = []

        def updates(state: StoreState) -> list[Update]:
            record = state.items.get(_KEY + key_id)
            if record is None:
                raise NotFoundError(f"access key {key_id!r} not found")
            bumped[:] = [int(record.get("sessions", 0)) + 1]
            return [Put(_KEY + key_id, {**record, "sessions": bumped[0]})]

        self._commit(updates, {"op": "end-sessions", "key": key_id})
        return bumped[0]

    def grant(self, user: str, pool_id: str, level: str) -> User:
        """Set ``user``'s level on pool ``pool_id`` (none, read, write), whatever the role."""
        level = parse_level(level)
        return self._change_grants(user, pool_id, level, "grant")

    def revoke(self, user: str, pool_id: str) -> str:
        """Remove ``user``'s grant on ``pool_id`` (the role decides again); its level."""
        removed: list[str] = []
        self._change_grants(user, pool_id, None, "revoke", removed)
        return removed[0]

    def _change_grants(
        self, name: str, pool_id: str, level: str | None, op: str, removed: list[str] | None = None
    ) -> User:
        changed: list[User] = []

        def updates(state: StoreState) -> list[Update]:
            record = state.items.get(_USER + name)
            if record is None:
                raise NotFoundError(f"user {name!r} not found")
            user = User.from_json(record)
            grants = dict(user.grants)
            if level is None:
                if pool_id not in grants:
                    raise NotFoundError(f"user {name!r} has no grant on pool {pool_id}")
                popped = grants.pop(pool_id)
                if removed is not None:
                    removed[:] = [popped]
            elif user.role == "admin":
                raise InvalidInputError(f"user {name!r} is an admin: grants do not apply")
            else:
                grants[pool_id] = level
            new = User(user.name, user.role, user.created, grants)
            changed[:] = [new]
            return [Put(_USER + name, new.to_json())]

        meta = {"op": op, "user": name, "pool": pool_id, **({"level": level} if level else {})}
        self._commit(updates, meta)
        return changed[0]
