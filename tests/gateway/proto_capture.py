"""Real requests from boto3, caught before they leave: the reference the protocol layer is
tested against.

A boto3 client does everything it does for a real call (serializes, checksums, chunks,
signs) and then, in ``before-send``, hands the request to us instead of a socket: what the
verifiers see is byte for byte what a client sends. Nothing is sent anywhere.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore.config import Config

ACCESS_KEY = "AKIDLIMNOTEST"
SECRET_KEY = "limno/secret+key=42"
ENDPOINT = "https://s3.local.limno:9868"
DOMAIN = "s3.local.limno"


def secret_for(key: str) -> str | None:
    return SECRET_KEY if key == ACCESS_KEY else None


@dataclass
class Sent:
    """One request as it would go on the wire."""

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def raw_path(self) -> str:
        return urlsplit(self.url).path

    @property
    def raw_query(self) -> str:
        return urlsplit(self.url).query

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc

    def header(self, name: str) -> str | None:
        for n, v in self.headers:
            if n.lower() == name.lower():
                return v
        return None

    def with_header(self, name: str, value: str | None) -> Sent:
        """A copy with ``name`` replaced (removed when ``value`` is None)."""
        kept = [(n, v) for n, v in self.headers if n.lower() != name.lower()]
        if value is not None:
            kept.append((name, value))
        return Sent(self.method, self.url, kept, self.body)


class _Caught(Exception):
    pass


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


class Capturer:
    """A boto3 S3 client whose calls return the request they would have sent."""

    def __init__(
        self,
        *,
        signature_version: str = "s3v4",
        addressing_style: str = "path",
        endpoint: str = ENDPOINT,
        **config: Any,
    ) -> None:
        self.client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
            config=Config(
                signature_version=signature_version,
                s3={"addressing_style": addressing_style},
                retries={"max_attempts": 1},
                **config,
            ),
        )
        self._last: Sent | None = None
        self.client.meta.events.register("before-send.s3", self._catch)

    def _catch(self, request: Any, **_: Any) -> None:
        body = request.body
        if hasattr(body, "read"):
            body = body.read()
        if isinstance(body, str):
            body = body.encode("utf-8")
        headers = [(_text(n), _text(v)) for n, v in request.headers.items()]
        if "host" not in {n.lower() for n, _ in headers}:
            headers.append(("host", urlsplit(request.url).netloc))
        self._last = Sent(request.method, request.url, headers, body or b"")
        raise _Caught()

    def sent(self, call: Callable[..., Any], **params: Any) -> Sent:
        """The request ``call(**params)`` would send (``call`` a method of :attr:`client`)."""
        self._last = None
        with contextlib.suppress(_Caught):
            call(**params)
        assert self._last is not None, "the call sent nothing"
        return self._last

    def presigned(self, operation: str, params: dict[str, Any], expires: int = 3600) -> Sent:
        """A presigned URL as a GET/PUT request a browser or curl would send."""
        url = self.client.generate_presigned_url(operation, Params=params, ExpiresIn=expires)
        method = "PUT" if operation.startswith(("put", "upload")) else "GET"
        if operation.startswith("delete"):
            method = "DELETE"
        if operation.startswith("head"):
            method = "HEAD"
        return Sent(method, url, [("host", urlsplit(url).netloc)], b"")
