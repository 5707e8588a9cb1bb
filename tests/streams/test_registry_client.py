"""The registry client's answer to a URL that is no schema registry: an error that
stops the sync, not "unknown schema id" (which ``--dead-letter`` would set every
message aside for, the sync carrying on as if all were well)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from limno.errors import LimnoError
from limno.streams.formats_avro import AvroDecoder
from limno.streams.formats_connect import Undecodable

#: a message in Confluent's wire format naming schema id 1
MESSAGE = b"\x00\x00\x00\x00\x01\x02"


def _answering(body: dict[str, object]) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            data = json.dumps(body).encode()
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def answering_404() -> Iterator[dict[str, object]]:
    """A local HTTP server answering every GET 404 with the JSON body the test sets:
    the URL of the server (``url``) is filled in."""
    body: dict[str, object] = {}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _answering(body))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"body": body, "url": f"http://127.0.0.1:{server.server_address[1]}"}
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_404_that_is_not_the_registrys_stops(answering_404: dict[str, object]) -> None:
    body = answering_404["body"]
    assert isinstance(body, dict)
    body["detail"] = "Not Found"  # what limno serve answers without /registry
    with pytest.raises(LimnoError, match=r"Not Found \(HTTP 404\) \(not a schema registry\?\)"):
        AvroDecoder(str(answering_404["url"])).parse(MESSAGE)


def test_the_registrys_unknown_id_is_undecodable(answering_404: dict[str, object]) -> None:
    body = answering_404["body"]
    assert isinstance(body, dict)
    body.update({"error_code": 40403, "message": "Schema 1 not found"})
    with pytest.raises(Undecodable, match="unknown schema id 1"):
        AvroDecoder(str(answering_404["url"])).parse(MESSAGE)
