"""Run the API on uvicorn until SIGTERM or SIGINT, then stop gracefully (exit 0).

The socket is bound here, before uvicorn starts, so that ``--port 0`` works: the
ready line on stderr states the port the system picked,

    limno serve: listening on http://127.0.0.1:40331 (lake /data/lake)

and a supervisor (or a test) can wait for that line.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator

import uvicorn

from limno.errors import storage_error
from limno.server.app import create_app

__all__ = ["serve", "serving", "url_of"]


def url_of(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


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
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise storage_error("listen on", f"{host}:{port}", e) from None
    return sock


def serve(location: str, host: str = "127.0.0.1", port: int = 9867) -> None:
    """Serve the lake at ``location`` on ``host:port`` until stopped."""
    app = create_app(location)
    sock = _listen(host, port)
    try:
        bound = sock.getsockname()[1]
        uri = app.state.lake.uri

        def ready() -> None:
            print(f"limno serve: listening on {url_of(host, bound)} (lake {uri})", file=sys.stderr)
            sys.stderr.flush()

        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=30,
            server_header=False,
        )
        _Server(config, ready).run(sockets=[sock])
    finally:
        sock.close()


@contextlib.contextmanager
def serving(location: str, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve the lake at ``location`` from a thread of this process while the block
    runs; yields the server's URL. For scripts, notebooks and tests that want a
    server without a process of its own (no signal handling, no logging setup)."""
    app = create_app(location)
    sock = _listen(host, port)
    up = threading.Event()
    config = uvicorn.Config(app, log_config=None, access_log=False, server_header=False)
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
        yield url_of(host, sock.getsockname()[1])
    finally:
        server.should_exit = True
        thread.join()
        sock.close()
