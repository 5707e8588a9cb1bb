"""Webhook hooks (lakeFS's webhook actions): the hook event POSTed as JSON to a URL.

The request is ``POST URL`` with the event (see :mod:`limno.core.hooks`, plus
``"hook"``: the hook's name) as its JSON body, and the headers ``Content-Type:
application/json``, ``User-Agent: limno/VERSION``, ``X-Limno-Event`` (the event
type), ``X-Limno-Event-Id``, the hook's own ``headers`` and, when the hook names a
secret, ``X-Limno-Signature: sha256=HEX``: the HMAC-SHA256 of the exact body bytes
keyed with the secret. The secret is read from the environment variable the hook
names (``secret_env``) each time the hook runs, in the process that commits: the
lake stores the variable's name, never the key (a hook's configuration is readable
by everyone who can read the pool).

Any 2xx answer says yes. A non-2xx answer (redirects are not followed), no answer
within ``timeout`` seconds (default 10, for connecting and for each read), a refused
connection or a missing secret says no: a pre hook vetoes with that reason, a post
hook's failure is logged. There are no retries: a pre hook's answer is needed now,
and a post hook is a notification.

httpx (and hmac) are imported only when a webhook runs, so pools without webhooks
pay nothing for them.
"""

from __future__ import annotations

import functools
import json
import math
import os
from typing import TYPE_CHECKING, Any

from limno.core.hooks import HookFailure
from limno.errors import InvalidInputError

if TYPE_CHECKING:
    from limno.core.hooks import HookSpec

__all__ = ["DEFAULT_TIMEOUT", "SIGNATURE_HEADER", "post_event", "sign", "validate_webhook"]

DEFAULT_TIMEOUT = 10.0
SIGNATURE_HEADER = "X-Limno-Signature"
#: how much of a refusing answer's body is read, and how much of its first line is quoted
_BODY_LIMIT = 4096
_QUOTE_LIMIT = 200
#: headers limno sets itself (a hook's own headers may not replace them)
_RESERVED = frozenset(
    {
        "content-type",
        "content-length",
        "transfer-encoding",
        "host",
        "connection",
        "user-agent",
        "x-limno-event",
        "x-limno-event-id",
        SIGNATURE_HEADER.lower(),
    }
)
#: RFC 9110 token characters: what a header name may be made of
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ENV_NAME = frozenset("_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def validate_webhook(spec: HookSpec) -> None:
    """Refuse a webhook hook that could never run (checked when it is added, and when a
    pool's configuration is read)."""
    name = spec.name
    if spec.webhook is None:
        raise InvalidInputError(f"hook {name!r}: timeout, headers and secret are for webhooks")
    url = spec.webhook
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise InvalidInputError(f"hook {name!r}: a webhook URL is http:// or https://")
    if not rest or rest[0] in "/?#" or any(c.isspace() for c in url):
        raise InvalidInputError(f"hook {name!r}: {url!r} is not a webhook URL")
    if spec.timeout is not None and not (math.isfinite(spec.timeout) and spec.timeout > 0):
        raise InvalidInputError(f"hook {name!r}: a webhook's timeout is a positive number")
    for key, value in spec.headers:
        if not key or not set(key) <= _TOKEN:
            raise InvalidInputError(f"hook {name!r}: {key!r} is not a header name")
        if key.lower() in _RESERVED:
            raise InvalidInputError(f"hook {name!r}: limno sets header {key!r} itself")
        if any(c in value for c in "\r\n\0"):
            raise InvalidInputError(f"hook {name!r}: header {key!r} has a line break")
    env = spec.secret_env
    if env is not None and (not env or env[0].isdigit() or not set(env) <= _ENV_NAME):
        raise InvalidInputError(f"hook {name!r}: {env!r} is not an environment variable name")


def sign(secret: str, body: bytes) -> str:
    """The signature header's value for ``body``: what a receiver recomputes with the
    shared secret and compares (in constant time) to authenticate the request."""
    import hashlib
    import hmac

    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post_event(spec: HookSpec, data: dict[str, Any]) -> None:
    """POST ``data`` to the hook's URL; raise HookFailure (the reason) unless it says 2xx."""
    import httpx

    url = spec.webhook or ""
    shown = _redacted(url)
    body = json.dumps({**data, "hook": spec.name}, default=str).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": f"limno/{_version()}",
        "X-Limno-Event": str(data.get("event", spec.event)),
        "X-Limno-Event-Id": str(data.get("event_id", "")),
    }
    if spec.secret_env is not None:
        secret = os.environ.get(spec.secret_env)
        if not secret:
            raise HookFailure(
                f"webhook {shown}: the secret's environment variable {spec.secret_env} is not set"
            )
        headers[SIGNATURE_HEADER] = sign(secret, body)
    headers.update(spec.headers)
    timeout = spec.timeout or DEFAULT_TIMEOUT
    # plain http never uses TLS: skip loading CA certificates
    tls = url.lower().startswith("https:")
    try:
        with (
            httpx.Client(timeout=timeout, verify=tls, follow_redirects=False) as client,
            client.stream("POST", url, content=body, headers=headers) as answer,
        ):
            if answer.is_success:
                return
            said = _head_of(answer)
            status = f"{answer.status_code} {answer.reason_phrase}".strip()
    except httpx.TimeoutException:
        raise HookFailure(f"webhook {shown} timed out after {timeout:g} s") from None
    except (httpx.HTTPError, httpx.InvalidURL) as e:
        raise HookFailure(f"webhook {shown} failed: {_reason(e)}") from None
    raise HookFailure(f"webhook {shown} answered {status}" + (f": {said}" if said else ""))


def _head_of(answer: Any) -> str:
    """The first line of a refusing answer's body, cut short (the body itself can be a
    whole HTML error page)."""
    got = b""
    for chunk in answer.iter_bytes():
        got += chunk
        if len(got) >= _BODY_LIMIT:
            break
    lines = got[:_BODY_LIMIT].decode(errors="replace").strip().splitlines()
    first = lines[0].strip() if lines else ""
    return first if len(first) <= _QUOTE_LIMIT else first[:_QUOTE_LIMIT] + "..."


def _reason(e: Exception) -> str:
    """An httpx error's message, else its type (some carry no text)."""
    cause = e.__cause__ or e.__context__
    return str(e) or (str(cause) if cause else "") or type(e).__name__


def _redacted(url: str) -> str:
    """The URL without user:password (it lands in error messages and logs)."""
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    if "@" in host:
        host = "***@" + host.rpartition("@")[2]
    return f"{scheme}{sep}{host}{slash}{path}"


@functools.cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("limno")
    except PackageNotFoundError:
        return "unknown"
