"""Run the API on uvicorn until SIGTERM or SIGINT, then stop gracefully (exit 0).

The socket is bound here, before uvicorn starts, so that ``--port 0`` works: the
ready line on stderr states the port the system picked,

    limno serve: listening on http://127.0.0.1:40331 (lake /data/lake)

and a supervisor (or a test) can wait for that line.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import uvicorn

from limno.api.local import LocalLake
from limno.errors import InvalidInputError, storage_error
from limno.server.app import create_app
from limno.server.guard import Options
from limno.server.routes.events import stop_all

if TYPE_CHECKING:
    from limno.auth.verify import Authenticator
    from limno.engines.query_limits import QueryLimits
    from limno.gateway.app import GatewayOptions

    #: the S3 gateway's settings and its listening socket (``--s3-port``)
    S3Listener = tuple[GatewayOptions, socket.socket]

__all__ = ["AUTH_CACHE_SECONDS", "authenticator", "run_on", "serve", "serving", "url_of"]


def url_of(host: str, port: int, scheme: str = "http") -> str:
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


class _Server(uvicorn.Server):
    """uvicorn that says when it is ready, and exits 0 on a stop signal (uvicorn's own
    re-raises the signal once it has shut down, which ends the process with it)."""

    def __init__(self, config: uvicorn.Config, ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._ready()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # open event streams never end by themselves: end them first, so that waiting
        # for in-flight requests (which finish) does not wait for them
        stop_all(self.config.app)
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # a server in a thread (serving) is stopped by its owner
            return
        stops = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in stops}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # connections accepted inherit it: uvicorn writes an answer's head and body
        # apart, and with Nagle on the body waits for the client's delayed ACK (40 ms)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise storage_error("listen on", f"{host}:{port}", e) from None
    return sock


#: how long a server remembers a checked key (and its owner's role and grants): a key
#: deleted, or a grant changed, by another process takes effect within this delay
AUTH_CACHE_SECONDS = 5.0


def authenticator(lake: LocalLake, warn: Callable[[str], None]) -> Authenticator:
    """The one authenticator of a server of ``lake``: InvalidInputError (before the
    server listens) when ``LIMNO_AUTH_SECRET`` is missing, too short or not the one
    the lake's keys are sealed with; a warning when the lake has no user yet."""
    from limno.auth.store import AuthStore
    from limno.auth.verify import Authenticator

    if not os.environ.get("LIMNO_AUTH_SECRET"):
        raise InvalidInputError(
            "LIMNO_AUTH_SECRET is not set: limno serve checks API keys, whose secrets are"
            " sealed with it (set the same long random value on every server of the lake,"
            " e.g. from 'openssl rand -base64 32'; or, on a trusted loopback interface"
            " only, --no-auth)"
        )
    store = AuthStore(lake.storage)
    store.check_server_secret()
    if not store.users():
        warn(
            "limno serve: warning: the lake has no users: every request will get 401;"
            f" create an admin with 'limno --lake {lake.uri} auth create-user NAME --role admin'"
        )
    return Authenticator(store, ttl=AUTH_CACHE_SECONDS)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)
    sys.stderr.flush()


def serve(
    location: str,
    host: str = "127.0.0.1",
    port: int = 9867,
    *,
    auth: bool = True,
    limits: QueryLimits | None = None,
    options: Options | None = None,
    workers: int = 1,
    gateway: GatewayOptions | None = None,
) -> None:
    """Serve the lake at ``location`` on ``host:port`` until stopped. ``auth`` false:
    no credentials asked, everything allowed (``--no-auth``: trusted loopback or
    tests only). ``limits``: the caps on queries (None: the server defaults).
    ``options``: request limits, CORS, TLS (:class:`~limno.server.guard.Options`).
    ``workers`` > 1: that many server processes share the socket
    (:mod:`limno.server.workers`). ``gateway``: serve the S3 gateway too, on its own
    socket, from the same processes (:class:`_TwoApps`).

    SIGTERM stops it gracefully: no new connections, event streams end, requests in
    flight finish (up to 30 s), then exit 0."""
    opts = options or Options()
    tls = _tls_files(opts)
    lake = LocalLake.open(location)
    if auth:  # refused here, before listening, when it cannot work
        checker: Authenticator | None = authenticator(lake, _stderr)
    else:
        checker = None
        _stderr(
            "limno serve: warning: --no-auth: every request is allowed without credentials;"
            " use it only on a trusted loopback interface or for tests"
        )
    sock = _listen(host, port)
    s3: S3Listener | None = None
    try:
        scheme = "https" if tls else "http"
        url = url_of(host, sock.getsockname()[1], scheme)
        if gateway is not None:
            s3 = (gateway, _listen(gateway.host, gateway.port))
            s3_url = url_of(gateway.host, s3[1].getsockname()[1], scheme)

        def ready() -> None:
            if s3 is not None:  # first: once the API's line is out, both listen
                print(f"limno serve: S3 gateway on {s3_url}", file=sys.stderr)
            many = f", {workers} workers" if workers > 1 else ""
            print(f"limno serve: listening on {url} (lake {lake.uri}{many})", file=sys.stderr)
            sys.stderr.flush()

        if workers > 1:
            from limno.server.workers import supervise

            supervise(workers, ready, sock, location, auth, limits, opts, s3)
        else:
            run_on(sock, lake, checker, limits, opts, ready, s3)
    finally:
        sock.close()
        if s3 is not None:
            s3[1].close()


def run_on(
    sock: socket.socket,
    lake: LocalLake,
    checker: Authenticator | None,
    limits: QueryLimits | None,
    opts: Options,
    ready: Callable[[], None],
    s3: S3Listener | None = None,
) -> None:
    """One server process on a listening socket (and the S3 gateway's), until a stop
    signal."""
    app = create_app(
        lake.uri, lake=lake, authenticator=checker, limits=limits, **_app_options(opts)
    )
    served: Any = app
    sockets = [sock]
    if s3 is not None:
        from limno.gateway.app import create_gateway

        gateway = create_gateway(lake, checker, s3[0])
        served = _TwoApps(app, gateway, s3[1].getsockname()[1])
        sockets.append(s3[1])
    config = uvicorn.Config(
        served,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=30,
        server_header=False,
        **_tls_files(opts),
    )
    # what the imports and the app made lives as long as the process: out of the
    # collector's sight, full collections while serving and the one at exit skip it
    # (the exit took 0.2-0.5 s of pure collection without this)
    gc.freeze()
    _Server(config, ready).run(sockets=sockets)


class _TwoApps:
    """The API and the S3 gateway in one uvicorn server: a connection to the gateway's
    port goes to the gateway, anything else to the API (which alone has a lifespan).
    One server, so signals, graceful shutdown, workers and TLS are the API's."""

    def __init__(self, api: Any, gateway: Any, gateway_port: int) -> None:
        self.api = api
        self.gateway = gateway
        self.gateway_port = gateway_port

    @property
    def state(self) -> Any:  # what shutdown reads (the API's event streams)
        return self.api.state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        server = scope.get("server")
        if scope["type"] == "http" and server is not None and server[1] == self.gateway_port:
            await self.gateway(scope, receive, send)
        else:
            await self.api(scope, receive, send)


@contextlib.contextmanager
def serving(
    location: str,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    auth: bool = False,
    limits: QueryLimits | None = None,
    options: Options | None = None,
) -> Iterator[str]:
    """Serve the lake at ``location`` from a thread of this process while the block
    runs; yields the server's URL. For scripts, notebooks and tests that want a
    server without a process of its own (no signal handling, no logging setup).
    Without ``auth`` (the default here) every request is allowed, as with
    ``limno serve --no-auth``: keep it on loopback."""
    lake = LocalLake.open(location)
    checker = authenticator(lake, lambda line: None) if auth else None
    opts = options or Options()
    tls = _tls_files(opts)
    app = create_app(
        location, lake=lake, authenticator=checker, limits=limits, **_app_options(opts)
    )
    sock = _listen(host, port)
    up = threading.Event()
    config = uvicorn.Config(app, log_config=None, access_log=False, server_header=False, **tls)
    server = _Server(config, up.set)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="limno-serve", daemon=True
    )
    try:
        thread.start()
        deadline = time.monotonic() + 60
        while not up.wait(0.05):
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("limno serve: the server thread did not start")
        yield url_of(host, sock.getsockname()[1], "https" if tls else "http")
    finally:
        server.should_exit = True
        thread.join()
        sock.close()


def _app_options(opts: Options) -> dict[str, Any]:
    return {
        "request_limits": opts.limits,
        "cors_origins": opts.cors_origins,
        "heartbeat": opts.heartbeat,
        "max_event_streams": opts.max_event_streams,
    }


def _tls_files(opts: Options) -> dict[str, Any]:
    """uvicorn's TLS settings (none: plain HTTP); both files must be readable."""
    if opts.tls_cert is None and opts.tls_key is None:
        return {}
    if opts.tls_cert is None or opts.tls_key is None:
        raise InvalidInputError("TLS needs both --tls-cert and --tls-key")
    for path in (opts.tls_cert, opts.tls_key):
        if not os.path.isfile(path):
            raise InvalidInputError(f"TLS file not found: {path}")
    return {"ssl_certfile": opts.tls_cert, "ssl_keyfile": opts.tls_key}
