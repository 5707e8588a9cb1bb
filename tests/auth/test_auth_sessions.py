"""Web UI sessions by key generation: signing out (``end_sessions``) ends every session
signed in before it, here at once and in another server process within its cache
time; a session signed in after it is never refused by a process that remembers
the key from before."""

from __future__ import annotations

from pathlib import Path

import pytest

from limno.api.local import LocalLake
from limno.auth.store import AuthStore
from limno.auth.verify import Authenticator
from limno.errors import NotFoundError, UnauthenticatedError

SECRET = "a-server-secret-for-the-session-test"


def _store(tmp_path: Path, user: str) -> tuple[AuthStore, str, str]:
    """An auth store with ``user`` (an analyst): its key id and secret."""
    store = AuthStore(LocalLake.init(str(tmp_path / "lake")).storage, SECRET)
    _, key = store.create_user(user, "analyst")
    assert key is not None
    return store, key.access_key_id, key.secret_access_key


def test_sign_out_ends_sessions_here_at_once_and_elsewhere_within_the_ttl(tmp_path: Path) -> None:
    store, kid, secret = _store(tmp_path, "ann")
    here, there = (Authenticator(store, ttl=5.0, clock=lambda: 100.0) for _ in range(2))
    user, old = here.sign_in(kid, secret)
    assert (user.name, old) == ("ann", 0)
    assert there.session_user(kid, old).name == "ann"  # remembered by `there` now
    here.end_sessions(kid)
    with pytest.raises(UnauthenticatedError, match="session has ended"):
        here.session_user(kid, old)
    # a new sign-in (here) works at once in the process that still remembers gen 0
    _, new = here.sign_in(kid, secret)
    assert new == old + 1
    assert there.session_user(kid, new).name == "ann"
    # ...which re-read the key: the old session is refused there too now
    with pytest.raises(UnauthenticatedError):
        there.session_user(kid, old)
    # the API's Basic auth is not a session: signing out does not touch it
    assert here.authenticate(kid, secret).name == "ann"
    with pytest.raises(NotFoundError):
        store.end_sessions("LKIANOSUCHKEY")


def test_another_process_sees_a_sign_out_once_its_memory_expires(tmp_path: Path) -> None:
    store, kid, secret = _store(tmp_path, "bob")
    now = [100.0]
    there = Authenticator(store, ttl=5.0, clock=lambda: now[0])
    _, gen = there.sign_in(kid, secret)
    store.end_sessions(kid)  # by another server process
    assert there.session_user(kid, gen).name == "bob"
    now[0] += 5.1
    with pytest.raises(UnauthenticatedError):
        there.session_user(kid, gen)
