"""Secrets at rest: API key secrets sealed with AES-GCM under the server secret.

The S3 gateway will check SigV4 signatures, which are HMACs keyed by the secret
itself, so a server must recover each secret: it is stored encrypted, not hashed.
The encryption key is derived from ``LIMNO_AUTH_SECRET`` with scrypt (a slow,
memory-hard function, so a weak server secret is not cheap to guess from a copy of
the lake) and a random salt kept in the lake; it is derived once per process.
Every server of a lake must have the same ``LIMNO_AUTH_SECRET``.

A sealed secret is ``v1.`` and URL-safe base64 of a 12-byte random nonce and the
AES-256-GCM ciphertext with its tag. The key id is the associated data, so a sealed
secret moved to another key's record fails to open. The lake also keeps a sealed
check value, so a wrong server secret is named as such instead of failing key by
key.

``cryptography`` is imported here only: listing users or keys never loads it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import string
import threading
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from limno.errors import CorruptError, InvalidInputError

__all__ = [
    "ENV",
    "KEY_ID_PREFIX",
    "MIN_SERVER_SECRET",
    "SECRET_LENGTH",
    "SecretBox",
    "new_key_id",
    "new_kdf",
    "new_secret",
    "server_secret",
]

ENV = "LIMNO_AUTH_SECRET"
MIN_SERVER_SECRET = 16
KEY_ID_PREFIX = "LKIA"
SECRET_LENGTH = 40
_SECRET_ALPHABET = string.ascii_letters + string.digits
_VERSION = "v1."
_CHECK_CONTEXT = "limno-auth-check"
_CHECK_TEXT = "limno auth check value"
#: scrypt's cost: 16 MiB and some 50 ms, once per process and lake
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}

_derived: dict[tuple[bytes, str, int, int, int], bytes] = {}
_derived_lock = threading.Lock()


def new_key_id() -> str:
    """``LKIA`` and 16 base32 characters (80 random bits): unique without a lookup."""
    return KEY_ID_PREFIX + base64.b32encode(secrets.token_bytes(10)).decode()


def new_secret() -> str:
    """40 letters and digits (238 random bits): no character that needs quoting."""
    return "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(SECRET_LENGTH))


def server_secret(explicit: str | None = None) -> str:
    """The server secret: ``explicit``, else ``$LIMNO_AUTH_SECRET``; InvalidInputError
    when neither is set or it is too short to be a key."""
    value = explicit if explicit is not None else os.environ.get(ENV, "")
    if not value:
        raise InvalidInputError(
            f"{ENV} is not set: API key secrets are stored encrypted with it"
            " (set the same long random value wherever this lake's keys are made or checked,"
            " e.g. from 'openssl rand -base64 32')"
        )
    if len(value) < MIN_SERVER_SECRET:
        raise InvalidInputError(f"{ENV} is too short: use at least {MIN_SERVER_SECRET} characters")
    return value


def new_kdf() -> dict[str, Any]:
    """Fresh key-derivation settings for a lake: scrypt with a random salt."""
    salt = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode()
    return {"kdf": "scrypt", "salt": salt, **_SCRYPT}


def _derive(secret: str, kdf: Mapping[str, Any]) -> bytes:
    try:
        if kdf.get("kdf") != "scrypt":
            raise ValueError(f"unknown key derivation {kdf.get('kdf')!r:.40}")
        salt_text, n, r, p = str(kdf["salt"]), int(kdf["n"]), int(kdf["r"]), int(kdf["p"])
        salt = base64.urlsafe_b64decode(salt_text)
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptError(f"auth: unreadable key derivation settings ({e})") from e
    cache_key = (hashlib.sha256(secret.encode()).digest(), salt_text, n, r, p)
    with _derived_lock:
        found = _derived.get(cache_key)
        if found is None:
            found = Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(secret.encode())
            _derived[cache_key] = found
    return found


class SecretBox:
    """Seals and opens secrets with the key derived from a server secret."""

    def __init__(self, secret: str, kdf: Mapping[str, Any]) -> None:
        self._aead = AESGCM(_derive(secret, kdf))

    def seal(self, plaintext: str, context: str) -> str:
        """``plaintext`` encrypted, bound to ``context`` (the key id)."""
        nonce = secrets.token_bytes(12)
        sealed = self._aead.encrypt(nonce, plaintext.encode(), context.encode())
        return _VERSION + base64.urlsafe_b64encode(nonce + sealed).decode()

    def open(self, sealed: str, context: str) -> str:
        """The plaintext of ``sealed``; InvalidInputError when this box's server secret is
        not the one it was sealed with (or the stored value was altered)."""
        try:
            if not sealed.startswith(_VERSION):
                raise ValueError("unknown format")
            raw = base64.urlsafe_b64decode(sealed[len(_VERSION) :])
            if len(raw) < 12 + 16:
                raise ValueError("too short")
        except ValueError as e:
            raise CorruptError(f"auth: sealed secret of {context} is unreadable ({e})") from e
        try:
            return self._aead.decrypt(raw[:12], raw[12:], context.encode()).decode()
        except InvalidTag:
            raise InvalidInputError(
                f"cannot decrypt the secret of {context}: {ENV} is not the value it was"
                " encrypted with (or the stored secret was altered)"
            ) from None

    def check_value(self) -> str:
        """A sealed constant: kept in the lake to tell a wrong server secret early."""
        return self.seal(_CHECK_TEXT, _CHECK_CONTEXT)

    def verify_check(self, sealed: str) -> None:
        """InvalidInputError naming the cause when ``sealed`` was made with another secret."""
        try:
            ok = self.open(sealed, _CHECK_CONTEXT) == _CHECK_TEXT
        except InvalidInputError:
            ok = False
        if not ok:
            raise InvalidInputError(
                f"{ENV} is not the server secret this lake's keys are encrypted with"
            )
