"""Checking credentials (the server's side) and finding them (the client's side).

**How a request authenticates.** HTTP Basic: ``Authorization: Basic`` and base64 of
``ACCESS_KEY_ID:SECRET``, over TLS wherever the network is not trusted. The server
recovers the key's secret from its sealed form and compares it in constant time.
One key pair serves both the HTTP API and, next, the S3 gateway, whose SigV4
signatures the server checks with the same recovered secret
(:meth:`Authenticator.secret`). Bearer tokens would need a second kind of
credential to issue and revoke; Basic needs none, and every HTTP client has it.

**Where a client finds its key.** ``LIMNO_ACCESS_KEY_ID`` and
``LIMNO_SECRET_ACCESS_KEY`` (both, or neither), else the credentials file
``$XDG_CONFIG_HOME/limno/credentials`` (default ``~/.config/limno/credentials``),
an INI file with one section per profile (``LIMNO_PROFILE``, default ``default``)::

    [default]
    access_key_id = LKIA...
    secret_access_key = ...

Keep it private (``chmod 600``). No message here ever quotes a secret.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from limno.auth.model import User
from limno.auth.store import AuthStore, KeySecret
from limno.errors import InvalidInputError, UnauthenticatedError

__all__ = [
    "ENV_KEY_ID",
    "ENV_PROFILE",
    "ENV_SECRET",
    "Authenticator",
    "Credentials",
    "authorization_header",
    "credentials",
    "credentials_path",
    "parse_authorization",
]

ENV_KEY_ID = "LIMNO_ACCESS_KEY_ID"
ENV_SECRET = "LIMNO_SECRET_ACCESS_KEY"
ENV_PROFILE = "LIMNO_PROFILE"
_BAD = "invalid access key id or secret"
#: a server's words (a client says where its own credentials come from)
_MISSING = "credentials required: HTTP Basic with an access key id and its secret"
#: compared against when the key id is unknown, so that both failures cost the same
_DUMMY = b"0" * 40
#: keys an Authenticator remembers at most (then it starts over)
_CACHE_SIZE = 10_000


@dataclass(frozen=True)
class Credentials:
    """A client's key pair (``repr`` hides the secret)."""

    access_key_id: str
    secret_access_key: str = field(repr=False)


class Authenticator:
    """Checks credentials against a lake's auth store (one per server process).

    ``ttl`` > 0: a key found in the store is remembered that many seconds (its owner,
    role, grants and decrypted secret), so that a busy server does not read the
    auth journal on every request. A key deleted (or a grant changed) by another
    process is seen within ``ttl``; changes this server makes itself call
    :meth:`forget`. Unknown keys are never remembered: a new key works at once.
    Thread-safe.
    """

    def __init__(
        self, store: AuthStore, ttl: float = 0.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self._ttl = ttl
        self._clock = clock
        self._cache: dict[str, tuple[float, KeySecret]] = {}
        self._lock = threading.Lock()
        #: bumped by :meth:`forget`: a lookup that read the store before a forget must
        #: not remember what it read (the change being forgotten may postdate it)
        self._generation = 0

    def _remembered(self, access_key_id: str) -> KeySecret | None:
        """The key as remembered, if it still is (no I/O)."""
        if self._ttl <= 0:
            return None
        with self._lock:
            hit = self._cache.get(access_key_id)
        return hit[1] if hit is not None and hit[0] > self._clock() else None

    def _lookup(self, access_key_id: str, fresh: bool = False) -> KeySecret | None:
        """The key (``fresh``: read from the store, not remembered)."""
        if self._ttl <= 0:
            return self.store.key_secret(access_key_id)
        if not fresh and (hit := self._remembered(access_key_id)) is not None:
            return hit
        now = self._clock()
        with self._lock:
            generation = self._generation
        found = self.store.key_secret(access_key_id)
        with self._lock:
            if found is None:
                self._cache.pop(access_key_id, None)
            elif generation == self._generation:
                if len(self._cache) >= _CACHE_SIZE:
                    self._cache.clear()
                self._cache[access_key_id] = (now + self._ttl, found)
        return found

    def forget(self) -> None:
        """Drop what is remembered (after a change to users, keys or grants)."""
        with self._lock:
            self._cache.clear()
            self._generation += 1

    def authenticate(self, access_key_id: str | None, secret: str | None) -> User:
        """The user whose key this is; UnauthenticatedError when credentials are missing
        or do not match (the same message for an unknown key and a wrong secret)."""
        return self._matching(access_key_id, secret).user

    def _matching(
        self, access_key_id: str | None, secret: str | None, fresh: bool = False
    ) -> KeySecret:
        if not access_key_id or not secret:
            raise UnauthenticatedError(_MISSING)
        found = self._lookup(access_key_id, fresh)
        expected = found.secret.encode() if found is not None else _DUMMY
        matches = hmac.compare_digest(expected, secret.encode())
        if found is None or not matches:
            raise UnauthenticatedError(_BAD)
        return found

    # -- web UI sessions (limno.ui.session) ------------------------------------------
    def sign_in(self, access_key_id: str | None, secret: str | None) -> tuple[User, int]:
        """:meth:`authenticate` for a new UI session, and the key's session generation
        read from the store now (not remembered: a sign-out by another server process
        a moment ago has bumped it, and the new session must not start behind it)."""
        found = self._matching(access_key_id, secret, fresh=True)
        return found.user, found.sessions

    def session_user(self, access_key_id: str, generation: int) -> User:
        """The owner of a UI session signed in with ``access_key_id`` at session
        ``generation``; UnauthenticatedError when the key (or its user) is gone or its
        sessions were ended since (signed out). Another process's sign-out is seen
        within ``ttl``; this process's at once (:meth:`end_sessions` forgets)."""
        found = self._lookup(access_key_id)
        if found is not None and found.sessions < generation:  # remembered from before
            found = self._lookup(access_key_id, fresh=True)
        if found is None or found.sessions != generation:
            raise UnauthenticatedError("the session has ended: sign in again")
        return found.user

    def end_sessions(self, access_key_id: str) -> None:
        """End every UI session of the key (sign-out), here at once."""
        try:
            self.store.end_sessions(access_key_id)
        finally:
            self.forget()

    def authenticate_header(self, authorization: str | None) -> User:
        """:meth:`authenticate` for an ``Authorization`` header (None: missing)."""
        key_id, secret = parse_authorization(authorization)
        return self.authenticate(key_id, secret)

    def authenticate_remembered(self, authorization: str | None) -> User | None:
        """:meth:`authenticate_header` without I/O, for an event loop: None when the
        key is not remembered (then :meth:`authenticate_header` must read the store).
        Malformed or wrong credentials raise as there."""
        key_id, secret = parse_authorization(authorization)
        found = self._remembered(key_id)
        if found is None:
            return None
        if not hmac.compare_digest(found.secret.encode(), secret.encode()):
            raise UnauthenticatedError(_BAD)
        return found.user

    def secret(self, access_key_id: str) -> tuple[User, str]:
        """The owner and plain secret of a key, for signature checks (SigV4);
        UnauthenticatedError when there is no such key."""
        found = self._lookup(access_key_id)
        if found is None:
            raise UnauthenticatedError(_BAD)
        return found.user, found.secret


def parse_authorization(header: str | None) -> tuple[str, str]:
    """``(access key id, secret)`` from an ``Authorization: Basic ...`` header;
    UnauthenticatedError when it is missing or not Basic."""
    if not header:
        raise UnauthenticatedError(_MISSING)
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        raise UnauthenticatedError("unsupported authorization scheme (use HTTP Basic)")
    try:
        text = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise UnauthenticatedError("malformed Basic authorization header") from None
    key_id, sep, secret = text.partition(":")
    if not sep or not key_id or not secret:
        raise UnauthenticatedError("malformed Basic authorization header")
    return key_id, secret


def authorization_header(creds: Credentials) -> str:
    """The ``Authorization`` header value a client sends."""
    pair = f"{creds.access_key_id}:{creds.secret_access_key}".encode()
    return "Basic " + base64.b64encode(pair).decode()


def credentials_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "limno" / "credentials"


def credentials(profile: str | None = None) -> Credentials | None:
    """The client's key pair: from the environment, else the credentials file (section
    ``profile``, default ``$LIMNO_PROFILE`` or ``default``); None when neither has one."""
    key_id, secret = os.environ.get(ENV_KEY_ID, ""), os.environ.get(ENV_SECRET, "")
    if key_id or secret:
        if not (key_id and secret):
            missing = ENV_SECRET if key_id else ENV_KEY_ID
            raise InvalidInputError(f"{missing} is not set (set both or neither)")
        return Credentials(key_id, secret)
    return _from_file(credentials_path(), profile or os.environ.get(ENV_PROFILE) or "default")


def _from_file(path: Path, profile: str) -> Credentials | None:
    import configparser  # clients only

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError(f"cannot read credentials file {path}: {type(e).__name__}") from e
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error:
        # its message quotes the offending line, which may hold a secret
        raise InvalidInputError(
            f"{path}: not a credentials file (expected [profile] sections with"
            " access_key_id = ... and secret_access_key = ...)"
        ) from None
    if not parser.has_section(profile):
        return None
    section = parser[profile]
    key_id = section.get("access_key_id", "").strip()
    secret = section.get("secret_access_key", "").strip()
    if not (key_id and secret):
        raise InvalidInputError(
            f"{path}: profile [{profile}] needs both access_key_id and secret_access_key"
        )
    return Credentials(key_id, secret)
