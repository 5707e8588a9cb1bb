"""Secrets at rest and credentials: sealing, the server secret, checking, finding.

Real lakes on disk, real AES-GCM; the raw bytes of the lake are read back to show
that no secret is stored in plain text.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from limno.api import Lake
from limno.auth import crypto
from limno.auth.crypto import SecretBox, new_kdf
from limno.auth.store import AuthStore
from limno.auth.verify import (
    Authenticator,
    Credentials,
    authorization_header,
    credentials,
    credentials_path,
    parse_authorization,
)
from limno.errors import InvalidInputError, UnauthenticatedError
from limno.storage import open_storage

SERVER = "server-secret-for-tests-0123456789"
OTHER = "another-server-secret-9876543210"


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIMNO_AUTH_SECRET", SERVER)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("LIMNO_ACCESS_KEY_ID", "LIMNO_SECRET_ACCESS_KEY", "LIMNO_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def _lake_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def test_seal_and_open_round_trip_bound_to_the_key_id() -> None:
    kdf = new_kdf()
    box = SecretBox(SERVER, kdf)
    secret = crypto.new_secret()
    sealed = box.seal(secret, "LKIAAAAAAAAAAAAAAAAA")
    assert secret not in sealed and sealed.startswith("v1.")
    assert box.seal(secret, "LKIAAAAAAAAAAAAAAAAA") != sealed  # a fresh nonce each time
    assert SecretBox(SERVER, kdf).open(sealed, "LKIAAAAAAAAAAAAAAAAA") == secret
    with pytest.raises(InvalidInputError, match="cannot decrypt the secret of LKIAB"):
        box.open(sealed, "LKIABBBBBBBBBBBBBBBB")  # moved to another key's record
    with pytest.raises(InvalidInputError, match="LIMNO_AUTH_SECRET is not the value"):
        SecretBox(OTHER, kdf).open(sealed, "LKIAAAAAAAAAAAAAAAAA")
    with pytest.raises(InvalidInputError):
        SecretBox(SERVER, new_kdf()).open(sealed, "LKIAAAAAAAAAAAAAAAAA")  # another lake's salt


def test_key_ids_and_secrets_have_their_documented_shape() -> None:
    ids = {crypto.new_key_id() for _ in range(200)}
    secrets = {crypto.new_secret() for _ in range(200)}
    assert len(ids) == 200 and len(secrets) == 200
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    for key_id in ids:
        assert len(key_id) == 20 and key_id.startswith("LKIA") and set(key_id[4:]) <= alphabet
    for secret in secrets:
        assert len(secret) == 40 and secret.isalnum() and secret.isascii()


def test_the_server_secret_must_be_set_and_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LIMNO_AUTH_SECRET")
    with pytest.raises(InvalidInputError, match="LIMNO_AUTH_SECRET is not set"):
        crypto.server_secret()
    monkeypatch.setenv("LIMNO_AUTH_SECRET", "short")
    with pytest.raises(InvalidInputError, match="too short"):
        crypto.server_secret()
    assert crypto.server_secret(SERVER) == SERVER


def test_no_secret_is_stored_in_plain_text(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    lake.create_pool("logs")
    admin = lake.auth()
    _, first = admin.create_user("alice", "developer")
    second = admin.create_key("alice")
    admin.grant("alice", "logs", "read")
    assert first is not None
    raw = _lake_bytes(tmp_path / "lake")
    assert b"alice" in raw  # the auth journal is there...
    for new in (first, second):
        assert new.access_key_id.encode() in raw
        # ...but neither secret, nor its base64
        assert new.secret_access_key.encode() not in raw
        assert base64.b64encode(new.secret_access_key.encode())[:40] not in raw
        assert new.secret_access_key not in repr(new)
    assert SERVER.encode() not in raw
    # and the server can recover each secret from what is stored
    store = AuthStore(open_storage(str(tmp_path / "lake")))
    found = store.key_secret(second.access_key_id)
    assert found is not None and found.secret == second.secret_access_key
    assert second.secret_access_key not in repr(found)


def test_a_wrong_server_secret_fails_cleanly_and_changes_nothing(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path / "s"), create=True)
    _, new = AuthStore(storage).create_user("alice", "analyst")
    assert new is not None
    wrong = AuthStore(storage, server_secret=OTHER)
    head = wrong.journal.journal.head()
    with pytest.raises(InvalidInputError, match="not the server secret this lake"):
        wrong.create_key("alice")
    with pytest.raises(InvalidInputError, match="not the server secret this lake"):
        wrong.create_user("bob", "analyst")
    with pytest.raises(InvalidInputError, match="not the server secret this lake"):
        Authenticator(wrong).authenticate(new.access_key_id, new.secret_access_key)
    assert wrong.journal.journal.head() == head
    assert [u.name for u in wrong.users()] == ["alice"]  # listing needs no secret


def test_making_a_key_without_the_server_secret_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LIMNO_AUTH_SECRET")
    storage = open_storage(str(tmp_path / "s"), create=True)
    store = AuthStore(storage)
    with pytest.raises(InvalidInputError, match="LIMNO_AUTH_SECRET is not set"):
        store.create_user("alice", "admin")
    assert not store.journal.exists()
    user, new = store.create_user("alice", "admin", key=False)  # a user alone needs none
    assert new is None and store.users() == [user]
    with pytest.raises(InvalidInputError, match="LIMNO_AUTH_SECRET is not set"):
        store.create_key("alice")
    assert store.access_keys() == []


def test_authenticate(tmp_path: Path) -> None:
    store = AuthStore(open_storage(str(tmp_path / "s"), create=True))
    user, new = store.create_user("alice", "developer")
    assert new is not None
    auth = Authenticator(store)
    assert auth.authenticate(new.access_key_id, new.secret_access_key) == user
    assert auth.secret(new.access_key_id) == (user, new.secret_access_key)
    header = authorization_header(Credentials(new.access_key_id, new.secret_access_key))
    assert auth.authenticate_header(header) == user
    failures = [
        (new.access_key_id, new.secret_access_key[:-1] + "x"),  # wrong secret
        ("LKIAAAAAAAAAAAAAAAAA", new.secret_access_key),  # unknown key
        (new.access_key_id, new.secret_access_key + "x"),  # longer
        (new.access_key_id, "é"),  # not ASCII: still just a wrong secret
    ]
    messages = set()
    for key_id, secret in failures:
        with pytest.raises(UnauthenticatedError) as caught:
            auth.authenticate(key_id, secret)
        messages.add(str(caught.value))
        assert new.secret_access_key not in str(caught.value)
    assert messages == {"invalid access key id or secret"}  # which part was wrong is not told
    missing: list[tuple[str | None, str | None]] = [
        (None, None),
        (new.access_key_id, ""),
        ("", "x"),
    ]
    for absent_id, absent_secret in missing:
        with pytest.raises(UnauthenticatedError, match="credentials required"):
            auth.authenticate(absent_id, absent_secret)
    with pytest.raises(UnauthenticatedError):
        auth.secret("LKIAAAAAAAAAAAAAAAAA")
    # a deleted key, and the keys of a deleted user, stop working at once
    second = store.create_key("alice")
    store.delete_key(new.access_key_id)
    with pytest.raises(UnauthenticatedError):
        auth.authenticate(new.access_key_id, new.secret_access_key)
    assert auth.authenticate(second.access_key_id, second.secret_access_key) == user
    store.create_user("root", "admin", key=False)
    store.delete_user("alice")
    with pytest.raises(UnauthenticatedError):
        auth.authenticate(second.access_key_id, second.secret_access_key)
    assert UnauthenticatedError.status == 401


def test_authorization_headers() -> None:
    creds = Credentials("LKIAAAAAAAAAAAAAAAAA", "s3cr:et")  # a ':' in the secret survives
    assert parse_authorization(authorization_header(creds)) == ("LKIAAAAAAAAAAAAAAAAA", "s3cr:et")
    assert "s3cr" not in repr(creds)
    for bad in ["Bearer abc", "Basic !!!", "Basic " + base64.b64encode(b"no-colon").decode()]:
        with pytest.raises(UnauthenticatedError):
            parse_authorization(bad)
    with pytest.raises(UnauthenticatedError, match="credentials required"):
        parse_authorization(None)


def test_credentials_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert credentials() is None
    monkeypatch.setenv("LIMNO_ACCESS_KEY_ID", "LKIAENV")
    with pytest.raises(InvalidInputError, match="LIMNO_SECRET_ACCESS_KEY is not set"):
        credentials()
    monkeypatch.setenv("LIMNO_SECRET_ACCESS_KEY", "envsecret")
    assert credentials() == Credentials("LKIAENV", "envsecret")


def test_credentials_from_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = credentials_path()
    assert path == tmp_path / "config" / "limno" / "credentials"
    path.parent.mkdir(parents=True)
    path.write_text(
        "# limno keys\n[default]\naccess_key_id = LKIADEF\nsecret_access_key = defsecret\n\n"
        "[ci]\naccess_key_id=LKIACI\nsecret_access_key=cisecret\n"
    )
    assert credentials() == Credentials("LKIADEF", "defsecret")
    assert credentials("ci") == Credentials("LKIACI", "cisecret")
    monkeypatch.setenv("LIMNO_PROFILE", "ci")
    assert credentials() == Credentials("LKIACI", "cisecret")
    assert credentials("missing") is None
    monkeypatch.setenv("LIMNO_ACCESS_KEY_ID", "LKIAENV")
    monkeypatch.setenv("LIMNO_SECRET_ACCESS_KEY", "envsecret")
    assert credentials() == Credentials("LKIAENV", "envsecret")  # the environment wins
    monkeypatch.delenv("LIMNO_ACCESS_KEY_ID")
    monkeypatch.delenv("LIMNO_SECRET_ACCESS_KEY")
    path.write_text("secret_access_key = leaked-if-quoted\n[default]\n")
    with pytest.raises(InvalidInputError, match="not a credentials file") as caught:
        credentials()
    assert "leaked-if-quoted" not in str(caught.value)
    monkeypatch.delenv("LIMNO_PROFILE")
    path.write_text("[default]\naccess_key_id = LKIAONLY\n")
    with pytest.raises(InvalidInputError, match=r"\[default\] needs both"):
        credentials()
