"""JSON-only routes negotiate like the table routes: an ``Accept`` header that takes no
JSON is answered 406 with a problem+json body, before the operation runs; a missing
header, ``*/*``, ``application/*``, ``application/json`` and ``application/problem+json``
(at any quality above 0, among others) get the JSON answer. A route that answers with
bytes of its own (a file's) is not refused for an ``Accept`` it names.
"""

from __future__ import annotations

import httpx
import pytest

from limno.server.formats import ARROW, CSV, NDJSON, NotAcceptableError, choose
from server_support import Served


def _get(server: Served, path: str, accept: str | None) -> httpx.Response:
    headers = {} if accept is None else {"Accept": accept}
    return httpx.get(f"{server.url}{path}", headers=headers, auth=server.auth)


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "*/*",
        "application/*",
        "application/json",
        "application/problem+json",
        "image/png, application/json;q=0.1",
        "text/html;q=0.9, */*;q=0.01",
        "application/json; charset=utf-8",
    ],
)
def test_json_routes_answer_what_takes_json(server: Served, accept: str | None) -> None:
    answer = _get(server, "/v1/pools", accept)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert isinstance(answer.json(), list)


@pytest.mark.parametrize(
    "accept",
    [
        "image/png",
        "text/csv",
        "application/json;q=0",
        "image/png, */*;q=0",
        "application/json;q=0, */*",  # the type named refuses it, whatever the wildcard says
        "application/json;q=0, application/problem+json;q=0, application/*",
    ],
)
def test_json_routes_refuse_what_takes_no_json(server: Served, accept: str) -> None:
    answer = _get(server, "/v1/pools", accept)
    assert answer.status_code == 406, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem["status"] == 406 and "application/json" in problem["detail"]


def test_a_refused_write_changes_nothing(server: Served) -> None:
    """The 406 comes before the operation: the pool is not created."""
    body = {"name": "refused_png", "kind": "files"}
    answer = httpx.post(
        f"{server.url}/v1/pools", json=body, headers={"Accept": "image/png"}, auth=server.auth
    )
    assert answer.status_code == 406, answer.text
    names = [p["name"] for p in _get(server, "/v1/pools", None).json()]
    assert "refused_png" not in names


def test_a_file_is_read_whatever_it_is(server: Served) -> None:
    """A route answering with its own bytes keeps them for ``Accept: image/png``; its
    JSON neighbour (the file's entry) refuses that header."""
    made = httpx.post(
        f"{server.url}/v1/pools", json={"name": "pictures", "kind": "files"}, auth=server.auth
    )
    assert made.status_code == 201, made.text
    base = "/v1/pools/pictures/files"
    put = httpx.put(
        f"{server.url}{base}/object",
        params={"branch": "main", "path": "a.png"},
        content=b"\x89PNG",
        headers={"Content-Type": "image/png"},
        auth=server.auth,
    )
    assert put.status_code in (200, 201), put.text
    read = _get(server, f"{base}/object?ref=main&path=a.png", "image/png")
    assert read.status_code == 200 and read.content == b"\x89PNG", read.text
    assert _get(server, f"{base}/stat?ref=main&path=a.png", "image/png").status_code == 406
    assert _get(server, f"{base}/stat?ref=main&path=a.png", None).status_code == 200


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, NDJSON),
        ("*/*", NDJSON),
        ("text/csv, */*;q=0.5", CSV),
        (f"{NDJSON};q=0, */*", ARROW),  # refused by name: the next type we write
        (f"{NDJSON};q=0, application/*;q=0.9, {CSV};q=0.5", ARROW),
        (f"*/*;q=0.1, {CSV};q=0", NDJSON),
    ],
)
def test_results_take_the_most_specific_quality(accept: str | None, chosen: str) -> None:
    """RFC 9110: a type's quality is that of the most specific range naming it, so a
    wildcard never brings back a type refused by name (results: scans, queries)."""
    assert choose(accept) == chosen


def test_a_wildcard_refused_with_every_type_is_not_acceptable() -> None:
    refused = ", ".join(f"{m};q=0" for m in (NDJSON, ARROW, "application/json", CSV))
    with pytest.raises(NotAcceptableError):
        choose(f"{refused}, application/vnd.apache.parquet;q=0, */*")
