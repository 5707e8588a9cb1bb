"""The HTTP side of the client of ``limno serve``: one place that builds the connection.

Credentials, TLS and timeouts are decided here, for every request the client makes:

- the caller's key (:func:`limno.auth.verify.credentials`: ``LIMNO_ACCESS_KEY_ID``
  and ``LIMNO_SECRET_ACCESS_KEY``, else the credentials file in the user's config
  directory) goes with every request as HTTP Basic credentials; a 401 says which
  of the two was wrong (none sent, or a key the server does not accept);
- ``LIMNO_CA_BUNDLE`` names a CA file for servers with a private certificate;
- a connection attempt gives up after 10 s (``LIMNO_CONNECT_TIMEOUT``); answers may
  take as long as the work (a compaction runs on the server while the client waits).

:class:`Connection` makes the requests: JSON answers, streamed answers (read as
they arrive by their callers: scans, events, file reads), and whole Arrow IPC
answers (lookups, meta tables, query results). A problem response (RFC 9457, see
:mod:`limno.server.problems`) becomes the
exception the server raised, with its message; a server that cannot be reached, or
that ends an answer early, is a :class:`~limno.errors.StorageError`.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import httpx

from limno import errors
from limno.api.remote_lane import EXPIRY, Answer, Lane, lane_for
from limno.auth import verify as auth_verify
from limno.errors import InvalidInputError, LimnoError, StorageError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.ipc as ipc
else:
    pa = lazy_module("pyarrow")
    ipc = lazy_module("pyarrow.ipc")

__all__ = ["ARROW", "Connection", "client", "raise_problem", "transport_errors"]

#: what the client asks results in (limno.server.formats)
ARROW = "application/vnd.apache.arrow.stream"

#: the exception of a status, for an answer that does not name one
_BY_STATUS: dict[int, type[LimnoError]] = {
    400: errors.InvalidInputError,
    404: errors.NotFoundError,
    406: errors.InvalidInputError,
    409: errors.ConflictError,
    412: errors.PreconditionFailedError,
    503: errors.StorageError,
}


def client(base_url: str) -> httpx.Client:
    """A connection pool to the server at ``base_url``, with the caller's credentials."""
    return _client(base_url, auth_verify.credentials())


def _client(base_url: str, creds: auth_verify.Credentials | None) -> httpx.Client:
    auth = None if creds is None else httpx.BasicAuth(creds.access_key_id, creds.secret_access_key)
    connect = _connect_timeout()
    # plain http never uses TLS (redirects are not followed): skip loading CA certificates,
    # a tenth of a second of every command's start
    tls = base_url.lower().startswith("https:")
    verify: Any = _tls_context(os.environ.get("LIMNO_CA_BUNDLE")) if tls else False
    return httpx.Client(
        base_url=base_url,
        auth=auth,
        verify=verify,
        timeout=httpx.Timeout(None, connect=connect),
        headers={"User-Agent": "limno"},
        trust_env=True,
        # as the lane's: well within the server's keep-alive timeout (remote_lane.EXPIRY)
        limits=httpx.Limits(
            max_connections=100, max_keepalive_connections=20, keepalive_expiry=EXPIRY
        ),
    )


def _connect_timeout() -> float:
    try:
        return float(os.environ.get("LIMNO_CONNECT_TIMEOUT") or 10)
    except ValueError:
        raise InvalidInputError("LIMNO_CONNECT_TIMEOUT must be a number of seconds") from None


def _tls_context(bundle: str | None) -> Any:
    """What httpx verifies servers with: the system's CAs, or ``LIMNO_CA_BUNDLE`` (a
    file, or a directory of hashed certificates), as an SSL context (httpx deprecates
    a path)."""
    if not bundle:
        return True
    import ssl

    try:
        if os.path.isdir(bundle):
            return ssl.create_default_context(capath=bundle)
        return ssl.create_default_context(cafile=bundle)
    except (OSError, ssl.SSLError) as e:
        raise InvalidInputError(f"LIMNO_CA_BUNDLE {bundle}: not a CA bundle ({e})") from None


def raise_problem(response: httpx.Response | Answer) -> None:
    """Raise the error a failed answer stands for (nothing for a success)."""
    if response.status_code < 400:
        return
    content = b""
    try:
        content = response.read() if isinstance(response, httpx.Response) else response.content
        doc = json.loads(content)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        doc = {}
    detail = str(doc.get("detail") or _not_a_problem(response.status_code, response.url, content))
    found = getattr(errors, str(doc.get("error", "")), None)
    if isinstance(found, type) and issubclass(found, LimnoError):
        cls: type[LimnoError] = found
    else:
        cls = _BY_STATUS.get(response.status_code, LimnoError)
    err = cls.__new__(cls)
    Exception.__init__(err, detail)
    for field in ("path", "pool", "reason"):
        if isinstance(doc.get(field), str):
            setattr(err, field, doc[field])
    retry = (response.headers.get("retry-after") or "").strip()
    if retry.isdigit():  # seconds to wait before trying again (503 of a busy server)
        err.retry_after = float(retry)  # type: ignore[attr-defined]
    raise err


def _not_a_problem(status: int, url: object, content: bytes) -> str:
    """The message of a failed answer that is no problem document: most often the
    address is another service's (the S3 gateway's port answers S3 XML errors)."""
    said = f"HTTP {status} from {url}"
    if content.lstrip().startswith(b"<") and b"<Error>" in content:
        return f"{said}: an S3 endpoint answered, not a limno API server (the gateway's port?)"
    return f"{said}: not a limno API answer (is this the server's API address?)"


@contextlib.contextmanager
def transport_errors(url: str) -> Iterator[None]:
    """Failures to talk to the server, worded as one line (StorageError)."""
    try:
        yield
    except httpx.ConnectError as e:
        raise StorageError(f"cannot reach limno server {url}: {_reason(e)}") from None
    except httpx.TimeoutException as e:
        raise StorageError(f"limno server {url} did not answer in time ({_reason(e)})") from None
    except httpx.TransportError as e:
        raise StorageError(f"limno server {url} ended an answer early: {_reason(e)}") from None


def _reason(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


class Connection:
    """Requests to one server, over one pool of connections (closed with its owner)."""

    def __init__(self, url: str) -> None:
        self.url = url
        creds = auth_verify.credentials()
        self.client = _client(url, creds)
        self._connect = _connect_timeout()
        #: small requests answered whole go this way where it sends what httpx would
        self.lane = lane_for(url)
        self._headers = {"User-Agent": "limno"}
        if creds is not None:  # the header httpx sends, built once
            self._headers["Authorization"] = auth_verify.authorization_header(creds)
        self._closer = weakref.finalize(self, _close_both, self.client, self.lane)
        #: requests sent so far, either way (a load test's count)
        self.sent = 0

    def close(self) -> None:
        self._closer()

    @contextlib.contextmanager
    def _unauthenticated(self) -> Iterator[None]:
        """A 401 worded for the client: which credentials it sent, and where they come
        from (the server's message would name the server's own files)."""
        try:
            yield
        except errors.UnauthenticatedError as e:
            if self.client.auth is None:
                raise errors.UnauthenticatedError(
                    f"{self.url}: no credentials: set {auth_verify.ENV_KEY_ID} and"
                    f" {auth_verify.ENV_SECRET} or write {auth_verify.credentials_path()}"
                ) from None
            raise errors.UnauthenticatedError(
                f"{self.url}: unknown key or wrong secret ({e})"
            ) from None

    def call(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> Any:
        """One request with a JSON body (or none); the JSON answer."""
        return json.loads(self.whole(method, path, params, body))

    def whole(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        *,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> bytes:
        """One request (a JSON ``body``, or ``content``) and its whole answer's bytes
        (raised as an error if it is one): through the :attr:`lane` when there is one."""
        if self.lane is None:
            with self.stream(method, path, params, body, content=content, headers=headers) as r:
                return r.read()
        sent = dict(self._headers)
        if body is not None:
            text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            content = text.encode()
            sent["Content-Type"] = "application/json"
        sent.update(headers or {})
        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        self.sent += 1
        with self._unauthenticated():
            answer = self.lane.exchange(method, path, query, content, sent, self._connect)
            raise_problem(answer)
        return answer.content

    @contextlib.contextmanager
    def stream(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        *,
        content: Iterable[bytes] | bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Iterator[httpx.Response]:
        """An answer whose body is read as it arrives (raised as an error if it is one)."""
        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        self.sent += 1
        with (
            transport_errors(self.url),
            self._unauthenticated(),
            self.client.stream(
                method,
                path,
                params=query,
                json=body,
                content=content,
                headers=dict(headers or {}),
            ) as response,
        ):
            raise_problem(response)
            yield response

    @contextlib.contextmanager
    def streamed(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Iterator[http.client.HTTPResponse]:
        """An answer read as it arrives through the :attr:`lane` (only where there is
        one; raised as an error if it is one): its ``readinto`` fills the caller's
        buffers straight from the socket (see :mod:`limno.api.remote_lane`)."""
        assert self.lane is not None
        sent = {**self._headers, **(headers or {})}
        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        self.sent += 1
        with (
            self._unauthenticated(),
            self.lane.streaming(method, path, query, sent, self._connect) as response,
        ):
            if response.status >= 400:
                with self.lane.errors():
                    content = response.read()
                raise_problem(Answer(response.status, response.headers, content, self.url + path))
            yield response

    def table(
        self, method: str, path: str, params: Mapping[str, Any] | None = None, body: Any = None
    ) -> pa.Table:
        """A whole Arrow answer as one table (with its schema when it has no rows).

        Read in one piece and parsed without copies: for the small answers this is
        for (lookups, meta tables, query results) the reader over a stream of chunks
        costs more than the bytes."""
        data = self.whole(method, path, params, body, headers={"Accept": ARROW})
        try:
            return ipc.open_stream(data).read_all()
        except pa.ArrowInvalid as e:  # the stream stopped short: the server failed
            raise StorageError(
                f"limno server {self.url} ended an answer early ({e}); see its log"
            ) from None


def _close_both(client: httpx.Client, lane: Lane | None) -> None:
    client.close()
    if lane is not None:
        lane.close()


def _param(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
