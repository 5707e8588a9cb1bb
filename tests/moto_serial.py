"""moto's S3 server with requests served one at a time: S3's conditional writes atomic.

moto's server is threaded, and its ``If-None-Match: *`` check and the write that
follows are two steps another request can come between: two concurrent creates of
one key can both succeed, which real S3 never allows. limno's journals rely on
exactly that guarantee, so the tests run moto behind one lock (requests still
arrive on many connections; each is handled whole before the next).

Run as ``python tests/moto_serial.py -H 127.0.0.1 -p PORT``.
"""

from __future__ import annotations

import argparse
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple


class Serialized:
    """A WSGI middleware that runs each request, body included, under one lock."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        with self.lock:
            result = self.app(environ, start_response)
            try:
                return [b"".join(result)]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        args.host,
        args.port,
        Serialized(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
