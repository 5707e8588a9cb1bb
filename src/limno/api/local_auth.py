"""User management in this process: :class:`AuthAdmin` on the lake's own auth store.

A lake opened directly is not guarded (whoever reaches its bytes may do anything),
so this does what it is asked; a server guards the same operations with its
callers' roles. Pool names become ids here, where the pool registry is at hand.
"""

from __future__ import annotations

from limno.api.auth_admin import AuthAdmin
from limno.auth.model import AccessKey, Grant, NewKey, User
from limno.auth.store import AuthStore
from limno.errors import NotFoundError
from limno.lake import Lake

__all__ = ["LocalAuth"]


class LocalAuth(AuthAdmin):
    """Users, keys and grants of a lake in this process. ``server_secret``: the secret
    that seals key secrets (default ``$LIMNO_AUTH_SECRET``, read when needed)."""

    def __init__(self, lake: Lake, server_secret: str | None = None) -> None:
        self.lake = lake
        self.store = AuthStore(lake.storage, server_secret)

    def users(self) -> list[User]:
        return self.store.users()

    def user(self, name: str) -> User:
        return self.store.user(name)

    def create_user(self, name: str, role: str, key: bool = True) -> tuple[User, NewKey | None]:
        return self.store.create_user(name, role, key)

    def delete_user(self, name: str) -> User:
        return self.store.delete_user(name)

    def access_keys(self, user: str | None = None) -> list[AccessKey]:
        return self.store.access_keys(user)

    def create_key(self, user: str) -> NewKey:
        return self.store.create_key(user)

    def delete_key(self, key_id: str) -> AccessKey:
        return self.store.delete_key(key_id)

    def grants(self, user: str | None = None) -> list[Grant]:
        users = [self.store.user(user)] if user is not None else self.store.users()
        names = {p.id: p.name for p in self.lake.list_pools()}
        return [
            Grant(u.name, pool_id, names.get(pool_id, ""), level)
            for u in users
            for pool_id, level in sorted(u.grants.items(), key=lambda g: names.get(g[0], g[0]))
        ]

    def grant(self, user: str, pool: str, level: str) -> Grant:
        config = self.lake.registry.find(pool)
        changed = self.store.grant(user, config.id, level)
        return Grant(user, config.id, config.name, changed.grants[config.id])

    def revoke(self, user: str, pool: str) -> Grant:
        pool_id, name = self._pool_of_grant(user, pool)
        if pool_id not in self.store.user(user).grants:  # the store checks again, atomically
            raise NotFoundError(f"user {user!r} has no grant on pool {name or pool_id}")
        return Grant(user, pool_id, name, self.store.revoke(user, pool_id))

    def _pool_of_grant(self, user: str, pool: str) -> tuple[str, str]:
        """(id, name) of ``pool``: a pool of the lake, or the id of a dropped pool that
        ``user`` still has a grant on (so that such a grant can be revoked)."""
        try:
            config = self.lake.registry.find(pool)
        except NotFoundError:
            if pool in self.store.user(user).grants:
                return pool, ""
            raise
        return config.id, config.name
