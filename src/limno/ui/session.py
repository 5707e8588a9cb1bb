"""Sign-in sessions of the web UI: a signed cookie, the user behind it, CSRF tokens.

**The cookie.** Every visitor gets one (``limno_session``): a small JSON document
(the access key id once signed in and the key's session generation then, a random
nonce, an expiry) and its HMAC-SHA256,
keyed by a key derived from the server's ``LIMNO_AUTH_SECRET`` (the secret every
server of a lake shares, so any worker process accepts any worker's cookie; an
auth server without it in its environment uses a random key of its own). It
holds no secret: the key's secret stays in the auth store, and each request looks
the key up again through the server's :class:`~limno.auth.verify.Authenticator`
(which remembers a key a few seconds), so a deleted key or user, or a changed role
or grant, takes effect on the next page. HttpOnly, ``SameSite=Strict``, ``Secure``
over https, ``path=/``, 12 hours.

**Signing out revokes.** A signed cookie alone would stay valid until it expires,
so a copy of it (taken from a shared computer, a log, a proxy) would outlive the
sign-out. Each key has a session *generation* in the auth store (``sessions`` in
its record); a session carries the generation it was signed in at and holds only
while the key's is still the same. Signing out bumps the key's generation: every
UI session signed in with that key ends (in every browser: "sign out everywhere",
with one small record per key instead of a list of sessions to keep and prune).
The server that signs out sees it at once; other server processes of the lake
within the seconds they remember a key (``AUTH_CACHE_SECONDS``). Deleting the key
or its user ends its sessions the same way (the key is gone).

**CSRF.** Every POST carries a token (form field ``csrf`` or header
``X-CSRF-Token``) that is the HMAC of the session's nonce: a page of another site
can neither read it nor, with SameSite=Strict, send the cookie at all. A POST
without the right token is 403 and changes nothing. Signing in and out starts a
new nonce.

**Without auth** (``limno serve --no-auth``): the cookie is signed with a key derived
from the lake's location (there is nothing to protect but the CSRF nonce, which a
foreign page cannot read), and every visitor acts as an admin.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from limno.errors import ForbiddenError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["COOKIE", "LIFETIME", "Session", "Signer", "set_cookie"]

COOKIE = "limno_session"
#: seconds a session lasts after signing in (or after a visitor's first page)
LIFETIME = 12 * 3600
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"


@dataclass(frozen=True)
class Session:
    """One browser's session: ``key_id`` None until signed in."""

    nonce: str
    expires: int
    key_id: str | None = None
    #: the key's session generation at sign-in (see the module's docstring)
    generation: int = 0

    @classmethod
    def fresh(cls, key_id: str | None = None, generation: int = 0) -> Session:
        return cls(secrets.token_urlsafe(18), int(time.time()) + LIFETIME, key_id, generation)


class Signer:
    """Signs and checks session cookies and CSRF tokens with one key."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def for_server(cls, lake_uri: str, auth: bool) -> Signer:
        """The key of this server: from ``LIMNO_AUTH_SECRET`` (shared by every server
        process of the lake); else, with ``auth``, a random key of this process (a
        server given its secret otherwise, e.g. ``create_app`` with an AuthStore's
        own: never a key anyone could compute); else (``--no-auth``) from the lake's
        location."""
        secret = os.environ.get("LIMNO_AUTH_SECRET")
        if secret:
            base = secret.encode()
        elif auth:
            base = secrets.token_bytes(32)
        else:
            base = f"limno-ui-no-auth:{lake_uri}".encode()
        return cls(hmac.new(base, b"limno-ui-session-v1", hashlib.sha256).digest())

    def _mac(self, data: bytes) -> str:
        digest = hmac.new(self._key, data, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def dumps(self, session: Session) -> str:
        doc = {
            "n": session.nonce,
            "e": session.expires,
            "k": session.key_id,
            "g": session.generation,
        }
        payload = base64.urlsafe_b64encode(json.dumps(doc, separators=(",", ":")).encode())
        text = payload.decode().rstrip("=")
        return f"{text}.{self._mac(text.encode())}"

    def loads(self, cookie: str | None) -> Session | None:
        """The session of a cookie (None: missing, forged, malformed or expired)."""
        if not cookie or "." not in cookie:
            return None
        text, mac = cookie.rsplit(".", 1)
        if not hmac.compare_digest(mac, self._mac(text.encode())):
            return None
        try:
            doc = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
            key_id = doc["k"] and str(doc["k"])
            session = Session(str(doc["n"]), int(doc["e"]), key_id, int(doc.get("g", 0)))
        except (ValueError, KeyError, TypeError):
            return None
        return session if session.expires > time.time() else None

    def csrf(self, session: Session) -> str:
        return self._mac(b"csrf:" + session.nonce.encode())

    def check_csrf(self, session: Session | None, token: str | None) -> None:
        """ForbiddenError unless ``token`` is the session's CSRF token."""
        if session is None or not token or not hmac.compare_digest(token, self.csrf(session)):
            raise ForbiddenError(
                "the form's CSRF token is missing or not this session's: reload the page"
                " and try again (nothing was changed)"
            )


def set_cookie(request: Request, response: Response, signer: Signer, session: Session) -> None:
    """Put ``session`` in ``response``'s cookie (Secure over https)."""
    response.set_cookie(
        COOKIE,
        signer.dumps(session),
        max_age=max(0, session.expires - int(time.time())),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
