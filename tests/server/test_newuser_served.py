"""What a new user found using a served lake over HTTP (a real ``limno serve`` with auth,
httpx as the client): Spark's master and configuration are the server's to decide on
every route that runs Spark, not only ``/v1/query`` (a ``spark_conf`` such as
``spark.driver.extraJavaOptions`` runs what it names on the server)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from clirunner import fail, ok
from limno import Lake
from server_support import Served, served_user, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    lake = str(tmp_path_factory.mktemp("newuser-served") / "lake")
    Lake.init(lake).create_pool("logs", key="ts").load([pa.table({"ts": [1, 2]})])
    proc = start_server(lake)
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.lines
        assert not [line for line in proc.lines if "Traceback" in line], proc.lines


_names = itertools.count()


def _auth(env: dict[str, str]) -> tuple[str, str]:
    return env["LIMNO_ACCESS_KEY_ID"], env["LIMNO_SECRET_ACCESS_KEY"]


def _head(server: Served) -> str:
    answer = httpx.get(f"{server.url}/v1/pools/logs/log", params={"limit": 1}, auth=server.auth)
    assert answer.status_code == 200, answer.text
    return str(answer.json()[0]["id"])


@pytest.mark.parametrize(
    "params",
    [
        {"spark_conf": json.dumps({"spark.driver.extraJavaOptions": "-Dx=1"})},
        {"spark_master": "local[1]"},
    ],
)
def test_only_an_admin_sets_sparks_settings_of_a_load(
    server: Served, params: dict[str, str]
) -> None:
    developer = served_user(server, f"dev{next(_names)}", "developer")
    before = _head(server)
    answer = httpx.post(
        f"{server.url}/v1/pools/logs/load",
        params={"name": "x.ndjson", "engine": "spark", **params},
        content=b'{"ts": 3}\n',
        auth=_auth(developer),
        timeout=60,
    )
    assert answer.status_code == 403, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert "may not set Spark's master or configuration" in answer.json()["detail"]
    assert _head(server) == before  # nothing loaded
    plain = httpx.post(  # the same load without them is the developer's to make
        f"{server.url}/v1/pools/logs/load",
        params={"name": "x.ndjson"},
        content=b'{"ts": 3}\n',
        auth=_auth(developer),
        timeout=60,
    )
    assert plain.status_code == 200, plain.text
    assert _head(server) != before


def test_a_developers_own_spark_settings_stay_on_their_machine(
    server: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``LIMNO_SPARK_MASTER`` (or a config file's Spark settings) sets the sessions of the
    client's machine: through a server the CLI sends only ``--spark-*`` flags, so a
    developer with it set still loads and queries (it was a 403 on every query)."""
    developer = served_user(server, f"dev{next(_names)}", "developer")
    for name, value in {**developer, "LIMNO_SPARK_MASTER": "local[2]"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LIMNO_SPARK_CONF", "spark.sql.shuffle.partitions=3")
    rows = tmp_path / "rows.ndjson"
    rows.write_text('{"ts": 10}\n')
    ok("--lake", server.url, "load", "-p", "logs", str(rows))
    answer = ok("--lake", server.url, "-f", "ndjson", "query", "SELECT max(ts) AS m FROM logs")
    assert answer.rows() == [{"m": 10}]
    refused = fail(
        "--lake", server.url, "load", "-p", "logs", "--spark-master", "local[1]", str(rows)
    )
    assert "may not set Spark's master or configuration" in refused.err


@pytest.mark.parametrize(("name", "ref"), [(":pools", ""), ("pools", ""), (":objects", "logs")])
def test_a_meta_table_is_named_as_in_sql(server: Served, name: str, ref: str) -> None:
    """``GET /v1/meta?name=:pools`` answered "no meta table '::pools' (try ':pools')"."""
    answer = httpx.get(
        f"{server.url}/v1/meta",
        params={"name": name, "ref": ref},
        headers={"Accept": "application/json"},
        auth=server.auth,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json(), answer.text
