"""The auth store: users, keys and grants in the ``auth/`` journal, under concurrency.

Writers are separate stores (as two servers are) in threads and in processes; each
read-modify-write (a grant on a user, a key for a user) must survive every race.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from bounded import read_line, stop, whole_lines
from limno.api import Lake
from limno.auth import User
from limno.auth.store import AuthStore
from limno.auth.verify import Authenticator
from limno.errors import AlreadyExistsError, InvalidInputError, NotFoundError
from limno.storage import Storage, open_storage

SERVER = "server-secret-for-tests-0123456789"
WORKER = str(Path(__file__).with_name("auth_workers.py"))


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIMNO_AUTH_SECRET", SERVER)


def _in_threads(n: int, work: Callable[[int], None]) -> list[BaseException]:
    """Run ``work(i)`` for ``i < n`` at once, each in its own thread; the errors raised."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            work(i)
        except BaseException as e:  # collected for the test to judge
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a writer thread did not finish"
    return errors


def test_users_keys_and_grants(store: Storage) -> None:
    auth = AuthStore(store)
    assert auth.users() == [] and auth.access_keys() == []  # no auth/ journal yet: empty
    ann, new = auth.create_user("ann@example.com", "Analyst")
    assert ann.role == "analyst" and new is not None and new.user == "ann@example.com"
    assert auth.access_keys("ann@example.com")[0].id == new.access_key_id
    auth.create_user("dev", "developer", key=False)
    assert [u.name for u in auth.users()] == ["ann@example.com", "dev"]
    assert auth.access_keys("dev") == []
    widened = auth.grant("ann@example.com", "P1", "write")
    assert widened.grants == {"P1": "write"}
    auth.grant("ann@example.com", "P1", "read")  # a second grant replaces the first
    auth.grant("ann@example.com", "P2", "none")
    assert auth.user("ann@example.com").grants == {"P1": "read", "P2": "none"}
    assert auth.revoke("ann@example.com", "P1") == "read"
    assert auth.user("ann@example.com").grants == {"P2": "none"}
    key = auth.delete_key(new.access_key_id)
    assert key.user == "ann@example.com" and auth.access_keys() == []
    assert auth.delete_user("dev").role == "developer"
    assert [u.name for u in auth.users()] == ["ann@example.com"]
    assert list(auth.journal.verify()) == []


def test_refusals_change_nothing(store: Storage) -> None:
    auth = AuthStore(store)
    auth.create_user("root", "admin")
    head = auth.journal.journal.head()
    refusals: list[tuple[type[Exception], str, Callable[[], object]]] = [
        (
            AlreadyExistsError,
            "user 'root' already exists",
            lambda: auth.create_user("root", "analyst"),
        ),
        (NotFoundError, "user 'nobody' not found", lambda: auth.delete_user("nobody")),
        (NotFoundError, "user 'nobody' not found", lambda: auth.create_key("nobody")),
        (NotFoundError, "user 'nobody' not found", lambda: auth.grant("nobody", "P", "read")),
        (NotFoundError, "user 'nobody' not found", lambda: auth.user("nobody")),
        (NotFoundError, "user 'nobody' not found", lambda: auth.access_keys("nobody")),
        (NotFoundError, "access key 'LKIANOPE' not found", lambda: auth.delete_key("LKIANOPE")),
        (NotFoundError, "has no grant on pool P", lambda: auth.revoke("root", "P")),
        (
            InvalidInputError,
            "is an admin: grants do not apply",
            lambda: auth.grant("root", "P", "read"),
        ),
        (InvalidInputError, "the last admin", lambda: auth.delete_user("root")),
        (InvalidInputError, "unknown role", lambda: auth.create_user("x", "owner")),
        (InvalidInputError, "unknown grant level", lambda: auth.grant("root", "P", "all")),
        (InvalidInputError, "invalid user name", lambda: auth.create_user("a/b", "analyst")),
        (InvalidInputError, "invalid user name", lambda: auth.create_user("", "analyst")),
    ]
    for error, message, call in refusals:
        with pytest.raises(error, match=message):
            call()
    assert auth.journal.journal.head() == head
    auth.create_user("second", "admin", key=False)
    auth.delete_user("root")  # no longer the last admin
    assert auth.access_keys() == []  # its key went with it


def test_many_stores_in_threads_lose_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "lake")
    storage = open_storage(uri, create=True)
    AuthStore(storage).create_user("shared", "analyst", key=False)  # no key: no kdf yet
    made: dict[int, list[str]] = {}

    def work(i: int) -> None:
        auth = AuthStore(open_storage(uri))  # its own store: a server of its own
        made[i] = []
        for j in range(5):
            made[i].append(auth.create_key("shared").access_key_id)
            auth.grant("shared", f"t{i}-{j}", "write")

    assert _in_threads(4, work) == []
    auth = AuthStore(storage)
    assert sorted(k.id for k in auth.access_keys("shared")) == sorted(
        k for ks in made.values() for k in ks
    )
    assert set(auth.user("shared").grants) == {f"t{i}-{j}" for i in range(4) for j in range(5)}
    # the first keys raced to set up the key derivation: every key is sealed with the winner's
    for key in auth.access_keys():
        assert auth.key_secret(key.id) is not None
    assert list(auth.journal.verify()) == []


def test_the_same_user_is_created_once(store: Storage) -> None:
    winners: list[int] = []

    def work(i: int) -> None:
        AuthStore(store).create_user("same", ["admin", "developer", "analyst"][i % 3])
        winners.append(i)

    errors = _in_threads(6, work)
    assert len(winners) == 1
    assert len(errors) == 5 and all(isinstance(e, AlreadyExistsError) for e in errors)
    auth = AuthStore(store)
    assert len(auth.access_keys("same")) == 1  # the losers' keys were never written
    assert auth.user("same").role == ["admin", "developer", "analyst"][winners[0] % 3]


def test_two_processes_lose_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "lake")
    storage = open_storage(uri, create=True)
    AuthStore(storage).create_user("shared", "developer")
    go = tmp_path / f"go-{uuid.uuid4().hex}"
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, uri, tag, "15", str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert read_line(proc.stdout) == "ready"
        go.touch()
        acked = []
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
            acked += whole_lines(out)
    finally:
        stop(procs)
    auth = AuthStore(storage)
    assert len(acked) == 30
    assert set(acked) <= {k.id for k in auth.access_keys("shared")}
    grants = auth.user("shared").grants
    assert grants == {f"{t}-{j}": "write" if j % 2 else "read" for t in "ab" for j in range(15)}
    assert list(auth.journal.verify()) == []


def test_grants_follow_pool_ids_through_the_lake_interface(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    logs = lake.create_pool("logs")
    admin = lake.auth()
    admin.create_user("ann", "analyst")
    granted = admin.grant("ann", "logs", "write")
    assert (granted.pool, granted.pool_id, granted.level) == ("logs", logs.id, "write")
    lake.rename_pool("logs", "events")
    assert [(g.pool, g.level) for g in admin.grants("ann")] == [("events", "write")]
    # a new pool under the old name inherits nothing
    fresh = lake.create_pool("logs")
    user = admin.user("ann")
    assert isinstance(user, User)
    assert user.grants == {logs.id: "write"} and fresh.id not in user.grants
    lake.drop_pool("events")
    assert [(g.pool, g.pool_id) for g in admin.grants()] == [("", logs.id)]
    with pytest.raises(NotFoundError, match="has no grant on pool logs"):
        admin.revoke("ann", "logs")
    assert admin.revoke("ann", logs.id).level == "write"  # a dropped pool's grant, by id
    with pytest.raises(NotFoundError, match="pool 'nope' not found"):
        admin.grant("ann", "nope", "read")
    # the keys made through the interface authenticate against the same lake
    _, new = admin.create_user("dev", "developer")
    assert new is not None
    checker = Authenticator(AuthStore(lake.storage))  # type: ignore[attr-defined]
    assert checker.authenticate(new.access_key_id, new.secret_access_key).name == "dev"
