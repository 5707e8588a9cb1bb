"""``--lake http://...`` pointed at something that is not limno's API (the S3
gateway's port, another web server): one error line that says so, not a bare code."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from clirunner import fail

_S3_ERROR = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidRequest</Code>'
    b"<Message>not an S3 request</Message></Error>"
)


class _Answer(BaseHTTPRequestHandler):
    """400 with an S3 error document on /s3/..., a plain text 404 elsewhere."""

    def do_GET(self) -> None:
        s3 = self.path.startswith("/s3/")
        body = _S3_ERROR if s3 else b"no such page"
        self.send_response(400 if s3 else 404)
        self.send_header("Content-Type", "application/xml" if s3 else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the CLI's error line, not the stand-in's log."""


@pytest.fixture(scope="module")
def other_service() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def test_an_s3_endpoint_is_named(other_service: str) -> None:
    result = fail("--lake", f"{other_service}/s3", "ls")
    assert result.err.startswith("error: HTTP 400 from "), result.err
    assert "an S3 endpoint answered, not a limno API server" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_another_web_server_is_named(other_service: str) -> None:
    result = fail("--lake", f"{other_service}/web", "ls")
    assert result.err.startswith("error: HTTP 404 from "), result.err
    assert "not a limno API answer (is this the server's API address?)" in result.err
    assert "Traceback" not in result.err
