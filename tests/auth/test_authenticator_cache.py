"""The server's authenticator remembers a checked key for a few seconds: a key deleted
elsewhere stops working once that time has passed, and at once after ``forget``."""

from __future__ import annotations

from pathlib import Path

import pytest

from limno.api.local import LocalLake
from limno.auth.store import AuthStore, KeySecret
from limno.auth.verify import Authenticator
from limno.errors import UnauthenticatedError

SECRET = "a-server-secret-for-the-cache-test"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_deleted_key_works_until_the_cache_expires(tmp_path: Path) -> None:
    store = AuthStore(LocalLake.init(str(tmp_path / "lake")).storage, SECRET)
    _, key = store.create_user("ann", "analyst")
    assert key is not None
    clock = Clock()
    auth = Authenticator(store, ttl=5.0, clock=clock)
    assert auth.authenticate(key.access_key_id, key.secret_access_key).name == "ann"
    store.delete_key(key.access_key_id)  # by another process, say
    clock.now += 4.9
    assert auth.authenticate(key.access_key_id, key.secret_access_key).name == "ann"
    with pytest.raises(UnauthenticatedError):  # the secret is still compared
        auth.authenticate(key.access_key_id, "wrong")
    clock.now += 0.2
    with pytest.raises(UnauthenticatedError, match="invalid access key id or secret"):
        auth.authenticate(key.access_key_id, key.secret_access_key)


def test_forget_and_new_keys_take_effect_at_once(tmp_path: Path) -> None:
    store = AuthStore(LocalLake.init(str(tmp_path / "lake")).storage, SECRET)
    auth = Authenticator(store, ttl=5.0, clock=Clock())
    with pytest.raises(UnauthenticatedError):
        auth.authenticate("LKIANOTYET", "x")
    _, key = store.create_user("bob", "developer")
    assert key is not None
    # an unknown key is not remembered: a key made a moment ago works
    assert auth.authenticate(key.access_key_id, key.secret_access_key).role == "developer"
    store.delete_key(key.access_key_id)
    auth.forget()
    with pytest.raises(UnauthenticatedError):
        auth.authenticate(key.access_key_id, key.secret_access_key)


def test_a_lookup_that_a_forget_overtook_is_not_remembered(tmp_path: Path) -> None:
    """A change lands, and its forget runs, while a lookup is reading the store: what
    that lookup read may predate the change, so it is not remembered (it would be
    served for the cache's whole lifetime, undoing the forget)."""
    store = AuthStore(LocalLake.init(str(tmp_path / "lake")).storage, SECRET)
    _, key = store.create_user("cy", "developer")
    assert key is not None
    auth = Authenticator(store, ttl=5.0, clock=Clock())
    read = store.key_secret

    def read_then_change(access_key_id: str) -> KeySecret | None:
        found = read(access_key_id)  # what the store held when the lookup read it
        store.delete_key(access_key_id)  # the change lands, then its forget
        auth.forget()
        return found

    store.key_secret = read_then_change  # type: ignore[method-assign,assignment]
    assert auth.authenticate(key.access_key_id, key.secret_access_key).name == "cy"
    store.key_secret = read  # type: ignore[method-assign]
    with pytest.raises(UnauthenticatedError):  # not served from a stale memory
        auth.authenticate(key.access_key_id, key.secret_access_key)
